"""Reads that never raise are counted when they fail (``EvidenceReadErrors`` by kind), so that a service
gone blind (every judgement "insufficient evidence") pages someone instead of passing unseen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber

from sagemaker_governance.adapters.checkpoints import CheckpointStore
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.read_failures import ReadFailure, classify
from sagemaker_governance.adapters.training_logs import LogsUnavailable, TrainingLogs, TrainingLogTails
from sagemaker_governance.business_metrics import BusinessMetric, MemoryBusinessMetrics
from sagemaker_governance.domain.instances import Accelerator
from sagemaker_governance.domain.stall_judge import MetricRead

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def offline(service: str) -> Any:
    return boto3.client(service, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")  # type: ignore[call-overload]


def client_error(code: str, status: int = 400) -> ClientError:
    response: Any = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "Op")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (client_error("AccessDenied", 403), ReadFailure.DENIED),  # CloudWatch, S3
        (client_error("AccessDeniedException"), ReadFailure.DENIED),  # CloudWatch Logs
        (client_error("UnauthorizedOperation", 403), ReadFailure.DENIED),  # EC2
        (client_error("ThrottlingException"), ReadFailure.THROTTLED),
        (client_error("Throttling"), ReadFailure.THROTTLED),
        (client_error("ValidationError"), ReadFailure.REFUSED),  # a request AWS does not accept
        (client_error("InvalidParameterException"), ReadFailure.REFUSED),
        (client_error("InternalFailure", 500), ReadFailure.UNAVAILABLE),
        (client_error("ServiceUnavailableException", 503), ReadFailure.UNAVAILABLE),
        (EndpointConnectionError(endpoint_url="https://logs.us-east-1.amazonaws.com"), ReadFailure.UNAVAILABLE),
        (client_error("ResourceNotFoundException"), None),  # no log group: a fact, not our failure
        (client_error("NoSuchBucket", 404), None),
    ],
)
def test_a_failure_is_classified_by_what_it_says_about_the_service(
    error: Exception, kind: ReadFailure | None
) -> None:
    assert classify(error) == kind


def counted(metrics: MemoryBusinessMetrics) -> list[str]:
    return [e.dimensions["kind"] for e in metrics.of(BusinessMetric.EVIDENCE_READ_ERRORS)]


def test_a_denied_metric_read_is_unread_evidence_and_counted() -> None:
    client = offline("cloudwatch")
    metrics = MemoryBusinessMetrics()
    stubber = Stubber(client)
    stubber.add_client_error("get_metric_data", "AccessDenied", http_status_code=403)
    query = MetricRead(id="g0", metric="GPUUtilization", dimensions=(("Host", "job-1/algo-1"),), stat="Average")
    with stubber:
        result = CloudWatchMetricData(client, metrics).read([query], NOW - timedelta(minutes=30), NOW)
    assert result.values == {"g0": None} and "AccessDenied" in result.errors[0]
    assert counted(metrics) == ["denied"]


def test_denied_log_reads_raise_for_the_judge_and_are_counted() -> None:
    client = offline("logs")
    metrics = MemoryBusinessMetrics()
    stubber = Stubber(client)
    stubber.add_client_error("describe_log_streams", "AccessDeniedException")
    stubber.add_client_error("filter_log_events", "ThrottlingException")
    reader = TrainingLogs(client, metrics)
    with stubber:
        with pytest.raises(LogsUnavailable, match="AccessDeniedException"):
            reader.activity("job-1", NOW - timedelta(minutes=30), NOW)
        with pytest.raises(LogsUnavailable, match="ThrottlingException"):
            reader.rhythm("job-1", NOW - timedelta(minutes=30), NOW)
    assert counted(metrics) == ["denied", "throttled"]


def test_a_failed_jobs_log_tails_count_a_denial_but_not_a_missing_log_group() -> None:
    client = offline("logs")
    metrics = MemoryBusinessMetrics()
    stubber = Stubber(client)
    stubber.add_client_error("describe_log_streams", "ResourceNotFoundException")
    stubber.add_client_error("describe_log_streams", "AccessDeniedException")
    tails = TrainingLogTails(client, metrics=metrics)
    with stubber:
        missing = tails.tails("job-1", lines=10, hosts=2)
        denied = tails.tails("job-1", lines=10, hosts=2)
    assert not missing.logs_read and not denied.logs_read
    assert counted(metrics) == ["denied"]


def test_a_denied_checkpoint_listing_is_unknown_progress_and_counted() -> None:
    client = offline("s3")
    metrics = MemoryBusinessMetrics()
    stubber = Stubber(client)
    stubber.add_client_error("list_objects_v2", "AccessDenied", http_status_code=403)
    with stubber:
        progress = CheckpointStore(client, "ckpt-*", metrics).progress("s3://ckpt-a/run/", NOW)
    assert not progress.checked
    assert counted(metrics) == ["denied"]


def test_an_instance_type_ec2_refuses_to_describe_is_counted_one_it_does_not_know_is_not() -> None:
    ec2 = offline("ec2")
    metrics = MemoryBusinessMetrics()
    stubber = Stubber(ec2)
    stubber.add_client_error("describe_instance_types", "InvalidInstanceType")
    stubber.add_client_error("describe_instance_types", "UnauthorizedOperation", http_status_code=403)
    catalog = Ec2InstanceCatalog(lambda: ec2, metrics)
    with stubber:
        unknown = catalog.facts("ml.g9.12xlarge")
        denied = catalog.facts("ml.g9.48xlarge")
    assert unknown.accelerator is Accelerator.UNKNOWN and denied.accelerator is Accelerator.UNKNOWN
    assert "UnauthorizedOperation" in denied.note
    assert counted(metrics) == ["denied"]


def test_without_a_metrics_port_a_failure_is_still_reported_in_the_evidence() -> None:
    # Tools (smgov diagnose) build readers without the functions' metrics: nothing is emitted, nothing lost
    client = offline("logs")
    stubber = Stubber(client)
    stubber.add_client_error("describe_log_streams", "AccessDeniedException")
    with stubber, pytest.raises(LogsUnavailable, match="AccessDeniedException"):
        TrainingLogs(client).activity("job-1", NOW - timedelta(minutes=30), NOW)
