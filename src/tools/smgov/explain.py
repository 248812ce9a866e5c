"""`smgov explain`: run the real job-events service on one event with offline ports."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.composition import job_events
from sagemaker_governance.composition.governance import Ports
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.events import TrainingJobStateChange
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
    """What the job-events function would decide for ``raw_event`` under ``policy`` at ``now``: the
    function's own assembly (``composition.job_events.assemble``) on ports that answer from the event and
    ``describe`` (what a re-read would see) and record instead of acting."""
    event = TrainingJobStateChange.model_validate(raw_event)
    job = event.detail
    if clone_role_patterns is None:  # the deployed default, or CLONE_PASS_ROLE_PATTERN when set
        clone_role_patterns = (Settings.from_env().clone_role_pattern,)
    # Auto-resume and Spot fallback plan from `describe`, or else from the event detail (which mirrors
    # DescribeTrainingJob); the other reactions re-read `describe`, or else see the event's job.
    detail = {k: v for k, v in raw_event.get("detail", {}).items() if k != "Tags"}
    ports = Ports(
        jobs=OfflineJobs(job, describe, fallback=detail),
        notifier=RecordingNotifier(),
        policies=FixedPolicy(policy),
        audit=MemoryAuditSink(),
        metrics=MemoryBusinessMetrics(),
        clock=lambda: now,
        alarms=RecordingAlarms(),
        naming=naming or AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance"),
    )
    service = job_events.assemble(
        ports, launcher=RecordingLauncher(), shape=create_training_job_shape(), role_patterns=clone_role_patterns
    )
    decisions = service.handle(event)
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "decisions": [d.explain() for d in decisions],
    }
