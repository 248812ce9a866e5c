"""`smgov resume` offline (describe and tags from files) and `smgov explain` for clone decisions."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sagemaker_governance.adapters.sagemaker_model import validate_create_request
from smgov.cli.main import main
from tests.conftest import EVENTS
from tests.resume_builders import failed_description, rich_description


def _write(path: Path, document: Any) -> str:
    path.write_text(json.dumps(document, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))
    return str(path)


def test_dry_run_json_prints_only_the_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a DescribeTrainingJob answer and a ListTags answer on disk (no AWS at all)
    describe = _write(tmp_path / "d.json", {**rich_description("vision-7"), "ResponseMetadata": {}})
    tags = _write(
        tmp_path / "t.json", {"Tags": [{"Key": "team", "Value": "vision"}, {"Key": "aws:x", "Value": "y"}]}
    )
    # When resuming by hand in a dry run
    code = main(["resume", "vision-7", "--dry-run", "--json", "--describe-file", describe, "--tags-file", tags])
    # Then the request is printed, with what the clone cannot carry, and it is a valid CreateTrainingJob request
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    # (the description's stray nested fields are not in botocore's model of the answer either)
    assert list(out) == ["request", "fields_unknown_to_botocore"]
    assert "DebugRuleConfigurations[0].RuleEvaluationStatus" in out["fields_unknown_to_botocore"]
    request = out["request"]
    validate_create_request(request)
    assert request["TrainingJobName"] == "vision-7-r1"
    assert {t["Key"]: t["Value"] for t in request["Tags"]}["smgov:resume-reason"] == "manual"
    assert not any(t["Key"].startswith("aws:") for t in request["Tags"])


def test_on_demand_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    description = failed_description("spot-7", EnableManagedSpotTraining=True)
    description["StoppingCondition"] = {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    describe, tags = _write(tmp_path / "d.json", description), _write(tmp_path / "t.json", {"team": "x"})
    main(
        [
            "resume",
            "spot-7",
            "--on-demand",
            "--dry-run",
            "--json",
            "--describe-file",
            describe,
            "--tags-file",
            tags,
        ]
    )
    request = json.loads(capsys.readouterr().out)["request"]
    assert (
        request["EnableManagedSpotTraining"] is False
        and "MaxWaitTimeInSeconds" not in request["StoppingCondition"]
    )


def test_files_must_come_together_and_match_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    describe = _write(tmp_path / "d.json", failed_description("job-a"))
    tags = _write(tmp_path / "t.json", {})
    assert main(["resume", "job-a", "--dry-run", "--describe-file", describe]) == 2
    assert main(["resume", "job-b", "--dry-run", "--describe-file", describe, "--tags-file", tags]) == 2
    assert "not 'job-b'" in capsys.readouterr().err


def test_a_running_job_is_not_cloned_for_real(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    describe = _write(tmp_path / "d.json", failed_description("job-a", TrainingJobStatus="InProgress"))
    tags = _write(tmp_path / "t.json", {})
    assert main(["resume", "job-a", "--describe-file", describe, "--tags-file", tags]) == 1
    assert "stop it first" in capsys.readouterr().err


def test_explain_shows_clone_decisions_with_the_planned_request(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", str(EVENTS / "training-job-interrupted-spot.json"), "--json"])
    assert code == 0
    decisions = json.loads(capsys.readouterr().out)["decisions"]
    assert [(d["rule"], d["action"]) for d in decisions] == [("spot-fallback", "clone"), ("spot-fallback", "stop")]
    validate_create_request(decisions[0]["request"])
    assert decisions[0]["request"]["EnableManagedSpotTraining"] is False


def test_fields_botocore_does_not_know_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a saved DescribeTrainingJob answer holding a field this botocore's model lacks (newer API),
    description = {**failed_description("job-a"), "FutureTrainingConfig": {"Enabled": True}}
    describe, tags = _write(tmp_path / "d.json", description), _write(tmp_path / "t.json", {"team": "x"})
    # When resuming it in a dry run, then the clone is planned and the field is named as not carried.
    assert main(["resume", "job-a", "--dry-run", "--describe-file", describe, "--tags-file", tags]) == 0
    assert "unknown to botocore" in capsys.readouterr().out
    assert main(["resume", "job-a", "--dry-run", "--json", "--describe-file", describe, "--tags-file", tags]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fields_unknown_to_botocore"] == ["FutureTrainingConfig"]
    assert "FutureTrainingConfig" not in out["request"]


def _launched(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stand in for CreateTrainingJob (nothing reaches AWS); returns the requests it got."""
    from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
    from sagemaker_governance.domain.clone import CreateOutcome

    sent: list[dict[str, Any]] = []

    def create(self: Any, request: dict[str, Any]) -> CreateOutcome:
        sent.append(request)
        return CreateOutcome.CREATED

    monkeypatch.setattr(SageMakerLauncher, "create_training_job", create)
    monkeypatch.setattr("boto3.client", lambda *a, **k: object())
    return sent


