"""Mininet-HiFi's packet-spacing invariant: the check on synthetic frame
traces, the verdict it feeds, the monitor's capture windows, the xl
backend's choice of vifs, and the packet sockets on a real interface."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from selena.backends import vif_capture
from selena.backends.base import Frame, LinkCapture, LoadSample
from selena.backends.xl import XlBackend
from selena.errors import BackendError
from selena.experiment import Experiment
from selena.fidelity import (
    SPACING_ERROR_EDGES,
    LinkSpacing,
    Monitor,
    frame_identity,
    judge,
    spacing_invariant,
)
from selena.model import Topology

RATE = 1e6                   # real bits/s of the qdisc
MTU = 1514
TX = MTU * 8 / RATE          # 12.112 ms per full frame


MSS = 1448


def frame(t: float, n: int, length: int = MTU, checksum: int = 0) -> Frame:
    """The n-th TCP frame of a connection: IPv4, 32 bytes of TCP header,
    `length` bytes on the wire from sequence number n * MSS."""
    payload = length - 14 - 20 - 32
    ip = (bytes([0x45, 0]) + (20 + 32 + payload).to_bytes(2, "big") + n.to_bytes(2, "big")
          + bytes([0x40, 0, 64, 6]) + checksum.to_bytes(2, "big")
          + bytes([10, 0, 0, 2, 10, 0, 0, 1]))
    tcp = (bytes([0x14, 0x51, 0xC6, 0x30]) + (n * MSS).to_bytes(4, "big") + bytes(4)
           + bytes([0x80, 0x10]) + bytes(2) + checksum.to_bytes(2, "big") + bytes(2) + bytes(12))
    head = bytes(12) + b"\x08\x00" + ip + tcp
    return Frame(t, length, (head + bytes(96))[:96])


def segment(t: float, first: int, count: int) -> Frame:
    """What a guest hands Dom0 with segmentation offload: `count` MSS of data
    from the first-th segment's sequence number in one frame."""
    return frame(t, first, 14 + 20 + 32 + count * MSS)


def link(arrivals: list[Frame], departures: list[Frame], delay: float = 0.0) -> LinkCapture:
    return LinkCapture("vif3.0", "h1 eth0 -> h2 eth0", RATE, delay, departures, arrivals)


def test_departures_one_transmission_time_apart_from_a_busy_queue_are_on_time():
    arrivals = [frame(0.0, n) for n in range(20)]            # a burst: the queue stays busy
    departures = [frame(0.001 + n * TX, n) for n in range(20)]
    assert spacing_invariant(link(arrivals, departures)) == (19, 0, 0.0)


def test_a_departure_later_than_one_extra_transmission_time_is_late():
    arrivals = [frame(0.0, n) for n in range(6)]
    times = [n * TX for n in range(6)]
    times[3] += 1.5 * TX        # late by 1.5 packet times: beyond the allowance
    times[4] += 1.5 * TX        # then back in step with frame 3: not late itself
    times[5] += 2.4 * TX        # 0.9 packet times behind frame 4: tolerated
    spaced, late, worst = spacing_invariant(link(arrivals, [frame(t, n)
                                                            for n, t in enumerate(times)]))
    assert (spaced, late) == (5, 1)
    assert worst == pytest.approx(0.5 * TX)


def test_each_checked_departure_s_error_goes_into_the_link_s_histogram():
    """The CCDF of packet spacing error per link rate is drawn from this:
    errors in full-frame times, binned by SPACING_ERROR_EDGES."""
    arrivals = [frame(0.0, n) for n in range(6)]
    times = [n * TX for n in range(6)]
    times[3] += 1.5 * TX        # 1.5 frame times late
    times[4] += 1.5 * TX        # on time after frame 3
    times[5] += 2.4 * TX        # 0.9 behind frame 4
    capture = link(arrivals, [frame(t, n) for n, t in enumerate(times)])
    errors: list[float] = []
    assert spacing_invariant(capture, errors) == spacing_invariant(capture)
    assert errors == pytest.approx([0, 0, 1.5, 0, 0.9])
    spacing = LinkSpacing("h1 eth0 -> h2 eth0", RATE)
    spacing.add(capture)
    spacing.add(capture)
    hist = dict(zip(("<0.125", *(f"<{e:g}" for e in SPACING_ERROR_EDGES[1:]), ">=1024"),
                    spacing.error_hist, strict=True))
    assert hist["<0.125"] == 6 and hist["<1"] == 2 and hist["<2"] == 2
    assert sum(spacing.error_hist) == spacing.spaced == 10
    assert spacing.late == 2


