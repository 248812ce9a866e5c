"""The efficiency record of a job that ended (issue 20): a job-events ``Reaction`` on terminal states.

For a ``Completed``, ``Failed`` or ``Stopped`` job it reads the hosts' GPU series over the job's training
time with one ``GetMetricData`` request (paged; ``adapters/metric_data.py``) and writes one audit record
(rule ``efficiency-record``, codes ``efficiency.record.*``: ``domain/efficiency.py``). Nothing is acted
on; the record is evidence for chargeback (`smgov report --by team`) and for the owner.

An event without the job's training times or instances (a partial detail) is completed from
``DescribeTrainingJob``; a job that never trained (no ``TrainingStartTime``), publishes no
``GPUUtilization`` (a CPU job) or runs on GPU groups of different GPU counts (no host's series can be put
per GPU) costs no read at all: its record says what is missing.

**Once per job, whichever path writes it.** When its end event is lost, the reconciler finds the job by
its leftover alarms and writes the same record (``record_lost_end``, trigger ``reconciler``) under the
very delivery key the end event claims (``job_delivery_key``, the delivery ledger): it claims the key,
writes the record and releases the key with the record among the delivery's done effects. A late end
event then claims the released key as a retry would, runs every other reaction (alarm deletion,
auto-resume) and skips the record (``OnceAuditSink``). A failed job's auto-resume, which the reconciler
runs then too, runs as that delivery: what it did (its records, the owner's notification of a clone, the
metric) is released done with the record, so the late event meets "already exists" and repeats none of
it. The other way round, an end event that was handled (its key claimed, its alarms' delete deferred)
leaves the reconciler nothing to claim: no second record. A record that says what was found (outcome
``no-action``) settles the job's record for either path: a read of the other that fails or finds no datapoints
yet (``skipped``, an outcome that alone would not hide it: ``SETTLED``) writes none beside it (``_measured``).
The event path pays no extra call. A claim lives as long as the ledger keeps deliveries (four hours by
default, longer than EventBridge retries an event and a queue receives a record). Without a ledger the reconciler writes no record: it
could not tell whether the event path did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain import efficiency
from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID, EfficiencyCode, EfficiencyRecord
from sagemaker_governance.domain.errors import JobNotFound
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.observability import logger
from sagemaker_governance.service.guard_alarms import LIFECYCLE_POLICY_MAX_AGE_SECONDS
from sagemaker_governance.service.idempotency import (
    LedgerPort,
    audit_effect,
    delivering,
    done_before,
    job_delivery_key,
)
from sagemaker_governance.service.ports import Clock, JobsPort, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision

if TYPE_CHECKING:  # annotations only: the job-events function never runs the stall judge (cold start)
    from sagemaker_governance.service.stall_judge import MetricReadPort

_OUTCOMES = {
    EfficiencyCode.MEASURED: Outcome.NO_ACTION,
    EfficiencyCode.PARTIAL: Outcome.NO_ACTION,
    EfficiencyCode.NO_GPU: Outcome.NO_ACTION,
    EfficiencyCode.MIXED_GPUS: Outcome.NO_ACTION,
    EfficiencyCode.NOT_TRAINED: Outcome.NO_ACTION,
    EfficiencyCode.NO_METRICS: Outcome.SKIPPED,
    EfficiencyCode.UNREAD: Outcome.SKIPPED,
}


def _measured(job_name: str) -> str:
    """The effect of a job's record that says what was found (measured, partial, no GPU, ...: outcome no-action).
    Once written for the delivery (by the end event's failed attempt, or the reconciler under its key), it is the
    job's record: a later read that fails (unread) or finds no datapoints yet writes no second one beside it."""
    return audit_effect(job_name, EFFICIENCY_RULE_ID, Action.NONE.value, Outcome.NO_ACTION)


RECONCILER_OWNER = "reconciler"  # the ledger owner of the reconciler's lost-end claims
RECONCILER_HOLD_SECONDS = 300.0  # the reconciler function's timeout (template.yaml): longer than any run


class EfficiencyReaction:
    """Writes the efficiency record of every job that ended."""

    def __init__(
        self,
        jobs: JobsPort,
        metrics: MetricReadPort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        ledger: LedgerPort | None = None,
    ) -> None:
        self._jobs = jobs
        self._metrics = metrics
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._ledger = ledger

    def applies(self, job: TrainingJob) -> bool:
        return job.is_terminal

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        # A record, not an action: the document read up to the lifecycle's age serves (the alarm guards'
        # deletion on the same event reads it so too): no SSM read of its own.
        if done_before(_measured(job.name)) is not None:
            logger.info("efficiency record written for this delivery already", job=job.name)
            return []
        policy = self._policies.current(LIFECYCLE_POLICY_MAX_AGE_SECONDS)
        now = self._clock()
        job = self._complete(job)
        prices = policy.for_job(job).price_table()  # the team's prices, as the stopper's savings estimate
        return [self._write(job, self.measure(job, prices, now), policy, trigger, now)]

    def record_lost_end(
        self, job: TrainingJob, trigger: Trigger, then: Callable[[], Sequence[Decision]] | None = None
    ) -> list[Decision]:
        """The reconciler found ``job`` ended with its alarms left behind (its end event may be lost): its
        record under the end event's delivery key, unless that delivery was handled. Nothing without a
        ledger. Measured before the claim: a failed read claims nothing. ``then``: what else the end event
        would have done (a failed job's auto-resume), run under the same claim, so a late end event finds
        those records done too and does not write them again."""
        ledger = self._ledger
        if ledger is None or not job.is_terminal:
            return []
        policy = self._policies.current(LIFECYCLE_POLICY_MAX_AGE_SECONDS)
        now = self._clock()
        result = self.measure(job, policy.for_job(job).price_table(), now)
        key = job_delivery_key(job)
        # One owner for every run, holding the claim for a run's length: a run that died between its claim and its
        # release (before writing the record) leaves a claim the next run can take over; an owner per run would
        # leave it held until the ledger item expires, and the record (with a failed job's resume) never made.
        owner = RECONCILER_OWNER
        # Done as OnceAuditSink counts it: the same record (a skipped one names its outcome), or any once settled.
        settled = audit_effect(job.name, EFFICIENCY_RULE_ID, Action.NONE.value)
        effect = audit_effect(job.name, EFFICIENCY_RULE_ID, Action.NONE.value, _OUTCOMES[result.code])
        claim = ledger.claim(key, owner, now, RECONCILER_HOLD_SECONDS)
        if not claim.granted or {effect, settled, _measured(job.name)} & claim.done:
            logger.info("efficiency record left to the end event's delivery", job=job.name, delivery=key)
            return []
        decision = self._write(job, result, policy, trigger, now)
        done = {*claim.done, effect}
        more: list[Decision] = []
        try:
            if then is not None:
                # As the end event's delivery: its effects (records, the owner's notification, a metric) are
                # done once, and released with the claim, so a late end event does not repeat them. Each under
                # the name its once-guard gave it: a record of the resume only planned (audit mode) or deferred
                # names its outcome, and does not hide the late event's record of the clone it makes.
                with delivering(key, frozenset(done)) as delivery:
                    try:
                        more = list(then())
                    finally:
                        done |= set(delivery.effects)
        finally:
            ledger.release(key, owner, now, sorted(done))
        return [decision, *more]

    def _write(
        self, job: TrainingJob, result: EfficiencyRecord, policy: Policy, trigger: Trigger, now: datetime
    ) -> Decision:
        effective = policy.for_job(job)
        evidence = result.evidence()
        project = job.tag(effective.project_tag)
        if project:
            evidence["project"] = project
        decision = Decision(
            rule=EFFICIENCY_RULE_ID,
            code=result.code.value,
            action=Action.NONE,
            mode=effective.mode,
            reason=result.reason(),
            evidence=evidence,
        )
        record_decision(
            self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=_OUTCOMES[result.code], at=now
        )
        return decision

    def measure(self, job: TrainingJob, prices: Mapping[str, float], now: datetime) -> EfficiencyRecord:
        """The record: the planned read, done (one request, paged), and turned into figures."""
        planned = efficiency.plan(job, now, prices)
        if isinstance(planned, EfficiencyRecord):
            return planned
        result = self._metrics.read(planned.queries, planned.start, planned.end, planned.period_seconds)
        return efficiency.record(job, planned, result, prices)

    def _complete(self, job: TrainingJob) -> TrainingJob:
        """The event's job, or DescribeTrainingJob's when the event lacks what the record needs: its
        instances, its training start, or (on Spot, for the savings) its billable time. Its tags (the record's
        team, owner, project and the team's prices) are the event's, or ``ListTags``'s when the event left
        them out or sent an empty map; a read that fails raises ``AdapterError`` (the delivery is retried), as
        a failed ``DescribeTrainingJob`` does: no record is charged to no team for want of a read."""
        known = job.training_start_time is not None or job.training_end_time is not None
        if known and job.instance_groups and not (job.spot and job.billable_seconds is None):
            return job if job.tags is not None or job.arn is None else job.with_tags(self._jobs.list_tags(job.arn))
        try:
            return self._jobs.get_job(job.name, job.tags)
        except JobNotFound:
            return job
