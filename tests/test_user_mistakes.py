"""A first-day user's mistakes (issue 30, item 2): every wrong type in a call
of the topology API is one line naming the user's file and line, memory
sizes read as people mean them, and topologies that would silently lose
something are refused or warned about, naming the nodes and their lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from selena import units
from selena.backends.xl import XlBackend
from selena.cli import main
from selena.errors import (
    ArgumentError,
    ScenarioError,
    ScenarioFileError,
    TopologyError,
    UnitError,
    ValidationError,
)
from selena.experiment import Experiment
from selena.loader import load_scenario
from selena.model import Topology
from selena.validate import validate

HEADER = "from selena.model import Topology\ntopology = Topology('t')\n"


def write(tmp_path: Path, body: str, name: str = "scenario.py") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + body)
    return path


@pytest.mark.parametrize("call, message", [
    ("topology.add_host(1, ip='10.0.0.1/24')",
     "add_host(1, ...): the name must be a string ('h1'), not int 1"),
    ("topology.add_host('h1', ip=167772162)",
     "add_host('h1', ...): ip must be a string or None ('10.0.0.1/24'), not int 167772162"),
    ("topology.add_link(topology.add_host('h1'), topology.add_host('h2'), queue='100')",
     "add_link: queue must be an integer or None (packets, e.g. 100), not str '100'"),
    ("topology.add_link('h1', 'h2', rate=True)", "add_link: rate must be"),
    ("topology.add_link('h1', 'h2', delay='5 parsecs')", "add_link: delay: time '5 parsecs'"),
    ("topology.add_link('h1', 2)", "add_link: each end must be"),
    ("topology.add_link(('h1', 'eth0'), 'h2')", "add_link: an end (node, interface index)"),
    ("topology.add_host('h1', vcpus='2')", "vcpus must be an integer"),
    ("topology.add_host('h1', memory=512.5)", "memory 512.5 is not a size"),
    ("topology.add_host('h1', memory='8M')", "memory '8M' is 8 MiB: out of range (32 MiB"),
    ("topology.add_host('h1', memory=-5)", "memory -5 is -5 MiB: out of range"),
    ("topology.add_switch('s1', controller=3)", "controller must be"),
    ("topology.add_static_arp('h1', 'eth0', '10.0.0.2', '02:00:00:00:00:02')",
     "add_static_arp: the interface index must be an integer"),
])
def test_a_wrong_argument_is_one_line_at_the_user_s_call(tmp_path, capsys, call, message):
    path = write(tmp_path, "\n" + call + "\n")
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"selena: error: {path}:4: ") or \
        err.startswith(f"selena: error: {Path(path).name}:4: "), err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_wrong_argument_inside_build_names_the_line_in_build(tmp_path):
    path = tmp_path / "b.py"
    path.write_text("from selena.model import Topology\n\ndef build():\n"
                    "    topo = Topology('b')\n    topo.add_host(1)\n    return topo\n")
    with pytest.raises(ScenarioFileError) as caught:
        load_scenario(str(path))
    assert str(caught.value).endswith("b.py:5: add_host(1, ...): the name must be a string "
                                      "('h1'), not int 1")


def test_a_wrong_argument_in_a_script_of_the_user_s_is_raised_at_their_line():
    with pytest.raises(ArgumentError, match=r"test_user_mistakes.py:\d+: add_host"):
        Topology("t").add_host("h1", ip=167772162)


@pytest.mark.parametrize("given, mib", [
    ("512MB", 512), ("512M", 512), ("512MiB", 512), ("512", 512), (512, 512),
    ("1GB", 1024), ("1G", 1024), ("1GiB", 1024), ("65536K", 64),
])
def test_memory_sizes_read_as_people_mean_them(given, mib):
    assert units.memory_mb(given) == mib
    assert Topology("t").add_host("h1", memory=given).memory_mb == mib


@pytest.mark.parametrize("given", [-5, "-5M", "16M", 31, "1.5M", "lots", True, 512.0])
def test_memory_that_cannot_boot_a_guest_is_refused(given):
    with pytest.raises(UnitError):
        units.memory_mb(given)


def test_other_byte_counts_stay_bytes():
    assert units.size_bytes("1M") == 1024 * 1024 and units.size_bytes(512) == 512
    assert units.size_bytes("1MB") == 1_000_000


def pair() -> Topology:
    topo = Topology("t")
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    return topo


def test_a_link_from_a_node_to_itself_is_refused():
    topo = pair()
    h1 = topo.nodes["h1"]
    topo.add_link(h1, h1)
    with pytest.raises(TopologyError) as caught:
        validate(topo)
    text = str(caught.value)
    assert "link h1:eth1--h1:eth2: link from h1 to itself (a link joins two different nodes)" \
        in text
    assert "test_user_mistakes.py:" in text


def test_a_host_with_an_address_but_no_link_is_refused_not_dropped():
    topo = pair()
    topo.add_host("h3", ip="10.0.0.3/24")
    with pytest.raises(TopologyError, match=r"node h3: has address 10.0.0.3/24 but no link, "
                                            r"so the address would be dropped: "
                                            r"add_link\(h3, ...\)"):
        validate(topo)


def test_nodes_on_no_link_are_warned_about():
    topo = pair()
    topo.add_host("h3")
    topo.add_switch("s9")
    warnings = [str(w) for w in validate(topo)]
    assert any("node h3: on no link or hub, it can reach no other node" in w for w in warnings)
    assert any("node s9: a switch on no link has no ports" in w for w in warnings)


def test_clashing_addresses_and_names_list_the_nodes_and_their_lines():
    topo = pair()
    topo.add_link(topo.add_host("h3", ip="10.0.0.1/24"), topo.nodes["h2"])
    topo.add_link(topo.add_host("h2", ip="10.0.0.9/24"), "h1")
    with pytest.raises(TopologyError) as caught:
        validate(topo)
    text = str(caught.value)
    assert "IP 10.0.0.1 is used by 2 interfaces: h1 at tests/test_user_mistakes.py:" in text \
        or "IP 10.0.0.1 is used by 2 interfaces: h1 at " in text
    assert ", h3 at " in text
    assert "node name 'h2' is used 2 times (at " in text


def test_warnings_are_grouped_like_errors(tmp_path, capsys):
    path = write(tmp_path, "s = topology.add_switch('s1')\nfor i in range(1, 31):\n"
                           "    topology.add_link(topology.add_host(f'h{i}', "
                           "ip=f'10.0.0.{i}/24'), s, loss=1)\n")
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, err
    assert warnings[0].startswith("warning: 30 x likely unit slip, e.g. ")
    assert warnings[0].endswith("and 27 more")
    assert main(["plan", str(path)]) == 0
    assert len([line for line in capsys.readouterr().err.splitlines()
                if line.startswith("warning:")]) == 1


RUN_OPTIONS = ["--shaping", "guest", "--bridge", "linux", "--test", "pingall", "--tdf", "5",
               "--link", "tc,bw=10,delay=5ms", "--out", "results/x", "--keep",
               "--ready-timeout", "30", "--command-timeout", "10", "--no-monitor",
               "--output-cap", "1M", "--offload", "--warm", "--strict"]


def test_validate_plan_and_advise_take_a_run_s_command_line(tmp_path, capsys):
    from selena.advise import Calibration

    assert main(["validate", "--topo", "linear,2", *RUN_OPTIONS]) == 0
    assert "linear,2: valid: experiment linear, TDF 5" in capsys.readouterr().out
    assert main(["plan", "--topo", "linear,2", *RUN_OPTIONS]) == 0
    out = capsys.readouterr().out
    assert "TDF 5" in out and "shaping in guest" in out
    cal = Calibration(9.0, 0.0, 1.0, 40.0, {}, [], [], host="lab").save(tmp_path / "c.json")
    assert main(["advise", "--topo", "linear,2", *RUN_OPTIONS,
                 "--calibration", str(cal)]) in (0, 1)
    assert "TDF" in capsys.readouterr().out


LISTING_PAIR = ('newNode(1, "h1", NodeType.LINUX_HOST, '
                '[(1000, "RANDOM", "10.0.0.1", "255.255.255.0", "")])\n'
                'newNode(2, "h2", NodeType.LINUX_HOST, '
                '[(1000, "RANDOM", "10.0.0.2", "255.255.255.0", "")])\n')


def listing(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "listing.py"
    path.write_text(LISTING_PAIR + body)
    return path


def test_a_listing_s_rate_in_bit_per_second_gets_newlink_s_advice(tmp_path):
    from selena.errors import TopologyError

    scenario = load_scenario(str(listing(tmp_path, "newLink((1, 0), (2, 0), 1e9, 0.2)\n")))
    with pytest.raises(TopologyError) as caught:
        validate(scenario.topology)
    text = str(caught.value)
    assert "newLink's rate is in Mbit/s, so 1e+09 is 1000 Tbit/s: for 1 Gbit/s write 1000" \
        in text
    assert 'rate="' not in text        # not the Python API's advice


def test_a_listing_s_latency_in_seconds_gets_newlink_s_advice(tmp_path):
    scenario = load_scenario(str(listing(tmp_path, "newLink((1, 0), (2, 0), 1000, 0.0002)\n")))
    warnings = [str(w) for w in validate(scenario.topology)]
    assert any("listing.py:3: " in w and "newLink's latency is in milliseconds, so 0.0002 is "
               "0.2 µs; for 0.0002 s write 0.2" in w for w in warnings), warnings


def test_newnode_takes_ipv6_and_prefix_lengths(tmp_path):
    path = tmp_path / "v6.py"
    path.write_text('newNode(1, "h1", NodeType.LINUX_HOST, [(1000, "RANDOM", "fd00::1", 64, "")])\n'
                    'newNode(2, "h2", NodeType.LINUX_HOST, '
                    '[(1000, "RANDOM", "fd00::2/64", "", "")])\n'
                    'newNode(3, "h3", NodeType.LINUX_HOST, '
                    '[(1000, "RANDOM", "10.0.0.3", "/24", "")])\n'
                    'newNode(4, "h4", NodeType.LINUX_HOST, '
                    '[(1000, "RANDOM", "10.0.0.4", 24, "")])\n'
                    'newLink((1, 0), (2, 0), 1000, 0.2)\nnewLink((3, 0), (4, 0), 1000, 0.2)\n')
    topo = load_scenario(str(path)).topology
    assert topo.nodes["h1"].interfaces[0].ip == "fd00::1/64"
    assert topo.nodes["h1"].interfaces[0].mac == "fe:ff:ff:00:00:01"
    assert topo.nodes["h2"].interfaces[0].ip == "fd00::2/64"
    assert topo.nodes["h3"].interfaces[0].ip == "10.0.0.3/24"
    assert topo.nodes["h4"].interfaces[0].ip == "10.0.0.4/24"
    validate(topo)


@pytest.mark.parametrize("ip, mask, message", [
    ("fd00::1", "255.255.255.0",
     "'255.255.255.0' is not a netmask or prefix length for IPv6 address fd00::1"),
    ("fd00::1", "", "fd00::1 needs a netmask or prefix length (e.g. 64)"),
    ("10.0.0.1/16", "255.255.255.0", "10.0.0.1/16 and netmask '255.255.255.0' disagree"),
    ("10.0.0", "24", "'10.0.0' is not an IPv4 or IPv6 address"),
])
def test_a_newnode_address_it_cannot_read_is_one_line(tmp_path, capsys, ip, mask, message):
    path = tmp_path / "bad.py"
    path.write_text(f'newNode(1, "h1", NodeType.LINUX_HOST, [(1000, "RANDOM", "{ip}", '
                    f'"{mask}", "")])\n')
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"bad.py:1: newNode 'h1' interface 0 (eth1): {message}" in err
    assert len(err.strip().splitlines()) == 1 and "0.0.0.0" not in err


@pytest.mark.parametrize("option, value, message", [
    # "no" is true: taken as meant, it destroyed the experiment of that name
    ("replace", "no", "replace='no': want True or False"),
    ("monitor", None, "monitor=None: want True or False"),
    ("out", "", "out='': want the results bundle's directory (a path), or None for no "
                "bundle"),
    ("out", 5, "out=5: want the results bundle's directory (a path), or None for no bundle"),
    ("output_cap", "1M", "output_cap='1M': want a whole number of bytes, 0 or more"),
    ("output_cap", 1.5, "output_cap=1.5: want a whole number of bytes, 0 or more"),
    ("finish_limit", "60", "finish_limit '60': want a finite number of seconds 0 or more"),
    ("link", 10, "link=10: want Mininet's --link text, e.g. 'tc,bw=10,delay=5ms'"),
    ("meta", ["sweep"], "meta=['sweep']: want a dict of extra meta.json keys"),
    ("meta", {"sweep": {1, 2}},
     "meta['sweep']: set cannot go into meta.json: give text, numbers, lists or dicts"),
    ("meta", {1: "x"}, "meta key 1: want text"),
    ("templates", "tiny-host", "templates='tiny-host': want \"installed\" (what this host "
                               "has), None (no check) or a set of template names"),
    ("progress", "log.txt", "progress='log.txt': want a function of one message, e.g. print"),
])
def test_a_wrong_experiment_option_is_one_line_before_anything(tmp_path, option, value,
                                                               message):
    """Each was a TypeError from deep inside, a bundle lost after the run
    (meta.json could not hold it), or a value taken as meant."""
    with pytest.raises(ValidationError) as caught:
        Experiment(pair(), backend=XlBackend(state_dir=tmp_path / "state"),
                   **{option: value})
    assert str(caught.value) == message
    assert not (tmp_path / "state").exists()


def test_a_generator_of_templates_is_refused_not_used_up(tmp_path):
    """The check would have used it up, leaving no template known."""
    with pytest.raises(ValidationError, match=r"^templates=<generator object .*>: want "
                                              r"\"installed\""):
        Experiment(pair(), backend=XlBackend(state_dir=tmp_path / "state"),
                   templates=(t for t in ["tiny-host"]))


def test_a_link_spec_applies_to_a_topology_built_in_python():
    """Experiment(topo, link=...) was ignored unless the topology came from a
    file or a --topo spec."""
    exp = Experiment(pair(), link="tc,bw=5,delay=3ms", templates=None)
    link = exp.topology.links[0]
    assert (link.rate_bps, link.delay_s) == (5e6, 0.003)
    with pytest.raises(ScenarioError, match="--link 'bw5': 'bw5' is not KEY=VALUE"):
        Experiment(pair(), link="bw5", templates=None)


def test_one_capture_may_be_given_as_text(tmp_path):
    """capture="h1,h2" was read letter by letter ("capture 'h'")."""
    backend = XlBackend(state_dir=tmp_path / "state")
    assert Experiment(pair(), backend=backend, capture="h1,h2",
                      templates=None).captures == [("h1", "h2")]
    with pytest.raises(ScenarioError) as caught:
        Experiment(pair(), backend=backend, capture=[("h1", 2)], templates=None)
    assert str(caught.value) == ("capture ('h1', 2): name a link as 'NODE,NODE' or "
                                 "('NODE', 'NODE')")
