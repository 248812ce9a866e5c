"""`smgov diagnose JOB`: the deployed auto-resume on real readers (moto Logs/S3, the SageMaker double), read-only."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sagemaker_governance.adapters.training_logs import TRAINING_LOG_GROUP
from sagemaker_governance.domain.policy import Policy
from smgov.diagnose import diagnose_job
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.adapters.conftest import CallRecorder
from tests.builders import create_request

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
ALGORITHM_ERROR = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"


class Clock:
    now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def world() -> Iterator[tuple[FakeSageMaker, Clock, Any, Any]]:
    clock = Clock()
    with mock_aws():
        fake = FakeSageMaker(clock=clock)
        sagemaker = fake.attach(boto3.client("sagemaker", region_name="us-east-1"))
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=TRAINING_LOG_GROUP)
        yield fake, clock, sagemaker, logs


def failed_job(fake: FakeSageMaker, clock: Clock, name: str) -> None:
    request = create_request(name)
    request["CheckpointConfig"] = {"S3Uri": f"s3://ckpt/{name}/"}
    fake.launch(request)
    clock.now += timedelta(minutes=5)
    fake.transition(name, "InProgress", "Training")
    clock.now += timedelta(hours=30)
    fake.transition(name, "Failed", "Failed", failure_reason=ALGORITHM_ERROR)


def test_diagnose_reads_the_hosts_logs_and_acts_on_nothing(world: tuple[FakeSageMaker, Clock, Any, Any]) -> None:
    # Given a job that failed as AlgorithmError and whose algo-2 stream shows a GPU fault
    fake, clock, sagemaker, logs = world
    failed_job(fake, clock, "llm-pretrain-1")
    stamp = int(clock.now.timestamp() * 1000)
    for host, line in (
        ("algo-1", "step 10"),
        ("algo-2", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    ):
        stream = f"llm-pretrain-1/{host}-1700000000"
        logs.create_log_stream(logGroupName=TRAINING_LOG_GROUP, logStreamName=stream)
        logs.put_log_events(
            logGroupName=TRAINING_LOG_GROUP,
            logStreamName=stream,
            logEvents=[{"timestamp": stamp, "message": line}],
        )
    recorder = CallRecorder().attach(logs)
    sm_recorder = CallRecorder().attach(sagemaker)
    # When it is diagnosed under an enforcing policy
    result = diagnose_job(
        "llm-pretrain-1",
        Policy.model_validate({"mode": "enforce"}),
        sagemaker=sagemaker,
        logs=logs,
        s3=None,
        bucket_pattern="",
        now=clock.now,
        role_patterns=("*SageMaker*",),
    )
    # Then the decision is a clone for a hardware fault on algo-2, and nothing was created
    (decision,) = result["decisions"]
    assert decision["code"] == "resume.clone.transient"
    assert decision["evidence"]["diagnosis"]["host"] == "algo-2"
    assert fake.created == []
    assert sm_recorder.actions <= {"sagemaker:DescribeTrainingJob", "sagemaker:ListTags"}
    assert recorder.actions <= {"logs:DescribeLogStreams", "logs:GetLogEvents"}


def test_diagnose_without_logs_says_it_decided_from_the_failure_reason(
    world: tuple[FakeSageMaker, Clock, Any, Any],
) -> None:
    fake, clock, sagemaker, logs = world
    failed_job(fake, clock, "llm-pretrain-2")
    result = diagnose_job(
        "llm-pretrain-2",
        Policy(),
        sagemaker=sagemaker,
        logs=logs,
        s3=None,
        bucket_pattern="",
        now=clock.now,
        role_patterns=("*SageMaker*",),
    )
    (decision,) = result["decisions"]
    assert decision["code"] == "resume.skip.unknown"
    assert decision["evidence"]["diagnosis"]["basis"] == "failure-reason"
