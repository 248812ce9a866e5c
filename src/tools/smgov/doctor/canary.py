"""`smgov doctor --canary`: prove the deployed service records what it should, end to end.

It launches one tiny, deliberately non-compliant CPU training job (only the ``smgov:canary`` tag, none of
the stack's ``RequiredTags``), waits (bounded) for the service's audit record about it in the job-events
log group, reports what it found, and always stops the job. The only check that writes: it is opt-in.

Cost: one ``ml.m5.large`` (the smallest general-purpose CPU training instance; the ``ResourceConfig``
``InstanceType`` values are in botocore's SageMaker model) for at most ``MaxRuntimeInSeconds`` = 600: the
job cannot run longer even if the clean-up fails. SageMaker bills training per second of instance time
(SageMaker AI pricing page), so a canary costs a few cents at most; in enforce mode the service stops it
within seconds of ``Starting``, before an instance is up. No input channel: nothing is read.

The image: any training image will do (the job never needs to train). Without one, SageMaker's own
scikit-learn training image for the stack's region (``default_image``, from the SageMaker SDK's
``image_uris`` table, which ships with the SDK: no AWS call). The execution role pulls it like any training
image; the container finds no training script and exits, and ``MaxRuntimeInSeconds`` bounds the job
either way.

Expected: a ``compliance.*.violation`` record for the canary (``done`` in enforce mode: the service
stopped it; ``audit-only`` in audit mode). A stack that requires no tags cannot be tested this cheaply: the
canary is not launched and the finding says why (do no harm).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from smgov.doctor.deployment import Deployment, error_text
from smgov.doctor.findings import Finding, Status

INSTANCE_TYPE: Final = "ml.m5.large"
MAX_RUNTIME_SECONDS: Final = 600
CANARY_TAG: Final = {"Key": "smgov:canary", "Value": "true"}
IAM_ACTIONS: Final = frozenset(
    {
        "sagemaker:CreateTrainingJob",
        "sagemaker:AddTags",  # tags given at creation are authorized as AddTags too
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "iam:PassRole",  # the canary's execution role, to SageMaker
        "logs:FilterLogEvents",
    }
)
AWS_ERRORS = (ClientError, BotoCoreError)
ENDED = frozenset({"Completed", "Failed", "Stopped"})
# SageMaker's scikit-learn training image: a CPU image in every region the SDK's table lists.
DEFAULT_IMAGE_FRAMEWORK: Final = "sklearn"
DEFAULT_IMAGE_VERSION: Final = "1.2-1"


class NoDefaultImage(ValueError):
    """No default canary image for this region (or the SageMaker SDK is not installed)."""


def default_image(region: str) -> str:
    """SageMaker's scikit-learn training image URI in ``region`` (the SDK's offline ``image_uris`` table)."""
    try:
        from sagemaker.core import image_uris
    except ImportError as exc:  # the `sdk` extra is not installed
        raise NoDefaultImage(
            "the SageMaker SDK is not installed (pip install 'sagemaker-governance[sdk]')"
        ) from exc
    try:
        uri = image_uris.retrieve(
            DEFAULT_IMAGE_FRAMEWORK, region=region, version=DEFAULT_IMAGE_VERSION, instance_type=INSTANCE_TYPE
        )
    except ValueError as exc:  # a region the SDK's table does not list
        raise NoDefaultImage(f"no SageMaker scikit-learn image is listed for {region}: {exc}") from exc
    return str(uri)


@dataclass(frozen=True)
class CanarySpec:
    role_arn: str
    image: str
    output_s3: str
    timeout_seconds: float = 600.0
    poll_seconds: float = 15.0


def canary_request(name: str, spec: CanarySpec) -> dict[str, Any]:
    """The CreateTrainingJob request: the smallest CPU instance, ten minutes at most, one tag only."""
    return {
        "TrainingJobName": name,
        "RoleArn": spec.role_arn,
        "AlgorithmSpecification": {"TrainingImage": spec.image, "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": spec.output_s3},
        "ResourceConfig": {"InstanceType": INSTANCE_TYPE, "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_SECONDS},
        "Tags": [CANARY_TAG],
    }


def canary_name(now: datetime) -> str:
    return f"smgov-canary-{now:%Y%m%d-%H%M%S}"


def run_canary(
    d: Deployment,
    spec: CanarySpec,
    *,
    now: datetime,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> list[Finding]:
    name = canary_name(now)
    required = [t.strip() for t in d.parameter("RequiredTags").split(",") if t.strip()]
    if not required:
        return [
            Finding(
                "canary",
                name,
                Status.UNKNOWN,
                "not launched: the stack requires no tags (RequiredTags), so a cheap job cannot be non-compliant",
            )
        ]
    group = d.physical("JobEventsLogGroup")
    if not group:
        return [Finding("canary", name, Status.UNKNOWN, "not launched: the stack has no JobEventsLogGroup")]
    sagemaker, logs = d.client("sagemaker"), d.client("logs")
    try:
        sagemaker.create_training_job(**canary_request(name, spec))
    except AWS_ERRORS as exc:
        return [Finding("canary", name, Status.UNKNOWN, f"not launched: CreateTrainingJob {error_text(exc)}")]
    findings: list[Finding] = []
    try:
        findings.append(
            _wait_for_record(
                logs,
                group,
                name,
                mode=d.parameter("GovernanceMode", "audit"),
                now=now,
                sleep=sleep,
                monotonic=monotonic,
                spec=spec,
            )
        )
    finally:
        findings.append(_clean_up(sagemaker, name))
    return findings


def _wait_for_record(
    logs: Any,
    group: str,
    name: str,
    *,
    mode: str,
    now: datetime,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
    spec: CanarySpec,
) -> Finding:
    started = monotonic()
    expected = "done" if mode == "enforce" else "audit-only"
    while True:
        try:
            record = _compliance_record(logs, group, name, since_ms=int(now.timestamp() * 1000) - 60_000)
        except AWS_ERRORS as exc:
            return Finding("canary", name, Status.UNKNOWN, f"cannot read {group}: {error_text(exc)}")
        waited = monotonic() - started
        if record is not None:
            code, outcome = record.get("code"), record.get("outcome")
            ok = str(code).endswith(".violation") and outcome == expected
            return Finding(
                "canary",
                name,
                Status.OK if ok else Status.FAIL,
                f"recorded {code} {outcome} after {waited:.0f}s"
                + ("" if ok else f" (expected a violation {expected} in {mode} mode)"),
            )
        if waited >= spec.timeout_seconds:
            return Finding(
                "canary",
                name,
                Status.FAIL,
                f"no compliance record for the canary in {group} after {spec.timeout_seconds:.0f}s: job events do not "
                "reach the service (see the rules, queues and dead letters findings; `smgov dlq list`)",
            )
        sleep(spec.poll_seconds)


def _compliance_record(logs: Any, group: str, name: str, *, since_ms: int) -> dict[str, Any] | None:
    """The canary's compliance decision in the job-events log group (FilterLogEvents with a JSON pattern)."""
    pattern = '{ $.audit.job_name = "' + name + '" }'
    pages = logs.get_paginator("filter_log_events").paginate(
        logGroupName=group, filterPattern=pattern, startTime=since_ms
    )
    for page in pages:
        for event in page.get("events", []):
            try:
                audit = json.loads(event.get("message", "")).get("audit")
            except (ValueError, AttributeError):
                continue
            if (
                isinstance(audit, dict)
                and audit.get("job_name") == name
                and str(audit.get("code") or "").startswith("compliance.")
            ):
                return audit
    return None


def _clean_up(sagemaker: Any, name: str) -> Finding:
    """Stop the canary unless it already ended (in enforce mode the service stopped it)."""
    try:
        status = sagemaker.describe_training_job(TrainingJobName=name).get("TrainingJobStatus")
        if status in ENDED or status == "Stopping":
            return Finding("canary", f"{name} clean-up", Status.OK, f"already {status}")
        try:
            sagemaker.stop_training_job(TrainingJobName=name)
        except ClientError:  # it may have ended (or the service stopped it) since we looked
            status = sagemaker.describe_training_job(TrainingJobName=name).get("TrainingJobStatus")
            if status in ENDED or status == "Stopping":
                return Finding("canary", f"{name} clean-up", Status.OK, f"already {status}")
            raise
    except AWS_ERRORS as exc:
        return Finding(
            "canary",
            f"{name} clean-up",
            Status.FAIL,
            f"could not stop the canary ({error_text(exc)}): stop it by hand; it ends by itself after "
            f"{MAX_RUNTIME_SECONDS} s",
        )
    return Finding("canary", f"{name} clean-up", Status.OK, "stopped by the canary")
