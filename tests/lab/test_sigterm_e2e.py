"""End to end in the lab: `selena run` killed with SIGTERM mid-scenario (a
`kill`, a closed SSH session's SIGHUP alike) tears everything down, as
Ctrl-C does, and leaves a bundle that says it was interrupted and by what.
One two-host run at TDF 2, one job in the shared boot."""

import json

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

SCENARIO = "build/test-sigterm/sigterm_pair.py"
OUT = lab_results.out("test-sigterm")
MARK = "/tmp/selena-sigterm-mid"

# The scenario says when it is under way (a file in Dom0, where its run()
# executes) and then waits far longer than the test, with a command left
# running in the other guest.
BODY = f"""\
from pathlib import Path

from selena.model import Topology

topology = Topology("sigterm", tdf=2)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, rate="10Mbit", delay="5ms")


def run(exp):
    exp.cmd("h1", "echo under-way")
    exp.start("h2", "sleep 600")
    Path("{MARK}").write_text("under way")
    exp.sleep(600)
"""

SCRIPT = f"""
snap() {{
    ovs-vsctl list-br
    ip -o link | awk -F': ' '{{print $2}}' | sort
    tc qdisc show | grep ' dev vif' | sort
    xl list | awk 'NR > 1 {{print $1}}' | sort
}}
rm -rf {OUT} {MARK}
snap > /tmp/sigterm-before
selena run {SCENARIO} --out {OUT} > /tmp/selena-sigterm.log 2>&1 &
pid=$!
i=0
while [ ! -e {MARK} ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
    sleep 1; i=$((i + 1))
done
[ -e {MARK} ] && echo scenario-under-way
sleep 2
kill -TERM $pid
wait $pid
echo run-status=$?
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
    assert "dom0-as-before" in out, out     # bridges, links, vif qdiscs, domains
    for left in ("guests-left", "state-files-left", "staging-left"):
        assert f"{left}=0" in out, out
    meta = json.loads((project_root() / OUT / "meta.json").read_text())
    assert meta["status"] == "interrupted", meta.get("error")
    assert meta["error"]["signal"] == "SIGTERM"
    assert {c["command"]: c["state"] for c in meta["commands"]} == {
        "echo under-way": "exited", "sleep 600": "killed"}
