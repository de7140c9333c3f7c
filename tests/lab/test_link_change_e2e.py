"""End to end in the lab: a link's delay changed mid-run at a chosen virtual
time, from a schedule file (`selena run --events FILE`): two hosts over one
link, pings every 0.2 virtual s, 30 ms one-way delay changed to 60 ms at 4.5
virtual s, at TDF 10 (where the lab's ~11 ms real floor per round trip is
~1.3 ms of virtual time). The RTT medians on each side of the change are
within 5% of 2 x each delay, the change was in force when asked, and the
bundle records it with its virtual and real time (scenarios/link_change.py).
About 90 s of lab time: 9 virtual s of pings at TDF 10 and two guests'
boot."""

import json

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-link-change")
EVENTS = lab_results.out("link-change.events")


# make test-long: make test's budget; a link reshaped in a running
# experiment is checked in make test by the TDF changes' test.
@pytest.mark.long
def test_a_delay_changed_at_a_virtual_time_is_what_the_guests_measure_on_each_side(lab):
    events = project_root() / EVENTS
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_text("# the scenario's pings run from about 0.5 to 8.5 virtual s\n"
                      "4.5 link h1 h2 delay=60ms\n")
    result = lab.run(f"rm -rf {OUT}; selena run scenarios/link_change.py --param "
                     f"change=events --events {EVENTS} --out {OUT}", timeout=900)
    assert result.returncode == 0, result.output
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok" and meta["tdf"] == 10
    [event] = meta["events"]
    assert event["target"] == "link h1 h2" and event["change"] == "delay=60ms"
    assert event["tdf"] == 10 and event["scheduled_s"] == 4.5
    # Applied within 0.1 virtual s of its time; real time is about TDF x virtual.
    check("link_change.event_applied_virtual_s", event["virtual_s"], low=4.5, below=4.6,
          unit=" s", context=event)
    start = meta["tdf_timeline"][0]
    check("link_change.event_real_minus_tdf_times_virtual_s",
          event["real_s"] - (start["real_s"] + 10 * event["virtual_s"]), low=-1.0, high=1.0,
          unit=" s", context=(start, event))
    metrics = json.loads((bundle / "metrics.json").read_text())
    for name, expected in (("rtt_ms_before", 60.0), ("rtt_ms_after", 120.0)):
        m = metrics[name]
        assert m["expected"] == expected, (name, m)
        check(f"link_change.{name}.n", m["n"], low=10, context=m)
        check(f"link_change.{name}.error_pct", m["error_pct"], low=-5.0, high=5.0, unit="%",
              samples=m.get("samples"), context=m)
