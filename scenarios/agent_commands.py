"""Three hosts on one hub, driven over the Xenstore control channel.

Shows (and the lab tests check) what the scenario API offers: commands with
output of any size (Dom0 keeps --output-cap bytes of each stream and counts
the rest), virtual-time scheduling, timeouts, kills, the guests' inability
to forge commands or read each other's keys, an agent restarted under its
command, a command writing garbage over its own state, a guest flooding
output beside another, and a node crash reported as lost.

    selena run scenarios/agent_commands.py --tdf 5 --output-cap 640K --out results/agent
"""

import time

from selena.model import Topology

topology = Topology("agentcmds", tdf=5)
hosts = [topology.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in (1, 2, 3)]
topology.add_hub("lan", *hosts)
topology.add_static_arp("h1", 0, "10.0.0.99", "02:00:00:00:00:99")   # as setArp does


def run(exp):
    exp.cmd("h1", "echo hello from h1; echo to stderr >&2", check=True)
    exp.cmd("h1", ["ping", "-c", "3", "-W", "5", "10.0.0.2"], check=True)
    exp.cmd("h3", "seq 1 100000", check=True)                    # ~580 KB of output
    exp.parallel(lambda: exp.cmd("h2", "sleep 1; echo parallel-a"),
                 lambda: exp.cmd("h3", "sleep 1; echo parallel-b"))
    late = exp.at(3.0, exp.cmd, "h2", "echo at-three")          # virtual seconds
    exp.cmd("h2", "echo started; sleep 100", timeout=2)          # killed by the timeout
    victim = exp.start("h1", "sleep 100")
    exp.sleep(1)
    exp.kill(victim)
    exp.wait(victim)
    me, other = exp.domid("h1"), exp.domid("h2")
    exp.cmd("h1", f"selena-agent xs write /local/domain/{me}/selena/cmd/forged x")
    exp.cmd("h1", f"selena-agent xs read /local/domain/{other}/selena/version")
    late.result()
    exp.cmd("h1", "cat /proc/net/arp")
    exp.cmd("h1", "head -c 1000000 /dev/zero")      # past a --output-cap: kept short, counted
    # The agent dies under its command; init restarts it, and the successor
    # fails the orphaned command (reason restarted) and serves on.
    exp.cmd("h2", "kill -9 $PPID; sleep 30", timeout=60)
    exp.cmd("h2", "echo after-restart")
    # A hostile command writes garbage over its own state: only it fails.
    keys = f"/local/domain/{other}/selena"
    # Its own id is the one without an end marker: a finished command's keys
    # may still be listed (their removal rides along with a later spec).
    exp.cmd("h2", f"for id in $(selena-agent xs ls {keys}/cmd); do "
                  f"selena-agent xs ls {keys}/out/$id/end >/dev/null 2>&1 || break; done; "
                  f"selena-agent xs write {keys}/out/$id/state nonsense; sleep 5", timeout=30)
    exp.cmd("h2", "echo after-garbage")
    # h3 floods output (past the cap) while h1 answers echoes beside it.
    flood = exp.start("h3", "yes", timeout=2)
    waits = []
    for _ in range(3):
        began = time.monotonic()
        exp.cmd("h1", "echo beside-flood")
        waits.append(1000 * (time.monotonic() - began))
    exp.record("echo_beside_flood_real_ms", waits, unit="ms")
    exp.wait(flood)
    doomed = exp.start("h3", "sleep 100")
    exp.sleep(1)
    exp.crash("h3")
    exp.wait(doomed)
