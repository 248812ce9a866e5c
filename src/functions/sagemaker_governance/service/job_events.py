"""Routing a training job's state change to the reactions (use cases) that act on it.

Each capability is a ``Reaction``: ``applies(job)`` says whether the event's state concerns it, and
``react(job, trigger)`` decides, acts and audits. The composition root lists the reactions; the
template's content filters must deliver every state some reaction applies to (a test checks both).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.job import EVENT_SECTIONS_MISSING, TrainingJob
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.observability import logger
from sagemaker_governance.service.ports import Clock, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision

ROUTER_RULE_ID = "event-router"


class RouterCode(StrEnum):
    NO_REACTION = "router.skip.no-reaction"  # no capability acts on this state change


class Reaction(Protocol):
    def applies(self, job: TrainingJob) -> bool: ...

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]: ...


class JobEventsService:
    def __init__(
        self, reactions: Sequence[Reaction], policies: PolicySource, audit: AuditSink, clock: Clock
    ) -> None:
        self._reactions = tuple(reactions)
        self._policies = policies
        self._audit = audit
        self._clock = clock

    def handle(self, event: TrainingJobStateChange) -> list[Decision]:
        job: TrainingJob = event.detail
        trigger = Trigger(kind="job-state-change", event_id=event.id)
        unsaid = job.unsaid_sections()
        if unsaid:  # the reactions read such a job again; this line tells the platform team events do this
            logger.info(EVENT_SECTIONS_MISSING, sections=list(unsaid), status=job.status)
        decisions: list[Decision] = []
        for reaction in self._reactions:
            if reaction.applies(job):
                decisions += reaction.react(job, trigger)
        if not decisions:
            decisions.append(self._nothing_to_do(job, trigger))
        return decisions

    def _nothing_to_do(self, job: TrainingJob, trigger: Trigger) -> Decision:
        policy = self._policies.current()
        decision = Decision(
            rule=ROUTER_RULE_ID,
            code=RouterCode.NO_REACTION,
            action=Action.NONE,
            mode=policy.mode,
            reason=f"no governance action for {job.status}/{job.secondary_status}",
        )
        record_decision(
            self._audit,
            decision,
            job=job,
            policy=policy,
            trigger=trigger,
            outcome=Outcome.NO_ACTION,
            at=self._clock(),
        )
        return decision
