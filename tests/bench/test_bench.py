"""`make bench` cannot rot: a quick run of it (no timing asserted), the committed results, the bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import schema
from bench.report import render
from smgov.simulation.template import REPO_ROOT, load_template

RESULTS = REPO_ROOT / "bench" / "results.json"


def template_functions() -> set[str]:
    return {k for k, v in load_template()["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def test_bench_is_not_in_the_lambda_bundle() -> None:
    # Given the template's code locations, when sam build packages them, then bench/ is never inside.
    resources = load_template()["Resources"]
    uris = {
        name: (r["Properties"].get("CodeUri") or r["Properties"].get("ContentUri"))
        for name, r in resources.items()
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Serverless::LayerVersion")
    }
    for name, uri in uris.items():
        packaged = (REPO_ROOT / str(uri)).resolve()
        assert not (REPO_ROOT / "bench").resolve().is_relative_to(packaged), f"{name} packages {uri}"


def test_committed_results_are_complete_and_render() -> None:
    # The numbers BENCHMARKS.md quotes: every figure present, sane, for every function of the template.
    results: dict[str, Any] = json.loads(RESULTS.read_text())
    schema.check(results, functions=template_functions())
    assert results["mode"] == "full"
    table = render(results)
    assert "Cold start" in table and "Cost per 1,000 jobs" in table


def test_schema_check_rejects_a_leaked_alarm() -> None:
    results: dict[str, Any] = json.loads(RESULTS.read_text())
    results["lifecycles"]["healthy"]["alarms_left"] = 1
    with pytest.raises(ValueError, match="never deleted"):
        schema.check(results)


@pytest.mark.build
def test_quick_bench_run_writes_sane_results(arm64_build: Path, tmp_path: Path) -> None:
    # Given an arm64 build post-processed like `make build`, when `python -m bench --quick` runs on it,
    # then it writes results.json with every figure, sane values and the table.
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--runs",
            "1",
            "--invocations",
            "3",
            "--build-dir",
            str(arm64_build),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(out.read_text())
    schema.check(results, functions=template_functions())
    assert results["mode"] == "quick"
    assert results["cold_start"]["bytecode"] is True
    assert all(a["pyc_files"] > 0 for a in results["size"]["artifacts"].values())
    assert "Warm latency" in completed.stdout and "Size" in completed.stdout
