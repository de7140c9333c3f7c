"""Assertion messages for the lab's check programs' output."""

import re

_FAILED_BLOCK = re.compile(r"^FAILED:\n((?:  .*\n?)+)", re.M)


def failures_first(output: str) -> str:
    """`output` with the "FAILED:" blocks of selena.lab.check_clock and
    check_hv copied to its head: CI shows a failure's first lines only, and
    the table before the block can fill them."""
    blocks = [m.group(1).rstrip("\n") for m in _FAILED_BLOCK.finditer(output)]
    if not blocks:
        return output
    return "FAILED:\n" + "\n".join(blocks) + "\n--- the whole output:\n" + output
