"""What every compliance rule shares: identity, mode override, the action on violation, and a finding."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.errors import PatternTimeout
from sagemaker_governance.domain.job import TrainingJob

RULE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
T = TypeVar("T")


def preferences_note(job: TrainingJob) -> str:
    """What a finding on a job still awaiting its instance selection adds: the type is only a candidate."""
    return " (in InstancePreferences: SageMaker may select it)" if job.awaits_instance_selection else ""


def unbounded(work: Callable[[], T]) -> T:
    """``work()`` in no time budget: what a pattern runs in where the service gives none (offline, the tools)."""
    return work()


class EvaluationContext(BaseModel):
    """What a rule may know besides the job: the time, injected so rules stay pure, and what a match of one of the
    policy's patterns on the job's values runs in (``bounded``: the evaluation's time budget, which raises
    ``PatternTimeout`` when it runs out, ``service/compliance.py``; unbounded where none is given)."""

    model_config = ConfigDict(frozen=True)

    now: datetime
    bounded: Callable[[Callable[[], bool]], bool] = unbounded


class Finding(BaseModel):
    """A rule's verdict on one job: a violation, or a rule that could not decide (``conclusive=False``)."""

    model_config = ConfigDict(frozen=True)

    rule: str
    message: str
    remedy: str
    observed: Any = None
    expected: Any = None
    conclusive: bool = True
    # A pattern that did not finish matching in the evaluation's time budget (``unfinished``): what it matched, the
    # pattern, the budget
    unfinished: dict[str, Any] | None = None

    @classmethod
    def of(cls, rule: RuleBase, message: str, remedy: str, *, observed: Any, expected: Any) -> Finding:
        return cls(rule=rule.id, message=message, remedy=remedy, observed=observed, expected=expected)

    @classmethod
    def unknown(cls, rule: RuleBase, message: str) -> Finding:
        return cls(rule=rule.id, message=message, remedy="", conclusive=False)

    @classmethod
    def unfinished_match(cls, rule: RuleBase, subject: str, pattern: str, timeout: PatternTimeout) -> Finding:
        """The rule could not decide: its ``pattern`` did not finish matching ``subject`` (``tag cost-center``) within
        the evaluation's time budget. Not a violation (nothing is stopped on a pattern that could not be matched); the
        pattern is named so that the policy's author can fix it: it would take as long at every evaluation."""
        return cls(
            rule=rule.id,
            message=f"{subject}: pattern {pattern!r} did not finish matching within {timeout.seconds:g} s",
            remedy="",
            conclusive=False,
            unfinished=timeout.naming(pattern, subject).evidence(),
        )


class RuleBase(BaseModel):
    """Fields every rule has. ``id`` defaults to the rule's ``type``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=RULE_ID_PATTERN, description="Unique rule id; overrides match on it.")
    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy's global mode for this rule.")
    on_violation: Literal["stop", "notify"] = "stop"

    @model_validator(mode="before")
    @classmethod
    def _default_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "id" not in data and isinstance(data.get("type"), str):
            return {**data, "id": data["type"]}
        return data

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:  # pragma: no cover
        raise NotImplementedError
