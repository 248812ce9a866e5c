"""Idle guard, alarm lifecycle: create the job's GPU alarm when it enters Training, delete it at the end.

* ``InProgress``/``Training`` (first start, Spot restart, duplicate delivery): re-read the job and create
  the alarm only if it is still ``InProgress`` (a late event must not leave an alarm for an ended job).
  ``PutMetricAlarm`` is an upsert; the alarm is then reset to ``OK`` so that a job that restarted
  training is judged afresh (an update alone keeps the old state and would never notify again).
* ``Completed``/``Failed``/``Stopped``: delete the job's alarms (a missing alarm is success).

Alarms are created in audit mode too: it is the stopper that only records in audit mode.
"""

from __future__ import annotations

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.errors import JobNotFound
from sagemaker_governance.domain.idle import (
    CHILD_MARK,
    IDLE_RULE_ID,
    AlarmNaming,
    AlarmPlan,
    IdlePolicy,
    NoAlarm,
    alarm_names,
    plan_idle_alarm,
)
from sagemaker_governance.domain.instances import Accelerator, instance_facts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idle_ports import AlarmLifecyclePort, InstanceCatalogPort
from sagemaker_governance.service.ports import Clock, JobsPort, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision

REARM_REASON = "sagemaker-governance: the training job (re)entered Training; idle evaluation starts afresh"


def is_training(job: TrainingJob) -> bool:
    return job.status == "InProgress" and job.secondary_status == "Training"


class IdleAlarmsReaction:
    def __init__(
        self,
        *,
        jobs: JobsPort,
        alarms: AlarmLifecyclePort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        naming: AlarmNaming,
        instances: InstanceCatalogPort | None = None,
    ) -> None:
        self._jobs = jobs
        self._alarms = alarms
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._naming = naming
        self._instances = instances

    def _plan(self, job: TrainingJob, idle: IdlePolicy) -> AlarmPlan | NoAlarm:
        """The plan, with EC2's facts for instance types our table does not know (issue 16 item 3)."""
        resolved = {}
        if self._instances is not None:
            for group in job.instance_groups:
                if instance_facts(group.instance_type).accelerator is Accelerator.UNKNOWN:
                    resolved[group.instance_type] = self._instances.facts(group.instance_type)
        return plan_idle_alarm(job, idle, self._naming, resolved)

    def applies(self, job: TrainingJob) -> bool:
        return is_training(job) or job.is_terminal

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        policy = self._policies.current()
        if job.is_terminal:
            return [self._delete(job, policy, trigger)]
        return [self._create(job, policy, trigger)]

    # ---- Training: create ------------------------------------------------------------------------

    def _create(self, event_job: TrainingJob, policy: Policy, trigger: Trigger) -> Decision:
        try:
            job = self._jobs.get_job(event_job.name)
        except JobNotFound:
            decision = self._none(policy, event_job, "the job no longer exists; no alarm created")
            return self._record(decision, event_job, policy, trigger, Outcome.SKIPPED)
        effective = policy.for_job(job)
        idle = effective.idle
        mode = idle.mode_or(effective.mode)
        if job.status != "InProgress":
            decision = self._none(
                effective, job, f"the job is already {job.status} (late Training event); no alarm created"
            )
            return self._record(decision, job, policy, trigger, Outcome.SKIPPED)
        if not idle.enabled:
            decision = self._none(effective, job, "the idle guard is disabled for this job's policy")
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        plan = self._plan(job, idle)
        if not isinstance(plan, AlarmPlan):
            decision = Decision(
                rule=IDLE_RULE_ID, action=Action.NONE, mode=mode, reason=plan.reason, evidence=plan.evidence
            )
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        exemption, expired = effective.exemption_for(job, IDLE_RULE_ID, self._clock())
        for old in expired:
            logger.warning("exemption ignored", job=job.name, note=f"expired exemption: {old.label()}")
        decision = Decision(
            rule=IDLE_RULE_ID,
            action=Action.CREATE_ALARM,
            mode=mode,
            reason=(
                f"watching GPU utilization of {job.total_instance_count} host(s): below "
                f"{idle.threshold_percent:g}% per GPU for {idle.window_minutes:g} minutes after a "
                f"{idle.grace_minutes}-minute grace period counts as idle"
            ),
            evidence=plan.evidence,
            request=plan.request(),
            exempted_by=exemption.label() if exemption else None,
        )
        if exemption is not None:
            return self._record(decision, job, policy, trigger, Outcome.EXEMPTED)
        self._alarms.put(plan)
        self._alarms.reset(plan.names.metric_alarms, REARM_REASON)
        return self._record(decision, job, policy, trigger, Outcome.DONE)

    # ---- the reconciler's view (service/reconciler.py: an ``AlarmGuard``) ------------------------

    @property
    def alarm_prefix(self) -> str:
        return self._naming.prefix

    def watches(self, job_name: str, alarm_name: str) -> bool:
        head = self._naming.alarm_name(job_name)
        return alarm_name == head or alarm_name.startswith(f"{head}{CHILD_MARK}")

    def desired_alarms(self, job: TrainingJob, policy: Policy) -> tuple[str, ...]:
        """The metric alarms (what ``DescribeAlarms`` lists) this guard wants for ``job`` now: none when
        the job is not training, the guard is off for it, it has no GPU, or it is exempt."""
        if not is_training(job):
            return ()
        effective = policy.for_job(job)
        if not effective.idle.enabled:
            return ()
        plan = self._plan(job, effective.idle)
        if not isinstance(plan, AlarmPlan):
            return ()
        exemption, _ = effective.exemption_for(job, IDLE_RULE_ID, self._clock())
        return () if exemption is not None else plan.names.metric_alarms

    def create_alarms(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """Create the job's alarms as its Training event would (the job is re-read first)."""
        return [self._create(job, self._policies.current(), trigger)]

    # ---- terminal: delete ------------------------------------------------------------------------

    def _delete(self, job: TrainingJob, policy: Policy, trigger: Trigger) -> Decision:
        hosts = job.total_instance_count
        if hosts == 0:  # an event without ResourceConfig: ask SageMaker
            try:
                hosts = self._jobs.get_job(job.name).total_instance_count
            except JobNotFound:
                hosts = 1
        names = alarm_names(job.name, hosts, self._naming)
        effective = policy.for_job(job)
        deleted = self._alarms.delete(names.all)
        decision = Decision(
            rule=IDLE_RULE_ID,
            action=Action.DELETE_ALARM,
            mode=effective.idle.mode_or(effective.mode),
            reason=(
                f"the job is {job.status}: its idle alarm is deleted"
                if deleted
                else f"the job is {job.status}: no idle alarm to delete"
            ),
            evidence={"deleted": deleted},
            request={"AlarmNames": list(names.all)},
        )
        return self._record(decision, job, policy, trigger, Outcome.DONE if deleted else Outcome.ALREADY_DONE)

    # ---- helpers ---------------------------------------------------------------------------------

    def _none(self, policy: Policy, job: TrainingJob, reason: str) -> Decision:
        effective = policy.for_job(job)
        return Decision(
            rule=IDLE_RULE_ID, action=Action.NONE, mode=effective.idle.mode_or(effective.mode), reason=reason
        )

    def _record(
        self, decision: Decision, job: TrainingJob, policy: Policy, trigger: Trigger, outcome: Outcome
    ) -> Decision:
        record_decision(
            self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=outcome, at=self._clock()
        )
        return decision
