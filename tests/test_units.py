import pytest

from selena import units
from selena.errors import UnitError


@pytest.mark.parametrize("text,bps", [("1Gbit", 1e9), ("100Mbit", 1e8), ("10M", 1e7),
                                      ("2.5gbps", 2.5e9), ("64kbit", 64e3), (1500, 1500.0)])
def test_rates(text, bps):
    assert units.rate_bps(text) == bps


@pytest.mark.parametrize("text,secs", [("0.2ms", 2e-4), ("10us", 1e-5), ("1s", 1.0),
                                       ("5", 5.0), (0.01, 0.01)])
def test_times(text, secs):
    assert units.seconds(text) == pytest.approx(secs)


def test_sizes_are_binary_unless_decimal_unit():
    assert units.size_bytes("512M") == 512 * 1024**2
    assert units.size_bytes("32MiB") == 32 * 1024**2
    assert units.size_bytes("1GB") == 10**9


def test_ratios():
    assert units.ratio("1%") == pytest.approx(0.01)
    assert units.ratio(0.2) == 0.2


@pytest.mark.parametrize("call,value,message", [
    (units.rate_bps, "fast", "rate 'fast' is not a number"),
    (units.rate_bps, "10 furlongs", "unknown unit 'furlongs'"),
    (units.seconds, "3 days", "unknown unit 'days'"),
    (units.size_bytes, "12 parsecs", "unknown unit 'parsecs'"),
    (units.ratio, "lots%", "not a percentage"),
    # A negative or overflowed value is named as such, not as "not a number".
    (units.seconds, "-1ms", "^time '-1ms' is negative$"),
    (units.rate_bps, "- 5 Mbit", "^rate '- 5 Mbit' is negative$"),
    (units.seconds, "infms", "^time 'infms' is not a finite number$"),
    (units.rate_bps, "NaN Mbit", "^rate 'NaN Mbit' is not a finite number$"),
    (units.seconds, "1e999ms", "^time '1e999ms' is not a finite number$"),
    (units.size_bytes, "-3M", "^size '-3M' is negative$"),
])
def test_bad_units_name_the_value(call, value, message):
    with pytest.raises(UnitError, match=message):
        call(value)


@pytest.mark.parametrize("fn,value", [
    (units.rate_bps, float("nan")), (units.rate_bps, True),
    (units.seconds, float("inf")), (units.ratio, float("nan")),
])
def test_plain_numbers_must_be_finite(fn, value):
    with pytest.raises(UnitError, match="is not a finite number"):
        fn(value)


def test_scenario_params_are_numbers_in_range_named_in_errors():
    assert units.param_number("idle_s", "10", 1, 600) == 10.0
    assert units.param_number("concurrency", 8, 2, 1024, whole=True) == 8
    for value, complaint in (("soon", "idle_s='soon': want a number of virtual seconds"),
                             ("0.5", "idle_s='0.5': want 1 to 600 virtual seconds"),
                             ("inf", "want 1 to 600"), ("nan", "want 1 to 600")):
        with pytest.raises(UnitError, match=complaint):
            units.param_number("idle_s", value, 1, 600, unit="virtual seconds")
    with pytest.raises(UnitError, match="c='8.5': want a whole number$"):
        units.param_number("c", "8.5", 2, 1024, whole=True)
