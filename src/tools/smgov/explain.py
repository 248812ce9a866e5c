"""`smgov explain`: run the real services on one event with offline ports.

A training job state change (an EventBridge event, or an SQS batch from the job-events queue) goes to the
job-events service; an alarm notification (an SNS event, or an SQS batch from the alarm queue) to the
alarm stopper; the reconciler's scheduled event to one reconciler run over the described job.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.adapters.spot_health import signal_of
from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.composition import job_events
from sagemaker_governance.composition.governance import Ports
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, DescribedAlarm
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.reconcile import AlarmListing, JobListing
from sagemaker_governance.domain.spot_health import SpotSignal
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.settings import Settings
from smgov.offline import (
    NoLogs,
    OfflineCheckpoints,
    OfflineJobs,
    OfflineLogs,
    RecordingAlarms,
    RecordingLauncher,
    RecordingNotifier,
)


class FixedPolicy:
    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def current(self, max_age_seconds: float | None = None) -> Policy:
        return self._policy


@dataclass(frozen=True)
class SavedReads:
    """What the function would read, saved in files: ``logs`` (the failed job's log lines: a file, or a
    folder with one file per stream), ``checkpoints`` (the job's checkpoint writes: a saved
    ``ListObjectsV2`` answer or a file of times; Spot fallback's economics), ``spot_health`` (a saved
    DynamoDB ``Query`` answer of the Spot health ledger: the fleet's health of the job's type and of the
    team's alternatives). None: not read."""

    logs: Path | None = None
    checkpoints: Path | None = None
    spot_health: Path | None = None


def explain_event(
    raw_event: dict[str, Any],
    policy: Policy,
    *,
    now: datetime,
    describe: dict[str, Any] | None = None,
    clone_role_patterns: tuple[str, ...] | None = None,
    naming: AlarmNaming | None = None,
    saved: SavedReads | None = None,
) -> dict[str, Any]:
    """What the job-events function would decide for ``raw_event`` under ``policy`` at ``now``: the
    function's own assembly (``composition.job_events.assemble``) on ports that answer from the event,
    ``describe`` (what a re-read would see) and the ``saved`` reads (``SavedReads``), and record instead
    of acting."""
    event = TrainingJobStateChange.model_validate(raw_event)
    job = event.detail
    saved = saved or SavedReads()
    logs, checkpoints, spot_health = saved.logs, saved.checkpoints, saved.spot_health
    if clone_role_patterns is None:  # the deployed default, or CLONE_PASS_ROLE_PATTERN when set
        clone_role_patterns = (Settings.from_env().clone_role_pattern,)
    # Auto-resume and Spot fallback plan from `describe`, or else from the event detail (which mirrors
    # DescribeTrainingJob); the other reactions re-read `describe`, or else see the event's job.
    detail = {k: v for k, v in raw_event.get("detail", {}).items() if k != "Tags"}
    notifier = RecordingNotifier()
    ports = Ports(
        jobs=OfflineJobs(job, describe, fallback=detail),
        notifier=notifier,
        policies=FixedPolicy(policy),
        audit=MemoryAuditSink(),
        metrics=MemoryBusinessMetrics(),
        clock=lambda: now,
        alarms=RecordingAlarms(),
        naming=naming or AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance"),
        guards=GUARDS,
    )
    service = job_events.assemble(
        ports,
        launcher=RecordingLauncher(),
        shape=create_training_job_shape,
        role_patterns=clone_role_patterns,
        logs=OfflineLogs(logs) if logs is not None else NoLogs(),
        checkpoints=OfflineCheckpoints(checkpoints) if checkpoints is not None else None,
        spot_health=SavedSpotHealth(spot_health) if spot_health is not None else None,
    )
    # As the function reads it: transitions left out are taken from `describe` (none given, or one that has
    # not reached the event's state: the event as it is)
    with contextlib.suppress(AdapterError):
        event = service.said(event)
    decisions = service.handle(event)
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "decisions": [d.explain() for d in decisions],
        "notification": notifier.explained(),
    }


