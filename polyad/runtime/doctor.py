"""``python -m polyad.runtime.doctor [--fix]``: is there an OpenCL device that compiles?

pip's ``pocl-binary-distribution`` gives every machine an OpenCL CPU device,
but its LLVM 14 does not know CPUs newer than it (on AMD Zen 5 every build
fails with "unknown target CPU 'generic'").  The doctor lists the devices with
the result of compiling a trivial kernel on each; with ``--fix`` and no device
that compiles, it installs Debian's PoCL (``pocl-opencl-icd``) when it can
(apt-get, root), and checks again.  Exit status 0 when a device compiles.
"""

import argparse
import os
import shutil
import subprocess
import sys


def report():
    """(lines, ok): one line per device with its probe result, and whether one compiles."""
    from .device import all_devices, compile_problem, describe

    lines, ok = [], False
    for p, d in all_devices():
        why = compile_problem(d)
        ok |= why is None
        lines.append(f"{'ok  ' if why is None else 'FAIL'} {describe(p, d)}" + ("" if why is None else f"  ({why})"))
    return lines, ok


def _apt_install():
    if not shutil.which("apt-get"):
        print("doctor: no apt-get here; install a system PoCL or a vendor OpenCL driver by hand")
        return False
    if os.geteuid() != 0:
        print("doctor: not root; run `sudo apt-get install pocl-opencl-icd` to get a working PoCL")
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print("doctor: installing Debian's PoCL (apt-get install pocl-opencl-icd)", flush=True)
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "pocl-opencl-icd"]):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            print(f"doctor: `{' '.join(cmd)}` failed")
            return False
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m polyad.runtime.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true", help="install Debian's PoCL if no device compiles")
    args = parser.parse_args(argv)
    from ..errors import DeviceError

    try:
        lines, ok = report()
    except DeviceError as e:
        lines, ok = [str(e)], False
    print("\n".join(lines))
    if ok:
        print("doctor: OK, polyad can build kernels here")
        return 0
    if not args.fix:
        print("doctor: no OpenCL device compiles a kernel; run again with --fix")
        return 1
    if not _apt_install():
        return 1
    # the OpenCL platform list is read once per process: check in a fresh one
    return subprocess.run([sys.executable, "-m", "polyad.runtime.doctor"]).returncode


if __name__ == "__main__":
    sys.exit(main())
