"""The HTML simulation report opened in a real headless Chromium: it renders, a screenshot is taken.

Chromium comes from the system packages (`.ci/run` installs it). Without it the test skips locally, but
fails under CI (``CI=true``) so a machine without a browser can never pass the check silently.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from smgov.report_html import render_html

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simulation-report.json"
WIDTH, HEIGHT = 1200, 1600
CANDIDATES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def chromium() -> str:
    explicit = os.environ.get("CHROMIUM")
    found = explicit or next((path for name in CANDIDATES if (path := shutil.which(name))), None)
    if found:
        return found
    reason = "headless Chromium is not installed (apt-get install chromium; .ci/run does it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: required under CI")
    pytest.skip(reason)


def browse(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (enough to tell a blank page)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, width, height = 8, b"", 0, 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.fixture
def page(tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    path.write_text(render_html(json.loads(EXAMPLE.read_text())), encoding="utf-8")
    return path


def test_the_report_renders_and_a_screenshot_is_taken(tmp_path: Path, page: Path) -> None:
    shot = tmp_path / "report.png"
    result = browse(tmp_path, page, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    # a rendered page has many distinct byte values; a blank or failed page has a handful
    assert len(set(pixels)) > 64


def test_the_browser_sees_the_totals_charts_and_actions(tmp_path: Path, page: Path) -> None:
    result = browse(tmp_path, page, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    report = json.loads(EXAMPLE.read_text())
    assert "Scenario: holiday-weekend" in dom and "false stops" in dom
    assert dom.count("<svg") == len(report["jobs"])
    assert "llm-pretrain-&lt;holiday&gt;" in dom  # escaped text stays text in the DOM
    assert dom.count('class="threshold"') == sum("threshold" in job for job in report["jobs"])
