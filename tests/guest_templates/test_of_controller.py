"""The of-controller guest's os-ken app against a real Open vSwitch.

No mocks: the controller runs from exactly the site-packages build-site.sh
produces for the guest (cached under $SELENA_CACHE/of-controller by the hash of
requirements.txt and build-site.sh), and a private ovsdb-server + ovs-vswitchd
sandbox in a temporary directory (never the system's OVS) provides bridges
with netdev-dummy ports, into which the tests inject packets with
`ovs-appctl netdev-dummy/receive` and whose output they read back from tx pcap
files. Every process started here is stopped by its PID, also on failure.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "guest-templates" / "of-controller"
APP = TEMPLATE / "apps" / "selena_learning.py"
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
PYTHON = os.environ.get("SELENA_OFCTL_PYTHON", "/usr/bin/python3")
TIMEOUT = 30.0  # generous: the machine runs QEMU labs at the same time

H1_MAC, H2_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02"
H1_IP, H2_IP = "10.0.0.1", "10.0.0.2"
BROADCAST = "ff:ff:ff:ff:ff:ff"

T = TypeVar("T")


# --- helpers -------------------------------------------------------------------


def run(argv: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def wait_for(what: str, check: Callable[[], T], timeout: float = TIMEOUT) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL, a daemon we started (by its PID only; not our child)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    """Whether some socket listens on TCP `port` (from /proc, without connecting)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                return True
    return False


def tcp_packet(in_port: int, sport: int, dport: int = 5001) -> str:
    return (
        f"in_port({in_port}),eth(src={H1_MAC},dst={H2_MAC}),eth_type(0x0800),"
        f"ipv4(src={H1_IP},dst={H2_IP},proto=6,tos=0,ttl=64,frag=no),"
        f"tcp(src={sport},dst={dport})"
    )


def udp_packet(in_port: int, sport: int, dport: int) -> str:
    return (
        f"in_port({in_port}),eth(src={H1_MAC},dst={H2_MAC}),eth_type(0x0800),"
        f"ipv4(src={H1_IP},dst={H2_IP},proto=17,tos=0,ttl=64,frag=no),"
        f"udp(src={sport},dst={dport})"
    )


def arp_request(in_port: int) -> str:
    return (
        f"in_port({in_port}),eth(src={H1_MAC},dst={BROADCAST}),eth_type(0x0806),"
        f"arp(sip={H1_IP},tip={H2_IP},op=1,sha={H1_MAC},tha=00:00:00:00:00:00)"
    )


def arp_reply(in_port: int) -> str:
    return (
        f"in_port({in_port}),eth(src={H2_MAC},dst={H1_MAC}),eth_type(0x0806),"
        f"arp(sip={H2_IP},tip={H1_IP},op=2,sha={H2_MAC},tha={H1_MAC})"
    )


@dataclass(frozen=True)
class Flow:
    fields: dict[str, str]  # match and properties, e.g. {"tcp": "", "tp_src": "40000"}
    actions: str
    n_packets: int

    def __getitem__(self, key: str) -> str:
        return self.fields[key]


def parse_flows(dump: str) -> list[Flow]:
    flows = []
    for line in dump.splitlines():
        line = line.strip()
        if " actions=" not in line:
            continue
        left, actions = line.split(" actions=", 1)
        fields: dict[str, str] = {}
        for token in left.replace(",", " ").split():
            key, _, value = token.partition("=")
            fields[key] = value
        flows.append(Flow(fields, actions, int(fields.get("n_packets", "0"))))
    return flows


@dataclass(frozen=True)
class Frame:
    dst: str
    src: str
    ethertype: int
    ip_proto: int | None = None
    sport: int | None = None
    dport: int | None = None


