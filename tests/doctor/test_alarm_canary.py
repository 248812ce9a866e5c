"""`smgov doctor --alarm-canary`: every alarm shape the guards create goes to CloudWatch as the service sends
it (actions off, the canary's own prefix) and is deleted again; a refusal fails and names the alarm. The
CloudWatch double (``simulation/fake_cloudwatch.py``) answers behind botocore's request validation and
enforces the composite alarm's rules; a test refuses what CloudWatch could refuse."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.policy_document import build_policy, load_policy_text
from sagemaker_governance.settings import Settings
from smgov.cli.doctor import _alarm_canary
from smgov.cli.main import build_parser
from smgov.doctor.alarm_canary import CANARY_PREFIX, IAM_ACTIONS, SHAPES, canary_job_name, run_alarm_canary
from smgov.doctor.checks import CheckContext
from smgov.doctor.deployment import Deployment
from smgov.doctor.findings import Finding, Status
from smgov.local_policy import template_environment
from smgov.simulation.fake_cloudwatch import CloudWatchError, FakeCloudWatch

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
TOPIC = "arn:aws:sns:us-east-1:123456789012:gov-alarms"
TEAMS = "teams:\n  vision:\n    efficiency: {enabled: true, min_gpu_percent: 50, window_minutes: 60}\n"


def base() -> dict[str, Any]:
    env = template_environment({}, stack_name="gov")
    env.setdefault("AWS_REGION", "us-east-1")
    return Settings.from_env(env).base_policy_document()


def deployed(fake: FakeCloudWatch) -> Deployment:
    client = fake.attach(boto3.client("cloudwatch", region_name="us-east-1"))
    return Deployment(
        "gov", "us-east-1", "123456789012", "aws", "UPDATE_COMPLETE", {}, {"AlarmTopic": TOPIC}, {}, None,
        client=lambda service: client,
    )  # fmt: skip


def puts(fake: FakeCloudWatch) -> list[tuple[str, dict[str, Any]]]:
    return [(call, request) for call, request in fake.requests if call.startswith("Put")]


def test_every_alarm_shape_is_sent_as_the_service_sends_it_with_its_actions_off_and_deleted() -> None:
    # Given a stack with the default policy
    fake = FakeCloudWatch(clock=lambda: NOW)
    # When the alarm canary runs
    findings = run_alarm_canary(deployed(fake), build_policy(base()), now=NOW)
    # Then the idle and progress guards' alarms of every shape were accepted, and none is left
    assert {(f.subject, f.status) for f in findings} == {
        (f"{shape.label}: {rule}", Status.OK) for shape in SHAPES for rule in ("idle-guard", "progress-guard")
    }
    assert fake.alarms == {}
    sent = puts(fake)
    assert {call for call, _ in sent} == {"PutMetricAlarm", "PutCompositeAlarm"}
    assert all(r["ActionsEnabled"] is False and r["AlarmName"].startswith(CANARY_PREFIX) for _, r in sent)
    # and the 4-host idle alarm is the service's own request (the stuck-host expression), but for the two changes
    job = SHAPES[1].job(canary_job_name(NOW, 2), "us-east-1", "123456789012")
    naming = AlarmNaming(
        prefix=CANARY_PREFIX, managed_by="gov (smgov doctor --alarm-canary)", alarm_topic_arn=TOPIC
    )
    plan = IDLE.plan(job, IDLE.config(build_policy(base())), naming)
    assert isinstance(plan, AlarmPlan)
    (service,) = plan.metric_requests
    (canary,) = [r for _, r in sent if r["AlarmName"] == service["AlarmName"]]
    assert canary == {**service, "ActionsEnabled": False}
    assert "AVG([" in canary["Metrics"][-1]["Expression"]


def test_a_team_override_that_changes_a_guard_is_tried_too() -> None:
    # Given a team that turns the minimum-utilization guard on
    fake = FakeCloudWatch(clock=lambda: NOW)
    findings = run_alarm_canary(deployed(fake), load_policy_text(TEAMS, base()), now=NOW)
    # Then its alarms are tried for every shape under the team's name; the unchanged guards once
    subjects = {f.subject for f in findings}
    assert {f"{shape.label}: efficiency (team vision)" for shape in SHAPES} <= subjects
    assert not any("idle-guard (team" in s for s in subjects)
    assert all(f.status is Status.OK for f in findings) and fake.alarms == {}


class Refusing(FakeCloudWatch):
    """CloudWatch refusing the composite alarm over the 12 GPU hosts' children."""

    def _op_PutCompositeAlarm(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["AlarmName"].endswith(canary_job_name(NOW, 3)):
            raise CloudWatchError("ValidationError", "the rule is not valid")
        result: dict[str, Any] = super()._op_PutCompositeAlarm(params)
        return result


def test_a_refused_alarm_fails_names_it_and_what_was_created_before_it_is_deleted() -> None:
    fake = Refusing(clock=lambda: NOW)
    findings = run_alarm_canary(deployed(fake), build_policy(base()), now=NOW)
    (refused,) = [f for f in findings if f.status is not Status.OK]
    assert (refused.subject, refused.status) == ("12 GPU hosts: idle-guard", Status.FAIL)
    assert "refused PutCompositeAlarm" in refused.detail and "ValidationError" in refused.detail
    assert "dead-letter queue" in refused.detail
    # its two child alarms had been created: they are gone too
    assert fake.alarms == {}


class Denying(FakeCloudWatch):
    def _op_PutMetricAlarm(self, params: dict[str, Any]) -> dict[str, Any]:
        raise CloudWatchError("AccessDenied", "not authorized to perform cloudwatch:PutMetricAlarm")


def test_without_permission_nothing_is_tried_and_nothing_fails() -> None:
    findings = run_alarm_canary(deployed(Denying(clock=lambda: NOW)), build_policy(base()), now=NOW)
    assert {f.status for f in findings} == {Status.UNKNOWN}
    assert all(f.detail.startswith("not tried: PutMetricAlarm AccessDenied") for f in findings)


class Undeletable(FakeCloudWatch):
    def _op_DeleteAlarms(self, params: dict[str, Any]) -> dict[str, Any]:
        raise CloudWatchError("InternalFailure", "try again")


def test_an_alarm_that_cannot_be_deleted_is_named_for_deleting_by_hand() -> None:
    fake = Undeletable(clock=lambda: NOW)
    findings = run_alarm_canary(deployed(fake), build_policy(base()), now=NOW)
    left = [f for f in findings if f.subject.endswith("clean-up")]
    assert len(left) == 2 * len(SHAPES) and all(f.status is Status.WARN for f in left)
    assert all(name in " ".join(f.detail for f in left) for name in fake.alarms)


def test_the_cli_offers_the_alarm_canary() -> None:
    assert build_parser().parse_args(["doctor", "--alarm-canary"]).alarm_canary is True
    assert build_parser().parse_args(["doctor"]).alarm_canary is False


def test_every_request_is_a_listed_action_and_the_readme_lists_them() -> None:
    fake = FakeCloudWatch(clock=lambda: NOW)
    run_alarm_canary(deployed(fake), build_policy(base()), now=NOW)
    assert {f"cloudwatch:{call}" for call, _ in fake.requests} <= IAM_ACTIONS
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert all(f"`{action}`" in readme for action in IAM_ACTIONS)


def test_without_a_valid_policy_the_alarm_canary_is_not_tried() -> None:
    fake = FakeCloudWatch(clock=lambda: NOW)
    context = CheckContext(template={}, now=NOW)
    context.cache["policy"] = (None, Finding("policy", "/p", Status.FAIL, "invalid"))
    (finding,) = _alarm_canary(deployed(fake), context)
    assert finding.status is Status.UNKNOWN and "no valid policy" in finding.detail
    assert fake.requests == []


class Interrupted(FakeCloudWatch):
    """The operator presses Ctrl-C while the 12 GPU hosts' composite alarm is being created."""

    def _op_PutCompositeAlarm(self, params: dict[str, Any]) -> dict[str, Any]:
        raise KeyboardInterrupt


def test_an_interrupted_canary_still_deletes_what_it_created() -> None:
    fake = Interrupted(clock=lambda: NOW)
    with pytest.raises(KeyboardInterrupt):
        run_alarm_canary(deployed(fake), build_policy(base()), now=NOW)
    assert fake.calls["PutMetricAlarm"] > 0 and fake.alarms == {}
