"""What the recorded lab values say about each statistical assertion's bound
(the logic of scripts/lab-thresholds; the records are lab_stats.check's).

Standard library only: the numbers must be checkable by hand.

Per assertion: the spread of the recorded values, how many the current bound
(the latest record's) would fail, and a proposed bound for a false-failure
rate of at most 1%, with what the amount of data can and cannot support:

- with n >= MIN_N runs, the proposal is the wider of a normal fit's 1% point
  (per bounded side) and the most extreme value seen plus half the central
  90% range; both are assumptions about the tail, and say so;
- distribution-free, n runs of which k fall outside a bound put the failure
  rate below the exact one-sided 95% Clopper-Pearson limit (3/n for k = 0,
  the "rule of three"): 1% needs about 300 clean runs;
- a count out of N trials (trials recorded) is also judged as a binomial
  with the pooled rate of all runs: the chance that one more run of N trials
  falls outside the bound, and the bound that keeps it at or under 1%."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MIN_N = 20
TARGET = 0.01                   # the false-failure rate asked for
Z_ONE_SIDED = 2.3263            # standard normal quantile at 1 - 0.01
Z_TWO_SIDED = 2.5758            # at 1 - 0.005 (0.5% beyond each of two bounds)


def load(*paths: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of every file, each once (the committed record and the
    cache share the lines collected from it), and how many lines were
    unreadable (a line cut by a killed run must not hide the others)."""
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    bad = 0
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not (isinstance(entry, dict) and "name" in entry and "value" in entry):
                bad += 1
                continue
            key = _key(entry)
            if key not in seen:
                seen.add(key)
                records.append(entry)
    return records, bad


def collect(cache: Path, committed: Path) -> int:
    """Append to `committed` the readable records of `cache` it does not hold
    yet, in the cache's order; how many were added. The cache lives outside
    the tree and goes with the machine; the committed file is what the
    bounds' distributions are kept in."""
    have, _ = load(committed)
    known = {_key(r) for r in have}
    fresh, _ = load(cache)
    new = [r for r in fresh if _key(r) not in known]
    if new:
        committed.parent.mkdir(parents=True, exist_ok=True)
        with committed.open("a", encoding="utf-8") as out:
            out.writelines(_key(entry) + "\n" for entry in new)
    return len(new)


def _key(entry: dict[str, Any]) -> str:
    """A record as one line, the same whatever its keys' order: what tells
    two records apart, and what the files hold."""
    return json.dumps(entry, sort_keys=True)


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(K <= k) for K ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    # In logs: the binomial coefficients of a thousand trials overflow a float.
    logs = (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
            + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(k + 1))
    return min(1.0, sum(math.exp(t) for t in logs))


def upper_limit(k: int, n: int, confidence: float = 0.95) -> float:
    """Exact one-sided Clopper-Pearson upper limit of a rate seen k times in
    n: the p with P(K <= k | n, p) = 1 - confidence (k = 0: 1 - 0.05^(1/n),
    about 3/n)."""
    if n <= 0:
        return 1.0
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if binom_cdf(k, n, mid) > 1 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class Bounds:
    low: float | None = None        # inclusive
    above: float | None = None      # exclusive
    high: float | None = None
    below: float | None = None

    @classmethod
    def of(cls, entry: dict[str, Any]) -> Bounds:
        b = entry.get("bounds") or {}
        return cls(b.get("low"), b.get("above"), b.get("high"), b.get("below"))

    @property
    def lower(self) -> float | None:
        return self.low if self.low is not None else self.above

    @property
    def upper(self) -> float | None:
        return self.high if self.high is not None else self.below

    def holds(self, value: float) -> bool:
        return not (math.isnan(value)
                    or (self.low is not None and value < self.low)
                    or (self.above is not None and value <= self.above)
                    or (self.high is not None and value > self.high)
                    or (self.below is not None and value >= self.below))

    def text(self) -> str:
        parts = [f"{sym} {_num(v)}" for sym, v in ((">=", self.low), (">", self.above),
                                                    ("<=", self.high), ("<", self.below))
                 if v is not None]
        return " and ".join(parts) or "none"


