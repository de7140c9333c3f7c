"""Helpers shared by the template builders (selena.templates) and the lab's:
content hashes that key the cache, file listings, and kernel modules copied
with their dependencies."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from selena.errors import ImageBuildError
from selena.paths import project_root
from selena.runner import Runner


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def hash_files(paths: Iterable[Path]) -> str:
    """Content and name of each file; names inside the tree are relative to it,
    so every clone of the same commit finds the same cached artefacts."""
    root = project_root()
    named = [(path.relative_to(root) if path.is_relative_to(root) else path, path)
             for path in paths]
    h = hashlib.sha256()
    # In the order of those names, not of the paths: a clone under /tmp put the
    # tree's files before /usr's and one under /work after them.
    for name, path in sorted(named):
        h.update(str(name).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def tree_files(root: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    if not root.exists():
        return []
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
        and (suffixes is None or p.suffix in suffixes)
    )


def mkparent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def shquote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def kernel_version(kernel_root: Path) -> str:
    versions = [p.name for p in (kernel_root / "lib/modules").iterdir()]
    if len(versions) != 1:
        raise ImageBuildError(f"expected one kernel in {kernel_root}, found {versions}")
    return versions[0]


def install_modules(runner: Runner, kernel_root: Path, rootfs: Path,
                    wanted: Iterable[str]) -> None:
    """Copy kernel modules (by name, or every module under a directory of
    the kernel's tree given as "dir/") and their dependencies from an
    unpacked kernel package into a root filesystem, then depmod it."""
    version = kernel_version(kernel_root)
    moddir = kernel_root / "lib/modules" / version
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        path, _, rest = line.partition(":")
        deps[path] = rest.split()
        name = Path(path).name.removesuffix(".ko").replace("_", "-")
        by_name[name] = path
    needed: set[str] = set()
    stack = []
    for mod in wanted:
        if mod.endswith("/"):
            under = [path for path in deps if path.startswith(mod)]
            if not under:
                raise ImageBuildError(f"no kernel modules under {mod} in {version}")
            stack.extend(under)
            continue
        found = by_name.get(mod.replace("_", "-"))
        if found is None:
            raise ImageBuildError(f"kernel module {mod} not found in {version}")
        stack.append(found)
    while stack:
        path = stack.pop()
        if path not in needed:
            needed.add(path)
            stack.extend(deps.get(path, []))
    dest = rootfs / "lib/modules" / version
    for path in needed:
        shutil.copy2(moddir / path, mkparent(dest / path))
    for meta in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (moddir / meta).exists():
            shutil.copy2(moddir / meta, mkparent(dest / meta))
    runner.run(["depmod", "-b", str(rootfs), version])


def pack_cpio(runner: Runner, rootfs: Path, target: Path) -> None:
    """rootfs as a gzip'd newc cpio (an initramfs), written atomically."""
    partial = target.with_suffix(".partial")
    runner.run(["sh", "-c", "find . -mindepth 1 | cpio -o -H newc --quiet | gzip -1 > "
                + shquote(str(partial))], cwd=rootfs, timeout=1800)
    partial.rename(target)


# A step quiet for longer than this prints a progress line (issue 29 item 6:
# every step longer than 10 s shows progress).
HEARTBEAT_S = 10.0


@contextlib.contextmanager
def heartbeat(progress: Callable[[str], None], what: str, *,
              detail: Callable[[], str] | None = None, expected: float | None = None,
              every: float = HEARTBEAT_S) -> Iterator[None]:
    """While the block runs, every `every` seconds: "      WHAT: 40 s
    (DETAIL; the last cold build took N s)", for steps whose tools say
    nothing for minutes (debootstrap, a kernel compiled with make -s)."""
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            parts = [detail()] if detail is not None else []
            if expected:
                parts.append(f"the last cold build took {expected:.0f} s")
            shown = f" ({'; '.join(parts)})" if parts else ""
            progress(f"      {what}: {time.monotonic() - start:.0f} s{shown}")

    thread = threading.Thread(target=beat, name=f"heartbeat-{what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
