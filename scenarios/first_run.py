"""The first run on a new host (docs/host.md): two hosts on a link with the
demo's delay (40 ms one way: 80 ms round trip; no rate limit, which pings do
not need and which would make advise count the host's TCP ceiling), ten
pings 0.2 s apart, their round trip recorded against the configured one.
Short in virtual time (about 2 s): a run at the TDF `selena advise` gives
takes seconds, not minutes:

    sudo selena calibrate                                   # once per host
    sudo selena advise scenarios/first_run.py --interval 0.2
    sudo selena run scenarios/first_run.py --tdf N          # N: what advise printed
"""

from selena.metrics import ping_rtts_ms
from selena.model import Topology

topology = Topology("firstrun", tdf=1)
h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
topology.add_link(h1, h2, delay="40ms")


def run(exp):
    exp.cmd("h1", "ping -c 1 -W 5 10.0.0.2")          # ARP, not measured
    ping = exp.cmd("h1", "ping -c 10 -i 0.2 -W 5 10.0.0.2", check=True)
    exp.record("rtt_ms", ping_rtts_ms(ping.stdout), expected=80.0, unit="ms")
