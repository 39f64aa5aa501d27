"""Hooks the probe's child process calls before each family (tests only)."""

import os


def abort_on_float8(family):
    if family == "float8":
        os.abort()  # what LLVM does on a construct it cannot lower


def raise_on_float16(family):
    if family == "float16":
        raise RuntimeError("hook: float16 refused")
