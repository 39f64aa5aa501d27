"""Cold compiles in a worker process: a worker that dies is a CompilerCrash and the next job gets a fresh
one; ``get_program`` compiles through the worker once, then reads its caches; POLYAD_ISOLATE_BUILDS=0."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np
import pytest

import polyad as pa
from polyad.errors import BuildError
from polyad.pipeline import programs
from polyad.runtime import builder, cache
from polyad.runtime.device import device_key, is_gpu

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]

TRIVIAL = "__kernel void k(__global float *a) { a[get_global_id(0)] = 2.0f; }"
# spins for as long as a[0] > 0: the worker's trial launch (buffers of ones) never returns
SPIN = """__kernel void spin(__global volatile float *a) {
  while (a[0] > 0.0f) { a[1] = a[1] + 1.0f; }
}"""
# kernels that take their process down at the worker's trial launch (a[0] == 1 there), from inside it
# as an LLVM abort would: a store to the unmapped page at 4096, and a trap instruction
SEGFAULT = """__kernel void boom(__global float *a) {
  __global float *p = (__global float *)(ulong)(a[0] * 4096.0f);
  p[get_global_id(0)] = 2.0f;
}"""
TRAP = """__kernel void boom(__global float *a) {
  if (a[0] > 0.0f) __builtin_trap();
  a[1] = 3.0f;
}"""


def _job(dev, source=TRIVIAL, launches=(("k", [(16, "float32")], (4,), None),)):
    return builder.make_job(f"// {uuid.uuid4()}\n" + source, device_key(dev), launches=launches)


def _unique_graph(tag):
    """A small graph with stage names no other test uses (a cold program and kernel cache)."""
    name = f"{tag}_{uuid.uuid4().hex[:8]}"
    X = pa.placeholder((3, 5), name="X")
    k = pa.reduce_axis((0, 5), name="k")
    Y = pa.compute((3,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name=name)
    arr = np.random.default_rng(2).standard_normal((3, 5)).astype("float32")
    return Y, [X], [arr]


def test_a_job_for_a_device_that_does_not_exist_is_a_build_error_not_a_crash(device):
    w = builder.Worker()
    try:
        job = _job(device)
        job["device"] = "no platform|no device|nothing"
        with pytest.raises(BuildError) as info:
            w.compile(job)
        assert not isinstance(info.value, builder.CompilerCrash)
        assert "DeviceError" in str(info.value) and "no device" in str(info.value), str(info.value)
        assert info.value.source == job["source"]
        pid = w.proc.pid
        assert w.proc.poll() is None  # the worker answered and lives on
        assert w.compile(_job(device))  # the same worker process does the next job
        assert w.proc.pid == pid
    finally:
        w.close()
    assert w.proc is None


def test_a_worker_missing_a_module_is_an_install_error_not_a_build_error(device, children_without):
    children_without("platformdirs")  # pyopencl imports it when it first builds
    w = builder.Worker()
    try:
        with pytest.raises(pa.InstallError, match="compile worker.*platformdirs"):
            w.compile(_job(device))
    finally:
        w.close()


def test_a_program_without_its_kernels_is_a_build_error(device):
    w = builder.Worker()
    try:
        with pytest.raises(BuildError, match="without its kernels") as info:
            w.compile(_job(device, launches=[("absent", [], (1,), None)]))
        assert not isinstance(info.value, builder.CompilerCrash)
        with pytest.raises(BuildError) as info:
            w.compile(_job(device, source="__kernel void k(__global float *a) { a[0] = undefined_thing; }"))
        assert not isinstance(info.value, builder.CompilerCrash)
        assert "undefined_thing" in (info.value.log or "") + str(info.value)
    finally:
        w.close()


@pytest.mark.parametrize("how", ["SIGSEGV", "SIGILL", "SIGKILL"])
def test_a_worker_that_dies_mid_job_is_a_compiler_crash_and_the_next_job_works(device, how):
    """SIGSEGV, SIGILL: the job's kernel takes the worker down at its trial launch; SIGKILL: the worker is
    killed from outside while it is in a job that never finishes.  (A SIGABRT sent from outside is not
    a faithful stand-in for LLVM's abort: once LLVM is loaded its handler catches the first one and
    the worker carries on.  tests/pipeline/test_probe.py has a real abort(), in the probe's child.)"""
    w = builder.Worker()
    try:
        assert w.compile(_job(device))  # the worker is up
        pid = w.proc.pid
        boom = [("boom", [(64, "float32")], (1,), None)]
        timer = None
        if how == "SIGKILL":
            job = _job(device, SPIN, launches=[("spin", [(64, "float32")], (1,), None)])
            err = w.err

            def kill_in_the_launch():
                # the worker marks a trial launch on its stderr: kill it there, however long the compile took (a
                # fixed second lost the race on a loaded machine, the compiler still running)
                mark, deadline = (builder.LAUNCH_MARK + "spin").encode(), time.monotonic() + 100
                while mark not in os.pread(err.fileno(), 1 << 16, 0) and time.monotonic() < deadline:
                    time.sleep(0.02)
                os.kill(pid, signal.SIGKILL)

            timer = threading.Thread(target=kill_in_the_launch, daemon=True)
            timer.start()
        else:
            job = _job(device, SEGFAULT if how == "SIGSEGV" else TRAP, launches=boom)
        try:
            with pytest.raises(builder.CompilerCrash) as info:
                w.compile(job, timeout=120)
        finally:
            if timer is not None:
                timer.join()
        msg = str(info.value)
        if how != "SIGKILL" and is_gpu(device):
            # a GPU reports the bad access or the trap as a launch error; the worker ends all the same
            assert isinstance(info.value, builder.LaunchFailure) and "'boom' failed at its trial launch" in msg, msg
        else:
            # where it died: in a kernel's trial launch, not in the compiler (the worker says which it launched)
            name = "spin" if how == "SIGKILL" else "boom"
            assert f"kernel '{name}' crashed its process at its trial launch ({how})" in msg, msg
        assert info.value.device_fault == (how != "SIGKILL")  # a kill from outside is not the compiler's fault
        assert info.value.source == job["source"]
        assert w.proc is None  # the dead worker is forgotten
        assert w.compile(_job(device))  # a fresh worker
        assert w.proc.pid != pid
    finally:
        w.close()


def test_a_failed_trial_launch_is_a_launch_failure_naming_the_kernel(device, monkeypatch):
    """What the worker does where a launch fails without a crash (a GPU's illegal address: NVIDIA's OpenCL
    answered INVALID_COMMAND_QUEUE at clFinish, and the worker's context was lost with it)."""
    import pyopencl as cl

    def lost(*args, **kw):
        raise cl.LogicError("clFinish failed: INVALID_COMMAND_QUEUE")

    job = _job(device)
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lost)
    with pytest.raises(builder.LaunchFailure, match=r"kernel 'k' failed at its trial launch .*INVALID_COMMAND_QUEUE"):
        builder.compile_job(job, device)


