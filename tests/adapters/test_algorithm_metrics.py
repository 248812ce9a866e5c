"""Clones of jobs on SageMaker's own algorithms. DescribeTrainingJob of such a job lists the algorithm's
MetricDefinitions although its owner gave none, and CreateTrainingJob refuses any: ValidationException "You
can't override the metric definitions for Amazon SageMaker algorithms. Please retry the request without
specifying metric definitions." (the message awslabs/mlspace catches on CreateTrainingJob, retrying without
them). The launcher retries once without them on that refusal alone; a job on an algorithm resource
(AlgorithmName: the resource defines its metrics) is planned without them."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.domain.clone import CreateOutcome, InvalidCloneRequest, ResumeReason, plan_clone
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.builders import create_request
from tests.resume_builders import failed_description

XGBOOST = "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"  # SageMaker's registry account
KMEANS = "382416733822.dkr.ecr.us-east-1.amazonaws.com/kmeans:1"
ITS_OWN = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"  # the owner's copy, same name
DEFINITIONS = [
    {"Name": "validation:rmse", "Regex": ".*\\[[0-9]+\\].*#011validation-rmse:([-+]?[0-9]*\\.?[0-9]+).*"}
]


def algorithm(image: str, definitions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"TrainingImage": image, "TrainingInputMode": "File"}
    if definitions is not None:
        spec["MetricDefinitions"] = definitions
    return spec


def clone_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The planned clone of a failed job whose description has this AlgorithmSpecification."""
    description = failed_description(AlgorithmSpecification=spec)
    return plan_clone(description, {}, create_training_job_shape(), reason=ResumeReason.FAILED).request


@pytest.mark.parametrize("image", [XGBOOST, KMEANS])
def test_the_double_refuses_metric_definitions_on_a_sagemaker_algorithm_image(
    image: str, fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    request = create_request("algo-1", AlgorithmSpecification=algorithm(image, DEFINITIONS))
    with pytest.raises(ClientError) as refused:
        sagemaker_client.create_training_job(**request)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert fake_sagemaker.jobs == {}


def test_the_double_accepts_them_on_another_image(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    request = create_request("own-1", AlgorithmSpecification=algorithm(ITS_OWN, DEFINITIONS))
    assert SageMakerLauncher(sagemaker_client).create_training_job(request) is CreateOutcome.CREATED
    assert fake_sagemaker.jobs["own-1"]["AlgorithmSpecification"]["MetricDefinitions"] == DEFINITIONS


def test_the_clone_of_a_builtin_algorithm_job_is_created_without_the_algorithm_s_metric_definitions(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    # Given the clone of a failed XGBoost job, its description listing the algorithm's metric definitions
    request = clone_of(algorithm(XGBOOST, DEFINITIONS))
    # When it is created
    outcome = SageMakerLauncher(sagemaker_client).create_training_job(request)
    # Then it is, once, without them (SageMaker's algorithm defines its own), after one refused request
    assert outcome is CreateOutcome.CREATED
    assert [r["TrainingJobName"] for r in fake_sagemaker.created] == [request["TrainingJobName"]]
    assert "MetricDefinitions" not in fake_sagemaker.created[0]["AlgorithmSpecification"]
    assert fake_sagemaker.calls["CreateTrainingJob"] == 2


def test_a_clone_of_a_job_on_its_own_image_keeps_its_metric_definitions(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    request = clone_of(algorithm(ITS_OWN, DEFINITIONS))
    assert SageMakerLauncher(sagemaker_client).create_training_job(request) is CreateOutcome.CREATED
    assert fake_sagemaker.created[0]["AlgorithmSpecification"]["MetricDefinitions"] == DEFINITIONS
    assert fake_sagemaker.calls["CreateTrainingJob"] == 1


def test_a_clone_of_a_job_on_an_algorithm_resource_is_planned_without_its_metric_definitions() -> None:
    spec = {
        "AlgorithmName": "arn:aws:sagemaker:us-east-1:123456789012:algorithm/my-algo",
        "TrainingInputMode": "File",
    }
    request = clone_of({**spec, "MetricDefinitions": DEFINITIONS})
    assert request["AlgorithmSpecification"] == spec


def test_any_other_refusal_is_not_retried(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    # Given a SageMaker algorithm job's clone refused for another reason
    request = clone_of(algorithm(XGBOOST, DEFINITIONS))
    request["ResourceConfig"] = {
        **request["ResourceConfig"],
        "InstanceType": "ml.p3dn.24xlarge",
        "VolumeKmsKeyId": "k",
    }
    # Then the refusal stands: one request, not clonable
    with pytest.raises(InvalidCloneRequest):
        SageMakerLauncher(sagemaker_client).create_training_job(
            {**request, "AlgorithmSpecification": algorithm(ITS_OWN)}
        )
    assert fake_sagemaker.calls["CreateTrainingJob"] == 1 and fake_sagemaker.jobs == {}
