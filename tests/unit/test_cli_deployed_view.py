"""The CLI shows what the deployed service does (issue 16 item 8): the template's Parameter defaults (or a
deployed stack's parameters) when there is no policy document; every event a function receives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from smgov.cli.main import main
from smgov.local_policy import deployed_settings, template_environment
from tests.conftest import EVENTS, load_event
from tests.stacks import deployed_stack


def test_without_a_document_an_untagged_job_is_what_the_deployed_service_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given no policy document, when an untagged job's Starting event is explained, then the template's
    # RequiredTags default (team, cost-center) applies: it is not compliant, as once deployed.
    assert main(["explain", str(EVENTS / "training-job-starting-untagged.json"), "--json"]) == 0
    decisions = json.loads(capsys.readouterr().out)["decisions"]
    assert [d["rule"] for d in decisions if d["action"] == "stop"] == ["required-tags"]


def test_the_cli_settings_are_the_deployed_functions_environment() -> None:
    # The CLI's environment equals what the simulator's deployment (CloudFormation's resolution of the
    # template, parameters at their defaults) gives the functions, for every variable both resolve.
    import moto

    from smgov.cfn_template import load_template
    from smgov.simulation.deploy import deploy

    with moto.mock_aws():
        region = "us-east-1"
        deployment = deploy(
            load_template(),
            {},
            stack_name="sagemaker-governance",
            region=region,
            account="123456789012",
            sns=boto3.client("sns", region_name=region),
            sqs=boto3.client("sqs", region_name=region),
            ssm=boto3.client("ssm", region_name=region),
        )
    deployed = deployment.environment()
    ours = template_environment({}, stack_name="sagemaker-governance")
    assert ours and {k: deployed[k] for k in ours} == ours
    assert ours["REQUIRED_TAGS"] == "team,cost-center"


def test_a_stacks_parameters_replace_the_defaults() -> None:
    # Given a stack deployed with RequiredTags="" (no tag rule), when the CLI reads it (DescribeStacks),
    # then its settings have no required tags, while the defaults do.
    with deployed_stack({"RequiredTags": ""}):
        settings = deployed_settings("gov", environ={})
    assert settings.required_tags == () or not settings.required_tags
    assert deployed_settings(None, environ={}).required_tags


def test_policy_validate_judges_a_document_on_the_stacks_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a document that switches the required-tags rule off for a team (a patch by id: the rule is
    # the template's, RequiredTags defaults to team,cost-center), and a stack deployed with RequiredTags=""
    monkeypatch.delenv("REQUIRED_TAGS", raising=False)
    document = tmp_path / "policy.yaml"
    document.write_text("teams:\n  research:\n    rules:\n      - id: required-tags\n        enabled: false\n")
    # When validated against the template's defaults, it is valid
    assert main(["policy", "validate", str(document)]) == 0
    capsys.readouterr()
    # When validated against the stack, then it is invalid as the deployed functions would find it (no such
    # rule in their base), and the error says which rule id
    with deployed_stack({"RequiredTags": ""}):
        assert main(["policy", "validate", str(document), "--stack", "gov"]) == 1
    assert "rule id 'required-tags' is not in the base policy" in capsys.readouterr().err


def describe_of(event: dict[str, Any], name: str) -> dict[str, Any]:
    detail = dict(event["detail"])
    detail["TrainingJobName"] = name
    detail["TrainingJobArn"] = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"
    return detail


def test_an_alarm_notification_is_explained_with_the_jobs_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the sample idle alarm (job bert-sst2-finetune-42) and that job's description (in Training)
    describe = tmp_path / "d.json"
    describe.write_text(json.dumps(describe_of(load_event("training-job-training.json"), "bert-sst2-finetune-42")))
    for sample in ("idle-alarm-single-metric.json", "sqs-idle-alarm.json"):
        # When explained, directly or as the alarm queue delivers it, then the stopper's verdict is shown
        assert main(["explain", str(EVENTS / sample), "--describe", str(describe), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["job"] == "bert-sst2-finetune-42"
        assert result["decisions"] and {d["rule"] for d in result["decisions"]} == {"idle-guard"}
        assert "assumed" in result


def test_an_alarm_notification_without_a_description_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(EVENTS / "idle-alarm-single-metric.json")]) == 2
    assert "--describe" in capsys.readouterr().err


def test_the_reconcilers_schedule_is_explained_for_the_described_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job in Training (its events lost: no alarm, never evaluated), when the reconciler's scheduled
    # event is explained, then the run creates its alarms and evaluates it (what a real run would repair)
    describe = tmp_path / "d.json"
    job = describe_of(load_event("training-job-training.json"), "lost-events-1")
    job["CreationTime"] = "2025-11-21T08:00:00Z"
    describe.write_text(json.dumps(job))
    assert main(["explain", str(EVENTS / "scheduled-reconcile.json"), "--describe", str(describe), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["run"]["items"] == 1
    assert {"missing-alarm", "unevaluated-job"} <= set(result["run"]["repairs"])


def test_policy_show_builds_idle_evaluation_periods_alone_as_the_functions_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the deploy-time environment of a stack with IdleEvaluationPeriods=20 (IdleDatapointsToAlarm default)
    monkeypatch.setenv("IDLE_EVALUATION_PERIODS", "20")
    # When its effective policy is shown, then it is the whole 20-period window
    assert main(["policy", "show", "--json"]) == 0
    idle = json.loads(capsys.readouterr().out)["idle"]
    assert (idle["evaluation_periods"], idle["datapoints_to_alarm"]) == (20, 20)


def test_policy_show_and_validate_say_which_parameters_the_functions_reject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stack whose idle window is 30 hours (IdlePeriodSeconds=3600 x 30 periods: beyond CloudWatch's day)
    monkeypatch.setenv("IDLE_PERIOD_SECONDS", "3600")
    document = tmp_path / "policy.yaml"
    document.write_text("mode: enforce\n")
    # When its policy is shown, then it is the policy the functions govern with: the idle defaults, said loudly
    assert main(["policy", "show", "--json"]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out)["idle"]["period_seconds"] == 60
    assert "IdlePeriodSeconds" in shown.err and "WARNING" in shown.err
    # and a document validated over it is judged over the same base, with the same warning
    assert main(["policy", "validate", str(document)]) == 0
    validated = capsys.readouterr()
    assert "ok" in validated.out and "IdlePeriodSeconds" in validated.err
