"""The reconciler's adapters: every page of ListTrainingJobs and DescribeAlarms; the best-effort mark."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sagemaker_governance.adapters.cloudwatch import CloudWatchAlarmInventory
from sagemaker_governance.adapters.sagemaker import SageMakerJobInventory, SageMakerJobMarks
from sagemaker_governance.domain.alarm_compare import alarm_definition
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
from smgov.simulation.fake_cloudwatch import FakeCloudWatch
from smgov.simulation.fake_sagemaker import FakeSageMaker, SageMakerError
from tests.builders import create_request, job


def test_in_progress_jobs_come_from_every_page(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.list_page_size = 3
    for i in range(8):
        fake_sagemaker.launch(create_request(f"job-{i}"), secondary="Training" if i % 2 else "Starting")
    fake_sagemaker.transition("job-0", "Completed", "Completed")
    jobs = SageMakerJobInventory(sagemaker_client).in_progress(datetime(2026, 1, 1, tzinfo=UTC), lambda: True).jobs
    assert sorted(j.name for j in jobs) == [f"job-{i}" for i in range(1, 8)]
    assert {j.name for j in jobs if j.in_training} == {"job-1", "job-3", "job-5", "job-7"}
    assert fake_sagemaker.calls["ListTrainingJobs"] == 3  # 7 in progress, 3 per page


def test_failed_jobs_since_a_time_come_from_every_page() -> None:
    # Given jobs that failed at 08:00 and 10:00 and one that completed at 10:00 (pages of 2)
    now = [datetime(2026, 11, 23, 8, 0, tzinfo=UTC)]
    fake = FakeSageMaker(clock=lambda: now[0])
    client = fake.attach(boto3.client("sagemaker", region_name="us-east-1"))
    fake.list_page_size = 2
    for name in ("old", "new-1", "new-2", "new-3", "done"):
        fake.launch(create_request(name), secondary="Training")
    fake.transition("old", "Failed", "Failed", failure_reason="InternalServerError")
    now[0] = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    for name in ("new-1", "new-2", "new-3"):
        fake.transition(name, "Failed", "Failed", failure_reason="InternalServerError")
    fake.transition("done", "Completed", "Completed")
    # When the reconciler asks for the jobs that failed since 09:00
    jobs = SageMakerJobInventory(client).failed_since(datetime(2026, 11, 23, 9, 0, tzinfo=UTC), lambda: True).jobs
    # Then it gets the three recent failures, from both pages, with their last modification
    assert sorted(j.name for j in jobs) == ["new-1", "new-2", "new-3"]
    assert {j.last_modified_time for j in jobs} == {now[0]}
    assert fake.calls["ListTrainingJobs"] == 2


def test_a_failed_page_ends_the_listing_with_the_pages_read_and_says_why(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    # Given 5 jobs in progress, 2 per page, and SageMaker throttling the second page past botocore's retries
    fake_sagemaker.list_page_size = 2
    for i in range(5):
        fake_sagemaker.launch(create_request(f"job-{i}"), secondary="Training")
    inventory = SageMakerJobInventory(sagemaker_client)
    first_page = inventory.in_progress(datetime(2026, 1, 1, tzinfo=UTC), lambda: True).jobs[:2]
    sagemaker_client.meta.events.register_first(
        "before-parameter-build.sagemaker.ListTrainingJobs", fail_second_page
    )
    # When the jobs in progress are listed
    listing = inventory.in_progress(datetime(2026, 1, 1, tzinfo=UTC), lambda: True)
    # Then the first page's jobs are kept, the listing is not complete, and it says why
    assert listing.jobs == first_page and not listing.complete and listing.pages == 1
    assert listing.error is not None and "ThrottlingException" in listing.error


def fail_second_page(params: dict[str, Any], **_: Any) -> None:
    if params.get("NextToken"):
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "ListTrainingJobs"
        )


def test_metric_alarm_names_come_from_every_page_under_the_prefix() -> None:
    cloudwatch = FakeCloudWatch(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    client = cloudwatch.attach(boto3.client("cloudwatch", region_name="us-east-1"))
    cloudwatch.alarm_page_size = 2
    for name in ["gov-idle-a", "gov-idle-b", "gov-idle-c", "other-d", "gov-idle-e"]:
        client.put_metric_alarm(
            AlarmName=name,
            MetricName="GPUUtilization",
            Namespace="/aws/sagemaker/TrainingJobs",
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )
    client.put_composite_alarm(AlarmName="gov-idle-f", AlarmRule='ALARM("gov-idle-a")')
    names = CloudWatchAlarmInventory(client).alarm_names("gov-idle-")
    # composites too (a lost one is repaired), nothing foreign
    assert sorted(names) == ["gov-idle-a", "gov-idle-b", "gov-idle-c", "gov-idle-e", "gov-idle-f"]
    assert cloudwatch.calls["DescribeAlarms"] == 3
    (_, request), *_ = [r for r in cloudwatch.requests if r[0] == "DescribeAlarms"]
    assert request["AlarmTypes"] == ["MetricAlarm", "CompositeAlarm"] and request["AlarmNamePrefix"] == "gov-idle-"


def test_the_inventory_asks_for_composites_because_aws_omits_them_otherwise() -> None:
    # DescribeAlarms API reference (botocore's model): without AlarmTypes "only metric alarms are returned,
    # even if composite alarms ... exist in the account". The fake answers every kind when AlarmTypes is
    # absent, so this request shape is what has to be right.
    import re

    import botocore.session

    shape: Any = botocore.session.get_session().get_service_model("cloudwatch").operation_model("DescribeAlarms")
    assert shape.input_shape is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", shape.input_shape.members["AlarmTypes"].documentation))
    assert "If you omit this parameter, only metric alarms are returned" in text
    assert set(shape.input_shape.members["AlarmTypes"].member.enum) >= {"MetricAlarm", "CompositeAlarm"}
    cloudwatch = FakeCloudWatch(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    client = cloudwatch.attach(boto3.client("cloudwatch", region_name="us-east-1"))
    CloudWatchAlarmInventory(client).alarm_names("gov-idle-")
    (_, request), *_ = [r for r in cloudwatch.requests if r[0] == "DescribeAlarms"]
    assert {"MetricAlarm", "CompositeAlarm"} <= set(request["AlarmTypes"])


def test_mark_tags_the_job(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.launch(create_request("job-1"))
    arn = fake_sagemaker.jobs["job-1"]["TrainingJobArn"]
    SageMakerJobMarks(sagemaker_client).mark(arn, "smgov:compliance-evaluated", "2026-01-01T00:00:00Z")
    assert {"Key": "smgov:compliance-evaluated", "Value": "2026-01-01T00:00:00Z"} in fake_sagemaker.tags[arn]


def test_a_failed_mark_is_our_error(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.fail_next["AddTags"] = SageMakerError("ValidationException", "too many tags")
    with pytest.raises(AdapterError, match="AddTags"):
        SageMakerJobMarks(sagemaker_client).mark("arn:aws:sagemaker:us-east-1:1:training-job/x", "k", "v")


@pytest.mark.parametrize("hosts", [1, 4])  # a plain metric alarm; metric math over the hosts
def test_a_listed_alarm_has_the_definition_of_the_request_that_put_it(hosts: int) -> None:
    # Given a guard's planned alarm put into moto's CloudWatch (its answers parsed by botocore, as AWS's are)
    naming = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")
    training = job(
        "job-1",
        SecondaryStatus="Training",
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 50},
    )
    plan = IDLE.plan(training, IdlePolicy(threshold_percent=5), naming)
    assert isinstance(plan, AlarmPlan)
    (request,) = plan.metric_requests
    with mock_aws():
        client = boto3.client("cloudwatch", region_name="us-east-1")
        client.put_metric_alarm(**request)
        # When the reconciler lists it
        (listing,) = CloudWatchAlarmInventory(client).alarm_states("gov-idle-")
    # Then its definition is the request's: the same alarm is not taken for a drifted one
    assert listing.definition is not None and listing.definition == alarm_definition(request)