def test_a_worker_that_reports_a_launch_failure_is_replaced(device, tmp_path):
    """The worker answers a LaunchFailure and ends; the client raises it (a CompilerCrash: the fallback chain
    narrows the schedule) and starts a fresh worker for the next job."""
    script = tmp_path / "fake_worker.py"
    script.write_text("import json, sys\nsys.stdin.readline()\nprint(json.dumps({'ok': False, "
                      "'launch_failure': True, 'message': \"kernel 'k' failed at its trial launch on X\", 'log': ''}))\n")

    class OnceFake(builder.Worker):
        """The fake worker first, real ones after it."""
        started = 0

        def _start(self):
            self.started += 1
            if self.started > 1:
                return super()._start()
            self.err = tempfile.TemporaryFile("w+b")
            self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.err)

    w = OnceFake()
    try:
        with pytest.raises(builder.LaunchFailure, match="failed at its trial launch") as info:
            w.compile(_job(device), timeout=60)
        assert isinstance(info.value, builder.CompilerCrash) and w.proc is None
        assert w.compile(_job(device)) and w.started == 2  # a fresh, real worker
    finally:
        w.close()


def test_a_worker_killed_between_jobs_is_replaced_silently(device):
    w = builder.Worker()
    try:
        assert w.compile(_job(device))
        old = w.proc
        old.kill()
        old.wait(timeout=10)
        assert w.compile(_job(device))  # not a crash: nothing was being compiled
        assert w.proc is not old and w.proc.poll() is None
    finally:
        w.close()


