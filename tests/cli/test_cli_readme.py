"""The README's tour runs as written (a drifting README is a bug)."""

import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.opencl

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_tour_runs_and_its_gradients_are_right():
    text = README.read_text()
    tour = text[text.index("## A short tour"):]
    code = re.search(r"```python\n(.*?)```", tour, re.S).group(1)
    env = {}
    exec(compile(code, str(README), "exec"), env)  # noqa: S102 - our own README
    np.testing.assert_allclose(env["dx"], env["h"] @ env["w"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(env["dw"], env["h"].T @ env["x"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(env["dx_ref"], env["dx"], rtol=1e-4, atol=1e-5)


def test_readme_starts_with_the_two_setup_commands_and_ci_runs_the_test_one():
    lines = README.read_text().splitlines()
    block = lines[lines.index("```bash") + 1: lines.index("```bash") + 3]
    assert "polyad demo" in block[0] and "pytest" in block[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert block[1].strip() in ci
