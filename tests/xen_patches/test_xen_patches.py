"""The patch series' user-space checks, and its shape."""

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "xen-patches"


def test_arithmetic_and_tool_parsing_checks_pass():
    proc = subprocess.run(["make", "-s", "-C", str(PATCHES), "check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time_dilation arithmetic: all checks passed" in proc.stdout
    assert "selena-tdf parsing: all checks passed" in proc.stdout


def test_series_lists_every_patch_in_order_with_a_real_message():
    series = (PATCHES / "series").read_text().split()
    on_disk = sorted(p.name for p in PATCHES.glob("*.patch"))
    assert series == on_disk
    for name in series:
        text = (PATCHES / name).read_text()
        assert text.startswith("From ")
        assert "Signed-off-by:" in text
        # a body explaining why, not only a subject line
        body = text.split("\n\n", 1)[1].split("---\n", 1)[0]
        assert len(body.split()) > 40, name


def test_the_header_under_test_is_the_one_the_series_adds():
    out = subprocess.run(
        [str(PATCHES / "scripts/extract-new-file.sh"),
         str(PATCHES / "0001-xen-add-time-dilation-arithmetic.patch"),
         "xen/include/xen/time_dilation.h"],
        capture_output=True, text=True, check=True).stdout
    assert out == (PATCHES / "src/time_dilation.h").read_text()


def test_domctl_number_matches_between_tool_and_patch():
    tool = (PATCHES / "tool/selena-tdf.c").read_text()
    patch = next(PATCHES.glob("0004-*.patch")).read_text()
    assert "#define XEN_DOMCTL_selena_tdf     0x5e1e" in tool
    assert "+#define XEN_DOMCTL_selena_tdf                0x5e1e" in patch
