"""The idle stopper through its real handler: alarm messages in the shapes CloudWatch publishes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from pydantic import ValidationError

from sagemaker_governance.business_metrics import BusinessMetric, MemoryBusinessMetrics
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from smgov.simulation.harness import LocalAccount
from smgov.simulation.job_signals import log_stream
from tests.builders import create_request
from tests.conftest import load_event
from tests.handlers.conftest import ENFORCE, NOW, PREFIX, MovableClock, fire, judged_account


@pytest.fixture
def acct(clock: MovableClock, savings: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from judged_account(clock, savings, ENFORCE)


@pytest.fixture
def audit_acct(clock: MovableClock, savings: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from judged_account(clock, savings, {**ENFORCE, "GOVERNANCE_MODE": "audit"})


def training_job_with_alarm(account: LocalAccount, name: str = "job-1", **overrides: Any) -> str:
    """A job in Training whose idle alarm the real job-events handler created."""
    account.sagemaker.launch(create_request(name, **overrides), secondary="Training")
    account.invoke(job_events, account.sagemaker.event(name))
    # What the stall judge reads when the alarm fires: every host idle, the job's log stream silent.
    account.signals.idle(name, hosts=16)  # type: ignore[attr-defined]
    log_stream(name)
    return f"{PREFIX}{name}"


def stop_records(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.trigger == "idle-alarm"]


def test_idle_job_after_grace_is_stopped_with_evidence_savings_and_a_notice(
    acct: LocalAccount, clock: MovableClock, savings: MemoryBusinessMetrics
) -> None:
    queue_url = acct.notification_inbox()
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=50)
    result = fire(acct, alarm)
    assert result["results"][0]["outcome"] == "done"
    assert acct.sagemaker.stop_requests == ["job-1"]
    (record,) = stop_records(acct)
    assert (record.action, record.mode, record.outcome.value) == ("stop", "enforce", "done")
    assert record.evidence["threshold"] == 1.0 and record.evidence["hosts"] == ["job-1/algo-1"]
    assert "Threshold Crossed" in record.evidence["state_reason"]
    # 24 h allowed - 50 min elapsed, 1 x ml.g5.2xlarge at the built-in price
    ((rule, usd),) = savings.savings
    assert rule == "idle-guard" and usd == pytest.approx((86_400 - 3000) / 3600 * 1.515)
    (message,) = acct.sqs.receive_message(QueueUrl=queue_url)["Messages"]
    body = json.loads(message["Body"])
    assert body["kind"] == "idle-stop" and body["outcome"] == "stopped" and body["owner"] == "alice"


def test_a_lowered_threshold_re_plans_an_older_stricter_alarm_instead_of_stopping_at_it(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in Training whose alarm was planned at 10 % per GPU, and the operator lowering it to 1 % since
    acct.ssm.put_parameter(
        Name="/gov/policy", Value="idle: {threshold_percent: 10}", Type="String", Overwrite=True
    )
    alarm = training_job_with_alarm(acct)
    assert acct.cloudwatch.alarms[alarm]["Threshold"] == 10.0
    acct.ssm.put_parameter(Name="/gov/policy", Value="idle: {threshold_percent: 1}", Type="String", Overwrite=True)
    # When the job works at 5 % GPU (below the old threshold, above the new one) and the old alarm fires
    acct.signals.set("GPUUtilization", "job-1/algo-1", 5.0)  # type: ignore[attr-defined]
    clock.advance(minutes=50)
    fire(acct, alarm)
    # Then the job is not stopped: its alarm is put again at the threshold in force, and reset
    assert acct.sagemaker.stop_requests == []
    (record,) = stop_records(acct)
    assert (record.code, record.outcome.value) == ("idle.skip.stricter-alarm", "skipped")
    assert (record.evidence["alarm_threshold"], record.evidence["planned_threshold"]) == (10.0, 1.0)
    assert acct.cloudwatch.alarms[alarm]["Threshold"] == 1.0 and acct.cloudwatch.state(alarm) == "OK"


def test_metric_math_alarm_of_a_two_host_job(acct: LocalAccount, clock: MovableClock) -> None:
    resources = {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100}
    alarm = training_job_with_alarm(acct, ResourceConfig=resources)
    clock.advance(minutes=45)
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == ["job-1"]
    assert (
        stop_records(acct)[0].evidence["expression"]
        == "IF(((MAX([m1, m2]) >= 380) * ((MIN([m1, m2]) >= 380) + (MIN([m1, m2]) < 4) * (AVG([m1, m2]) >= 190))) >= 1, 0, MAX([m1, m2]))"
    )


def test_composite_alarm_of_a_sixteen_host_job(acct: LocalAccount, clock: MovableClock) -> None:
    resources = {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16, "VolumeSizeInGB": 100}
    alarm = training_job_with_alarm(acct, ResourceConfig=resources)
    clock.advance(minutes=45)
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == ["job-1"]
    assert "alarm_rule" in stop_records(acct)[0].evidence


@pytest.mark.parametrize("judge", ["true", "false"])
def test_a_lowered_threshold_re_plans_a_sixteen_host_jobs_older_stricter_children_instead_of_stopping(
    acct: LocalAccount, clock: MovableClock, judge: str
) -> None:
    # Given a 16-host job (8 GPUs a host) whose child alarms were planned at 10 % per GPU (80 a host), and the
    # operator lowering the threshold to 1 % since: the composite's notification repeats no child's threshold
    def policy(threshold: int) -> None:
        document = f"{{judge: {{enabled: {judge}}}, idle: {{threshold_percent: {threshold}}}}}"
        acct.ssm.put_parameter(Name="/gov/policy", Value=document, Type="String", Overwrite=True)

    policy(10)
    resources = {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16, "VolumeSizeInGB": 100}
    alarm = training_job_with_alarm(acct, ResourceConfig=resources)
    children = [f"{alarm}.hosts-1-10", f"{alarm}.hosts-11-16"]
    assert [acct.cloudwatch.alarms[c]["Threshold"] for c in children] == [80.0, 80.0]
    policy(1)
    # When the job works at 5 % per GPU (below the old threshold, above the new one) and the composite fires
    for host in range(1, 17):
        acct.signals.set("GPUUtilization", f"job-1/algo-{host}", 40.0)  # type: ignore[attr-defined]
    clock.advance(minutes=50)
    fire(acct, alarm)
    # Then the job is not stopped: its children are put again at the threshold in force, and reset
    assert acct.sagemaker.stop_requests == []
    (record,) = stop_records(acct)
    assert (record.code, record.outcome.value) == ("idle.skip.stricter-alarm", "skipped")
    assert (record.evidence["alarm_threshold"], record.evidence["planned_threshold"]) == (80.0, 8.0)
    assert [acct.cloudwatch.alarms[c]["Threshold"] for c in children] == [8.0, 8.0]
    assert [acct.cloudwatch.state(c) for c in children] == ["OK", "OK"]


def test_a_child_alarm_never_stops_a_job(acct: LocalAccount, clock: MovableClock) -> None:
    resources = {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16, "VolumeSizeInGB": 100}
    training_job_with_alarm(acct, ResourceConfig=resources)
    clock.advance(minutes=45)
    result = fire(acct, f"{PREFIX}job-1.hosts-1-10")
    assert result["results"][0]["outcome"] == "ignored"
    assert acct.sagemaker.stop_requests == []


def test_within_grace_the_alarm_is_reset_and_the_job_kept(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=5)
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == []
    assert acct.cloudwatch.state(alarm) == "OK"  # fires again if the job is still idle after the grace
    (record,) = stop_records(acct)
    assert record.outcome.value == "skipped" and record.code == "idle.skip.grace"
    # Still idle after the grace period: the next notification stops it
    clock.advance(minutes=30)
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_ok_transition_is_ignored(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    result = fire(acct, alarm, new_state="OK", old_state="ALARM")
    assert result["results"][0]["outcome"] == "ignored"
    assert acct.sagemaker.stop_requests == [] and stop_records(acct) == []


def test_job_that_already_ended_is_not_stopped(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    fire(acct, alarm)
    assert acct.sagemaker.calls["StopTrainingJob"] == 0
    (record,) = stop_records(acct)
    assert record.outcome.value == "already-done"


def test_job_uploading_its_model_is_not_stopped(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    acct.sagemaker.transition("job-1", "InProgress", "Uploading")
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == []
    assert stop_records(acct)[0].outcome.value == "skipped"


def test_audit_mode_records_and_does_not_stop(
    audit_acct: LocalAccount, clock: MovableClock, savings: MemoryBusinessMetrics
) -> None:
    alarm = training_job_with_alarm(audit_acct)
    clock.advance(minutes=45)
    fire(audit_acct, alarm)
    assert audit_acct.sagemaker.stop_requests == []
    (record,) = stop_records(audit_acct)
    assert (record.action, record.mode, record.outcome.value) == ("stop", "audit", "audit-only")
    assert record.evidence["estimated_savings_usd"] > 0
    assert savings.savings == []  # nothing was saved


def test_idle_mode_override_enforces_only_the_idle_guard(audit_acct: LocalAccount, clock: MovableClock) -> None:
    audit_acct.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value="{idle: {mode: enforce}, judge: {enabled: true}}", Overwrite=True
    )
    alarm = training_job_with_alarm(audit_acct)
    clock.advance(minutes=45)
    fire(audit_acct, alarm)
    assert audit_acct.sagemaker.stop_requests == ["job-1"]


def test_alarm_of_another_stack_is_ignored(acct: LocalAccount, clock: MovableClock) -> None:
    training_job_with_alarm(acct, "resnet50-imagenet-2025-11-21-10-00-00")
    result = acct.invoke(stopper, load_event("idle-alarm-other-stack.json"))
    assert result["results"][0]["outcome"] == "ignored"
    assert acct.sagemaker.stop_requests == []


def test_alarm_with_our_prefix_but_not_our_tag_is_ignored(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    acct.cloudwatch.tags[alarm] = [{"Key": "smgov:training-job", "Value": "job-1"}]  # no managed-by tag
    clock.advance(minutes=45)
    assert fire(acct, alarm)["results"][0]["outcome"] == "ignored"
    assert acct.sagemaker.stop_requests == []


def test_notification_of_a_deleted_alarm_is_ignored(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    message = acct.cloudwatch.notification(alarm)
    del acct.cloudwatch.alarms[alarm]
    result = acct.invoke(stopper, acct.cloudwatch.sns_event([message]))
    assert result["results"][0]["outcome"] == "ignored"
    assert acct.sagemaker.stop_requests == []


def test_message_from_another_account_is_ignored(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    message = {**acct.cloudwatch.notification(alarm), "AWSAccountId": "999999999999"}
    result = acct.invoke(stopper, acct.cloudwatch.sns_event([message]))
    assert result["results"][0]["outcome"] == "ignored"


def test_stale_notification_resets_instead_of_stopping(acct: LocalAccount, clock: MovableClock) -> None:
    alarm = training_job_with_alarm(acct)
    clock.advance(minutes=45)
    message = acct.cloudwatch.notification(alarm)
    acct.cloudwatch.set_state(alarm, "ALARM")
    clock.advance(hours=2)  # e.g. a retried delivery
    acct.invoke(stopper, acct.cloudwatch.sns_event([message]))
    assert acct.sagemaker.stop_requests == []
    assert acct.cloudwatch.state(alarm) == "OK"


def test_non_json_message_fails_the_invocation(acct: LocalAccount) -> None:
    with pytest.raises(ValidationError):
        acct.invoke(stopper, load_event("idle-alarm-not-json.json"))
    assert acct.audit.records == []


def test_sample_single_metric_message_stops_its_job(acct: LocalAccount, clock: MovableClock) -> None:
    # Given the sample's job, in Training since 10:07 with its alarm, and the clock at the alarm time
    clock.now = datetime(2025, 11, 21, 10, 7, tzinfo=NOW.tzinfo)
    training_job_with_alarm(acct, "bert-sst2-finetune-42")
    clock.now = datetime(2025, 11, 21, 10, 41, tzinfo=NOW.tzinfo)
    acct.invoke(stopper, load_event("idle-alarm-single-metric.json"))
    assert acct.sagemaker.stop_requests == ["bert-sst2-finetune-42"]


def test_a_cpu_phase_is_not_stopped_and_the_alarm_fires_again_later(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job past its grace period whose GPUs are idle while its CPUs tokenize (3 busy vCPUs)
    alarm = training_job_with_alarm(acct)
    acct.signals.set("CPUUtilization", "job-1/algo-1", 300.0)  # type: ignore[attr-defined]
    clock.advance(hours=1)
    # When the idle alarm fires
    result = fire(acct, alarm)
    # Then the stall judge vetoes the stop, records its evidence and resets the alarm
    assert result["results"][0]["code"] == "judge.veto.cpu-busy"
    assert acct.sagemaker.stop_requests == [] and acct.cloudwatch.state(alarm) == "OK"
    (record,) = [r for r in stop_records(acct) if r.code == "judge.veto.cpu-busy"]
    assert record.evidence["judge"]["hosts"]["job-1/algo-1"]["busy_vcpus"] == 3.0
    # And widens the alarm first (PutMetricAlarm, state kept, tags untouched) to twice the quiet stretch so
    # far, so that it is not judged again every minute of the CPU phase
    quiet = record.evidence["rejudge"]["quiet_minutes"]
    assert quiet >= 30 and acct.cloudwatch.alarms[alarm]["EvaluationPeriods"] == min(240, 2 * quiet)
    puts = [name for name, _ in acct.cloudwatch.requests if name in ("PutMetricAlarm", "SetAlarmState")]
    assert puts[-2:] == ["PutMetricAlarm", "SetAlarmState"]
    assert {t["Key"] for t in acct.cloudwatch.tags[alarm]} >= {"smgov:training-job", "smgov:managed-by"}
    # And when the CPU phase is over and the job is still idle, the next notification stops it
    acct.signals.set("CPUUtilization", "job-1/algo-1", 2.0)  # type: ignore[attr-defined]
    fire(acct, alarm)
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_the_judge_reads_nothing_until_an_alarm_fires(acct: LocalAccount, clock: MovableClock) -> None:
    training_job_with_alarm(acct)
    assert acct.signals.reads == 0  # type: ignore[attr-defined]
    assert acct.cloudwatch.calls["GetMetricData"] == 0


def test_log_reads_an_scp_denies_stop_nothing_and_are_counted_for_the_health_alarm(
    acct: LocalAccount, clock: MovableClock, savings: MemoryBusinessMetrics
) -> None:
    # Given an idle job past its window, in an account whose SCP denies the stopper's log reads (CloudWatch Logs
    # answers AccessDeniedException before any handler sees a byte of the logs)
    alarm = training_job_with_alarm(acct)

    def denied(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {"Code": "AccessDeniedException", "Message": "explicit deny in a service control policy"}
        return AWSResponse("https://logs", 400, HTTPHeaders(), None), {"Error": error, "ResponseMetadata": {}}

    acct.root.client("logs").meta.events.register("before-call.cloudwatch-logs.*", denied)
    clock.advance(minutes=50)
    # When its idle alarm fires
    result = fire(acct, alarm)
    # Then the job is not stopped (insufficient evidence, recorded with the denial), and the failed read is
    # counted as `denied`: the series EvidenceReadsAlarm watches
    assert result["results"][0]["code"] == "judge.skip.insufficient-evidence"
    assert acct.sagemaker.stop_requests == []
    assert "AccessDeniedException" in json.dumps(stop_records(acct)[-1].evidence)
    kinds = [e.dimensions["kind"] for e in savings.of(BusinessMetric.EVIDENCE_READ_ERRORS)]
    assert kinds == ["denied"]


def _whole_window(event: dict[str, Any]) -> dict[str, Any]:
    """The sample notification of an alarm over the whole 30-minute window (a declared window, or one created
    when the trigger was off): the judge-off trigger rule (widen to the window) does not apply to it."""
    message = json.loads(event["Records"][0]["Sns"]["Message"])
    message["Trigger"].update(EvaluationPeriods=30, DatapointsToAlarm=30)
    event["Records"][0]["Sns"]["Message"] = json.dumps(message)
    return event


@pytest.mark.parametrize(
    ("whole_window", "code"),
    [
        (False, "idle.skip.trigger"),  # its 20-minute trigger: widened to the window, as before
        (True, "idle.skip.pinned-trigger"),  # over the window: re-created without the pinned trigger
    ],
)
def test_with_the_judge_off_the_stuck_host_sample_is_never_a_stop(
    acct: LocalAccount, clock: MovableClock, whole_window: bool, code: str
) -> None:
    # Given the sample's 4-host job (its alarm created with the pinned trigger: the sample's description says
    # so) and a platform team that has since switched the stall judge off
    clock.now = datetime(2025, 11, 21, 10, 7, tzinfo=NOW.tzinfo)
    training_job_with_alarm(acct, "llm-4x-stuck-host", InstanceType="ml.p4d.24xlarge", InstanceCount=4)
    acct.ssm.put_parameter(Name="/gov/policy", Value="judge: {enabled: false}", Type="String", Overwrite=True)
    clock.now = datetime(2025, 11, 21, 11, 34, tzinfo=NOW.tzinfo)
    # When the sample notification arrives, then the job is not stopped: its alarm may have fired on pinned
    # GPUs, which no judge can tell now; the alarm is re-created without the trigger and reset
    event = load_event("idle-alarm-stuck-host.json")
    result = acct.invoke(stopper, _whole_window(event) if whole_window else event)
    assert result["results"][0]["code"] == code
    assert acct.sagemaker.stop_requests == []
    assert "hang trigger" not in acct.cloudwatch.alarms[f"{PREFIX}llm-4x-stuck-host"]["AlarmDescription"]
