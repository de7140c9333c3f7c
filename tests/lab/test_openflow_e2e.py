"""End to end in the lab: Open vSwitch switch guests, standalone and under an
OpenFlow controller with the switch model on the channel (issue 6).

The third test is a short, overloaded run of Figure 11's setup (scenarios/
switch_model_fct.py): 2 virtual seconds of 100 kB flows at 40 flows/s per
profile, TDF 10. With Open vSwitch's own control plane (`ideal`) no flow
waits for a SYN retransmission; the Pica8 profile's budget of 50 packet_in/s
(a burst of 5) cannot carry the 80 packet_ins/s of 40 new connections (a SYN
and a SYN-ACK each), so many handshakes lose a packet and those flows
complete whole seconds later: Linux retransmits a SYN after 1 s and 3 s, a
SYN-ACK 1 s after each attempt. The load is chosen so the verdict is not a
matter of luck: at Figure 11's own 10 flows/s, a simulation of the token
bucket over Poisson arrivals gives a short run no slow flow at all in more
than one run in twenty; at 40 flows/s about 60% of the flows are slow, and
fewer than 30% in under one run in a thousand. The paper's load, 30 s per
profile, is `make reproduce-fct` (outside `make test`).

flowgen gives a flow up 4 virtual seconds after its start (SELENA_FCT_TIMEOUT):
a flow whose SYN was lost twice ends about 3 s late and is still measured;
one whose third SYN was lost too would end 7 s late (70 s of real time at
TDF 10 after the last start) and is counted as slow instead, which is all
the test asks of it."""

import json
import re

import lab_results
import pytest
from lab_stats import check

from selena.analysis.fct import analyze, parse_flowgen_csv
from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-openflow")
TDF = 10
# Where a flow that lost handshake packets to the packet_in limit can end up:
# whole numbers of TCP's 1 s initial retransmission timeout later.
RETRANSMISSION_STEPS_S = tuple(float(t) for t in range(1, 16))
# Virtual seconds after its start at which flowgen gives a flow up (status
# `timeout`): past the 3 s step plus the slack the step check allows.
FLOW_TIMEOUT_S = 4


def test_standalone_switch_forwards_between_two_hosts(lab):
    out = f"{OUT}-standalone"
    result = lab.run(["sh", "-c", f"rm -rf {out}; selena run scenarios/standalone_switch.py "
                                    f"--out {out}"], timeout=600)
    assert result.returncode == 0, result.output
    s1 = project_root() / out / "nodes" / "s1"
    counters = next(text for text in (p.read_text() for p in s1.glob("*.stdout"))
                    if "lookups" in text)
    lookups = re.search(r"hit:(\d+) missed:(\d+) lost:(\d+)", counters)
    assert lookups, counters
    hit, missed, lost = map(int, lookups.groups())
    # ovs-vswitchd saw the misses and installed flows: nothing lost, and the
    # later pings were forwarded by the datapath's flow cache.
    assert lost == 0 and missed > 0 and hit > 0, counters


# make test-long: make test's budget; a switch guest forwards in make test
# (the standalone switch), static flows only here.
@pytest.mark.long
def test_static_flows_forward_around_a_ring_of_switches_without_flooding(lab):
    """Three switch guests in a loop, forwarding by static flows alone: every
    pair reaches every other, and the switch off h1-h2's path saw none of
    their packets (a learning bridge would have flooded them around)."""
    out = f"{OUT}-static"
    result = lab.run(["sh", "-c", f"rm -rf {out}; selena run scenarios/static_routes.py "
                                    f"--out {out}"], timeout=900)
    assert result.returncode == 0, result.output
    assert "switch s1: 3 ports, 6 static flows" in result.output
    s3 = project_root() / out / "nodes" / "s3"
    dump = next(text for text in (p.read_text() for p in s3.glob("*.stdout"))
                if "nw_dst" in text)
    packets = {m.group(2): int(m.group(1)) for m in
               re.finditer(r"n_packets=(\d+).*?ip,nw_dst=(10\.0\.0\.\d)", dump)}
    assert set(packets) == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, dump
    assert packets["10.0.0.1"] == packets["10.0.0.2"] == 0, dump


