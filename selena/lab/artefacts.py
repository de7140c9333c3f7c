"""Moved to selena.templates.artefacts (the template builds a real host needs
use them too); re-exported here for the lab's and scripts' old import path."""

from selena.templates.artefacts import (
    digest,
    hash_files,
    install_modules,
    kernel_version,
    mkparent,
    pack_cpio,
    shquote,
    tree_files,
)

__all__ = ["digest", "hash_files", "install_modules", "kernel_version", "mkparent", "pack_cpio",
           "shquote", "tree_files"]
