"""Progress guard, alarm lifecycle: create the job's progress alarms when it enters Training, delete them
at the end (the same lifecycle as the idle guard's GPU alarm; see ``domain.progress``).

* ``InProgress``/``Training`` (first start, Spot restart, duplicate delivery): re-read the job; if it is
  still ``InProgress`` and defines a progress metric, upsert the stall alarm *disarmed*
  (``ActionsEnabled: false``) and the armer (actions on), and reset both to ``OK``. Every (re)entry into
  Training therefore disarms the guard until the job publishes its metric again: a restarted job that
  spends an hour reloading its model is never judged on the silence before its first new log line.
* ``Completed``/``Failed``/``Stopped``: delete both alarms (a missing alarm is success). Jobs without
  metric definitions never had progress alarms: nothing to delete, no call.

Alarms are created in audit mode too: it is the stopper that only records in audit mode.
"""

from __future__ import annotations

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import JobNotFound
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.progress import (
    PROGRESS_RULE_ID,
    ProgressAlarmPlan,
    plan_progress_alarms,
    progress_alarm_names,
    progress_role,
)
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idle_alarms import is_training
from sagemaker_governance.service.ports import Clock, JobsPort, PolicySource
from sagemaker_governance.service.progress_ports import ProgressAlarmLifecyclePort
from sagemaker_governance.service.recording import Trigger, record_decision

REARM_REASON = (
    "sagemaker-governance: the training job (re)entered Training; the progress guard waits for its metric"
)


class ProgressAlarmsReaction:
    def __init__(
        self,
        *,
        jobs: JobsPort,
        alarms: ProgressAlarmLifecyclePort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        naming: AlarmNaming,
    ) -> None:
        self._jobs = jobs
        self._alarms = alarms
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._naming = naming

    def applies(self, job: TrainingJob) -> bool:
        return is_training(job) or job.is_terminal

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        policy = self._policies.current()
        if job.is_terminal:
            return self._delete(job, policy, trigger)
        return [self._create(job, policy, trigger)]

    # ---- the reconciler's view (service/reconciler.py AlarmGuard) ---------------------------------

    @property
    def alarm_prefix(self) -> str:
        return self._naming.prefix

    def watches(self, job_name: str, alarm_name: str) -> bool:
        return progress_role(alarm_name, job_name, self._naming) is not None

    def desired_alarms(self, job: TrainingJob, policy: Policy) -> tuple[str, ...]:
        """Both progress alarms while the job trains with a progress metric and is not exempt; none
        otherwise. (Whether the stall alarm is armed is the stopper's business, not compared here.)"""
        if not is_training(job):
            return ()
        effective = policy.for_job(job)
        if not effective.progress.enabled:
            return ()
        plan = plan_progress_alarms(job, effective.progress, self._naming)
        if not isinstance(plan, ProgressAlarmPlan):
            return ()
        exemption, _ = effective.exemption_for(job, PROGRESS_RULE_ID, self._clock())
        return () if exemption is not None else plan.names.all

    def create_alarms(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """Create the job's progress alarms as its Training event would (the job is re-read first)."""
        return [self._create(job, self._policies.current(), trigger)]

    # ---- Training: create ------------------------------------------------------------------------

    def _create(self, event_job: TrainingJob, policy: Policy, trigger: Trigger) -> Decision:
        effective = policy.for_job(event_job)
        progress = effective.progress
        mode = progress.mode_or(effective.mode)
        if not event_job.algorithm.metric_definitions:
            # The event mirrors DescribeTrainingJob: no re-read is needed to know there is nothing to watch.
            plan = plan_progress_alarms(event_job, progress, self._naming)
            reason = plan.reason if not isinstance(plan, ProgressAlarmPlan) else "no metric definitions"
            return self._record(self._none(mode, reason), event_job, policy, trigger, Outcome.NO_ACTION)
        try:
            job = self._jobs.get_job(event_job.name)
        except JobNotFound:
            decision = self._none(mode, "the job no longer exists; no progress alarm created")
            return self._record(decision, event_job, policy, trigger, Outcome.SKIPPED)
        effective = policy.for_job(job)
        progress = effective.progress
        mode = progress.mode_or(effective.mode)
        if job.status != "InProgress":
            decision = self._none(mode, f"the job is already {job.status} (late Training event); no alarm created")
            return self._record(decision, job, policy, trigger, Outcome.SKIPPED)
        if not progress.enabled:
            decision = self._none(mode, "the progress guard is disabled for this job's policy")
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        plan = plan_progress_alarms(job, progress, self._naming)
        if not isinstance(plan, ProgressAlarmPlan):
            decision = Decision(
                rule=PROGRESS_RULE_ID, action=Action.NONE, mode=mode, reason=plan.reason, evidence=plan.evidence
            )
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        exemption, expired = effective.exemption_for(job, PROGRESS_RULE_ID, self._clock())
        for old in expired:
            logger.warning("exemption ignored", job=job.name, note=f"expired exemption: {old.label()}")
        decision = Decision(
            rule=PROGRESS_RULE_ID,
            action=Action.CREATE_ALARM,
            mode=mode,
            reason=(
                f"watching the job's progress metric ({', '.join(plan.metrics)}): once it has been published, "
                f"no datapoint for {progress.window_minutes} minutes while training counts as stalled"
            ),
            evidence=plan.evidence,
            request=plan.request(),
            exempted_by=exemption.label() if exemption else None,
        )
        if exemption is not None:
            return self._record(decision, job, policy, trigger, Outcome.EXEMPTED)
        self._alarms.put_metric_alarms(job.name, plan.requests)
        self._alarms.reset(plan.names.all, REARM_REASON)
        return self._record(decision, job, policy, trigger, Outcome.DONE)

    # ---- terminal: delete ------------------------------------------------------------------------

    def _delete(self, job: TrainingJob, policy: Policy, trigger: Trigger) -> list[Decision]:
        if not job.algorithm.metric_definitions:
            return []
        names = progress_alarm_names(job.name, self._naming)
        effective = policy.for_job(job)
        deleted = self._alarms.delete(names.all)
        decision = Decision(
            rule=PROGRESS_RULE_ID,
            action=Action.DELETE_ALARM,
            mode=effective.progress.mode_or(effective.mode),
            reason=(
                f"the job is {job.status}: its progress alarms are deleted"
                if deleted
                else f"the job is {job.status}: no progress alarm to delete"
            ),
            evidence={"deleted": deleted},
            request={"AlarmNames": list(names.all)},
        )
        outcome = Outcome.DONE if deleted else Outcome.ALREADY_DONE
        return [self._record(decision, job, policy, trigger, outcome)]

    # ---- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _none(mode: Mode, reason: str) -> Decision:
        return Decision(rule=PROGRESS_RULE_ID, action=Action.NONE, mode=mode, reason=reason)

    def _record(
        self, decision: Decision, job: TrainingJob, policy: Policy, trigger: Trigger, outcome: Outcome
    ) -> Decision:
        record_decision(
            self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=outcome, at=self._clock()
        )
        return decision
