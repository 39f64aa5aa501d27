"""Shapes of the benchmark workloads for the pipeline tests (test_fallback, test_vjp): the suite's own tiny
shapes (``polyad tune --shapes tiny`` uses them too)."""

from polyad.bench.tuning import TINY  # noqa: F401
