"""Guest templates: template.yaml, Debian package lists and the names of
package variants, and how the plan and the xl config use them."""

from pathlib import Path

import pytest

from selena.backends.xl import xl_config
from selena.errors import ImageBuildError, TemplateError, TopologyError, ValidationError
from selena.model import Topology
from selena.plan import make_plan, pool_key
from selena.templates import bad_packages, load_template, read_spec, variant_disk
from selena.validate import validate

DEBIAN_YAML = """name: debian
kernel: /images/debian-vmlinux
ramdisk: /images/debian-initrd.gz
disk: /images/debian-abc.ext4
cmdline: "console=hvc0 net.ifnames=0"
memory_mb: 128
packages: [systemd-sysv, iproute2]
"""


def test_package_names_follow_debian_policy():
    assert bad_packages(["memcached", "libmemcached-tools", "g++", "python3.11", "ptpd"]) == []
    assert bad_packages(["Memcached", "a", "-x", "mem cached", "ok", 3]) == \
        ["'Memcached'", "'a'", "'-x'", "'mem cached'", "3"]
    assert bad_packages(["memcached\n"]) == ["'memcached\\n'"]


def test_a_variant_is_named_by_its_base_image_and_package_set():
    base = Path("/images/debian-abc.ext4")
    one = variant_disk(base, ["ptpd", "memcached"])
    assert one.parent == base.parent and one.name.startswith("debian-abc+")
    assert one == variant_disk(base, ["memcached", "ptpd", "memcached"])   # order, repeats
    assert one != variant_disk(base, ["memcached"])
    assert one != variant_disk(Path("/images/debian-def.ext4"), ["ptpd", "memcached"])
    # A variant of a derived template's image keeps the base's stem, once.
    derived = variant_disk(one, ["iperf3"])
    assert derived.name.count("+") == 1 and derived != variant_disk(base, ["iperf3"])


