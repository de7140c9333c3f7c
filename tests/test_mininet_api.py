"""Mininet's API with Mininet's meanings (issue 30, item 3): custom files
for `mn --custom` load unchanged with `selena validate|plan --custom FILE
--topo NAME` (a `mininet` shim while they load, whether or not Mininet is
installed), with Mininet's units and numbering; wrong types are one line at
the user's call; selena's own Topology answers Mininet's words with its own;
the `selena.mininet` script API (Mininet, start/stop, get, cmd, IP) drives
the one Experiment."""

from __future__ import annotations

import functools
import io
import re
import socket
import sys
import time
from pathlib import Path

import pytest
from cli_main import run_cli

from selena.backends.xl import XlBackend
from selena.errors import ArgumentError, ExperimentError, ScenarioError
from selena.loader import load_scenario
from selena.mininet import CPULimitedHost, Mininet, SingleSwitchTopo, TCLink, Topo
from selena.mininet.cli import CLI
from selena.mininet.custom import load_custom, shim, split_args
from selena.mininet.net import HostHandle
from selena.mininet.topo import to_topology
from selena.mininet.util import custom as mn_custom
from selena.mininet.util import waitListening
from selena.model import NodeKind, Topology
from selena.session import PingAll

DATA = Path(__file__).parent / "data" / "mininet"
TWO_SWITCH = DATA / "topo-2sw-2host.py"


def custom(tmp_path: Path, body: str, name: str = "custom.py") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


# -- a Mininet custom file, unchanged -------------------------------------------------

def test_validate_loads_a_mininet_custom_file_unchanged(capsys):
    rc, out, err = run_cli(capsys, "validate", "--custom", str(TWO_SWITCH), "--topo", "mytopo")
    assert rc == 0, err
    assert "valid: experiment mytopo, TDF 1, 2 hosts, 2 other nodes, 3 links" in out
    assert "mininet" not in sys.modules or not sys.modules["mininet"].__name__.startswith(
        "selena")


def test_plan_shapes_the_link_in_mininets_units(capsys):
    rc, out, err = run_cli(capsys, "plan", "--custom", str(TWO_SWITCH), "--topo", "shaped")
    assert rc == 0, err
    # bw=10 (Mbit/s), delay='5ms', loss=1 (percent), max_queue_size=100 (packets)
    assert out.count("htb rate 10000000bit") == 2       # the s3-s4 link, both directions
    assert out.count("netem limit 100 delay 5000us loss 1%") == 2


def test_topo_arguments_are_split_as_mn_does(capsys):
    rc, out, err = run_cli(capsys, "validate", "--custom", str(TWO_SWITCH),
                           "--topo", "line,3,bw=5,delay=2ms")
    assert rc == 0, err
    assert "3 hosts, 3 other nodes, 5 links" in out
    assert split_args("mytopo,3,1.5,name=x,k=2") == ("mytopo", [3, 1.5], {"name": "x", "k": 2})
    scenario = load_scenario("line,2,bw=5", custom=[str(TWO_SWITCH)])
    assert {link.rate_bps for link in scenario.topology.links} == {5e6}


def test_mininet_numbering_addresses_and_ports():
    topo = load_scenario("shaped", custom=[str(TWO_SWITCH)]).topology
    assert topo.nodes["h1"].interfaces[0].ip == "10.0.0.1/8"
    assert topo.nodes["h2"].interfaces[0].ip == "10.0.0.2/8"
    # s3: port 1 to h1, port 2 to s4, as Mininet numbers them
    assert topo.openflow_ports("s3") == {"h1": 1, "s4": 2}
    assert topo.openflow_ports("s4") == {"s3": 1, "h2": 2}
    # a link's line is the addLink call in the custom file
    shaped = next(link for link in topo.links if link.rate_bps)
    assert shaped.defined_at.endswith("topo-2sw-2host.py:40")
    assert topo.nodes["h1"].defined_at.endswith("topo-2sw-2host.py:35")


def test_explicit_addresses_keep_mininets_defaults_and_numbers():
    class Pair(Topo):
        def build(self):
            self.addHost("h10", ip="192.168.0.10/24", mac="00:00:00:00:00:0a")
            self.addHost("h2")              # natural order: h2 before h10
            self.addHost("h3", ip="10.1.1.1", defaultRoute="via 10.0.0.254")
            self.addSwitch("s1", stp=True, dpid="1", failMode="standalone")
            for h in ("h2", "h3", "h10"):
                self.addLink(h, "s1", use_htb=True)

    topo = to_topology(Pair(), "pair", auto_macs=True)
    assert topo.nodes["h2"].interfaces[0].ip == "10.0.0.1/8"
    assert topo.nodes["h2"].interfaces[0].mac == "00:00:00:00:00:01"
    assert topo.nodes["h3"].interfaces[0].ip == "10.1.1.1/8"       # no prefix: /8
    assert topo.nodes["h3"].interfaces[0].gateway == "10.0.0.254"
    assert topo.nodes["h10"].interfaces[0].mac == "00:00:00:00:00:0a"
    assert topo.nodes["s1"].stp is True


def test_default_options_apply_to_calls_without_options_as_in_mininet():
    class Two(Topo):
        def build(self):
            self.addHost("h1")
            self.addHost("h2", ip="10.0.0.9/8")
            self.addSwitch("s1")
            self.addLink("h1", "s1")
            self.addLink("h2", "s1", bw=10)

    topo = to_topology(Two(hopts={"template": "tools-host"}, lopts={"bw": 5}), "two")
    assert topo.nodes["h1"].template == "tools-host"
    assert topo.nodes["h2"].template == "tiny-host"     # its own options replace hopts
    assert [link.rate_bps for link in topo.links] == [5e6, 10e6]


def test_custom_names_come_before_built_in_ones(tmp_path, capsys):
    path = custom(tmp_path, "from mininet.topo import Topo\n"
                            "class One(Topo):\n"
                            "    def build(self):\n"
                            "        self.addLink(self.addHost('a'), self.addHost('b'))\n"
                            "topos = {'single': One}\n")
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "single")
    assert rc == 0, err
    assert "2 hosts, 0 other nodes, 1 links" in out
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "linear,3")
    assert rc == 0 and "3 hosts, 3 other nodes, 5 links" in out, err


