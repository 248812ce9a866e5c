"""The progress guard through the real handlers (job events, then the stopper), against the doubles."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.handlers.job_events import handler as job_events
from smgov.simulation.harness import LocalAccount
from smgov.simulation.job_signals import log_stream
from tests.builders import create_request
from tests.handlers.conftest import ENFORCE, PREFIX, MovableClock, fire, judged_account

LOSS = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
}
STALL, ARMER = f"{PREFIX}job-1.progress", f"{PREFIX}job-1.progress-armer"


@pytest.fixture
def acct(clock: MovableClock, savings: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from judged_account(clock, savings, ENFORCE)


@pytest.fixture
def audit_acct(clock: MovableClock, savings: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from judged_account(clock, savings, {**ENFORCE, "GOVERNANCE_MODE": "audit"})


def training(account: LocalAccount, name: str = "job-1", **overrides: Any) -> None:
    account.sagemaker.launch(create_request(name, AlgorithmSpecification=LOSS, **overrides), secondary="Training")
    account.invoke(job_events, account.sagemaker.event(name))
    # A hang at busy GPUs, as the stall judge reads it: GPUs pinned, no metric datapoint, the stream silent.
    account.signals.set("GPUUtilization", f"{name}/algo-1", 100.0)  # type: ignore[attr-defined]
    account.signals.set("CPUUtilization", f"{name}/algo-1", 250.0)  # type: ignore[attr-defined]
    log_stream(name)


def progress_records(account: LocalAccount, trigger: str | None = None) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "progress-guard" and trigger in (None, r.trigger)]


def test_training_creates_the_armer_and_a_disarmed_stall_alarm(acct: LocalAccount) -> None:
    training(acct)
    stall, armer = acct.cloudwatch.alarms[STALL], acct.cloudwatch.alarms[ARMER]
    assert stall["ActionsEnabled"] is False and armer["ActionsEnabled"] is True
    assert stall["MetricName"] == armer["MetricName"] == "train:loss"
    assert stall["Dimensions"] == [{"Name": "TrainingJobName", "Value": "job-1"}]
    # new alarms, as CloudWatch starts them: no reset on the job's first entry into Training
    assert acct.cloudwatch.state(STALL) == acct.cloudwatch.state(ARMER) == "INSUFFICIENT_DATA"
    (record,) = progress_records(acct)
    assert (record.action, record.outcome.value) == ("create-alarm", "done")


def test_a_job_without_metric_definitions_gets_no_progress_alarm(acct: LocalAccount) -> None:
    acct.sagemaker.launch(create_request("job-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    assert STALL not in acct.cloudwatch.alarms and ARMER not in acct.cloudwatch.alarms
    (record,) = progress_records(acct)
    assert (record.action, record.outcome.value) == ("none", "no-action")
    assert record.code == "progress.alarm.no-metric-definitions"


def test_the_first_datapoint_arms_the_stall_alarm_and_switches_the_armer_off(acct: LocalAccount) -> None:
    training(acct)
    acct.cloudwatch.set_state(STALL, "ALARM")  # silent start-up minutes while disarmed
    result = fire(acct, ARMER)
    assert result["results"][0]["action"] == "arm-alarm"
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is False
    assert acct.cloudwatch.state(STALL) == "OK"  # reset: an armed alarm must change state to notify
    assert acct.sagemaker.stop_requests == []
    (record,) = progress_records(acct, "progress-alarm")
    assert (record.action, record.outcome.value) == ("arm-alarm", "done")


def test_an_armed_stall_alarm_stops_the_job_with_evidence_notification_and_savings(
    acct: LocalAccount,
    clock: MovableClock,
    savings: MemoryBusinessMetrics,
) -> None:
    inbox = acct.notification_inbox()
    training(acct)
    fire(acct, ARMER)
    clock.advance(hours=3)
    result = fire(acct, STALL)
    assert result["results"][0]["outcome"] == "done"
    assert acct.sagemaker.stop_requests == ["job-1"]
    (record,) = [r for r in progress_records(acct, "progress-alarm") if r.action == "stop"]
    assert record.outcome.value == "done"
    assert record.evidence["window_minutes"] == 120
    assert record.evidence["metrics"] == ["train:loss"]
    assert "last_datapoint_before" in record.evidence
    assert [rule for rule, _ in savings.savings] == ["progress-guard"]
    message = acct.sqs.receive_message(QueueUrl=inbox)["Messages"][0]["Body"]
    assert '"kind": "progress-stop"' in message or '"kind":"progress-stop"' in message
    assert record.evidence["judge"]["training_metrics"] == {"train:loss": 0}


def test_a_job_that_still_logs_is_not_stopped_for_a_silent_metric(acct: LocalAccount, clock: MovableClock) -> None:
    # Given an armed job whose loss stopped but whose log got a line 10 minutes ago (a long evaluation)
    training(acct)
    fire(acct, ARMER)
    clock.advance(hours=3)
    log_stream("job-1", lines_at=(clock.now - timedelta(minutes=10),))
    # When the stall alarm fires
    result = fire(acct, STALL)
    # Then the judge vetoes the stop and resets the stall alarm
    assert result["results"][0]["code"] == "judge.veto.logs-active"
    assert acct.sagemaker.stop_requests == [] and acct.cloudwatch.state(STALL) == "OK"


def test_a_stall_alarm_within_a_window_of_entering_training_is_reset_not_acted_on(
    acct: LocalAccount,
    clock: MovableClock,
) -> None:
    training(acct)
    fire(acct, ARMER)
    clock.advance(minutes=30)
    result = fire(acct, STALL)
    assert result["results"][0]["outcome"] == "skipped"
    assert acct.sagemaker.stop_requests == []
    assert acct.cloudwatch.state(STALL) == "OK"


def test_audit_mode_records_what_it_would_stop(audit_acct: LocalAccount, clock: MovableClock) -> None:
    training(audit_acct)
    fire(audit_acct, ARMER)
    clock.advance(hours=3)
    result = fire(audit_acct, STALL)
    assert result["results"][0]["outcome"] == "audit-only"
    assert audit_acct.sagemaker.stop_requests == []


def test_reentering_training_disarms_until_the_metric_is_published_again(
    acct: LocalAccount,
    clock: MovableClock,
) -> None:
    training(
        acct,
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
    )
    fire(acct, ARMER)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    clock.advance(hours=1)
    acct.sagemaker.transition("job-1", "InProgress", "Interrupted")
    acct.sagemaker.transition("job-1", "InProgress", "Training")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is True


def test_the_job_end_deletes_both_progress_alarms(acct: LocalAccount) -> None:
    training(acct)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    assert STALL not in acct.cloudwatch.alarms and ARMER not in acct.cloudwatch.alarms
    deleted = [r for r in progress_records(acct) if r.action == "delete-alarm"]
    assert [r.outcome.value for r in deleted] == ["done"]


def test_an_ended_job_is_not_armed_or_stopped(acct: LocalAccount, clock: MovableClock) -> None:
    training(acct)
    acct.sagemaker.transition("job-1", "InProgress", "Uploading")
    result = fire(acct, ARMER)
    assert result["results"][0]["outcome"] == "skipped"
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
