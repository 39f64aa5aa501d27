"""Every ``python`` block of docs/*.md and README.md runs (Sybil): a page's blocks in order, in one
namespace, so the docs cannot rot.  ``POLYAD_DOCS_SHAPES=small`` makes the tutorial run at small
shapes here; the site build (mkdocs with markdown-exec) runs the same blocks at the real ones."""

import os
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import CodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

pytestmark = [pytest.mark.opencl, pytest.mark.usefixtures("opencl")]


class PythonBlocks(CodeBlockParser):
    """```python blocks, plain or with markdown-exec's options (```python exec="on" session=...)."""

    def __init__(self):
        super().__init__("python", PythonEvaluator())

    def __call__(self, document):
        for region in self.lexers(document):
            words = region.lexemes["arguments"].split()
            if words and words[0] == "python":
                region.parsed = region.lexemes["source"]
                region.evaluator = self._evaluator
                yield region


SYBIL = Sybil(parsers=[PythonBlocks(), SkipParser()])


def python_blocks(page):
    return [e for e in SYBIL.parse(page).examples() if isinstance(e.region.evaluator, PythonEvaluator)]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_python_block_of_the_page_runs(page, monkeypatch, tmp_path):
    monkeypatch.setenv("POLYAD_DOCS_SHAPES", "small")
    monkeypatch.chdir(tmp_path)  # what a block writes lands here
    doc = SYBIL.parse(page)
    for example in doc.examples():
        try:
            example.evaluate()
        except Exception as e:  # noqa: BLE001 - say which block, then fail with the error
            raise AssertionError(f"{page.name}, the block at line {example.line}: {type(e).__name__}: {e}") from e


def test_the_pages_have_python_blocks():
    """The parser sees the blocks (a format change would otherwise make every test above pass empty)."""
    assert sum(len(python_blocks(p)) for p in PAGES) >= 13
