"""The progress guard through the real handlers (job events, then the stopper), against the doubles."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.handlers.reconciler import handler as reconciler
from smgov.simulation.fake_cloudwatch import CloudWatchError
from smgov.simulation.harness import LocalAccount
from smgov.simulation.job_signals import log_stream
from smgov.simulation.metrics import kept_at
from tests.builders import create_request
from tests.conftest import load_event
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
    account.sagemaker.launch(
        create_request(name, **{"AlgorithmSpecification": LOSS, **overrides}), secondary="Training"
    )
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


def test_a_job_on_a_type_only_ec2_sizes_whose_gpus_compute_is_not_stopped_for_a_silent_metric(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an armed job on ml.g5g.16xlarge (our table lacks g5g; EC2 gives 2 GPUs) whose GPUs compute at 60%
    # each, its loss and its log silent for 3 hours (a long evaluation that logs nothing)
    training(acct, ResourceConfig={"InstanceType": "ml.g5g.16xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50})
    acct.signals.set("GPUUtilization", "job-1/algo-1", 120.0)  # type: ignore[attr-defined]
    fire(acct, ARMER)
    clock.advance(hours=3)
    # When the stall alarm fires
    result = fire(acct, STALL)
    # Then the judge sizes the host with EC2's GPU count as the idle guard does: its GPUs work, no stop
    assert result["results"][0]["code"] == "judge.veto.gpu-working"
    assert acct.sagemaker.stop_requests == []


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


# ---- a Training event handled after the guard was armed in the job's current stint ----------------------


def publishing(account: LocalAccount, name: str = "job-1") -> None:
    """The job's progress metric is published (one datapoint a minute), as GetMetricData reads it."""
    account.signals.set("train:loss", name, 1.0)  # type: ignore[attr-defined]


def hangs(account: LocalAccount, name: str = "job-1") -> None:
    """The job stops publishing its progress metric (a hung collective); its GPUs stay pinned."""
    account.signals.values.pop(("train:loss", name), None)  # type: ignore[attr-defined]


def notify(account: LocalAccount, alarm: str) -> dict[str, Any] | None:
    """CloudWatch moves the alarm to ALARM; it notifies the stopper only when its actions are on."""
    if not account.cloudwatch.alarms[alarm]["ActionsEnabled"]:
        account.cloudwatch.set_state(alarm, "ALARM")
        return None
    return fire(account, alarm)


def repaired_before_its_training_event(account: LocalAccount, clock: MovableClock) -> dict[str, Any]:
    """A job in Training, computing and logging, whose first Training event is late: the reconciler's repair
    creates its alarms a minute in. Returns the late event."""
    account.sagemaker.launch(create_request("job-1", AlgorithmSpecification=LOSS), secondary="Training")
    late_event = account.sagemaker.event("job-1")
    account.signals.set("GPUUtilization", "job-1/algo-1", 100.0)  # type: ignore[attr-defined]
    account.signals.set("CPUUtilization", "job-1/algo-1", 250.0)  # type: ignore[attr-defined]
    log_stream("job-1")
    clock.advance(minutes=1)
    account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    return late_event