def read_pcap(path: Path) -> list[Frame]:
    """Ethernet frames of a classic little- or big-endian pcap file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if len(data) < 24:
        return []
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    frames, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off : off + 16])
        pkt = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        if len(pkt) < 14:
            continue

        def mac(b: bytes) -> str:
            return ":".join(f"{x:02x}" for x in b)

        ethertype = int.from_bytes(pkt[12:14], "big")
        frame = Frame(mac(pkt[0:6]), mac(pkt[6:12]), ethertype)
        if ethertype == 0x0800 and len(pkt) >= 34:
            ihl = (pkt[14] & 0x0F) * 4
            proto = pkt[23]
            l4 = 14 + ihl
            if proto in (6, 17) and len(pkt) >= l4 + 4:
                sport, dport = struct.unpack("!HH", pkt[l4 : l4 + 4])
                frame = Frame(frame.dst, frame.src, ethertype, proto, sport, dport)
            else:
                frame = Frame(frame.dst, frame.src, ethertype, proto)
        frames.append(frame)
    return frames


# --- the controller's site-packages, as the guest gets them ----------------------


@pytest.fixture(scope="session")
def site() -> Path:
    """build-site.sh's output, cached by the hash of its inputs."""
    key = hashlib.sha256()
    for name in ("requirements.txt", "build-site.sh"):
        key.update((TEMPLATE / name).read_bytes())
    cache = Path(os.environ.get("SELENA_CACHE", Path.home() / ".cache" / "selena"))
    out = cache / "of-controller" / key.hexdigest()[:16]
    if (out / ".complete").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        done = subprocess.run(
            ["sh", str(TEMPLATE / "build-site.sh"), str(tmp)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHON": PYTHON},
        )
        if done.returncode != 0:
            pytest.fail(f"build-site.sh failed:\n{done.stdout}{done.stderr}", pytrace=False)
        (tmp / ".complete").write_text(done.stdout)
        shutil.rmtree(out, ignore_errors=True)
        try:
            tmp.rename(out)
        except OSError:
            if not (out / ".complete").exists():  # else a concurrent run won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# --- controller ----------------------------------------------------------------


@dataclass
class Controller:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        # our child: wait() reaps it (a zombie would still answer kill(pid, 0))
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start_controller(
    site: Path, workdir: Path, extra_args: Sequence[str] = (), env: dict[str, str] | None = None
) -> Controller:
    port = free_port()
    log = workdir / f"osken-{port}.log"
    argv = [
        str(site / "bin" / "osken-manager"),
        "--ofp-listen-host", "127.0.0.1",
        "--ofp-tcp-listen-port", str(port),
        *extra_args,
        str(APP),
    ]  # fmt: skip
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHON": PYTHON, **(env or {})},
        )
    ctl = Controller(port, proc, log)

    def ready() -> bool:
        if not ctl.alive():
            raise AssertionError(f"osken-manager exited:\n{ctl.output()[-4000:]}")
        return listening(port)

    try:
        wait_for(f"osken-manager to listen on {port}", ready)
    except BaseException:
        ctl.stop()
        raise
    return ctl


# --- Open vSwitch sandbox ------------------------------------------------------------


@dataclass
class Bridge:
    name: str
    ovs: OVS
    version: str = "OpenFlow13"

    def port(self, n: int) -> str:
        return f"{self.name}p{n}"

    def pcap(self, n: int) -> Path:
        return self.ovs.dir / f"{self.port(n)}.pcap"

    def receive(self, port: int, packet: str) -> None:
        self.ovs.appctl("netdev-dummy/receive", self.port(port), packet)

    def flows(self) -> list[Flow]:
        return parse_flows(self.ovs.ofctl("-O", self.version, "dump-flows", f"unix:{self.mgmt}"))

    def per_flow_rules(self) -> list[Flow]:
        return [f for f in self.flows() if f.fields.get("priority", "32768") != "0"]

    def table_miss(self) -> list[Flow]:
        return [
            f
            for f in self.flows()
            if f.fields.get("priority") == "0" and f.actions == "CONTROLLER:65535"
        ]

    def tx_packets(self, n: int) -> int:
        dump = self.ovs.ofctl("-O", self.version, "dump-ports", f"unix:{self.mgmt}", str(n))
        after = dump.split("tx pkts=", 1)[1]
        return int(after.split(",", 1)[0])

    @property
    def mgmt(self) -> Path:
        return self.ovs.dir / f"{self.name}.mgmt"