@dataclass
class Binomial:
    trials: int                     # N of the latest run
    pooled_rate: float              # sum of counts over sum of trials
    fail_probability: float         # P(one run of N trials is outside the bound)
    proposed: str                   # the count bound with P <= TARGET


@dataclass
class Summary:
    name: str
    unit: str
    n: int
    recovered: int
    lows: list[float]               # per run, the least of its values
    highs: list[float]              # per run, the greatest
    bounds: Bounds
    failed: int                     # runs the current bound fails
    tests: list[str] = field(default_factory=list)
    binomial: Binomial | None = None
    # False when its test's latest run recorded other values but not this
    # one: an assertion renamed or removed since, or one recorded only when
    # its case arises. Its bound is not one the tests hold today.
    current: bool = True

    @property
    def values(self) -> list[float]:
        return self.lows + self.highs

    def stat(self, q: float) -> float:
        return quantile(self.highs if q >= 0.5 else self.lows, q)

    def confidence(self) -> str:
        """The distribution-free statement: what n runs support."""
        limit = upper_limit(self.failed, self.n)
        return (f"{self.failed} of {self.n} outside: rate < {limit:.1%} (95%, exact); "
                f"<= 1% needs {runs_needed(self.failed)} runs with {self.failed} outside")

    def proposal(self) -> tuple[float | None, float | None] | None:
        """The proposed lower and upper bound (None where the current bound
        has no such side), or None with fewer than MIN_N runs."""
        if self.n < MIN_N:
            return None
        two = self.bounds.lower is not None and self.bounds.upper is not None
        z = Z_TWO_SIDED if two else Z_ONE_SIDED
        everything = self.values
        mean = sum(everything) / len(everything)
        sd = math.sqrt(sum((v - mean) ** 2 for v in everything) / (len(everything) - 1))
        spread = (quantile(self.highs, 0.95) - quantile(self.lows, 0.05)) / 2
        low = (min(mean - z * sd, min(self.lows) - spread)
               if self.bounds.lower is not None else None)
        high = (max(mean + z * sd, max(self.highs) + spread)
                if self.bounds.upper is not None else None)
        return low, high

    def proposed(self) -> str:
        proposal = self.proposal()
        if proposal is None:
            return f"none yet (n = {self.n} < {MIN_N})"
        low, high = proposal
        parts = []
        if low is not None:
            parts.append(f">= {_num(low)}")
        if high is not None:
            parts.append(f"<= {_num(high)}")
        return " and ".join(parts)

    def standing(self) -> str:
        """Whether the bound is set from the data: at least as wide as the
        1% proposal on every side it bounds (compared at the printed
        precision), tighter on some side, or not enough runs to tell."""
        if not self.current:
            return "not in its test's latest run (removed, renamed or conditional)"
        proposal = self.proposal()
        if proposal is None:
            return f"not yet: n < {MIN_N}"
        low, high = proposal
        tight = []
        if low is not None and float(_num(self.bounds.lower or 0.0)) > float(_num(low)):
            tight.append("lower")
        if high is not None and float(_num(self.bounds.upper or 0.0)) < float(_num(high)):
            tight.append("upper")
        if not tight:
            return "from the data: as wide as the proposal or wider"
        return f"{' and '.join(tight)} side tighter than the proposal"


def runs_needed(outside: int, rate: float = TARGET) -> int:
    """Runs for which `outside` failures put the 95% upper limit at `rate`."""
    n = outside + 1
    while upper_limit(outside, n) > rate:
        n = max(n + 1, int(n * 1.05))
    lo = max(outside + 1, int(n / 1.05) - 1)
    return next(m for m in range(lo, n + 1) if upper_limit(outside, m) <= rate)


