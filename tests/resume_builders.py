"""Builders for auto-resume and Spot fallback tests: real-shaped descriptions with training history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.domain.clone import RequestShape
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.resume import CloneContext, CloneDecision, decide_resume, decide_spot
from tests.builders import ACCOUNT, describe

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole"
TAGS = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"}


def shape() -> RequestShape:
    return create_training_job_shape()


def context(now: datetime, roles: tuple[str, ...] = ("*SageMaker*",)) -> CloneContext:
    return CloneContext(now=now, shape=shape(), role_patterns=roles)


def transitions(
    *steps: tuple[str, timedelta], start: datetime = T0, open_last: bool = False
) -> list[dict[str, Any]]:
    """Secondary status transitions: each (status, how long it lasted), back to back from ``start``."""
    out: list[dict[str, Any]] = []
    at = start
    for index, (status, length) in enumerate(steps):
        entry: dict[str, Any] = {"Status": status, "StartTime": at}
        if not (open_last and index == len(steps) - 1):
            entry["EndTime"] = at + length
        out.append(entry)
        at += length
    return out


def failed_description(
    name: str = "llm-sft-1",
    *,
    trained: timedelta = timedelta(hours=26),
    reason: str = "InternalServerError: We encountered an internal error. Please try again.",
    checkpoint: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """A DescribeTrainingJob answer (datetimes, as boto3 returns) for a job that failed after training."""
    history = transitions(
        ("Starting", timedelta(minutes=3)),
        ("Downloading", timedelta(minutes=4)),
        ("Training", trained),
        ("Failed", timedelta(0)),
    )
    fields: dict[str, Any] = {
        "TrainingJobStatus": "Failed",
        "SecondaryStatus": "Failed",
        "FailureReason": reason,
        "CreationTime": T0,
        "TrainingStartTime": history[1]["StartTime"],
        "TrainingEndTime": history[-1]["StartTime"],
        "LastModifiedTime": history[-1]["StartTime"],
        "SecondaryStatusTransitions": history,
        "RoleArn": ROLE,
    }
    if checkpoint:
        fields["CheckpointConfig"] = {
            "S3Uri": f"s3://bucket/checkpoints/{name}/",
            "LocalPath": "/opt/ml/checkpoints",
        }
    return describe(name, **{**fields, **overrides})  # describe drops keys overridden with None


def spot_description(
    name: str = "bert-spot-1",
    *,
    interruptions: int = 3,
    status: str = "InProgress",
    secondary: str = "Interrupted",
    checkpoint: bool = True,
) -> dict[str, Any]:
    steps: list[tuple[str, timedelta]] = [("Starting", timedelta(minutes=2))]
    for index in range(interruptions):
        steps += [("Training", timedelta(hours=1)), ("Interrupted", timedelta(minutes=10))]
        if index < interruptions - 1:
            steps.append(("Starting", timedelta(minutes=2)))
    if secondary != "Interrupted":
        steps.append((secondary, timedelta(0)))
    history = transitions(*steps, open_last=status == "InProgress")
    doc = describe(
        name,
        TrainingJobStatus=status,
        SecondaryStatus=secondary,
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
        CreationTime=T0,
        SecondaryStatusTransitions=history,
        RoleArn=ROLE,
    )
    if checkpoint:
        doc["CheckpointConfig"] = {"S3Uri": f"s3://bucket/checkpoints/{name}/"}
    return doc


def as_job(description: dict[str, Any], tags: dict[str, str] | None = None) -> TrainingJob:
    return TrainingJob.model_validate({**description, "Tags": TAGS if tags is None else tags})


def resume_of(
    description: dict[str, Any],
    now: datetime,
    *,
    tags: dict[str, str] | None = None,
    policy: ResumePolicy | None = None,
    mode: Mode = Mode.ENFORCE,
    roles: tuple[str, ...] = ("*SageMaker*",),
    **inputs: Any,
) -> CloneDecision:
    """Auto-resume's decision on a described job with ``tags`` (``TAGS``), as of ``now``, under ``policy`` (the
    defaults); ``inputs``: ``decide_resume``'s optional ones (``source``, ``next_clone``, ``failure``, ...)."""
    tags = TAGS if tags is None else tags
    return decide_resume(
        as_job(description, tags),
        description,
        tags,
        resume=policy or ResumePolicy(),
        default_mode=mode,
        ctx=context(now, roles),
        **inputs,
    )


