"""The composition root: clients, adapters and services built once per Lambda container.

``FUNCTION_ADAPTERS`` names the adapters each function uses; the IAM contract test checks the
template grants each function exactly the union of their ``IAM_ACTIONS``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

import boto3
from botocore.config import Config

from sagemaker_governance.adapters.cloudwatch import (
    CloudWatchAlarmArming,
    CloudWatchAlarmInventory,
    CloudWatchAlarmLifecycle,
    CloudWatchAlarmOwnership,
)
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.idempotency import IdempotencyTable
from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.adapters.queue import EventSourceMappingPoller
from sagemaker_governance.adapters.sagemaker import SageMakerJobInventory, SageMakerJobMarks, SageMakerJobs
from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.audit import AuditSink, LogAuditSink
from sagemaker_governance.business_metrics import EmfRepairMetrics, EmfSavingsMetrics
from sagemaker_governance.domain.idle import AlarmNaming
from sagemaker_governance.service.compliance import ComplianceService
from sagemaker_governance.service.idempotency import OnceAuditSink, OnceNotifier, deliver
from sagemaker_governance.service.idle_alarms import IdleAlarmsReaction
from sagemaker_governance.service.idle_ports import SavingsMetricsPort
from sagemaker_governance.service.idle_stopper import IdleStopperService
from sagemaker_governance.service.job_events import JobEventsService, Reaction
from sagemaker_governance.service.ports import Clock, NotifierPort
from sagemaker_governance.service.progress_alarms import ProgressAlarmsReaction
from sagemaker_governance.service.progress_stopper import ProgressStopper
from sagemaker_governance.service.reconciler import ReconcilerService, RepairMetricsPort
from sagemaker_governance.service.resume import AutoResumeReaction, SpotFallbackReaction
from sagemaker_governance.settings import Settings

FUNCTION_ADAPTERS: dict[str, tuple[type, ...]] = {
    "JobEventsFunction": (
        SageMakerJobs,
        SnsNotifier,
        PolicyStore,
        SageMakerLauncher,
        CloudWatchAlarmLifecycle,
        Ec2InstanceCatalog,
        SageMakerJobMarks,
        IdempotencyTable,
        EventSourceMappingPoller,
    ),
    "IdleStopperFunction": (
        SageMakerJobs,
        SnsNotifier,
        PolicyStore,
        CloudWatchAlarmOwnership,
        CloudWatchAlarmArming,
        IdempotencyTable,
        EventSourceMappingPoller,
    ),
    "ReconcilerFunction": (
        SageMakerJobs,
        SnsNotifier,
        PolicyStore,
        CloudWatchAlarmLifecycle,
        Ec2InstanceCatalog,
        SageMakerJobInventory,
        CloudWatchAlarmInventory,
        SageMakerJobMarks,
    ),
}

R = TypeVar("R")

# Retries are botocore's job, never a hand-written loop. `standard` mode: exponential backoff with full
# jitter (random x 2^(attempt-1) seconds, capped at 20 s) and a per-client retry quota. The sizing is in
# docs/resilience.md.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20)
# CloudWatch allows 3 PutMetricAlarm and 3 DeleteAlarms requests per second per account and region: a
# burst of jobs is throttled there first. Six attempts wait at most 1+2+4+8+16 = 31 s (15.5 s on average)
# in backoff, three such waits fit in JobEventsFunction's 120 s timeout. Not
# `adaptive`: its client-side rate limiter lives in one client of one Lambda instance, so concurrent
# instances do not share what it learns; reserved concurrency bounds the account-wide rate instead.
# (botocore's ``max_attempts`` counts retries; ``total_max_attempts`` counts the first request too.)
SERVICE_CONFIGS: dict[str, Config] = {
    "cloudwatch": CLIENT_CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 6})),
}


def utc_now() -> datetime:
    return datetime.now(UTC)


_clock: Clock = utc_now


def set_clock(clock: Clock) -> None:
    """Inject the clock (the simulator's virtual clock; tests)."""
    global _clock  # noqa: PLW0603
    _clock = clock


def now() -> datetime:
    return _clock()


@cache
def settings() -> Settings:
    return Settings.from_env()


@cache
def client(service: str) -> Any:
    return boto3.client(service, config=SERVICE_CONFIGS.get(service, CLIENT_CONFIG))  # type: ignore[call-overload]


@cache
def policy_store() -> PolicyStore:
    cfg = settings()
    return PolicyStore(
        base_document=cfg.base_policy_document(),
        parameter_name=cfg.policy_parameter_name,
        ssm_client=client("ssm") if cfg.policy_parameter_name else None,
        cache_seconds=cfg.policy_cache_seconds,
        clock=now,
    )


_audit_override: AuditSink | None = None


def set_audit_sink(sink: AuditSink | None) -> None:
    """Send audit records somewhere else too (the simulator and tests keep them in memory)."""
    global _audit_override  # noqa: PLW0603
    _audit_override = sink
    audit_sink.cache_clear()


@cache
def audit_sink() -> AuditSink:
    sink = _audit_override or LogAuditSink()
    ledger = idempotency()
    return OnceAuditSink(sink, ledger) if ledger is not None else sink


@cache
def idempotency() -> IdempotencyTable | None:
    """The idempotency records (None when no table is configured: every delivery is processed)."""
    cfg = settings()
    if cfg.idempotency_table is None:
        return None
    return IdempotencyTable(client("dynamodb"), cfg.idempotency_table, cfg.idempotency_ttl_seconds)


def notifier() -> NotifierPort:
    """The SNS notifier; with idempotency records, each notification of a delivery is sent once."""
    sns = SnsNotifier(client("sns"), settings().notifications_topic_arn)
    ledger = idempotency()
    return OnceNotifier(sns, ledger) if ledger is not None else sns


def process_once(key: str, context: Any, process: Callable[[], R]) -> R:
    """Run a delivery's processing once per delivery key (handlers call this around the service)."""
    ledger = idempotency()
    if ledger is not None and context is not None:
        ledger.register_context(context)
    return deliver(ledger, key, process)


def compliance_service() -> ComplianceService:
    """Compliance (the job-events function and the reconciler): it tags each job it has evaluated."""
    return ComplianceService(
        jobs=SageMakerJobs(client("sagemaker")),
        notifier=notifier(),
        policies=policy_store(),
        audit=audit_sink(),
        clock=now,
        marks=SageMakerJobMarks(client("sagemaker")),
    )


def alarm_guards() -> tuple[IdleAlarmsReaction, ProgressAlarmsReaction]:
    """The per-job alarm guards (GPU idle, training progress): the job-events function's reactions and
    the reconciler's ``AlarmGuard``s, built on the same adapters."""
    common: dict[str, Any] = {
        "jobs": SageMakerJobs(client("sagemaker")),
        "alarms": CloudWatchAlarmLifecycle(client("cloudwatch")),
        "policies": policy_store(),
        "audit": audit_sink(),
        "clock": now,
        "naming": alarm_naming(),
    }
    return IdleAlarmsReaction(**common, instances=instance_catalog()), ProgressAlarmsReaction(**common)


@cache
def instance_catalog() -> Ec2InstanceCatalog:
    """EC2's answers for instance types our table does not know (its client is built on first use)."""
    return Ec2InstanceCatalog(lambda: client("ec2"))


@cache
def job_events_service() -> JobEventsService:
    reactions: list[Reaction] = [compliance_service(), *clone_reactions(), *alarm_guards()]
    return JobEventsService(reactions=reactions, policies=policy_store(), audit=audit_sink(), clock=now)


_repair_metrics_override: RepairMetricsPort | None = None


def set_repair_metrics(sink: RepairMetricsPort | None) -> None:
    """Keep the reconciler's repair metric in memory (the simulator and tests)."""
    global _repair_metrics_override  # noqa: PLW0603
    _repair_metrics_override = sink
    reconciler_service.cache_clear()


@cache
def reconciler_service() -> ReconcilerService:
    cfg = settings()
    return ReconcilerService(
        jobs=SageMakerJobs(client("sagemaker")),
        inventory=SageMakerJobInventory(client("sagemaker")),
        alarm_inventory=CloudWatchAlarmInventory(client("cloudwatch")),
        alarms=CloudWatchAlarmLifecycle(client("cloudwatch")),
        guards=alarm_guards(),
        compliance=compliance_service(),
        policies=policy_store(),
        audit=audit_sink(),
        metrics=_repair_metrics_override or EmfRepairMetrics(),
        clock=now,
        interval_minutes=cfg.reconcile_interval_minutes,
    )


@cache
def alarm_naming() -> AlarmNaming:
    cfg = settings()
    return AlarmNaming(
        prefix=cfg.idle_alarm_prefix, managed_by=cfg.stack_name, alarm_topic_arn=cfg.alarm_topic_arn
    )


_savings_metrics_override: SavingsMetricsPort | None = None


def set_savings_metrics(sink: SavingsMetricsPort | None) -> None:
    """Keep the savings metric in memory (the simulator and tests)."""
    global _savings_metrics_override  # noqa: PLW0603
    _savings_metrics_override = sink
    idle_stopper_service.cache_clear()


@cache
def idle_stopper_service() -> IdleStopperService:
    cfg = settings()
    metrics = _savings_metrics_override or EmfSavingsMetrics()
    ownership = CloudWatchAlarmOwnership(client("cloudwatch"), cfg.alarm_arn)
    progress = ProgressStopper(
        jobs=SageMakerJobs(client("sagemaker")),
        alarms=ownership,
        arming=CloudWatchAlarmArming(client("cloudwatch")),
        notifier=notifier(),
        policies=policy_store(),
        audit=audit_sink(),
        metrics=metrics,
        clock=now,
        naming=alarm_naming(),
    )
    return IdleStopperService(
        jobs=SageMakerJobs(client("sagemaker")),
        alarms=ownership,
        notifier=notifier(),
        policies=policy_store(),
        audit=audit_sink(),
        metrics=metrics,
        clock=now,
        naming=alarm_naming(),
        account_id=cfg.account_id,
        progress=progress,
    )


def clone_reactions() -> list[Reaction]:
    """Auto-resume and Spot fallback (they launch clones: SageMakerLauncher's permissions)."""
    cfg = settings()
    sagemaker = client("sagemaker")
    common: dict[str, Any] = {
        "jobs": SageMakerJobs(sagemaker),
        "launcher": SageMakerLauncher(sagemaker),
        "notifier": notifier(),
        "policies": policy_store(),
        "audit": audit_sink(),
        "clock": now,
        "shape": create_training_job_shape(sagemaker.meta.service_model),
        "role_patterns": (cfg.clone_role_pattern,),
    }
    return [AutoResumeReaction(**common), SpotFallbackReaction(**common)]


def reset() -> None:
    """Forget every cached object and the injected clock (tests and the simulator start fresh)."""
    set_clock(utc_now)
    set_audit_sink(None)
    set_savings_metrics(None)
    set_repair_metrics(None)
    for cached in (
        settings,
        client,
        policy_store,
        audit_sink,
        idempotency,
        job_events_service,
        alarm_naming,
        idle_stopper_service,
        reconciler_service,
        instance_catalog,
    ):
        cached.cache_clear()


# Cold start: what is imported by now (modules, classes, pydantic schemas) lives as long as the
# container. Moving it to the collector's permanent generation spares the later collections (building
# the boto3 clients on the first invocation triggers several) from walking it again; measured in
# BENCHMARKS.md (cold start).
gc.freeze()