def binomial_view(entries: Sequence[dict[str, Any]], bounds: Bounds) -> Binomial | None:
    counted = [e for e in entries if e.get("trials")]
    if not counted:
        return None
    total_k = sum(float(e["value"]) for e in counted)
    total_n = sum(int(e["trials"]) for e in counted)
    p = total_k / total_n if total_n else 0.0
    trials = int(counted[-1]["trials"])
    fail = 0.0
    if bounds.low is not None:
        fail += binom_cdf(math.ceil(bounds.low) - 1, trials, p)
    if bounds.above is not None:
        fail += binom_cdf(math.floor(bounds.above), trials, p)
    if bounds.high is not None:
        fail += 1 - binom_cdf(math.floor(bounds.high), trials, p)
    if bounds.below is not None:
        fail += 1 - binom_cdf(math.ceil(bounds.below) - 1, trials, p)
    return Binomial(trials, p, min(1.0, fail), _count_bound(bounds, trials, p))


def _count_bound(bounds: Bounds, trials: int, p: float) -> str:
    """The count bound(s) holding a run of `trials` to <= TARGET per side
    (half of it each when both sides are bounded)."""
    per_side = TARGET / 2 if bounds.lower is not None and bounds.upper is not None else TARGET
    parts = []
    if bounds.lower is not None:
        low = 0                     # P(K < low) grows with low: the last that holds
        while low < trials and binom_cdf(low, trials, p) <= per_side:
            low += 1
        parts.append(f">= {low}" if low > 0 else "none possible (>= 0)")
    if bounds.upper is not None:
        high = next(k for k in range(trials + 1) if 1 - binom_cdf(k, trials, p) <= per_side)
        parts.append(f"<= {high}")
    return " and ".join(parts) + f" of {trials}"


def node_exists(node_id: str, root: Path = REPO) -> bool:
    """Whether a recorded test node id ("path::function[params]") still
    names a test function in the source: a renamed test's old records must
    not count as the latest run of anything."""
    path, _, rest = node_id.partition("::")
    function = re.split(r"[\[:]", rest, maxsplit=1)[0]
    try:
        source = (root / path).read_text()
    except OSError:
        return False
    return re.search(rf"^\s*(async\s+)?def {re.escape(function)}\(", source, re.M) is not None


def summarize(records: Iterable[dict[str, Any]],
              exists: Callable[[str], bool] | None = None) -> list[Summary]:
    """One summary per assertion name, in name order; the bound is the
    latest record's (by time), and every run is judged against it. A name
    whose latest record came from a test function that no longer exists
    (`exists`, by default node_exists) is not current."""
    exists = functools.cache(exists or node_exists)    # one source read per test, not per name
    by_name: dict[str, list[dict[str, Any]]] = {}
    latest_run: dict[str, object] = {}      # per test, the session of its latest record
    for entry in sorted(records, key=lambda e: str(e.get("time", ""))):
        by_name.setdefault(str(entry["name"]), []).append(entry)
        if entry.get("test"):
            latest_run[str(entry["test"])] = _session(entry)
    summaries = []
    for name, entries in sorted(by_name.items()):
        bounds = Bounds.of(entries[-1])
        per_run = [[float(v) for v in e.get("values") or [e["value"]]] for e in entries]
        summaries.append(Summary(
            name=name, unit=str(entries[-1].get("unit", "")), n=len(entries),
            recovered=sum(1 for e in entries if str(e.get("source", "")).startswith("recovered")),
            lows=[min(vs) for vs in per_run], highs=[max(vs) for vs in per_run], bounds=bounds,
            failed=sum(1 for vs in per_run if not all(bounds.holds(v) for v in vs)),
            tests=sorted({str(e["test"]) for e in entries if e.get("test")}),
            binomial=binomial_view(entries, bounds),
            current=_current(entries[-1], latest_run, exists)))
    return summaries


def _current(latest: dict[str, Any], latest_run: dict[str, object],
             exists: Callable[[str], bool]) -> bool:
    test = latest.get("test")
    if not test:
        return True
    return latest_run[str(test)] == _session(latest) and exists(str(test))


def _num(value: float) -> str:
    return f"{value:.4g}"


HEADER = ("assertion", "n", "min", "p5", "median", "p95", "max", "bound", "failed",
          "proposed (<= 1%)", "what n supports", "binomial (counts)")


