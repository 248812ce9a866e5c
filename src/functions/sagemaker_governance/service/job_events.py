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
from sagemaker_governance.domain.errors import DescriptionBehind, JobNotFound
from sagemaker_governance.domain.job import EVENT_SECTIONS_MISSING, TRANSITIONS_SECTION, TrainingJob
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.observability import logger
from sagemaker_governance.service.ports import Clock, JobsPort, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision

ROUTER_RULE_ID = "event-router"


class RouterCode(StrEnum):
    NO_REACTION = "router.skip.no-reaction"  # no capability acts on this state change


class Reaction(Protocol):
    def applies(self, job: TrainingJob) -> bool: ...

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]: ...


class JobEventsService:
    def __init__(
        self,
        reactions: Sequence[Reaction],
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        jobs: JobsPort,
    ) -> None:
        self._reactions = tuple(reactions)
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._jobs = jobs

    def said(self, event: TrainingJobStateChange) -> TrainingJobStateChange:
        """The event as the service keys and decides on it. Its job's ``SecondaryStatusTransitions`` left out
        (absent, or null as SageMaker writes an absent member) are unsaid, not "no transitions": the delivery
        key (``job_delivery_key``) and the reactions (a Spot restart's second Starting is not a first start,
        a return to Training re-arms the guards) read them, so the job is read again (DescribeTrainingJob)
        and the event takes its transitions as they stood at the event's time. An event that carries them costs no
        call. A job that no longer exists leaves the event as it is (the reactions find it gone); an answer
        that lags the event raises ``DescriptionBehind`` (the delivery is retried). An empty ``Tags`` map is
        unsaid too (``TrainingJob.as_event_says``): every reaction reads the job's tags (``ListTags``) before it
        judges a team, an owner or a mark from them, as for an event that leaves them out."""
        job: TrainingJob = event.detail.as_event_says()
        if job is not event.detail:
            event = event.model_copy(update={"detail": job})
        unsaid = job.unsaid_sections()
        if unsaid:  # the reactions read such a job again; this line tells the platform team events do this
            logger.info(EVENT_SECTIONS_MISSING, sections=list(unsaid), status=job.status)
        if TRANSITIONS_SECTION not in unsaid:
            return event
        try:
            described = TrainingJob.model_validate(self._jobs.describe(job.name))
        except JobNotFound:
            return event
        said = job.with_transitions_of(described, event.time)
        if said is None:
            raise DescriptionBehind(
                f"DescribeTrainingJob {job.name}: {described.status}/{described.secondary_status}, not yet the "
                f"event's {job.status}/{job.secondary_status}"
            )
        return event.model_copy(update={"detail": said})

    def handle(self, event: TrainingJobStateChange) -> list[Decision]:
        """The reactions to ``event`` (``said``: the event as the service reads it)."""
        job: TrainingJob = event.detail
        trigger = Trigger(kind="job-state-change", event_id=event.id)
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