def test_the_shim_takes_precedence_over_an_installed_mininet_and_is_restored(
        tmp_path, monkeypatch):
    fake = tmp_path / "site" / "mininet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    (fake / "topo.py").write_text("raise RuntimeError('the installed Mininet was used')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [n for n in sys.modules if n == "mininet" or n.startswith("mininet.")]:
        monkeypatch.delitem(sys.modules, name)
    import mininet  # the installed one

    assert mininet.REAL
    topos = load_custom([TWO_SWITCH])
    assert set(topos) == {"mytopo", "shaped", "line"}
    with shim():
        import mininet.topo as shimmed

        assert shimmed.Topo is Topo
    assert sys.modules["mininet"] is mininet           # put back as it was
    assert "mininet.topo" not in sys.modules


def test_without_mininet_installed_nothing_is_left_behind():
    before = {n for n in sys.modules if n == "mininet" or n.startswith("mininet.")}
    load_custom([TWO_SWITCH])
    after = {n for n in sys.modules if n == "mininet" or n.startswith("mininet.")}
    assert after == before


# -- one line for each mistake, at the user's call ------------------------------------

HEAD = "from mininet.topo import Topo\nclass T(Topo):\n    def build(self):\n"
TAIL = "topos = {'t': T}\n"
PAIR = "        self.addHost('h1')\n        self.addSwitch('s1')\n"

MISTAKES = [
    ("        self.addHost(1)\n", 4, "addHost: the name must be a string such as 'h1', not int 1"),
    (PAIR + "        self.addLink('h1', 's1', bw='10M')\n", 6,
     "addLink: bw is a number of Mbit/s (bw=10), not str '10M'"),
    (PAIR + "        self.addLink('h1', 's1', delay=5)\n", 6,
     "addLink: delay=5 has no unit; write delay='5ms'"),
    (PAIR + "        self.addLink('h1', 's1', jitter='5 parsecs')\n", 6, "addLink: jitter:"),
    (PAIR + "        self.addLink('h1', 's1', loss=150)\n", 6,
     "addLink: loss=150 is not a percentage from 0 to 100"),
    (PAIR + "        self.addLink('h1', 's1', loss='1%')\n", 6,
     "addLink: loss is a percentage from 0 to 100 (loss=1), not str '1%'"),
    (PAIR + "        self.addLink('h1', 's1', max_queue_size='100')\n", 6,
     "addLink: max_queue_size is a number of packets (100), not str '100'"),
    (PAIR + "        self.addLink('h1', 's1', enable_red=True)\n", 6,
     "addLink: option enable_red= is not supported"),
    (PAIR + "        self.addLink('h1', 's1', bandwidth=10)\n", 6,
     "addLink: unknown link option bandwidth="),
    (PAIR + "        self.addLink('h1', 's2')\n", 6, "addLink: no node named 's2' yet"),
    (PAIR + "        self.addLink('h1', 's1', port2=0)\n", 6,
     "addLink: s1 port 0: a switch's ports start at 1"),
    ("        self.addHost('h1', cpu=1.5)\n", 4,
     "addHost('h1'): cpu=1.5 is not a share of the host's CPUs: give a number above 0 and at "
     "most 1 (cpu=0.25), or -1 for no limit"),
    ("        self.addHost('h1', cpu=0.5, sched='rt')\n", 4,
     "addHost('h1'): sched='rt' is not supported: Xen's credit2 cap is what cpu= gives"),
    ("        self.addHost('h1', cores=[0], cpus='1')\n", 4,
     "addHost('h1'): cores= and cpus= both pin the guest's vCPUs: give one"),
    ("        self.addHost('h1', ip=167772161)\n", 4,
     "addHost('h1'): ip must be a string such as '10.0.0.1/24', not int 167772161"),
    ("        self.addSwitch('s1', failMode='secure')\n", 4,
     "addSwitch('s1'): failMode='secure' is not supported"),
    ("        self.addSwitch('s1', color='red')\n", 4, "addSwitch('s1'): unknown switch option"),
]


@pytest.mark.parametrize("body,line,message", MISTAKES, ids=[m[2][:40] for m in MISTAKES])
def test_a_wrong_call_is_one_line_at_the_users_line(tmp_path, capsys, body, line, message):
    path = custom(tmp_path, HEAD + body + TAIL)
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "t")
    assert rc == 1
    assert f"{path}:{line}: {message}" in err, err
    assert "Traceback" not in err and "selena/" not in err


def test_a_wrong_type_found_only_on_conversion_still_names_the_call(tmp_path):
    path = custom(tmp_path, HEAD + "        self.addHost('h1', memory='lots')\n" + TAIL)
    with pytest.raises(ArgumentError) as caught:
        load_scenario("t", custom=[path])
    assert str(caught.value).startswith(f"{path}:4: add_host('h1', ...): memory")


@pytest.mark.parametrize("argv,message", [
    (["--topo", "mytopo"], None),
    ([], "name the topology with --topo NAME[,ARGS] (its topos: mytopo, shaped, line)"),
    (["--topo", "nosuch"], "unknown topology 'nosuch'"),
    (["--topo", "mytopo,3"], "--topo 'mytopo,3': "),
    (["--topo", "mytopo", "--param", "x=1"], "a custom topology takes its arguments in the "
                                             "spec"),
])
def test_custom_command_lines(capsys, argv, message):
    rc, out, err = run_cli(capsys, "validate", "--custom", str(TWO_SWITCH), *argv)
    if message is None:
        assert rc == 0, err
    else:
        assert rc != 0 and message in err, err
        if "nosuch" in message:
            assert "custom topos in" in err and "mytopo, shaped, line" in err and "linear" in err


