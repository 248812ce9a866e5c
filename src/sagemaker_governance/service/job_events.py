"""Routing a training job's state change to the use cases that act on it."""

from __future__ import annotations

from sagemaker_governance.audit import AuditRecord, AuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.events import TrainingJobStateChange
from sagemaker_governance.service.compliance import ComplianceService, Trigger
from sagemaker_governance.service.ports import Clock, PolicySource

ROUTER_RULE_ID = "event-router"


def is_first_in_progress(job: TrainingJob) -> bool:
    """The job's first ``InProgress`` event: compliance is evaluated once, not again after a Spot restart."""
    return (
        job.status == "InProgress"
        and job.secondary_status == "Starting"
        and job.count_transitions("Interrupted") == 0
        and job.count_transitions("Starting") <= 1
    )


class JobEventsService:
    def __init__(
        self, compliance: ComplianceService, policies: PolicySource, audit: AuditSink, clock: Clock
    ) -> None:
        self._compliance = compliance
        self._policies = policies
        self._audit = audit
        self._clock = clock

    def handle(self, event: TrainingJobStateChange) -> list[Decision]:
        job: TrainingJob = event.detail
        trigger = Trigger(kind="job-state-change", event_id=event.id)
        decisions: list[Decision] = []
        if is_first_in_progress(job):
            decisions += self._compliance.evaluate(job, trigger)
        if not decisions:
            decisions.append(self._nothing_to_do(job, trigger))
        return decisions

    def _nothing_to_do(self, job: TrainingJob, trigger: Trigger) -> Decision:
        policy = self._policies.current()
        decision = Decision(
            rule=ROUTER_RULE_ID,
            action=Action.NONE,
            mode=policy.mode,
            reason=f"no governance action for {job.status}/{job.secondary_status}",
        )
        self._audit.write(
            AuditRecord.of(
                decision,
                job=job,
                outcome=Outcome.NO_ACTION,
                at=self._clock(),
                trigger=trigger.kind,
                event_id=trigger.event_id,
                team_tag=policy.team_tag,
                owner_tag=policy.owner_tag,
                policy_digest=policy.digest(),
            )
        )
        return decision
