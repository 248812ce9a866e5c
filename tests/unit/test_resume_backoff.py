"""Auto-resume backs off between attempts (pure): the attempt number picks a delay counted from the failure;
before it has elapsed the decision is ``resume.defer.backoff`` with the time it may be resumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.clone import (
    LATER_MARKS,
    MAX_TAGS,
    TAG_ATTEMPT,
    TAG_RESUME_AFTER,
    TAG_ROOT,
    TAG_SOURCE,
)
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.recovery_policy import ResumePolicy
from sagemaker_governance.domain.resume import (
    DeferredResume,
    ResumeCode,
    failure_time,
    resume_after_tag,
)
from tests.resume_builders import T0, TAGS, as_job, failed_description, resume_of

TRAINED = timedelta(hours=26)
FAILED_AT = T0 + timedelta(minutes=7) + TRAINED  # Starting 3 min + Downloading 4 min + Training
CLONE_1 = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_SOURCE: "llm-sft-1", TAG_ATTEMPT: "1"}


def decide(
    now: datetime, tags: dict[str, str] | None = None, policy: ResumePolicy | None = None, **overrides: Any
) -> Any:
    name = "llm-sft-1-r1" if tags is not None else "llm-sft-1"
    return resume_of(failed_description(name, trained=TRAINED, **overrides), now, tags=tags, policy=policy)


def test_the_attempt_number_picks_the_delay_and_the_last_one_repeats() -> None:
    policy = ResumePolicy(backoff_minutes=(0, 15, 60))
    assert [policy.backoff_for(attempt) for attempt in (1, 2, 3, 4, 9)] == [0, 15, 60, 60, 60]


@pytest.mark.parametrize("bad", [(), (-1,), (0, 1441)])
def test_a_backoff_out_of_range_is_rejected(bad: tuple[int, ...]) -> None:
    with pytest.raises(ValidationError):
        ResumePolicy(backoff_minutes=bad)


@pytest.mark.parametrize("bad", [-1, 61])
def test_a_logs_settle_period_out_of_range_is_rejected(bad: int) -> None:
    with pytest.raises(ValidationError):
        ResumePolicy(logs_settle_minutes=bad)


def test_late_after_hours_must_leave_room_for_the_logs_settle_period_too() -> None:
    # Given a policy that resumes at once but waits an hour for a failure's last log lines
    ResumePolicy(backoff_minutes=(0,), logs_settle_minutes=60, late_after_hours=5)
    with pytest.raises(ValidationError):
        ResumePolicy(backoff_minutes=(0,), logs_settle_minutes=60, late_after_hours=4.5)


def test_the_first_clone_does_not_wait_by_default() -> None:
    (decision,) = decide(FAILED_AT + timedelta(minutes=1)).decisions
    assert decision.action is Action.CLONE and decision.code == ResumeCode.CLONE


def test_a_second_attempt_within_its_backoff_is_deferred_until_the_failure_plus_the_delay() -> None:
    # Given the first clone failed 5 minutes ago and the second attempt waits 15 minutes
    result = decide(FAILED_AT + timedelta(minutes=5), CLONE_1)
    (decision,) = result.decisions
    # Then nothing is cloned now; the decision says when, and names the clone the reconciler will make
    assert decision.action is Action.NONE and decision.code == ResumeCode.DEFER_BACKOFF
    assert result.plan is None and result.resume_after == FAILED_AT + timedelta(minutes=15)
    assert decision.evidence["backoff_minutes"] == 15
    assert decision.evidence["resume_after"] == (FAILED_AT + timedelta(minutes=15)).isoformat()
    assert "llm-sft-1-r2" in decision.reason


def test_once_the_backoff_has_elapsed_the_same_job_is_cloned() -> None:
    result = decide(FAILED_AT + timedelta(minutes=15), CLONE_1)
    (decision,) = result.decisions
    assert decision.code == ResumeCode.CLONE and result.plan is not None
    assert result.plan.name == "llm-sft-1-r2" and decision.evidence["backoff_minutes"] == 15


def test_a_job_that_would_not_be_resumed_is_not_deferred() -> None:
    # Given the budget is spent: the skip wins over the backoff (nothing for the reconciler to do)
    result = decide(FAILED_AT + timedelta(minutes=5), CLONE_1, ResumePolicy(max_attempts=1))
    assert result.decisions[0].code == ResumeCode.BUDGET_SPENT and result.resume_after is None


def test_an_unreadable_failure_time_is_not_guessed() -> None:
    # Given no Failed transition, no TrainingEndTime and no LastModifiedTime
    history = [{"Status": "Training", "StartTime": T0}]
    result = decide(
        FAILED_AT, CLONE_1, SecondaryStatusTransitions=history, TrainingEndTime=None, LastModifiedTime=None
    )
    (decision,) = result.decisions
    assert decision.code == ResumeCode.FAILURE_TIME_UNKNOWN and decision.action is Action.NONE


def test_the_failure_time_falls_back_to_the_end_then_the_last_modification() -> None:
    ended = T0 + timedelta(hours=2)
    job = as_job(failed_description(SecondaryStatusTransitions=[], TrainingEndTime=ended, LastModifiedTime=T0))
    assert failure_time(job) == ended
    job = as_job(failed_description(SecondaryStatusTransitions=[], TrainingEndTime=None, LastModifiedTime=T0))
    assert failure_time(job) == T0


def test_the_deferral_tag_round_trips_and_names_the_next_clone() -> None:
    due = datetime(2026, 11, 23, 8, 15, 30, tzinfo=UTC)
    value = resume_after_tag(due)
    assert value == "2026-11-23T08:15:30Z"
    deferred = DeferredResume.of("llm-sft-1-r1", {**CLONE_1, TAG_RESUME_AFTER: value})
    assert deferred == DeferredResume(due=due, clone="llm-sft-1-r2")


@pytest.mark.parametrize(
    "tags",
    [
        {},
        {TAG_RESUME_AFTER: ""},
        {TAG_RESUME_AFTER: "tomorrow"},
        {TAG_RESUME_AFTER: "2026-11-23T08:15:30Z", TAG_ROOT: "llm-sft-1"},  # lineage incomplete
    ],
)
def test_a_missing_or_untrustworthy_deferral_tag_is_no_deferral(tags: dict[str, str]) -> None:
    assert DeferredResume.of("llm-sft-1-r1", tags) is None


def test_a_job_whose_tags_leave_its_clone_no_room_is_refused_with_its_own_code_before_any_deferral() -> None:
    # Given a failed clone (its next attempt would wait 15 min) whose owner's tags leave no room in the next
    # clone for the lineage tags and the marks governance writes later (SageMaker holds 50 tags per resource)
    owners = {f"cost-{i}": "v" for i in range(MAX_TAGS - 4 - len(LATER_MARKS) + 1 - len(TAGS))}
    tags = {**CLONE_1, **owners}
    # When its resume is decided within the backoff
    result = decide(FAILED_AT + timedelta(minutes=1), tags)
    # Then no clone and no deferral (nothing is tagged): the code says why, the evidence how many tags
    (decision,) = result.decisions
    assert decision.code == ResumeCode.TOO_MANY_TAGS and decision.action is Action.NONE
    assert result.resume_after is None and result.plan is None
    assert decision.evidence["tags"] == len(tags)
