"""`smgov explain --logs` classifies every failed-job sample in events/ (with its logs under events/logs/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smgov.cli.main import main

EVENTS = Path(__file__).resolve().parents[2] / "events"
# The class each sample's failure belongs to: a new sample without an expectation fails the first test.
EXPECTED = {
    "training-job-failed.json": "sagemaker-internal",
    "training-job-failed-algorithm-error.json": "user-code",
    "training-job-failed-capacity.json": "capacity",
    "training-job-failed-gpu-ecc.json": "hardware",
    "training-job-failed-gpu-lost.json": "hardware",
    "training-job-failed-efa.json": "interconnect",
    "training-job-failed-peer-silent.json": "interconnect",
    "training-job-failed-oom.json": "user-code",
    "training-job-failed-nccl-invalid-usage.json": "user-code",
    "training-job-failed-unknown.json": "unknown",
    "training-job-failed-deadlock.json": "unknown",
}
RESUMED = {"hardware", "interconnect", "capacity", "sagemaker-internal"}
# Minutes after the samples' jobs failed (their Failed transition, 2025-11-22 12:07 UTC): decided at the wall
# clock's now, a resume would be too late (resume.skip.too-late)
AT = "2025-11-22T12:10:00Z"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["explain", *args, "--at", AT, "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    (decision,) = [d for d in result["decisions"] if d["rule"] == "auto-resume"]
    assert isinstance(decision, dict)
    return decision


def test_every_failed_sample_has_an_expected_class() -> None:
    assert {p.name for p in EVENTS.glob("training-job-failed*.json")} == set(EXPECTED)


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_explain_with_the_samples_logs_classifies_it(sample: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a failed-job sample and, when it has some, its hosts' logs (one file per stream)
    logs = EVENTS / "logs" / sample.removesuffix(".json")
    args = [str(EVENTS / sample)] + (["--logs", str(logs)] if logs.is_dir() else [])
    # When explain runs the job-events service on it offline
    decision = explain(capsys, *args)
    # Then the diagnosis has the expected class, a resumed class is cloned and no other is
    diagnosis = decision["evidence"]["diagnosis"]
    assert diagnosis["class"] == EXPECTED[sample]
    assert (decision["action"] == "clone") == (EXPECTED[sample] in RESUMED)
    assert diagnosis["basis"] == ("logs" if logs.is_dir() else "failure-reason")
    if logs.is_dir() and diagnosis["class"] != "unknown":
        assert diagnosis["host"] and diagnosis["lines"]


def test_a_single_file_of_lines_is_one_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "algo-3.log"
    log.write_text("step 1\nRuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    decision = explain(capsys, str(EVENTS / "training-job-failed-unknown.json"), "--logs", str(log))
    assert decision["evidence"]["diagnosis"]["host"] == "algo-3" and decision["action"] == "clone"


def test_without_logs_a_gpu_fault_reported_as_algorithm_error_is_not_resumed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    decision = explain(capsys, str(EVENTS / "training-job-failed-gpu-ecc.json"))
    assert decision["evidence"]["diagnosis"]["class"] == "unknown" and decision["action"] == "none"
    assert "no --logs given" in decision["evidence"]["diagnosis"]["notes"]


def test_a_missing_logs_path_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EVENTS / "training-job-failed.json"), "--logs", "/nonexistent/x"]) == 2


def test_policy_validate_rejects_a_malformed_team_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a team signature that would backtrack for ever, and one that is fine
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "teams:\n  vision:\n    resume:\n      signatures:\n"
        "        - {id: slow, class: interconnect, pattern: '(a+)+$'}\n"
    )
    good = tmp_path / "good.yaml"
    good.write_text(
        "teams:\n  vision:\n    resume:\n      classes: {capacity: skip}\n      signatures:\n"
        "        - {id: plugin-lost, class: interconnect, pattern: 'MYPLUGIN: rank [0-9]+ lost', where: log}\n"
    )
    # Then validate refuses the first, naming the field, and accepts the second
    assert main(["policy", "validate", str(bad)]) == 1
    assert "signatures" in capsys.readouterr().err
    assert main(["policy", "validate", str(good)]) == 0


def test_policy_validate_names_every_constraint_no_job_can_meet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a document whose rules no SageMaker job can meet (a tag key SageMaker refuses, a pattern only the
    # empty tag matches, values no tag can hold, an empty instance-type glob, values outside their pattern)
    bad = tmp_path / "unmeetable.yaml"
    bad.write_text(
        "rules:\n"
        "  - {id: t, type: required-tags, tags: {'': {}, team: {pattern: '^$'}, cc: {values: ['cc#1']},"
        " env: {values: [dev, prod], pattern: '[A-Z]+'}}}\n"
        "  - {id: i, type: allowed-instance-types, patterns: ['']}\n"
    )
    # Then validate refuses it, one error per constraint, each at its place in the document
    assert main(["policy", "validate", str(bad)]) == 1
    errors = [line.strip() for line in capsys.readouterr().err.splitlines() if line.strip().startswith("- ")]
    places = sorted(line[2:].split(":")[0].split(".", 2)[2] for line in errors)  # past "rules.<n>."
    assert places == [
        "allowed-instance-types.patterns",
        "required-tags.tags..[key]",
        "required-tags.tags.cc.values",
        "required-tags.tags.env",
        "required-tags.tags.team.pattern",
    ]
