"""Guest-side shaping: what the plan asks each guest to run."""

import subprocess

from selena.model import Topology
from selena.plan import guest_shaping_script, make_plan
from selena.shaping import Placement


def plan_at(tdf: float, placement: Placement):
    topo = Topology("gs", tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="100Mbit", delay="10ms")
    return make_plan(topo, placement=placement)


def test_guest_placement_shapes_egress_in_each_guest_unscaled():
    plan = plan_at(10, Placement.GUEST)
    assert plan.shaping == []                       # nothing in Dom0
    h1 = plan.guests[0]
    [(mac, commands)] = h1.guest_shaping
    assert mac == h1.vifs[0].mac
    text = [" ".join(c) for c in commands]
    assert any("rate 100000000bit" in c for c in text)     # not divided by the TDF
    assert any("netem delay 10000us" in c for c in text)   # not multiplied by it
    script = guest_shaping_script(h1)
    assert f'= "{mac}"' in script and '"$TC" qdisc replace dev "$DEV"' in script
    # iproute2's tc by path: a bare `tc` in busybox's shell is busybox's applet.
    assert 'TC=/usr/sbin/tc' in script
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0


def test_dom0_placement_leaves_guests_alone_and_scales():
    plan = plan_at(10, Placement.DOM0)
    assert all(g.guest_shaping == [] and guest_shaping_script(g) is None for g in plan.guests)
    assert any("rate 10000000bit" in " ".join(c) for c in plan.shaping)
    assert any("netem delay 100000us" in " ".join(c) for c in plan.shaping)


def test_script_finds_the_device_by_mac_and_fails_clearly_without_it(tmp_path):
    script = guest_shaping_script(plan_at(1, Placement.GUEST).guests[0])
    # Run only the lookup part against a fake /sys/class/net.
    lookup = script.splitlines()[:4]
    fake = tmp_path / "net"
    (fake / "eth0").mkdir(parents=True)
    (fake / "eth0" / "address").write_text("02:00:00:00:00:99\n")
    text = "\n".join(lookup).replace("/sys/class/net", str(fake))
    done = subprocess.run(["sh", "-c", text], capture_output=True, text=True)
    assert done.returncode == 1 and "no interface with MAC" in done.stderr
    mac = plan_at(1, Placement.GUEST).guests[0].vifs[0].mac
    (fake / "eth1").mkdir()
    (fake / "eth1" / "address").write_text(mac + "\n")
    done = subprocess.run(["sh", "-c", text + '\necho "found $DEV"'], capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.strip() == "found eth1"
