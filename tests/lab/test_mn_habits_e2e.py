"""A Mininet user's habits end to end in the lab: mn's `--test iperf`,
`--test iperfudp` and `--test pingpair` (two --test in one run), `--host-template` for the prompt's
`iperf` and `iperfudp`, `--mac` and `--arp`, `--host cfs,cpu=0.1` (every host
capped at a tenth of the lab host's two CPUs), and Mininet's emptynet.py way
of building a net (a Mininet() without a topo, every node added to it),
with pingPair and waitConnected. Six short runs in one lab command: about
6 minutes of lab time."""

import json
import re

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-mn-habits")
EMPTYNET = "tests/lab_programs/mn_emptynet.py"


# make test-long: make test's budget; make test runs --test pingall, a
# selena.mininet script and the prompt's commands (test_interactive_e2e).
@pytest.mark.long
def test_mns_tests_options_and_emptynet_run_in_the_lab(lab):
    result = lab.run(
        f"rm -rf {OUT}; "
        f"selena run --topo minimal --link tc,bw=20 --test iperf --tdf 10 --out {OUT}/iperf; "
        "echo iperf-status=$?; "
        "selena run --topo minimal --link tcu,bw=5,use_htb=True --test pingpair "
        "--test iperfudp --tdf 10 "
        f"--out {OUT}/udp; "
        "echo udp-status=$?; "
        f"selena run --topo single,3 --host cfs,cpu=0.1 --test pingpair --out {OUT}/pingpair; "
        "echo pingpair-status=$?; "
        "printf 'iperf h1 h2 3\\niperfudp 10M h1 h2 3\\niperfudp 40M h1 h2 3\\nexit\\n' | "
        "selena run --topo single,2 --link tc,bw=20 "
        f"--host-template tools-host --tdf 10 --out {OUT}/prompt; echo prompt-status=$?; "
        "printf 'h1 ip neigh\\nh1 cat /sys/class/net/eth0/address\\nexit\\n' | selena run "
        f"--topo single,2 --mac --arp --out {OUT}/mac; echo mac-status=$?; "
        f"python3 {EMPTYNET}; echo emptynet-status=$?; "
        "xl list | grep -c selena- ; echo left-counted", timeout=1500)
    out = result.output.replace("\r\n", "\n")
    for run in ("iperf", "udp", "pingpair", "prompt", "mac", "emptynet"):
        assert f"{run}-status=0" in out, out
    # --test iperf: its two hosts moved to tools-host, the link's rate carried.
    assert "--test iperf: h1 and h2 use the tools-host template (iperf3)" in out
    metrics = json.loads((project_root() / OUT / "iperf/metrics.json").read_text())
    check("mn_habits.iperf_test_received_mbit", metrics["iperf_received_mbit"]["median"],
          16, 21, unit="Mbit/s")
    # --test pingpair: the first two hosts only.
    assert re.search(r"h1 -> h2\s+h2 -> h1\s+\*\*\* Results: 0% dropped \(2/2 received\)", out)
    # --host cfs,cpu=0.1: each host a fifth of a CPU at TDF 1 (Xen took the
    # caps: a refused one fails the deploy), the switch uncapped.
    meta = json.loads((project_root() / OUT / "pingpair/meta.json").read_text())
    assert meta["host_cpus"] == 2 and meta["cpu_time"]["s1"]["cap_percent_at_start"] == 0
    assert {meta["cpu_time"][h]["cap_percent_at_start"] for h in ("h1", "h2", "h3")} == {20}
    # The prompt's iperf on hosts --host-template gave iperf3.
    rates = re.findall(r"\*\*\* Results: \['([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", out)
    assert len(rates) == 2, out                      # --test iperf's, then the prompt's
    check("mn_habits.prompt_iperf_received_mbit", float(rates[1][0]), 16, 21, unit="Mbit/s")
    # UDP at the rate asked, in virtual time: --test iperfudp's 10M through a
    # 5 Mbit/s link (mn's tcu class, use_htb as mn takes it) arrives at the
    # link's rate; the prompt's 10M through 20
    # Mbit/s arrives whole, its 40M at the link's rate while sent at 40.
    udp = [(asked, _mbit(received), _mbit(sent)) for asked, received, sent in re.findall(
        r"\*\*\* Results: \['(\d+M)', '([\d.]+ [KMG]bits/sec)', '([\d.]+ [KMG]bits/sec)'\]",
        out)]
    assert [u[0] for u in udp] == ["10M", "10M", "40M"], out
    assert "--test iperfudp: h1 and h2 use the tools-host template (iperf3)" in out
    metrics = json.loads((project_root() / OUT / "udp/metrics.json").read_text())
    # Its --test pingpair first, as mn runs several --test in order.
    assert metrics["pingpair_received_pct"]["median"] == 100.0
    assert metrics["iperfudp_received_mbit"]["median"] == pytest.approx(udp[0][1], rel=0.01)
    check("mn_habits.udp_test_5mbit_link_received_mbit", udp[0][1], 4, 5.2, unit="Mbit/s",
          context=udp)
    check("mn_habits.prompt_udp_10m_received_mbit", udp[1][1], 9.5, 10.2, unit="Mbit/s",
          context=udp)
    check("mn_habits.prompt_udp_40m_received_mbit", udp[2][1], 16, 21, unit="Mbit/s",
          context=udp)
    check("mn_habits.prompt_udp_40m_sent_mbit", udp[2][2], 36, 41, unit="Mbit/s",
          context=udp)
    # --mac and --arp: h1's own MAC and a permanent entry for h2.
    assert re.search(r"10\.0\.0\.2 dev eth0 lladdr 00:00:00:00:00:02 .*PERMANENT", out), out
    assert "\n00:00:00:00:00:01" in out
    # emptynet.py's way: built by start(), with its nodes.
    assert "connected True" in out and "pairdropped 0.0" in out
    assert "0\nleft-counted" in out


def _mbit(rate: str) -> float:
    """iperf's "9.41 Mbits/sec" in Mbit/s."""
    number, unit = rate.split()
    return float(number) * {"K": 1e-3, "M": 1.0, "G": 1e3}[unit[0]]
