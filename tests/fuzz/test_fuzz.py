"""Differential fuzzing of random op graphs (tests/fuzz/fuzz_graphs.py): gradients against finite
differences, and OpenCL builds under "naive", "auto" and random legal schedules against pa.evaluate.

CI runs a fixed-seed budget (the ``polyad-fuzz-ci`` profile: derandomized, no example database); the
``-m slow`` tests run a larger one, ``POLYAD_FUZZ_EXAMPLES`` examples each (default 300).  A failure prints
the graph as a ``Spec``: replay it with ``fuzz_checks.check_gradient(spec)`` / ``check_opencl(spec)`` and
write it down as a named test in test_fuzz_regressions.py.
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_checks import check_gradient, check_opencl, random_schedule
from fuzz_graphs import specs

_COMMON = dict(derandomize=True, deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])  # opencl is a gate, it holds no state
settings.register_profile("polyad-fuzz-ci", max_examples=200, **_COMMON)
settings.register_profile("polyad-fuzz-ci-opencl", max_examples=16, **_COMMON)
settings.register_profile("polyad-fuzz-slow", max_examples=int(os.environ.get("POLYAD_FUZZ_EXAMPLES", "300")), **_COMMON)

CI = settings.get_profile("polyad-fuzz-ci")
CI_OPENCL = settings.get_profile("polyad-fuzz-ci-opencl")
SLOW = settings.get_profile("polyad-fuzz-slow")


def _opencl_case(spec, data):
    check_opencl(spec, schedules=("naive", "auto", lambda outs: random_schedule(data.draw, outs)))


@CI
@given(specs())
def test_fuzz_gradients_match_finite_differences(spec):
    check_gradient(spec)


@pytest.mark.opencl
@CI_OPENCL
@given(specs(max_size=32, errors=False), st.data())
def test_fuzz_opencl_schedules_match_evaluate(opencl, spec, data):
    _opencl_case(spec, data)


@pytest.mark.slow
@SLOW
@given(specs())
def test_fuzz_gradients_match_finite_differences_large(spec):
    check_gradient(spec)


@pytest.mark.slow
@pytest.mark.opencl
@SLOW
@given(specs(max_size=32, errors=False), st.data())
def test_fuzz_opencl_schedules_match_evaluate_large(opencl, spec, data):
    _opencl_case(spec, data)
