"""What the tests of the derived IAM/SCP statements share: a CreateTrainingJob request builder and the
policy document the "never denies a job the service lets run" properties judge (tests/unit/test_iam_policy.py,
and tests/cli/test_stack_policy_document.py with the document read from a stack)."""

from __future__ import annotations

from typing import Any

ACCOUNT = "123456789012"


def create_request(
    *,
    name: str = "job-1",
    tags: dict[str, str] | None = None,
    instance_type: str = "ml.g5.2xlarge",
    count: int = 1,
    runtime: int = 3600,
    groups: list[tuple[str, int]] | None = None,
) -> dict[str, Any]:
    resource: dict[str, Any] = (
        {
            "InstanceGroups": [
                {"InstanceGroupName": f"g{i}", "InstanceType": t, "InstanceCount": c}
                for i, (t, c) in enumerate(groups)
            ]
        }
        if groups
        else {"InstanceType": instance_type, "InstanceCount": count}
    )
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {**resource, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime},
        "Tags": [
            {"Key": k, "Value": v}
            for k, v in (tags if tags is not None else {"team": "nlp", "cost-center": "cc-1234"}).items()
        ],
    }


PROPERTY_POLICY: dict[str, Any] = {
    "teams": {
        "vision": {
            "rules": [
                {"id": "instance-types", "patterns": ["ml.g5.*", "ml.p[45]*"]},
                {"id": "max-runtime", "max_hours": 100},
            ]
        },
        "lab": {"rules": [{"id": "required-tags", "mode": "audit"}]},
    },
    "exemptions": [
        {
            "job_name_prefix": "bench-",
            "rules": ["instance-types"],
            "expires": "2099-01-01",
            "reason": "PLAT-1 bench",
        },
        {
            "tag": {"project": "legacy", "env": "x"},
            "rules": ["max-runtime"],
            "expires": "2099-01-01",
            "reason": "PLAT-2",
        },
        {
            "job_name_prefix": "Scale-",
            "rules": ["max-runtime", "instance-types"],
            "expires": "2099-01-01",
            "reason": "PLAT-3 scale tests",
        },
    ],
    "rules": [
        {
            "id": "required-tags",
            "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}, "env": {"values": ["dev", "prod"]}},
        }
    ],
}