def test_template_yaml_paths_defaults_and_errors(tmp_path):
    (tmp_path / "debian").mkdir()
    (tmp_path / "debian" / "template.yaml").write_text(DEBIAN_YAML)
    spec = load_template(tmp_path, "debian")
    assert spec.disk == Path("/images/debian-abc.ext4") and spec.takes_packages
    assert spec.packages == ("systemd-sysv", "iproute2") and spec.memory_mb == 128
    # No template.yaml: a kernel and an initramfs in the template's directory.
    tiny = load_template(tmp_path, "tiny-host")
    assert tiny.kernel == tmp_path / "tiny-host" / "vmlinuz" and tiny.disk is None
    assert not tiny.takes_packages
    bad = tmp_path / "bad" / "template.yaml"
    bad.parent.mkdir()
    bad.write_text("base: debian\npackages: [memcached, 'No Such']\n")
    with pytest.raises(TemplateError, match=r"bad/template.yaml: not Debian package names: "
                                            r"'No Such'"):
        read_spec(bad)
    bad.write_text("base: debian\npackages: memcached\n")
    with pytest.raises(TemplateError, match="packages must be a list"):
        read_spec(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(TemplateError, match="a mapping"):
        read_spec(bad)
    bad.write_text("disk: rootfs.ext4\n")
    assert read_spec(bad).disk == bad.parent / "rootfs.ext4"      # relative to its directory


def test_the_shipped_debian_template_and_its_derivatives_parse():
    root = Path(__file__).resolve().parents[1] / "guest-templates"
    debian = read_spec(root / "debian" / "template.yaml")
    assert debian.disk is not None and debian.memory_mb == 128 and "iproute2" in debian.packages
    derived = [read_spec(p) for p in root.glob("*/template.yaml") if read_spec(p).base]
    assert derived and all(spec.base == "debian" and spec.packages for spec in derived)


def test_validation_names_the_node_and_the_bad_package():
    topo = Topology("pk")
    topo.add_host("m1", ip="10.0.0.1/24", template="debian", packages=["memcached", "Bad_Name"])
    with pytest.raises(TopologyError, match=r"node m1: packages 'Bad_Name' are not Debian"):
        validate(topo)
    # One package may be given as a string.
    topo = Topology("pk")
    node = topo.add_host("m1", template="debian", packages="memcached")
    assert node.packages == ("memcached",)


def _debian_root(tmp_path: Path, *, variant: list[str] | None = None) -> Path:
    images = tmp_path / "images"
    images.mkdir()
    (images / "debian-abc.ext4").write_bytes(b"")
    if variant is not None:
        variant_disk(images / "debian-abc.ext4", variant).write_bytes(b"")
    root = tmp_path / "templates"
    (root / "debian").mkdir(parents=True)
    (root / "debian" / "template.yaml").write_text(DEBIAN_YAML.replace("/images", str(images)))
    return root


def _pair(packages: list[str] | None, template: str = "debian") -> Topology:
    topo = Topology("deb")
    m1 = topo.add_host("m1", ip="10.0.0.2/24", template=template, packages=packages)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    topo.add_link(h1, m1)
    return topo


def test_the_plan_attaches_the_template_image_or_the_built_variant(tmp_path):
    root = _debian_root(tmp_path, variant=["memcached"])
    plan = make_plan(_pair(None), template_root=root)
    m1, h1 = plan.guest("m1"), plan.guest("h1")
    assert m1.disk == str(tmp_path / "images" / "debian-abc.ext4")
    assert m1.cmdline == "console=hvc0 net.ifnames=0" and m1.kernel == str(
        tmp_path / "images" / "debian-vmlinux")
    assert h1.disk is None and h1.kernel == str(root / "tiny-host" / "vmlinuz")
    config = xl_config(plan, m1)
    assert f'disk = [ "format=raw,vdev=xvda,access=ro,target={m1.disk}" ]' in config
    assert "disk = [" not in xl_config(plan, h1)
    with_pkg = make_plan(_pair(["memcached"]), template_root=root).guest("m1")
    assert with_pkg.disk == str(variant_disk(Path(m1.disk), ["memcached"]))
    # Guests with different images are never swapped in the warm pool.
    assert pool_key(with_pkg) != pool_key(m1)


def test_a_variant_not_built_or_packages_on_an_initramfs_fail_before_anything(tmp_path):
    root = _debian_root(tmp_path)
    with pytest.raises(TemplateError, match=r"node m1: the debian image with packages "
                                            r"memcached, ptpd is not built .*selena lab build "
                                            r"--scenario"):
        make_plan(_pair(["ptpd", "memcached"]), template_root=root)
    with pytest.raises(TemplateError, match="node m1: packages memcached need a disk-image "
                                            "template .* tiny-host is an initramfs"):
        make_plan(_pair(["memcached"], template="tiny-host"), template_root=root)


def test_a_disk_path_that_could_change_the_xl_config_is_refused(tmp_path):
    root = _debian_root(tmp_path)
    plan = make_plan(_pair(None), template_root=root)
    guest = plan.guest("m1")
    for bad in ("/images/a,b.ext4", '/images/a".ext4', "relative.ext4", "/images/a=b"):
        guest.disk = bad
        with pytest.raises(ValidationError, match="cannot go into an xl disk spec"):
            xl_config(plan, guest)


def test_a_variant_of_a_derived_template_installs_its_packages_too(tmp_path, monkeypatch):
    from selena.templates import build
    from selena.templates.images import DebianBase

    recipes = tmp_path / "guest-templates"
    (recipes / "qj").mkdir(parents=True)
    (recipes / "qj" / "template.yaml").write_text("name: qj\nbase: debian\n"
                                                  "packages: [ptpd, memcached]\n")
    (recipes / "tiny").mkdir()
    (recipes / "tiny" / "template.yaml").write_text("name: tiny\nmemory_mb: 32\n")
    images = tmp_path / "images"
    base = DebianBase(read_spec(Path(__file__).resolve().parents[1] / "guest-templates"
                                / "debian" / "template.yaml"),
                      images / "vmlinux", images / "initrd.gz", images / "debian-k.ext4",
                      images / "debian-k.tar")
    calls = []

    class Images:
        root = images

        def base(self, kernel_root):
            return base

        def derived(self, base_, recipe):
            spec = read_spec(recipe)
            return spec, variant_disk(base_.disk, spec.packages)

        def variant(self, base_, disk, packages, what):
            calls.append((disk.name, tuple(packages), what))
            return disk

    builder = build.TemplateBuilder.__new__(build.TemplateBuilder)
    builder.src, builder.images, builder.timings = tmp_path, Images(), {}
    builder.progress = lambda msg: None
    specs = builder.debian_templates(tmp_path, [("qj", ("iperf3",), "s.py: node m1"),
                                                ("debian", ("iperf3",), "s.py: node m2")])
    qj_disk = variant_disk(base.disk, ["memcached", "ptpd"])
    assert {n: t.disk.name for n, t in specs.items()} == {"debian": "debian-k.ext4",
                                                          "qj": qj_disk.name}
    # The derived template's own packages, the debian template's memory when it sets none.
    assert specs["qj"].packages == ("ptpd", "memcached") and specs["qj"].memory_mb == 128
    assert calls == [
        (variant_disk(qj_disk, ["iperf3"]).name, ("ptpd", "memcached", "iperf3"),
         "s.py: node m1 (qj + iperf3)"),
        (variant_disk(base.disk, ["iperf3"]).name, ("iperf3",), "s.py: node m2 (debian + iperf3)")]
    with pytest.raises(ImageBuildError, match="s.py: node m3: packages need the debian "
                                             "template"):
        builder.debian_templates(tmp_path, [("tiny", ("iperf3",), "s.py: node m3")])


def test_a_chroot_with_host_mounts_left_in_it_is_never_removed(tmp_path, monkeypatch, caplog):
    from fake_runner import FakeRunner

    from selena.templates import images

    tmp = tmp_path / "build"
    (tmp / "root" / "dev").mkdir(parents=True)
    (tmp / "root" / "dev" / "null").write_text("the host's, through a bind mount")
    builder = images.DebianImages(FakeRunner(), root=tmp_path)
    monkeypatch.setattr(images.os.path, "ismount", lambda p: str(p).endswith("/root/dev"))
    builder._remove_chroot(tmp, tmp / "root")
    assert (tmp / "root" / "dev" / "null").exists()
    assert "still mounted" in caplog.text and str(tmp / "root" / "dev") in caplog.text
    monkeypatch.setattr(images.os.path, "ismount", lambda p: False)
    builder._remove_chroot(tmp, tmp / "root")
    assert not tmp.exists()


def test_apt_errors_name_the_package_and_the_chroot_is_unmounted(tmp_path):
    from fake_runner import FakeRunner

    from selena.templates import images

    runner = FakeRunner()
    runner.respond(["chroot", str(tmp_path / "root"), "apt-get", "install"], 100, "",
                   "Reading package lists...\nE: Unable to locate package nosuchpkg\n")
    root = tmp_path / "root"
    for sub in ("usr/sbin", "etc", "proc", "sys", "dev"):
        (root / sub).mkdir(parents=True)
    builder = images.DebianImages(runner, root=tmp_path)
    with pytest.raises(ImageBuildError, match=r"apt-get install for node m1 failed \(exit 100\)"
                                              r":\nE: Unable to locate package nosuchpkg\Z"):
        builder._apt_install(root, ("memcached", "nosuchpkg"), "node m1")
    umounts = [c[-1] for c in runner.calls if c[0] == "umount"]
    assert umounts == [str(root / "dev"), str(root / "sys"), str(root / "proc")]
    assert not (root / "usr/sbin/policy-rc.d").exists()


def test_an_hvm_node_on_a_disk_image_template_is_refused_in_one_line(tmp_path):
    root = _debian_root(tmp_path)
    topo = _pair(None)
    topo.nodes["m1"].virt = "hvm"
    with pytest.raises(TemplateError) as err:
        make_plan(topo, template_root=root)
    assert str(err.value) == ("node m1: an HVM node boots an initramfs template; debian is a "
                              "disk image (use virt='pvh' for it)")
    topo.nodes["m1"].virt = "pvh"
    assert make_plan(topo, template_root=root).guest("m1").disk
