"""``python -m polyad.runtime.doctor [--fix]``: does an OpenCL device run what polyad generates?

pip's ``pocl-binary-distribution`` gives every machine an OpenCL CPU device,
but its LLVM 14 does not know CPUs newer than it: on AMD Zen 5 every build
fails ("unknown target CPU 'generic'"); on a Zen 4 it targets AVX2, claims
float16 vectors, then builds float16 programs without kernels or aborts in
LLVM.  The doctor runs polyad's capability probe on every device (in child
processes: :mod:`polyad.pipeline.probe`) and prints what passed.  With
``--fix``, when no device passes whole and Debian's PoCL (``pocl-opencl-icd``,
PoCL 3.1 with LLVM 15) can be installed (apt-get, root), it installs it and
checks again.  Exit status 0 when some device is usable (scalar code compiles
and computes right: polyad then uses only the vector widths that passed).
"""

import argparse
import os
import shutil
import subprocess
import sys


def report():
    """(lines, usable, passes): one line per device with its probe result; whether one is usable, one passes."""
    from ..pipeline import capabilities
    from .device import all_devices, describe

    lines, usable, passes = [], False, False
    for p, d in all_devices():
        caps = capabilities(d)
        usable |= caps.usable
        passes |= caps.passes
        state = "ok  " if caps.passes else ("part" if caps.usable else "FAIL")
        lines.append(f"{state} {describe(p, d)}")
        lines += [f"       {fam}: {why}" for fam, why in sorted(caps.failures.items())]
    return lines, usable, passes


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


def _system_pocl_installed():
    return os.path.exists("/etc/OpenCL/vendors/pocl.icd")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m polyad.runtime.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true",
                        help="install Debian's PoCL when no device passes polyad's probe")
    args = parser.parse_args(argv)
    from ..errors import DeviceError

    try:
        lines, usable, passes = report()
    except DeviceError as e:
        lines, usable, passes = [str(e)], False, False
    print("\n".join(lines))
    if passes:
        print("doctor: OK, polyad builds and runs its kernels here")
        return 0
    if args.fix and not _system_pocl_installed() and _apt_install():
        # the OpenCL platform list is read once per process: check in a fresh one
        return subprocess.run([sys.executable, "-m", "polyad.runtime.doctor"]).returncode
    if usable:
        print("doctor: OK with limits: polyad uses only the vector widths that passed (slower code)"
              + ("" if args.fix else "; `--fix` installs Debian's PoCL where it can"))
        return 0
    print("doctor: no OpenCL device runs polyad's kernels correctly"
          + ("" if args.fix else "; run again with --fix"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
