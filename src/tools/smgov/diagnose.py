"""`smgov diagnose JOB`: why a failed job would (not) be resumed, against a real account, read-only.

The deployed auto-resume on real readers (``DescribeTrainingJob``, ``ListTags``, ``DescribeLogStreams``,
``GetLogEvents``, and ``ListObjectsV2`` when a checkpoint bucket pattern is given) with ports that record
instead of acting: nothing is created, stopped, tagged or published.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from sagemaker_governance.adapters.checkpoints import CheckpointStore
from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.adapters.training_logs import TrainingLogTails
from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.service.resume import AutoResumeReaction
from smgov.explain import FixedPolicy
from smgov.offline import RecordingLauncher, RecordingNotifier


class ReadOnlyJobs:
    """The real ``DescribeTrainingJob``/``ListTags``; a stop is refused (diagnose never acts)."""

    def __init__(self, jobs: SageMakerJobs) -> None:
        self._jobs = jobs

    def describe(self, name: str) -> dict[str, Any]:
        return self._jobs.describe(name)

    def list_tags(self, arn: str) -> dict[str, str]:
        return self._jobs.list_tags(arn)

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        return self._jobs.get_job(name, tags)

    def stop(self, name: str) -> Any:  # pragma: no cover - auto-resume never stops
        raise AssertionError("smgov diagnose is read-only")


def diagnose_job(
    name: str,
    policy: Policy,
    *,
    sagemaker: Any,
    logs: Any,
    s3: Any | None,
    bucket_pattern: str,
    now: datetime,
    role_patterns: tuple[str, ...],
) -> dict[str, Any]:
    """What auto-resume decides for the job ``name`` now, with the evidence it read."""
    real = SageMakerJobs(sagemaker)
    jobs = ReadOnlyJobs(real)
    launcher = RecordingLauncher()
    reaction = AutoResumeReaction(
        jobs,
        launcher,
        RecordingNotifier(),
        FixedPolicy(policy),
        MemoryAuditSink(),
        clock=lambda: now,
        shape=partial(create_training_job_shape, sagemaker.meta.service_model),
        role_patterns=role_patterns,
        metrics=MemoryBusinessMetrics(),
        logs=TrainingLogTails(logs),
        checkpoints=CheckpointStore(s3, bucket_pattern) if s3 is not None and bucket_pattern else None,
    )
    job = jobs.get_job(name)
    decisions = reaction.react(job, Trigger(kind="diagnose"))
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "decisions": [d.explain() for d in decisions],
    }
