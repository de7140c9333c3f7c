"""The lab apart from the product (issue 35 item 4): no product module (every
selena module outside selena/lab) imports the lab, the CLI finds `selena lab`
through an entry point, and test doubles live under tests/support."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import selena.cli
import selena.runner
from selena.cli import main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "selena"
LAB = PACKAGE / "lab"
# `selena lab --help` before the split, in its order.
LAB_COMMANDS = ["build", "run", "shell", "check-clock", "bench-clock", "demo", "bench",
                "bench-control", "bench-deploy", "bench-guests", "bench-bandwidth"]


def product_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if not p.is_relative_to(LAB))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, and every
    module named to importlib.import_module / __import__ as a literal."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and getattr(node.func, "attr", getattr(node.func, "id", None)) \
                in ("import_module", "__import__"):
            found.add(node.args[0].value)
    return found


def is_lab(module: str) -> bool:
    return module == "selena.lab" or module.startswith("selena.lab.")


def test_the_import_parser_sees_the_lab_where_it_is_imported():
    # The check below would pass vacuously if imported() missed the forms used.
    assert "selena.lab.qemu" in imported(LAB / "__init__.py")
    assert "selena.lab.build" in imported(LAB / "qemu.py")
    assert "selena.lab.demo" in imported(LAB / "cli.py")       # `from selena.lab import demo`
    assert "selena.templates.build" in imported(LAB / "build.py")


def test_no_product_module_imports_the_lab():
    files = product_files()
    assert PACKAGE / "templates" / "build.py" in files and len(files) > 50
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imported(p) if is_lab(m))
                 for p in files}
    assert {f: m for f, m in offenders.items() if m} == {}


def test_importing_every_product_module_loads_no_lab_module():
    """At run time too: nothing in the product pulls the lab in indirectly."""
    names = [module_name(p) for p in product_files() if p.name != "__main__.py"]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.startswith('selena.lab')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_test_doubles_are_not_in_the_package():
    assert not hasattr(selena.runner, "FakeRunner")
    doubles = [f"{p.relative_to(ROOT)}: {node.name}" for p in PACKAGE.rglob("*.py")
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.ClassDef) and node.name.startswith(("Fake", "Stub"))]
    assert doubles == []
    assert (ROOT / "tests" / "support" / "fake_runner.py").exists()


def entry_points_text() -> str:
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    return "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
                   for group, points in groups.items())


def test_pyproject_registers_the_lab_as_a_plugin_of_the_cli():
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert groups[selena.cli.PLUGIN_GROUP] == {"lab": "selena.lab.cli"}
    assert not any(is_lab(m) for m in selena.cli.SUBCOMMAND_MODULES)
    assert selena.cli.KNOWN_PLUGINS == groups[selena.cli.PLUGIN_GROUP]


@pytest.fixture
def installed_entry_points(tmp_path, monkeypatch):
    """This tree's entry points as pip install -e . writes them (the shared
    venv's metadata may predate them): a distribution's dist-info on sys.path."""
    info = tmp_path / "selena_entry_points_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: selena-entry-points-probe\n"
                                   "Version: 0\n")
    (info / "entry_points.txt").write_text(entry_points_text())
    monkeypatch.syspath_prepend(str(tmp_path))


def lab_help(capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(["lab", "--help"])
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


# `selena lab --help` at 80 columns before the split, word for word.
LAB_HELP = """\
usage: selena lab [-h] LAB_COMMAND ...

positional arguments:
  LAB_COMMAND
    build          build (or find cached) every lab artefact
    run            boot the lab and run COMMAND in Dom0
    shell          an interactive Dom0 shell
    check-clock    prove in a lab guest that clocks and timers follow the TDF
    bench-clock    ns per clock_gettime and per RDTSC in a guest, dilated or
                   not, native or emulated TSC
    demo           the shipped demo scenario in the lab at TDF 1 and at TDF N,
                   side by side
    bench          print lab build, boot and guest figures
    bench-control  control-channel round trips vs. subprocess xenstore tools
    bench-deploy   selena deploy of N guests vs. raw xl create
    bench-guests   PV against PVH guests: boot, memory, RTT floor, clock error
    bench-bandwidth
                   faithful bandwidth of Mininet and of selena at several TDFs

options:
  -h, --help       show this help message and exit