def test_force_clones_a_running_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job still in progress, when resumed with --force, then the clone is created anyway
    sent = _launched(monkeypatch)
    describe = _write(tmp_path / "d.json", failed_description("job-a", TrainingJobStatus="InProgress"))
    tags = _write(tmp_path / "t.json", {})
    assert main(["resume", "job-a", "--force", "--describe-file", describe, "--tags-file", tags]) == 0
    assert [r["TrainingJobName"] for r in sent] == ["job-a-r1"]


def test_an_orchestrated_job_is_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a failed child of a tuning job, then smgov resume refuses it (the tuner retries it) and
    # says who owns it; --force clones it anyway
    sent = _launched(monkeypatch)
    owned = failed_description(
        "job-a", TuningJobArn="arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/hpo"
    )
    describe, tags = _write(tmp_path / "d.json", owned), _write(tmp_path / "t.json", {})
    assert main(["resume", "job-a", "--describe-file", describe, "--tags-file", tags]) == 1
    assert "hyperparameter tuning job" in capsys.readouterr().err and sent == []
    assert main(["resume", "job-a", "--force", "--describe-file", describe, "--tags-file", tags]) == 0
    assert len(sent) == 1


COPIED_LINEAGE = {
    "smgov:root-job": "llm-sft-1",
    "smgov:resumed-from": "llm-sft-1",
    "smgov:attempt": "1",
    "smgov:resume-reason": "failed-transient",
}


def test_lineage_tags_copied_from_another_job_are_ignored_as_the_service_ignores_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given relaunch-7, launched from a console Clone of llm-sft-1-r1 (its lineage tags copied), failed
    describe = _write(tmp_path / "d.json", failed_description("relaunch-7"))
    tags = _write(tmp_path / "t.json", {"team": "nlp", **COPIED_LINEAGE})
    # When its owner resumes it by hand (offline, a dry run)
    code = main(["resume", "relaunch-7", "--dry-run", "--json", "--describe-file", describe, "--tags-file", tags])
    # Then its clone is the first of its own lineage, as auto-resume plans it, not llm-sft-1's next (llm-sft-1-r2,
    # whose name the real lineage's resume needs), and stderr says why
    assert code == 0
    captured = capsys.readouterr()
    request = json.loads(captured.out)["request"]
    assert request["TrainingJobName"] == "relaunch-7-r1"
    lineage = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert (lineage["smgov:root-job"], lineage["smgov:attempt"], lineage["smgov:resumed-from"]) == (
        "relaunch-7",
        "1",
        "relaunch-7",
    )
    assert "lineage tags copied from another job ignored" in captured.err


