"""Compiled OpenCL programs, cached in memory and on disk.

The key is a hash of the source, the device (platform, name, driver versions)
and the build options.  On disk (``$POLYAD_CACHE_DIR``, default
``<user cache dir>/polyad/kernels``) an entry is the program binary behind a
header with its SHA-256, written atomically: a truncated, corrupt or
unloadable entry is detected, reported with a warning and rebuilt from source.
An unwritable cache directory only costs a warning.  ``STATS`` counts
compilations and hits (tests use it to prove a warm process compiles nothing).
"""

import hashlib
import os
import tempfile
import warnings
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import BuildError
from .device import device_key, device_state
from .records import cache_dir

_MAGIC = b"POLYAD-CL-BINARY-1\n"
_FORMAT = "1"  # bump when the entry layout or the code generator's ABI changes


@dataclass
class Stats:
    compiles: int = 0  # programs compiled from source
    disk_hits: int = 0  # programs loaded from a disk entry
    memory_hits: int = 0  # programs found in this process's memory cache
    corrupt: int = 0  # disk entries found unusable and rebuilt

    def reset(self):
        self.compiles = self.disk_hits = self.memory_hits = self.corrupt = 0


STATS = Stats()
# the programs built or loaded in this process, least recently used first; bounded: a tuning run loads one
# program a distinct kernel, thousands in all (PoCL: 150 one-line kernels' programs took 20 MB, bigger kernels
# more). An evicted program reloads from disk (30-45 ms); a module keeps its own.
_MEMORY = OrderedDict()
MEMORY_PROGRAMS = 128


