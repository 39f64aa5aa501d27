"""Hooks the probe's child process (``python -m polyad.pipeline.probe --hook module:function``) calls with
each family before checking it (tests only): the faults a broken OpenCL compiler causes, on demand."""

import os


def abort_on_float8(family):
    if family == "float8":
        os.abort()  # what LLVM does (``LLVM ERROR: ...``, SIGABRT) on a construct it cannot lower


def raise_on_float16(family):
    if family == "float16":
        raise RuntimeError("pipeline hook: float16 refused")


def missing_module_on_float2(family):
    if family == "float2":  # what a child whose environment lacks a module dies of
        raise ModuleNotFoundError("No module named 'islpy'")
