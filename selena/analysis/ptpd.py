"""PTPd's statistics lines (`ptpd -V`): the slave's offset from its master.

A line is `timestamp, state, clock id, one way delay, offset from master,
...`; the timestamp is the slave's own clock (UTC in the guests), which the
offset measures against the master's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from selena.errors import AnalysisError

OFFSET_COLUMN = 4


@dataclass(frozen=True)
class OffsetSample:
    t: float            # the slave's clock, epoch seconds
    offset_s: float     # offset from master, seconds


def offsets(lines: Iterable[str]) -> list[OffsetSample]:
    """Samples from the lines where the slave is synchronising (state slv);
    everything else PTPd prints (notices, other states) is skipped."""
    samples = []
    for line in lines:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) <= OFFSET_COLUMN or fields[1] != "slv":
            continue
        try:
            when = datetime.strptime(fields[0], "%Y-%m-%d %H:%M:%S.%f")
            offset = float(fields[OFFSET_COLUMN])
        except ValueError:
            continue
        samples.append(OffsetSample(when.replace(tzinfo=UTC).timestamp(), offset))
    return samples


def max_abs_offset_us(samples: Iterable[OffsetSample], start: float = -math.inf,
                      end: float = math.inf) -> float:
    """The largest |offset| (microseconds) of the samples in [start, end), by
    default all of them (PTPd's first, all-zero sample before it has any
    measurement is left out)."""
    window = [abs(s.offset_s) for s in samples if start <= s.t < end and s.offset_s != 0.0]
    if not window:
        raise AnalysisError(f"no PTPd offset samples between {start:.3f} and {end:.3f}")
    return max(window) * 1e6


# PTPd steps the clock, rather than slewing it, for an offset of a second or
# more (its servo steps whenever the offset has a whole-seconds part).
STEP_S = 1.0


def synchronised(samples: Iterable[OffsetSample], start: float,
                 end: float) -> list[OffsetSample]:
    """The samples in [start, end) after PTPd's last servo reset (an
    all-zero sample) or clock step (an offset of a second or more) among
    them, in PTPd's order: a step moves the slave's clock, so the samples
    after it carry earlier timestamps than the step's own. A slave that
    booted over a second off its master steps its clock once; that is
    synchronisation, not error."""
    inside = [s for s in samples if start <= s.t < end]
    marks = [i for i, s in enumerate(inside) if s.offset_s == 0.0 or abs(s.offset_s) >= STEP_S]
    return inside[marks[-1] + 1:] if marks else inside


def window_maxima(samples: list[OffsetSample], idle_from: float, bulk_from: float,
                  bulk_to: float) -> tuple[float, float]:
    """The largest |offset| (us) in the idle window [idle_from, bulk_from),
    after PTPd's last step or reset in it (see synchronised), and in the
    bulk window [bulk_from, bulk_to), on the slave's clock."""
    idle = synchronised(samples, idle_from, bulk_from)
    return max_abs_offset_us(idle), max_abs_offset_us(samples, bulk_from, bulk_to)
