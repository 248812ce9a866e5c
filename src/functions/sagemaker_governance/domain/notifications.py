"""The versioned message we publish to people. Decision code builds it; the SNS adapter renders it.

Kinds and outcomes are enums; every headline is rendered by ``headline`` below, and nowhere else.
``smgov.notification/1`` items gained ``code`` (the decision's code), an optional field.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from sagemaker_governance.domain.decisions import Decision

NOTIFICATION_SCHEMA: Final = "smgov.notification/1"


class NotificationKind(StrEnum):
    """What a message is about (an SNS message attribute subscribers can filter on). An alarm guard's
    stops are ``<guard name>-stop`` (``guard_stop``), its notices ``<guard name>-notice``
    (``guard_notice``): the built-in guards' are listed here."""

    COMPLIANCE = "compliance"
    RESUME = "resume"
    SPOT_FALLBACK = "spot-fallback"
    IDLE_STOP = "idle-stop"
    PROGRESS_STOP = "progress-stop"
    EFFICIENCY_STOP = "efficiency-stop"
    EFFICIENCY_NOTICE = "efficiency-notice"
    TOLERANCE_IGNORED = "tolerance-ignored"  # a job's declared window (smgov:idle-minutes ...) was ignored

    @staticmethod
    def guard_stop(guard_name: str) -> str:
        return f"{guard_name}-stop"

    @staticmethod
    def guard_notice(guard_name: str) -> str:
        """A guard's nudge (no stop): ``efficiency-notice``."""
        return f"{guard_name}-notice"


class NotificationOutcome(StrEnum):
    """What happened to the job (an SNS message attribute too)."""

    STOPPED = "stopped"
    WOULD_STOP = "would-stop (audit mode)"
    ALREADY_ENDED = "already-ended"
    NOTIFIED = "notified"
    RESUMED = "resumed"
    WOULD_RESUME = "would-resume (audit mode)"


def headline(
    kind: str,
    outcome: NotificationOutcome,
    job_name: str,
    *,
    symptom: tuple[str, str] = ("", ""),
    clone: str | None = None,
    on_demand: bool = False,
) -> str:
    """Every message's headline. A guard's stop names its ``symptom``: (after "was stopped: ", after the
    job's name in audit mode); a clone names the new job."""
    job = f"Training job {job_name}"
    if kind in (NotificationKind.RESUME, NotificationKind.SPOT_FALLBACK):
        return _clone_headline(job, outcome, clone, on_demand=on_demand)
    if kind == NotificationKind.COMPLIANCE:
        if outcome is NotificationOutcome.STOPPED:
            return f"{job} was stopped: it violates governance policy"
        if outcome is NotificationOutcome.NOTIFIED:
            return f"{job}: governance warning"
        return f"{job} violates governance policy"
    was, looks = symptom
    if kind == NotificationKind.TOLERANCE_IGNORED:  # symptom: ("", the tag)
        return f"{job}: its tag {looks} was ignored (the team's window applies)"
    if outcome is NotificationOutcome.NOTIFIED:  # a guard's notice: nothing was stopped
        return f"{job} {looks}"
    if outcome is NotificationOutcome.STOPPED:
        return f"{job} was stopped: {was}"
    return f"{job} {looks} (audit mode: not stopped)"


def _clone_headline(job: str, outcome: NotificationOutcome, clone: str | None, *, on_demand: bool) -> str:
    if outcome is NotificationOutcome.NOTIFIED:  # a Spot move whose clone's name a failed clone holds
        return f"{job} stays on Spot: its clone {clone} exists but does not run (its Spot fallback is spent)"
    verb = "was resumed" if outcome is NotificationOutcome.RESUMED else "would be resumed"
    return f"{job} {verb}{' On-Demand' if on_demand else ''} as {clone}"


class NotificationItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule: str
    code: str | None = None
    action: str
    mode: str
    reason: str
    remedy: str | None = None


class Notification(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    schema_version: Literal["smgov.notification/1"] = Field(default=NOTIFICATION_SCHEMA, alias="schema")
    kind: str = Field(description="A NotificationKind: compliance, idle-stop, resume, spot-fallback, ...")
    job_name: str
    job_arn: str | None = None
    team: str | None = None
    owner: str | None = None
    headline: str
    outcome: NotificationOutcome
    items: tuple[NotificationItem, ...] = ()
    related_job: str | None = None
    # Why a failed job was resumed: its failure class, the matched log line(s) and host (auto-resume).
    diagnosis: dict[str, Any] | None = None

    @property
    def subject(self) -> str:
        """What of the job the message is about, when one delivery may tell a job's owner several messages of
        its kind: an ignored declaration is told per guard (its item's rule), each once. Empty for a kind told
        once per job and delivery."""
        if self.kind == NotificationKind.TOLERANCE_IGNORED and self.items:
            return self.items[0].rule
        return ""

    @staticmethod
    def items_from(decisions: tuple[Decision, ...] | list[Decision]) -> tuple[NotificationItem, ...]:
        return tuple(
            NotificationItem(
                rule=d.rule,
                code=d.code,
                action=d.action.value,
                mode=d.mode.value,
                reason=d.reason,
                remedy=d.remedy,
            )
            for d in decisions
        )
