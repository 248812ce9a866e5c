"""The versioned message we publish to people. Decision code builds it; the SNS adapter renders it."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from sagemaker_governance.domain.decisions import Decision

NOTIFICATION_SCHEMA: Final = "smgov.notification/1"


class NotificationItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule: str
    action: str
    mode: str
    reason: str
    remedy: str | None = None


class Notification(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    schema_version: Literal["smgov.notification/1"] = Field(default=NOTIFICATION_SCHEMA, alias="schema")
    kind: str = Field(description="compliance, idle-stop, resume, spot-fallback, ...")
    job_name: str
    job_arn: str | None = None
    team: str | None = None
    owner: str | None = None
    headline: str
    outcome: str
    items: tuple[NotificationItem, ...] = ()
    related_job: str | None = None
    # Why a failed job was resumed: its failure class, the matched log line(s) and host (auto-resume).
    diagnosis: dict[str, Any] | None = None

    @staticmethod
    def items_from(decisions: tuple[Decision, ...] | list[Decision]) -> tuple[NotificationItem, ...]:
        return tuple(
            NotificationItem(
                rule=d.rule, action=d.action.value, mode=d.mode.value, reason=d.reason, remedy=d.remedy
            )
            for d in decisions
        )
