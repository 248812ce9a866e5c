"""Writing the audit record of a decision: the one place that turns (decision, job, policy, trigger,
outcome) into an ``AuditRecord``, so every use case records the same fields the same way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sagemaker_governance.audit import AuditRecord, AuditSink, Outcome
from sagemaker_governance.domain.decisions import Decision
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy


@dataclass(frozen=True)
class Trigger:
    """Why the service is looking at a job: recorded in every audit record."""

    kind: str
    event_id: str | None = None


def record_decision(
    audit: AuditSink,
    decision: Decision,
    *,
    job: TrainingJob,
    policy: Policy,
    trigger: Trigger,
    outcome: Outcome,
    at: datetime,
    reason: str | None = None,
    evidence: dict[str, Any] | None = None,
) -> None:
    effective = policy.for_job(job)
    audit.write(
        AuditRecord.of(
            decision,
            job=job,
            outcome=outcome,
            at=at,
            trigger=trigger.kind,
            event_id=trigger.event_id,
            team_tag=effective.team_tag,
            owner_tag=effective.owner_tag,
            policy_digest=policy.digest(),
            reason=reason,
            evidence=evidence,
        )
    )
