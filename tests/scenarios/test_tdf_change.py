"""scenarios/tdf_change.py's `--param tdfs=...`: the sequence a run deploys
at and changes through, and a bad one refused naming what was given."""


import pytest
from scenario_module import load_scenario

tdf_change = load_scenario("tdf_change")


def test_the_default_is_the_issue_sequence_and_the_topology_starts_at_its_first_tdf():
    assert tdf_change.tdf_sequence(tdf_change.DEFAULT_TDFS) == (2, 20, 5)
    assert tdf_change.build().tdf == 2
    assert tdf_change.build(tdfs="7.5,3").tdf == 7.5


@pytest.mark.parametrize("text, complaint", [
    ("2", "tdfs='2': want at least two TDFs"),
    ("2,x,5", "tdfs='2,x,5': want TDFs separated by commas"),
])
def test_a_bad_sequence_is_refused_naming_it(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        tdf_change.tdf_sequence(text)
