"""QJump in SELENA (seed 004), memcached part, scaled to the lab: memcached's
request latency as memaslap sees it, on an idle network and while bulk
traffic shares the server's link (the paper's Table II and Figure 10, at its
TDF 10), with priority queueing (Figure 14) and with CPU time scaling
(Figures 11 and 12).

    selena lab build --scenario scenarios/qjump_memcached.py
    selena lab run -- selena run scenarios/qjump_memcached.py --out build/results/qjmc
    ... --param prio=1      requests and replies in precedence 4 (QJump level 4)
    ... --param cpu=real    every host capped to 100/TDF % of a CPU (cpu_time="real";
                            the switch guest is not)
    ... --param concurrency=8   more requests in flight than the scaled 2
    ... --param concurrency=128 the paper's own 128, unscaled (see below)

The paper's workload: memaslap (`memcaslap` in Debian) on H3 against
memcached on H11, binary protocol, mixed GET/SET (memaslap's 9:1), 1 KB
values, 2 threads, 128 concurrent requests; Hadoop's shuffle crossing
H11's link is bulk iperf3 from H8 to H11 here. Scaled to the lab, and
stated: three of the paper's twelve hosts on one Open vSwitch guest, one
vCPU each (as SELENA's VMs); links of 100 Mbit/s (the paper's 10 Gbit/s
divided by 100) with 0.02 ms of delay and queues holding the paper's 100
packets' time at 10 Gbit/s (0.12 ms; selena.scaling); the requests in
flight scaled with the rates too (selena.scaling.scaled_window): 128 / 100,
at least memaslap's one per thread, so 2. Unscaled, 128 KB in flight
against a queue of 1.5 KB lost most of every burst: in the lab (TDF 10,
2026-11-28) the idle window's requests took 75 ms on average, up to
4.5 s, and memaslap's 5 s window ran 55 virtual s waiting out TCP's
retransmission timeouts; with 2 in flight 1.9 ms, 12.2 ms beside iperf3
and 2.4 ms beside it with the priority queue. Each
concurrency's key window is 1k keys (the smallest memaslap takes) rather
than its default 10k, so the client fits its 160 MB guest (memcached keeps
Debian's 64 MB cache: gets of evicted keys count as get_misses, recorded);
runs of 5 virtual seconds. With prio=1 each link direction queues by IP
precedence in strict-priority bands (selena/shaping/prio.py, standing in
for the QJump module), and nftables in the client and the server marks
memcached's packets with precedence 4 (DSCP CS4) as QJump's level 4 does.
memaslap's statistics are in the client's metrics.json:
`memcached_<phase>_{mean,std}_us`, `_tps`, `_get_misses`, and
`_log2_hist` (requests per power-of-two latency bucket: sample k counts
the requests that took more than 2^(k-1) and at most 2^k us); with prio=1
also the packets the nftables rules marked (`memcached_marked_requests`,
`memcached_marked_replies`).
"""

import re

from selena.analysis.memaslap import parse
from selena.metrics import IPERF3_PORT
from selena.model import Topology
from selena.scaling import paper_queue_s, scaled_link, scaled_window
from selena.units import param_number

TDF = 10
RUN_S = 5
PORT = 11211
PAPER_CONCURRENCY = 128
THREADS = 2
# The scaling rule (docs/reproductions.md): the paper's 10 Gbit/s links divided
# by 100, its 100-packet switch queue kept as a time (0.12 ms), its netem delay,
# and its requests in flight divided too (at least one per memaslap thread).
PAPER_RATE, FACTOR = "10Gbit", 100
LINK = scaled_link(PAPER_RATE, FACTOR, queue_s=paper_queue_s(100, PAPER_RATE), delay="0.02ms")
CONCURRENCY = scaled_window(PAPER_CONCURRENCY, FACTOR, least=THREADS)


def concurrency_of(value) -> int:
    """memaslap's -c from --param concurrency (at least its 2 threads)."""
    return int(param_number("concurrency", value, 2, 1024, whole=True,
                            unit="requests in flight (memaslap runs 2 threads)"))


