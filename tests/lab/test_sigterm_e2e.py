"""End to end in the lab: `selena run` killed with SIGTERM mid-scenario (a
`kill`, a closed SSH session's SIGHUP alike) tears everything down, as
Ctrl-C does, and leaves a bundle that says it was interrupted and by what;
a sweep killed so is finished by the same command with --resume. Two-host
runs at TDF 2 and 5, jobs in the shared boot."""

import csv
import json

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

SCENARIO = "build/test-sigterm/sigterm_pair.py"
OUT = lab_results.out("test-sigterm")
MARK = "/tmp/selena-sigterm-mid"


def pair_scenario(name: str, tdf: float, run: str) -> str:
    """A scenario file: two hosts on a 10 Mbit/s, 5 ms link and `run`, the
    body of its run(exp)."""
    return f"""\
from pathlib import Path

from selena.model import Topology

topology = Topology("{name}", tdf={tdf})
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, rate="10Mbit", delay="5ms")


def run(exp):
{run}"""


def terminated_when_marked(command: str, log: str, mark: str, *, seen: str, status: str,
                           settle_s: int = 0) -> str:
    """Shell text: `command` in the background (output to `log`), a
    SIGTERM to it once `mark` exists in Dom0 (10 minutes at most, or when
    it ended first), echoing `seen` if the mark came and `status`=its exit
    status."""
    return f"""{command} > {log} 2>&1 &
pid=$!
i=0
while [ ! -e {mark} ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
    sleep 1; i=$((i + 1))
done
[ -e {mark} ] && echo {seen}
sleep {settle_s}
kill -TERM $pid
wait $pid
echo {status}=$?"""

# The scenario says when it is under way (a file in Dom0, where its run()
# executes) and then waits far longer than the test, with a command left
# running in the other guest.
BODY = pair_scenario("sigterm", 2, f"""\
    exp.cmd("h1", "echo under-way")
    exp.start("h2", "sleep 600")
    Path("{MARK}").write_text("under way")
    exp.sleep(600)
""")

SCRIPT = f"""
snap() {{
    ovs-vsctl list-br
    ip -o link | awk -F': ' '{{print $2}}' | sort
    tc qdisc show | grep ' dev vif' | sort
    xl list | awk 'NR > 1 {{print $1}}' | sort
}}
rm -rf {OUT} {MARK}
snap > /tmp/sigterm-before
{terminated_when_marked(f"selena run {SCENARIO} --out {OUT} --follow",
                        "/tmp/selena-sigterm.log",
                        MARK, seen="scenario-under-way", status="run-status", settle_s=2)}
cat /tmp/selena-sigterm.log
# What this run created and left (another job's leftovers are not its own).
snap > /tmp/sigterm-after
diff /tmp/sigterm-before /tmp/sigterm-after && echo dom0-as-before
echo "guests-left=$(xl list | grep -c selena-sigterm-)"
echo "state-files-left=$(ls /run/selena/sigterm.* 2>/dev/null | wc -l)"
echo "staging-left=$(ls -a $(dirname {OUT}) | grep -c '^\\.test-sigterm\\.')"
"""


def test_sigterm_mid_scenario_tears_down_and_records_it(lab):
    script = project_root() / SCENARIO
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(BODY)
    try:
        result = lab.run(["sh", "-c", SCRIPT], timeout=900)
    finally:
        script.unlink()
    out = result.output
    assert "scenario-under-way" in out, out
    assert "run-status=143" in out, out                    # 128 + SIGTERM
    assert "selena: interrupted by SIGTERM" in out and "Traceback" not in out, out
    assert "h1 | under-way" in out, out                    # --follow
    assert "dom0-as-before" in out, out     # bridges, links, vif qdiscs, domains
    for left in ("guests-left", "state-files-left", "staging-left"):
        assert f"{left}=0" in out, out
    meta = json.loads((project_root() / OUT / "meta.json").read_text())
    assert meta["status"] == "interrupted", meta.get("error")
    assert meta["error"]["signal"] == "SIGTERM"
    assert {c["command"]: c["state"] for c in meta["commands"]} == {
        "echo under-way": "exited", "sleep 600": "killed"}


SWEEP_SCENARIO = "build/test-sigterm/sweep_pair.py"
SWEEP_OUT = lab_results.out("test-sigterm-sweep")
HOLD = "/tmp/selena-sweep-hold"
SWEEP_MARK = "/tmp/selena-sweep-mid"

# Quick at TDF 2; at TDF 5, while HOLD exists in Dom0, it says so and waits
# far longer than the test. The file stays the same for the resume (its hash
# is what --resume holds the sweep to); HOLD gone, the run ends.
SWEEP_BODY = pair_scenario("sweepresume", 1, f"""\
    exp.cmd("h1", "echo under-way", check=True)
    exp.record("ones", [1.0, 1.0, 1.0], expected=1.0)
    if exp.tdf == 5 and Path("{HOLD}").exists():
        Path("{SWEEP_MARK}").write_text("under way")
        exp.sleep(600)
""")

SWEEP = f"selena sweep {SWEEP_SCENARIO} --tdf 2,5 --out {SWEEP_OUT} --no-plots"
SWEEP_SCRIPT = f"""
rm -rf {SWEEP_OUT} {SWEEP_MARK}; touch {HOLD}
{terminated_when_marked(SWEEP, "/tmp/selena-sweep.log", SWEEP_MARK,
                        seen="second-run-under-way", status="sweep-status")}
cat /tmp/selena-sweep.log
echo "guests-left=$(xl list | grep -c selena-sweepresume)"
sha256sum {SWEEP_OUT}/runs/tdf2-r1/meta.json > /tmp/selena-sweep-kept.sha
rm -f {HOLD}
echo ---resume---
{SWEEP} --resume
echo resume-status=$?
sha256sum -c /tmp/selena-sweep-kept.sha >/dev/null && echo first-run-untouched
echo "guests-left-after=$(xl list | grep -c selena-sweepresume)"
"""


def test_a_sweep_killed_in_its_second_run_is_finished_by_resume(lab):
    """An overnight sweep's host killed it (SIGTERM) in its second run: the
    same command with --resume keeps the first run's bundle as it is and
    runs the second again, under the same sweep."""
    script = project_root() / SWEEP_SCENARIO
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SWEEP_BODY)
    try:
        result = lab.run(["sh", "-c", SWEEP_SCRIPT], timeout=1500)
    finally:
        script.unlink()
    killed, resumed = result.output.split("---resume---")
    assert "second-run-under-way" in killed, killed
    assert "sweep-status=143" in killed and "guests-left=0" in killed, killed
    assert "run 2 of 2: TDF 5" in killed and "Traceback" not in killed, killed
    assert "run 1 of 2: TDF 2, repeat 1: finished before" in resumed, resumed
    assert "run 2 of 2: TDF 5, repeat 1; elapsed" in resumed, resumed
    assert "resumed: 1 run(s) kept from before, 1 run now" in resumed, resumed
    assert "resume-status=0" in resumed and "first-run-untouched" in resumed, resumed
    assert "guests-left-after=0" in resumed, resumed
    out = project_root() / SWEEP_OUT
    sweep_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    metas = {tdf: json.loads((out / "runs" / f"tdf{tdf}-r1" / "meta.json").read_text())
             for tdf in (2, 5)}
    assert {m["sweep_id"] for m in metas.values()} == {sweep_id}
    assert metas[5]["status"] == "ok" and metas[5]["tdf"] == 5, metas[5].get("error")
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["tdf"], r["sweep_id"]) for r in rows) == [("2", sweep_id), ("5", sweep_id)]