def test_a_custom_file_may_import_what_mininet_files_import(tmp_path, capsys):
    path = custom(tmp_path, """\
from mininet.topo import Topo, SingleSwitchTopo, LinearTopo
from mininet.topolib import TreeTopo
from mininet.net import Mininet
from mininet.node import OVSSwitch, OVSKernelSwitch, Controller, CPULimitedHost, Host
from mininet.link import TCLink, Link
from mininet.log import setLogLevel, info
from mininet.util import irange, dumpNodeConnections, custom
from mininet.cli import CLI

class Star(Topo):
    def build(self, n=3, **opts):
        s = self.addSwitch('s1', cls=OVSKernelSwitch)
        for i in irange(1, n):
            self.addLink(self.addHost('h%s' % i, cls=Host), s, cls=custom(TCLink, bw=100))

topos = {'star': Star, 'tree': lambda depth=2: TreeTopo(depth=depth, fanout=2),
         'lin': LinearTopo}
""")
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "star,4")
    assert rc == 0 and "4 hosts, 1 other nodes, 4 links" in out, err
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "tree,depth=3")
    assert rc == 0 and "8 hosts, 7 other nodes, 14 links" in out, err
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "lin,3,2")
    assert rc == 0 and "6 hosts, 3 other nodes, 8 links" in out, err
    path = custom(tmp_path, "from mininet.clean import cleanup\n", "clean.py")
    rc, out, err = run_cli(capsys, "validate", "--custom", path, "--topo", "x")
    assert rc == 1 and f"{path}:1: selena's Mininet API has no mininet.clean (it has " in err


def test_bad_custom_files_are_named(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "validate", "--custom", "nosuch.py", "--topo", "x")
    assert rc == 1 and "--custom nosuch.py: no such file" in err
    rc, _, err = run_cli(capsys, "validate", "--custom", str(tmp_path), "--topo", "x")
    assert rc == 1 and f"--custom {tmp_path}: a directory, not a file" in err
    path = custom(tmp_path, "topos = ['mytopo']\n")
    rc, _, err = run_cli(capsys, "validate", "--custom", path, "--topo", "x")
    assert rc == 1 and "`topos` must be a dict" in err
    path = custom(tmp_path, "from mininet.topo import Topo\nx = undefined_name\n")
    rc, _, err = run_cli(capsys, "validate", "--custom", path, "--topo", "x")
    assert rc == 1 and f"{path}:2: NameError" in err
    rc, _, err = run_cli(capsys, "validate", str(TWO_SWITCH), "--custom", str(TWO_SWITCH))
    assert rc == 1 and "goes with --topo NAME" in err


def test_advise_takes_custom(capsys, tmp_path):
    from selena.advise import Calibration

    cal = Calibration(9.0, 0.0, 1.0, 40.0, {}, [], [], host="lab").save(tmp_path / "cal.json")
    rc, out, err = run_cli(capsys, "advise", "--custom", str(TWO_SWITCH), "--topo", "mytopo",
                           "--calibration", str(cal))
    assert "TDF" in out, err


# -- selena's own Topology answers Mininet's words ------------------------------------

@pytest.mark.parametrize("call,message", [
    (lambda t: t.addHost("h1"), "Topology has no addHost: selena's is add_host"),
    (lambda t: t.addSwitch("s1"), "Topology has no addSwitch: selena's is add_switch"),
    (lambda t: t.addLink("h1", "h2"), "Topology has no addLink: selena's is add_link"),
    (lambda t: t.hosts(), "Topology has no hosts"),
    (lambda t: t.add_link("h1", "h2", bw=10), "add_link: bw= is Mininet's (Mbit/s); selena's "
                                              "is rate=\"10Mbit\""),
    (lambda t: t.add_link("h1", "h2", max_queue_size=100),
     "add_link: max_queue_size= is Mininet's; selena's is queue=100 (packets)"),
    (lambda t: t.add_link("h1", "h2", use_htb=True), "use_htb= is Mininet's"),
    (lambda t: t.add_link("h1", "h2", port1=1), "add_link((h1, 0), (s1, 1))"),
    (lambda t: t.add_link("h1", "h2", rte="1Mbit"), "unknown option rte=; did you mean rate=?"),
    (lambda t: t.add_host("h3", defaultRoute="via 10.0.0.254"),
     "add_host('h3', ...): defaultRoute= is Mininet's; selena's is gateway="),
    (lambda t: t.add_host("h3", cpu=0.5),
     "add_host('h3', ...): cpu= is Mininet's; selena's is cpu_share=0.5 (that share of the "
     "host's CPUs per virtual second)"),
    (lambda t: t.add_host("h3", cores=[0]), "selena pins a guest's vCPUs with cpus='2-3'"),
    (lambda t: t.add_host("h3", cpu_share="half"),
     "cpu_share must be a number or None (0.25), not str 'half'"),
    (lambda t: t.add_switch("s1", dpid="1"), "add_switch('s1', ...): dpid= is Mininet's"),
])
def test_topology_hints_mininet_words_at_the_callers_line(call, message):
    topo = Topology("t")
    topo.add_host("h1", ip="10.0.0.1/24")
    topo.add_host("h2", ip="10.0.0.2/24")
    with pytest.raises(ArgumentError) as caught:
        call(topo)
    assert message in str(caught.value)
    assert str(caught.value).startswith("tests/test_mininet_api.py:") or \
        "test_mininet_api.py:" in str(caught.value)


def test_topology_keeps_attribute_errors_for_other_names():
    topo = Topology("t")
    assert not hasattr(topo, "addHost")
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        topo.colour  # noqa: B018


def test_mininets_loss_in_percent_is_named_by_validation(tmp_path, capsys):
    body = ("from selena.model import Topology\n"
            "topology = Topology('t')\n"
            "a = topology.add_host('a', ip='10.0.0.1/24')\n"
            "b = topology.add_host('b', ip='10.0.0.2/24')\n"
            "topology.add_link(a, b, loss=5)\n")
    rc, _, err = run_cli(capsys, "validate", custom(tmp_path, body, "mine.py"))
    assert rc == 1
    assert "mine.py:5: link a:eth0--b:eth0: loss 5 out of range (0 to 100%); loss is a ratio: " \
           "for 5 percent (Mininet's loss=5) write loss=\"5%\"" in err


# -- the script API --------------------------------------------------------------------