def memaslap(concurrency: int) -> str:
    return (f"memcaslap -s 10.0.9.11:{PORT} -B -T {THREADS} -c {concurrency} -X 1024 -w 1k "
            f"-t {RUN_S}s -S {RUN_S}s")


HOSTS = (("h3", 3), ("h8", 8), ("h11", 11))


def _flag(value) -> bool:
    return str(value).lower() in ("1", "yes", "true")


def build(prio="0", cpu="dilated", concurrency=CONCURRENCY):
    concurrency_of(concurrency)         # refused before anything is created
    prio = _flag(prio)
    name = "qjmc" + ("p" if prio else "") + ("r" if cpu == "real" else "")
    topology = Topology(name, tdf=TDF)
    s1 = topology.add_switch("s1")
    for host, last in HOSTS:
        node = topology.add_host(host, ip=f"10.0.9.{last}/24", template="qjump-host",
                                 cpu_time=cpu)
        topology.add_link(node, s1, **LINK, prio=prio)
    return topology


# Debian's memcached listens on localhost: open it to the link, restart it
# and wait for the socket (systemd calls it active before it listens).
SERVE = (f"sed -i 's/^-l 127.0.0.1/-l 0.0.0.0/' /etc/memcached.conf && "
         f"systemctl restart memcached && "
         f"for i in $(seq 100); do ss -ltn | grep -q ':{PORT} ' && exit 0; sleep 0.1; done; "
         f"exit 1")


def _mark(port_match: str) -> str:
    """nftables rules giving memcached's packets IP precedence 4 (CS4)."""
    return ("nft add table ip qjump && "
            "nft add chain ip qjump out '{ type filter hook output priority 0; }' && "
            f"nft add rule ip qjump out tcp {port_match} {PORT} counter ip dscp set cs4")


def _marked_packets(exp, node: str) -> int:
    """How many packets the node's marking rule has given precedence 4."""
    listing = exp.cmd(node, "nft list chain ip qjump out", check=True).stdout.decode()
    found = re.search(r"counter packets (\d+)", listing)
    if found is None:
        raise ValueError(f"{node}: no counter in the marking rule:\n{listing}")
    return int(found.group(1))


def _record(exp, phase: str, stdout: bytes) -> None:
    report = parse(stdout.decode(errors="replace"))
    total = report.total
    exp.record(f"memcached_{phase}_mean_us", total.mean_us, unit="us")
    exp.record(f"memcached_{phase}_std_us", total.std_us, unit="us")
    exp.record(f"memcached_{phase}_tps", report.tps, unit="requests/s")
    exp.record(f"memcached_{phase}_get_misses", report.get_misses, unit="requests")
    top = max(total.log2_counts)
    exp.record(f"memcached_{phase}_log2_hist",
               [total.log2_counts.get(k, 0) for k in range(top + 1)], unit="requests")


def run(exp):
    load = memaslap(concurrency_of(exp.params.get("concurrency", CONCURRENCY)))
    exp.cmd("h11", SERVE, check=True)
    if _flag(exp.params.get("prio", "0")):
        exp.cmd("h3", _mark("dport"), check=True)
        exp.cmd("h11", _mark("sport"), check=True)
    exp.cmd("h3", "ping -c 3 -W 2 10.0.9.11", check=True)       # learn the path
    idle = exp.cmd("h3", load, check=True)
    _record(exp, "idle", idle.stdout)
    exp.start("h11", "exec iperf3 -s -1")
    exp.wait_listening("h11", IPERF3_PORT)
    bulk = exp.start("h8", f"iperf3 -c 10.0.9.11 -t {RUN_S + 3}")
    exp.sleep(2)            # past slow start: the queue toward H11 is full
    shared = exp.cmd("h3", load, check=True)
    _record(exp, "bulk", shared.stdout)
    exp.wait(bulk, check=True)
    if _flag(exp.params.get("prio", "0")):
        # The marking did happen: requests from the client, replies from the server.
        exp.record("memcached_marked_requests", _marked_packets(exp, "h3"), unit="packets")
        exp.record("memcached_marked_replies", _marked_packets(exp, "h11"), unit="packets")
