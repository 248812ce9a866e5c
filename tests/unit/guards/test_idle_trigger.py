"""The idle alarm's trigger (issue 17 item 6): with the pinned trigger on, the alarm fires after
``trigger_minutes`` (default ``judge.min_silence_minutes``) and the stall judge decides; idleness is never
stopped before the window, and an alarm whose window the judge cannot read back stays a whole window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import WHY_JUDGE_OFF, AlarmNaming, AlarmPlan, Notice, Verdict
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode, IdlePolicy, IdleRole
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")


def periods(policy: Policy, hosts: int = 2, tags: dict[str, str] | None = None) -> list[tuple[int, int]]:
    """(EvaluationPeriods, DatapointsToAlarm) of every metric alarm planned for a job under ``policy``."""
    j = job(
        "train-1",
        tags=tags,
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 100},
    )
    plan = IDLE.plan(j, IDLE.config(policy.for_job(j)), NAMING)
    assert isinstance(plan, AlarmPlan)
    return [(r["EvaluationPeriods"], r["DatapointsToAlarm"]) for r in plan.metric_requests]


def test_the_default_alarm_is_a_20_minute_trigger_for_the_judge() -> None:
    assert periods(Policy()) == [(20, 20)]
    # the judge's shortest silence is the trigger unless the team sets its own
    assert periods(Policy.model_validate({"judge": {"min_silence_minutes": 25}})) == [(25, 25)]
    assert periods(Policy.model_validate({"idle": {"trigger_minutes": 15}})) == [(15, 15)]


@pytest.mark.parametrize(
    "document",
    [
        {"judge": {"enabled": False}},  # no judge, no pinned trigger: the alarm alone must mean idle
        {"idle": {"pinned_percent": None}},  # no pinned trigger: nothing to judge before the window
        {"idle": {"evaluation_periods": 30, "datapoints_to_alarm": 25}},  # M-of-N keeps its own
        {"idle": {"trigger_minutes": 30}},  # a team that wants the window only
        {"idle": {"trigger_minutes": 45}},  # never longer than the window
        {"idle": {"evaluation_periods": 15}},  # a window shorter than the trigger
    ],
)
def test_the_alarm_keeps_the_window_where_it_cannot_be_a_trigger(document: dict[str, Any]) -> None:
    policy = Policy.model_validate(document)
    idle = IDLE.config(policy)
    assert periods(policy) == [(idle.evaluation_periods, idle.datapoints_to_alarm)]


def test_a_composite_alarm_is_never_a_trigger() -> None:
    # Its notification does not repeat its children's window: the judge could not tell a trigger from it
    assert set(periods(Policy(), hosts=16)) == {(30, 30)}


def test_a_declared_window_is_the_alarm_too() -> None:
    assert periods(Policy(), tags={"team": "nlp", "owner": "dana", "smgov:idle-minutes": "90"}) == [(90, 90)]


def test_the_plan_says_it_is_a_trigger() -> None:
    j = job("train-1")
    plan = IDLE.plan(j, IDLE.config(Policy()), NAMING)
    assert isinstance(plan, AlarmPlan)
    assert plan.evidence["trigger"].startswith("20 x 60s") and plan.evidence["window"] == "30 of 30 x 60s"


def trained(minutes: float) -> Any:
    start = str(int((NOW - timedelta(minutes=minutes)).timestamp() * 1000))
    return job(
        SecondaryStatus="Training",
        TrainingStartTime=start,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": start}],
    )


def judged(training_minutes: float, alarm_minutes: int | None, policy: Policy) -> Any:
    evidence = {} if alarm_minutes is None else {"evaluation_periods": alarm_minutes, "period_seconds": 60}
    notice = Notice(job=trained(training_minutes), mode=Mode.ENFORCE, now=NOW, naming=NAMING, evidence=evidence)
    return IDLE.judge(IdleRole.NOTIFYING, notice, IDLE.config(policy))


def test_the_guard_counts_the_alarms_own_window_in_training() -> None:
    # A 20-minute trigger 25 minutes into Training goes to the judge (which never stops idleness before 30)
    assert judged(25, 20, Policy()).verdict is Verdict.STOP
    # without the notification's window: the guard's window, as before
    assert judged(25, None, Policy()).decision.code == IdleCode.TOO_EARLY
    # a trigger that counted minutes from before Training: too early, reset
    verdict = judged(21, 25, Policy())
    assert verdict.decision.code == IdleCode.TOO_EARLY and verdict.reset


def test_a_trigger_without_a_judge_is_widened_to_the_window_never_a_stop() -> None:
    # Given a trigger alarm created while the judge was on, and a policy that switched the judge off since
    verdict = judged(45, 20, Policy.model_validate({"judge": {"enabled": False}}))
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == IdleCode.TRIGGER
    assert [r["EvaluationPeriods"] for r in verdict.rewindow] == [30] and verdict.reset == ("gov-idle-job-1",)
    assert all(WHY_JUDGE_OFF in r["AlarmDescription"] for r in verdict.rewindow)
    # the same alarm at the window is judged as always: a stop
    assert judged(45, 30, Policy.model_validate({"judge": {"enabled": False}})).verdict is Verdict.STOP


def test_trigger_minutes_is_validated() -> None:
    with pytest.raises(ValueError, match="trigger_minutes"):
        IdlePolicy.model_validate({"trigger_minutes": 0})
