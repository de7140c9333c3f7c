"""The series builds for arm64 with the dilation code compiled in (issue 31
item 5): `make -C xen-patches check-arm64` cross-builds the patched
hypervisor with Debian's gcc-aarch64-linux-gnu (.ci/host-deps installs it),
Arm's defconfig plus CONFIG_TIME_DILATION, and fails unless
common/time_dilation.o was built into an aarch64 image. Cached by its
inputs (the pin, the series, the script), so instant again."""

import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.toolchain, pytest.mark.long]

PATCHES = Path(__file__).resolve().parents[2] / "xen-patches"


def test_the_series_builds_for_arm64_with_the_dilation_code():
    proc = subprocess.run(["make", "-s", "-C", str(PATCHES), "check-arm64"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "arm64 hypervisor with the series builds" in proc.stdout
