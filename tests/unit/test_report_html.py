"""The HTML simulation report: structure, escaping, charts (the browser test renders it for real)."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from smgov.cli.main import main
from smgov.report_html import UtilizationPoint, reduce_series, render_html

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simulation-report.json"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def report() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return loaded


def charts(page: str) -> list[ET.Element]:
    """Every inline SVG, parsed as XML (so each must be well-formed)."""
    return [
        ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
        for svg in re.findall(r"<svg .*?</svg>", page, flags=re.S)
    ]


def test_totals_come_first(report: dict[str, Any]) -> None:
    page = render_html(report)
    totals = page.index("cost without governance")
    assert totals < page.index("<svg")
    assert "$17,580.00" in page and "$17,067.50 (97%)" in page
    assert re.search(r"false stops</div><div class=\"value\">0<", page)


def test_one_chart_per_job_with_threshold_series_and_every_action(report: dict[str, Any]) -> None:
    page = render_html(report)
    svgs = charts(page)
    assert len(svgs) == len(report["jobs"])
    for svg, job in zip(svgs, report["jobs"], strict=True):
        marks = svg.findall(f"{SVG}g[@class='action']") + svg.findall(f"{SVG}g[@class='action quiet']")
        assert len(marks) == len(job["actions"])
        tips = [m.find(f"{SVG}title").text for m in marks]  # type: ignore[union-attr]
        for action in job["actions"]:
            assert any(action["action"] in (t or "") and action["rule"] in (t or "") for t in tips)
        assert (svg.find(f"{SVG}polyline[@class='util']") is not None) == ("series" in job)
        assert (svg.find(f"{SVG}line[@class='threshold']") is not None) == ("threshold" in job)
        assert (svg.find(f"{SVG}rect[@class='stall']") is not None) == ("stalled_at_minute" in job)


def test_actions_sit_at_their_minute_and_the_threshold_at_its_value(report: dict[str, Any]) -> None:
    job = report["jobs"][0]
    svg = charts(render_html({**report, "jobs": [job]}))[0]
    plot = svg.find(f"{SVG}rect[@class='plot']")
    assert plot is not None
    left, width = float(plot.get("x", 0)), float(plot.get("width", 0))
    top, height = float(plot.get("y", 0)), float(plot.get("height", 0))
    x_max = max([p["minute"] for p in job["series"]] + [a["minute"] for a in job["actions"]])
    stop_mark = next(
        g
        for g in svg.iter(f"{SVG}g")
        if "stop" in (g.find(f"{SVG}title").text or "")  # type: ignore[union-attr]
    )
    line = stop_mark.find(f"{SVG}line")
    assert line is not None
    assert float(line.get("x1", 0)) == pytest.approx(left + width * 83 / x_max, abs=0.1)
    threshold = svg.find(f"{SVG}line[@class='threshold']")
    assert threshold is not None
    assert float(threshold.get("y1", 0)) == pytest.approx(top + height * (1 - 1.0 / 100), abs=0.1)


def test_all_text_is_escaped(report: dict[str, Any]) -> None:
    evil = copy.deepcopy(report)
    evil["scenario"] = "<script>alert(1)</script>"
    evil["jobs"][0]["name"] = 'x"><img src=x onerror=alert(1)>'
    evil["jobs"][0]["actions"][0]["rule"] = "</title><script>bad()</script>"
    evil["jobs"][0]["final_status"] = "<b>Stopped</b>"
    page = render_html(evil)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    charts(page)  # still well-formed


def test_page_is_self_contained(report: dict[str, Any]) -> None:
    page = render_html(report)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["'](https?:|//)""", page)
    assert "<script" not in page


def test_a_list_of_reports_renders_each_scenario(report: dict[str, Any]) -> None:
    other = {**report, "scenario": "spot-storm"}
    page = render_html([report, other])
    assert "Scenario: holiday-weekend" in page and "Scenario: spot-storm" in page
    assert len(charts(page)) == 2 * len(report["jobs"])
    assert len(set(re.findall(r'id="(job-[^"]+)"', page))) == 2 * len(report["jobs"])


@pytest.mark.parametrize(
    "breakage",
    [
        lambda r: r.pop("totals"),
        lambda r: r["jobs"][0].pop("name"),
        lambda r: r["jobs"][0]["series"][0].update(utilization=-5),
        lambda r: r["jobs"][0]["actions"][0].update(minute="soon"),
    ],
)
def test_a_malformed_report_is_refused(report: dict[str, Any], breakage: Any) -> None:
    breakage(report)
    with pytest.raises(ValidationError):
        render_html(report)


def test_multi_gpu_utilization_scales_the_axis(report: dict[str, Any]) -> None:
    job = {**report["jobs"][1], "series": [{"minute": 0, "utilization": 780.0}, {"minute": 10, "utilization": 0}]}
    page = render_html({**report, "jobs": [job]})
    assert ">800%</text>" in page


