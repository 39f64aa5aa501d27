"""The on-disk kernel cache: a second process compiles nothing; corrupt entries are rebuilt with a warning."""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import polyad as pa
from polyad.runtime import cache

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]

_SCRIPT = r"""
import json, sys
import numpy as np
import polyad as pa
from polyad.runtime.cache import STATS
X = pa.placeholder((6, 4), name="X")
k = pa.reduce_axis((0, 4), name="k")
S = pa.compute((6,), lambda i: pa.sum(X[i, k] * X[i, k], axis=k), name="S")
G = pa.compute((6, 4), lambda i, j: X[i, j] * 2.0 * S[i], name="G")   # a stand-in for a gradient
mod = pa.build(G, [X])
x = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
ok = bool(np.allclose(mod(x), x * 2 * (x * x).sum(1, keepdims=True), rtol=1e-5))
print(json.dumps({"compiles": STATS.compiles, "disk_hits": STATS.disk_hits, "ok": ok}))
"""


def _run(cache_dir):
    env = dict(os.environ, POLYAD_CACHE_DIR=str(cache_dir))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    first = _run(tmp_path)
    assert first == {"compiles": 1, "disk_hits": 0, "ok": True}
    assert len(glob.glob(str(tmp_path / "*" / "*.bin"))) == 1
    second = _run(tmp_path)
    assert second == {"compiles": 0, "disk_hits": 1, "ok": True}


def _module():
    X = pa.placeholder((5,), name="X")
    return pa.compute((5,), lambda i: X[i] * X[i] + 7.0, name="Sq"), X


@pytest.mark.parametrize("damage", ["truncate", "garbage", "bad_binary"])
def test_corrupt_entry_is_rebuilt_with_a_warning(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    Y, X = _module()
    cache.clear_memory()
    pa.build(Y, [X])
    (entry,) = glob.glob(str(tmp_path / "*" / "*.bin"))
    data = open(entry, "rb").read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = b"\x00not a cache entry"
    else:  # a valid checksum over bytes that are not a program binary
        import hashlib

        junk = b"junk" * 100
        data = cache._MAGIC + hashlib.sha256(junk).digest() + junk
    open(entry, "wb").write(data)
    cache.clear_memory()
    before = cache.STATS.compiles
    with pytest.warns(RuntimeWarning, match="rebuilding"):
        mod = pa.build(Y, [X])
    assert cache.STATS.compiles == before + 1
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_allclose(mod(x), x * x + 7.0)
    # the entry was rewritten: the next process-fresh load is a hit
    cache.clear_memory()
    hits = cache.STATS.disk_hits
    pa.build(Y, [X])
    assert cache.STATS.disk_hits == hits + 1


def test_memory_cache_and_key_depends_on_source_and_options(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    Y, X = _module()
    mod = pa.build(Y, [X])
    hits = cache.STATS.memory_hits
    pa.build(Y, [X])
    assert cache.STATS.memory_hits == hits + 1
    dev = mod.device
    k = cache.cache_key(mod.source, dev, ())
    assert k != cache.cache_key(mod.source + " ", dev, ())
    assert k != cache.cache_key(mod.source, dev, ("-cl-fast-relaxed-math",))


def test_unwritable_cache_dir_only_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(blocker / "sub"))
    cache.clear_memory()
    X = pa.placeholder((3,), name="X")
    Y = pa.compute((3,), lambda i: X[i] - 1.5, name="Unwritable")
    with pytest.warns(RuntimeWarning, match="cannot write"):
        mod = pa.build(Y, [X])
    np.testing.assert_allclose(mod(np.ones(3, np.float32)), -0.5)


def test_precompile_compiles_in_parallel_and_a_broken_program_costs_only_itself(tmp_path, monkeypatch):
    """The tuner's batch compile: binaries land on disk, the next build loads them; a source that does
    not compile is answered with its BuildError and the others still build."""
    from polyad.pipeline import select_device

    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    dev = select_device()
    good = [f"__kernel void k{i}(__global float *a) {{ a[get_global_id(0)] = {i}.0f; }}" for i in range(3)]
    bad = "__kernel void broken(__global float *a) { a[0] = undefined_name; }"
    launches = [[(f"k{i}", [(16, "float32")], (4,), None)] for i in range(3)] + [[("broken", [(16, "float32")], (1,), None)]]
    before = cache.STATS.compiles
    errs = cache.precompile([(s, (), l) for s, l in zip(good + [bad], launches)], dev, workers=2)
    assert errs[:3] == [None, None, None]
    assert isinstance(errs[3], pa.BuildError) and "undefined_name" in str(errs[3])
    assert cache.STATS.compiles - before == 3
    assert len(glob.glob(str(tmp_path / "*" / "*.bin"))) == 3
    hits = cache.STATS.disk_hits
    cache.get_program(good[1], dev, (), launches[1])  # a disk hit: no compile
    assert cache.STATS.disk_hits == hits + 1 and cache.STATS.compiles - before == 3
    assert cache.precompile([(good[0], (), launches[0])], dev) == [None]  # cached: nothing to do


def test_precompile_on_a_kept_pool_reuses_its_worker_processes(tmp_path, monkeypatch):
    """The tuner keeps its compiler processes from batch to batch (each takes about a second to start)."""
    from polyad.pipeline import select_device
    from polyad.runtime.builder import Worker

    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    dev = select_device()
    pool = [Worker()]
    try:
        pids = []
        for i in range(2):
            src = f"__kernel void kept{i}(__global float *a) {{ a[get_global_id(0)] = {i}.0f; }}"
            assert cache.precompile([(src, (), [(f"kept{i}", [(16, "float32")], (4,), None)])], dev, pool=pool) == [None]
            pids.append(pool[0].proc.pid)
            assert pool[0].proc.poll() is None  # left running
        assert pids[0] == pids[1]
    finally:
        pool[0].close()
    assert pool[0].proc is None or pool[0].proc.poll() is not None


def test_the_memory_cache_keeps_the_most_recently_used_programs(tmp_path, monkeypatch):
    """Bounded (a tuning run loads one program a kernel, thousands of them): the least recently used program
    is dropped and comes back from disk."""
    from polyad.pipeline import select_device

    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "MEMORY_PROGRAMS", 2)
    cache.clear_memory()
    dev = select_device()
    srcs = [f"__kernel void lru{i}(__global float *a) {{ a[get_global_id(0)] = {i}.0f; }}" for i in range(3)]
    launches = [[(f"lru{i}", [(16, "float32")], (4,), None)] for i in range(3)]
    cache.get_program(srcs[0], dev, (), launches[0])
    cache.get_program(srcs[1], dev, (), launches[1])
    cache.get_program(srcs[0], dev, (), launches[0])  # used again: now the most recent
    cache.get_program(srcs[2], dev, (), launches[2])  # drops lru1, the least recent
    assert len(cache._MEMORY) == 2
    mem, disk = cache.STATS.memory_hits, cache.STATS.disk_hits
    cache.get_program(srcs[0], dev, (), launches[0])
    assert cache.STATS.memory_hits == mem + 1
    cache.get_program(srcs[1], dev, (), launches[1])
    assert cache.STATS.disk_hits == disk + 1  # came back from disk, not compiled
    cache.clear_memory()