def cache_key(source, device, options):
    h = hashlib.sha256()
    for part in (_FORMAT, source, device_key(device), " ".join(options)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def get_program(source, device, options=(), launches=()):
    """A built ``pyopencl.Program`` of ``source`` for ``device``, from the caches when possible.

    A cold compile runs in a worker process (:mod:`polyad.runtime.builder`): the
    binary it returns is stored on disk and loaded here.  ``launches`` (see
    :func:`polyad.runtime.builder.make_job`) are the kernels the program must
    have; the worker launches each once.  BuildError (CompilerCrash when the
    compiler took its process down) when it does not build.
    """
    import pyopencl as cl

    from . import builder

    options = tuple(options)
    key = cache_key(source, device, options)
    prg = _MEMORY.get(key)
    if prg is not None:
        STATS.memory_hits += 1
        _MEMORY.move_to_end(key)
        return prg
    ctx = device_state(device).context
    path = os.path.join(cache_dir(), key[:2], key + ".bin")
    prg = _load(path, ctx, device, options, cl)
    if prg is None:
        STATS.compiles += 1
        job = builder.make_job(source, device_key(device), options, launches)
        if builder.isolated():
            binary = builder.compile_isolated(job)
            prg = _from_binary(binary, ctx, device, options, cl) if binary else None
            if prg is None:  # a driver that gives no usable binary: compile here (it did not crash there)
                prg = compile_source(source, ctx, device, options, count=False)
        else:
            prg = compile_source(source, ctx, device, options, count=False)
            builder.check_program(prg, job, device)  # the worker's checks: kernels present, one launch each
        _store(path, prg, cl)
    _MEMORY[key] = prg
    while len(_MEMORY) > MEMORY_PROGRAMS:
        _MEMORY.popitem(last=False)
    return prg


def precompile(requests, device, workers=1, timeout=None, pool=None):
    """Compile the programs of ``requests`` that the disk cache lacks, ``workers`` at a time, each in
    its own worker process (:class:`polyad.runtime.builder.Worker`), and store their binaries on disk:
    a later :func:`get_program` of the same request loads the binary.  One that does not build costs
    only itself.

    :param requests: ``(source, options, launches)`` per program (launches as :func:`get_program` takes them).
    :param device: the ``pyopencl.Device``.
    :param workers: how many compiler processes run at once.
    :param timeout: seconds one compile may take (None: ``POLYAD_BUILD_TIMEOUT``).
    :param pool: :class:`~polyad.runtime.builder.Worker` objects to compile with (started on first use and
        left running for the next call: a worker takes 0.9 s to start), instead of ``workers`` new ones
        closed at the end.
    :returns: per request, None when its binary is on disk (or in memory), else the :class:`BuildError`
        (a :class:`~polyad.runtime.builder.CompilerCrash` when the compiler took its process down).
    """
    import queue
    from concurrent.futures import ThreadPoolExecutor

    from . import builder

    results = [None] * len(requests)
    todo = []
    for i, (source, options, launches) in enumerate(requests):
        key = cache_key(source, device, tuple(options))
        path = os.path.join(cache_dir(), key[:2], key + ".bin")
        if key not in _MEMORY and not os.path.exists(path):
            todo.append((i, path, builder.make_job(source, device_key(device), tuple(options), launches)))
    if not todo:
        return results
    if not builder.isolated():  # debugging: compile here, one at a time
        for i, _, _ in todo:
            source, options, launches = requests[i]
            try:
                get_program(source, device, options, launches)
            except BuildError as e:
                results[i] = e
        return results
    idle = queue.Queue()
    mine = pool is None
    for w in ([builder.Worker() for _ in range(max(1, min(int(workers), len(todo))))] if mine else pool):
        idle.put(w)

    def one(item):
        i, path, job = item
        w = idle.get()
        try:
            binary = w.compile(job) if timeout is None else w.compile(job, timeout=timeout)
        except BuildError as e:
            results[i] = e
            return
        finally:
            idle.put(w)
        STATS.compiles += 1
        _store_binary(path, binary)

    try:
        with ThreadPoolExecutor(idle.qsize()) as ex:
            list(ex.map(one, todo))
    finally:
        while mine and not idle.empty():
            idle.get().close()
    return results


def _from_binary(binary, ctx, device, options, cl):
    try:
        return cl.Program(ctx, [device], [binary]).build(options=list(options), devices=[device])
    except Exception:  # noqa: BLE001 - an unloadable binary: the caller compiles from source
        return None


def compile_source(source, ctx, device, options=(), count=True):
    """Compile ``source`` in this process; BuildError with the source and the compiler log on failure."""
    import pyopencl as cl

    if count:
        STATS.compiles += 1
    prg = cl.Program(ctx, source)
    try:
        with warnings.catch_warnings():
            # a successful build's log (NVIDIA: "kernel overrides noinline") is noise for users
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return prg.build(options=list(options), devices=[device])
    except (cl.RuntimeError, cl.Error) as e:
        try:
            log = prg.get_build_info(device, cl.program_build_info.LOG)
        except Exception:  # noqa: BLE001 - the log is in the message then
            log = str(e)
        log = log if log and log.strip() else str(e)
        numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))
        raise BuildError(
            f"OpenCL build failed on {device.name.strip()}:\n{log.strip()}\n\nsource:\n{numbered}",
            source=source,
            log=log,
        ) from None


def _load(path, ctx, device, options, cl):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return _corrupt(path, f"unreadable ({e})")
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + 32:
        return _corrupt(path, "not a polyad cache entry")
    digest, binary = data[len(_MAGIC): len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
    if hashlib.sha256(binary).digest() != digest or not binary:
        return _corrupt(path, "checksum mismatch (truncated or corrupt)")
    try:
        prg = cl.Program(ctx, [device], [binary]).build(options=list(options), devices=[device])
    except Exception as e:  # noqa: BLE001 - any failure to load means: rebuild
        return _corrupt(path, f"the device rejected the binary ({str(e).strip()[:200]})")
    STATS.disk_hits += 1
    return prg


def _corrupt(path, why):
    STATS.corrupt += 1
    warnings.warn(f"polyad kernel cache entry {path} is {why}; rebuilding it", RuntimeWarning, stacklevel=4)
    return None


def _store(path, prg, cl):
    binaries = prg.get_info(cl.program_info.BINARIES)
    _store_binary(path, bytes(binaries[0]) if binaries else b"")


def _store_binary(path, binary):
    if not binary:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + hashlib.sha256(binary).digest() + binary)
            os.replace(tmp, path)  # atomic: readers never see a partial entry
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        warnings.warn(f"polyad kernel cache: cannot write {path} ({e}); continuing without it", RuntimeWarning, stacklevel=3)


def clear_memory():
    """Forget the programs of this process (the disk cache stays)."""
    _MEMORY.clear()