def test_frames_from_an_idle_queue_or_arriving_before_the_window_are_not_checked():
    # Frame 1 arrives only after frame 0 left (plus the link's delay): the queue
    # was empty, so its gap says nothing about the rate. Frame 2's arrival was
    # not captured. Frame 3 was waiting behind frame 2: checked.
    delay = 0.05
    arrivals = [frame(0.0, 0), frame(0.02, 1), frame(0.07, 3)]
    departures = [frame(0.05, 0), frame(0.2, 1), frame(0.3, 2), frame(0.3 + 5 * TX, 3)]
    assert spacing_invariant(link(arrivals, departures, delay)) == (1, 1, pytest.approx(3 * TX))


def test_a_large_segment_from_the_guest_matches_each_frame_cut_from_it():
    # Two 4-MSS segments arrive; eight MTU frames leave, with checksums filled in.
    arrivals = [segment(0.0, 0, 4), segment(0.001, 4, 4)]
    departures = [frame(0.002 + n * TX, n, checksum=0xBEEF) for n in range(8)]
    departures[6] = frame(0.002 + 8 * TX, 6, checksum=0xBEEF)      # 2 packet times behind
    assert spacing_invariant(link(arrivals, departures))[:2] == (7, 1)


def test_frames_cut_from_one_segment_leave_together_and_the_next_segment_is_on_time():
    # The qdisc releases 4-MSS segments every 4 TX; Dom0 cuts each into four
    # MTU frames that leave at once. Only a burst 2 TX behind is late.
    arrivals = [segment(0.0, 4 * k, 4) for k in range(5)]
    starts = [0.0, 4 * TX, 8 * TX, 14 * TX, 18 * TX]
    departures = [frame(start, 4 * k + j) for k, start in enumerate(starts) for j in range(4)]
    spaced, late, worst = spacing_invariant(link(arrivals, departures))
    assert (spaced, late) == (19, 1) and worst == pytest.approx(TX)


def test_frames_are_identified_by_connection_and_sequence_not_checksums():
    a, b = frame(0.0, 3, checksum=1), frame(0.0, 3, checksum=2)
    assert frame_identity(a) == frame_identity(b)
    flow, seq, payload, ack = frame_identity(a)
    assert (seq, payload, ack) == (3 * MSS, MSS, 0) and len(flow) == 12
    assert frame_identity(Frame(0.0, 60, bytes(12) + b"\x08\x06" + bytes(28))) is None  # ARP


def udp(payload: bytes, checksum: int) -> Frame:
    ip = (bytes([0x45, 0, 0, 28 + len(payload), 0, 7, 0x40, 0, 64, 17, 0x12, 0x34])
          + bytes([10, 0, 1, 1, 10, 0, 1, 2]))
    head = (bytes(12) + b"\x08\x00" + ip + bytes([0x9C, 0x40, 0x14, 0x51, 0, 8 + len(payload)])
            + checksum.to_bytes(2, "big"))
    return Frame(0.0, 14 + 28 + len(payload), (head + payload)[:96])


def test_udp_frames_are_identified_by_headers_and_payload_without_the_checksum():
    assert frame_identity(udp(b"seq-1" * 10, 0)) == frame_identity(udp(b"seq-1" * 10, 0xABCD))
    assert frame_identity(udp(b"seq-1" * 10, 0)) != frame_identity(udp(b"seq-2" * 10, 0))


def test_frames_queued_before_the_window_opened_count_as_waiting():
    # A standing queue longer than the window: no departure's arrival was seen.
    departures = [frame(10.0 + n * TX, n) for n in range(10)]
    departures[5] = frame(10.0 + 7 * TX, 5)
    capture = link([], departures)
    assert spacing_invariant(capture) == (0, 0, 0.0)          # start unknown: unchecked
    capture.started = 9.0
    spaced, late, _ = spacing_invariant(capture)
    assert (spaced, late) == (9, 1)


