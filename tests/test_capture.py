"""Captures of a link in virtual time (selena/capture.py): the pcapng writer
and reader, the real-to-virtual conversion through a TDF timeline with
changes and a pause, naming links, the recorder thread, and (toolchain
tier) tshark reading the files and the whole lifecycle against a fake Dom0."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import time

import pytest
from fake_vif import FakeSocket, fake_receive

from selena.backends import vif_capture
from selena.capture import (
    INBOUND,
    OUTBOUND,
    CaptureSource,
    LinkRecorder,
    PcapngWriter,
    convert,
    parse_link,
    read_pcapng,
    to_virtual,
    virtual_ns,
)
from selena.errors import ExperimentError, ScenarioError

NS = 1_000_000_000
# A run's timeline as meta.json records it: TDF 10 from the start; TDF 2 at
# real 20 s (virtual 2); paused at real 30 s (virtual 7) until real 40 s,
# when it resumed at TDF 2; TDF 5 at real 50 s (virtual 12).
TIMELINE = [{"tdf": 10.0, "real_s": 0.0, "virtual_s": 0.0},
            {"tdf": 2.0, "real_s": 20.0, "virtual_s": 2.0},
            {"tdf": 2.0, "real_s": 40.0, "virtual_s": 7.0},
            {"tdf": 5.0, "real_s": 50.0, "virtual_s": 12.0}]
ORIGIN_NS = 1_700_000_000 * NS + 123_456_789


def frame(n: int, size: int = 60) -> bytes:
    """An Ethernet frame whose payload carries its number."""
    return (b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
            + struct.pack(">I", n) + bytes(size - 18))


@pytest.mark.parametrize(("real", "virtual"), [
    (-5.0, -0.5),           # before the clock started (boot): the first TDF
    (0.0, 0.0), (10.0, 1.0), (20.0, 2.0),
    (25.0, 4.5),            # TDF 2 from virtual 2
    (30.0, 7.0),            # the pause
    (35.0, 7.0),            # during it virtual time stands still
    (39.999, 7.0),
    (44.0, 9.0),            # resumed at TDF 2
    (50.0, 12.0), (60.0, 14.0),
])
def test_real_instants_map_to_virtual_ones_through_changes_and_a_pause(real, virtual):
    assert to_virtual(real, TIMELINE) == pytest.approx(virtual)


def test_virtual_ns_keeps_nanoseconds_of_epoch_instants():
    assert virtual_ns(ORIGIN_NS + 25 * NS + 10, ORIGIN_NS, TIMELINE) == ORIGIN_NS + 4_500_000_005
    assert virtual_ns(ORIGIN_NS, ORIGIN_NS, TIMELINE) == ORIGIN_NS


def test_pcapng_blocks_round_trip(tmp_path):
    path = tmp_path / "x.pcapng"
    with open(path, "wb") as f:
        w = PcapngWriter(f, name="vif7.0", description="link h1-s1")
        w.write(ORIGIN_NS, frame(1, 61), comment="from=h1", flags=INBOUND)   # padded data
        w.write(ORIGIN_NS + 1, frame(2), 1514, comment="to=h1", flags=OUTBOUND)
        w.write(ORIGIN_NS + 2, frame(3))
    raw = path.read_bytes()
    # SHB first, with the byte-order magic; every block a multiple of 4 bytes.
    assert struct.unpack_from("<II", raw) [0] == 0x0A0D0D0A
    assert struct.unpack_from("<I", raw, 8)[0] == 0x1A2B3C4D
    pos = 0
    while pos < len(raw):
        length = struct.unpack_from("<I", raw, pos + 4)[0]
        assert length % 4 == 0 and struct.unpack_from("<I", raw, pos + length - 4)[0] == length
        pos += length
    assert pos == len(raw)
    interfaces, packets = read_pcapng(path)
    assert [(i.name, i.description, i.tsresol, i.linktype) for i in interfaces] == \
        [("vif7.0", "link h1-s1", 9, 1)]
    got = list(packets)
    assert [(p.t_ns - ORIGIN_NS, p.data, p.length, p.comment, p.flags) for p in got] == [
        (0, frame(1, 61), 61, "from=h1", INBOUND),
        (1, frame(2), 1514, "to=h1", OUTBOUND),
        (2, frame(3), 60, None, None)]


def write_raw(path, stamps_real_s, comments=None):
    with open(path, "wb") as f:
        w = PcapngWriter(f, name="vif1.0", description="link h1-h2: Dom0 interface of h1")
        for i, t in enumerate(stamps_real_s):
            w.write(ORIGIN_NS + round(t * NS), frame(i),
                    comment=(comments or {}).get(i, "from=h1"), flags=INBOUND)


def test_convert_gives_virtual_timestamps_and_keeps_the_real_ones(tmp_path):
    raw, out = tmp_path / "raw.pcapng", tmp_path / "capture-h1-h2.pcapng"
    reals = [5.0, 10.0, 22.0, 35.0, 44.0, 55.0]
    write_raw(raw, reals, {3: "to=h1"})
    assert convert(raw, out, ORIGIN_NS, TIMELINE) == len(reals)
    interfaces, packets = read_pcapng(out)
    assert interfaces[0].tsresol == 9 and "virtual time" in interfaces[0].description
    got = list(packets)
    virtual = [(p.t_ns - ORIGIN_NS) / NS for p in got]
    assert virtual == pytest.approx([0.5, 1.0, 3.0, 7.0, 9.0, 13.0])
    reals_back = [(int(p.comment.split()[0].removeprefix("real=").replace(".", "")) - ORIGIN_NS)
                  / NS for p in got]
    assert reals_back == pytest.approx(reals)
    assert got[3].comment.endswith(" to=h1") and got[0].comment.endswith(" from=h1")
    assert [p.data for p in got] == [frame(i) for i in range(len(reals))]
    assert not list(tmp_path.glob(".*part"))


LINKS = [("h1", "s1"), ("s1", "h2"), ("web-1", "s1")]
NODES = ["h1", "h2", "s1", "web-1"]


@pytest.mark.parametrize(("text", "pair"), [
    ("h1,s1", ("h1", "s1")), ("s1,h1", ("s1", "h1")), ("h1-s1", ("h1", "s1")),
    (" h2 , s1 ", ("h2", "s1")), ("web-1-s1", ("web-1", "s1")), ("s1-web-1", ("s1", "web-1")),
])
def test_links_are_named_as_mininet_options_are(text, pair):
    assert parse_link(text, NODES, LINKS) == pair


@pytest.mark.parametrize(("text", "message"), [
    ("h1,h9", "capture 'h1,h9': no node named 'h9' (links: h1,s1 s1,h2 web-1,s1)"),
    ("h1,h2", "capture 'h1,h2': no link between h1 and h2 (links: h1,s1 s1,h2 web-1,s1)"),
    ("h1", "capture 'h1': name a link as NODE,NODE (links:"),
])
def test_a_bad_link_is_one_line_naming_the_links_there_are(text, message):
    with pytest.raises(ScenarioError) as info:
        parse_link(text, NODES, LINKS)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_the_recorder_streams_frames_and_converts_them_at_the_end(tmp_path):
    sock = FakeSocket()
    source = CaptureSource("vif3.0", "h1", "s1", opener=lambda iface: sock,
                           receiver=fake_receive, counter=lambda s: 2)
    recorder = LinkRecorder("h1", "s1", source,
                            tmp_path / ".capture-h1-s1.real.pcapng").start()
    sock.frames.put((ORIGIN_NS + 10 * NS, frame(0), False))
    sock.frames.put(None)                               # no timestamp: skipped
    sock.frames.put((ORIGIN_NS + 25 * NS, frame(1), True))
    deadline = time.monotonic() + 5
    while recorder.packets < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorder.raw.exists()                        # written as it goes
    info = recorder.finish(tmp_path, ORIGIN_NS, TIMELINE)
    assert sock.closed and not recorder.raw.exists()
    assert info["frames"] == 2 and info["lost_frames"] == 2 and info["interface"] == "vif3.0"
    assert info["file"] == "capture-h1-s1.pcapng"
    _, packets = read_pcapng(tmp_path / "capture-h1-s1.pcapng")
    got = list(packets)
    assert [(p.t_ns - ORIGIN_NS) / NS for p in got] == pytest.approx([1.0, 4.5])
    assert [p.flags for p in got] == [INBOUND, OUTBOUND]
    assert got[0].comment == f"real={(ORIGIN_NS + 10 * NS) // NS}.123456789 from=h1"
    assert got[1].comment.endswith(" to=h1")


def test_an_unreadable_drop_count_is_said_in_the_bundle_not_taken_for_none(tmp_path, caplog):
    """It was `except OSError: pass`: lost_frames 0, as if nothing was lost."""
    def unreadable(sock):
        raise OSError(9, "Bad file descriptor")
    source = CaptureSource("vif3.0", "h1", "s1", opener=lambda iface: FakeSocket(),
                           receiver=fake_receive, counter=unreadable)
    recorder = LinkRecorder("h1", "s1", source,
                            tmp_path / ".capture-h1-s1.real.pcapng").start()
    info = recorder.finish(tmp_path, ORIGIN_NS, TIMELINE)
    assert info["lost_frames_error"] == "the socket's drop count unreadable: Bad file descriptor"
    assert "capture of h1-s1: the socket's drop count unreadable" in caplog.text


def test_the_mininet_backend_refuses_captures_in_one_line():
    from selena.experiment import Experiment
    from selena.model import Topology

    topo = Topology("pair")
    topo.add_link(topo.add_host("h1"), topo.add_host("h2"))
    with pytest.raises(ExperimentError) as info:
        Experiment(topo, backend="mininet", capture=["h1,h2"], templates=None)
    assert "mininet backend cannot capture links" in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_link_is_refused_when_the_experiment_is_made(tmp_path):
    from selena.backends.xl import XlBackend
    from selena.experiment import Experiment
    from selena.model import Topology

    topo = Topology("pair")
    topo.add_link(topo.add_host("h1"), topo.add_host("h2"))
    backend = XlBackend(state_dir=tmp_path)
    with pytest.raises(ScenarioError, match=r"no node named 's1' \(links: h1,h2\)"):
        Experiment(topo, backend=backend, capture=["h1,s1"], templates=None)
    exp = Experiment(topo, backend=backend, capture=["h2-h1", ("h1", "h2")], templates=None)
    assert exp.captures == [("h2", "h1")]           # the same link once
    with pytest.raises(ExperimentError, match="needs a results bundle"):
        exp.deploy()


def test_the_cli_takes_capture_options():
    from selena.cli import build_parser

    args = build_parser().parse_args(["run", "--topo", "single,2", "--capture", "h1,s1",
                                      "--capture", "h2-s1"])
    assert args.capture == ["h1,s1", "h2-s1"]
    args = build_parser().parse_args(["validate", "--topo", "single,2", "--capture", "h1,s1"])
    assert args.capture == ["h1,s1"]


def test_the_cli_refuses_an_unknown_link_in_one_line_before_anything_exists(capsys):
    from selena.cli import main

    assert main(["validate", "--topo", "single,2", "--capture", "h1,s9"]) == 1
    err = capsys.readouterr().err
    assert err == "selena: error: capture 'h1,s9': no node named 's9' (links: h1,s1 h2,s1)\n"
    assert main(["validate", "--topo", "single,2", "--capture", "s1-h2"]) == 0


# -- toolchain tier: tshark, a real packet socket, the lifecycle --------------------


def tshark() -> str:
    path = shutil.which("tshark")
    assert path, "tshark is not installed: .ci/host-deps installs it (Debian's tshark)"
    return path


@pytest.mark.toolchain
def test_tshark_reads_virtual_timestamps_and_real_ones_in_comments(tmp_path):
    raw, out = tmp_path / "raw.pcapng", tmp_path / "capture-h1-h2.pcapng"
    reals = [5.0, 10.0, 22.0, 35.0, 44.0, 55.0]
    write_raw(raw, reals)
    convert(raw, out, ORIGIN_NS, TIMELINE)
    result = subprocess.run([tshark(), "-r", str(out), "-T", "fields", "-e",
                             "frame.time_epoch", "-e", "frame.comment"],
                            capture_output=True, text=True, timeout=120, check=True)
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == len(reals), result.stdout + result.stderr
    origin = ORIGIN_NS / NS
    assert [float(r[0]) - origin for r in rows] == pytest.approx(
        [0.5, 1.0, 3.0, 7.0, 9.0, 13.0], abs=1e-6)
    # tshark prints the epoch with nanoseconds: the virtual stamp exactly.
    assert rows[2][0] == "1700000003.123456789"
    assert [r[1] for r in rows] == [
        f"real={(ORIGIN_NS + round(t * NS)) // NS}.123456789 from=h1" for t in reals]


@pytest.mark.toolchain
def test_the_recorder_captures_both_directions_on_a_real_interface(tmp_path):
    """A veth pair stands for a vif: frames sent into one end are seen
    leaving it (toward the guest), frames sent from the other end arrive."""
    name = f"selcap{time.monotonic_ns() % 100000}"
    peer = name + "p"
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", peer],
                   check=True)
    try:
        for iface in (name, peer):
            subprocess.run(["ip", "link", "set", iface, "up"], check=True)
        source = CaptureSource(name, "h1", "s1", vif_capture.open_socket,
                               vif_capture.receive, vif_capture.dropped)
        recorder = LinkRecorder("h1", "s1", source, tmp_path / ".raw.pcapng").start()
        out_sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        out_sock.bind((name, 0))
        in_sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        in_sock.bind((peer, 0))
        before = time.time_ns()
        for i in range(5):
            out_sock.send(frame(i))             # leaves `name`: toward the guest
            in_sock.send(frame(100 + i))        # arrives on `name`: from the guest
        out_sock.close()
        in_sock.close()
        time.sleep(0.5)
        info = recorder.finish(tmp_path, before, [{"tdf": 10.0, "real_s": 0.0,
                                                   "virtual_s": 0.0}])
    finally:
        subprocess.run(["ip", "link", "del", name], check=False)
    _, packets = read_pcapng(tmp_path / "capture-h1-s1.pcapng")
    got = [p for p in packets if p.data[:12] == frame(0)[:12]]
    toward = [struct.unpack(">I", p.data[14:18])[0] for p in got if p.flags == OUTBOUND]
    back = [struct.unpack(">I", p.data[14:18])[0] for p in got if p.flags == INBOUND]
    assert toward == list(range(5)) and back == list(range(100, 105)), info
    # Sent within a fraction of a real second: a tenth of that in virtual time.
    assert all(0 <= p.t_ns - before < NS / 10 for p in got)
    assert info["lost_frames"] == 0 and "error" not in info


def test_a_link_captured_in_a_run_lands_in_the_bundle_in_virtual_time(
        fake_xen, tmp_path, monkeypatch):
    """The lifecycle against a fake Dom0: the vif's socket is faked, fed
    frames stamped now; the bundle's capture has them in virtual time."""
    from selena.backends.xl import XlBackend
    from selena.experiment import Experiment
    from selena.model import Topology

    sock = FakeSocket()
    opened = []
    # The xl backend's packet socket on the vif, faked.
    monkeypatch.setattr(vif_capture, "open_socket", lambda iface: opened.append(iface) or sock)
    monkeypatch.setattr(vif_capture, "receive", fake_receive)
    monkeypatch.setattr(vif_capture, "dropped", lambda s: 0)
    topo = Topology("cap", tdf=4)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    out = tmp_path / "out"
    with Experiment(topo, backend=backend, templates=None, ready_timeout=20, out=out,
                    progress=lambda msg: None) as exp:
        exp.capture("h2", "h1")
        assert len(opened) == 1 and backend.state("cap").vif_nodes[opened[0]] == "h2 eth0"
        started = exp.engine.clock.started
        marks = []
        for toward in (False, True):
            sock.frames.put((time.time_ns(), frame(len(marks)), toward))
            marks.append((exp.now(), time.monotonic() - started))
            time.sleep(0.2)
        exp.set_tdf(2)
        sock.frames.put((time.time_ns(), frame(2), False))
        marks.append((exp.now(), time.monotonic() - started))
        time.sleep(0.2)
    meta = json.loads((out / "meta.json").read_text())
    (info,) = meta["captures"]
    assert info["link"] == "h2-h1" and info["frames"] == 3 and info["node"] == "h2"
    assert not list(out.glob(".capture*"))
    _, packets = read_pcapng(out / "capture-h2-h1.pcapng")
    got = list(packets)
    origin = info["virtual_origin"]
    for p, (virtual, real) in zip(got, marks, strict=True):
        assert p.t_ns / NS - origin == pytest.approx(virtual, abs=0.02)
        assert to_virtual(real, meta["tdf_timeline"]) == pytest.approx(virtual, abs=0.02)
    assert [p.flags for p in got] == [INBOUND, OUTBOUND, INBOUND]
    assert [seg["tdf"] for seg in meta["tdf_timeline"]] == [4, 2]
    assert meta["params"] == {}         # the rest of meta.json as without a capture
