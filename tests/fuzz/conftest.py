"""The fuzzer builds into a fresh kernel cache of its own."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _cold_kernel_cache(session_kernel_cache):
    """Every test here builds into this session's fresh kernel cache (tests/conftest.py)."""
    return session_kernel_cache
