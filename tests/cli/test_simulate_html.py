"""`smgov simulate --html FILE`: the simulation report as a self-contained page."""

from __future__ import annotations

import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from smgov.cli.main import main


def test_simulate_writes_the_html_report_with_the_stop_marked(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    out = StringIO()
    with redirect_stdout(out):
        assert main(["simulate", "--scenario", "holiday-weekend", "--json", "--html", str(page)]) == 0
    report = json.loads(out.getvalue())
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")
    (job,) = report["jobs"]
    assert job["name"] in html
    assert "idle-guard" in html and "<svg" in html
    assert "series" not in job  # --series was not asked for: the JSON stays as documented