class SavedSpotHealth:
    """The Spot health ledger as a saved ``Query`` answer (``{"Items": [...]}``, DynamoDB's attribute-value
    items, of one or more instance types): read as the deployed ledger reads it; nothing is written."""

    def __init__(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ExplainError(f"{path}: not a saved DynamoDB Query answer: {exc}") from exc
        items = raw.get("Items") if isinstance(raw, dict) else None
        if not isinstance(items, list):
            raise ExplainError(f"{path}: a saved DynamoDB Query answer has a list under Items")
        self._signals = [s for s in (signal_of(i) for i in items if isinstance(i, dict)) if s is not None]

    def record(self, signals: Iterable[SpotSignal]) -> None:
        return None

    def recent(self, instance_type: str, since: datetime) -> list[SpotSignal]:
        return [s for s in self._signals if s.instance_type == instance_type and s.at >= since]


# ---- other events the functions receive (issue 16 item 8) ------------------------------------------


class OfflineAlarms:
    """An alarm named like this stack's is taken to exist, tagged for the job the description names (the
    assumption is stated in the result); resets and actions are recorded, not made."""

    def __init__(self, naming: AlarmNaming, job_name: str) -> None:
        self._naming = naming
        self._job_name = job_name
        self.reset_names: list[str] = []
        self.enabled: list[str] = []
        self.disabled: list[str] = []

    def tags(self, name: str) -> dict[str, str] | None:
        from sagemaker_governance.domain.guards.base import TAG_JOB, TAG_MANAGED_BY

        return {TAG_JOB: self._job_name, TAG_MANAGED_BY: self._naming.managed_by}

    def reset(self, names: Any, reason: str) -> None:
        self.reset_names += list(names)

    def enable_actions(self, names: Any) -> None:
        self.enabled += list(names)

    def disable_actions(self, names: Any) -> None:
        self.disabled += list(names)


class PlannedTransitions:
    """The alarm stopper's reads of an alarm's state and of a composite's triggering child, answered offline:
    the notification is taken as the alarm's current state (nothing newer is known), and a child's definition
    is the one its guard plans now for the described job under the given policy (what ``DescribeAlarms``
    would give for an alarm put as planned). Deployed, both are read from CloudWatch (said in ``assumed``)."""

    def __init__(self, job: TrainingJob, policy: Policy, naming: AlarmNaming) -> None:
        self._job, self._policy, self._naming = job, policy, naming

    def current_state(self, name: str) -> None:
        return None

    def definition(self, name: str) -> DescribedAlarm | None:
        effective = self._policy.for_job(self._job)
        for guard in GUARDS:
            if guard.role_of(name, self._job.name, self._naming) is None:
                continue
            plan = guard.plan(self._job, guard.config(effective), self._naming)
            request = plan.metric_request(name) if isinstance(plan, AlarmPlan) else None
            if request is not None:
                return DescribedAlarm.of(name, request)
        return None


class UnaskedInstances:
    """EC2's facts of an instance type our table lacks, offline: not asked, so unknown as a failed lookup is
    (nothing decided on it is settled). Deployed, the stopper asks EC2 (said in ``assumed``)."""

    def facts(self, instance_type: str) -> InstanceFacts:
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.UNKNOWN,
            note="not in the service's table, and EC2 is not asked offline",
            lookup_failed=True,
        )


def _job_of(describe: dict[str, Any] | None, what: str) -> TrainingJob:
    if describe is None:
        raise ExplainError(f"{what} names a training job: give its DescribeTrainingJob answer with --describe")
    return TrainingJob.model_validate(describe)


class ExplainError(ValueError):
    """The event cannot be explained offline as given (the message says what is missing)."""


