"""Cold compiles in worker processes: a compiler that aborts costs a build, not the user's process.

PoCL compiles inside the calling process, and its LLVM aborts (``LLVM ERROR:
... Aborted``) on code it cannot lower: nothing a Python ``try`` can catch.  So
a program that is not in the kernel cache is compiled by a worker process
(``python -m polyad.runtime.builder``, one JSON request and one JSON answer a
line), which also launches every kernel once on small-valued buffers of the
real sizes: PoCL lowers a kernel for its work-group size at the first launch,
so a crash there happens in the worker too.  The worker answers with the
program binary; the user's process loads that binary (``cl.Program`` from
binaries), which runs no code generator.

Workers are plain subprocesses, not ``multiprocessing``: a spawned
``multiprocessing`` child re-imports the user's ``__main__``, so a script
calling ``pa.build`` at top level without a main guard would build again in
every child.  A worker that dies (a signal, an exit) is answered as a
:class:`CompilerCrash` with the tail of its stderr (LLVM's message), and the
next request starts a fresh one.  ``POLYAD_ISOLATE_BUILDS=0`` compiles in the
calling process instead (debugging).
"""

import atexit
import base64
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ..errors import BuildError, InstallError, PolyadError

_DRY_RUN_BYTES = 1 << 30  # larger buffers are not allocated for the trial launch
#: the worker's stderr line before a kernel's trial launch (the kernel's name after it) and after it (nothing)
LAUNCH_MARK = "polyad: trial launch of "


def env_seconds(name, default):
    """Seconds from environment variable ``name`` (``default`` when unset): a positive number, else a
    PolyadError naming the variable (``float()`` of it raised a bare ValueError when polyad was imported, and 0
    or a negative value failed every build as a timeout)."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < math.inf:
        raise PolyadError(f"{name}={text!r}: expected a positive, finite number of seconds")
    return min(value, 1e6)  # the waits' system calls take milliseconds in an int: inf or 1e308 overflowed them


def build_timeout():
    """Seconds one compile may take: ``POLYAD_BUILD_TIMEOUT``, 600 by default."""
    return env_seconds("POLYAD_BUILD_TIMEOUT", 600.0)


def child_env(**extra):
    """The environment of a ``python -m polyad....`` child process: this one's, with ``extra``, and with the
    folder this polyad was imported from first on ``PYTHONPATH`` where that folder is not a site-packages
    folder, so that a child runs the same polyad where it is not installed (a checkout a script put on
    ``sys.path``; without it every device's probe failed to import polyad, and was recorded as the device's
    failure).  An installed polyad is found by the child's own site-packages: putting those on
    ``PYTHONPATH`` would move them before the standard library."""
    import site

    import polyad

    root = os.path.dirname(os.path.dirname(os.path.abspath(polyad.__file__)))
    env = dict(os.environ, POLYAD_PARENT_PID=str(os.getpid()), **extra)
    # some virtualenvs' site module has no getsitepackages
    sites = {os.path.abspath(d) for d in [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]}
    if root not in sites:
        rest = [q for q in env.get("PYTHONPATH", "").split(os.pathsep) if q and os.path.abspath(q) != root]
        env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    return env


def import_failure(text):
    """The last line of a child's output when it says the child could not import a module (the exception a
    traceback ends with), else None: an incomplete Python environment, which no device or compiler causes
    (:class:`~polyad.errors.InstallError`).  An earlier line that mentions an import (a warning) is not it."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    last = lines[-1] if lines else ""
    return last[:400] if "ModuleNotFoundError" in last or "ImportError" in last else None


def install_error(who, line):
    """The :class:`~polyad.errors.InstallError` of a child ``who`` that could not import what ``line`` says."""
    return InstallError(f"{who} could not import what it needs ({line}): the Python environment of {sys.executable} "
                        "is incomplete, not the OpenCL device; reinstall polyad with its dependencies "
                        "(`pip install polyad`)")