@given(st.lists(st.tuples(st.integers(0, 10_000), st.floats(0, 800, allow_nan=False)), min_size=1, max_size=3000))
def test_reducing_a_series_keeps_its_extremes(points: list[tuple[int, float]]) -> None:
    series = [UtilizationPoint(minute=m, utilization=u) for m, u in points]
    reduced = reduce_series(series, max_points=200)
    assert len(reduced) <= max(200, 2) + 2
    assert min(p.utilization for p in reduced) == min(u for _, u in points)
    assert max(p.utilization for p in reduced) == max(u for _, u in points)
    assert [p.minute for p in reduced] == sorted(p.minute for p in reduced)


def test_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["report-html", str(EXAMPLE), str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_cli_refuses_a_file_that_is_not_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"scenario": "x"}')
    assert main(["report-html", str(bad), str(tmp_path / "o.html")]) == 2
    assert "not a simulation report" in capsys.readouterr().err
    bad.write_text("not json")
    assert main(["report-html", str(bad), str(tmp_path / "o.html")]) == 2


def test_the_simulators_series_shape_is_understood(report: dict[str, Any]) -> None:
    # the shape `smgov simulate --json --series` prints (branch issue-5-sim): segments per GPU and the
    # alarms, whose threshold is per-GPU percent x GPU count
    job = {
        "name": "llm",
        "final_status": "Stopped",
        "actions": [
            {"minute": 5, "action": "create-alarm", "rule": "idle-gpu", "outcome": "done"},
            {"minute": 95, "action": "stop", "rule": "idle-gpu", "outcome": "audit-only"},
        ],
        "cost_usd": 10.0,
        "baseline_cost_usd": 50.0,
        "saved_usd": 40.0,
        "stalled_at_minute": 60,
        "stopped_at_minute": None,
        "resumed_from": "llm-0",
        "series": {
            "unit": "GPUUtilization per GPU (percent)",
            "gpus_per_host": {"algo-1": 8, "algo-2": 8},
            "segments": [[0, 60, 93.0], [60, 100, 0.0]],
            "alarms": [{"name": "smgov-idle-llm", "threshold": 8.0, "comparison": "LessThanThreshold"}],
        },
    }
    page = render_html({**report, "jobs": [job]})
    (svg,) = charts(page)
    points = svg.find(f"{SVG}polyline[@class='util']")
    assert points is not None and len(points.get("points", "").split()) == 4  # a step per segment
    assert "alarm threshold 1%" in page  # 8 (x 8 GPUs) -> 1% per GPU
    assert "stop (audit)" in page and "clone of llm-0" in page


def test_several_scenarios_get_overall_totals_first(report: dict[str, Any]) -> None:
    # `smgov simulate --json` with several scenarios prints {"scenarios": [...], "totals": {...}}
    other = {**report, "scenario": "spot-storm"}
    totals = {"cost_usd": 1.0, "baseline_cost_usd": 4.0, "saved_usd": 3.0, "false_stops": 0, "missed_stalls": 2}
    page = render_html({"scenarios": [report, other], "totals": totals})
    assert (
        page.index("All 2 scenarios")
        < page.index("Scenario: holiday-weekend")
        < page.index("Scenario: spot-storm")
    )
    assert "$3.00 (75%)" in page
    assert re.search(r'missed stalls</div><div class="value">2<', page)
    assert 'href="#scenario-1"' in page and 'id="scenario-1"' in page


def test_efficiency_per_job_and_per_team(report: dict[str, Any]) -> None:
    # Given two jobs of one team with efficiency records (one with no metrics) and one job of another team
    jobs = copy.deepcopy(report["jobs"][:3])
    jobs[0].update(team="nlp", cost_usd=100.0, efficiency={
        "code": "efficiency.record.measured", "gpu_utilization_mean_percent": 40.0, "idle_gpu_hours": 6.0,
        "cost_usd": 50.0, "idle_cost_usd": 10.0})  # fmt: skip
    jobs[1].update(team="nlp", cost_usd=20.0, efficiency={
        "code": "efficiency.record.no-metrics", "cost_usd": 20.0, "missing": ["GPUUtilization: no datapoint"]})  # fmt: skip
    jobs[2].update(team="vision", cost_usd=10.0, efficiency=None)
    page = render_html({**report, "jobs": jobs})
    # Then the job's section says its utilization, or what is missing, never a made-up figure
    assert "GPU utilization 40% on average, 6.0 idle GPU-hours" in page
    assert "efficiency: GPUUtilization: no datapoint" in page
    # and the team table adds them up: the idle share (10 of 50) of the job's simulated cost (100)
    teams = page.split("Efficiency per team", 1)[1].split("</table>", 1)[0]
    nlp = re.search(r"<tr><td>nlp</td>(.*?)</tr>", teams)
    assert nlp is not None
    cells = re.findall(r'<td class="n">([^<]*)</td>', nlp.group(1))
    assert cells == ["2", "$120.00", "$20.00", "6.0", "40%", "1"]
