"""make -C xen-patches deb: the Debian package of the patched hypervisor.

Built from the lab's pin (XEN_PIN=SOURCE): its hypervisor is the one `selena
lab build` has already built and cached, so these tests assemble packages
but never build Xen a second time. The default pin (SOURCE.security) is
checked for shape only: its source is not downloadable on every machine.
"""

import gzip
import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "xen-patches"
PACKAGE = "xen-hypervisor-4.17-selena"


def pin(name: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in (PATCHES / name).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            fields.setdefault(key, value)
    return fields


@pytest.fixture(scope="module")
def deb() -> Path:
    proc = subprocess.run(["make", "-s", "-C", str(PATCHES), "deb", "XEN_PIN=SOURCE"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    debs = sorted((PATCHES / "build" / "deb").glob("*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


def field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_make_deb_builds_exactly_one_package_named_for_its_source(deb):
    version = pin("SOURCE")["version"]
    revision = (PATCHES / "deb/revision").read_text().strip()
    assert deb.name == f"{PACKAGE}_{version}+{revision}_amd64.deb"


def test_the_package_holds_the_hypervisor_its_config_the_tool_and_the_grub_snippet(deb):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    entries = {line.split()[0][0] + line.split()[-1] for line in listing.splitlines()}
    for path in ("./boot/xen-4.17-selena.gz", "./boot/xen-4.17-selena.config",
                 "./usr/sbin/selena-tdf", "./etc/default/grub.d/selena-xen.cfg",
                 f"./usr/share/doc/{PACKAGE}/README.Debian",
                 f"./usr/share/doc/{PACKAGE}/copyright"):
        assert "-" + path in entries, path
    assert "-rwxr-xr-x root/root" in next(ln for ln in listing.splitlines()
                                          if ln.endswith("/usr/sbin/selena-tdf"))


def test_control_ties_the_package_to_debian_tools_of_its_source_version(deb):
    version = pin("SOURCE")["version"]
    assert field(deb, "Package") == PACKAGE
    assert field(deb, "Architecture") == "amd64"
    assert field(deb, "Version").startswith(version + "+selena")
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    assert f"xen-utils-4.17 (= {version})" in depends
    # selena-tdf's libraries, found by dpkg-shlibdeps; libxenctrl's bound is
    # the source's version, not this machine's libxen-dev's.
    assert f"libxenmisc4.17 (>= {version.rsplit('-', 1)[0]})" in depends, depends
    assert any(d.startswith("libc6 (>= ") for d in depends), depends
    assert field(deb, "Built-Using") == f"xen (= {version})"
    # Debian's xen-utils-4.17 recommends a hypervisor: this one counts.
    assert "xen-hypervisor-4.17" in field(deb, "Provides").split(", ")
    # Beside Debian's hypervisor, not instead of it (the way back).
    assert not field(deb, "Conflicts") and not field(deb, "Replaces")


def test_the_hypervisor_is_the_patched_build_with_debians_configuration(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    image = gzip.decompress((tmp_path / "boot/xen-4.17-selena.gz").read_bytes())
    # The boot banner's version (Debian's patch 0003), set as debian/rules does.
    assert (pin("SOURCE")["version"] + "+selena").encode() in image
    config = (tmp_path / "boot/xen-4.17-selena.config").read_text()
    assert "# CONFIG_DEBUG is not set" in config      # debian/xen-kconfig
    assert "CONFIG_X86_64=y" in config
    conffiles = subprocess.run(["dpkg-deb", "-I", str(deb), "conffiles"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert conffiles == ["/etc/default/grub.d/selena-xen.cfg"]


def test_the_grub_snippet_makes_the_xen_entry_the_default(tmp_path):
    # As grub-mkconfig sources it: after /etc/default/grub set GRUB_DISTRIBUTOR.
    out = subprocess.run(
        ["sh", "-c", 'GRUB_DISTRIBUTOR=Debian; GRUB_DEFAULT=0; . "$1"; '
                     'echo "$GRUB_DEFAULT|$XEN_OVERRIDE_GRUB_DEFAULT"',
         "sh", str(PATCHES / "deb/selena-xen.cfg")],
        capture_output=True, text=True, check=True, env={**os.environ, "LANGUAGE": "C"})
    assert out.stdout.strip() == "Debian GNU/Linux, with Xen hypervisor|1"


def test_two_assemblies_from_the_same_inputs_are_identical(deb, tmp_path):
    digests = set()
    for name in ("a", "b"):
        proc = subprocess.run([str(PATCHES / "scripts/build-deb.sh"), str(PATCHES / "SOURCE"),
                               str(tmp_path / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert "cached" in proc.stdout             # the hypervisor was not rebuilt
        (built,) = (tmp_path / name).glob("*.deb")
        digests.add(hashlib.sha256(built.read_bytes()).hexdigest())
    digests.add(hashlib.sha256(deb.read_bytes()).hexdigest())
    assert len(digests) == 1


def test_lintian_finds_nothing(deb):
    proc = subprocess.run(["lintian", "-I", "-E", "--pedantic", "--fail-on", "info",
                           str(deb)], capture_output=True, text=True)
    findings = [ln for ln in proc.stdout.splitlines() if re.match(r"[EWIPX]: ", ln)]
    assert proc.returncode == 0 and not findings, proc.stdout + proc.stderr


def test_the_security_pin_is_a_newer_debian_source_with_its_checksums():
    lab, security = pin("SOURCE"), pin("SOURCE.security")
    assert security["archive"].split()[1] == "bookworm-security"
    assert lab["archive"].split()[1] == "bookworm"
    assert subprocess.run(["dpkg", "--compare-versions", security["version"], "gt",
                           lab["version"]]).returncode == 0
    text = (PATCHES / "SOURCE.security").read_text()
    upstream = security["version"].rsplit("-", 1)[0]
    for name in (f"xen_{security['version']}.dsc", f"xen_{upstream}.orig.tar.xz",
                 f"xen_{security['version']}.debian.tar.xz"):
        assert re.search(rf"^sha256 [0-9a-f]{{64}} {re.escape(name)}$", text, re.M), name
