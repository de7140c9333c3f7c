"""End to end in the lab: deploy the two-host topology, then clean up exactly."""

import re

import pytest
from line_stamps import stamper

pytestmark = pytest.mark.lab

SCRIPT = r"""
snap() {
    ovs-vsctl list-br
    ip -o link | awk -F': ' '{print $2}' | sort
    tc qdisc show | sort
    xl list | awk 'NR > 1 {print $1}' | sort
}
ovs-vsctl add-br foreign0          # someone else's bridge: must survive
snap > /tmp/before
for tdf in 10 1; do
    selena deploy scenarios/two_hosts.py --tdf $tdf || exit 1
    xl list
    echo "tdf-of-h1=$(selena-tdf get $(xl domid selena-twohosts-h1))"
    for n in h1 h2; do
        echo "clock-$tdf-$n $(selena-tdf status $(xl domid selena-twohosts-$n) | tr '\n' ' ')"
    done
    if [ $tdf = 10 ]; then
        # Into a node of the deployed experiment, from another process.
        selena exec twohosts h1 ping -c 1 -W 5 10.0.0.2; echo "exec-ping-rc=$?"
        selena exec twohosts h2 'echo to-stderr >&2; exit 7'; echo "exec-exit-rc=$?"
        # Its output as it comes: 0.2 virtual s apart are 2 real s at TDF 10.
        selena exec twohosts h1 'echo first; sleep 0.2; echo second' | STAMPER
        sed 's/^/exec-stamped /' /tmp/selena-exec-stamped
        selena pause twohosts && selena status | head -1
        selena exec twohosts h1 true; echo "exec-paused-rc=$?"
        selena resume twohosts
    fi
    if [ $tdf = 10 ]; then
        # Several domains from one process, stopping at the first refusal (Dom0's).
        h1=$(xl domid selena-twohosts-h1)
        h2=$(xl domid selena-twohosts-h2)
        selena-tdf set $h1 0 $h2 3; echo "multi-set-rc=$?"
        echo "multi-set-h1=$(selena-tdf get $h1) h2=$(selena-tdf get $h2)"
        # A guest that has run keeps its clock: only a new domain's moves.
        selena-tdf align $h2 $h1; echo "align-running-rc=$?"
        echo "align-running-h2=$(selena-tdf get $h2)"
    fi
    tc qdisc show | grep netem
    selena status
    if [ $tdf = 10 ]; then selena clean; else selena destroy twohosts; fi
    snap > /tmp/after
    diff /tmp/before /tmp/after && echo "dom0-restored-after-tdf-$tdf"
done
ovs-vsctl br-exists foreign0 && echo foreign-bridge-kept
""".replace("STAMPER", stamper("/tmp/selena-exec-stamped"))


def _virtual_apart_ns(out: str, tdf: int) -> int:
    """How far apart h1's and h2's virtual clocks are, from `selena-tdf
    status` of each read one after the other (each with its real instant)."""
    clocks = []
    for node in ("h1", "h2"):
        line = re.search(rf"^clock-{tdf}-{node} (.*)$", out, re.M)
        assert line, out
        fields = dict(re.findall(r"(\w+) (\S+)", line.group(1)))
        assert fields["tdf"] == str(tdf) and fields["frozen"] == "no", line.group(0)
        clocks.append((int(fields["virtual_ns"]), int(fields["real_ns"])))
    (v1, r1), (v2, r2) = clocks
    return abs(v2 - v1 - round((r2 - r1) / tdf))


def test_deploy_two_hosts_at_tdf_10_and_1_then_clean_restores_dom0(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=600)
    out = result.output
    assert result.returncode == 0, out
    assert len(re.findall(r"^selena-twohosts-h[12]\s+\d+\s+32\s", out, re.M)) == 4
    assert "tdf-of-h1=10" in out and "tdf-of-h1=1" in out
    assert "multi-set-rc=1" in out and "multi-set-h1=3 h2=10" in out, out
    # selena exec wrote each line as it came, not both at the command's end.
    stamps = dict((line, float(t)) for t, line in
                  re.findall(r"^exec-stamped ([\d.]+) (first|second)$", out, re.M))
    assert stamps.keys() == {"first", "second"} and stamps["second"] - stamps["first"] >= 1.5, out
    assert "set 1 of 3 domain(s) before domain 0" in out and "keep real time" in out
    assert "align-running-rc=1" in out and "align-running-h2=10" in out, out
    assert "only a domain that has never run can be" in out, out
    # 5 ms one-way delay: 50 ms of real delay at TDF 10, 5 ms at TDF 1, on both vifs
    assert len(re.findall(r"netem .* delay 50ms", out)) == 2
    assert len(re.findall(r"netem .* delay 5ms", out)) == 2
    # `selena deploy` left them to no run; status names each node's domain.
    domids: dict[str, str] = {}
    for name, domid in re.findall(r"^(selena-twohosts-h[12])\s+(\d+)\s", out, re.M):
        domids.setdefault(name, domid)      # the TDF 10 deploy's, listed first
    assert ("twohosts: TDF 10, 2 guests, 1 bridges; no run holds it\n"
            f"  h1 (domain {domids['selena-twohosts-h1']}), "
            f"h2 (domain {domids['selena-twohosts-h2']})\n") in out, out
    assert re.search(r"^1 packets transmitted, 1 (packets )?received", out, re.M), out
    assert "exec-ping-rc=0" in out and "to-stderr\nexec-exit-rc=7" in out, out
    assert ("twohosts: TDF 10, 2 guests, 1 bridges; no run holds it; paused (`selena resume "
            "twohosts`)") in out, out
    assert ("selena: error: experiment twohosts is paused: its guests run nothing until "
            "`selena resume twohosts`\nexec-paused-rc=1") in out, out
    assert "dom0-restored-after-tdf-10" in out and "dom0-restored-after-tdf-1" in out
    assert "foreign-bridge-kept" in out
    # Both guests' clocks (so their wall clocks) started at one virtual
    # instant: set one after the other as they were created, they were
    # the sets' spread x (1 - 1/TDF) apart at TDF 10.
    assert _virtual_apart_ns(out, 10) < 1_000_000
    assert _virtual_apart_ns(out, 1) < 1_000_000     # real time, both