def test_small_frames_are_due_after_their_own_time_but_allowed_a_full_frames_lateness():
    # htb releases up to about one full frame at once, so a small frame is
    # late only beyond one full frame's time (TX), not its own (0.8 ms).
    arrivals = [frame(0.0, n, 100) for n in range(3)]
    small = 100 * 8 / RATE
    departures = [frame(0.0, 0, 100), frame(small + 0.9 * TX, 1, 100),
                  frame(2 * small + 0.9 * TX + 1.1 * TX, 2, 100)]
    spaced, late, worst = spacing_invariant(link(arrivals, departures))
    assert (spaced, late) == (2, 1) and worst == pytest.approx(0.1 * TX)


def test_a_busy_link_with_many_late_departures_makes_the_run_degraded():
    samples = [LoadSample(real=float(t), dom0_vcpu_s=[t * 0.1]) for t in range(5)]
    late = LinkSpacing("h1 eth0 -> h2 eth0", RATE, windows=3, departures=900, spaced=800,
                       late=96)
    few = LinkSpacing("h2 eth0 -> h1 eth0", RATE, windows=3, departures=40, spaced=20, late=20)
    fine = LinkSpacing("h1 eth1 -> h3 eth0", RATE, windows=3, departures=900, spaced=800,
                       late=40)
    report = judge(samples, spacing={"vif3.0": late, "vif4.0": few, "vif3.1": fine})
    assert report.verdict == "degraded"
    assert report.reasons == ["link h1 eth0 -> h2 eth0: 12% of 800 departures from a busy "
                              "queue late by more than one full-size packet time"]
    data = report.to_json()
    assert data["spacing"]["vif3.0"]["late_share"] == 0.12
    assert data["spacing"]["vif4.0"]["spaced"] == 20


def late_link() -> list[LinkCapture]:
    arrivals = [frame(0.0, n) for n in range(150)]
    return [link(arrivals, [frame(n * 3 * TX, n) for n in range(150)])]


def spacing_monitor(capture) -> Monitor:
    return Monitor(lambda: LoadSample(real=time.monotonic(), dom0_vcpu_s=[0.0]),
                   interval_s=0.05, capture=capture, window_s=0.01, every_s=0.05).start()


