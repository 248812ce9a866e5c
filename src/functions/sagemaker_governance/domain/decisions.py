"""What governance decides: a list of planned actions, each with its rule, mode and reason.

Decisions are data. The service layer executes them and writes one audit record per decision; the
``smgov explain`` command prints them. Nothing here talks to AWS.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Mode(StrEnum):
    AUDIT = "audit"
    ENFORCE = "enforce"


class Action(StrEnum):
    STOP = "stop"
    NOTIFY = "notify"
    CREATE_ALARM = "create-alarm"
    DELETE_ALARM = "delete-alarm"
    ARM_ALARM = "arm-alarm"  # enable a disarmed alarm's actions (the progress guard)
    CLONE = "clone"
    NONE = "none"


class Decision(BaseModel):
    """One governance decision about one job.

    ``code`` says what was decided and why, machine-readably and stably (``idle.stop.idle``,
    ``resume.skip.not-transient``): each capability defines its codes once (a ``StrEnum``), the README
    lists them all (a test checks). Match on the code, never on the English of ``reason``."""

    model_config = ConfigDict(frozen=True)

    rule: str
    code: str = Field(pattern=r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*){2,}$")
    action: Action
    mode: Mode
    reason: str
    remedy: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    exempted_by: str | None = None
    # The exact AWS request the action would send (PutMetricAlarm for create-alarm, CreateTrainingJob
    # for clone), so `smgov explain` can show a reviewer what would be created.
    request: dict[str, Any] | None = None

    @property
    def acts(self) -> bool:
        """True when the service should carry the action out (not audit mode, not exempt)."""
        return self.action is not Action.NONE and self.mode is Mode.ENFORCE and self.exempted_by is None

    def explain(self) -> dict[str, Any]:
        """The stable shape ``smgov explain --json`` prints for this decision."""
        out: dict[str, Any] = {
            "rule": self.rule,
            "code": self.code,
            "action": self.action.value,
            "mode": self.mode.value,
            "reason": self.reason,
        }
        if self.remedy:
            out["remedy"] = self.remedy
        if self.exempted_by:
            out["exempted_by"] = self.exempted_by
        if self.evidence:
            out["evidence"] = self.evidence
        if self.request is not None:
            key = "alarm" if self.action in (Action.CREATE_ALARM, Action.DELETE_ALARM) else "request"
            out[key] = self.request
        return out