class Pair(Topo):
    def build(self, bw=10):
        self.addHost("h1")
        self.addHost("h2")
        self.addLink("h1", "h2", bw=bw, delay="5ms")


def test_custom_classes_params_reach_every_node_and_link_as_in_mininet():
    """Mininet's custom(cls, **params) (and a functools.partial) as the net's
    link class, or a link's own cls=: its params were silently dropped
    (only the class was checked), and mininet.util had no custom."""
    def rates(net):
        net.build()
        return [(link.rate_bps, link.delay_s) for link in net.topology.links]
    # custom()'s params go over the link's own (Pair's bw=10), as Mininet's.
    net = Mininet(topo=Pair(), link=mn_custom(TCLink, bw=3, delay="1ms"), templates=None)
    assert rates(net) == [(3e6, 0.001)]
    # A partial's keywords go under them (a call's keywords win).
    net = Mininet(topo=Pair(), link=functools.partial(TCLink, bw=3, loss=1), templates=None)
    assert rates(net) == [(10e6, 0.005)] and net.topology.links[0].loss == 0.01

    class Own(Topo):
        def build(self):
            self.addHost("h1")
            self.addHost("h2")
            self.addSwitch("s1")
            self.addLink("h1", "s1", cls=mn_custom(TCLink, bw=7))
            self.addLink("h2", "s1", cls=TCLink, bw=20)     # its own class: not the net's
    net = Mininet(topo=Own(), link=mn_custom(TCLink, bw=1), templates=None)
    assert [r for r, _ in rates(net)] == [7e6, 20e6]


@pytest.mark.parametrize("make,message", [
    (lambda: Mininet(topo=Pair(), host=mn_custom(CPULimitedHost, cpu=0), templates=None),
     r"test_mininet_api.py:\d+: Mininet\(host=custom\(CPULimitedHost,\{'cpu': 0\}\)\)"
     r".*cpu=0 is not a share of the host's CPUs"),
    (lambda: Mininet(topo=Pair(), link=mn_custom(TCLink, bw="10M"), templates=None),
     r"test_mininet_api.py:\d+: .*bw is a number of Mbit/s \(bw=10\), not str '10M'"),
    (lambda: Topo().addHost("h1", cls=mn_custom(CPULimitedHost, period_us=10000)),
     r"test_mininet_api.py:\d+: addHost\('h1'\): option period_us= is not supported"),
])
def test_a_custom_classes_params_are_checked_as_the_options_they_become(make, message):
    with pytest.raises(ArgumentError, match=message):
        make()


def test_cpu_limited_hosts_cpu_and_cores_become_cpu_share_and_cpus():
    """CPULimitedHost's cpu= (a share of the machine's CPUs) and cores=
    were refused; Mininet's reproductions cap every host with them."""
    class Capped(Topo):
        def build(self):
            self.addHost("h1", cls=CPULimitedHost, cpu=0.25, cores=[0, 1])
            self.addHost("h2", cpu=-1, sched="cfs")          # Mininet's defaults: no cap
            self.addHost("h3", cores="1")
            self.addSwitch("s1")
            for host in ("h1", "h2", "h3"):
                self.addLink(host, "s1")
    topology = Mininet(topo=Capped(), templates=None).topology
    shares = {name: (node.cpu_share, node.cpus) for name, node in topology.nodes.items()
              if name.startswith("h")}
    assert shares == {"h1": (0.25, "0,1"), "h2": (None, None), "h3": (None, "1")}
    # A net's host class gives every host its share, as Mininet's custom() does.
    net = Mininet(topo=Pair(), host=mn_custom(CPULimitedHost, cpu=0.5), templates=None)
    assert {n.cpu_share for n in net.topology.nodes.values() if n.name.startswith("h")} \
        == {0.5}


def test_static_arp_before_start_is_set_at_boot_and_on_a_started_net_at_once():
    """Mininet(autoStaticArp=True) was accepted and ignored; staticArp()
    was 'not in selena's Mininet API'."""
    def entries(net):
        net.build()
        return sorted((e.node, e.ip, e.mac) for e in net.topology.static_arp)
    want = [("h1", "10.0.0.2", "00:00:00:00:00:02"), ("h2", "10.0.0.1", "00:00:00:00:00:01")]
    net = Mininet(topo=SingleSwitchTopo(2), autoStaticArp=True, autoSetMacs=True,
                  templates=None)
    assert entries(net) == want
    net = Mininet(topo=SingleSwitchTopo(2), autoSetMacs=True, templates=None)
    assert entries(net) == []
    net.staticArp()
    net.staticArp()                         # once is enough: no second set of entries
    assert entries(net) == want
    net = Mininet(autoSetMacs=True, templates=None)        # emptynet.py's way
    net.staticArp()
    h1, h2, s1 = net.addHost("h1"), net.addHost("h2"), net.addSwitch("s1")
    net.addLink(h1, s1)
    net.addLink(h2, s1)
    assert entries(net) == want
    net.session = FakeSession()             # started: the session sets them at once
    net.staticArp()
    assert net.session.calls == [("static_arp",)]
    net.session = None


def test_mininet_object_before_start():
    net = Mininet(topo=SingleSwitchTopo(3), link=TCLink, controller=None, autoSetMacs=True,
                  cleanup=True, waitConnected=True, templates=None)
    assert [str(h) for h in net.hosts] == ["h1", "h2", "h3"]
    assert [str(s) for s in net.switches] == ["s1"]
    h1, h3 = net.get("h1", "h3")
    assert net["h3"].name == "h3" and h3.IP() == "10.0.0.3" and h1.MAC() == "00:00:00:00:00:01"
    assert net.get("s1").name == "s1" and "h2" in net
    with pytest.raises(ExperimentError, match=r"h1.cmd: the net is not started"):
        h1.cmd("true")
    with pytest.raises(ScenarioError, match=r"no node named 'h9' in net \S+ \(have h1, "):
        net.get("h9")
    # A net with no nodes said "(have )".
    with pytest.raises(ScenarioError, match=r"no node named 'h1' in net \S+ \(it has no "
                                            r"nodes: addHost or addSwitch them before "
                                            r"build\(\)\)$"):
        Mininet(templates=None).get("h1")
    with pytest.raises(ArgumentError, match="addHost: the net is built already"):
        net.addHost("h4")
    with pytest.raises(ExperimentError, match=r"CLI\(net\): the net is not started"):
        CLI(net)


