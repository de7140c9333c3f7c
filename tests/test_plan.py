import pytest

from selena.backends.xl import xl_config
from selena.errors import ValidationError
from selena.model import Topology
from selena.plan import make_plan, pool_key, short_id
from selena.topologies import fat_tree


def demo():
    topo = Topology("demo", tdf=10)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", mac="02:00:00:00:00:01")
    h2 = topo.add_host("h2", ip="10.0.0.2/24", mac="02:00:00:00:00:02")
    topo.add_link(h1, h2, rate="100Mbit", delay="5ms")
    return topo


def test_plan_names_every_dom0_object_within_ifnamsiz():
    plan = make_plan(demo())
    tag = short_id("demo")
    assert [g.domain_name for g in plan.guests] == ["selena-demo-h1", "selena-demo-h2"]
    assert plan.segments[0].bridge == f"sl{tag}l0"
    assert plan.segments[0].members == (f"sv{tag}0.0", f"sv{tag}1.0")
    assert all(len(v.name) <= 15 for g in plan.guests for v in g.vifs)


def test_xl_config_renders_guest_and_vif():
    plan = make_plan(demo())
    cfg = xl_config(plan, plan.guests[0])
    tag = short_id("demo")
    assert 'name = "selena-demo-h1"' in cfg
    assert 'type = "pv"' in cfg and "memory = 32" in cfg
    assert 'kernel = "/usr/share/selena/templates/tiny-host/vmlinuz"' in cfg
    assert "clocksource=xen tsc=unstable" in cfg
    assert (f"vif = [ 'mac=02:00:00:00:00:01,bridge=sl{tag}l0,script=vif-openvswitch,"
            f"vifname=sv{tag}0.0' ]") in cfg


def test_dom0_shaping_covers_both_directions_at_the_tdf():
    plan = make_plan(demo())
    netem = [c for c in plan.shaping if "netem" in c]
    assert len(netem) == 2 and all("50000us" in c for c in netem)
    rates = [c[c.index("rate") + 1] for c in plan.shaping if "rate" in c]
    assert rates == ["10000000bit", "10000000bit"]


def test_fat_tree_k4_has_the_right_size():
    topo = fat_tree(4)
    hosts = [n for n in topo.nodes.values() if n.kind.value == "host"]
    assert len(hosts) == 16 and len(topo.nodes) - 16 == 20
    assert len(topo.links) == 16 + 16 + 16


def test_vifs_follow_interface_order_past_ten_interfaces():
    plan = make_plan(fat_tree(16))
    core = next(g for g in plan.guests if g.node == "c0")
    assert [v.index for v in core.vifs] == list(range(16))
    assert core.vifs[2].name.endswith(".2") and core.vifs[10].name.endswith(".10")


def test_xl_config_refuses_values_that_could_break_out_of_a_string():
    plan = make_plan(demo())
    guest = plan.guests[0]
    guest.kernel = '/k" extra="init=/bin/sh'
    with pytest.raises(ValidationError, match="cannot go into an xl config"):
        xl_config(plan, guest)


def test_guest_network_names_every_interface_and_both_address_families():
    topo = Topology("v6", tdf=2)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", ip6="fd00::1/64", gateway6="fd00::fe")
    h2 = topo.add_host("h2", ip="10.0.0.2/24", ip6="fd00::2/64", gateway="10.0.0.254")
    h2.add_interface(1, ip="10.0.1.2/24")
    h3 = topo.add_host("h3", ip="10.0.1.3/24")
    topo.add_link(h1, h2)
    topo.add_link((h2, 1), h3)
    topo.add_static_arp(h1, 0, "fd00::2", topo.mac_of(h2, h2.interfaces[0]))
    plan = make_plan(topo)
    mac1 = topo.mac_of(h1, h1.interfaces[0])
    mac2 = topo.mac_of(h2, h2.interfaces[0])
    assert plan.guest("h1").net.splitlines() == [
        f"name {mac1} eth0", f"addr {mac1} 10.0.0.1/24", f"addr {mac1} fd00::1/64",
        f"txqueuelen {mac1} 1000", f"arp fd00::2 {mac2} {mac1}", "route default fd00::fe"]
    h2_net = plan.guest("h2").net.splitlines()
    assert h2_net[:2] == [f"name {mac2} eth0",
                          f"name {topo.mac_of(h2, h2.interfaces[1])} eth1"]
    assert h2_net[-1] == "route default 10.0.0.254"


def test_tsc_mode_reaches_the_xl_config_and_is_validated():
    from selena.validate import validate

    topo = demo()
    topo.nodes["h1"].tsc_mode = "native"
    topo.nodes["h2"].tsc_mode = "emulate"
    plan = make_plan(topo)
    assert 'tsc_mode = "native"' in xl_config(plan, plan.guest("h1"))
    assert 'tsc_mode = "always_emulate"' in xl_config(plan, plan.guest("h2"))
    assert "tsc_mode" not in xl_config(make_plan(demo()), make_plan(demo()).guests[0])
    topo.nodes["h1"].tsc_mode = "raw"
    from selena.errors import TopologyError
    with pytest.raises(TopologyError, match="tsc_mode 'raw': use 'native' or 'emulate'"):
        validate(topo)


