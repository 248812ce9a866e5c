"""The audit record: the outbound contract auditors query in CloudWatch Logs Insights. Versioned.

Every governance decision, "no action" included, writes exactly one record through the Powertools
logger (under the ``audit`` key, message ``governance decision``, at INFO whatever the functions' LogLevel)
and one low-cardinality EMF metric (``Decisions`` by rule, action and outcome). Change a field's meaning
only with a new schema version.

Versions: ``smgov.audit/2`` adds ``code``, the decision's stable machine-readable code (README, "Decision
codes"). ``smgov.audit/1`` records (no code) still validate: ``code`` is then ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal, Protocol

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from pydantic import BaseModel, ConfigDict, Field

from sagemaker_governance.domain.decisions import Decision
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.observability import AUDIT_KEY, NAMESPACE, logger, metrics

AUDIT_SCHEMA: Final = "smgov.audit/2"
AUDIT_SCHEMAS: Final = ("smgov.audit/1", "smgov.audit/2")  # what readers accept
AUDIT_MESSAGE = "governance decision"


class Outcome(StrEnum):
    DONE = "done"  # the action was carried out
    ALREADY_DONE = "already-done"  # nothing to do: the desired state already held (e.g. job already stopped)
    AUDIT_ONLY = "audit-only"  # audit mode: recorded, not acted on
    NO_ACTION = "no-action"  # the decision was to do nothing
    EXEMPTED = "exempted"  # a policy exemption applied
    SKIPPED = "skipped"  # do no harm: data missing or the job moved on; nothing done, reason says why
    FAILED = "failed"  # the action was attempted and failed (the invocation is retried)
    DEFERRED = "deferred"  # the action was refused for a rate quota; a later run (the reconciler) does it


class AuditRecord(BaseModel):
    schema_version: Literal["smgov.audit/1", "smgov.audit/2"] = Field(default=AUDIT_SCHEMA, alias="schema")
    at: datetime
    trigger: str = Field(description="What caused the decision: job-state-change, alarm, reconcile, ...")
    event_id: str | None
    job_name: str
    job_arn: str | None
    job_status: str | None
    team: str | None
    owner: str | None
    rule: str
    code: str | None = Field(default=None, description="The decision's code (None only in smgov.audit/1).")
    action: str
    mode: str
    outcome: Outcome
    reason: str
    remedy: str | None = None
    exempted_by: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    policy_digest: str | None = None

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    @classmethod
    def of(
        cls,
        decision: Decision,
        *,
        job: TrainingJob,
        outcome: Outcome,
        at: datetime,
        trigger: str,
        event_id: str | None,
        team_tag: str,
        owner_tag: str,
        policy_digest: str | None,
        reason: str | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> AuditRecord:
        return cls(
            at=at,
            trigger=trigger,
            event_id=event_id,
            job_name=job.name,
            job_arn=job.arn,
            job_status=job.status,
            team=job.tag(team_tag),
            owner=job.tag(owner_tag),
            rule=decision.rule,
            code=decision.code,
            action=decision.action.value,
            mode=decision.mode.value,
            outcome=outcome,
            reason=reason or decision.reason,
            remedy=decision.remedy,
            exempted_by=decision.exempted_by,
            evidence={**decision.evidence, **(evidence or {})},
            policy_digest=policy_digest,
        )

    def as_log(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class AuditSink(Protocol):
    def write(self, record: AuditRecord) -> None: ...


class LogAuditSink:
    """Writes each record as one structured log line and one EMF metric line. The line is written whatever
    the functions' LogLevel (observability.py: it governs the diagnostics only)."""

    def write(self, record: AuditRecord) -> None:
        logger.info(AUDIT_MESSAGE, extra={AUDIT_KEY: record.as_log()})
        metrics.add_metric(name="DecisionsRecorded", unit=MetricUnit.Count, value=1)
        with single_metric(name="Decisions", unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as metric:
            metric.add_dimension(name="rule", value=record.rule)
            metric.add_dimension(name="action", value=record.action)
            metric.add_dimension(name="outcome", value=record.outcome.value)


class MemoryAuditSink:
    """Keeps records in memory (the offline `smgov explain`, the simulator, tests); optionally forwards."""

    def __init__(self, forward: Callable[[AuditRecord], None] | None = None) -> None:
        self.records: list[AuditRecord] = []
        self._forward = forward

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)
        if self._forward is not None:
            self._forward(record)


class ForwardingAuditSink:
    """Writes each record to ``inner`` (the local log line first), then hands it to ``forward`` (the
    central audit bus: adapters/audit_forwarder.py). Forwarding never fails the decision: its failures go
    to the dead-letter queue, or are logged and counted (``log_unforwarded``)."""

    def __init__(self, inner: AuditSink, forward: Callable[[AuditRecord], None]) -> None:
        self._inner = inner
        self._forward = forward

    def write(self, record: AuditRecord) -> None:
        self._inner.write(record)
        self._forward(record)


def log_unforwarded(record: AuditRecord, error: str) -> None:
    """A record neither forwarded nor dead-lettered: it stays in this log group; say so loudly."""
    logger.error("audit record not forwarded", job=record.job_name, rule=record.rule, error=error)
    with single_metric(name="AuditRecordsNotForwarded", unit=MetricUnit.Count, value=1, namespace=NAMESPACE):
        pass
