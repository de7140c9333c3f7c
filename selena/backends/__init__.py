"""Backends that turn a plan into running guests (xl now, XenAPI later)."""