@pytest.mark.parametrize("kwargs,message", [
    ({"xterms": True}, "Mininet(xterms=...) is not supported"),
    ({"autoPinCpus": True}, "Mininet(autoPinCpus=...) is not supported"),
    ({"frobnicate": 1}, "Mininet(): unknown option frobnicate="),
    ({"topo": "single,3"}, "Mininet(topo=...) must be a Topo, not str"),
    ({"controller": "RemoteController"}, "Mininet(controller="),
])
def test_mininet_options_that_change_the_meaning_are_refused(kwargs, message):
    with pytest.raises(ArgumentError) as caught:
        Mininet(**kwargs)
    assert message in str(caught.value)
    assert "test_mininet_api.py:" in str(caught.value)


def test_remote_controller_is_refused():
    from selena.mininet.node import RemoteController

    with pytest.raises(ArgumentError, match="RemoteController"):
        Mininet(topo=Pair(), controller=RemoteController)


@pytest.mark.parametrize("build", [False, True])
def test_a_net_built_without_a_topo(build):
    """Mininet(), build=True by default, builds only with a topo (Mininet's
    own rule; its emptynet.py adds every node to a Mininet() without one):
    it was built empty, and its first addHost refused."""
    net = Mininet(build=build, templates=None)
    h1 = net.addHost("h1", ip="10.0.0.1/24")
    net.addHost("h2")
    net.addLink(h1, "h2", bw=5)
    net.build()
    assert net.topology.links[0].rate_bps == 5e6
    assert net.get("h2").IP() == "10.0.0.2"
    assert net.topology.nodes["h1"].kind is NodeKind.HOST


class FakeSession:
    def __init__(self):
        self.calls = []

    def pingall(self, timeout, hosts=None, full=False):
        call = ("pingall", timeout) if hosts is None else ("pingall", timeout, sorted(hosts))
        self.calls.append(call + ("full",) if full else call)
        return PingAll([("h1", "h2", True), ("h2", "h1", False)],
                       {("h1", "h2"): 20.5} if full else {})

    def iperf_bps(self, client, server, seconds, udp_bps=None):
        self.calls.append(("iperf", client, server, seconds) if udp_bps is None
                          else ("iperf", client, server, seconds, udp_bps))
        return 9.41e6, 9.87e6

    def link(self, a, b, up):
        self.calls.append(("link", a, b, up))

    def static_arp(self):
        self.calls.append(("static_arp",))
        return 2


def test_ping_of_some_hosts_asks_the_session_to_ping_only_among_them():
    net = Mininet(topo=Pair(), templates=None)
    net.session = FakeSession()
    net.ping([net["h1"], net["h2"]], timeout=2)
    assert net.session.calls == [("pingall", 2.0, ["h1", "h2"])]


def test_ping_all_and_iperf_print_and_return_as_mininet(capsys):
    net = Mininet(topo=Pair(), templates=None)
    net.session = FakeSession()
    assert net.pingAll() == 50.0
    out = capsys.readouterr().out
    assert "h1 -> h2 \nh2 -> X \n*** Results: 50% dropped (1/2 received)\n" in out
    assert net.iperf((net["h1"], net["h2"]), seconds=3) == ["9.41 Mbits/sec", "9.87 Mbits/sec"]
    assert "*** Results: ['9.41 Mbits/sec', '9.87 Mbits/sec']" in capsys.readouterr().out
    net.configLinkStatus("h1", "h2", "down")
    assert net.session.calls == [("pingall", 1.0), ("iperf", "h1", "h2", 3.0),
                                 ("link", "h1", "h2", False)]
    # UDP as Mininet returns it: the bandwidth asked first.
    assert net.iperf(l4Type="UDP", udpBw="5M") == ["5M", "9.41 Mbits/sec", "9.87 Mbits/sec"]
    assert "*** Iperf: testing UDP bandwidth between h1 and h2 \n*** Results: ['5M', " \
        in capsys.readouterr().out
    assert net.iperfUdp() == ["10M", "9.41 Mbits/sec", "9.87 Mbits/sec"]
    assert net.session.calls[-2:] == [("iperf", "h1", "h2", 5.0, 5e6),
                                      ("iperf", "h1", "h2", 5.0, 10e6)]
    calls = len(net.session.calls)
    with pytest.raises(ArgumentError, match=r"iperf\(l4Type='SCTP'\): want 'TCP' or 'UDP'$"):
        net.iperf(l4Type="SCTP")
    # iperf3's -b 0 is no limit: a flood, not a test.
    for bad in ("0", "fast", "-1M", None):
        with pytest.raises(ArgumentError, match=rf"test_mininet_api.py:\d+: iperf\(udpBw="
                                                rf"{re.escape(repr(bad))}\): want a rate above "
                                                r"zero such as '10M'$"):
            net.iperf(l4Type="UDP", udpBw=bad)
    assert len(net.session.calls) == calls
    # Mininet takes "1"; anything float() refuses is one line, not a ValueError.
    net.pingAll(timeout="2")
    assert net.session.calls[-1] == ("pingall", 2.0)
    with pytest.raises(ArgumentError, match=r"pingAll\(timeout=\.\.\.\): 'soon' is not a "
                                            r"number of seconds"):
        net.pingAll(timeout="soon")
    with pytest.raises(ArgumentError, match=r"iperf\(seconds=\.\.\.\): None is not a number"):
        net.iperf(seconds=None)
    net.session = None


