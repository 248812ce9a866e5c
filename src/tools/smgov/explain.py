"""`smgov explain`: run the real job-events service on one event with offline ports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.events import TrainingJobStateChange
from sagemaker_governance.service.compliance import ComplianceService
from sagemaker_governance.service.idle_alarms import IdleAlarmsReaction
from sagemaker_governance.service.job_events import JobEventsService, Reaction
from sagemaker_governance.service.progress_alarms import ProgressAlarmsReaction
from sagemaker_governance.service.resume import AutoResumeReaction, SpotFallbackReaction
from sagemaker_governance.settings import Settings
from smgov.offline import OfflineJobs, RecordingAlarms, RecordingLauncher, RecordingNotifier


class FixedPolicy:
    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def current(self) -> Policy:
        return self._policy


def explain_event(
    raw_event: dict[str, Any],
    policy: Policy,
    *,
    now: datetime,
    describe: dict[str, Any] | None = None,
    clone_role_patterns: tuple[str, ...] | None = None,
    naming: AlarmNaming | None = None,
) -> dict[str, Any]:
    event = TrainingJobStateChange.model_validate(raw_event)
    job = event.detail
    if clone_role_patterns is None:  # the deployed default, or CLONE_PASS_ROLE_PATTERN when set
        clone_role_patterns = (Settings.from_env().clone_role_pattern,)
    # The event decides what runs (as in the deployed function); `describe` is what a re-read would see.
    jobs = OfflineJobs(job, describe)
    audit = MemoryAuditSink()
    source = FixedPolicy(policy)
    compliance = ComplianceService(jobs, RecordingNotifier(), source, audit, clock=lambda: now)
    naming = naming or AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance")
    idle_alarms = IdleAlarmsReaction(
        jobs=jobs, alarms=RecordingAlarms(), policies=source, audit=audit, clock=lambda: now, naming=naming
    )
    progress_alarms = ProgressAlarmsReaction(
        jobs=jobs, alarms=RecordingAlarms(), policies=source, audit=audit, clock=lambda: now, naming=naming
    )
    service = JobEventsService(
        reactions=[
            compliance,
            *_clone_reactions(
                raw_event,
                job=job,
                describe=describe,
                source=source,
                audit=audit,
                now=now,
                role_patterns=clone_role_patterns,
            ),
            idle_alarms,
            progress_alarms,
        ],
        policies=source,
        audit=audit,
        clock=lambda: now,
    )
    decisions = service.handle(event)
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "decisions": [d.explain() for d in decisions],
    }


def _clone_reactions(
    raw_event: dict[str, Any],
    *,
    job: TrainingJob,
    describe: dict[str, Any] | None,
    source: FixedPolicy,
    audit: MemoryAuditSink,
    now: datetime,
    role_patterns: tuple[str, ...],
) -> list[Reaction]:
    """Auto-resume and Spot fallback, planning from ``describe`` (or the event detail, which mirrors
    DescribeTrainingJob) and recording the CreateTrainingJob request instead of sending it."""
    from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape

    detail = {k: v for k, v in raw_event.get("detail", {}).items() if k != "Tags"}
    jobs = OfflineJobs(job, describe if describe is not None else detail)
    common: dict[str, Any] = {
        "jobs": jobs,
        "launcher": RecordingLauncher(),
        "notifier": RecordingNotifier(),
        "policies": source,
        "audit": audit,
        "clock": lambda: now,
        "shape": create_training_job_shape(),
        "role_patterns": role_patterns,
    }
    return [AutoResumeReaction(**common), SpotFallbackReaction(**common)]