class CompilerCrash(BuildError):
    """The OpenCL compiler took its process down (a signal or an exit) or did not finish in time.

    ``device_fault`` is False where a signal from outside (SIGKILL: the OOM killer, a user) ended it: the
    compiler may well build the program, and the fallback does not remember its widths as failing."""

    device_fault = True


#: how a worker ends when something outside it ends it
_FROM_OUTSIDE = ("(SIGKILL)", "(SIGTERM)", "(SIGHUP)", "(SIGINT)")


class LaunchFailure(CompilerCrash):
    """A kernel failed at its trial launch without taking the process down: on a GPU, what a crash is on a CPU.

    The device context may be lost with it (NVIDIA's OpenCL after an illegal address), so the worker that saw
    it ends: the next build gets a fresh one.  The fallback chain treats it as a crash."""


def isolated():
    """True unless POLYAD_ISOLATE_BUILDS=0: cold compiles run in worker processes."""
    return os.environ.get("POLYAD_ISOLATE_BUILDS", "1").strip() not in ("0", "false", "no")


# ---------------------------------------------------------------------------------------------
# the job, as both sides see it
# ---------------------------------------------------------------------------------------------
def make_job(source, device_key, options=(), launches=()):
    """A compile request: the source, the device, the build options and the kernels' launches.

    ``launches``: per kernel ``(name, [(nbytes, dtype) per argument], global_size, local_size)``;
    the worker checks that every kernel exists and launches each once.
    """
    return {"source": source, "device": device_key, "options": list(options),
            "launches": [[n, [list(a) for a in args], list(g), None if l is None else list(l)]
                         for n, args, g, l in launches]}


def compile_job(job, device=None):
    """Do ``job`` in this process: the binary (bytes), or BuildError with the source and the log."""
    import pyopencl as cl

    from .cache import compile_source
    from .device import device_state, find_by_key

    device = device if device is not None else find_by_key(job["device"])
    prg = compile_source(job["source"], device_state(device).context, device, tuple(job["options"]))
    check_program(prg, job, device)
    binaries = prg.get_info(cl.program_info.BINARIES)
    return bytes(binaries[0]) if binaries else b""