def test_ctrl_c_while_a_worker_compiles_closes_it(device, monkeypatch):
    # the interrupted job's answer would otherwise be read as the next job's: another program's binary, which
    # the kernel cache then kept under the next program's key
    w = builder.Worker()
    real = builder._readline

    def interrupted(proc, timeout):
        monkeypatch.setattr(builder, "_readline", real)
        raise KeyboardInterrupt

    try:
        assert w.compile(_job(device))
        monkeypatch.setattr(builder, "_readline", interrupted)
        with pytest.raises(KeyboardInterrupt):
            w.compile(_job(device, TRAP.replace("boom", "first"), launches=[("first", [(16, "float32")], (4,), None)]))
        assert w.proc is None
        second = "__kernel void second(__global float *a) { a[get_global_id(0)] = 5.0f; }"
        binary = w.compile(_job(device, second, launches=[("second", [(16, "float32")], (4,), None)]))
        assert b"second" in binary and b"first" not in binary
    finally:
        w.close()


def test_closing_a_worker_while_another_thread_sees_it_die_raises_nothing(device):
    # the tuner closes its workers on Ctrl-C while their reader threads see them die: died() forgot the process
    # between close()'s check and its use, and an AttributeError replaced the KeyboardInterrupt
    w = builder.Worker()
    try:
        assert w.compile(_job(device))
        proc, kill = w.proc, w.proc.kill

        def kill_then_reader_sees_it():
            kill()
            w.died(0)  # the reader thread, at the worst moment

        proc.kill = kill_then_reader_sees_it
        w.close()
        assert w.proc is None and w.err is None
        assert w.died(0).startswith("(")  # after the close too
        assert w.compile(_job(device))
    finally:
        w.close()


def test_a_worker_ends_when_its_parent_is_killed_mid_job(device, tmp_path):
    # it went on at 90% CPU until its trial launch ended (here: never)
    script = tmp_path / "parent.py"
    script.write_text(f"""
import sys, uuid
from polyad.runtime import builder
from polyad.runtime.device import device_key
from polyad.pipeline import select_device
w = builder.Worker()
job = builder.make_job("// " + str(uuid.uuid4()) + "\\n" + {SPIN!r}, device_key(select_device()),
                       launches=[("spin", [(64, "float32")], (1,), None)])
w._start()
print(w.proc.pid, flush=True)
w.compile(job, timeout=600)
""")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=builder.child_env())
    try:
        worker = int(parent.stdout.readline())
        time.sleep(3)  # the job is in the worker: compiled, spinning in its trial launch
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.2)
        assert not _alive(worker), "the worker outlived its parent"
    finally:
        parent.kill()
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_worker_that_does_not_answer_in_time_is_a_compiler_crash(device):
    w = builder.Worker()
    try:
        assert w.compile(_job(device))
        with pytest.raises(builder.CompilerCrash, match="did not finish in 2 s"):
            w.compile(_job(device, SPIN, launches=[("spin", [(64, "float32")], (1,), None)]), timeout=2)
        assert w.proc is None
        assert w.compile(_job(device))
    finally:
        w.close()


def test_a_cold_build_compiles_in_the_worker_once_then_reads_the_caches(device, monkeypatch):
    real = builder.compile_isolated
    calls = []
    monkeypatch.setattr(builder, "compile_isolated", lambda job: calls.append(job["source"]) or real(job))
    Y, ins, arrays = _unique_graph("sumsq_cold")
    want = pa.evaluate(Y, dict(zip(ins, arrays)))
    before = cache.STATS.compiles
    mod = pa.build(Y, ins)
    np.testing.assert_allclose(mod(*arrays), want, rtol=1e-5, atol=1e-5)
    assert len(calls) == 1 and calls[0] == mod.source
    assert cache.STATS.compiles == before + 1

    mod = pa.build(Y, ins)  # this process's caches: neither generated nor compiled again
    np.testing.assert_allclose(mod(*arrays), want, rtol=1e-5, atol=1e-5)
    assert len(calls) == 1 and cache.STATS.compiles == before + 1

    cache.clear_memory()
    programs.clear_memory()
    hits = cache.STATS.disk_hits
    mod = pa.build(Y, ins)  # the disk caches: the program record and the binary
    np.testing.assert_allclose(mod(*arrays), want, rtol=1e-5, atol=1e-5)
    assert len(calls) == 1 and cache.STATS.compiles == before + 1
    assert cache.STATS.disk_hits == hits + 1