def test_ping_full_returns_mininets_tuples_and_prints_each_round_trip(capsys):
    net = Mininet(topo=Pair(), templates=None)
    net.session = FakeSession()
    outputs = net.pingAllFull(timeout="2")
    assert [(str(s), str(d), r) for s, d, r in outputs] == [
        ("h1", "h2", (1, 1, 20.5, 20.5, 20.5, 0.0)), ("h2", "h1", (1, 0, 0.0, 0.0, 0.0, 0.0))]
    assert isinstance(outputs[0][0], HostHandle)
    assert capsys.readouterr().out == (
        "*** Ping: testing ping reachability\nh1 -> h2 \nh2 -> X \n*** Results: \n"
        " h1->h2: 1/1, rtt min/avg/max/mdev 20.500/20.500/20.500/0.000 ms\n"
        " h2->h1: 1/0, rtt min/avg/max/mdev 0.000/0.000/0.000/0.000 ms\n")
    net.pingPairFull()
    net.pingFull([net["h2"], net["h1"]])
    assert net.session.calls == [("pingall", 2.0, "full"), ("pingall", 1.0, ["h1", "h2"], "full"),
                                 ("pingall", 1.0, ["h1", "h2"], "full")]
    with pytest.raises(ArgumentError, match=r"pingFull\(timeout=\.\.\.\): 'x' is not a number"):
        net.pingFull(timeout="x")
    net.session = None


def test_pingpair_and_waitconnected_are_mininets_and_other_names_one_line(capsys):
    """Mininet's API beyond selena's was a bare AttributeError; pingPair and
    waitConnected (in Mininet's newer examples) were among it."""
    net = Mininet(topo=SingleSwitchTopo(3), templates=None)
    with pytest.raises(ExperimentError, match="waitConnected: the net is not started"):
        net.waitConnected()
    net.session = FakeSession()
    assert net.waitConnected() is True
    assert net.pingPair() == 50.0
    assert net.session.calls == [("pingall", 1.0, ["h1", "h2"])]
    with pytest.raises(AttributeError, match=r"test_mininet_api.py:\d+: net.monitor: not in "
                                             r"selena's Mininet API \(it has addController, "
                                             r".*pingPair.*; docs/topologies.md\)$"):
        net.monitor()
    with pytest.raises(ArgumentError, match=r"h1.setIP: not in selena's Mininet API \(it has "
                                            r"IP, MAC, cmd, cmdPrint, connectionsTo, intf, "
                                            r"monitor, pexec, popen, sendCmd, sendInt, setCPUFrac, "
                                            r"waitOutput, waiting; "
                                            r"docs/topologies.md\)$"):
        net["h1"].setIP("10.0.0.9")
    assert not hasattr(net, "addNAT") and getattr(net["h2"], "setIP", None) is None
    net.session = None


MAIN_GUARDED = """\
from selena.mininet import Mininet
from selena.mininet.log import setLogLevel
from selena.mininet.topo import SingleSwitchTopo


def simpleTest():
    net = Mininet(topo=SingleSwitchTopo(k=4), tdf=5)
    net.start()
    net.pingAll()
    net.stop()
    open(__file__ + ".ran", "w").write("started")


if __name__ == '__main__':
    setLogLevel('info')
    simpleTest()
"""


def test_validate_checks_a_selena_mininet_script_and_run_refuses_it(tmp_path, capsys):
    """As Mininet's examples are written: the net is built in a function the
    main block calls. Loading stops at the Mininet (its Experiment) and runs
    nothing after it."""
    path = custom(tmp_path, MAIN_GUARDED, "simple.py")
    rc, out, err = run_cli(capsys, "validate", path)
    assert rc == 0, err
    assert "valid: experiment singleswitch, TDF 5, 4 hosts, 1 other nodes, 4 links" in out
    assert not Path(path + ".ran").exists()
    rc, out, err = run_cli(capsys, "run", path)
    assert rc == 1 and "this file runs its own experiment" in err


EMPTYNET = Path(__file__).parent / "lab_programs" / "mn_emptynet.py"


def test_mininets_emptynet_validates_with_its_nodes(tmp_path, capsys):
    """Mininet's emptynet.py (a Mininet() without a topo, every node added to
    it): "the topology has no nodes", as the net was built empty at once."""
    rc, out, err = run_cli(capsys, "validate", str(EMPTYNET))
    assert rc == 0, err
    assert "valid: experiment mininet, TDF 5, 2 hosts, 1 other nodes, 2 links" in out
    assert "connected" not in out                   # nothing after start() ran


# -- against a fake Dom0 (the real agents; toolchain tier) -----------------------------

def fake_net(fake_xen, tmp_path, **kw) -> Mininet:
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    return Mininet(topo=Pair(), link=TCLink, backend=backend, templates=None,
                   ready_timeout=20, progress=lambda msg: None, **kw)


def test_start_cmd_ip_cli_and_stop(fake_xen, tmp_path, capsys):
    net = fake_net(fake_xen, tmp_path, tdf=4)
    net.start()
    assert set(fake_xen.domains) == {"selena-pair-h1", "selena-pair-h2"}
    assert {d.tdf for d in fake_xen.domains.values()} == {"4"}
    h1, h2 = net.get("h1", "h2")
    assert h1.cmd("echo to %s" % h2.IP()) == "to 10.0.0.2\n"  # noqa: UP031 - as Mininet's users write it
    assert h1.cmd("echo", "out;", "echo err >&2") == "out\nerr\n"
    CLI(net, stdin=io.StringIO("h1 echo via-the-prompt\nexit\n"))     # selena's prompt
    assert "via-the-prompt" in capsys.readouterr().out
    began = time.monotonic()
    assert h2.cmd("sleep 300 &") == ""          # returns at once, as in Mininet
    net.stop()
    assert time.monotonic() - began < 30
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    net.stop()                                   # twice is fine


def test_wait_listening_is_mininets_with_the_server_asked_in_its_guest(fake_xen, tmp_path):
    """mininet.util.waitListening(client, server, port, timeout): True once
    the server's port listens (server a node, its address or 127.0.0.1 with
    the client), False after the timeout; an address of no host is named.
    The fake Dom0's guests share this host's /proc/net/tcp."""
    net = fake_net(fake_xen, tmp_path, tdf=4)
    net.start()
    try:
        h1, h2 = net.get("h1", "h2")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            assert waitListening(h1, h2, port, timeout=0.5) is False
            listener.listen()
            assert waitListening(h1, h2, port, timeout=5) is True
            assert waitListening(client=h1, server=h2.IP(), port=port) is True
            assert waitListening(h2, "127.0.0.1", port, timeout=5) is True
            with pytest.raises(ArgumentError, match=r"no host of net pair has the address "
                                                    r"'10\.9\.9\.9'; give server= the node"):
                waitListening(h1, "10.9.9.9", port)
            with pytest.raises(ArgumentError, match=r"give server= a node of the started net"):
                waitListening(server="10.0.0.2", port=port)
    finally:
        net.stop()
    with pytest.raises(ExperimentError, match="waitListening: the net is not started"):
        waitListening(h1, h2, port)


