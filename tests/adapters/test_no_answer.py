"""A call that gets no answer at all (botocore's ``BotoCoreError``: a connection error, a read timeout, after
botocore's retries) is an ``AdapterError`` from every adapter the functions loop over, as a ``ClientError`` is:
a caller that carries on after a failed call (the reconciler's next job, the stall judge's "insufficient
evidence") does so whatever the failure was, instead of losing the whole run to one read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, EndpointConnectionError, ReadTimeoutError

from sagemaker_governance.adapters.cloudwatch import (
    CloudWatchAlarmArming,
    CloudWatchAlarmInventory,
    CloudWatchAlarmLifecycle,
    CloudWatchAlarmOwnership,
    CloudWatchAlarmWindows,
)
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.sagemaker import SageMakerJobInventory, SageMakerJobs
from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, StopUnanswered, Throttled
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
from sagemaker_governance.domain.notifications import Notification
from tests.builders import job

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
URL = "https://monitoring.us-east-1.amazonaws.com"
MESSAGE = Notification(
    kind="compliance",
    job_name="job-1",
    headline="Training job job-1 was stopped: it violates governance policy",
    outcome="stopped",
)


class NoAnswer:
    """A boto3 client whose every call (and every page) gets no answer."""

    def __init__(self, error: BotoCoreError) -> None:
        self.error = error

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise self.error

    def get_paginator(self, _: str) -> Any:
        return self

    def paginate(self, **_: Any) -> Any:
        raise self.error

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return self._fail


def plan() -> AlarmPlan:
    naming = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:a")
    planned = IDLE.plan(job("job-1"), IdlePolicy(), naming)
    assert isinstance(planned, AlarmPlan)
    return planned


CALLS: dict[str, Callable[[Any], Any]] = {
    "DescribeTrainingJob": lambda c: SageMakerJobs(c).describe("job-1"),
    "ListTags": lambda c: SageMakerJobs(c).list_tags("arn:aws:sagemaker:us-east-1:1:training-job/job-1"),
    "StopTrainingJob": lambda c: SageMakerJobs(c).stop("job-1"),
    "CreateTrainingJob": lambda c: SageMakerLauncher(c).create_training_job({"TrainingJobName": "job-1-r1"}),
    "PutMetricAlarm": lambda c: CloudWatchAlarmLifecycle(c).put(plan()),
    "DeleteAlarms": lambda c: CloudWatchAlarmLifecycle(c).delete(["gov-idle-job-1"]),
    "SetAlarmState": lambda c: CloudWatchAlarmLifecycle(c).reset(["gov-idle-job-1"], "test"),
    "ListTagsForResource": lambda c: CloudWatchAlarmOwnership(c, str).tags("gov-idle-job-1"),
    "DescribeAlarms (one)": lambda c: CloudWatchAlarmOwnership(c, str).current_state("gov-idle-job-1"),
    "DescribeAlarms (arming)": lambda c: CloudWatchAlarmLifecycle(c).metric_alarm("gov-idle-job-1.progress"),
    "EnableAlarmActions": lambda c: CloudWatchAlarmArming(c).enable_actions(["gov-idle-job-1"]),
    "DisableAlarmActions": lambda c: CloudWatchAlarmArming(c).disable_actions(["gov-idle-job-1"]),
    "PutMetricAlarm (widen)": lambda c: CloudWatchAlarmWindows(c).update([{"AlarmName": "gov-idle-job-1"}]),
    "DescribeAlarms (list)": lambda c: CloudWatchAlarmInventory(c).alarm_states("gov-idle-"),
    "UpdateItem (claim)": lambda c: DeliveryLedger(c, "ledger").claim("k", "owner", NOW, 60),
    "UpdateItem (release)": lambda c: DeliveryLedger(c, "ledger").release("k", "owner", NOW, []),
    "UpdateItem (complete)": lambda c: DeliveryLedger(c, "ledger").complete("k", "token", NOW),
    "Publish": lambda c: SnsNotifier(c, "arn:aws:sns:us-east-1:1:t").publish(MESSAGE),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(
    "error",
    [EndpointConnectionError(endpoint_url=URL), ReadTimeoutError(endpoint_url=URL)],
    ids=["connect", "read"],
)
def test_a_call_without_an_answer_is_an_adapter_error(call: str, error: BotoCoreError) -> None:
    # Given a client that gets no answer, when the adapter makes the call, then it raises AdapterError itself,
    # not one of the codes' own meanings (a job that does not exist, a throttled delete)
    with pytest.raises(AdapterError) as raised:
        CALLS[call](NoAnswer(error))
    assert not isinstance(raised.value, (JobNotFound, Throttled))
    assert raised.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [EndpointConnectionError(endpoint_url=URL), ReadTimeoutError(endpoint_url=URL)],
    ids=["connect", "read"],
)
def test_a_stop_without_an_answer_is_a_stop_whose_outcome_is_unknown(error: BotoCoreError) -> None:
    # Given a client that gets no answer, when the adapter stops a job, then it raises StopUnanswered: the stop
    # may have been applied (a retry that finds the job stopping takes it for its delivery's own)
    with pytest.raises(StopUnanswered) as raised:
        SageMakerJobs(NoAnswer(error)).stop("job-1")
    assert raised.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [EndpointConnectionError(endpoint_url=URL), ReadTimeoutError(endpoint_url=URL)],
    ids=["connect", "read"],
)
def test_a_job_listing_without_an_answer_is_an_incomplete_listing_that_says_why(error: BotoCoreError) -> None:
    # Given a client that gets no answer, when the reconciler's job listing reads its first page
    listing = SageMakerJobInventory(NoAnswer(error)).in_progress(datetime(2026, 1, 1, tzinfo=UTC), lambda: True)
    # Then it is no error of the run but an incomplete listing (nothing is done to a job it did not reach) that
    # names the failure
    assert (listing.jobs, listing.complete, listing.pages) == ((), False, 0)
    assert listing.error is not None and "ListTrainingJobs" in listing.error
