"""`selena validate` on files and specs, as a user runs it."""

from pathlib import Path

from selena.cli import main

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_validate_paper_listing(capsys):
    assert main(["validate", str(SCENARIOS / "paper_listing1.py")]) == 0
    out = capsys.readouterr().out
    assert "valid: experiment paper-listing1, TDF 1, 2 hosts, 1 other nodes, 2 links" in out
    assert "8 scenario actions" in out


def test_validate_clean_api_file_with_tdf_override(capsys):
    assert main(["validate", str(SCENARIOS / "two_hosts.py"), "--tdf", "2.5"]) == 0
    assert "experiment twohosts, TDF 2.5, 2 hosts" in capsys.readouterr().out


def test_validate_mininet_style_specs(capsys):
    assert main(["validate", "linear,3", "--link", "tc,bw=10,delay=5ms,loss=1"]) == 0
    assert "3 hosts, 3 other nodes, 5 links" in capsys.readouterr().out


def test_bad_input_exits_non_zero_naming_the_item(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("from selena.model import Topology\n"
                   "topology = Topology('bad')\n"
                   "a = topology.add_host('a', ip='10.0.0.1/24')\n"
                   "b = topology.add_host('b', ip='10.0.1.1/24')\n"
                   "topology.add_link(a, b, delay='20s')\n")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "link a:eth0--b:eth0: ends are in different subnets" in err
    assert "delay 20 s out of range" in err


def test_bad_specs_are_named(capsys):
    assert main(["validate", "ring,3"]) == 1
    assert "unknown topology 'ring'" in capsys.readouterr().err
    assert main(["validate", "linear,3", "--link", "tc,bw=fast"]) == 1
    assert "bad value for bw: 'fast'" in capsys.readouterr().err
    assert main(["validate", "missing.py"]) == 1
    assert "no such scenario file: missing.py" in capsys.readouterr().err
