"""End to end in the lab: full Debian guests (the debian template), with an
image variant that adds a Debian package, serving a tiny busybox host, from
a scenario file and from SELENA's own style (newNode with
NodeType.DEBIAN_HOST)."""

import json
import re
from pathlib import Path

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-debian")
LISTING_OUT = lab_results.out("test-debian-listing")
# The scenario twice with --warm: the second run reuses the pooled guests;
# then the same Debian guest in SELENA's style, reused once more.
WARM = f"OUT={OUT}\nLISTING_OUT={LISTING_OUT}\n" + r"""
for i in 1 2; do
    rm -rf $OUT$i
    selena run scenarios/debian_memcached.py --warm --out $OUT$i \
        || exit 1
    echo "pool-after-run-$i:"; xl list | awk '/^selena-pool-/ {print $1, $2}'
done
rm -rf $LISTING_OUT
selena run scenarios/debian_listing.py --warm --out $LISTING_OUT || exit 1
selena clean
echo "selena-domains-after-clean=$(xl list | grep -c '^selena-')"
"""
UNBUILT = lab_results.out("test-debian-unbuilt.py")
UNBUILT_OUT = lab_results.out("test-debian-unbuilt")


def _outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    base = bundle / "nodes" / node
    return [(json.loads(p.read_text()), (base / f"{p.stem}.stdout").read_text(errors="replace"))
            for p in sorted(base.glob("*.json"), key=lambda p: int(p.stem))]


def test_a_two_vcpu_debian_guest_serves_memcached_to_a_tiny_host_cold_and_warm(lab):
    result = lab.run(["sh", "-c", WARM], timeout=1200)
    out = result.output
    assert result.returncode == 0, out
    for i in (1, 2):
        bundle = project_root() / f"{OUT}{i}"
        meta = json.loads((bundle / "meta.json").read_text())
        assert meta["status"] == "ok", meta
        m1 = _outputs(bundle, "m1")
        assert m1[0][1].strip().endswith("active"), m1[0]
        facts = m1[1][1].splitlines()
        # Two vCPUs, Debian's own kernel, systemd up with no failed unit.
        assert facts[0] == "2" and facts[1].startswith("Linux 6.1."), facts
        assert facts[2] == "running", facts
        # The agent configured both addresses from the topology; memcached listens.
        assert re.search(r"^eth0\s+UP\s+10\.0\.7\.2/24 fd00:7::2/64", m1[1][1], re.M), m1[1][1]
        assert re.search(r"LISTEN .*0\.0\.0\.0:11211", m1[1][1]), m1[1][1]
        h1 = _outputs(bundle, "h1")
        assert h1[0][0]["exit_code"] == 0
        assert "STORED" in h1[0][1] and "VALUE greeting 0 5\nhello" in h1[0][1], h1[0][1]
        assert "3 packets received" in h1[1][1], h1[1][1]
    # Warm start: the Debian guest went to the pool, came back, went again.
    first, second = out.split("pool-after-run-1:")[1].split("pool-after-run-2:")
    pattern = r"^(selena-pool-debian-m128-c2-d[0-9a-f]{8}-\d) (\d+)$"
    pooled_1, pooled_2 = re.findall(pattern, first, re.M), re.findall(pattern, second, re.M)
    assert len(pooled_1) == 1, out
    assert pooled_2 == pooled_1, "the second run must reuse (and return) the same domain"
    # m1 and h1 in the second run, m1 in the listing's.
    assert out.count("reused a pooled guest") == 3, out
    assert "selena-domains-after-clean=0" in out
    # SELENA's style: the Debian node's first interface is eth1, as newNode's are.
    listing = project_root() / LISTING_OUT
    assert json.loads((listing / "meta.json").read_text())["status"] == "ok"
    m1 = _outputs(listing, "m1")
    assert [info["exit_code"] for info, _ in m1] == [0, 0], m1
    assert re.search(r"^eth1\s+UP\s+10\.0\.7\.2/24", m1[1][1], re.M), m1[1][1]
    ((_, text),) = _outputs(listing, "H1")
    assert "STORED" in text and "VALUE listing 0 7\ndebian!" in text, text


def test_a_package_variant_that_is_not_built_fails_before_any_guest(lab):
    script = project_root() / UNBUILT
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text('from selena.model import Topology\n'
                      'topology = Topology("debunbuilt", tdf=2)\n'
                      'topology.add_host("m9", template="debian", packages=["ptpd", "nginx"])\n'
                      'def run(exp):\n    pass\n')
    try:
        result = lab.run(f"selena run {UNBUILT} --out {UNBUILT_OUT}; echo run-status=$?; "
                         "xl list | grep -c selena- ; echo leftovers-counted", timeout=300)
    finally:
        script.unlink()
    out = result.output
    assert re.search(r"node m9: the debian image with packages nginx, ptpd is not built", out), out
    assert "selena lab build --scenario" in out, out
    assert "run-status=0" not in out and "0\nleftovers-counted" in out, out
