"""End to end in the lab: warm start. A second `selena run --warm` reuses the
guests the first one left in the pool (same domains, new interfaces and
keys), its agents serve the new experiment, and `clean` empties the pool."""

import json
import re

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-warm")
SCRIPT = f"OUT={OUT}\n" + r"""
for i in 1 2; do
    rm -rf $OUT$i
    selena run scenarios/ping_pair.py --warm --out $OUT$i || exit 1
    echo "pool-after-run-$i:"; xl list | awk '/^selena-pool-/ {print $1, $2}'
done
selena clean
echo "selena-domains-after-clean=$(xl list | grep -c '^selena-')"
"""


# make test-long: make test's budget; the Debian guests' test runs the same
# warm sequence (run, warm re-run from the pool, clean) in make test.
@pytest.mark.long
def test_second_warm_run_reuses_the_pooled_guests(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=900)
    out = result.output
    assert result.returncode == 0, out
    first, second = out.split("pool-after-run-1:")[1].split("pool-after-run-2:")
    pooled_1 = re.findall(r"^(selena-pool-tiny-host-m32-c1-\d) (\d+)$", first, re.M)
    pooled_2 = re.findall(r"^(selena-pool-tiny-host-m32-c1-\d) (\d+)$", second, re.M)
    assert len(pooled_1) == 2, out
    assert sorted(d for _, d in pooled_2) == sorted(d for _, d in pooled_1), \
        "the second run must reuse (and return) the same domains"
    assert out.count("reused a pooled guest") == 2
    assert "selena-domains-after-clean=0" in out
    for i in (1, 2):
        info = json.loads((project_root() / f"{OUT}{i}/nodes/h1/1.json")
                          .read_text())
        assert info["state"] == "exited" and info["exit_code"] == 0, info
