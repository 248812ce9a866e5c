"""The progress guard's trigger: with the stall judge on, the armed stall alarm fires after
``trigger_minutes`` (default ``judge.min_silence_minutes``) without a datapoint and the judge decides; the
alarm alone, without a judge, always means the whole window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, Notice, Verdict
from sagemaker_governance.domain.guards.progress import PROGRESS, ProgressCode, ProgressPolicy, ProgressRole
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")
LOSS = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "train_loss", "Regex": "loss=(\\S+)"}],
}


def stall_periods(policy: Policy, tags: dict[str, str] | None = None) -> int:
    j = job("job-1", tags=tags, AlgorithmSpecification=LOSS)
    plan = PROGRESS.plan(j, PROGRESS.config(policy.for_job(j)), NAMING)
    assert isinstance(plan, AlarmPlan)
    (stall,) = [r for r in plan.metric_requests if r["AlarmName"].endswith(".progress")]
    assert stall["DatapointsToAlarm"] == stall["EvaluationPeriods"]
    return int(stall["EvaluationPeriods"])


def test_the_armed_stall_alarm_is_a_20_minute_trigger_with_the_judge_on() -> None:
    assert stall_periods(Policy()) == 20
    assert stall_periods(Policy.model_validate({"progress": {"trigger_minutes": 45}})) == 45
    assert stall_periods(Policy.model_validate({"judge": {"min_silence_minutes": 30}})) == 30


@pytest.mark.parametrize(
    "document",
    [
        {"judge": {"enabled": False}},  # the alarm alone stops: it must mean the whole window
        {"judge": {"enabled": False}, "progress": {"trigger_minutes": 20}},
        {"progress": {"trigger_minutes": 500}},  # never longer than the window
    ],
)
def test_the_stall_alarm_keeps_the_window_where_it_cannot_be_a_trigger(document: dict[str, Any]) -> None:
    assert stall_periods(Policy.model_validate(document)) == 120


def test_a_declared_progress_window_is_the_alarm_too() -> None:
    tags = {"team": "nlp", "owner": "dana", "smgov:progress-minutes": "90"}
    assert stall_periods(Policy(), tags=tags) == 90


def trained(minutes: float) -> Any:
    start = str(int((NOW - timedelta(minutes=minutes)).timestamp() * 1000))
    return job(
        AlgorithmSpecification=LOSS,
        SecondaryStatus="Training",
        TrainingStartTime=start,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": start}],
    )


def judged(training_minutes: float, alarm_minutes: int | None, policy: Policy) -> Any:
    evidence = {} if alarm_minutes is None else {"evaluation_periods": alarm_minutes, "period_seconds": 60}
    notice = Notice(
        job=trained(training_minutes),
        mode=Mode.ENFORCE,
        now=NOW,
        naming=NAMING,
        alarm_changed_at=NOW,
        evidence=evidence,
    )
    return PROGRESS.judge(ProgressRole.STALL, notice, PROGRESS.config(policy))


def test_the_guard_counts_the_alarms_own_window_in_training() -> None:
    verdict = judged(30, 20, Policy())
    assert verdict.verdict is Verdict.STOP  # to the judge, which stops only a confirmed hang
    assert verdict.decision.evidence["last_datapoint_before"] == (NOW - timedelta(minutes=20)).isoformat()
    assert judged(30, None, Policy()).decision.code == ProgressCode.TOO_EARLY  # the window, as before
    assert judged(15, 20, Policy()).decision.code == ProgressCode.TOO_EARLY


def test_a_trigger_without_a_judge_is_widened_to_the_window_never_a_stop() -> None:
    verdict = judged(300, 20, Policy.model_validate({"judge": {"enabled": False}}))
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == ProgressCode.TRIGGER
    assert [r["EvaluationPeriods"] for r in verdict.rewindow] == [120]
    assert verdict.reset == ("gov-idle-job-1.progress",)
    # the same alarm at the window: a stop, as always without the judge
    assert judged(300, 120, Policy.model_validate({"judge": {"enabled": False}})).verdict is Verdict.STOP


def test_trigger_minutes_is_validated() -> None:
    with pytest.raises(ValueError, match="trigger_minutes"):
        ProgressPolicy.model_validate({"trigger_minutes": 0})


def test_a_stall_alarm_older_than_a_lengthened_trigger_is_re_planned_not_judged() -> None:
    # Given a stall alarm planned with a 20-minute trigger, and the policy's trigger lengthened to 45 since
    policy = Policy.model_validate({"progress": {"trigger_minutes": 45}})
    notice = Notice(
        job=trained(300),
        mode=Mode.ENFORCE,
        now=NOW,
        naming=NAMING,
        alarm_changed_at=NOW,
        evidence={
            "alarm": "gov-idle-job-1.progress",
            "threshold": 1.0,
            "evaluation_periods": 20,
            "datapoints_to_alarm": 20,
            "period_seconds": 60,
        },
    )
    # When it fires
    verdict = PROGRESS.judge(ProgressRole.STALL, notice, PROGRESS.config(policy))
    # Then no stop is put to the judge: the alarm is put again with the 45-minute trigger, and reset
    assert verdict.decision.code == ProgressCode.STRICTER_ALARM and not verdict.stops
    assert [r["EvaluationPeriods"] for r in verdict.rewindow] == [45]
    assert verdict.reset == ("gov-idle-job-1.progress",)
    # while an alarm on the current terms goes to the judge as before
    current = notice.evidence | {"evaluation_periods": 45, "datapoints_to_alarm": 45}
    assert PROGRESS.judge(
        ProgressRole.STALL, notice.model_copy(update={"evidence": current}), PROGRESS.config(policy)
    ).stops
