"""Parsing of the units researchers write: rates, times, sizes, ratios.

Strings carry their unit ("1Gbit", "0.2ms", "512M", "1%"); bare numbers are
in the base unit (bit/s, seconds, bytes, ratio), except a guest's memory,
which is in MiB as in xl (memory_mb). Every error names the value and what
was expected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from selena.errors import UnitError

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "": 1, "bit": 1, "bps": 1,
    "k": 1e3, "kbit": 1e3, "kbps": 1e3,
    "m": 1e6, "mbit": 1e6, "mbps": 1e6,
    "g": 1e9, "gbit": 1e9, "gbps": 1e9,
    "t": 1e12, "tbit": 1e12, "tbps": 1e12,
}
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE_UNITS = {
    "": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024,
    "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1000**3, "gib": 1024**3,
}


def _number(value: float | int, what: str) -> float:
    """A plain number given instead of a string: no bools, NaN or infinity."""
    if isinstance(value, bool) or not math.isfinite(value):
        raise UnitError(f"{what} {value!r} is not a finite number")
    return float(value)


_UNIT = r"\s*([a-zA-Zµ/]*)"


def _split(value: str, what: str) -> tuple[float, str]:
    text = value.strip()
    m = re.fullmatch(_NUMBER + _UNIT, text)
    if not m:
        # Named for what they are: "-1ms" and "infms" (a scenario's f-string
        # of a negative or overflowed parameter) have a number and a unit.
        if re.fullmatch(r"-\s*" + _NUMBER + _UNIT, text):
            raise UnitError(f"{what} {value!r} is negative")
        if re.fullmatch(r"[-+]?(?:inf|infinity|nan)" + _UNIT, text, re.I):
            raise UnitError(f"{what} {value!r} is not a finite number")
        raise UnitError(f"{what} {value!r} is not a number with a unit")
    number = float(m.group(1))
    if not math.isfinite(number):                   # "1e999ms"
        raise UnitError(f"{what} {value!r} is not a finite number")
    return number, m.group(2).lower().removesuffix("/s")


def _scaled(value: str, what: str, table: Mapping[str, float], hint: str) -> float:
    """A "number unit" string in the base unit of `table`."""
    number, unit = _split(value, what)
    if unit not in table:
        raise UnitError(f"{what} {value!r}: unknown unit {unit!r} (use {hint})")
    return number * table[unit]


def rate_bps(value: str | float | int) -> float:
    """A link rate in bit/s: "1Gbit", "100Mbit", "10M", or a number of bit/s."""
    if isinstance(value, int | float):
        return _number(value, "rate")
    return _scaled(value, "rate", _RATE_UNITS, "bit, kbit, Mbit, Gbit")


def seconds(value: str | float | int) -> float:
    """A duration in seconds: "0.2ms", "10us", "1s", or a number of seconds."""
    if isinstance(value, int | float):
        return _number(value, "time")
    return _scaled(value, "time", _TIME_UNITS, "s, ms, us, ns")


def size_bytes(value: str | int) -> int:
    """A byte count (e.g. an output cap): "512M" and "32MiB" are binary, "1GB"
    decimal, a bare number is bytes. Not a guest's memory: memory_mb."""
    if isinstance(value, int):
        return value
    return int(_scaled(value, "size", _SIZE_UNITS, "K, M, G, MiB, GB"))


# A guest's memory is read as people (and xl) mean it: M, MB and MiB are all
# MiB; G, GB and GiB GiB. A bare number is MiB.
_MEMORY_UNITS = {
    "": 1, "m": 1, "mb": 1, "mib": 1,
    "g": 1024, "gb": 1024, "gib": 1024,
    "t": 1024**2, "tb": 1024**2, "tib": 1024**2,
    "k": 1 / 1024, "kb": 1 / 1024, "kib": 1 / 1024,
}
# The smallest guest template (tiny-host) boots in 32 MiB; the largest a guest gets.
MEMORY_MIN_MB = 32
MEMORY_MAX_MB = 1024 * 1024