def explain_alarm(
    raw_event: dict[str, Any],
    policy: Policy,
    *,
    now: datetime,
    describe: dict[str, Any] | None,
    naming: AlarmNaming,
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the alarm stopper would do with an alarm notification (an SNS event, or an SQS batch from the
    alarm queue), assuming the alarm exists with this stack's tags for the described job. ``evidence``: the
    stall judge's reads (``smgov.stall_evidence``: the metric series per host and signal, the training
    metrics' datapoints, the job's log streams and lines, its checkpoint location's objects); the judge then
    reviews every stop as deployed,
    and each decision shows its inputs and verdict under ``judge``. Without it no stop is judged (said in
    ``assumed``)."""
    from sagemaker_governance.events.alarms import alarm_notifications, queued_alarm_notification
    from sagemaker_governance.events.queue import sqs_bodies
    from sagemaker_governance.observability import logger
    from sagemaker_governance.service.guard_stopper import GuardStopper
    from sagemaker_governance.service.stall_judge import StallJudge
    from smgov.stall_evidence import OfflineCheckpoints, OfflineLogActivity, OfflineMetricData, load_evidence

    bodies = sqs_bodies(raw_event)
    messages = (
        alarm_notifications(raw_event) if bodies is None else [queued_alarm_notification(b) for _, b in bodies]
    )
    job = _job_of(describe, "an alarm notification")
    audit, alarms = MemoryAuditSink(), OfflineAlarms(naming, job.name)
    jobs = OfflineJobs(job, describe)
    results: list[dict[str, Any]] = []
    notifier = RecordingNotifier()
    review, gpu_data = None, None
    if evidence is not None:
        read = load_evidence(evidence)
        checkpoints = OfflineCheckpoints(read) if read.checkpoint_objects is not None else None
        gpu_data = OfflineMetricData(read)
        review = StallJudge(gpu_data, OfflineLogActivity(read), checkpoints)
    saved_level = logger.log_level
    logger.setLevel("WARNING")  # the service's info logs would mix into what is printed (and --json)
    try:
        for message_id, message in messages:
            stopper = GuardStopper(
                guards=GUARDS,
                jobs=jobs,
                alarms=alarms,
                arming=alarms,
                notifier=notifier,
                policies=FixedPolicy(policy),
                audit=audit,
                metrics=MemoryBusinessMetrics(),
                clock=lambda: now,
                naming=naming,
                account_id=message.account_id,
                review=review,
                transitions=PlannedTransitions(job, policy, naming),
                instances=UnaskedInstances(),
                gpu_data=gpu_data,
            )
            results.append(stopper.handle(message, message_id).as_dict())
    finally:
        logger.setLevel(saved_level)
    assumed = (
        "the alarm exists and carries this stack's tags for the described job; its state is still the notified "
        "one (deployed, it is read again before a stop or reset); a composite alarm's triggering child is as "
        "its guard plans it now for the described job (deployed, DescribeAlarms gives it)"
    )
    types = {g.instance_type for g in job.instance_groups}
    unknown = sorted(t for t in types if instance_facts(t).accelerator is Accelerator.UNKNOWN)
    if unknown:
        assumed += (
            f"; {', '.join(unknown)} not in the service's table and EC2 not asked offline (deployed, the stopper asks "
            "EC2 and judges with its answer)"
        )
    if review is None:
        assumed += (
            "; no --evidence: a stop is not reviewed by the stall judge (deployed, it reads the job first), and a "
            "heterogeneous composite's stop or notice, whose hosts' GPU data is read first, is skipped as unread"
        )
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "assumed": assumed,
        "results": results,
        "decisions": [_record(r, judge=True) for r in audit.records],
        "stopped": jobs.stopped,
        "alarms_reset": alarms.reset_names,
        "notification": notifier.explained(),
    }


def alarm_time(raw_event: dict[str, Any]) -> datetime | None:
    """When the (first) alarm of a notification changed state: what ``--evidence`` is judged as at."""
    from sagemaker_governance.events.alarms import alarm_notifications, queued_alarm_notification
    from sagemaker_governance.events.queue import sqs_bodies

    bodies = sqs_bodies(raw_event)
    messages = (
        alarm_notifications(raw_event) if bodies is None else [queued_alarm_notification(b) for _, b in bodies]
    )
    return next((m.changed_at for _, m in messages if m.changed_at is not None), None)


def explain_schedule(
    raw_event: dict[str, Any],
    policy: Policy,
    *,
    now: datetime,
    describe: dict[str, Any] | None,
    naming: AlarmNaming,
    interval_minutes: int = 10,
) -> dict[str, Any]:
    """What one reconciler run would repair for the described job, were its Starting and Training events
    lost (offline nothing else can be listed: no other job, none of this stack's alarms)."""
    from sagemaker_governance.composition.governance import alarm_guards, compliance_service
    from sagemaker_governance.domain.reconcile import JobSummary
    from sagemaker_governance.events.schedule import ScheduledEvent
    from sagemaker_governance.service.reconciler import ReconcilerService

    ScheduledEvent.model_validate(raw_event)
    job = _job_of(describe, "the reconciler's run (offline)")
    ports = _ports(job, describe, policy, now, naming=naming, fallback=None)
    summary = JobSummary.model_validate({**(describe or {}), "TrainingJobArn": job.arn or job.name})
    service = ReconcilerService(
        jobs=ports.jobs,
        inventory=_Listed([summary] if summary.status == "InProgress" else []),
        alarm_inventory=_Listed([]),
        alarms=ports.alarms,
        guards=alarm_guards(ports),
        compliance=compliance_service(ports),
        policies=ports.policies,
        audit=ports.audit,
        metrics=ports.metrics,
        clock=ports.clock,
        interval_minutes=interval_minutes,
    )
    from sagemaker_governance.service.recording import Trigger

    report = service.run(Trigger(kind="reconciler", event_id=str(raw_event.get("id", ""))), lambda: 300.0)
    assert isinstance(ports.audit, MemoryAuditSink)
    return {
        "job": job.name,
        "status": f"{job.status}/{job.secondary_status}",
        "assumed": "the job is the only one in progress, none of this stack's alarms exists, it was never evaluated",
        "run": report.as_dict(),
        "decisions": [_record(r) for r in ports.audit.records],
        "notification": ports.notifier.explained() if isinstance(ports.notifier, RecordingNotifier) else [],
    }


class _Listed:
    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def in_progress(
        self, created_after: datetime, more: Callable[[], bool], created_before: datetime | None = None
    ) -> JobListing:
        return JobListing(jobs=tuple(self._items))

    def alarm_names(self, prefix: str) -> list[str]:
        return [str(i) for i in self._items]

    def alarm_states(self, prefix: str) -> list[AlarmListing]:
        return [AlarmListing(name=str(i)) for i in self._items]


def _ports(
    job: TrainingJob,
    describe: dict[str, Any] | None,
    policy: Policy,
    now: datetime,
    *,
    naming: AlarmNaming,
    fallback: dict[str, Any] | None,
) -> Ports:
    return Ports(
        jobs=OfflineJobs(job, describe, fallback=fallback),
        notifier=RecordingNotifier(),
        policies=FixedPolicy(policy),
        audit=MemoryAuditSink(),
        metrics=MemoryBusinessMetrics(),
        clock=lambda: now,
        alarms=RecordingAlarms(),
        naming=naming,
        guards=GUARDS,
    )


def _record(record: Any, *, judge: bool = False) -> dict[str, Any]:
    out = {
        "rule": record.rule,
        "code": record.code,
        "action": record.action,
        "mode": record.mode,
        "outcome": record.outcome.value,
        "reason": record.reason,
    }
    if judge:
        from smgov.stall_evidence import judged

        shown = judged(record.code or "", record.reason, record.evidence or {})
        if shown is not None:
            out["judge"] = shown
    return out
