"""Fixtures of the benchmark-suite tests: a headless browser for the HTML report."""

import os
import shutil
import subprocess

import pytest

#: Executables tried, in order, when POLYAD_TEST_BROWSER is not set (Debian's chromium first).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


@pytest.fixture(scope="session")
def browser():
    """The path of a Chromium-family browser that runs headless; the test is skipped, saying so, without one.

    The README's test command installs Debian's chromium when it runs as root (tests/install-browser);
    nothing is installed here.  POLYAD_TEST_BROWSER=/path/to/chromium picks another one.
    """
    chosen = os.environ.get("POLYAD_TEST_BROWSER")
    path = shutil.which(chosen) if chosen else next(filter(None, map(shutil.which, BROWSERS)), None)
    if path is None:
        wanted = f"POLYAD_TEST_BROWSER={chosen!r} is not an executable" if chosen else \
            "no headless browser installed (looked for " + ", ".join(BROWSERS) + ")"
        pytest.skip(f"{wanted}: the HTML report is not opened in a browser. Install Debian's chromium "
                    "(`sh tests/install-browser`, as root) or set POLYAD_TEST_BROWSER")
    try:  # a stub that cannot start (Ubuntu's snap transitional package in a container) is no browser either
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        why = None if proc.returncode == 0 else f"exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:300]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"{type(exc).__name__}: {exc}"
    if why:
        pytest.skip(f"{path} does not start ({why}): the HTML report is not opened in a browser")
    return path
