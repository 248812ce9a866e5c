"""Which capabilities a template deploys, read generically from the template itself: a function that
receives a real-shaped event of the relevant state (by the rules' patterns) and is granted the action,
or a function subscribed to an SNS topic. Tests that need a capability skip with the reason otherwise."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from moto.events.models import EventPattern

from smgov.cfn_template import referenced_id
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.template import eventbridge_patterns, queue_consumers


def probe(status: str, secondary: str, **extra: Any) -> dict[str, Any]:
    fake = FakeSageMaker(lambda: datetime(2026, 12, 24, 17, 0, tzinfo=UTC))
    fake.launch(
        {
            "TrainingJobName": "probe",
            "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
            "RoleArn": "arn:aws:iam::123456789012:role/r",
            "OutputDataConfig": {"S3OutputPath": "s3://b/"},
            "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
            "EnableManagedSpotTraining": True,
            "CheckpointConfig": {"S3Uri": "s3://b/checkpoints/"},
            "Tags": [{"Key": "team", "Value": "t"}, {"Key": "cost-center", "Value": "c"}],
        }
    )
    fake.transition("probe", "InProgress", "Downloading")
    fake.transition("probe", "InProgress", "Training")
    if (status, secondary) != ("InProgress", "Training"):
        fake.transition("probe", status, secondary, **extra)
    return fake.event("probe")


def routed(template: dict[str, Any], event: dict[str, Any]) -> set[str]:
    """The functions the template's rules deliver this event to."""
    return {
        function
        for (function, _), pattern in eventbridge_patterns(template).items()
        if EventPattern.load(json.dumps(pattern)).matches_event(cast(Any, event))
    }


def granted(template: dict[str, Any], function: str) -> set[str]:
    """The IAM actions of a function's inline policy statements."""
    actions: set[str] = set()
    for policy in template["Resources"][function]["Properties"].get("Policies", []):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            action = statement.get("Action", [])
            actions.update([action] if isinstance(action, str) else action)
    return actions


def sns_subscribers(template: dict[str, Any]) -> set[str]:
    """Functions an SNS topic reaches: subscribed directly (a SAM ``SNS`` event or a ``lambda``
    subscription) or through an SQS queue a subscription fills and an event source mapping drains."""
    consumers = queue_consumers(template)
    out = set()
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            if any(e.get("Type") == "SNS" for e in resource["Properties"].get("Events", {}).values()):
                out.add(name)
        elif resource["Type"] == "AWS::SNS::Subscription":
            protocol = resource["Properties"].get("Protocol")
            endpoint = referenced_id(resource["Properties"].get("Endpoint"))
            if protocol == "lambda" and endpoint:
                out.add(endpoint)
            elif protocol == "sqs" and endpoint in consumers:
                out.add(consumers[endpoint])
    return out


def able(template: dict[str, Any], functions: set[str], action: str) -> bool:
    return any(action in granted(template, f) for f in functions)


def require_idle_guard(template: dict[str, Any]) -> None:
    if not able(template, routed(template, probe("InProgress", "Training")), "cloudwatch:PutMetricAlarm"):
        pytest.skip("no function receives Training events and may create alarms: no idle guard deployed")
    if not able(template, sns_subscribers(template), "sagemaker:StopTrainingJob"):
        pytest.skip("no SNS-subscribed function may stop training jobs: no alarm stopper deployed")


def require_auto_resume(template: dict[str, Any]) -> None:
    failed = probe("Failed", "Failed", failure_reason="InternalServerError: We encountered an internal error.")
    if not able(template, routed(template, failed), "sagemaker:CreateTrainingJob"):
        pytest.skip("no function receives Failed events and may create training jobs: no auto-resume deployed")


def require_spot_fallback(template: dict[str, Any]) -> None:
    receivers = routed(template, probe("InProgress", "Interrupted"))
    receivers |= routed(template, probe("Stopped", "MaxWaitTimeExceeded"))
    if not able(template, receivers, "sagemaker:CreateTrainingJob"):
        pytest.skip(
            "no function receives Interrupted / MaxWaitTimeExceeded events and may create training jobs: "
            "no Spot fallback deployed"
        )