def test_set_cpu_frac_caps_a_host_before_and_after_start(fake_xen, tmp_path):
    """CPULimitedHost.setCPUFrac: before start() the host is deployed
    capped, after it the running guest is (the fake Dom0 has 2 CPUs)."""
    net = fake_net(fake_xen, tmp_path, tdf=4)
    h1, h2 = net.get("h1", "h2")
    h1.setCPUFrac(0.5)
    with pytest.raises(ArgumentError, match=r"h1.setCPUFrac: sched='rt' is not supported"):
        h1.setCPUFrac(0.5, sched="rt")
    with pytest.raises(ArgumentError, match=r"h2.setCPUFrac: cpu_share 0 is not a share"):
        h2.setCPUFrac(0)
    net.start()
    try:
        assert fake_xen.domains["selena-pair-h1"].cap == 25              # 100 / TDF 4
        h2.setCPUFrac(0.25, sched="cfs")
        assert fake_xen.domains["selena-pair-h2"].cap == 12              # 12.5, whole
        h1.setCPUFrac(-1)                                                # Mininet's: none
        assert fake_xen.domains["selena-pair-h1"].cap == 0
    finally:
        net.stop()


def test_cmdprint_and_a_verbose_cmd_print_the_output_as_it_comes(fake_xen, tmp_path,
                                                                  monkeypatch):
    """Mininet's cmdPrint and cmd(verbose=True): the output printed while
    the command runs, and returned whole."""
    written: list[tuple[float, str]] = []

    class Terminal:
        def write(self, text: str) -> None:
            written.append((time.monotonic(), text))

        def flush(self) -> None:
            pass
    net = fake_net(fake_xen, tmp_path)
    net.start()
    try:
        h1 = net.get("h1")
        monkeypatch.setattr(sys, "stdout", Terminal())
        text = h1.cmdPrint("echo one; sleep 1.5; echo two >&2")
        returned = time.monotonic()
        assert text == "one\ntwo\n"
        assert [t for _, t in written] == ["one\n", "two\n"]
        assert returned - written[0][0] >= 1.2, written
        written.clear()
        assert h1.cmd("echo quiet") == "quiet\n" and written == []
        assert h1.cmd("echo loud", verbose=True) == "loud\n"
        assert [t for _, t in written] == ["loud\n"]
    finally:
        monkeypatch.undo()
        net.stop()

def test_sendcmd_waitoutput_and_sendint_as_mininets_multiping_uses_them(fake_xen, tmp_path):
    """Mininet's sendCmd/waitOutput (examples/multiping.py), sendInt and
    monitor were 'not in selena's Mininet API'."""
    net = fake_net(fake_xen, tmp_path)
    net.start()
    try:
        h1, h2 = net.get("h1", "h2")
        assert h1.waitOutput() == "" and not h1.waiting
        h1.sendCmd("echo", "from h1")
        h2.sendCmd("sleep 0.2; echo from h2 >&2")
        assert h1.waiting and net["h1"].waiting         # per node, not per handle
        with pytest.raises(ArgumentError, match=r"h1.sendCmd: h1 is running a command "
                                                r"already \(waitOutput\(\) first\)"):
            h1.sendCmd("true")
        assert h2.waitOutput() == "from h2\n" and h1.waitOutput() == "from h1\n"
        assert not h1.waiting and not h2.waiting
        began = time.monotonic()
        h1.sendCmd("echo started; sleep 300")
        time.sleep(0.5)
        h1.sendInt()
        assert h1.waitOutput() == "started\n"
        assert time.monotonic() - began < 30
        # monitor(): what came so far, while the command runs; then the rest.
        h2.sendCmd("echo one; sleep 1.5; echo two")
        assert h2.monitor() == "one\n" and h2.waiting
        assert h2.monitor(timeoutms=100) == ""          # a quiet 100 ms
        assert h2.waitOutput() == "two\n" and not h2.waiting
        assert h2.monitor() == ""                       # nothing sent
        # Mininet's dict-like net.
        assert len(net) == 2 and net.keys() == ["h1", "h2"]
        assert [str(v) for v in net.values()] == ["h1", "h2"]
        assert {k: str(v) for k, v in net.items()} == {"h1": "h1", "h2": "h2"}
        assert str(net.nameToNode["h2"]) == "h2"
    finally:
        net.stop()
    assert fake_xen.domains == {}


def test_a_forgotten_stop_happens_at_exit(fake_xen, tmp_path, capsys):
    from selena.mininet import net as net_module

    net = fake_net(fake_xen, tmp_path)
    net.start()
    assert fake_xen.domains
    net_module._stop_forgotten()                 # what atexit runs
    assert fake_xen.domains == {}
    assert "*** net pair was not stopped: stopping it at exit" in capsys.readouterr().err


def test_an_exception_in_a_with_block_tears_down(fake_xen, tmp_path):
    with pytest.raises(RuntimeError, match="boom"), fake_net(fake_xen, tmp_path) as net:
        assert net["h1"].cmd("echo up") == "up\n"
        raise RuntimeError("boom")
    assert fake_xen.domains == {}