@dataclass
class OVS:
    dir: Path
    pids: list[int] = field(default_factory=list)
    bridges: int = 0

    @property
    def env(self) -> dict[str, str]:
        d = str(self.dir)
        return {**os.environ, "OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d}

    def vsctl(self, *args: str) -> str:
        return run(["ovs-vsctl", f"--db=unix:{self.dir}/db.sock", "--timeout=30", *args], self.env)

    def appctl(self, *args: str) -> str:
        return run(["ovs-appctl", "-t", str(self.dir / "vswitchd.ctl"), *args], self.env)

    def ofctl(self, *args: str) -> str:
        return run(["ovs-ofctl", *args], self.env)

    def start(self) -> None:
        d = self.dir
        run(["ovsdb-tool", "create", f"{d}/conf.db", str(OVS_SCHEMA)], self.env)
        for argv, pidfile in (
            (
                ["ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
                 f"--unixctl={d}/ovsdb.ctl", f"--log-file={d}/ovsdb.log"],
                d / "ovsdb.pid",
            ),
            (
                ["ovs-vswitchd", f"unix:{d}/db.sock", "--enable-dummy",
                 f"--unixctl={d}/vswitchd.ctl", f"--log-file={d}/vswitchd.log"],
                d / "vswitchd.pid",
            ),
        ):  # fmt: skip
            run([*argv, f"--pidfile={pidfile}", "--detach", "-vconsole:off"], self.env)
            self.pids.append(int(pidfile.read_text().strip()))

    def stop(self) -> None:
        for pid in reversed(self.pids):
            stop_pid(pid)
        self.pids.clear()

    def add_bridge(self, controller: Controller, version: str = "OpenFlow13") -> Bridge:
        self.bridges += 1
        br = Bridge(f"br{self.bridges}", self, version)
        args = [
            "add-br", br.name, "--", "set", "bridge", br.name, "datapath_type=netdev",
            f"protocols={version}", "fail-mode=secure",
            f"other-config:datapath-id={self.bridges:016x}",
            # no hidden in-band flows in table 0 (they would count against flow_limit)
            "other-config:disable-in-band=true",
        ]  # fmt: skip
        for n in (1, 2, 3):
            args += [
                "--", "add-port", br.name, br.port(n),
                "--", "set", "interface", br.port(n), "type=dummy", f"ofport_request={n}",
                f"options:tx_pcap={br.pcap(n)}",
            ]  # fmt: skip
        self.vsctl(*args)
        self.vsctl("set-controller", br.name, f"tcp:127.0.0.1:{controller.port}")
        return br

    def del_bridge(self, br: Bridge) -> None:
        self.vsctl("--if-exists", "del-br", br.name)


def connected(br: Bridge, controller: Controller) -> None:
    """Wait until the controller has configured the switch."""
    if br.version == "OpenFlow13":
        wait_for(f"{br.name}'s table-miss entry", br.table_miss)
    else:
        wait_for(
            f"{br.name} connected",
            lambda: f"switch {int(br.name[2:]):016x} connected" in controller.output(),
        )


@pytest.fixture(scope="session")
def ovs() -> Iterator[OVS]:
    for tool in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: apt-get install openvswitch-switch", pytrace=False)
    # Short path: the unix sockets inside must fit in 108 bytes.
    sandbox = OVS(Path(tempfile.mkdtemp(prefix="selena-ovs-")))
    try:
        sandbox.start()
        yield sandbox
    finally:
        sandbox.stop()
        shutil.rmtree(sandbox.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def controller(site: Path, ovs: OVS) -> Iterator[Controller]:
    ctl = start_controller(site, ovs.dir)
    try:
        yield ctl
    finally:
        ctl.stop()


@pytest.fixture
def bridge(ovs: OVS, controller: Controller) -> Iterator[Bridge]:
    br = ovs.add_bridge(controller)
    try:
        connected(br, controller)
        yield br
    finally:
        ovs.del_bridge(br)


def learn_both_macs(br: Bridge) -> None:
    br.receive(1, arp_request(1))  # h1 on port 1, broadcast: flooded
    wait_for("the ARP request flooded to port 2", lambda: read_pcap(br.pcap(2)))
    br.receive(2, arp_reply(2))  # h2 on port 2, unicast to the now known h1
    wait_for(
        "the ARP reply forwarded to port 1",
        lambda: any(f.ethertype == 0x0806 for f in read_pcap(br.pcap(1))),
    )


def tcp_frames(br: Bridge, port: int, sport: int) -> list[Frame]:
    return [f for f in read_pcap(br.pcap(port)) if f.ip_proto == 6 and f.sport == sport]


# --- tests -------------------------------------------------------------------------


def test_table_miss_entry_sends_whole_packets_to_the_controller(bridge: Bridge) -> None:
    (miss,) = bridge.table_miss()
    assert miss.fields["priority"] == "0"
    assert miss.actions == "CONTROLLER:65535"  # OFPCML_NO_BUFFER
    assert bridge.per_flow_rules() == []


def test_arp_is_forwarded_without_any_flow_entry(bridge: Bridge) -> None:
    learn_both_macs(bridge)
    request = [f for f in read_pcap(bridge.pcap(2)) if f.ethertype == 0x0806]
    assert [(f.src, f.dst) for f in request] == [(H1_MAC, BROADCAST)]
    # flooded to every other port, not back to port 1
    assert [f.dst for f in read_pcap(bridge.pcap(3))] == [BROADCAST]
    reply = [f for f in read_pcap(bridge.pcap(1)) if f.ethertype == 0x0806]
    assert [(f.src, f.dst) for f in reply] == [(H2_MAC, H1_MAC)]
    assert read_pcap(bridge.pcap(3)) == request  # the unicast reply did not flood
    time.sleep(0.5)  # a late flow_mod would have shown up by now
    assert bridge.per_flow_rules() == []


def test_tcp_flow_gets_an_exact_entry_and_is_forwarded(bridge: Bridge) -> None:
    learn_both_macs(bridge)
    tx_before = bridge.tx_packets(2)
    bridge.receive(1, tcp_packet(1, sport=40000))
    (flow,) = wait_for("the per-flow entry", bridge.per_flow_rules)
    assert "tcp" in flow.fields
    assert flow["in_port"] == "1"
    assert (flow["nw_src"], flow["nw_dst"]) == (H1_IP, H2_IP)
    assert (flow["tp_src"], flow["tp_dst"]) == ("40000", "5001")
    assert flow["idle_timeout"] == "10"
    assert flow["priority"] == "100"
    assert "hard_timeout" not in flow.fields
    assert flow.actions == "output:2"
    # the first packet went out through the controller's packet_out
    wait_for("the SYN on port 2", lambda: tcp_frames(bridge, 2, 40000))
    assert tcp_frames(bridge, 3, 40000) == []
    assert bridge.tx_packets(2) == tx_before + 1
    # the next packet of the flow is switched by the entry, not the controller
    bridge.receive(1, tcp_packet(1, sport=40000))
    wait_for("the second packet on port 2", lambda: len(tcp_frames(bridge, 2, 40000)) == 2)
    wait_for("the entry to count it", lambda: bridge.per_flow_rules()[0].n_packets == 1)


def test_every_tcp_flow_gets_its_own_entry(bridge: Bridge) -> None:
    learn_both_macs(bridge)
    bridge.receive(1, tcp_packet(1, sport=40001))
    bridge.receive(1, tcp_packet(1, sport=40002))
    bridge.receive(1, udp_packet(1, sport=5353, dport=53))
    wait_for("three per-flow entries", lambda: len(bridge.per_flow_rules()) == 3)
    flows = bridge.per_flow_rules()
    tcp = sorted(f["tp_src"] for f in flows if "tcp" in f.fields)
    assert tcp == ["40001", "40002"]
    (udp,) = [f for f in flows if "udp" in f.fields]
    assert (udp["tp_src"], udp["tp_dst"], udp["idle_timeout"]) == ("5353", "53", "10")
    for sport in (40001, 40002):
        wait_for(f"flow {sport} on port 2", functools.partial(tcp_frames, bridge, 2, sport))


def test_unknown_destination_is_flooded_without_an_entry(bridge: Bridge) -> None:
    bridge.receive(1, tcp_packet(1, sport=40003))  # h2's MAC not learnt yet
    wait_for("the flood to port 2", lambda: tcp_frames(bridge, 2, 40003))
    wait_for("the flood to port 3", lambda: tcp_frames(bridge, 3, 40003))
    time.sleep(0.5)
    assert bridge.per_flow_rules() == []


def test_full_table_is_logged_and_the_controller_keeps_forwarding(
    ovs: OVS, bridge: Bridge, controller: Controller
) -> None:
    # room for the table-miss entry and one flow, as a switch with a tiny TCAM
    ovs.vsctl(
        "--", "--id=@ft", "create", "Flow_Table", "flow_limit=2", "overflow_policy=refuse",
        "--", "set", "bridge", bridge.name, "flow_tables:0=@ft",
    )  # fmt: skip
    learn_both_macs(bridge)
    bridge.receive(1, tcp_packet(1, sport=41000))
    wait_for("the first entry", bridge.per_flow_rules)
    bridge.receive(1, tcp_packet(1, sport=41001))
    wait_for(
        "the TABLE_FULL error in the controller's log",
        lambda: "OFPFMFC_TABLE_FULL" in controller.output(),
    )
    log = controller.output()
    assert "tcp 10.0.0.1:41001 -> 10.0.0.2:5001" in log, log[-2000:]
    # the packet still went out, the controller is still up and still serving
    wait_for("the rejected flow's packet on port 2", lambda: tcp_frames(bridge, 2, 41001))
    assert controller.alive()
    bridge.receive(1, tcp_packet(1, sport=41002))
    wait_for("a later flow's packet on port 2", lambda: tcp_frames(bridge, 2, 41002))
    assert [f["tp_src"] for f in bridge.per_flow_rules()] == ["41000"]


def test_openflow10_switch_gets_per_flow_entries(ovs: OVS, controller: Controller) -> None:
    br = ovs.add_bridge(controller, version="OpenFlow10")
    try:
        connected(br, controller)
        learn_both_macs(br)
        assert br.flows() == []  # OpenFlow 1.0: no table-miss entry needed
        br.receive(1, tcp_packet(1, sport=42000))
        (flow,) = wait_for("the OpenFlow 1.0 entry", br.flows)
        assert "tcp" in flow.fields and flow["in_port"] == "1"
        assert (flow["nw_src"], flow["nw_dst"]) == (H1_IP, H2_IP)
        assert (flow["tp_src"], flow["tp_dst"]) == ("42000", "5001")
        assert flow["idle_timeout"] == "10" and flow.actions == "output:2"
        wait_for("the packet on port 2", lambda: tcp_frames(br, 2, 42000))
    finally:
        ovs.del_bridge(br)


def test_settings_from_config_file_and_environment(site: Path, ovs: OVS) -> None:
    conf = ovs.dir / "selena_learning.conf"
    conf.write_text("[selena_learning]\nidle_timeout = 7\n")
    ctl = start_controller(
        site, ovs.dir, ["--config-file", str(conf)], env={"SELENA_OF_FLOW_PRIORITY": "123"}
    )
    br = None
    try:
        br = ovs.add_bridge(ctl)
        connected(br, ctl)
        learn_both_macs(br)
        br.receive(1, tcp_packet(1, sport=43000))
        (flow,) = wait_for("the per-flow entry", br.per_flow_rules)
        assert (flow["idle_timeout"], flow["priority"]) == ("7", "123")
        assert "idle_timeout=7s hard_timeout=0s priority=123" in ctl.output()
    finally:
        if br is not None:
            ovs.del_bridge(br)
        ctl.stop()
