"""The held-out case of issue 33: clients sending at once through a star's
switch over shaped links, with pings, and no expected values recorded.

In the lab at TDF 1 this measured an RTT median 2.3 times the configured one
and TCP goodput 22 % below the link rate while the old monitor said `ok`;
the latency signal (docs/fidelity.md) now makes such a run `degraded`, and a
sweep recommends only a TDF whose verdict is `ok`:

    selena sweep scenarios/held_out_star.py --tdf 1,20 --out results/held-out

The server's link is the bottleneck (the clients' links are faster), so the
clients' own links, which the pings between clients cross, carry no
standing queue. Recorded, without expectations: rtt_ms (h1 to h2, the
first echo, which waits for ARP, left out) and tcp_mbit (each client's
received rate)."""

import json

from selena.model import Topology

CLIENTS = 2
CLIENT_MBIT = 20
SERVER_MBIT = 10
DELAY_MS = 20            # per link: 80 ms between two clients, through s1
SECONDS = 3              # virtual seconds the clients send
PINGS = 12
SERVER_IP = "10.0.0.100"


def build(clients=CLIENTS, client_mbit=CLIENT_MBIT, server_mbit=SERVER_MBIT,
          delay_ms=DELAY_MS):
    clients = int(clients)
    if not 2 <= clients <= 8:
        raise ValueError(f"clients={clients}: want 2 to 8 (the pings go between two)")
    topology = Topology("heldout", tdf=1)
    switch = topology.add_switch("s1")
    server = topology.add_host("srv", ip=f"{SERVER_IP}/24", template="tools-host")
    topology.add_link(server, switch, rate=f"{float(server_mbit):g}Mbit",
                      delay=f"{float(delay_ms):g}ms")
    for k in range(1, clients + 1):
        host = topology.add_host(f"h{k}", ip=f"10.0.0.{k}/24", template="tools-host")
        topology.add_link(host, switch, rate=f"{float(client_mbit):g}Mbit",
                          delay=f"{float(delay_ms):g}ms")
    return topology


def run(exp):
    clients = int(exp.params.get("clients", CLIENTS))
    servers = [exp.start("srv", ["iperf3", "-s", "-1", "-p", str(5200 + k)])
               for k in range(1, clients + 1)]
    for k in range(1, clients + 1):
        exp.wait_listening("srv", 5200 + k)
    senders = [exp.start(f"h{k}", ["iperf3", "-c", SERVER_IP, "-p", str(5200 + k),
                                   "-t", str(SECONDS), "-J"], timeout=SECONDS + 60)
               for k in range(1, clients + 1)]
    ping = exp.cmd("h1", f"ping -c {PINGS} -i 0.2 -W 5 10.0.0.2", check=True)
    results = [exp.wait(s) for s in senders]
    for server in servers:
        exp.wait(server)
    rtts = [float(x.split("=")[1]) for x in ping.stdout.decode().split()
            if x.startswith("time=")]
    exp.record("rtt_ms", rtts[1:], unit="ms")
    tcp = []
    for result in results:
        end = json.loads(result.stdout)["end"]
        tcp.append(end["sum_received"]["bits_per_second"] / 1e6)
    exp.record("tcp_mbit", tcp, unit="Mbit/s")
