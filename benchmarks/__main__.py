"""``python -m benchmarks``: the benchmark suite (see benchmarks/runner.py and docs/benchmarks.md)."""

import sys

from .runner import main

sys.exit(main())