def test_an_interfaces_config_reshapes_its_link_on_a_started_net(fake_xen, tmp_path):
    """Mininet's TCIntf.config (h1.intf().config(bw=5), link.intf1.config,
    net.linksBetween): the link's shaping in virtual terms, scaled by the
    TDF in Dom0, recorded as a link change; refused before start, for an
    option TCLink lacks and for an interface the node lacks."""
    net = fake_net(fake_xen, tmp_path, tdf=4)
    h1, h2 = net.get("h1", "h2")
    assert h1.intf().name == "h1-eth0" and h1.intf().IP() == "10.0.0.1"
    with pytest.raises(ExperimentError, match=r"h1-eth0.config: the net is not started"):
        h1.intf().config(bw=5)
    net.start()
    try:
        shaped = len(fake_xen.calls)
        assert h1.intf().config(bw=5, delay="20ms") == {"rate": 5e6, "delay": "20ms"}
        made = [" ".join(c) for c in fake_xen.calls[shaped:]]
        assert any("netem delay 80000us" in c for c in made), made     # 20 ms x TDF 4
        assert any("rate 1250000bit" in c for c in made), made          # 5 Mbit/s / 4
        (link,) = net.linksBetween(h2, h1)
        assert (str(link), link.intf1.node) == ("h2-eth0<->h1-eth0", "h2")
        assert link.intf1.config(loss=0, bw=0) == {"rate": None, "loss": 0.0}
        (ends,) = h1.connectionsTo(h2)
        assert [e.name for e in ends] == ["h1-eth0", "h2-eth0"]
        changes = [e["change"] for e in net.exp.events]
        assert changes == ["rate=5Mbit delay=20ms", "rate=none loss=0%"], changes
        with pytest.raises(ArgumentError, match=r"h1-eth0.config: unknown link option "
                                                r"speed="):
            h1.intf().config(speed=5)
        with pytest.raises(ArgumentError, match=r"h1.intf: h1 has no interface eth3$"):
            h1.intf("h1-eth3")
    finally:
        net.stop()


def test_add_link_returns_the_link_with_its_interfaces_as_mininet_does(fake_xen, tmp_path):
    """Mininet's emptynet.py way: link = net.addLink(h1, s1); its intf1 and
    intf2 are named and numbered as the built topology numbers them."""
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    net = Mininet(topo=None, build=False, backend=backend, templates=None, ready_timeout=20,
                  progress=lambda msg: None)
    h1 = net.addHost("h1", ip="10.0.0.1/24")
    s1 = net.addSwitch("s1")
    net.addHost("h2", ip="10.0.0.2/24")
    net.addLink("h2", s1)
    link = net.addLink(h1, s1, bw=10)
    assert (link.intf1.name, link.intf2.name) == ("h1-eth0", "s1-eth1")
    net.build()
    assert [str(lk) for lk in net.linksBetween("s1", "h1")] == ["s1-eth1<->h1-eth0"]
    assert link.intf2.link.other("s1") == "h1"


def test_popen_and_pexec_are_mininets_on_guest_commands(fake_xen, tmp_path):
    """node.popen as subprocess.Popen (poll, wait, communicate, terminate,
    returncode), a string split into words unless shell=True; pexec's
    (out, err, exit status); no stdin; refused before start."""
    from selena.mininet.process import TimeoutExpired

    net = fake_net(fake_xen, tmp_path, tdf=4)
    h1, h2 = net.get("h1", "h2")
    with pytest.raises(ExperimentError, match=r"h1.popen: the net is not started"):
        h1.popen("true")
    net.start()
    try:
        p = h1.popen(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert p.wait() == 3 and p.communicate() == (b"out\n", b"err\n")
        assert p.stdout.read() == b"out\n" and p.poll() == 3
        # A string is words, as Mininet splits it: no shell, no redirection.
        assert h2.pexec("echo a > b") == ("a > b\n", "", 0)
        assert h2.pexec("echo a; echo b", shell=True) == ("a\nb\n", "", 0)
        sleeper = h1.popen(["sleep", "30"])
        assert sleeper.poll() is None and sleeper.returncode is None
        with pytest.raises(TimeoutExpired, match=r"still running after 0.2 real s"):
            sleeper.wait(timeout=0.2)
        sleeper.terminate()
        assert sleeper.wait(timeout=20) == -15
        out, err, code = h1.pexec(["/no/such/program"])
        assert code == 127 and "h1: failed" in err, (out, err, code)
        with pytest.raises(ArgumentError, match=r"h1.popen: a guest command has no stdin"):
            h1.popen("cat").communicate(input=b"x")
        with pytest.raises(ArgumentError, match=r"h1.popen: unknown option\(s\) bufsize"):
            h1.popen("true", bufsize=1)
    finally:
        net.stop()


def test_popen_output_comes_while_the_command_runs_and_pmonitor_reads_it(fake_xen, tmp_path):
    """p.stdout is a pipe fed as the guest writes (a line read while the
    command still runs); communicate gives the rest; Mininet's pmonitor
    interleaves several nodes' lines, says (None, '') when nothing came and
    ends when every command has; a popen that is not a node's is refused."""
    from selena.mininet.util import pmonitor

    net = fake_net(fake_xen, tmp_path, tdf=4)
    h1, h2 = net.get("h1", "h2")
    net.start()
    try:
        p = h1.popen("echo first; sleep 2; echo second; echo oops >&2", shell=True)
        assert p.stdout.readline() == b"first\n"
        assert p.poll() is None                         # the command is still running
        assert p.communicate() == (b"second\n", b"oops\n") and p.returncode == 0
        popens = {h1: h1.popen("for i in 1 2 3; do echo h1-$i; sleep 0.4; done", shell=True),
                  h2: h2.popen("sleep 1.5; echo h2-only; printf tail", shell=True)}
        seen = list(pmonitor(popens, timeoutms=100))
        lines = [(host.name, line) for host, line in seen if host]
        assert [line for name, line in lines if name == "h1"] == ["h1-1\n", "h1-2\n", "h1-3\n"]
        assert [line for name, line in lines if name == "h2"] == ["h2-only\n", "tail"]
        assert (None, "") in seen                       # a quiet 100 ms
        assert all(p.poll() == 0 for p in popens.values())
        chunks = list(pmonitor({h2: h2.popen("printf abcdef", shell=True)}, readline=False,
                               readmax=4))
        assert [line for host, line in chunks if host] == ["abcd", "ef"]
        with pytest.raises(ArgumentError, match=r"pmonitor: h1's 42 is not a popen of a node"):
            list(pmonitor({h1: 42}))
    finally:
        net.stop()