"""


def test_selena_lab_help_lists_the_same_sub_commands(installed_entry_points, capsys,
                                                     monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, err = lab_help(capsys)
    assert rc == 0, err
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ")
              and not line.startswith("     ")]
    assert listed == LAB_COMMANDS
    assert out == LAB_HELP
    top = selena.cli.build_parser().format_help()
    assert "the QEMU lab: patched Xen + Debian Dom0" in top


def test_a_lab_command_parses_to_the_lab_module(installed_entry_points):
    from selena.lab import cli as lab_cli

    args = selena.cli.build_parser().parse_args(["lab", "run", "--tdf", "5", "--", "true"])
    assert args.func is lab_cli.cmd_run and args.tdf == 5.0


def test_the_lab_registered_twice_is_one_command(installed_entry_points, tmp_path, monkeypatch):
    """An install and a source tree can both declare it: argparse would
    refuse a second `lab` parser."""
    other = tmp_path / "again"
    info = other / "selena_again-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: selena-again\nVersion: 0\n")
    (info / "entry_points.txt").write_text(entry_points_text())
    monkeypatch.syspath_prepend(str(other))
    assert list(selena.cli.plugin_modules()).count("lab") == 1
    assert "lab" in selena.cli.build_parser().format_help()


def test_without_the_entry_point_selena_lab_says_how_to_fix_it(monkeypatch, capsys):
    monkeypatch.setattr(selena.cli, "entry_points", lambda group: [])
    assert main(["-v", "lab", "build"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "`selena lab` is not registered" in err and "pip install -e ." in err
    assert "lab" not in selena.cli.build_parser().format_help().split("COMMAND", 2)[-1]


def test_check_clock_passes_an_hvm_guest_and_its_clocksource_to_the_lab(
        installed_entry_points, monkeypatch, capsys):
    from selena.lab import cli as lab_cli

    commands = []

    class FakeLab:
        def __init__(self, **kwargs):
            pass

        def run(self, command, **kwargs):
            commands.append(command)
            return type("Result", (), {"returncode": 0})()
    monkeypatch.setattr(lab_cli, "Lab", FakeLab)
    assert main(["lab", "check-clock", "--tdf", "5", "--guest", "hvm",
                 "--clocksource", "acpi_pm"]) == 0
    assert commands[0][-4:] == ["--guest", "hvm", "--clocksource", "acpi_pm"]


def test_a_clocksource_for_a_pv_guest_is_refused_in_one_line_before_any_boot(
        installed_entry_points, monkeypatch, capsys):
    from selena.lab import cli as lab_cli

    def no_boot(*args, **kwargs):
        raise AssertionError("the lab was booted")
    monkeypatch.setattr(lab_cli, "Lab", no_boot)
    # Any clocksource, the HVM default's name too: a PV guest has none to pick.
    for clocksource in ("tsc", "hpet"):
        assert main(["lab", "check-clock", "--tdf", "5", "--clocksource", clocksource]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--clocksource is for --guest hvm" in err


@pytest.mark.parametrize("argv,message", [
    (["check-clock", "--tdf", "0"], "argument --tdf: TDF 0 is out of range (1 to 1000)"),
    (["check-clock", "--tdf", "5", "--vcpus", "0"], "argument --vcpus: 0: want 1 or more"),
    (["check-clock", "--tdf", "5", "--change-to", "2,x"],
     "argument --change-to: TDF 'x' is not a number"),
    (["bench-control", "--commands", "-5"], "argument --commands: -5: want 1 or more"),
    (["bench-control", "--guests", "many"], "argument --guests: 'many' is not a whole number"),
    (["bench-guests", "--tdfs", ","], "argument --tdfs: ',': want TDFs separated by commas"),
    (["bench-bandwidth", "--tdfs", "5,2000"], "argument --tdfs: TDF 2000 is out of range"),
    (["bench-bandwidth", "--mininet-start", "nan"],
     "argument --mininet-start: nan: want a number of Mbit/s above 0"),
    (["bench-deploy", "--sizes", "1,0"], "argument --sizes: 0: want 1 or more"),
    (["run", "--timeout", "-1", "--", "true"],
     "argument --timeout: -1: want a number of seconds above 0"),
])
def test_a_lab_commands_bad_value_is_one_line_before_any_boot(
        installed_entry_points, monkeypatch, capsys, argv, message):
    """Checked by the parser, not by the program in Dom0 minutes after a boot."""
    from selena.lab import cli as lab_cli

    def no_boot(*args, **kwargs):
        raise AssertionError("the lab was booted")
    monkeypatch.setattr(lab_cli, "Lab", no_boot)
    with pytest.raises(SystemExit) as exit_:
        main(["lab", *argv])
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"selena lab {argv[0]}: error: {message}"), last
