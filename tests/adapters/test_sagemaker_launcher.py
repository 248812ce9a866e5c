"""Starting clones: request validation, "already exists" as an outcome, error translation, IAM."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape, validate_create_request
from sagemaker_governance.domain.clone import CreateOutcome, InvalidCloneRequest
from sagemaker_governance.domain.errors import AdapterError
from smgov.simulation.fake_sagemaker import FakeSageMaker, SageMakerError
from tests.adapters.conftest import CallRecorder
from tests.builders import create_request


def test_create_then_create_again_is_already_exists(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    launcher = SageMakerLauncher(sagemaker_client)
    assert launcher.create_training_job(create_request("clone-r1")) is CreateOutcome.CREATED
    assert launcher.create_training_job(create_request("clone-r1")) is CreateOutcome.ALREADY_EXISTS
    assert [r["TrainingJobName"] for r in fake_sagemaker.created] == ["clone-r1"]


def test_other_errors_are_translated(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.fail_next["CreateTrainingJob"] = SageMakerError("ResourceLimitExceeded", "quota")
    with pytest.raises(AdapterError, match="ResourceLimitExceeded"):
        SageMakerLauncher(sagemaker_client).create_training_job(create_request("clone-r1"))


def test_a_validation_already_exists_message_is_recognised() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error(
            "create_training_job",
            service_error_code="ValidationException",
            service_message="Training job clone-r1 already exists",
        )
        assert (
            SageMakerLauncher(client).create_training_job(create_request("clone-r1"))
            is CreateOutcome.ALREADY_EXISTS
        )


def test_a_request_sagemaker_refuses_as_invalid_is_an_invalid_clone_request_not_a_retryable_error(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    # Given a request botocore accepts and SageMaker refuses (a VolumeKmsKeyId on a type with local storage)
    request = create_request(
        "clone-r1",
        ResourceConfig={
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": 1,
            "VolumeKmsKeyId": "alias/ml-volume",
        },
    )
    validate_create_request(request)
    # Then the launcher says the request is invalid: the same request would be refused again
    with pytest.raises(InvalidCloneRequest, match="ValidationException"):
        SageMakerLauncher(sagemaker_client).create_training_job(request)
    assert fake_sagemaker.created == []


def test_invalid_requests_are_our_error_before_any_call(
    sagemaker_client: Any, fake_sagemaker: FakeSageMaker
) -> None:
    request = create_request("clone-r1", ResourceConfig={"InstanceCount": "two"})
    with pytest.raises(InvalidCloneRequest):
        SageMakerLauncher(sagemaker_client).create_training_job(request)
    with pytest.raises(InvalidCloneRequest):
        validate_create_request(request)
    assert fake_sagemaker.calls["CreateTrainingJob"] == 0


def test_declared_iam_actions_cover_every_call(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    recorder = CallRecorder().attach(sagemaker_client)
    SageMakerLauncher(sagemaker_client).create_training_job(create_request("clone-r1"))
    assert recorder.actions <= SageMakerLauncher.IAM_ACTIONS
    # Tag-on-create is authorized as AddTags; the role is passed with iam:PassRole.
    assert {"sagemaker:AddTags", "iam:PassRole"} <= SageMakerLauncher.IAM_ACTIONS


def test_the_request_shape_is_read_from_botocore_recursively() -> None:
    shape = create_training_job_shape()
    root = shape.shapes[shape.root]
    assert {"TrainingJobName", "VpcConfig", "CheckpointConfig", "RetryStrategy"} <= set(root.members)
    rule = shape.shapes[shape.shapes[root.members["DebugRuleConfigurations"]].item or ""]
    assert "RuleEvaluationStatus" not in rule.members and "RuleParameters" in rule.members
    assert {"DebugRuleEvaluationStatuses", "TrainingJobStatus", "WarmPoolStatus"} <= shape.read_only
    assert "Tags" in root.members and "Tags" not in shape.read_only
