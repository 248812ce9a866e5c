"""`make bench` cannot rot: the committed results, the bundle (its quick run on the arm64 build: in
tests/infrastructure/test_built_artifacts.py, with the other tests of that build)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import schema
from bench.report import render
from smgov.cfn_template import REPO_ROOT, load_template

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


def test_schema_check_rejects_a_warm_alarm_that_did_not_stop() -> None:
    # The warm alarm row is the stop path: a run whose alarm was skipped (no judge reads, no stop) is not it.
    results: dict[str, Any] = json.loads(RESULTS.read_text())
    del results["warm"]["event_types"]["alarm"]["aws_calls"]["sagemaker:StopTrainingJob"]
    with pytest.raises(ValueError, match="did not read the judge's evidence"):
        schema.check(results)


def test_the_cold_start_probe_runs_with_the_environment_the_template_deploys() -> None:
    # Given the literal variables the template's Globals give every function (what changes how the libraries
    # start, e.g. PYDANTIC_DISABLE_PLUGINS, and the Powertools names)
    from bench import coldstart

    deployed = {
        name: value
        for name, value in load_template()["Globals"]["Function"]["Environment"]["Variables"].items()
        if isinstance(value, str)
    }
    # When the probe's child environment is made
    env = coldstart.child_environment([REPO_ROOT])
    # Then each is there with the template's value: the probe measures what is deployed, nothing else
    assert {name: env.get(name) for name in deployed} == deployed
    assert env["PYTHONPATH"] == str(REPO_ROOT)
