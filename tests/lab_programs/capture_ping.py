"""The lab test of link captures (tests/lab/test_capture_e2e.py): h1 pings
h2 every 0.5 s of its own (virtual) time, at TDF 10 and then, after a
set_tdf mid-run, at TDF 2. Run with `--capture h1,h2`: the bundle's
capture-h1-h2.pcapng must show the echoes 0.5 virtual seconds apart on both
sides of the change, while their real spacing goes from 5 s to 1 s.

    selena run tests/lab_programs/capture_ping.py --capture h1,h2 --out OUT
"""

from selena.model import Topology

TDF = 10
NEW_TDF = 2
INTERVAL_S = 0.5
BEFORE_S = 2.25             # virtual seconds of pinging before the change (~4 intervals)
COUNT = 12                  # echoes in all: the rest at NEW_TDF (~7 intervals, 3.5 s)


def build():
    topology = Topology("capping", tdf=TDF)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, delay="1ms")
    return topology


def run(exp):
    exp.cmd("h1", "ping -c 1 -W 5 10.0.0.2")                 # ARP before the timed pings
    ping = exp.start("h1", f"ping -c {COUNT} -i {INTERVAL_S} -W 5 10.0.0.2", timeout=120)
    exp.sleep(BEFORE_S)
    before = exp.now()
    exp.set_tdf(NEW_TDF)
    exp.record("tdf_change_virtual_s", (before + exp.now()) / 2, unit="s")
    result = exp.wait(ping)
    exp.record("echo_replies", result.stdout.decode().count("bytes from"), expected=COUNT)
