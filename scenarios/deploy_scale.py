"""SELENA's cold boot of a 52-node topology (section 3, "about 130 seconds"),
and the same at fewer nodes, in the lab.

`hosts` tiny guests (busybox and the agent, 32 MB each) on one Dom0 hub,
TDF 1. The deploy itself is what is measured: the bundle's meta.json holds
the real seconds of the deploy (`timings.deploy_s`: validation, plan,
bridges, `xl create`, shaping, unpausing) and of the boot up to every
guest's agent answering (`timings.boot_to_agents_s`); their sum is the cold
boot the paper timed. The run then asks every guest for its uptime (each
must answer) and records Dom0's memory in use (/proc/meminfo: MemTotal -
MemAvailable) with all of them running.

The paper's guests were copy-on-write disk clones booted from a pool; these
boot from a shared initrd, so no disk is copied either.

    selena run scenarios/deploy_scale.py --param hosts=52 --out results/deploy52

Records dom0_used_mb, dom0_total_mb, guests_up (expected: hosts) and
guest_uptime_s (each guest's uptime when asked, virtual seconds).
"""

from pathlib import Path

from selena.model import Topology

HOSTS = 52              # the paper's cold-booted topology
MAX_HOSTS = 250         # one /24, and far beyond what one lab machine holds


def build(hosts=HOSTS):
    hosts = int(hosts)
    if not 1 <= hosts <= MAX_HOSTS:
        raise ValueError(f"hosts={hosts}: want 1 to {MAX_HOSTS}")
    topology = Topology(f"deploy{hosts}", tdf=1)
    nodes = [topology.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, hosts + 1)]
    if hosts > 1:
        topology.add_hub("lan", *nodes)
    return topology


def meminfo_mb(text):
    """{field: MB} from /proc/meminfo's kB lines."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if len(words) == 2 and words[1] == "kB":
            out[name] = int(words[0]) / 1024
    return out


def run(exp):
    hosts = int(exp.params.get("hosts", HOSTS))
    names = [f"h{i}" for i in range(1, hosts + 1)]
    answers = exp.parallel(*[lambda name=name: exp.cmd(name, "cat /proc/uptime")
                             for name in names])
    uptimes = [float(a.stdout.split()[0]) for a in answers if a.ok and a.stdout.split()]
    exp.record("guests_up", len(uptimes), expected=float(hosts), unit="guests")
    exp.record("guest_uptime_s", uptimes, unit="s")
    # Read in Dom0 (where the scenario runs), not a shell call.
    memory = meminfo_mb(Path("/proc/meminfo").read_text())
    exp.record("dom0_total_mb", memory["MemTotal"], unit="MB")
    exp.record("dom0_used_mb", memory["MemTotal"] - memory["MemAvailable"], unit="MB")
