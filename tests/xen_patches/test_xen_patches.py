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


def _patches() -> list[tuple[str, str]]:
    return [(name, (PATCHES / name).read_text())
            for name in (PATCHES / "series").read_text().split()]


def _subject(text: str) -> str:
    """The subject git format-patch wrote (folded over lines), without the
    [PATCH n/m] tag."""
    head = text.split("\n\n", 1)[0]
    match = re.search(r"^Subject: (.*(?:\n .*)*)", head, re.M)
    assert match, head
    folded = match.group(1)
    return re.sub(r"^\[PATCH[^]]*\] ", "", " ".join(folded.split("\n ")))


def _message(text: str) -> str:
    return text.split("\n\n", 1)[1].split("\n---\n", 1)[0]


def _adds(text: str, path: str) -> bool:
    return f"\n+++ b/{path}\n" in text


def test_series_lists_every_patch_in_order_with_a_real_message():
    series = (PATCHES / "series").read_text().split()
    on_disk = sorted(p.name for p in PATCHES.glob("*.patch"))
    assert series == on_disk
    for name, text in _patches():
        assert text.startswith("From ")
        # a body explaining why, not only a subject line
        assert len(_message(text).split()) > 40, name


def test_commit_messages_are_in_xens_format_without_a_sign_off():
    """Issue 31 item 6: `component: summary` subjects, bodies wrapped, and
    the sign-off left to whoever submits the series upstream."""
    for name, text in _patches():
        subject = _subject(text)
        assert re.match(r"(xen|x86|arm|docs|tools)(/[\w.-]+)?: \w", subject), (name, subject)
        assert len(subject) <= 72, (name, subject)
        assert "Signed-off-by:" not in text, name
        long = [ln for ln in _message(text).splitlines() if len(ln) > 75]
        assert not long, (name, long)


def test_the_design_note_is_the_first_patch():
    name, text = _patches()[0]
    assert _adds(text, "docs/misc/time-dilation.pandoc"), name
    assert "/xen/" not in "".join(re.findall(r"^\+\+\+ b/.*$", text, re.M)), name
    note = text.split("+++ b/docs/misc/time-dilation.pandoc", 1)[1]
    for section in ("## Model", "## Interface", "## Save, restore and migration",
                    "## Configuration", "## Limits", "Runstate times"):
        assert section in note, section


def test_time_dilation_is_a_kconfig_option_off_by_default_and_on_in_our_builds():
    # One patch adds the option (a later one may only reword its help).
    kconfig = [text for _, text in _patches() if "\n+config TIME_DILATION\n" in text]
    assert len(kconfig) == 1
    option = kconfig[0].split("+config TIME_DILATION\n", 1)[1].split("\n+\n+endmenu", 1)[0]
    assert "+\tdefault n\n" in option and "+\thelp\n" in option
    assert "+obj-$(CONFIG_TIME_DILATION) += time_dilation.o" in kconfig[0]
    # every hypervisor we build turns it on and checks that the code is in
    for script in ("build.sh", "check-arm64.sh", "check-each-patch.sh"):
        body = (PATCHES / "scripts" / script).read_text()
        assert "CONFIG_TIME_DILATION=y" in body, script
        assert "common/time_dilation.o" in body, script


def test_public_headers_document_the_changed_cpuid_leaf_and_virtual_runstate():
    texts = [text for _, text in _patches()]
    cpuid = [t for t in texts if _adds(t, "xen/include/public/arch-x86/cpuid.h")]
    vcpu = [t for t in texts if _adds(t, "xen/include/public/vcpu.h")]
    assert len(cpuid) == 1 and "per second of the\n+ * domain's virtual time" in cpuid[0]
    assert len(vcpu) == 1 and "are in the domain's virtual system time" in vcpu[0]


def test_support_and_changelog_entries():
    texts = [text for _, text in _patches()]
    assert any(_adds(t, "SUPPORT.md") and "+    Status, x86 PV: Experimental" in t
               for t in texts)
    assert any(_adds(t, "CHANGELOG.md") and "XEN_DOMCTL_selena_tdf" in t for t in texts)


