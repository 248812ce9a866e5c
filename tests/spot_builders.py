"""Builders for Spot fallback tests: a Spot job's lived history (stints, checkpoint writes), a new Spot job,
the fleet's Spot health ledger table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sagemaker_governance.domain.failure_evidence import CheckpointProgress
from tests.builders import describe
from tests.resume_builders import ROLE, T0

TYPE = "ml.g5.12xlarge"


def lived(
    trained: list[int],
    *,
    every: int,
    wait: int = 10,
    start: int = 3,
    download: int = 3,
    max_runtime_hours: float = 48,
    max_wait_hours: float = 96,
    instance_type: str = "ml.g5.12xlarge",
) -> tuple[dict[str, Any], tuple[datetime, ...], datetime]:
    """A Spot job interrupted after each training stint of ``trained`` minutes (checkpoints every ``every``
    minutes of each stint, capacity waits of ``wait`` minutes): its description, its checkpoint write
    times and the moment of the last interruption."""
    at, history, writes = T0, [], []

    def step(status: str, minutes: int) -> None:
        nonlocal at
        history.append({"Status": status, "StartTime": at, "EndTime": at + timedelta(minutes=minutes)})
        at += timedelta(minutes=minutes)

    for index, minutes in enumerate(trained):
        step("Starting", start if index == 0 else wait // 2)
        step("Downloading", download)
        writes += [at + timedelta(minutes=m) for m in range(every, minutes + 1, every)]
        step("Training", minutes)
        if index < len(trained) - 1:
            step("Interrupted", wait - wait // 2)
    history.append({"Status": "Interrupted", "StartTime": at})
    doc = describe(
        "bert-spot-1",
        TrainingJobStatus="InProgress",
        SecondaryStatus="Interrupted",
        EnableManagedSpotTraining=True,
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={
            "MaxRuntimeInSeconds": round(max_runtime_hours * 3600),
            "MaxWaitTimeInSeconds": round(max_wait_hours * 3600),
        },
        CreationTime=T0,
        SecondaryStatusTransitions=history,
        RoleArn=ROLE,
        CheckpointConfig={"S3Uri": "s3://ckpt/bert-spot-1/"},
    )
    return doc, tuple(writes), at


def listed(writes: tuple[datetime, ...]) -> CheckpointProgress:
    return CheckpointProgress(checked=True, written=len(writes), total=len(writes), written_at=writes)


def starting(name: str = "new-spot-1") -> dict[str, Any]:
    return describe(
        name,
        TrainingJobStatus="InProgress",
        SecondaryStatus="Starting",
        EnableManagedSpotTraining=True,
        ResourceConfig={"InstanceType": TYPE, "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 36_000, "MaxWaitTimeInSeconds": 72_000},
        CreationTime=T0,
        SecondaryStatusTransitions=[{"Status": "Starting", "StartTime": T0}],
        RoleArn=ROLE,
        CheckpointConfig={"S3Uri": f"s3://ckpt/{name}/"},
    )


def create_spot_health_table(client: Any, name: str) -> None:
    """The Spot health ledger's table with the template's key schema (instance type, signal)."""
    client.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "instance_type", "AttributeType": "S"},
            {"AttributeName": "signal", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "instance_type", "KeyType": "HASH"},
            {"AttributeName": "signal", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
