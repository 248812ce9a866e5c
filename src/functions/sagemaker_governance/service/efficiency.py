"""The efficiency record of a job that ended (issue 20): a job-events ``Reaction`` on terminal states.

For a ``Completed``, ``Failed`` or ``Stopped`` job it reads the hosts' GPU series over the job's training
time with one ``GetMetricData`` request (paged; ``adapters/metric_data.py``) and writes one audit record
(rule ``efficiency-record``, codes ``efficiency.record.*``: ``domain/efficiency.py``). Nothing is acted
on; the record is evidence for chargeback (`smgov report --by team`) and for the owner.

An event without the job's training times or instances (a partial detail) is completed from
``DescribeTrainingJob``; a job that never trained (no ``TrainingStartTime``) or publishes no
``GPUUtilization`` (a CPU job) costs no read at all: its record says what is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain import efficiency
from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID, EfficiencyCode, EfficiencyRecord
from sagemaker_governance.domain.errors import JobNotFound
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.service.guard_alarms import LIFECYCLE_POLICY_MAX_AGE_SECONDS
from sagemaker_governance.service.ports import Clock, JobsPort, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision
from sagemaker_governance.service.stall_judge import MetricReadPort

_OUTCOMES = {
    EfficiencyCode.MEASURED: Outcome.NO_ACTION,
    EfficiencyCode.PARTIAL: Outcome.NO_ACTION,
    EfficiencyCode.NO_GPU: Outcome.NO_ACTION,
    EfficiencyCode.NOT_TRAINED: Outcome.NO_ACTION,
    EfficiencyCode.NO_METRICS: Outcome.SKIPPED,
    EfficiencyCode.UNREAD: Outcome.SKIPPED,
}


class EfficiencyReaction:
    """Writes the efficiency record of every job that ended."""

    def __init__(
        self,
        jobs: JobsPort,
        metrics: MetricReadPort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
    ) -> None:
        self._jobs = jobs
        self._metrics = metrics
        self._policies = policies
        self._audit = audit
        self._clock = clock

    def applies(self, job: TrainingJob) -> bool:
        return job.is_terminal

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        # A record, not an action: the document read up to the lifecycle's age serves (the alarm guards'
        # deletion on the same event reads it so too): no SSM read of its own.
        policy = self._policies.current(LIFECYCLE_POLICY_MAX_AGE_SECONDS)
        now = self._clock()
        job = self._complete(job)
        result = self.measure(job, policy.price_table(), now)
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
        return [decision]

    def measure(self, job: TrainingJob, prices: Mapping[str, float], now: datetime) -> EfficiencyRecord:
        """The record: the planned read, done (one request, paged), and turned into figures."""
        planned = efficiency.plan(job, now, prices)
        if isinstance(planned, EfficiencyRecord):
            return planned
        result = self._metrics.read(planned.queries, planned.start, planned.end, planned.period_seconds)
        return efficiency.record(job, planned, result, prices)

    def _complete(self, job: TrainingJob) -> TrainingJob:
        """The event's job, or DescribeTrainingJob's when the event lacks what the record needs: its
        instances, its training start, or (on Spot, for the savings) its billable time."""
        known = job.training_start_time is not None or job.training_end_time is not None
        if known and job.instance_groups and not (job.spot and job.billable_seconds is None):
            return job
        try:
            return self._jobs.get_job(job.name, job.tags)
        except JobNotFound:
            return job
