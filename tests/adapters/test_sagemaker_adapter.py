from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ParamValidationError
from botocore.stub import Stubber

from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, StopOutcome
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.adapters.conftest import CallRecorder
from tests.builders import create_request


def test_get_job_reads_every_page_of_tags(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    # Given a job with 120 tags (three pages of ListTags)
    tags = {f"k{i:03d}": f"v{i}" for i in range(120)}
    fake_sagemaker.launch(create_request("many-tags", tags=tags))
    # When the adapter reads it
    job = SageMakerJobs(sagemaker_client).get_job("many-tags")
    # Then every tag is there
    assert job.tags == tags
    assert fake_sagemaker.calls["ListTags"] == 3


def test_stop_in_progress_job(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.launch(create_request("running"))
    assert SageMakerJobs(sagemaker_client).stop("running") is StopOutcome.STOPPED
    assert fake_sagemaker.jobs["running"]["TrainingJobStatus"] == "Stopping"


def test_stopping_an_ended_job_is_success(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.launch(create_request("done"))
    fake_sagemaker.transition("done", "Completed", "Completed")
    assert SageMakerJobs(sagemaker_client).stop("done") is StopOutcome.ALREADY_ENDED


def test_unknown_job_is_translated(sagemaker_client: Any) -> None:
    with pytest.raises(JobNotFound):
        SageMakerJobs(sagemaker_client).describe("nope")


def test_throttling_is_translated_to_our_error() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_training_job", service_error_code="ThrottlingException", http_status_code=400
        )
        with pytest.raises(AdapterError):
            SageMakerJobs(client).describe("job-1")


def test_botocore_still_validates_requests_behind_the_double(sagemaker_client: Any) -> None:
    with pytest.raises(ParamValidationError):
        sagemaker_client.stop_training_job(TrainingJobName=123)


def test_declared_iam_actions_cover_every_call(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    recorder = CallRecorder().attach(sagemaker_client)
    fake_sagemaker.launch(create_request("j"))
    adapter = SageMakerJobs(sagemaker_client)
    adapter.get_job("j")
    adapter.stop("j")
    adapter.stop("j")
    assert recorder.actions <= SageMakerJobs.IAM_ACTIONS
    assert recorder.actions == SageMakerJobs.IAM_ACTIONS
