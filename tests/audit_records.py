"""A member account's audit record and its member information, as the audit forwarder sends them (shared by
the forwarder's, the dead-letter queue's, the organization reports' and the audit view's tests)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagemaker_governance.audit import AuditRecord, Outcome

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MEMBER, REGION = "111111111111", "us-east-1"
MEMBER_INFO = {"account": MEMBER, "region": REGION, "stack": "sagemaker-governance", "version": "0.1.0"}


def record(job: str = "llm-pretrain", **overrides: Any) -> AuditRecord:
    base: dict[str, Any] = {
        "at": NOW,
        "trigger": "alarm",
        "event_id": None,
        "job_name": job,
        "job_arn": f"arn:aws:sagemaker:{REGION}:{MEMBER}:training-job/{job}",
        "job_status": "InProgress",
        "team": "nlp",
        "owner": "carol",
        "rule": "idle-gpu",
        "code": "idle.stop.idle",
        "action": "stop",
        "mode": "enforce",
        "outcome": Outcome.DONE,
        "reason": "GPU idle for 30 minutes",
    }
    return AuditRecord.model_validate({**base, **overrides})