def wait_for(windows: list, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(windows) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_monitor_checks_spacing_in_windows_and_goes_on_past_a_failed_one():
    """A window that fails (a vif gone for a moment) is counted and named;
    the check went on (it stopped for the rest of the run)."""
    windows = []

    def capture(seconds: float) -> list[LinkCapture]:
        windows.append(seconds)
        if len(windows) == 2:
            raise BackendError("vif3.0: No such device")
        return late_link()

    monitor = spacing_monitor(capture)
    wait_for(windows, 4)
    report = monitor.stop()
    assert windows[:4] == [0.01] * 4
    spacing = report.spacing["vif3.0"]
    assert spacing.windows == len(windows) - 1 >= 3 and spacing.late == spacing.spaced
    assert (report.spacing_failed_windows, report.spacing_failure) == (
        1, "vif3.0: No such device")
    assert report.spacing_note == ""
    assert report.verdict == "degraded" and "100% of" in report.reasons[0]
    assert (f"; {spacing.spaced} departures checked for spacing (1 capture window(s) failed: "
            "vif3.0: No such device); ") in report.line()
    data = report.to_json()
    assert (data["spacing_failed_windows"], data["spacing_failure"]) == (
        1, "vif3.0: No such device")


def test_failed_windows_do_not_stop_the_check_whatever_their_number():
    """A node down for a long while: its windows fail, and once it is back
    the check takes it up again."""
    windows = []

    def capture(seconds: float) -> list[LinkCapture]:
        windows.append(seconds)
        if 1 < len(windows) < 8:
            raise BackendError(f"failure {len(windows)}")
        return late_link()

    monitor = spacing_monitor(capture)
    wait_for(windows, 9)
    report = monitor.stop()
    assert len(windows) >= 9
    assert report.spacing["vif3.0"].windows == len(windows) - 6
    assert (report.spacing_failed_windows, report.spacing_failure) == (6, "failure 2")


def test_a_run_whose_every_window_failed_was_not_checked_and_says_why():
    windows = []

    def capture(seconds: float) -> list[LinkCapture]:
        windows.append(seconds)
        raise BackendError("vif3.0: No such device")

    monitor = spacing_monitor(capture)
    wait_for(windows, 3)
    report = monitor.stop()
    assert report.spacing == {} and report.verdict == "ok"
    assert report.spacing_note == "capture failed: vif3.0: No such device"
    assert report.spacing_failed_windows == len(windows) >= 3


def test_no_capture_window_opens_while_a_restart_holds_the_vifs():
    """A node's restart takes its vifs away and brings them back under the
    same names: a window opened meanwhile failed and stopped the check for
    the rest of the run."""
    windows = []

    def capture(seconds: float) -> list[LinkCapture]:
        windows.append(time.monotonic())
        return []

    monitor = Monitor(lambda: LoadSample(real=time.monotonic(), dom0_vcpu_s=[0.0]),
                      interval_s=0.05, capture=capture, window_s=0.01,
                      every_s=0.03).start()
    deadline = time.monotonic() + 10
    while not windows and time.monotonic() < deadline:
        time.sleep(0.01)
    with monitor.capture_held:
        held_from = time.monotonic()
        time.sleep(0.3)
        held_to = time.monotonic()
    while len(windows) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    report = monitor.stop()
    assert windows and not any(held_from < t < held_to for t in windows), windows
    assert any(t > held_to for t in windows)
    assert report.spacing_note == "no rate-limited link without jitter"


def test_a_run_too_short_for_a_window_says_so():
    monitor = Monitor(lambda: LoadSample(real=time.monotonic()), interval_s=0.05,
                      capture=lambda s: [], window_s=1.0, every_s=8.0).start()
    report = monitor.stop()
    assert report.spacing == {} and \
        report.spacing_note == "the run ended before the first capture window"


def star() -> Topology:
    topo = Topology("spaced", tdf=4)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    h3 = topo.add_host("h3", ip="10.0.1.3/24")
    h1.add_interface(1, ip="10.0.1.1/24")
    topo.add_link(h1, h2, rate="8Mbit", delay="5ms")
    topo.add_link((h1, 1), h3, rate="8Mbit", delay="5ms", jitter="1ms")
    return topo


def test_the_xl_backend_captures_rate_limited_vifs_and_their_peers(fake_xen, tmp_path,
                                                                      monkeypatch):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    asked = []

    def fake_capture(vifs, seconds):
        asked.append((list(vifs), seconds))
        return {vif: vif_capture.VifFrames(outgoing=[frame(1.0, 1)],
                                           incoming=[frame(0.5, 1)], dropped=1)
                for vif in vifs}

    monkeypatch.setattr(vif_capture, "capture", fake_capture)
    monkeypatch.setattr(XlBackend, "_vif_present", lambda self, vif: True)
    with Experiment(star(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor=False) as exp:
        state = backend.state("spaced")
        captures = backend.capture_links("spaced", 0.5)
        exp.cmd("h1", "true")
    vif = {node: v for v, node in state.vif_nodes.items()}
    # The jittery link (h1 eth1 - h3) is left out: netem reorders its frames.
    # The window is lengthened by the link's real one-way delay (5 ms x TDF 4).
    assert asked == [(sorted([vif["h1 eth0"], vif["h2 eth0"]]), pytest.approx(0.52))]
    by_label = {c.label: c for c in captures}
    assert set(by_label) == {"h2 eth0 -> h1 eth0", "h1 eth0 -> h2 eth0"}
    into_h2 = by_label["h1 eth0 -> h2 eth0"]
    assert into_h2.vif == vif["h2 eth0"]
    assert into_h2.rate_bps == 2e6 and into_h2.delay_s == pytest.approx(0.02)   # TDF 4
    assert into_h2.departures == [frame(1.0, 1)] and into_h2.arrivals == [frame(0.5, 1)]
    assert into_h2.dropped == 2 and into_h2.started == 0.0


def test_a_crashed_nodes_links_are_left_out_of_a_window_and_all_gone_is_a_failure(
        fake_xen, tmp_path, monkeypatch):
    """h2 crashed: the links into and out of it have a vif gone and are
    left out; h3 - h4 are captured as before. With every vif gone the
    window fails, naming them."""
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    topo = Topology("spaced", tdf=4)
    hosts = [topo.add_host(f"h{k}", ip=f"10.0.0.{k}/24") for k in range(1, 5)]
    topo.add_link(hosts[0], hosts[1], rate="8Mbit")
    topo.add_link(hosts[2], hosts[3], rate="8Mbit")
    asked = []

    def fake_capture(vifs, seconds):
        asked.append(sorted(vifs))
        return {vif: vif_capture.VifFrames() for vif in vifs}

    monkeypatch.setattr(vif_capture, "capture", fake_capture)
    gone: set[str] = set()
    monkeypatch.setattr(XlBackend, "_vif_present", lambda self, vif: vif not in gone)
    with Experiment(topo, backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor=False):
        state = backend.state("spaced")
        vif = {node: v for v, node in state.vif_nodes.items()}
        gone.add(vif["h2 eth0"])
        captures = backend.capture_links("spaced", 0.5)
        gone.update(state.vif_nodes)
        with pytest.raises(BackendError, match=f"vifs of spaced: .*{vif['h4 eth0']} not "
                                               "present"):
            backend.capture_links("spaced", 0.5)
    assert asked == [sorted([vif["h3 eth0"], vif["h4 eth0"]])]
    assert {c.label for c in captures} == {"h3 eth0 -> h4 eth0", "h4 eth0 -> h3 eth0"}


def test_a_backend_without_capture_is_judged_without_the_check():
    monitor = Monitor(lambda: LoadSample(real=time.monotonic()), interval_s=0.05).start()
    time.sleep(0.2)
    report = monitor.stop()
    assert report.spacing_note == "this backend cannot capture frames"
    assert report.spacing == {} and report.verdict == "ok"
    assert "; spacing not checked: this backend cannot capture frames; " in report.line()


def test_a_failed_capture_is_named_and_decides_nothing(fake_xen, tmp_path):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(star(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor_interval=0.2) as exp:
        exp.sleep(1.0)
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    # The fake host has no vifs: the capture fails, is named, and decides nothing.
    assert fidelity["spacing_note"].startswith("capture failed: capturing frames on the vifs "
                                               "of spaced: ")
    assert fidelity["verdict"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="packet sockets need root (CI runs as root)")
def test_packet_sockets_see_frames_leave_and_arrive_with_kernel_timestamps():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    port = receiver.getsockname()[1]
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send() -> None:
        time.sleep(0.1)
        for n in range(5):
            sender.sendto(b"selena-%d" % n + b"x" * 1000, ("127.0.0.1", port))

    thread = threading.Thread(target=send)
    thread.start()
    before = time.time()
    frames = vif_capture.capture(["lo"], 0.5)["lo"]
    thread.join()
    sender.close()
    receiver.close()
    ours = [f for f in frames.outgoing if port.to_bytes(2, "big") in f.key[34:38]]
    back = [f for f in frames.incoming if port.to_bytes(2, "big") in f.key[34:38]]
    # On loopback each frame leaves and comes back in: same first bytes both ways.
    assert len(ours) == 5 and [f.key for f in ours] == [f.key for f in back]
    assert all(f.length == 14 + 20 + 8 + 1008 for f in ours)
    assert len(ours[0].key) == vif_capture.SNAP_BYTES
    assert all(before < f.t < time.time() for f in ours)
    assert [f.t for f in ours] == sorted(f.t for f in ours)
    assert frames.dropped == 0 and before <= frames.started <= ours[0].t


def test_many_late_links_are_one_reason_naming_the_worst():
    samples = [LoadSample(real=float(t), dom0_vcpu_s=[t * 0.1]) for t in range(5)]
    spacing = {f"vif{k}.0": LinkSpacing(f"s{k} eth0 -> s{k + 1} eth0", RATE, windows=3,
                                        departures=300, spaced=250, late=25 + 5 * k)
               for k in range(1, 6)}
    spacing["vif9.0"] = LinkSpacing("h1 eth0 -> s1 eth1", RATE, windows=3, departures=300,
                                    spaced=250, late=5)
    report = judge(samples, spacing=spacing)
    assert report.verdict == "degraded"
    (reason,) = report.reasons
    assert reason.startswith("links: 5 of 6 checked had 12%-20% of their departures")
    assert "(worst s5 eth0 -> s6 eth0, s4 eth0 -> s5 eth0, s3 eth0 -> s4 eth0;" in reason
    assert "s1 eth0" not in reason
