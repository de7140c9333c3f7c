"""Moved to selena.templates.images (the debian template's images are what a
real host's templates are built from too); re-exported here for the lab's and
scripts' old import path."""

from selena.templates.images import (
    CHROOT_MOUNTS,
    GUEST_MODULES,
    IMAGE_SLACK_MB,
    INITRAMFS_MODULES,
    MIRROR,
    SUITE,
    TRIM,
    DebianBase,
    DebianImages,
    images_dir,
    scenario_variants,
)

__all__ = ["CHROOT_MOUNTS", "GUEST_MODULES", "IMAGE_SLACK_MB", "INITRAMFS_MODULES", "MIRROR",
           "SUITE", "TRIM", "DebianBase", "DebianImages", "images_dir", "scenario_variants"]
