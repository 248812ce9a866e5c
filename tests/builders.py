"""Test-data builders: real-shaped jobs, with only what a test cares about spelled out."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from sagemaker_governance.domain.job import TrainingJob
from smgov.simulation.harness import LocalAccount
from smgov.simulation.messages import lambda_failure_record
from smgov.simulation.scenario import Scenario
from tests.conftest import load_event

ACCOUNT = "123456789012"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:gov-JobEventsFunction-abc"


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
        "EnableManagedSpotTraining": False,  # DescribeTrainingJob always says (an event may not: None drops it)
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


def launch_from_sample(account: LocalAccount, sample: str) -> dict[str, Any]:
    """Register the sample's job with the double (so re-reads see it) and return the sample event."""
    event = load_event(sample)
    detail = copy.deepcopy(event["detail"])
    tags = detail.pop("Tags")
    pairs = tags.items() if isinstance(tags, dict) else [(t["Key"], t["Value"]) for t in tags]
    request = {
        k: detail[k]
        for k in (
            "TrainingJobName",
            "AlgorithmSpecification",
            "RoleArn",
            "OutputDataConfig",
            "ResourceConfig",
            "StoppingCondition",
        )
    }
    request["Tags"] = [{"Key": k, "Value": v} for k, v in pairs]
    for optional in ("CheckpointConfig", "EnableManagedSpotTraining"):
        if optional in detail:
            request[optional] = detail[optional]
    account.sagemaker.launch(_without_nulls(request))  # an event's nulls are "not said", never in a request
    return event


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def lambda_failure_message() -> dict[str, object]:
    """An SQS message on the on-failure destination: Lambda gave up on the malformed sample event."""
    body = lambda_failure_record(
        load_event("malformed-missing-job-name.json"),
        function_arn=f"{FUNCTION}:$LATEST",
        error_type="ValidationError",
        error_message="1 validation error for TrainingJobStateChange",
        request_id="r-1",
        timestamp=datetime(2026, 11, 21, 10, 0, tzinfo=UTC),
    )
    return {"MessageId": "m-1", "ReceiptHandle": "h-1", "Body": json.dumps(body)}


# ---- simulator scenarios -------------------------------------------------------------------------

SCENARIO_TAGS = {"team": "t", "cost-center": "c", "owner": "o"}


def sim_scenario(*jobs: dict[str, Any], **fields: Any) -> Scenario:
    """A simulator scenario of ``jobs`` in enforce mode (``fields``: any other scenario field)."""
    return Scenario.model_validate(
        {"name": "test", "parameters": {"GovernanceMode": "enforce"}, "jobs": jobs, **fields}
    )


def sim_job(name: str, *, instance_count: int = 1, **fields: Any) -> dict[str, Any]:
    """A tagged, compliant 3-hour GPU job of a scenario (``fields`` override any of its keys)."""
    base: dict[str, Any] = {
        "name": name,
        "instance_type": "ml.g5.12xlarge",
        "instance_count": instance_count,
        "price_per_hour": 10,
        "tags": SCENARIO_TAGS,
        "script": {"train_hours": 3},
    }
    base.update(fields)
    return base
