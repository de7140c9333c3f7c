"""The patch series' user-space checks, and its shape."""

import re
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
    assert "freeze/thaw: all checks passed" in proc.stdout


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


def _added_lines_by_function(path: str) -> dict[str, list[str]]:
    """Lines the series adds to `path`, by the function git names in each
    hunk's header."""
    added: dict[str, list[str]] = {}
    for name in (PATCHES / "series").read_text().split():
        current = None
        func = ""
        for line in (PATCHES / name).read_text().splitlines():
            if line.startswith("diff --git "):
                current = line.split(" b/", 1)[1]
            elif current == path and line.startswith("@@"):
                func = line.split("@@")[2].strip()
            elif current == path and line.startswith("+") and not line.startswith("+++"):
                added.setdefault(func, []).append(line[1:])
    return added


def test_save_and_restore_change_no_time_behind_the_toolstacks_back():
    """Issue 31 item 3: the freeze and thaw around save/restore are the
    toolstack's (FREEZE/THAW), not side effects of the guest's suspend, a
    resume or the toolstack's unpause."""
    added = _added_lines_by_function("xen/common/domain.c")
    for func, lines in added.items():
        for hidden in ("__domain_finalise_shutdown", "domain_resume",
                       "domain_unpause_by_systemcontroller"):
            assert hidden not in func, (func, lines)
    assert not [ln for lines in added.values() for ln in lines
                if re.search(r"domain_tdf_(suspend|resum|unpause|freeze|thaw|restore)", ln)]


def test_group_freeze_is_preemptible_and_refuses_dying_domains():
    dilation = _added_lines_by_function("xen/common/time_dilation.c")
    domctl = _added_lines_by_function("xen/common/domctl.c")
    body = "\n".join(ln for lines in dilation.values() for ln in lines)
    assert "hypercall_preempt_check()" in body and "return -ERESTART;" in body
    do_domctl = "\n".join(domctl.get("long do_domctl(XEN_GUEST_HANDLE_PARAM(xen_domctl_t) "
                                     "u_domctl)", []))
    assert "hypercall_create_continuation(" in do_domctl
    assert "if ( d->is_dying )" in "\n".join(ln for lines in domctl.values() for ln in lines)


def test_freeze_and_thaw_go_through_the_change_hook_and_kick_every_vcpu():
    dilation = _added_lines_by_function("xen/common/time_dilation.c")
    body = "\n".join(ln for lines in dilation.values() for ln in lines)
    # The freeze/thaw helper calls the architecture hook, as SET does.
    freeze = body[body.index("static void tdf_set_frozen("):]
    freeze = freeze[:freeze.index("\n}\n")]
    assert "arch_domain_tdf_changed(d, virt, virt);" in freeze
    # Every re-arm (set, freeze, thaw, restore) kicks every vCPU that is up.
    assert "vcpu_mark_events_pending(v);" in body
