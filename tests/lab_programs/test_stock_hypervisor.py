"""LabBuilder.stock_hypervisor(): Debian's own hypervisor, unpacked once
for QEMU from the package the template build fetches (apt download)."""

import gzip
from pathlib import Path

import pytest

from selena.errors import LabError
from selena.lab.build import STOCK_HYPERVISOR_PACKAGE, LabBuilder


class Fetched(LabBuilder):
    def __init__(self, root: Path, files: dict[str, bytes]):
        super().__init__(root=root)
        self.unpacked = root / "apt" / "unpacked" / f"{STOCK_HYPERVISOR_PACKAGE}_4.17.5_amd64"
        (self.unpacked / "boot").mkdir(parents=True)
        for name, data in files.items():
            (self.unpacked / "boot" / name).write_bytes(gzip.compress(data))
        self.fetched: list[str] = []

    def debian_package(self, name: str, component: str = "main") -> Path:
        self.fetched.append(name)
        return self.unpacked


def test_the_stock_hypervisor_is_debians_file_unpacked_once(tmp_path):
    builder = Fetched(tmp_path, {"xen-4.17-amd64.gz": b"\x7fELF stock xen"})
    first = builder.stock_hypervisor()
    assert first.read_bytes() == b"\x7fELF stock xen"
    assert builder.fetched == [STOCK_HYPERVISOR_PACKAGE]
    (builder.unpacked / "boot" / "xen-4.17-amd64.gz").write_bytes(gzip.compress(b"changed"))
    assert builder.stock_hypervisor() == first and first.read_bytes() == b"\x7fELF stock xen"
    assert not list(first.parent.glob("*.partial"))


def test_a_package_with_other_than_one_hypervisor_is_refused_naming_them(tmp_path):
    builder = Fetched(tmp_path, {"xen-4.17-amd64.gz": b"a", "xen-4.18-amd64.gz": b"b"})
    with pytest.raises(LabError, match=r"holds 2 hypervisor files .*xen-4.17-amd64.gz"):
        builder.stock_hypervisor()