@pytest.mark.parametrize(("source", "clone"), [("relaunch-7", "llm-sft-1-r2"), ("llm-sft-1-r1", "relaunch-7-r1")])
def test_a_clone_made_under_copied_lineage_tags_from_this_job_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, clone: str
) -> None:
    # Given relaunch-7 as above, and llm-sft-1-r2 in the account, made from relaunch-7 (a deployment before the
    # service dated lineage tags resumed it under its copied ones) or from the real llm-sft-1-r1
    from sagemaker_governance.adapters.sagemaker import SageMakerJobs
    from sagemaker_governance.domain.errors import JobNotFound

    sent = _launched(monkeypatch)
    jobs = {"relaunch-7": failed_description("relaunch-7"), "llm-sft-1-r2": failed_description("llm-sft-1-r2")}
    tags = {"relaunch-7": {"team": "nlp", **COPIED_LINEAGE}, "llm-sft-1-r2": {"smgov:resumed-from": source}}

    def describe(self: Any, name: str) -> dict[str, Any]:
        if name not in jobs:
            raise JobNotFound(name)
        return jobs[name]

    monkeypatch.setattr(SageMakerJobs, "describe", describe)
    monkeypatch.setattr(SageMakerJobs, "list_tags", lambda self, arn: tags[arn.rsplit("/", 1)[-1]])
    # When its owner resumes it by hand: online, or from files but created for real (the clone is then read too)
    assert main(["resume", "relaunch-7"]) == 0
    described = _write(tmp_path / "d.json", jobs["relaunch-7"])
    tagged = _write(tmp_path / "t.json", tags["relaunch-7"])
    assert main(["resume", "relaunch-7", "--describe-file", described, "--tags-file", tagged]) == 0
    # Then a clone made from it is its clone (the request meets it as "already exists"); one made from another job
    # is not, and its own lineage's clone is made, the same either way
    assert [r["TrainingJobName"] for r in sent] == [clone, clone]


@pytest.mark.parametrize(
    ("name", "lineage", "status"),
    [
        ("job-a", {}, "InProgress"),  # its tags its own: nothing to read in the account
        # launched with another job's lineage tags, whose clone a real resume reads in the account
        ("relaunch-7", COPIED_LINEAGE, "InProgress"),
        ("relaunch-7", COPIED_LINEAGE, "Stopping"),
    ],
)
def test_a_refusal_from_files_makes_no_client(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    lineage: dict[str, str],
    status: str,
) -> None:
    # Given a running job read from files
    made: list[Any] = []

    def client(*args: Any, **kwargs: Any) -> object:
        made.append(args)
        return object()

    monkeypatch.setattr("boto3.client", client)
    describe = _write(tmp_path / "d.json", failed_description(name, TrainingJobStatus=status))
    tags = _write(tmp_path / "t.json", {"team": "nlp", **lineage})
    # When it is resumed for real, then it is refused on the files alone: no SageMaker client (no AWS configuration
    # needed), no read
    assert main(["resume", name, "--describe-file", describe, "--tags-file", tags]) == 1
    assert "stop it first" in capsys.readouterr().err
    assert made == []


def test_a_clone_that_needs_sagemaker_without_a_region_says_so_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no AWS configuration at all (no region), and a failed job with copied lineage tags read from files
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    describe = _write(tmp_path / "d.json", failed_description("relaunch-7"))
    tags = _write(tmp_path / "t.json", {"team": "nlp", **COPIED_LINEAGE})
    # When it is resumed for real (the clone its copied tags name must be read), then the command fails with
    # botocore's reason on stderr, not an exception
    assert main(["resume", "relaunch-7", "--describe-file", describe, "--tags-file", tags]) == 1
    assert "cannot reach SageMaker" in capsys.readouterr().err


def test_a_client_botocore_cannot_form_an_endpoint_for_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an empty region (`export AWS_DEFAULT_REGION=$REGION` with REGION unset): botocore raises ValueError
    # ("Invalid endpoint"), not one of its own errors
    for name in ("AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    describe = _write(tmp_path / "d.json", failed_description("job-a"))
    tags = _write(tmp_path / "t.json", {"team": "nlp"})
    # When a job is resumed online, or for real from files, then each fails with a message, not a traceback
    assert main(["resume", "job-a", "--dry-run"]) == 1
    assert "cannot reach SageMaker" in capsys.readouterr().err
    assert main(["resume", "job-a", "--describe-file", describe, "--tags-file", tags]) == 1
    assert "cannot reach SageMaker" in capsys.readouterr().err


@pytest.mark.parametrize("status", [["Failed"], {"Failed": 1}, 3])
def test_a_description_whose_status_is_not_a_string_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: object
) -> None:
    describe = _write(tmp_path / "d.json", failed_description("job-a", TrainingJobStatus=status))
    tags = _write(tmp_path / "t.json", {"team": "nlp"})
    assert main(["resume", "job-a", "--describe-file", describe, "--tags-file", tags]) == 2
    assert "TrainingJobStatus" in capsys.readouterr().err