def spot_of(
    description: dict[str, Any],
    now: datetime,
    *,
    tags: dict[str, str] | None = None,
    policy: SpotPolicy | None = None,
    reported: dict[str, Any] | None = None,
) -> CloneDecision:
    """The Spot fallback's decision on a described job, as ``resume_of``; ``reported``: the description the
    event carried, when it differs from the one read."""
    tags = TAGS if tags is None else tags
    return decide_spot(
        as_job(description, tags),
        description,
        tags,
        spot=policy or SpotPolicy(),
        default_mode=Mode.ENFORCE,
        ctx=context(now),
        reported=as_job(reported, tags) if reported is not None else None,
    )


def rich_description(name: str = "vision-hetero-7") -> dict[str, Any]:
    """Everything a demanding job carries, plus the read-only fields a description adds (top level and
    nested: rule evaluation statuses, timestamps, a field from a newer API version)."""
    doc = failed_description(name)
    doc.update(
        {
            "HyperParameters": {"epochs": "40", "sagemaker_program": "train.py"},
            "AlgorithmSpecification": {
                "TrainingImage": f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/train:7",
                "TrainingInputMode": "FastFile",
                "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
                "EnableSageMakerMetricsTimeSeries": True,
            },
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {
                            "S3DataType": "S3Prefix",
                            "S3Uri": "s3://data/train/",
                            "S3DataDistributionType": "ShardedByS3Key",
                            "InstanceGroupNames": ["gpu"],
                        }
                    },
                    "InputMode": "FastFile",
                }
            ],
            "OutputDataConfig": {"S3OutputPath": "s3://out/", "KmsKeyId": "alias/ml", "CompressionType": "GZIP"},
            "ResourceConfig": {
                "InstanceGroups": [
                    {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
                    {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 4},
                ],
                "VolumeSizeInGB": 500,
                "VolumeKmsKeyId": "alias/ml-volume",
                "KeepAlivePeriodInSeconds": 1800,
            },
            "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0a", "subnet-0b"]},
            "StoppingCondition": {"MaxRuntimeInSeconds": 432_000},
            "EnableNetworkIsolation": True,
            "EnableInterContainerTrafficEncryption": True,
            "EnableManagedSpotTraining": False,
            "DebugHookConfig": {
                "S3OutputPath": "s3://out/debug/",
                "CollectionConfigurations": [
                    {"CollectionName": "losses", "CollectionParameters": {"save_interval": "50"}}
                ],
            },
            "DebugRuleConfigurations": [
                {
                    "RuleConfigurationName": "LossNotDecreasing",
                    "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
                    "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"},
                    # Not part of a rule configuration: must not reach the request.
                    "RuleEvaluationStatus": "IssuesFound",
                    "LastModifiedTime": T0,
                }
            ],
            "DebugRuleEvaluationStatuses": [
                {
                    "RuleConfigurationName": "LossNotDecreasing",
                    "RuleEvaluationJobArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:processing-job/lossnotdecreasing-1",
                    "RuleEvaluationStatus": "IssuesFound",
                    "LastModifiedTime": T0,
                }
            ],
            "ProfilerConfig": {"S3OutputPath": "s3://out/profiler/", "ProfilingIntervalInMilliseconds": 500},
            "ProfilerRuleConfigurations": [
                {
                    "RuleConfigurationName": "ProfilerReport",
                    "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
                    "RuleParameters": {"rule_to_invoke": "ProfilerReport"},
                    "RuleEvaluationStatus": "InProgress",
                }
            ],
            "ProfilerRuleEvaluationStatuses": [
                {
                    "RuleConfigurationName": "ProfilerReport",
                    "RuleEvaluationStatus": "InProgress",
                    "LastModifiedTime": T0,
                }
            ],
            "ProfilingStatus": "Enabled",
            "TensorBoardOutputConfig": {"S3OutputPath": "s3://out/tb/", "LocalPath": "/opt/ml/output/tensorboard"},
            "ExperimentConfig": {"ExperimentName": "vision", "TrialName": "hetero", "RunName": "run-7"},
            "Environment": {"NCCL_DEBUG": "INFO"},
            "RetryStrategy": {"MaximumRetryAttempts": 2},
            "ModelArtifacts": {"S3ModelArtifacts": "s3://out/model.tar.gz"},
            "WarmPoolStatus": {"Status": "Available", "ResourceRetainedBillableTimeInSeconds": 10},
            "TrainingTimeInSeconds": 93_600,
            "BillableTimeInSeconds": 93_600,
            "FinalMetricDataList": [{"MetricName": "loss", "Value": 0.4, "Timestamp": T0}],
        }
    )
    return doc
