"""A resume decided long after the job ended clones nothing (pure): a dead letter redriven days later, or a
replayed event, would duplicate the relaunch its owner has most likely made by hand. The bound
(``late_after_hours`` of the ``resume`` and ``spot`` sections) counts from the moment the job could first
have been resumed: its end, or its source's end for a clone deferred while its source ran."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.clone import TAG_ATTEMPT, TAG_ROOT, TAG_SOURCE
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.resume import ResumeCode, SpotCode
from tests.resume_builders import TAGS, as_job, failed_description, resume_of, spot_description, spot_of

TRAINED = timedelta(hours=26)
CLONE_TAGS = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_SOURCE: "llm-sft-1", TAG_ATTEMPT: "1"}


def failed_at(description: dict[str, Any]) -> datetime:
    return description["SecondaryStatusTransitions"][-1]["StartTime"]  # type: ignore[no-any-return]


def resume(
    description: dict[str, Any],
    now: datetime,
    *,
    policy: ResumePolicy | None = None,
    tags: dict[str, str] | None = None,
    source: Any = None,
) -> Any:
    return resume_of(description, now, policy=policy, tags=tags, source=source)


def spot(description: dict[str, Any], now: datetime, policy: SpotPolicy | None = None) -> Any:
    return spot_of(description, now, policy=policy)


def test_a_failure_decided_ten_days_later_is_not_resumed_and_is_settled() -> None:
    # Given a job that failed transiently after 26 h of training, its event redriven from the DLQ 10 days on
    description = failed_description(trained=TRAINED)
    result = resume(description, failed_at(description) + timedelta(days=10))
    # Then nothing is cloned; the decision says when the job ended and the bound it passed
    (decision,) = result.decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.TOO_LATE
    assert result.plan is None and result.settled
    assert decision.evidence["ended_at"] == failed_at(description).isoformat()
    assert decision.evidence["late_after_hours"] == ResumePolicy().late_after_hours


def test_a_failure_decided_within_the_bound_is_resumed_as_before() -> None:
    description = failed_description(trained=TRAINED)
    policy = ResumePolicy(late_after_hours=12)
    (decision,) = resume(
        description, failed_at(description) + timedelta(hours=11, minutes=59), policy=policy
    ).decisions
    assert decision.action is Action.CLONE and decision.code == ResumeCode.CLONE
    (late,) = resume(description, failed_at(description) + timedelta(hours=12, minutes=1), policy=policy).decisions
    assert late.code == ResumeCode.TOO_LATE


def test_a_clone_deferred_while_its_source_ran_counts_from_the_sources_end() -> None:
    # Given a clone that failed 5 days ago while its (Spot) source trained on, the source stopped an hour ago
    description = failed_description("llm-sft-1-r1", trained=TRAINED)
    now = failed_at(description) + timedelta(days=5)
    ended = now - timedelta(hours=1)
    source = as_job(
        failed_description(
            "llm-sft-1",
            trained=TRAINED,
            TrainingJobStatus="Stopped",
            SecondaryStatus="MaxWaitTimeExceeded",
            TrainingEndTime=ended,
            LastModifiedTime=ended,
            SecondaryStatusTransitions=[{"Status": "MaxWaitTimeExceeded", "StartTime": ended}],
        )
    )
    # Then the clone's resume is not late: it could not be resumed before the source ended
    result = resume(description, now, tags=CLONE_TAGS, source=source)
    assert [d.code for d in result.decisions] == [ResumeCode.CLONE]
    # and a week after the source's end it is
    (late,) = resume(description, ended + timedelta(days=7), tags=CLONE_TAGS, source=source).decisions
    assert late.code == ResumeCode.TOO_LATE and late.evidence["ended_at"] == ended.isoformat()


def test_a_spot_job_that_ran_out_of_wait_time_ten_days_ago_is_not_moved() -> None:
    description = spot_description(interruptions=1, status="Stopped", secondary="MaxWaitTimeExceeded")
    ended = failed_at(description)
    assert [d.code for d in spot(description, ended + timedelta(hours=1)).decisions] == [SpotCode.CLONE_MAX_WAIT]
    result = spot(description, ended + timedelta(days=10))
    (decision,) = result.decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.TOO_LATE and result.plan is None


def test_a_spot_job_whose_end_time_is_unknown_is_not_moved() -> None:
    description = spot_description(interruptions=1, status="Stopped", secondary="MaxWaitTimeExceeded")
    description["SecondaryStatusTransitions"] = []
    (decision,) = spot(description, failed_at(spot_description(interruptions=1)) + timedelta(hours=2)).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.END_TIME_UNKNOWN


@pytest.mark.parametrize(
    ("fields", "valid"),
    [
        ({"late_after_hours": 48}, True),
        ({"late_after_hours": 3}, False),  # below an event's own delivery retries
        ({"late_after_hours": 337}, False),  # beyond the dead-letter queue's 14 days: no bound at all
        ({"late_after_hours": 24, "backoff_minutes": (0, 1440)}, False),  # the backoff alone would pass it
        ({"late_after_hours": 30, "backoff_minutes": (0, 1440)}, True),
    ],
)
def test_the_bound_stays_above_the_longest_backoff(fields: dict[str, Any], valid: bool) -> None:
    if valid:
        ResumePolicy(**fields)
    else:
        with pytest.raises(ValidationError):
            ResumePolicy(**fields)


def test_the_spot_bound_is_validated_too() -> None:
    assert SpotPolicy().late_after_hours == 48
    for bad in (3, 337):
        with pytest.raises(ValidationError):
            SpotPolicy(late_after_hours=bad)