def test_pvh_and_hvm_nodes_boot_as_such_with_an_emulated_tsc():
    from selena.errors import TopologyError
    from selena.model import Topology
    from selena.validate import validate

    topo = Topology("pvh")
    topo.add_host("h1", "10.0.0.1", virt="pvh")
    topo.add_host("h2", "10.0.0.2", virt="pvh", tsc_mode="native")
    topo.add_host("h3", "10.0.0.3")
    topo.add_host("h4", "10.0.0.4", virt="hvm")
    topo.add_link("h1", "h2")
    topo.add_link("h1", "h3")
    topo.add_link("h1", "h4")
    plan = make_plan(topo)
    h1, h2, h3, h4 = (xl_config(plan, plan.guest(n)) for n in ("h1", "h2", "h3", "h4"))
    # Xen's default mode would give a PVH or HVM guest the hardware TSC on a
    # host whose TSC it trusts, which the hypervisor refuses to dilate.
    assert 'type = "pvh"' in h1 and 'tsc_mode = "always_emulate"' in h1
    assert 'type = "pvh"' in h2 and 'tsc_mode = "native"' in h2
    assert 'type = "pv"' in h3 and "tsc_mode" not in h3
    assert 'type = "hvm"' in h4 and 'tsc_mode = "always_emulate"' in h4
    # An HVM node runs on the device model, with no display and no emulated
    # NIC beside its vif (its tap would be a bridge port selena did not make).
    assert 'device_model_version = "qemu-xen"' in h4 and 'vga = "none"' in h4
    # Hyper-V's synthetic timers run in real time: the hypervisor would refuse
    # the node's TDF, so they are off whatever libxl's default.
    assert "\nviridian = 0\n" in h4
    assert ",type=vif'" in h4
    assert all("device_model" not in c and "type=vif" not in c for c in (h1, h2, h3))
    topo.nodes["h3"].virt = "hvm-ish"
    with pytest.raises(TopologyError) as err:
        validate(topo)
    assert "h3" in str(err.value) and "virt 'hvm-ish': use 'pv', 'pvh' or 'hvm'" in str(err.value)
    from selena.errors import ArgumentError
    with pytest.raises(ArgumentError, match="virt must be a string"):
        Topology("t").add_host("h1", virt=True)


def test_a_pooled_guest_serves_only_nodes_of_its_type_and_tsc_mode():
    from selena.model import Topology

    topo = Topology("pool")
    for name, virt, tsc in (("a", "pv", None), ("b", "pvh", None), ("c", "hvm", None),
                            ("d", "pv", "native"), ("e", "pv", None)):
        topo.add_host(name, virt=virt, tsc_mode=tsc)
    plan = make_plan(topo)
    keys = {n: pool_key(plan.guest(n)) for n in "abcde"}
    assert len({keys[n] for n in "abcd"}) == 4 and keys["a"] == keys["e"]


def test_the_plan_benchmark_runs_and_prints_its_figures(capsys, monkeypatch):
    import runpy
    from pathlib import Path

    # A small host count: the figures are the bench's business, not a test's.
    monkeypatch.setattr("sys.argv", ["bench_plan.py", "40"])
    runpy.run_path(str(Path(__file__).parents[1] / "scenarios" / "bench_plan.py"),
                   run_name="__main__")
    out = capsys.readouterr().out
    assert "fat tree k=16: 1024 hosts, 320 switches, 3072 links" in out
    assert "render 1344 xl configs" in out
    assert "selena plan, 40 hosts, 3 switches: " in out



def test_rendering_a_plan_grows_linearly_with_its_guests():
    """`selena plan` once scanned every guest's domid variable for every word
    it printed (57 s for 5000 hosts): count those scans instead of timing."""
    from fake_runner import FakeRunner

    from selena.backends import xl

    scans: list[int] = []

    class Counting(dict):
        def values(self):
            scans.append(len(self))
            return super().values()

    topo = Topology("lin")
    switch = topo.add_switch("s1")
    for i in range(1, 21):
        topo.add_link(topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24"), switch, rate="10Mbit")
    original = xl._Script.__init__

    def init(self, backend):
        original(self, backend)
        self.vars = Counting()

    xl._Script.__init__ = init
    try:
        text = xl.XlBackend(runner=FakeRunner()).render(make_plan(topo))
    finally:
        xl._Script.__init__ = original
    assert scans == []
    assert 'selena-tdf set "$D21" 1' in text and "selena-tdf set \"$D1\" 1" in text


def test_a_rendered_word_is_quoted_for_the_shell_unless_it_holds_a_domid():
    from fake_runner import FakeRunner

    from selena.backends import xl

    script = xl._Script(xl.XlBackend(runner=FakeRunner()))
    script.vars = {f"n{i}": f"D{i}" for i in range(1, 13)}
    assert script._word("$D12") == '"$D12"'
    assert script._word("/local/domain/$D3/x") == '"/local/domain/$D3/x"'
    assert script._word("$D0") == "'$D0'"
    assert script._word("a b") == "'a b'"
