"""docs/host.md ("Run it on your own Xen server") is a page whose commands a
lab test runs (tests/lab/test_host_doc_e2e.py): every command block is
marked to run in the lab's Dom0 or skipped with its reason, the extractor
(tests/support/doc_blocks.py) finds every block, what the lab cannot do is
skipped and nothing else, and the GRUB line it gives is one the doctor
accepts."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from doc_blocks import Block, command_blocks, dom0_script, fences, outputs, page_blocks, problems
from fake_runner import FakeRunner

from selena.host.doctor import (
    HostProbe,
    Status,
    check_cstates,
    check_dom0_vcpus,
    check_scheduler,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "host.md"
# What only a real server can do: the lab's Dom0 has no network, no boot
# loader and no compiler, and it must not reboot.
CANNOT_RUN_IN_THE_LAB = re.compile(
    r"\b(apt|apt-get|update-grub|reboot|pip|make|scp|host-deps)\b|selena host setup\s*$"
    r"|selena host export", re.M)


@pytest.fixture(scope="module")
def blocks() -> list[Block]:
    return page_blocks(PAGE)


def test_every_block_runs_in_dom0_or_is_skipped_with_a_reason(blocks):
    assert blocks
    assert problems(blocks) == []
    assert {b.where for b in blocks} == {"dom0", "skip"}


def test_the_extractor_finds_every_command_block_and_no_fence_hides_one(blocks):
    text = PAGE.read_text()
    opened = [ln for ln in text.splitlines() if ln.strip() == "```sh"]
    assert len(blocks) == len(opened)
    # Any other fence is output or a synopsis, said so: none is untyped.
    languages = {language for _, language, _ in fences(text)}
    assert languages <= {"sh", "text"}, languages
    # Each block's body is what the page shows under its marker.
    for b in blocks:
        assert b.marker.startswith("# lab: ")
        assert b.body in text


def test_every_block_is_valid_sh(blocks, tmp_path):
    for b in blocks:
        script = tmp_path / f"block-{b.line}.sh"
        script.write_text(b.body)
        run = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert run.returncode == 0, (b.line, run.stderr)


def test_the_walk_through_goes_from_install_to_a_run_in_order(blocks):
    def first(pattern: str, where: str) -> int:
        for i, b in enumerate(blocks):
            if re.search(pattern, b.body, re.M):
                assert b.where == where, (pattern, b.where, b.line)
                return i
        raise AssertionError(f"no block with {pattern!r}")

    order = [first(r"apt install xen-system-amd64", "skip"),
             first(r"make -C xen-patches deb", "skip"),
             first(r"xen-hypervisor-4\.17-selena_\*\.deb", "skip"),
             first(r"GRUB_CMDLINE_XEN_DEFAULT=.*dom0_vcpus_pin", "dom0"),
             first(r"update-grub", "skip"),
             first(r"selena-tdf get 0", "dom0"),
             first(r"pip install -e '\.\[analysis\]'", "skip"),
             first(r"selena host setup --dry-run", "dom0"),
             first(r"^sudo selena host setup$", "skip"),
             first(r"selena host doctor", "dom0"),
             first(r"selena calibrate", "dom0"),
             first(r"selena run scenarios/first_run\.py --tdf", "dom0"),
             first(r"apt remove xen-hypervisor-4\.17-selena", "skip")]
    assert order == sorted(order)
    assert (ROOT / "scenarios" / "first_run.py").is_file()


def test_what_runs_in_the_lab_is_everything_the_lab_can_run(blocks):
    """A dom0 block never installs, builds or reboots; a skipped block does
    at least one of those, and its reason names a test that exists where it
    names one."""
    for b in blocks:
        commands = "\n".join(ln for ln in b.body.splitlines() if not ln.lstrip().startswith("#"))
        if b.runs:
            assert not CANNOT_RUN_IN_THE_LAB.search(commands), (b.line, commands)
        else:
            assert CANNOT_RUN_IN_THE_LAB.search(commands), (b.line, commands)
        for test in re.findall(r"tests/lab/\S+?\.py", b.reason):
            assert (ROOT / test).is_file(), (b.line, test)


def test_the_pages_grub_line_is_one_the_doctor_accepts(blocks, tmp_path):
    (block,) = [b for b in blocks if "GRUB_CMDLINE_XEN_DEFAULT" in b.body]
    cmdline = shlex.split(re.search(r"^GRUB_CMDLINE_XEN_DEFAULT=(.*)$", block.body,
                                    re.M).group(1))[0]
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-1\n")
    runner = FakeRunner()
    runner.respond(["xl", "info"], 0, f"xen_commandline        : {cmdline}\n"
                                      "xen_scheduler          : credit2\n")
    probe = HostProbe(runner=runner, root=tmp_path)
    for check in (check_dom0_vcpus(probe), check_cstates(probe), check_scheduler(probe)):
        assert check.status is Status.OK, check
    assert re.search(r"\bdom0_mem=(\d+)M,max:\1M\b", cmdline), cmdline


# -- the extractor itself ---------------------------------------------------------


PAGE_TEXT = """\
# A page