def test_make_check_runs_every_file_of_the_series_tests():
    """The series' tests live in the Xen tree (tools/tests/time-dilation, in
    tools/tests' SUBDIRS); `make check` extracts them: none may be left out."""
    text = "".join(t for _, t in _patches())
    added = set(re.findall(r"^\+\+\+ b/tools/tests/time-dilation/(\S+)$", text, re.M))
    assert {"Makefile", "test-arith.c", "test-freeze.c"} <= added
    assert "+SUBDIRS-y += time-dilation" in text
    makefile = (PATCHES / "Makefile").read_text().replace("\\\n", " ")
    listed = set(re.search(r"^UNIT_FILES := (.*)$", makefile, re.M).group(1).split())
    assert listed == added - {"Makefile"}


def test_domctl_number_matches_between_tool_and_patch():
    tool = (PATCHES / "tool/selena-tdf.c").read_text()
    patch = "".join(text for _, text in _patches())
    assert "#define XEN_DOMCTL_selena_tdf     0x5e1e" in tool
    assert "+#define XEN_DOMCTL_selena_tdf                0x5e1e" in patch
    # align writes the restore path's pseudo MSRs: the same first index.
    assert "#define XEN_SELENA_TDF_MSR_FACTOR 0x5e1e0000U" in tool
    assert "+#define XEN_SELENA_TDF_MSR_FACTOR   0x5e1e0000U" in patch


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


def _net_lines(pattern: str) -> dict[str, int]:
    """By file: lines matching `pattern` the series adds, less those it
    removes (what the patched tree has beyond Xen's own)."""
    net: dict[str, int] = {}
    for name in (PATCHES / "series").read_text().split():
        current = None
        for line in (PATCHES / name).read_text().splitlines():
            if line.startswith("diff --git "):
                current = line.split(" b/", 1)[1]
            elif current and line[:1] in "+-" and not line.startswith(("+++", "---")) \
                    and re.search(pattern, line):
                net[current] = net.get(current, 0) + (1 if line[0] == "+" else -1)
    return {path: n for path, n in net.items() if n}


def test_pv_and_pvh_saves_share_one_definition_of_a_saved_dilation():
    """Issue 32 item 1: the pseudo MSRs carrying a dilated domain's time are
    packed and restored by one set of helpers, which both the PV path
    (XEN_DOMCTL_{get,set}_vcpu_msrs) and the HVM context (CPU_MSR) call."""
    assert _net_lines(r"\bdomain_tdf_restore\(d,") == {"xen/arch/x86/time.c": 1}
    users = _net_lines(r"\btdf_(save|load)_msrs\(d, &tdf\)")
    assert users == {"xen/arch/x86/domctl.c": 2, "xen/arch/x86/hvm/hvm.c": 2}, users
    # The refusal of a dilated PVH guest's save is gone.
    assert not _net_lines(r"a dilated HVM domain is not saved")


def test_hvm_platform_timer_models_read_no_real_time():
    """Issue 32 item 1: the PIT, RTC and ACPI PM timer models keep no
    reading of Xen's real time: the series removes every NOW() of Xen
    4.17's (six in the RTC, one each in the PM timer and the PIT), their
    own timers are armed through the domain's real deadline and stopped
    and re-armed with the platform timers on a change of factor, and the
    refusal of HVM guests with these models is gone."""
    models = ("xen/arch/x86/hvm/rtc.c", "xen/arch/x86/hvm/pmtimer.c",
              "xen/arch/x86/emul-i8254.c")
    now = {path: n for path, n in _net_lines(r"\bNOW\(\)").items() if path in models}
    assert now == {models[0]: -6, models[1]: -1, models[2]: -1}, now
    # Their Xen timers: none armed at a raw time any more.
    armed = {path: n for path, n in _net_lines(r"(?<!_)\bset_timer\(&s->").items()
             if path in models}
    assert armed == {models[0]: -4}, armed
    assert _net_lines(r"domain_real_deadline\(d, domain_virt_now\(d\)") == {models[1]: 1}
    hooks = "\n".join(ln for lines in _added_lines_by_function("xen/arch/x86/time.c").values()
                      for ln in lines)
    for call in ("rtc_tdf_stop(d);", "pmtimer_tdf_stop(d);", "rtc_tdf_changed(d, moved);",
                 "pmtimer_tdf_changed(d);"):
        assert call in hooks, call
    assert not _net_lines(r"not dilated: HVM platform timers")
    assert _net_lines(r"not dilated: Hyper-V") == {"xen/arch/x86/time.c": 1}