def memory_mb(value: str | int) -> int:
    """A guest's memory in MiB: "512M", "512MB" and "512MiB" are 512; "1G",
    "1GB" and "1GiB" are 1024; a bare number (512 or "512") is MiB, as in an
    xl config. Whole MiB from MEMORY_MIN_MB to MEMORY_MAX_MB."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise UnitError(f"memory {value!r} is not a size (e.g. 512 or \"512M\", in MiB)")
    if isinstance(value, int):
        mb: float = value
    else:
        try:
            mb = _scaled(value, "memory", _MEMORY_UNITS, "M, G (MiB, GiB); a bare number is MiB")
        except UnitError:
            if value.strip().startswith("-"):
                raise UnitError(f"memory {value!r} is negative") from None
            raise
    if mb != int(mb):
        raise UnitError(f"memory {value!r} is not a whole number of MiB")
    if not MEMORY_MIN_MB <= mb <= MEMORY_MAX_MB:
        raise UnitError(f"memory {value!r} is {int(mb)} MiB: out of range ({MEMORY_MIN_MB} MiB, "
                        "what the smallest guest needs, to 1 TiB)")
    return int(mb)


def ratio(value: str | float | int) -> float:
    """A loss ratio: "1%" or 0.01."""
    if isinstance(value, int | float):
        return _number(value, "ratio")
    text = value.strip()
    if text.endswith("%"):
        try:
            return float(text[:-1]) / 100
        except ValueError:
            raise UnitError(f"ratio {value!r} is not a percentage") from None
    try:
        return float(text)
    except ValueError:
        raise UnitError(f"ratio {value!r} is not a number or percentage") from None


# The hypervisor keeps a TDF in thousandths (xen-patches/README.md).
TDF_MIN, TDF_MAX = 1.0, 1000.0


def tdf(value: str | float | int) -> float:
    """A time dilation factor: a finite number from 1 to 1000 with at most
    three decimals ("10", "2.5", "1.001"), exactly as the hypervisor keeps it."""
    text = str(value).strip()
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise UnitError(f"TDF {value!r} is not a number") from None
    if not number.is_finite():
        raise UnitError(f"TDF {value!r} is not a finite number")
    if not Decimal(str(TDF_MIN)) <= number <= Decimal(str(TDF_MAX)):
        raise UnitError(f"TDF {text} is out of range ({TDF_MIN:g} to {TDF_MAX:g})")
    if number != number.quantize(Decimal("0.001")):
        raise UnitError(f"TDF {text} has more than three decimals (the hypervisor keeps "
                        "thousandths)")
    return float(number)


def param_number(name: str, value: object, low: float, high: float, *,
                 whole: bool = False, unit: str = "") -> float:
    """A scenario's `--param NAME=VALUE` as a number from `low` to `high`
    (an int when `whole`); the error names the parameter and the range."""
    of = f" {unit}" if unit else ""
    try:
        number = int(str(value)) if whole else float(str(value))
    except ValueError:
        raise UnitError(f"{name}={value!r}: want {'a whole number' if whole else 'a number'}"
                        f"{' of' + of if unit else ''}") from None
    if not low <= number <= high:       # NaN fails too
        raise UnitError(f"{name}={value!r}: want {low:g} to {high:g}{of}")
    return number


def tdf_thousandths(value: float) -> int:
    """The TDF as the hypervisor holds it (1000 = real time)."""
    return int((Decimal(repr(float(value))) * 1000).to_integral_value())


def tdf_text(value: float) -> str:
    """The shortest exact decimal for a valid TDF: 10, 2.5, 1.001, 999.999."""
    milli = tdf_thousandths(value)
    whole, frac = divmod(milli, 1000)
    return f"{whole}" if not frac else f"{whole}.{frac:03d}".rstrip("0")
