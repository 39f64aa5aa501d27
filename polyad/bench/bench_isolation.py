"""What compiling in a worker process costs: cold and warm builds, isolated and in-process.

``python -m polyad.bench.bench_isolation [--repeat 3]`` runs each configuration in a fresh
process with an empty kernel cache (the device's probe and calibration stay cached) and prints
a markdown table: the first cold build of a process (it starts the worker), a second cold build
(the worker is warm), a warm build from this process's memory, and a warm build from the disk
cache (memory caches cleared).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r'''
import json, time, sys
import polyad as pa
from polyad.pipeline import programs
from polyad.runtime import cache

def graph(n, tag):
    X = pa.placeholder((32, n), name="X" + tag)
    W = pa.placeholder((64, n), name="W" + tag)
    Y = pa.nn.dense(X, W)
    H = pa.placeholder(Y.shape, name="H" + tag)
    return list(pa.differentiate(Y, [X, W], H)), [X, W, H]

def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0

pa.build(*graph(8, "warmup_device"), schedule="naive")  # device selection, model: not what is measured
g1, g2 = graph(256, "a"), graph(320, "b")
out = {"cold_first": timed(lambda: pa.build(*g1)), "cold_second": timed(lambda: pa.build(*g2)),
       "warm_memory": min(timed(lambda: pa.build(*g1)) for _ in range(5))}
programs.clear_memory(); cache.clear_memory()
out["warm_disk"] = timed(lambda: pa.build(*g1))
print(json.dumps(out))
'''


def run_once(isolate):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, POLYAD_CACHE_DIR=d, POLYAD_ISOLATE_BUILDS="1" if isolate else "0")
        from polyad.runtime.records import cache_dir

        env.setdefault("POLYAD_DEVICE_CACHE_DIR", os.path.join(cache_dir(), "devices"))
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = {True: [], False: []}
    for _ in range(args.repeat):  # alternate: the machine's slow spells hit both alike
        for iso in (True, False):
            rows[iso].append(run_once(iso))
    cols = ["cold_first", "cold_second", "warm_memory", "warm_disk"]
    print("| build | " + " | ".join(c.replace("_", " ") for c in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for iso in (True, False):
        med = {c: statistics.median(r[c] for r in rows[iso]) for c in cols}
        label = "worker process (default)" if iso else "in-process (POLYAD_ISOLATE_BUILDS=0)"
        print(f"| {label} | " + " | ".join(f"{1e3 * med[c]:.1f} ms" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
