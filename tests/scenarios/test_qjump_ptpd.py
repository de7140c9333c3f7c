"""scenarios/qjump_ptpd.py: the windows a run measures in, shortened by
--param for high TDFs, and bad values refused before anything is built."""

import pytest
from scenario_module import load_scenario

from selena.errors import UnitError

qjptp = load_scenario("qjump_ptpd")


def test_the_default_windows_and_shorter_ones_by_param():
    assert qjptp.windows({}) == (10.0, 20.0, 20.0)
    assert qjptp.windows({"settle_s": "15", "idle_s": "10", "bulk_s": 10}) == (15.0, 10.0, 10.0)
    topology = qjptp.build(idle_s="10")
    assert sorted(n.name for n in topology.nodes.values()) == ["h1", "h12", "h8", "s1"]


@pytest.mark.parametrize("params, complaint", [
    ({"idle_s": "soon"}, "idle_s='soon': want a number of virtual seconds"),
    ({"bulk_s": "0.5"}, "bulk_s='0.5': want 1 to 600 virtual seconds"),
    ({"settle_s": "nan"}, "settle_s='nan': want 1 to 600"),
    ({"idle": "10"}, "unknown --param idle"),
])
def test_bad_windows_are_refused_naming_the_param(params, complaint):
    with pytest.raises((ValueError, UnitError), match=complaint):
        qjptp.build(**params)
