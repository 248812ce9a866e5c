"""Idle guard, the stopper: act on an idle alarm's ALARM notification.

Only ``ALARM`` notifications of alarms this stack owns are acted on: the name carries this stack's
prefix, the account is ours, and the alarm really exists in CloudWatch tagged as managed by this stack.
The job is found from the alarm's tag (never parsed out of the name) and re-read; it is stopped only
if it is still ``InProgress`` in ``Training`` after the grace period (see ``domain.idle.decide_idle_stop``).
Anything else is logged and ignored; every decision about a job writes one audit record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.domain.errors import JobNotFound, StopOutcome
from sagemaker_governance.domain.idle import (
    IDLE_RULE_ID,
    AlarmNaming,
    IdleVerdict,
    Verdict,
    alarm_names,
    alarm_tags_identify,
    decide_idle_stop,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.pricing import estimate_savings
from sagemaker_governance.domain.progress import ProgressRole, progress_role
from sagemaker_governance.events import AlarmNotification
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idle_ports import AlarmOwnershipPort
from sagemaker_governance.service.ports import Clock, JobsPort, NotifierPort, PolicySource
from sagemaker_governance.service.progress_stopper import ProgressStopper
from sagemaker_governance.service.recording import Trigger, record_decision

TRIGGER = "idle-alarm"
RESET_REASON = "sagemaker-governance: reset by the idle stopper (grace period or stale notification)"


@dataclass(frozen=True)
class StopperResult:
    alarm: str
    outcome: str
    reason: str
    job: str | None = None
    action: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class IdleStopperService:
    def __init__(
        self,
        *,
        jobs: JobsPort,
        alarms: AlarmOwnershipPort,
        notifier: NotifierPort,
        policies: PolicySource,
        audit: AuditSink,
        metrics: BusinessMetricsPort,
        clock: Clock,
        naming: AlarmNaming,
        account_id: str,
        progress: ProgressStopper | None = None,
    ) -> None:
        self._jobs = jobs
        self._alarms = alarms
        self._notifier = notifier
        self._policies = policies
        self._audit = audit
        self._metrics = metrics
        self._clock = clock
        self._naming = naming
        self._account_id = account_id
        self._progress = progress

    def handle(self, message: AlarmNotification, message_id: str | None = None) -> StopperResult:
        name = message.alarm_name
        if message.new_state != "ALARM":
            return self._ignore(name, f"state {message.new_state}: only ALARM is acted on")
        if message.account_id != self._account_id or not self._naming.owns(name):
            return self._ignore(name, "not an idle alarm of this stack (account or name prefix)")
        tags = self._alarms.tags(name)
        if tags is None:
            return self._ignore(name, "the alarm does not exist (any more)")
        job_name = alarm_tags_identify(tags, self._naming)
        if job_name is None:
            return self._ignore(name, "the alarm is not tagged as managed by this stack")
        role = progress_role(name, job_name, self._naming)
        if role is not None:
            return self._progress_alarm(role, job_name, message, message_id)
        if name != self._naming.alarm_name(job_name):
            return self._ignore(name, f"not the notifying alarm of {job_name} (a child alarm has no action)")
        try:
            job = self._jobs.get_job(job_name)
        except JobNotFound:
            return self._ignore(name, f"training job {job_name} does not exist")
        return self._decide_and_act(job, message, message_id)

    def _progress_alarm(
        self, role: ProgressRole, job_name: str, message: AlarmNotification, message_id: str | None
    ) -> StopperResult:
        if self._progress is None:
            return self._ignore(message.alarm_name, "a progress alarm, but this stopper has no progress guard")
        try:
            job = self._jobs.get_job(job_name)
        except JobNotFound:
            return self._ignore(message.alarm_name, f"training job {job_name} does not exist")
        verdict, outcome = self._progress.handle(role, job, message, message_id)
        return StopperResult(
            alarm=message.alarm_name,
            job=job.name,
            action=verdict.decision.action.value,
            outcome=outcome.value,
            reason=verdict.decision.reason,
        )

    def _decide_and_act(
        self, job: TrainingJob, message: AlarmNotification, message_id: str | None
    ) -> StopperResult:
        now = self._clock()
        policy = self._policies.current()
        effective = policy.for_job(job)
        idle = effective.idle
        exemption, _expired = effective.exemption_for(job, IDLE_RULE_ID, now)
        savings = estimate_savings(job, idle.price_table(), now)
        verdict = decide_idle_stop(
            job,
            idle,
            idle.mode_or(effective.mode),
            now,
            alarm_changed_at=message.changed_at,
            exempted_by=exemption.label() if exemption else None,
            evidence={**message.evidence(), **savings.evidence()},
        )
        outcome = self._act(job, verdict)
        decision = verdict.decision
        record_decision(
            self._audit,
            decision,
            job=job,
            policy=policy,
            trigger=Trigger(kind=TRIGGER, event_id=message_id),
            outcome=outcome,
            at=now,
        )
        if verdict.verdict is Verdict.STOP:
            if outcome is Outcome.DONE:
                self._metrics.emit(BusinessMetric.ESTIMATED_SAVINGS_USD, savings.usd, rule=IDLE_RULE_ID)
            if outcome is Outcome.DONE or (outcome is Outcome.AUDIT_ONLY and effective.notify_in_audit_mode):
                self._notify(job, verdict, outcome, effective.team_tag, effective.owner_tag)
        return StopperResult(
            alarm=message.alarm_name,
            job=job.name,
            action=decision.action.value,
            outcome=outcome.value,
            reason=decision.reason,
        )

    def _act(self, job: TrainingJob, verdict: IdleVerdict) -> Outcome:
        kind = verdict.verdict
        if verdict.resets_alarm:
            names = alarm_names(job.name, job.total_instance_count, self._naming)
            self._alarms.reset(names.metric_alarms, RESET_REASON)
        if kind is Verdict.ALREADY_ENDED:
            return Outcome.ALREADY_DONE
        if kind is Verdict.EXEMPTED:
            return Outcome.EXEMPTED
        if kind is not Verdict.STOP:
            return Outcome.SKIPPED if kind is not Verdict.DISABLED else Outcome.NO_ACTION
        if not verdict.decision.acts:
            return Outcome.AUDIT_ONLY
        return Outcome.DONE if self._jobs.stop(job.name) is StopOutcome.STOPPED else Outcome.ALREADY_DONE

    def _notify(
        self, job: TrainingJob, verdict: IdleVerdict, outcome: Outcome, team_tag: str, owner_tag: str
    ) -> None:
        stopped = outcome is Outcome.DONE
        self._notifier.publish(
            Notification(
                kind="idle-stop",
                job_name=job.name,
                job_arn=job.arn,
                team=job.tag(team_tag),
                owner=job.tag(owner_tag),
                headline=(
                    f"Training job {job.name} was stopped: its GPUs were idle"
                    if stopped
                    else f"Training job {job.name} looks idle (audit mode: not stopped)"
                ),
                outcome="stopped" if stopped else "would-stop (audit mode)",
                items=Notification.items_from([verdict.decision]),
            )
        )

    def _ignore(self, alarm: str, reason: str) -> StopperResult:
        logger.info("alarm notification ignored", alarm=alarm, reason=reason)
        return StopperResult(alarm=alarm, outcome="ignored", reason=reason)