def row(s: Summary) -> tuple[str, ...]:
    unit = s.unit.strip()
    binomial = "-"
    if s.binomial:
        b = s.binomial
        binomial = (f"pooled rate {b.pooled_rate:.2%}; P(fail) at N = {b.trials}: "
                    f"{b.fail_probability:.1%}; bound for <= 1%: {b.proposed}")
    n = f"{s.n}" + (f" ({s.recovered} recovered)" if s.recovered else "")
    return (s.name + (f" [{unit}]" if unit else ""), n, _num(min(s.lows)), _num(s.stat(0.05)),
            _num(quantile(s.values, 0.5)), _num(s.stat(0.95)), _num(max(s.highs)),
            s.bounds.text(), str(s.failed), s.proposed(), s.confidence(), binomial)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table's lines (a cell's own bars written as slashes)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in cells) + " |" for cells in rows]
    return lines


def markdown(summaries: Sequence[Summary]) -> str:
    return "\n".join(_table(HEADER, (row(s) for s in summaries))) + "\n"


# The page's columns: HEADER's, less p5, p95 and the long statements, with
# the standing and the test files.
DOC_COLUMNS = ("assertion", "n", "min", "median", "max", "bound", "failed", "proposed (<= 1%)")
DOC_HEADER = (*DOC_COLUMNS, "standing", "test")


def doc_page(summaries: Sequence[Summary], source: str, sessions: int) -> str:
    """docs/lab-thresholds.md: every recorded assertion, its spread, its
    bound and whether the bound is set from the data, drawn from the
    committed records alone so that the page is the same on every machine
    (tests/test_lab_thresholds.py checks it against them)."""
    standings = {s.name: s.standing() for s in summaries}
    gone = [s for s in summaries if not s.current]
    enough = [s for s in summaries if s.n >= MIN_N and s.current]
    settled = [s for s in enough if standings[s.name].startswith("from the data")]
    rows = []
    for s in summaries:
        cells = dict(zip(HEADER, row(s), strict=True))
        test = ", ".join(sorted({t.split("::")[0].removeprefix("tests/lab/") for t in s.tests}))
        rows.append([cells[c] for c in DOC_COLUMNS]
                    + [standings[s.name], f"`{test}`" if test else "-"])
    lines = [
        "# The lab tests' statistical bounds, against their recorded runs",
        "",
        "<!-- Generated by scripts/lab-thresholds --write-doc from "
        f"{source}; do not edit. -->",
        "",
        f"Every statistical assertion of the lab tests (`lab_stats.check`), from {source}: "
        f"{sum(s.n for s in summaries)} values of {len(summaries)} assertions from about "
        f"{sessions} lab sessions. {len(gone)} of them {'was' if len(gone) == 1 else 'were'} "
        "not recorded by their test's "
        "latest run (an assertion removed or renamed since, or one recorded only when its "
        f"case arises). Of the others, {len(enough)} have {MIN_N} runs or more; the "
        f"bound of {len(settled)} of them is at least as wide as the proposal for a "
        "false-failure rate of at most 1% (the wider of a normal fit's 1% point and the "
        "most extreme value seen plus half the p5-p95 range; see "
        "[contributing.md](contributing.md#statistical-thresholds-of-the-lab-tests)). "
        "The bound shown is the latest record's: a bound moved in a test shows here once "
        "a lab run has recorded it. `failed` counts the recorded runs outside that bound. "
        "A side that no correct run can cross (a lateness at 0, say) shows as tighter "
        "when the normal fit reaches past it: read the standing with the quantity in mind.",
        "",
        *_table(DOC_HEADER, rows),
    ]
    return "\n".join(lines) + "\n"


def sessions(records: Iterable[dict[str, Any]]) -> int:
    """About how many lab sessions the records come from: their boots (or,
    for recovered records, their sources or times)."""
    return len({_session(r) for r in records})


def _session(record: dict[str, Any]) -> object:
    return record.get("boot") or record.get("source") or record.get("time")


def text(summaries: Sequence[Summary]) -> str:
    blocks = []
    for s in summaries:
        cells = row(s)
        blocks.append(f"{cells[0]}\n" + "".join(f"  {h}: {c}\n"
                                                for h, c in zip(HEADER[1:], cells[1:],
                                                                strict=True)
                                                if c != "-"))
    return "\n".join(blocks)
