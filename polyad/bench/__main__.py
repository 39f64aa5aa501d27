"""``python -m polyad.bench``: the benchmark suite (see polyad/bench/runner.py and docs/benchmarks.md)."""

import sys

from .runner import main

sys.exit(main())
