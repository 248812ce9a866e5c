"""The composition root as a value: what every function builds once per Lambda container.

A ``Root`` is built from settings, a boto3 session and a clock (plus optional sinks for the audit records
and the business metrics, and the alarm guards to run: the registered ones unless told otherwise). It builds the shared pieces on first use and caches them: one boto3 client
per service, the policy store, the audit sink, the idempotency records, the notifier. Each function's
own services are built by a builder of its module (``composition/job_events.py`` ...), on its first
invocation, and cached in the root too (``root.service(builder)``): a function imports only what it uses.

**The one seam.** Lambda imports a handler by the template's ``Handler`` path; the handler asks
``current()`` for the root. In Lambda nothing is provided, so ``current()`` builds the root from the
environment on the first invocation and keeps it for the life of the container (what it builds is kept
out of the collector's way: ``_built_for_good``). The simulator, tests and `smgov` tools build their own
root (their clock, session, sinks) and run the handlers inside ``provide(root)``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config

from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.audit import AuditRecord, AuditSink, ForwardingAuditSink, LogAuditSink, log_unforwarded
from sagemaker_governance.business_metrics import BusinessMetricsPort, EmfBusinessMetrics
from sagemaker_governance.domain.guards.base import AlarmNaming, Guard
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.service.idempotency import (
    CLONE_NOTICE_TTL_SECONDS,
    CloneNotices,
    ComplianceNotices,
    Duplicate,
    GuardNotices,
    OnceAuditSink,
    OnceNotifier,
    ToleranceNotices,
    deliver,
)
from sagemaker_governance.service.ports import Clock, NotifierPort
from sagemaker_governance.settings import Settings

if TYPE_CHECKING:  # imported when first used: the reconciler reads no queue
    from sagemaker_governance.adapters.queue import QueueVisibility

T = TypeVar("T")
R = TypeVar("R")

# Retries are botocore's job, never a hand-written loop. `standard` mode: exponential backoff with full
# jitter (random x 2^(attempt-1) seconds, capped at 20 s) and a per-client retry quota. The sizing is in
# docs/resilience.md.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20)
# CloudWatch allows 3 PutMetricAlarm and 3 DeleteAlarms requests per second per account and region: a
# burst of jobs is throttled there first. Six attempts wait at most 1+2+4+8+16 = 31 s (15.5 s on average)
# in backoff; the queue-fed functions' 300 s timeout holds several such waits, and a batch stops taking
# records with less than 40 s left (handlers/_batch.py). Not `adaptive`: its client-side rate limiter lives
# in one client of one Lambda instance, so concurrent instances do not share what it learns; the event
# source mappings' maximum concurrency bounds the account-wide rate instead.
# (botocore's ``max_attempts`` counts retries; ``total_max_attempts`` counts the first request too.)
SERVICE_CONFIGS: dict[str, Config] = {
    "cloudwatch": CLIENT_CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 6})),
}

# The client that makes a record going back to its queue visible sooner (adapters/queue.py): the call is made at
# the end of an invocation that may have little time left, and failing costs only the queue's own timeout. Two
# attempts (one retry), 2 s to connect, 5 s to read: at most about 15 s (handlers/_batch.py waits for 20 s left).
VISIBILITY_CONFIG = CLIENT_CONFIG.merge(
    Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=2, read_timeout=5)
)


# How long a delivery's claim is held when the invocation's remaining time is unknown (no Lambda context):
# the event-driven functions' timeout (template.yaml).
DEFAULT_HOLD_SECONDS = 300.0


def utc_now() -> datetime:
    return datetime.now(UTC)


class Root:
    """Clients, shared adapters and the functions' services, built on first use and kept."""

    def __init__(
        self,
        settings: Settings,
        session: boto3.session.Session,
        clock: Clock = utc_now,
        *,
        audit: AuditSink | None = None,
        metrics: BusinessMetricsPort | None = None,
        guards: tuple[Guard[Any], ...] = GUARDS,
        container: bool = False,
    ) -> None:
        self.settings = settings
        self.session = session
        self.clock = clock
        self._audit = audit
        self._clients: dict[str, Any] = {}
        self._services: dict[Callable[[Root], Any], Any] = {}
        self.metrics: BusinessMetricsPort = metrics or EmfBusinessMetrics()
        self.guards = guards  # the registered alarm guards (domain/guards/registry.py); tests add their own
        # the Lambda container's own root (``from_environment``): what it builds lives as long as the process
        self._container = container

    @classmethod
    def from_environment(cls) -> Root:
        """What a Lambda container builds: settings from its environment, a new boto3 session, UTC now."""
        return cls(Settings.from_env(), boto3.session.Session(), container=True)

    # ---- shared pieces -------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock()

    def client(self, service: str) -> Any:
        """One client per service (its retry configuration: ``SERVICE_CONFIGS``, else ``CLIENT_CONFIG``)."""
        return self._client(service, service, SERVICE_CONFIGS.get(service, CLIENT_CONFIG))

    def _client(self, key: str, service: str, config: Config) -> Any:
        if key not in self._clients:
            self._clients[key] = self.session.client(service, config=config)  # type: ignore[call-overload]
        return self._clients[key]

    @cached_property
    def queue_visibility(self) -> QueueVisibility:
        """Records going back to their queue made visible sooner; its own SQS client (``VISIBILITY_CONFIG``),
        built at the first record that goes back."""
        from sagemaker_governance.adapters.queue import QueueVisibility

        return QueueVisibility(lambda: self._client("sqs/visibility", "sqs", VISIBILITY_CONFIG))

    @property
    def client_count(self) -> int:
        return len(self._clients)

    @cached_property
    def policy_store(self) -> PolicyStore:
        cfg = self.settings
        return PolicyStore(
            base=cfg.base_policy(),
            parameter_name=cfg.policy_parameter_name,
            ssm_client=self.client("ssm") if cfg.policy_parameter_name else None,
            cache_seconds=cfg.policy_cache_seconds,
            clock=self.now,
            metrics=self.metrics,
        )

    @cached_property
    def idempotency(self) -> DeliveryLedger | None:
        """The delivery ledger (None when no table is configured: every delivery is processed)."""
        cfg = self.settings
        if cfg.idempotency_table is None:
            return None
        return DeliveryLedger(self.client("dynamodb"), cfg.idempotency_table, cfg.idempotency_ttl_seconds)

    @cached_property
    def _notices_ledger(self) -> DeliveryLedger | None:
        """The delivery ledger's table for notices told once per subject, whoever tells (its items kept at least
        ``CLONE_NOTICE_TTL_SECONDS``: the reconciler looks that far back for clones; None: no table)."""
        cfg = self.settings
        if cfg.idempotency_table is None:
            return None
        ttl = max(cfg.idempotency_ttl_seconds, CLONE_NOTICE_TTL_SECONDS)
        return DeliveryLedger(self.client("dynamodb"), cfg.idempotency_table, ttl)

    @cached_property
    def clone_notices(self) -> CloneNotices | None:
        """Each clone's owner told once, whoever made it (``resume:<clone>``; None: no table)."""
        ledger = self._notices_ledger
        return CloneNotices(ledger, self.now) if ledger is not None else None

    @cached_property
    def guard_notices(self) -> GuardNotices | None:
        """A guard's notices told once per state change of its notice alarm, and asked before a stop that needs one
        (``guard-notice:<alarm> <time>``; None: no table)."""
        ledger = self._notices_ledger
        return GuardNotices(ledger, self.now) if ledger is not None else None

    @cached_property
    def tolerance_notices(self) -> ToleranceNotices | None:
        """Each ignored tolerance declaration told once per job and guard, whoever creates the alarms
        (``tolerance:<job>:<guard>:<value>``; None: no table)."""
        ledger = self._notices_ledger
        return ToleranceNotices(ledger, self.now) if ledger is not None else None

    @cached_property
    def compliance_notices(self) -> ComplianceNotices | None:
        """Each compliance stop's owner told once, whoever tells (``compliance:<job>``; None: no table)."""
        ledger = self._notices_ledger
        return ComplianceNotices(ledger, self.now) if ledger is not None else None

    @cached_property
    def audit_forwarder(self) -> AuditForwarder | None:
        """The central audit view's first hop (None when this stack forwards nothing: AUDIT_BUS_NAME empty)."""
        cfg = self.settings
        if cfg.audit_bus_name is None:
            return None
        return AuditForwarder(
            self.client("events"),
            self.client("sqs"),
            bus_name=cfg.audit_bus_name,
            dead_letter_queue_url=cfg.dead_letter_queue_url,
            member={
                "account": cfg.account_id,
                "region": cfg.region,
                "stack": cfg.stack_name,
                "version": cfg.stack_version,
            },
            on_lost=log_unforwarded,
        )

    @cached_property
    def audit(self) -> AuditSink:
        """The audit sink (the given one, else the log; then the central bus when this stack forwards):
        each record once per delivery."""
        sink = self._audit or LogAuditSink()
        if self.settings.audit_bus_name is not None:  # the forwarder (and its clients) at the first record
            sink = ForwardingAuditSink(sink, self._forward)
        return OnceAuditSink(sink)

    def _forward(self, record: AuditRecord) -> None:
        forwarder = self.audit_forwarder
        if forwarder is not None:
            forwarder.forward(record)

    def notifier(self) -> NotifierPort:
        """The SNS notifier: each notification once per delivery."""
        return OnceNotifier(SnsNotifier(self.client("sns"), self.settings.notifications_topic_arn))

    @cached_property
    def alarm_naming(self) -> AlarmNaming:
        cfg = self.settings
        return AlarmNaming(
            prefix=cfg.idle_alarm_prefix, managed_by=cfg.stack_name, alarm_topic_arn=cfg.alarm_topic_arn
        )

    # ---- the functions' services ----------------------------------------------------------------

    def service(self, build: Callable[[Root], T]) -> T:
        """``build(self)``, once: a function's service lives as long as its container (the container's
        root builds it with the collector paused: ``_built_for_good``)."""
        if build not in self._services:
            if self._container:
                with _built_for_good():
                    self._services[build] = build(self)
            else:
                self._services[build] = build(self)
        return self._services[build]  # type: ignore[no-any-return]

    def forget(self, build: Callable[[Root], Any]) -> None:
        """Drop a built service (tests: what a new container would see)."""
        self._services.pop(build, None)

    def process_once(self, key: str, owner: str | None, context: Any, process: Callable[[], R]) -> R | Duplicate:
        """Run a delivery's processing once per delivery key (handlers call this around the service).

        ``owner``: who retries this delivery when it fails: the SQS message (its id), else the invocation
        (``None``: the Lambda request id). Its claim is held for the invocation's remaining time."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        return deliver(
            self.idempotency,
            key,
            process,
            owner=owner or str(getattr(context, "aws_request_id", "") or "local"),
            now=self.now(),
            hold_seconds=remaining() / 1000 if callable(remaining) else DEFAULT_HOLD_SECONDS,
        )


@contextmanager
def _built_for_good() -> Iterator[None]:
    """Cold start: the first invocation's build of a function's service (its boto3 clients parse their
    service models: tens of thousands of objects, no garbage) starts about twenty collections that walk
    them and find nothing. The collector is paused while it builds; once built, what exists is frozen
    (kept out of later collections: it lives as long as the container) and the collector resumes as it
    was (a process that had paused it keeps it paused). A build that raises freezes nothing. Measured in
    BENCHMARKS.md (cold start)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if running:
            gc.enable()


_provided: Root | None = None


class LazyClient:
    """A boto3 client built by the root on its first call (the cold start does not pay for it)."""

    def __init__(self, root: Root, service: str) -> None:
        self._root = root
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._root.client(self._service), name)


def current() -> Root:
    """The root the handlers use: the provided one, else the container's own (built on first call)."""
    global _provided  # noqa: PLW0603
    if _provided is None:
        _provided = Root.from_environment()
    return _provided


@contextmanager
def provide(root: Root) -> Iterator[Root]:
    """Run handlers on ``root`` for the duration of the block (the simulator, tests, `smgov`)."""
    global _provided  # noqa: PLW0603
    saved, _provided = _provided, root
    try:
        yield root
    finally:
        _provided = saved


def freeze_imports() -> None:
    """Called at the end of each function's builder module, once everything it runs is imported.

    Cold start: what is imported by then (modules, classes, pydantic schemas) lives as long as the
    container. Moving it to the collector's permanent generation spares the later collections from
    walking it again; measured in BENCHMARKS.md (cold start)."""
    gc.freeze()
