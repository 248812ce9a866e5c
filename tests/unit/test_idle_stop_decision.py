"""The stopper's pure decision: stop only a job that is InProgress, in Training, past its grace period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.idle import IdlePolicy, Verdict, decide_idle_stop, grace_remaining
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.pricing import estimate_savings
from tests.builders import job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def training_job(started: datetime, *, status: str = "InProgress", secondary: str = "Training") -> TrainingJob:
    millis = str(int(started.timestamp() * 1000))
    return job(
        TrainingJobStatus=status,
        SecondaryStatus=secondary,
        TrainingStartTime=millis,
        SecondaryStatusTransitions=[
            {"Status": "Starting", "StartTime": str(int((started - timedelta(minutes=5)).timestamp() * 1000))},
            {"Status": "Training", "StartTime": millis},
        ],
    )


def decide(j: TrainingJob, mode: Mode = Mode.ENFORCE, **kw: object) -> Verdict:
    changed = kw.pop("changed_at", NOW)
    return decide_idle_stop(j, IdlePolicy(**kw), mode, NOW, alarm_changed_at=changed).verdict  # type: ignore[arg-type]


def test_idle_after_grace_is_stopped() -> None:
    assert decide(training_job(NOW - timedelta(hours=2))) is Verdict.STOP


def test_within_grace_is_not_stopped() -> None:
    j = training_job(NOW - timedelta(minutes=10))
    assert decide(j) is Verdict.IN_GRACE
    assert grace_remaining(j, IdlePolicy(), NOW) == timedelta(minutes=10)


def test_spot_restart_starts_a_new_grace_period() -> None:
    # Given a job that trained for hours, was interrupted and re-entered Training 5 minutes ago
    first = NOW - timedelta(hours=3)
    j = job(
        SecondaryStatus="Training",
        SecondaryStatusTransitions=[
            {"Status": "Training", "StartTime": str(int(first.timestamp() * 1000))},
            {"Status": "Interrupted", "StartTime": str(int((NOW - timedelta(minutes=30)).timestamp() * 1000))},
            {"Status": "Training", "StartTime": str(int((NOW - timedelta(minutes=5)).timestamp() * 1000))},
        ],
    )
    assert decide(j) is Verdict.IN_GRACE


@pytest.mark.parametrize("secondary", ["Uploading", "Interrupted", "Downloading", "Restarting"])
def test_other_phases_are_never_stopped(secondary: str) -> None:
    assert decide(training_job(NOW - timedelta(hours=2), secondary=secondary)) is Verdict.NOT_TRAINING


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped", "Stopping"])
def test_a_job_that_ended_is_already_done(status: str) -> None:
    assert decide(training_job(NOW - timedelta(hours=2), status=status, secondary=status)) is Verdict.ALREADY_ENDED


def test_an_old_notification_is_not_acted_on() -> None:
    assert decide(training_job(NOW - timedelta(hours=2)), changed_at=NOW - timedelta(hours=1)) is Verdict.STALE


def test_disabled_guard_does_nothing() -> None:
    assert decide(training_job(NOW - timedelta(hours=2)), enabled=False) is Verdict.DISABLED


def test_audit_mode_decides_the_same_but_does_not_act() -> None:
    verdict = decide_idle_stop(
        training_job(NOW - timedelta(hours=2)), IdlePolicy(), Mode.AUDIT, NOW, alarm_changed_at=NOW
    )
    assert verdict.verdict is Verdict.STOP and verdict.decision.action is Action.STOP
    assert not verdict.decision.acts


def test_savings_are_remaining_runtime_times_instances_times_price() -> None:
    # 24 h allowed, 2 h elapsed, 2 x ml.g5.12xlarge at a team price of 10 USD/h -> 22 h x 2 x 10
    j = job(
        TrainingStartTime=str(int((NOW - timedelta(hours=2)).timestamp() * 1000)),
        ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
        StoppingCondition={"MaxRuntimeInSeconds": 86_400},
    )
    estimate = estimate_savings(j, {**IdlePolicy(prices={"ml.g5.12xlarge": 10.0}).price_table()}, NOW)
    assert estimate.usd == pytest.approx(440.0)
    assert estimate.evidence()["remaining_runtime_seconds"] == 22 * 3600


def test_unpriced_instance_types_are_named_not_guessed() -> None:
    j = job(ResourceConfig={"InstanceType": "ml.g6e.48xlarge", "InstanceCount": 1})
    estimate = estimate_savings(j, IdlePolicy().price_table(), NOW)
    assert estimate.usd == 0 and estimate.unpriced_types == ("ml.g6e.48xlarge",)
