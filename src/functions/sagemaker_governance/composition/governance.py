"""What the job-events function and the reconciler share: the ports their use cases act through, and
the assembly of compliance, the alarm guards and auto-resume on them (the reconciler carries out the
resumes that waited for their backoff with the job-events function's auto-resume).

``Ports.of(root)`` builds the AWS adapters from the root's clients; `smgov explain` assembles the same
services on offline ports (answers from files, records instead of acting).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagemaker_governance.adapters.cloudwatch import CloudWatchAlarmLifecycle
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.sagemaker import SageMakerJobMarks, SageMakerJobs
from sagemaker_governance.adapters.time_bound import InterruptBudget
from sagemaker_governance.audit import AuditSink
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.composition.root import Root
from sagemaker_governance.domain.clone import RequestShape
from sagemaker_governance.domain.guards.base import AlarmNaming, Guard
from sagemaker_governance.service.compliance import ComplianceService
from sagemaker_governance.service.guard_alarms import GuardAlarms
from sagemaker_governance.service.idempotency import CloneNotices, ComplianceNotices, LedgerPort, ToleranceNotices
from sagemaker_governance.service.ports import (
    AlarmLifecyclePort,
    CheckpointsPort,
    Clock,
    EvaluationMarksPort,
    FailureLogsPort,
    InstanceCatalogPort,
    JobsPort,
    NotifierPort,
    PolicySource,
    SpotHealthPort,
    TimeBound,
)
from sagemaker_governance.service.resume import AutoResumeReaction, LauncherPort, SpotFallbackReaction

if TYPE_CHECKING:  # annotations only: these functions never run the stall judge (cold start)
    from sagemaker_governance.service.stall_judge import MetricReadPort


@dataclass(frozen=True)
class Ports:
    jobs: JobsPort
    notifier: NotifierPort
    policies: PolicySource
    audit: AuditSink
    metrics: BusinessMetricsPort
    clock: Clock
    alarms: AlarmLifecyclePort
    naming: AlarmNaming
    guards: tuple[Guard[Any], ...]
    marks: EvaluationMarksPort | None = None
    # EC2's answers for instance types our GPU table does not know (None: offline, the table alone)
    instances: InstanceCatalogPort | None = None
    # The delivery ledger (None: no table): the reconciler writes a lost end event's efficiency record
    # under that event's delivery key (service/efficiency.py)
    ledger: LedgerPort | None = None
    # Each clone's owner told once, whoever made it (the same table; None: no table)
    notices: CloneNotices | None = None
    # Each ignored tolerance declaration told once per job and guard, whoever creates the alarms (the same table)
    tolerance_notices: ToleranceNotices | None = None
    # Each compliance stop's owner told once, whoever tells (a failed telling left to the job's Stopped event)
    compliance_notices: ComplianceNotices | None = None
    # Whether a guard's arming metric was published in the job's current stint, read by a put of its alarms
    # that may come after the stopper armed it (a late Training event, the reconciler's repair; None: offline)
    metric_data: MetricReadPort | None = None
    # The time budget a policy's patterns run in on a job's values and log lines (None: unbounded, as offline)
    bound: TimeBound | None = None

    @classmethod
    def of(cls, root: Root) -> Ports:
        return cls(
            jobs=SageMakerJobs(root.client("sagemaker")),
            notifier=root.notifier(),
            policies=root.policy_store,
            audit=root.audit,
            metrics=root.metrics,
            clock=root.now,
            alarms=CloudWatchAlarmLifecycle(root.client("cloudwatch")),
            naming=root.alarm_naming,
            guards=root.guards,
            marks=SageMakerJobMarks(root.client("sagemaker")),
            instances=Ec2InstanceCatalog(
                lambda: root.client("ec2"), root.metrics
            ),  # its client is built on first use
            ledger=root.idempotency,
            notices=root.clone_notices,
            tolerance_notices=root.tolerance_notices,
            compliance_notices=root.compliance_notices,
            metric_data=CloudWatchMetricData(root.client("cloudwatch"), root.metrics),
            bound=InterruptBudget,
        )


def compliance_service(ports: Ports) -> ComplianceService:
    """Compliance (the job-events function and the reconciler): it tags each job it has evaluated."""
    return ComplianceService(
        ports.jobs,
        ports.notifier,
        ports.policies,
        ports.audit,
        ports.clock,
        marks=ports.marks,
        notices=ports.compliance_notices,
        bound=ports.bound,
    )


def alarm_guards(ports: Ports) -> tuple[GuardAlarms, ...]:
    """Every guard's alarm lifecycle: the job-events function's reactions and the reconciler's
    ``AlarmGuard``s."""
    return tuple(
        GuardAlarms(
            guard,
            jobs=ports.jobs,
            alarms=ports.alarms,
            policies=ports.policies,
            audit=ports.audit,
            clock=ports.clock,
            naming=ports.naming,
            instances=ports.instances,
            notifier=ports.notifier,
            metric_data=ports.metric_data,
            notices=ports.tolerance_notices,
        )
        for guard in ports.guards
    )


def clone_reactions(
    ports: Ports,
    *,
    launcher: LauncherPort,
    shape: Callable[[], RequestShape],
    role_patterns: tuple[str, ...],
    logs: FailureLogsPort | None = None,
    checkpoints: CheckpointsPort | None = None,
    spot_health: SpotHealthPort | None = None,
) -> tuple[AutoResumeReaction, SpotFallbackReaction]:
    """Auto-resume and Spot fallback on ``ports`` (the job-events function; the reconciler re-checks
    deferred resumes with the same auto-resume). ``shape`` gives CreateTrainingJob's request shape when a
    clone is planned."""
    common: dict[str, Any] = {
        "clock": ports.clock,
        "shape": shape,
        "role_patterns": role_patterns,
        "metrics": ports.metrics,
        "notices": ports.notices,
    }
    parts = (ports.jobs, launcher, ports.notifier, ports.policies, ports.audit)
    resume = AutoResumeReaction(
        *parts, logs=logs, checkpoints=checkpoints, marks=ports.marks, bound=ports.bound, **common
    )
    # a Spot job ended at MaxWaitTimeExceeded, or plainly Stopped, hands its failed clone, deferred while it ran
    # or stopped, to auto-resume
    spot = SpotFallbackReaction(
        *parts, checkpoints=checkpoints, spot_health=spot_health, handoff=resume.react, **common
    )
    return resume, spot
