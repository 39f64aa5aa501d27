"""Fixtures of the benchmark-suite tests (the suite is polyad.bench, an installed module)."""
