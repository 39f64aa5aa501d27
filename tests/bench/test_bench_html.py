"""The benchmark's HTML page: self-contained, and it shows the table and the plots in a real headless browser."""

import json
import subprocess
from html.parser import HTMLParser

import pytest

from polyad.bench import report, runner
from bench_fakes import fake_result


class _Page(HTMLParser):
    """The table's header and rows (cell texts), the images' sources and the ids of a page."""

    def __init__(self):
        super().__init__()
        self.header, self.rows, self.images, self.ids = [], [], [], {}
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids[a["id"]] = a
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a.get("src", ""))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            (self.header if tag == "th" else self.rows[-1]).append("".join(self._cell).strip())
            self._cell = None


def _parse(text):
    page = _Page()
    page.feed(text)
    page.rows = [r for r in page.rows if r]
    return page


def test_the_page_has_the_table_the_notes_and_embedded_plots(tmp_path):
    pytest.importorskip("matplotlib")
    paths = report.write(fake_result(), tmp_path, plot=True)
    assert [p.suffix for p in paths] == [".md", ".json", ".png", ".png", ".html"]
    text = paths[-1].read_text(encoding="utf-8")
    page = _parse(text)
    assert page.header == [h for _, h, _ in report.COLUMNS]
    # the page says which backward each column measured
    assert page.header[3:6] == ["bwd ms (vjp)", "bwd/fwd (vjp)", "bwd ms (recompute)"]
    assert "backward vjp (pa.vjp: bwd on the residuals its forward left on the device) and recompute" in text
    row, step = page.rows
    assert row[:7] == ["dense", "naive", "1", "2.5*", "2.50", "7.25", "n/a: pa.build is being written; long long lo…"]
    assert row[13] == "-" and step[13:15] == ["3", "6"]  # dense is no training step
    assert 'title="pa.build is being written; long' in text  # the full n/a reason on hover
    assert "5.0e-03 (!)" in row and '<td class="num flag">5.0e-03 (!)</td>' in text
    assert "Full n/a reasons" in text and "3 runs (x)" in text and "Test CPU" in text
    # the plots are in the page (it can be moved or mailed alone), the other files are linked
    assert len(page.images) == 2 and all(src.startswith("data:image/png;base64,") for src in page.images)
    for p in paths[:-1]:
        assert f'href="{p.name}"' in text
    assert "http://" not in text and "https://" not in text and "<script" not in text  # nothing from the network


def test_without_matplotlib_the_page_says_why_it_has_no_plots(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "_pyplot", lambda: None)
    paths = report.write(fake_result(), tmp_path, plot=True)
    assert [p.suffix for p in paths] == [".md", ".json", ".html"]
    text = paths[-1].read_text(encoding="utf-8")
    assert 'they need matplotlib (pip install &quot;polyad[bench]&quot;)' in text and "<img" not in text
    assert "No plots (--no-plot)." in report.write(fake_result(), tmp_path / "np", plot=False)[-1].read_text()


def test_the_page_escapes_what_it_shows(tmp_path):
    res = fake_result()
    res["rows"][0]["hand_ms"] = runner.Cell.missing('<script>alert("x")</script> & more')
    text = report.write(res, tmp_path, plot=False)[-1].read_text()
    assert "<script" not in text and "&lt;script&gt;" in text


def test_the_run_says_where_it_wrote_the_report(tmp_path, capsys):
    out = tmp_path / "results"
    rc = runner.main(["--workloads", "dense", "--batch", "1", "--repeat", "1", "--no-torch", "--no-plot",
                      "--backend", "evaluate", "--out", str(out)])
    assert rc == 0
    said = capsys.readouterr().out
    (page,) = out.glob("bench-*.html")
    assert f"Report written to {out.resolve()}/:" in said
    assert f"Open {page.resolve().as_uri()} in a browser" in said
    for p in out.iterdir():
        assert f"  {p.name}\n" in said + "\n"


def test_the_default_results_folder_is_in_the_current_directory(tmp_path, monkeypatch):
    import argparse

    opts = runner.add_arguments(argparse.ArgumentParser()).parse_args([])
    monkeypatch.chdir(tmp_path)
    assert opts.out.resolve() == tmp_path / "polyad-bench-results"


def _dump_dom(browser, page, tmp_path):
    """The DOM of ``page`` after Chromium loaded it headless (its window 'load' event has run)."""
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'browser-profile'}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "<table" in proc.stdout, (proc.returncode, proc.stderr[-2000:])
    return proc.stdout


def test_the_page_opens_in_a_headless_browser_and_shows_the_table(browser, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "results"
    # a real run of the suite (on the numpy backend: no OpenCL needed, tiny shapes, one timed run)
    assert runner.main(["--workloads", "dense", "flatten", "--batch", "1", "--repeat", "1", "--no-torch",
                        "--backend", "evaluate", "--out", str(out)]) == 0
    capsys.readouterr()
    (page,) = out.glob("bench-*.html")
    data = json.loads(next(out.glob("bench-*.json")).read_text())
    # what the browser made of the page: a copy that, once loaded, records which images it decoded
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", """<script>
window.addEventListener("load", () => {
  const ok = [...document.images].filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.setAttribute("data-images-decoded", String(ok));
  document.body.setAttribute("data-table-rows", String(document.querySelectorAll("#results tbody tr").length));
});
</script></body>"""), encoding="utf-8")
    dumped = _dump_dom(browser, probe, tmp_path)
    dom = _parse(dumped)
    assert dom.header == [h for _, h, _ in report.COLUMNS]
    assert [r[:2] for r in dom.rows] == [["dense", "naive"], ["flatten", "naive"]] == \
        [[r["workload"], r["schedule"]] for r in data["rows"]]
    torch_col = [k for k, _, _ in report.COLUMNS].index("torch_ms")
    assert all(r[torch_col] == "n/a: disabled (--no-torch)" for r in dom.rows)
    assert "results" in dom.ids and "<h1>polyad" in dumped
    # the browser itself counted the table's rows and decoded both plots (PNG data URIs)
    assert 'data-table-rows="2"' in dumped and 'data-images-decoded="2"' in dumped


@pytest.mark.parametrize("uid, apt_rc, says", [
    ("1000", 0, "not root with apt-get; the HTML report test will skip"),
    ("0", 100, "apt-get could not install chromium; the HTML report test will skip"),
])
def test_install_browser_never_fails_the_test_command(tmp_path, uid, apt_rc, says):
    # The README's test command runs tests/install-browser: without root, or when apt-get fails, it says so and exits 0.
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "install-browser"
    bin_dir = tmp_path / "bin"  # a PATH with no browser, a fake id and a fake apt-get
    bin_dir.mkdir()
    for name, body in (("id", f"echo {uid}"), ("apt-get", f"exit {apt_rc}")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    proc = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir)})
    assert proc.returncode == 0 and says in proc.stdout, (proc.stdout, proc.stderr)
