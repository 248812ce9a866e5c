"""Test-data builders: real-shaped jobs, with only what a test cares about spelled out."""

from __future__ import annotations

import copy
from typing import Any

from sagemaker_governance.domain.job import TrainingJob

ACCOUNT = "123456789012"


def describe(name: str = "job-1", **overrides: Any) -> dict[str, Any]:
    """A DescribeTrainingJob-shaped document (event detail shape without Tags)."""
    doc: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/{name}",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Starting",
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
        "CreationTime": "1763719200000",
        "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": "1763719201000"}],
    }
    for key, value in overrides.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = copy.deepcopy(value)
    return doc


def job(name: str = "job-1", tags: dict[str, str] | None = None, **overrides: Any) -> TrainingJob:
    tags = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"} if tags is None else tags
    return TrainingJob.model_validate({**describe(name, **overrides), "Tags": tags})


def create_request(name: str = "job-1", tags: dict[str, str] | None = None, **overrides: Any) -> dict[str, Any]:
    """A CreateTrainingJob request the SageMaker double accepts."""
    tags = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"} if tags is None else tags
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    request.update(copy.deepcopy(overrides))
    return request
