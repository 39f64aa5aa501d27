"""The tuner's device tests build into this session's fresh kernel cache (tests/conftest.py)."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _cold_kernel_cache(session_kernel_cache):
    return session_kernel_cache