def test_builds_without_isolation_compile_in_this_process(device, monkeypatch):
    monkeypatch.setenv("POLYAD_ISOLATE_BUILDS", "0")
    assert not builder.isolated()

    def refuse(job):
        raise AssertionError("POLYAD_ISOLATE_BUILDS=0 still compiled in the worker")

    monkeypatch.setattr(builder, "compile_isolated", refuse)
    Y, ins, arrays = _unique_graph("sumsq_inproc")
    mod = pa.build(Y, ins)
    np.testing.assert_allclose(mod(*arrays), pa.evaluate(Y, dict(zip(ins, arrays))), rtol=1e-5, atol=1e-5)
    cache.clear_memory()
    programs.clear_memory()
    hits = cache.STATS.disk_hits
    mod = pa.build(Y, ins)  # the binary it stored loads from disk
    np.testing.assert_allclose(mod(*arrays), pa.evaluate(Y, dict(zip(ins, arrays))), rtol=1e-5, atol=1e-5)
    assert cache.STATS.disk_hits == hits + 1
    # the in-process path checks the kernels too
    with pytest.raises(BuildError, match="without its kernels"):
        cache.get_program("// " + uuid.uuid4().hex + "\n" + TRIVIAL, device, (), [("absent", [], (1,), None)])


@pytest.mark.parametrize("isolate", ["1", "0"])
def test_a_cold_program_is_compiled_once_in_either_mode(device, monkeypatch, isolate):
    """``STATS.compiles`` counts programs compiled from source: one cold program is one compile, whether
    the worker compiles it or (POLYAD_ISOLATE_BUILDS=0) this process does."""
    monkeypatch.setenv("POLYAD_ISOLATE_BUILDS", isolate)
    builds = []
    real = cache.compile_source
    monkeypatch.setattr(cache, "compile_source", lambda *a, **k: builds.append(1) or real(*a, **k))
    before = cache.STATS.compiles
    source = f"// {uuid.uuid4().hex}\n" + TRIVIAL
    prg = cache.get_program(source, device, (), [("k", [(16, "float32")], (4,), None)])
    assert prg is not None
    # this process compiles it at most once (the worker's compile is in the worker)
    assert len(builds) <= 1, f"{len(builds)} compiles of one program in this process"
    assert cache.STATS.compiles == before + 1


def test_a_closed_worker_leaves_no_open_file(device):
    """Its pipes and its stderr file were left to the garbage collector: a ResourceWarning at every cold build."""
    import gc
    import warnings

    w = builder.Worker()
    w.compile(_job(device))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        w.close()
        gc.collect()
    assert not [c for c in caught if issubclass(c.category, ResourceWarning)], [str(c.message) for c in caught]
    w.compile(_job(device))  # and it starts again
    w.close()


@pytest.mark.parametrize("text, launching", [
    (b"LLVM ERROR: Do not know how to scalarize\n", None),  # the compiler's own death
    (f"{builder.LAUNCH_MARK}k1\n{builder.LAUNCH_MARK}\n{builder.LAUNCH_MARK}k2\n".encode(), "k2"),
    (f"{builder.LAUNCH_MARK}k1\n{builder.LAUNCH_MARK}\nerror: after the launches\n".encode(), None),
])
def test_a_dead_workers_stderr_says_whether_it_died_in_a_trial_launch(text, launching):
    import tempfile

    w = builder.Worker()
    w.err = tempfile.TemporaryFile("w+b")
    w.err.write(b"from an earlier job\n" + text)
    try:
        died = w.died(len(b"from an earlier job\n"))
    finally:
        w.close()
    assert w.launching == launching
    assert builder.LAUNCH_MARK.strip() not in died  # the marks are not the reason
