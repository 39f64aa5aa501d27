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

A GPU driver's OpenCL library is found by the ICD loader only through a file
in ``/etc/OpenCL/vendors`` (or ``$OCL_ICD_VENDORS``) naming it.  Containers
get the library from the driver but often not that file: on the lent H200
``/usr/lib/libnvidia-opencl.so`` was there, ``nvidia.icd`` was not, and
every program saw PoCL alone.  The doctor says so whenever it sees such a
library, and ``--fix`` writes the file (root, for ``/etc``).
"""

import argparse
import os
import shutil
import subprocess
import sys

from .builder import child_env


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


def _chosen_problem(spec):
    """Why the device ``POLYAD_DEVICE`` names cannot run polyad's kernels, or None when it can."""
    from ..errors import DeviceError
    from ..pipeline import capabilities
    from .device import find_device

    try:
        dev = find_device(spec)
    except DeviceError as e:
        return str(e)
    if not capabilities(dev).usable:
        return f"it picks {dev.name.strip()}, which fails polyad's probe (above); unset it to use the default"
    return None


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


#: vendor OpenCL libraries (a prefix of the file name) and the ICD file name to register each under
VENDOR_LIBRARIES = (("libnvidia-opencl.so", "nvidia.icd", "NVIDIA"), ("libamdocl64.so", "amdocl64.icd", "AMD"),
                    ("libigdrcl.so", "intel.icd", "Intel"))
LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/opt/rocm/lib")
ICD_DIR = "/etc/OpenCL/vendors"


def _icd_dirs():
    """Where the ICD loader looks: ``$OCL_ICD_VENDORS`` (a folder, or one .icd file) instead of ICD_DIR."""
    env = os.environ.get("OCL_ICD_VENDORS")
    return [env] if env else [ICD_DIR]


def unregistered_vendor_libraries(lib_dirs=None, icd_dirs=None):
    """[(vendor, library path, ICD file name)] for each vendor OpenCL library found in ``lib_dirs`` (the
    usual places and ``$LD_LIBRARY_PATH``) that no ICD file in ``icd_dirs`` names: the loader cannot see it."""
    if lib_dirs is None:
        lib_dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(LIBRARY_DIRS)
    named = set()
    for d in icd_dirs if icd_dirs is not None else _icd_dirs():
        files = [d] if os.path.isfile(d) else ([os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".icd")]
                                               if os.path.isdir(d) else [])
        for f in files:
            try:
                with open(f) as fh:
                    named.add(os.path.basename(fh.read().strip()))
            except OSError:
                continue
    found = []
    for prefix, icd, vendor in VENDOR_LIBRARIES:
        if any(n.startswith(prefix) for n in named):
            continue
        for d in lib_dirs:
            libs = sorted(f for f in os.listdir(d) if f.startswith(prefix)) if os.path.isdir(d) else []
            if libs:
                found.append((vendor, os.path.join(d, libs[0]), icd))
                break
    return found


def _register(found, icd_dir=ICD_DIR):
    """Write an ICD file for each of ``found`` into ``icd_dir``; whether all were written."""
    try:
        os.makedirs(icd_dir, exist_ok=True)
        for vendor, lib, icd in found:
            with open(os.path.join(icd_dir, icd), "w") as fh:
                fh.write(lib + "\n")
            print(f"doctor: registered {vendor}'s OpenCL library: {os.path.join(icd_dir, icd)} names {lib}")
        return True
    except OSError as e:
        print(f"doctor: could not write into {icd_dir}: {e}")
        return False


def _system_pocl_installed():
    return os.path.exists(os.path.join(ICD_DIR, "pocl.icd"))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m polyad.runtime.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--fix", action="store_true",
                        help="install Debian's PoCL when no device passes polyad's probe")
    args = parser.parse_args(argv)
    from ..errors import DeviceError, InstallError

    try:
        lines, usable, passes = report()
    except InstallError as e:  # no driver, PoCL or ICD file mends this: --fix would install the wrong thing
        print(f"{e}\ndoctor: polyad's Python environment is incomplete; fix that first")
        return 1
    except DeviceError as e:
        lines, usable, passes = [str(e)], False, False
    print("\n".join(lines))
    hidden = unregistered_vendor_libraries()
    target = _icd_dirs()[0]
    for vendor, lib, icd in hidden:
        print(f"doctor: {vendor}'s OpenCL library {lib} is installed but no ICD file names it, so no program sees "
              f"its devices: " + (f"`echo {lib} > {target}/{icd}`" + ("" if args.fix else " (or run with --fix)")
                                  if not os.path.isfile(target) else
                                  f"OCL_ICD_VENDORS names the one file {target}; point it at a folder"))
    if hidden and args.fix and not os.path.isfile(target) and _register(hidden, target):
        # the OpenCL platform list is read once per process: check in a fresh one
        return subprocess.run([sys.executable, "-m", "polyad.runtime.doctor"], env=child_env()).returncode
    spec = os.environ.get("POLYAD_DEVICE")
    problem = _chosen_problem(spec) if spec and usable else None
    if problem:  # every build uses that device: an OK about the others would mislead
        print(f"doctor: POLYAD_DEVICE={spec!r}: {problem}")
        return 1
    if passes:
        print("doctor: OK, polyad builds and runs its kernels here")
        return 0
    if args.fix and not _system_pocl_installed() and _apt_install():
        # the OpenCL platform list is read once per process: check in a fresh one
        return subprocess.run([sys.executable, "-m", "polyad.runtime.doctor"], env=child_env()).returncode
    if usable:
        print("doctor: OK with limits: polyad uses only the vector widths that passed (slower code)"
              + ("" if args.fix else "; `--fix` installs Debian's PoCL where it can"))
        return 0
    print("doctor: no OpenCL device runs polyad's kernels correctly"
          + ("" if args.fix else "; run again with --fix"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