def test_a_late_first_training_event_leaves_the_guard_armed_and_a_later_hang_is_stopped(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose first Training event is late: the reconciler's repair creates its alarms first
    late_event = repaired_before_its_training_event(acct, clock)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False  # nothing published yet: not armed
    # and the job publishes its loss: the armer fires and the stopper arms the stall alarm
    publishing(acct)
    clock.advance(minutes=1)
    fire(acct, ARMER)
    # When the late Training event is handled (the armer still in ALARM: it cannot notify again)
    clock.advance(minutes=2)
    acct.invoke(job_events, late_event)
    # Then the guard stays armed, as the stopper left it
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is False
    (created,) = [r for r in progress_records(acct, "job-state-change") if r.action == "create-alarm"]
    assert created.code == "progress.alarm.create" and created.evidence["armed"] is True
    # and when the job then hangs, its stall alarm notifies and the job is stopped
    hangs(acct)
    clock.advance(hours=3)
    result = notify(acct, STALL)
    assert result is not None and result["results"][0]["code"] == "progress.stop.stalled"
    assert acct.sagemaker.stop_requests == ["job-1"]


def kept_history(account: LocalAccount, name: str, spans: list[list[Any]]) -> None:
    """GetMetricData answers the job's progress metric from what it published (one datapoint a minute within
    each [start, end) of ``spans``, an open end still publishing), as CloudWatch keeps it: one value a period
    holding a published minute, none at all for a period it does not answer from that far back
    (``kept_at``); the other signals as the double answers them (their current values)."""
    signals = account.signals  # type: ignore[attr-defined]
    current = signals._answer

    def published(minute: Any) -> bool:
        return any(start <= minute and (end is None or minute < end) for start, end in spans)

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = current(params)
        for query, result in zip(params["MetricDataQueries"], out["MetricDataResults"], strict=True):
            metric = query.get("MetricStat", {}).get("Metric", {})
            if metric.get("MetricName") != "train:loss":
                continue
            seconds = int(query["MetricStat"]["Period"])
            period, at = timedelta(seconds=seconds), params["StartTime"]
            kept = kept_at(seconds, int((signals.clock() - at).total_seconds() // 60))
            stamps = []
            while kept and at < params["EndTime"]:
                if any(published(at + timedelta(minutes=m)) for m in range(seconds // 60)):
                    stamps.append(at)
                at += period
            result["Timestamps"], result["Values"] = stamps, [1.0] * len(stamps)
        return out

    account.cloudwatch._op_GetMetricData = answer  # type: ignore[method-assign]


def test_a_training_event_redriven_weeks_into_the_stint_leaves_the_guard_armed(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose first Training event is late: the reconciler's repair creates its alarms, the job
    # publishes its loss every minute and the stopper arms the guard
    spans: list[list[Any]] = []
    kept_history(acct, "job-1", spans)
    late_event = repaired_before_its_training_event(acct, clock)
    spans.append([clock(), None])
    clock.advance(minutes=1)
    fire(acct, ARMER)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    # When its Training event is handled 20 days later (redriven from the dead-letter queue), the job still
    # training and publishing (CloudWatch keeps only 5-minute datapoints from its entry by then)
    clock.advance(days=20)
    acct.invoke(job_events, late_event)
    # Then the guard stays armed, as the stopper left it
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is False
    (created,) = [r for r in progress_records(acct, "job-state-change") if r.action == "create-alarm"]
    assert created.code == "progress.alarm.create" and created.evidence["armed"] is True


def test_a_late_training_event_in_audit_mode_leaves_a_muted_stretch_muted(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in audit mode whose first Training event is late: the reconciler's repair creates its
    # alarms, the job publishes its loss and the stopper arms the guard
    spans: list[list[Any]] = []
    kept_history(audit_acct, "job-1", spans)
    late_event = repaired_before_its_training_event(audit_acct, clock)
    publishing(audit_acct)
    spans.append([clock(), None])
    clock.advance(minutes=1)
    fire(audit_acct, ARMER)
    # and the job hangs: its stall alarm fires, the judge finds a hang, the stopper records what it would stop
    # and mutes the alarm (actions off, left in ALARM: the stretch is told once)
    clock.advance(minutes=40)
    hangs(audit_acct)
    spans[0][1] = clock()
    clock.advance(hours=3)
    first = notify(audit_acct, STALL)
    assert first is not None and first["results"][0]["outcome"] == "audit-only"
    assert audit_acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
    # When the late Training event is handled, the stretch still lasting
    clock.advance(minutes=10)
    audit_acct.invoke(job_events, late_event)
    # Then the stall alarm stays muted in ALARM: it does not fire again, the stretch is recorded once
    assert audit_acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
    assert audit_acct.cloudwatch.state(STALL) == "ALARM"
    assert notify(audit_acct, STALL) is None
    assert [r.outcome.value for r in progress_records(audit_acct) if r.action == "stop"] == ["audit-only"]


def test_a_late_first_training_event_of_a_job_not_yet_publishing_leaves_the_guard_to_its_armer(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in Training for 3 minutes that has published nothing yet (its event late)
    acct.sagemaker.launch(create_request("job-1", AlgorithmSpecification=LOSS), secondary="Training")
    clock.advance(minutes=3)
    # When its Training event is handled
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    # Then the stall alarm is created disarmed: only a published metric arms it (a regex that never matches)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is True
    assert acct.cloudwatch.calls["GetMetricData"] == 1


def test_a_held_back_first_stint_event_handled_in_the_second_leaves_it_armed_and_a_hang_is_stopped(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a Spot job whose first Training event is held back; it restarts and its second stint is armed
    acct.sagemaker.launch(
        create_request(
            "job-1",
            AlgorithmSpecification=LOSS,
            EnableManagedSpotTraining=True,
            StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
        ),
        secondary="Training",
    )
    first_stint = acct.sagemaker.event("job-1", event_id="00000000-0000-0000-0000-000000000001")
    acct.signals.set("GPUUtilization", "job-1/algo-1", 100.0)  # type: ignore[attr-defined]
    acct.signals.set("CPUUtilization", "job-1/algo-1", 250.0)  # type: ignore[attr-defined]
    log_stream("job-1")
    clock.advance(minutes=20)
    acct.sagemaker.transition("job-1", "InProgress", "Interrupted")
    clock.advance(minutes=5)
    acct.sagemaker.transition("job-1", "InProgress", "Training")
    acct.invoke(job_events, acct.sagemaker.event("job-1", event_id="00000000-0000-0000-0000-000000000002"))
    publishing(acct)
    clock.advance(minutes=1)
    fire(acct, ARMER)
    # When the first stint's event is finally handled
    clock.advance(minutes=3)
    acct.invoke(job_events, first_stint)
    # Then the second stint's arming holds
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is False
    # and a hang after it is stopped
    hangs(acct)
    clock.advance(hours=3)
    result = notify(acct, STALL)
    assert result is not None and result["results"][0]["code"] == "progress.stop.stalled"
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_a_timely_training_event_and_a_timely_restart_make_the_calls_they_always_made(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a Spot job whose Training events are handled when it enters Training (as they are delivered)
    before = dict(acct.cloudwatch.calls)
    training(
        acct,
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
    )
    first = {op: n - before.get(op, 0) for op, n in acct.cloudwatch.calls.items() if n != before.get(op, 0)}
    publishing(acct)
    fire(acct, ARMER)
    clock.advance(hours=1)
    acct.sagemaker.transition("job-1", "InProgress", "Interrupted")
    clock.advance(minutes=5)
    acct.sagemaker.transition("job-1", "InProgress", "Training")
    clock.advance(seconds=40)  # delivered within the minute of the entry
    before = dict(acct.cloudwatch.calls)
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    restart = {op: n - before.get(op, 0) for op, n in acct.cloudwatch.calls.items() if n != before.get(op, 0)}
    # Then: the idle and progress alarms put, no read, no reset on the first entry; the restart resets them
    assert first == {"PutMetricAlarm": 3}
    assert restart == {"PutMetricAlarm": 3, "SetAlarmState": 3}
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False  # a new stint waits for its metric


# ---- a stall alarm that fired on metrics the policy no longer watches ----------------------------------------

TRAIN_AND_VAL = {
    **LOSS,
    "MetricDefinitions": [
        {"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
        {"Name": "val:loss", "Regex": "val_loss=([0-9.]+)"},  # written only at the end
    ],
}


def policy(account: LocalAccount, document: str) -> None:
    account.ssm.put_parameter(Name="/gov/policy", Type="String", Value=document, Overwrite=True)


def unanswered(params: dict[str, Any]) -> dict[str, Any]:
    """GetMetricData as CloudWatch answers it when it throttles."""
    raise CloudWatchError("Throttling", "Rate exceeded")


def watched(alarm: dict[str, Any]) -> set[str]:
    if "MetricName" in alarm:
        return {alarm["MetricName"]}
    return {q["MetricStat"]["Metric"]["MetricName"] for q in alarm["Metrics"] if "MetricStat" in q}


def test_a_trigger_that_fired_after_the_progress_metrics_moved_is_not_armed_on_a_metric_never_published(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job defining train:loss and val:loss, its progress guard watching train:loss with the stall judge on
    # (a 20-minute trigger), armed once the job published train:loss
    policy(acct, "{judge: {enabled: true}, progress: {metric_names: [train_loss]}}")
    training(acct, AlgorithmSpecification=TRAIN_AND_VAL)
    publishing(acct)
    clock.advance(minutes=5)
    fire(acct, ARMER)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[STALL]["EvaluationPeriods"] == 20
    # and an hour later a genuine 20-minute pause of train:loss, while the platform team turns the judge off and
    # makes val_loss the progress metric; the trigger fires before the reconciler re-plans the guard
    clock.advance(hours=1)
    hangs(acct)
    policy(acct, "{judge: {enabled: false}, progress: {metric_names: [val_loss]}}")
    clock.advance(minutes=20)
    result = fire(acct, STALL)
    # When the job publishes train:loss every minute again for the whole window
    publishing(acct)
    clock.advance(minutes=121)
    later = notify(acct, STALL)  # the stall alarm goes to ALARM if it watches val:loss (missing data breaching)
    # Then the healthy job is not stopped
    assert acct.sagemaker.stop_requests == []
    assert later is None or later["results"][0]["code"] != "progress.stop.stalled"
    # since the trigger's notification put the guard as the job's entry into Training does: both alarms watch
    # val:loss, the stall alarm disarmed, the armer on and reset (it arms the guard once val:loss is published)
    assert result["results"][0]["code"] == "progress.skip.metrics-moved"
    stall, armer = acct.cloudwatch.alarms[STALL], acct.cloudwatch.alarms[ARMER]
    assert watched(stall) == watched(armer) == {"val:loss"}
    assert stall["ActionsEnabled"] is False and armer["ActionsEnabled"] is True
    assert stall["EvaluationPeriods"] == 120  # the window (the judge is off): nothing widened
    assert acct.cloudwatch.state(ARMER) == "OK"
    (record,) = [r for r in progress_records(acct, "progress-alarm") if r.code == "progress.skip.metrics-moved"]
    assert record.outcome.value == "skipped"
    assert (record.evidence["alarm_metrics"], record.evidence["planned_metrics"]) == (["train:loss"], ["val:loss"])
    # and once the job publishes val:loss, its armer's notification arms the guard on it
    result = fire(acct, ARMER)
    assert result["results"][0]["code"] == "progress.arm.published"
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True


def test_a_late_training_event_whose_read_fails_after_the_progress_metrics_moved_keeps_no_arming(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job defining train:loss and val:loss whose progress guard, watching train:loss, the stopper armed
    # (the stall judge off)
    policy(acct, "{judge: {enabled: false}, progress: {metric_names: [train_loss]}}")
    training(acct, AlgorithmSpecification=TRAIN_AND_VAL)
    event = acct.sagemaker.event("job-1")
    publishing(acct)
    clock.advance(minutes=5)
    fire(acct, ARMER)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    # When the platform team makes val_loss the progress metric and, an hour later, the job's Training event is
    # delivered again while GetMetricData fails (whether the job published val:loss in its stint is unread)
    policy(acct, "{judge: {enabled: false}, progress: {metric_names: [val_loss]}}")
    clock.advance(hours=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(acct.cloudwatch, "_op_GetMetricData", unanswered)
        acct.invoke(job_events, event)
    # and the job publishes train:loss every minute for the whole window
    clock.advance(minutes=121)
    later = notify(acct, STALL)  # the stall alarm goes to ALARM if it watches val:loss (missing data breaching)
    # Then the healthy job is not stopped
    assert acct.sagemaker.stop_requests == []
    assert later is None or later["results"][0]["code"] != "progress.stop.stalled"
    # since the stall alarm's arming, made on train:loss, was not kept for val:loss: put disarmed, its armer on
    stall, armer = acct.cloudwatch.alarms[STALL], acct.cloudwatch.alarms[ARMER]
    assert watched(stall) == watched(armer) == {"val:loss"}
    assert stall["ActionsEnabled"] is False and armer["ActionsEnabled"] is True
    (created,) = [r for r in progress_records(acct, "job-state-change") if r.action == "create-alarm"][1:]
    assert created.evidence["arming_seen"] == "other-metrics" and created.evidence["arming_kept"] is False