# make test-long: make test's budget; a short reproduction, as `make
# reproduce-fct` is the long one. The switch model and the of-controller
# app are tested against private Open vSwitch sandboxes in make test.
@pytest.mark.long
def test_switch_model_fct_ideal_has_no_syn_retransmissions_and_pica8_has_many(lab, tmp_path):
    out = f"{OUT}-fct"
    script = (f"rm -rf {out}; SELENA_FCT_DURATION=2 SELENA_FCT_RATE=40 SELENA_FCT_SIZE=100000 "
              f"SELENA_FCT_TIMEOUT={FLOW_TIMEOUT_S} "
              # as the reproduction runs it: no latency probe, whose pings
              # would be packet_ins the paper's switch never saw
              f"selena run scenarios/switch_model_fct.py --tdf {TDF} --no-latency-probe "
              f"--out {out}")
    result = lab.run(["sh", "-c", script], timeout=1200)
    assert result.returncode == 0, result.output
    assert "switch s1: 2 ports, switch model ideal" in result.output, result.output
    bundle = project_root() / out
    assert json.loads((bundle / "meta.json").read_text())["tdf"] == TDF
    records = {p: parse_flowgen_csv((bundle / f"fct-{p}.csv").read_text(), source=p)
               for p in ("ideal", "pica8-p3290")}
    for profile, flows in records.items():
        # 2 s at 40 flows/s from flowgen's fixed seed; every flow completed,
        # or was given up at FLOW_TIMEOUT_S (counted as slow below).
        assert len(flows) >= 50, f"{profile}: only {len(flows)} flows"
        assert all(f.status in ("ok", "timeout") for f in flows), \
            [f for f in flows if f.status not in ("ok", "timeout")]
    # Completion times of the flows that completed; a flow given up is slow.
    ideal = [f.fct_s for f in records["ideal"] if f.ok]
    pica8 = [f.fct_s for f in records["pica8-p3290"] if f.ok]
    ideal_unfinished = [f.fct_s for f in records["ideal"] if not f.ok]
    pica8_unfinished = [f.fct_s for f in records["pica8-p3290"] if not f.ok]
    # Open vSwitch's control plane drops no handshake packet; a few flows in
    # a hundred are left to the lab itself (a CI run once had one 2.1 s flow
    # in ~100 at a quarter of this load).
    ideal_slow = [x for x in ideal if x > 1.0] + ideal_unfinished
    n_ideal = len(records["ideal"])
    check("fct.ideal.slow_flows", len(ideal_slow), high=0.05 * n_ideal, trials=n_ideal,
          samples=ideal + ideal_unfinished, context=ideal_slow)
    slow = [x for x in pica8 if x > 1.0]
    n_pica8 = len(records["pica8-p3290"])
    check("fct.pica8.slow_flows", len(slow) + len(pica8_unfinished), low=0.30 * n_pica8,
          trials=n_pica8, samples=pica8 + pica8_unfinished)
    # The slow flows sit on the retransmission steps: each lies within the
    # ideal profile's slowest handshake-clean flow after a step, plus half a
    # second: at this load a flow's first data packets can also reach the
    # controller before its entry is in and meet the packet_in budget, and
    # TCP resends them after its 200 ms minimum timeout (one run had flows
    # 0.33 and 0.35 s past a step, the ideal's slowest flow being 0.07 s).
    reach = max(x for x in ideal if x <= 1.0) + 0.5
    past_step = [min(x - t for t in RETRANSMISSION_STEPS_S if t <= x) for x in slow]
    check("fct.pica8.slow_flow_past_step_s", past_step, high=reach, unit=" s")
    # The figure itself, plotted on the host (the lab's Dom0 has no matplotlib).
    summaries = analyze(records, tmp_path, plot=True)
    assert (tmp_path / "fct_cdf.png").stat().st_size > 10_000
    assert summaries["ideal"].over_1s < summaries["pica8-p3290"].over_1s
