"""Progress guard, the stopper side: act on the progress alarms' ALARM notifications.

The idle stopper verifies every notification first (ALARM, our account, our prefix, the alarm exists
with our ``smgov:managed-by`` tag, the job comes from its tag) and hands the progress alarms over here:

* **armer** ALARM (the job published its metric): re-read the job; if it is ``InProgress`` in
  ``Training`` and the guard is enabled, enable the stall alarm's actions, reset it to ``OK`` and
  disable the armer's actions (it has done its work until the job next (re)enters Training).
* **stall** ALARM (no datapoint for the window): re-read the job and stop it only if it is still
  ``InProgress`` in ``Training``, has been training for at least the window since its latest entry into
  Training, the notification is fresh, and no exemption covers ``progress-guard``. Audit mode records
  only (``progress.mode`` may override the global mode).

Every decision writes one audit record (trigger ``progress-alarm``).
"""

from __future__ import annotations

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.domain.errors import StopOutcome
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.pricing import estimate_savings
from sagemaker_governance.domain.progress import (
    PROGRESS_RULE_ID,
    ProgressDecision,
    ProgressRole,
    ProgressVerdict,
    decide_progress_arming,
    decide_progress_stop,
    progress_alarm_names,
)
from sagemaker_governance.events import AlarmNotification
from sagemaker_governance.service.idle_ports import AlarmOwnershipPort
from sagemaker_governance.service.ports import Clock, JobsPort, NotifierPort, PolicySource
from sagemaker_governance.service.progress_ports import AlarmArmingPort
from sagemaker_governance.service.recording import Trigger, record_decision

TRIGGER = "progress-alarm"
ARMED_REASON = "sagemaker-governance: armed after the job published its progress metric"
RESET_REASON = "sagemaker-governance: reset by the stopper (too early after (re)entering Training, or stale)"


class ProgressStopper:
    def __init__(
        self,
        *,
        jobs: JobsPort,
        alarms: AlarmOwnershipPort,
        arming: AlarmArmingPort,
        notifier: NotifierPort,
        policies: PolicySource,
        audit: AuditSink,
        metrics: BusinessMetricsPort,
        clock: Clock,
        naming: AlarmNaming,
    ) -> None:
        self._jobs = jobs
        self._alarms = alarms
        self._arming = arming
        self._notifier = notifier
        self._policies = policies
        self._audit = audit
        self._metrics = metrics
        self._clock = clock
        self._naming = naming

    def handle(
        self, role: ProgressRole, job: TrainingJob, message: AlarmNotification, message_id: str | None
    ) -> tuple[ProgressDecision, Outcome]:
        now = self._clock()
        policy = self._policies.current()
        effective = policy.for_job(job)
        progress = effective.progress
        mode = progress.mode_or(effective.mode)
        evidence = message.evidence()
        if message.trigger is not None:
            evidence["metrics"] = _metric_names(message)
        if role is ProgressRole.ARMER:
            verdict = decide_progress_arming(job, progress, mode, evidence=evidence)
            outcome = self._arm(job, verdict)
        else:
            exemption, _expired = effective.exemption_for(job, PROGRESS_RULE_ID, now)
            savings = estimate_savings(job, effective.idle.price_table(), now)
            verdict = decide_progress_stop(
                job,
                progress,
                mode,
                now,
                alarm_changed_at=message.changed_at,
                exempted_by=exemption.label() if exemption else None,
                evidence={**evidence, **savings.evidence()},
            )
            outcome = self._stop(job, verdict)
            if verdict.verdict is ProgressVerdict.STOP:
                if outcome is Outcome.DONE:
                    self._metrics.emit(BusinessMetric.ESTIMATED_SAVINGS_USD, savings.usd, rule=PROGRESS_RULE_ID)
                if outcome is Outcome.DONE or (outcome is Outcome.AUDIT_ONLY and effective.notify_in_audit_mode):
                    self._notify(job, verdict, outcome, effective)
        record_decision(
            self._audit,
            verdict.decision,
            job=job,
            policy=policy,
            trigger=Trigger(kind=TRIGGER, event_id=message_id),
            outcome=outcome,
            at=now,
        )
        return verdict, outcome

    def _arm(self, job: TrainingJob, verdict: ProgressDecision) -> Outcome:
        if verdict.verdict is ProgressVerdict.ALREADY_ENDED:
            return Outcome.ALREADY_DONE
        if verdict.verdict is not ProgressVerdict.ARM:
            return Outcome.SKIPPED if verdict.verdict is not ProgressVerdict.DISABLED else Outcome.NO_ACTION
        names = progress_alarm_names(job.name, self._naming)
        # Reset first, enable second: the stall alarm may sit in ALARM from its silent start-up minutes
        # (actions off); enabling it in that state would not notify, and resetting after enabling could
        # race an evaluation. The armer is switched off last: if anything above fails, it fires again.
        self._alarms.reset([names.stall], ARMED_REASON)
        self._arming.enable_actions([names.stall])
        self._arming.disable_actions([names.armer])
        return Outcome.DONE

    def _stop(self, job: TrainingJob, verdict: ProgressDecision) -> Outcome:
        kind = verdict.verdict
        if verdict.resets_alarm:
            self._alarms.reset([progress_alarm_names(job.name, self._naming).stall], RESET_REASON)
        if kind is ProgressVerdict.ALREADY_ENDED:
            return Outcome.ALREADY_DONE
        if kind is ProgressVerdict.EXEMPTED:
            return Outcome.EXEMPTED
        if kind is not ProgressVerdict.STOP:
            return Outcome.SKIPPED if kind is not ProgressVerdict.DISABLED else Outcome.NO_ACTION
        if not verdict.decision.acts:
            return Outcome.AUDIT_ONLY
        return Outcome.DONE if self._jobs.stop(job.name) is StopOutcome.STOPPED else Outcome.ALREADY_DONE

    def _notify(self, job: TrainingJob, verdict: ProgressDecision, outcome: Outcome, effective: Policy) -> None:
        stopped = outcome is Outcome.DONE
        window = effective.progress.window_minutes
        self._notifier.publish(
            Notification(
                kind="progress-stop",
                job_name=job.name,
                job_arn=job.arn,
                team=job.tag(effective.team_tag),
                owner=job.tag(effective.owner_tag),
                headline=(
                    f"Training job {job.name} was stopped: it logged no training progress for {window} minutes"
                    if stopped
                    else f"Training job {job.name} looks stalled: no training progress for {window} minutes "
                    "(audit mode: not stopped)"
                ),
                outcome="stopped" if stopped else "would-stop (audit mode)",
                items=Notification.items_from([verdict.decision]),
            )
        )


def _metric_names(message: AlarmNotification) -> list[str]:
    trigger = message.trigger
    if trigger is None:
        return []
    if trigger.metric_name:
        return [trigger.metric_name]
    return [
        q.metric_stat.metric.metric_name
        for q in trigger.metrics
        if q.metric_stat is not None and q.metric_stat.metric.metric_name
    ]
