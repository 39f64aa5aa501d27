"""The docs site builds with warnings as errors (mkdocs --strict: API reference from the docstrings,
the tutorial executed by markdown-exec at small shapes), and the tutorial notebook is the tutorial."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.opencl
@pytest.mark.usefixtures("opencl")
def test_the_site_builds_strict_with_the_tutorial_executed(tmp_path):
    env = dict(os.environ, POLYAD_DOCS_SHAPES="small", NO_MKDOCS_2_WARNING="1")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    assert "WARNING" not in log, log[-4000:]
    site = tmp_path / "site"
    tutorial = (site / "tutorial" / "index.html").read_text()
    assert tutorial.count("backward/forward") >= 8  # every operator of section 5 measured at build time
    assert "d_W_from_dense_matmul" in tutorial  # pa.show's output, not just the code
    api = (site / "reference" / "polyad" / "index.html").read_text()
    for name in ("polyad.differentiate", "polyad.build", "polyad.evaluate", "polyad.exp"):
        assert name in api, name
    ops = (site / "reference" / "ops" / "index.html").read_text()
    for name in ("add", "exp", "equal", "round", "reshape", "matmul"):  # the elementwise families too
        assert f'id="polyad.ops.{name}"' in ops, name
    assert "PolyadError" in (site / "reference" / "errors" / "index.html").read_text()
    assert (site / "tutorial.ipynb").is_file()


def test_the_notebook_is_the_tutorial():
    """docs/tutorial.ipynb holds the tutorial's code cells, in order: regenerate it with
    `jupytext --to ipynb docs/tutorial.md` after editing the page."""
    import jupytext

    page = jupytext.read(ROOT / "docs" / "tutorial.md")
    notebook = jupytext.read(ROOT / "docs" / "tutorial.ipynb")

    def code(nb):
        return [c.source for c in nb.cells if c.cell_type == "code"]

    assert code(page) and code(page) == code(notebook)
