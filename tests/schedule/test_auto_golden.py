"""The auto schedules of every benchmark workload (tiny shapes, both recorded device models) stay as recorded.

tests/data/auto_golden.json holds each graph's decisions (stages' tiles, vectors, unrolls; inline; rfactor;
pad), written by tests/schedule/auto_golden.py.  A change meant to move auto's choices rewrites it
(``python tests/schedule/auto_golden.py``) and shows the moves in its diff.
"""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402

GOLDEN = json.loads(auto_golden.GOLDEN.read_text())
TINY = auto_golden.tiny_shapes()


@pytest.mark.parametrize("model", auto_golden.MODELS)
@pytest.mark.parametrize("name", sorted(TINY))
def test_auto_schedules_are_the_recorded_ones(model, name):
    got = auto_golden.record({name: TINY[name]}, models=(model,))[model][name]
    assert got == GOLDEN[model][name]