```sh
# lab: dom0
echo one
```

```text
not a command
```

```sh
# lab: skip (reboots)
sudo reboot
```

```sh
echo unmarked
```

```sh
# lab: skip
echo no reason
```

```sh
# lab: dom0
false
echo never
```
"""


def test_the_extractor_reads_markers_and_reports_what_is_untestable():
    found = command_blocks(PAGE_TEXT)
    assert [(b.line, b.where, b.reason) for b in found] == [
        (3, "dom0", ""), (12, "skip", "reboots"), (17, None, ""), (21, "skip", ""),
        (26, "dom0", "")]
    assert found[0].body == "echo one\n"
    said = problems(found)
    assert len(said) == 2
    assert said[0].startswith("line 17: no `# lab: dom0`") and "echo unmarked" in said[0]
    assert said[1] == "line 21: `# lab: skip` without a reason in parentheses"


def test_an_unclosed_fence_is_an_error():
    with pytest.raises(ValueError, match="line 2: fence never closed"):
        command_blocks("text\n```sh\n# lab: dom0\necho\n")


def test_the_dom0_script_runs_each_block_on_its_own_and_reports_each_status(tmp_path):
    script = dom0_script(command_blocks(PAGE_TEXT), str(tmp_path / "work"))
    run = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    got = outputs(run.stdout)
    assert sorted(got) == [3, 26]            # the dom0 blocks only
    assert got[3] == (0, "one\n")
    rc, text = got[26]
    assert rc != 0 and "never" not in text   # sh -e: a failing command ends its block
    assert "reboot" not in script and "unmarked" not in script


def test_a_block_holding_its_own_delimiter_is_refused():
    text = "```sh\n# lab: dom0\ncat <<X\nHOSTDOC_BLOCK_1\nX\n```\n"
    with pytest.raises(ValueError, match="its own delimiter"):
        dom0_script(command_blocks(text), "/tmp/x")


def test_the_run_block_runs_at_the_tdf_advise_printed(blocks, tmp_path):
    """The block that chains advise and run, against a stand-in selena that
    answers advise as selena/advise.py's report does: run gets that TDF."""
    (block,) = [b for b in blocks if "selena run scenarios/first_run.py" in b.body]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    (bin_dir / "selena").write_text(
        '#!/bin/sh\n'
        'case "$1" in\n'
        '  advise) echo "round trip h1 - h2: 80 ms configured"\n'
        '          echo "advice: TDF 7 (predicted round-trip error +2.4%); each virtual '
        'second costs 7 s of real time" ;;\n'
        '  *) echo "selena $*" ;;\n'
        'esac\n')
    for tool in ("sudo", "selena"):
        (bin_dir / tool).chmod(0o755)
    script = tmp_path / "block.sh"
    script.write_text(block.body)
    run = subprocess.run(["sh", "-e", str(script)], capture_output=True, text=True,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "selena run scenarios/first_run.py --tdf 7\n"
