"""`smgov explain`: run the real job-events service on one event with offline ports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.events import TrainingJobStateChange
from sagemaker_governance.service.compliance import ComplianceService
from sagemaker_governance.service.idle_alarms import IdleAlarmsReaction
from sagemaker_governance.service.job_events import JobEventsService
from sagemaker_governance.service.offline import OfflineJobs, RecordingAlarms, RecordingNotifier


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
    naming: AlarmNaming | None = None,
) -> dict[str, Any]:
    event = TrainingJobStateChange.model_validate(raw_event)
    job = event.detail
    # The event decides what runs (as in the deployed function); `describe` is what a re-read would see.
    jobs = OfflineJobs(job, describe)
    audit = MemoryAuditSink()
    source = FixedPolicy(policy)
    compliance = ComplianceService(jobs, RecordingNotifier(), source, audit, clock=lambda: now)
    idle_alarms = IdleAlarmsReaction(
        jobs=jobs,
        alarms=RecordingAlarms(),
        policies=source,
        audit=audit,
        clock=lambda: now,
        naming=naming or AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance"),
    )
    service = JobEventsService(
        reactions=[compliance, idle_alarms], policies=source, audit=audit, clock=lambda: now
    )
    decisions = service.handle(event)
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "decisions": [d.explain() for d in decisions],
    }