def check_program(prg, job, device):
    """BuildError unless built ``prg`` has every kernel ``job`` launches; then launch each once."""
    import numpy as np
    import pyopencl as cl

    from .device import device_state
    from .module import fit_work_group, kernel_work_group_limit

    state = device_state(device)
    have = set(_kernel_names(prg))
    missing = [n for n, *_ in job["launches"] if n not in have]
    if missing:
        raise BuildError(
            f"the OpenCL compiler of {device.name.strip()} built the program without its kernels "
            f"{missing[:4]} (they use something it cannot compile)", source=job["source"],
            log=_build_log(prg, device))
    total = sum(nb for _, args, _, _ in job["launches"] for nb, _ in args)
    if not job["launches"] or total > _DRY_RUN_BYTES:
        return
    bufs = {}
    for name, args, gsize, lsize in job["launches"]:
        kernel = cl.Kernel(prg, name)
        cl_args = []
        for nbytes, dtype in args:
            key = (nbytes, dtype)
            if key not in bufs:  # ones: every index, divisor and pointer they make stays valid
                host = np.ones(max(1, nbytes // np.dtype(dtype).itemsize), dtype=dtype)
                bufs[key] = cl.Buffer(state.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                      hostbuf=host)
            cl_args.append(bufs[key])
        kernel.set_args(*cl_args)
        if lsize is not None:  # the group the module will launch (a kernel may run fewer than scheduled)
            lsize = fit_work_group(lsize, kernel_work_group_limit(kernel, device))
        # on stderr, for the parent: a crash from here on is this kernel's, not the compiler's (Worker.compile)
        print(f"{LAUNCH_MARK}{name}", file=sys.stderr, flush=True)
        try:
            cl.enqueue_nd_range_kernel(state.queue, kernel, tuple(gsize), None if lsize is None else tuple(lsize))
            state.queue.finish()
        except cl.Error as e:
            # a GPU's answer to what takes a CPU's process down (an out-of-bounds access, a trap): the
            # queue is lost, and with it, on NVIDIA's driver, the context
            raise LaunchFailure(f"kernel {name!r} failed at its trial launch on {device.name.strip()} "
                                f"({type(e).__name__}: {e})", source=job["source"], log=str(e)) from None
        print(f"{LAUNCH_MARK}", file=sys.stderr, flush=True)  # ended: what crashes later is not this kernel


def _kernel_names(prg):
    import pyopencl as cl

    try:
        return [n for n in prg.get_info(cl.program_info.KERNEL_NAMES).split(";") if n]
    except Exception:  # noqa: BLE001 - a program with no kernels reads as an error on some drivers
        return []


def _build_log(prg, device):
    import pyopencl as cl

    try:
        return prg.get_build_info(device, cl.program_build_info.LOG)
    except Exception:  # noqa: BLE001
        return ""


# ---------------------------------------------------------------------------------------------
# the worker process
# ---------------------------------------------------------------------------------------------
def end_with_parent(period=1.0):
    """End this child process (a worker started with :func:`child_env`) once its parent has: a worker whose parent
    was killed mid-job went on at 90% CPU until its trial launch ended.  A thread polls, since the kernel's
    parent-death signal follows the parent's thread that started the child, and builds start workers from any
    thread."""
    parent = os.environ.get("POLYAD_PARENT_PID")
    if not parent or not parent.isdigit():
        return

    def watch():
        while os.getppid() == int(parent):
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def _worker():
    """Answer one JSON request per stdin line with one JSON line on stdout."""
    end_with_parent()
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write into the answer channel
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            binary = compile_job(job)
            ans = {"ok": True, "binary": base64.b64encode(binary).decode()}
        except LaunchFailure as e:
            out.write(json.dumps({"ok": False, "launch_failure": True, "message": str(e), "log": e.log or ""}) + "\n")
            out.flush()
            return  # the context may be lost: the next job starts a fresh worker
        except BuildError as e:
            ans = {"ok": False, "message": str(e), "log": e.log or ""}
        except ImportError as e:  # this environment, not the program: the parent raises InstallError
            ans = {"ok": False, "install": f"{type(e).__name__}: {e}"}
        except Exception as e:  # noqa: BLE001 - everything else is a failed build too, with its message
            ans = {"ok": False, "message": f"{type(e).__name__}: {e}", "log": str(e)}
        out.write(json.dumps(ans) + "\n")
        out.flush()


class LineProcess:
    """A ``python -m MODULE`` subprocess that answers one JSON line per request line: started on the first
    request (sent ``hello`` first, and waited for until it answers it), started again after it dies.  Its
    stderr is kept, to say why it died.  The compile workers are these, and so are the tuner's code generation
    workers (:mod:`polyad.tuner.generate`)."""

    def __init__(self, module, hello=None):
        self.module, self.hello = module, hello
        self.proc = None
        self.err = None
        self.launching = None  # set by died(): the kernel a compile worker was launching when it died

    def _start(self):
        self.close()
        self.err = tempfile.TemporaryFile("w+b")
        env = child_env(PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env)
        if self.hello is not None:
            self.proc.stdin.write((json.dumps(self.hello) + "\n").encode())
            self.proc.stdin.flush()
            if not _readline(self.proc, build_timeout()):
                raise OSError(f"{self.module} did not start")

    def ask(self, request, timeout):
        """``(answer, stderr offset)``: the answer to ``request`` (a dict), or None when the process died, which
        :meth:`died` then describes from the offset on.  Raises TimeoutError (the process closed) past ``timeout``
        seconds."""
        start = 0
        try:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            proc = self.proc  # close() on another thread forgets it: this thread then reads a closed pipe
            start = self.err.tell()
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            line = _readline(proc, timeout)
        except TimeoutError:  # before OSError, its base class: a slow answer is not a dead process
            self.close()
            raise
        except OSError:  # BrokenPipeError: it died before it read the request, or at its start
            line = b""
        except BaseException:  # Ctrl-C: its answer would come to the next request, another program's binary
            self.close()
            raise
        return (json.loads(line) if line else None), start

    def died(self, start):
        """How the process ended and its last error line on stderr after ``start`` (``"(SIGABRT): ..."``); it is
        reaped and forgotten."""
        rc = None
        proc, err = self.proc, self.err  # close() may run on another thread (Ctrl-C in the tuner's pool)
        if proc is not None:
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        text = ""
        if err is not None:
            try:
                err.seek(start)
                text = err.read().decode(errors="replace")
                err.seek(0, 2)
            except (OSError, ValueError):  # closed meanwhile
                text = ""
        self.proc = None
        if rc is not None and rc < 0:
            try:
                how = signal.Signals(-rc).name
            except ValueError:
                how = f"signal {-rc}"
        else:
            how = f"exit status {rc}"
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        marks = [ln[len(LAUNCH_MARK):] for ln in lines if ln.startswith(LAUNCH_MARK.strip())]
        self.launching = marks[-1] if marks and marks[-1] else None  # the kernel whose trial launch it died in
        lines = [ln for ln in lines if not ln.startswith(LAUNCH_MARK.strip())]
        msg = [ln for ln in lines if "error" in ln.lower()] or lines
        return f"({how})" + (f": {msg[-1][:400]}" if msg else "")

    def close(self):
        # taken first: a thread reading this process may forget it meanwhile (died() after Ctrl-C closed it; its
        # AttributeError replaced the KeyboardInterrupt)
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.kill()
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
            for pipe in (proc.stdin, proc.stdout):  # else a ResourceWarning at every cold build
                with contextlib.suppress(OSError, ValueError):
                    if pipe is not None:
                        pipe.close()
        err, self.err = self.err, None
        if err is not None:  # read by died() before a close, never after
            err.close()


class Worker(LineProcess):
    """One compile worker process (started on the first request, replaced after a crash)."""

    def __init__(self):
        super().__init__("polyad.runtime.builder")
        self.lock = threading.Lock()

    def compile(self, job, timeout=None):
        """The binary of ``job``; BuildError when it does not compile, CompilerCrash when the worker dies past
        ``timeout`` seconds (None: :func:`build_timeout`)."""
        timeout = build_timeout() if timeout is None else timeout
        with self.lock:
            try:
                ans, start = self.ask(job, timeout)
            except TimeoutError:
                raise CompilerCrash(f"the OpenCL compiler did not finish in {timeout:g} s "
                                    "(POLYAD_BUILD_TIMEOUT)", source=job["source"], log="") from None
            if ans is None:
                died = self.died(start)
                if import_failure(died):
                    raise install_error("polyad's compile worker", import_failure(died))
                why = (f"the OpenCL compiler crashed its process {died}" if self.launching is None else
                       f"kernel {self.launching!r} crashed its process at its trial launch {died}")
                crash = CompilerCrash(why, source=job["source"], log=why)
                crash.device_fault = not died.startswith(_FROM_OUTSIDE)
                raise crash
            if ans.get("launch_failure"):
                self.close()  # it has ended (or is ending) on its own
                raise LaunchFailure(ans["message"], source=job["source"], log=ans.get("log", ""))
        if ans["ok"]:
            return base64.b64decode(ans["binary"])
        if ans.get("install"):
            raise install_error("polyad's compile worker", ans["install"])
        raise BuildError(ans["message"], source=job["source"], log=ans.get("log", ""))


def _readline(proc, timeout):
    """One line of the worker's stdout within ``timeout`` seconds (b"" when it closed)."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if sel.select(left):
                return proc.stdout.readline()
    finally:
        sel.close()


_WORKER = Worker()
atexit.register(_WORKER.close)


def compile_isolated(job):
    """The binary of ``job``, compiled in the worker process."""
    return _WORKER.compile(job)


if __name__ == "__main__":
    _worker()
