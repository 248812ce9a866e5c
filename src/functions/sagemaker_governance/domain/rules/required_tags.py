from __future__ import annotations

import importlib
import re
from functools import partial
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from sagemaker_governance.domain.backtracking import backtracking_problem
from sagemaker_governance.domain.errors import PatternTimeout
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase
from sagemaker_governance.domain.tags import TAG_VALUE_MAX, tag_key_problem, tag_value_problem

LEAVE_OUT = "leave values and pattern out to allow any non-empty value"


def _match_width(pattern: str) -> tuple[int, int] | None:
    """The fewest and the most characters a match of ``pattern`` spans, as Python's own regular-expression
    parser computes them (``getwidth``); None when it cannot say (the parser is CPython's private module, so a
    Python without it rejects no pattern on this ground). Used only to reject what is certain: a pattern no
    match of which spans a character, or whose every match is longer than any tag value."""
    try:
        low, high = importlib.import_module("re._parser").parse(pattern).getwidth()
        return int(low), int(high)
    except Exception:  # anything: the analysis is an extra check, never a reason to reject
        return None


def _valid_key(key: str) -> str:
    problem = tag_key_problem(key)
    if problem is not None:
        raise ValueError(f"tag key {key!r}: {problem}, so no job could carry it and every job would be stopped")
    return key


TagKey = Annotated[str, AfterValidator(_valid_key)]


class TagConstraint(BaseModel):
    """What a required tag's value may be: any non-empty value, one of ``values``, or a full ``pattern`` match.

    A constraint no SageMaker tag value can meet is rejected: every job, however tagged, would violate it.
    ``values`` needs one entry a tag can hold (non-empty; botocore's ``TagValue``: at most 256 letters,
    numbers, spaces and ``_.:/=+-@``), that also matches ``pattern`` when both are given; ``pattern`` must be
    able to match a non-empty value of at most 256 characters. Entries that can never match next to one that
    can stay valid (they are dropped, as an empty one is)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    values: tuple[str, ...] | None = None
    pattern: str | None = None

    @field_validator("values")
    @classmethod
    def _some_value(cls, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
        # an empty tag counts as missing, and a value SageMaker refuses is on no job: a list without one
        # value a tag can hold allows no tag at all
        if values is not None and not any(tag_value_problem(value) is None for value in values):
            why = "; ".join(f"{value!r}: {tag_value_problem(value)}" for value in values) or "none listed"
            raise ValueError(
                f"values has no value a SageMaker tag can hold ({why}), so no tag would be allowed: "
                f"list the allowed values, or {LEAVE_OUT}"
            )
        return values

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None and not pattern.strip():
            raise ValueError(
                "pattern is empty: it would match only an empty tag, which counts as missing; give a pattern, "
                "or leave pattern out to allow any non-empty value"
            )
        if pattern is None:
            return pattern
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:  # too deep or too large: not usable
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
        width = _match_width(pattern)
        if width is not None and width[1] == 0:
            raise ValueError(
                f"pattern {pattern!r} matches only an empty tag (it consumes no character: anchors, lookarounds, "
                f"empty repeats), which counts as missing; give a pattern of the values to allow, or {LEAVE_OUT}"
            )
        if width is not None and width[0] > TAG_VALUE_MAX:
            raise ValueError(
                f"pattern {pattern!r} matches only values of {width[0]} characters or more; a SageMaker tag "
                f"value has at most {TAG_VALUE_MAX}"
            )
        return pattern

    @model_validator(mode="after")
    def _values_meet_pattern(self) -> TagConstraint:
        if self.values is None or self.pattern is None:
            return self
        if not any(tag_value_problem(value) is None and self.accepts(value) for value in self.values):
            raise ValueError(
                f"no value of values ({', '.join(repr(v) for v in self.values)}) matches pattern {self.pattern!r} "
                f"(a tag must meet both), so no tag would be allowed: correct one of them, or give only one"
            )
        return self

    def accepts(self, value: str) -> bool:
        if self.values is not None and value not in self.values:
            return False
        return self.pattern is None or re.fullmatch(self.pattern, value) is not None

    def describe(self) -> str:
        parts = []
        if self.values is not None:
            parts.append("one of " + ", ".join(repr(v) for v in self.values))
        if self.pattern is not None:
            parts.append(f"matching {self.pattern!r}")
        return " and ".join(parts) or "non-empty"


class RequiredTags(RuleBase):
    """Every job carries the listed tags, non-empty, and with an allowed value where one is set.

    Example:
        - id: cost-tags
          type: required-tags
          tags:
            team: {}
            cost-center: {pattern: "cc-[0-9]{4}"}
            env: {values: [dev, prod]}
    """

    type: Literal["required-tags"]
    tags: dict[TagKey, TagConstraint] = Field(min_length=1)

    @model_validator(mode="after")
    def _patterns_do_not_backtrack(self) -> RequiredTags:
        # Python's re has no timeout: one job's tag value would time out every compliance evaluation of it
        # (dead-lettered, and again at each reconciler run). domain/backtracking.py says what is refused.
        for key, constraint in self.tags.items():
            problem = None if constraint.pattern is None else backtracking_problem(constraint.pattern)
            if problem is not None:
                raise ValueError(
                    f"rule {self.id!r}, tag {key!r}: pattern {constraint.pattern!r} can take exponential time on a "
                    f"value it does not match: {problem}. Write it so that each character can be matched one "
                    f"way only (e.g. '[a-z0-9]+(-[a-z0-9]+)*', not '([a-z0-9]+-?)+')"
                )
        return self

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        if job.tags is None:
            return Finding.unknown(self, "the job's tags are not known")
        missing = sorted(key for key in self.tags if not job.tags.get(key, "").strip())
        bad: dict[str, str] = {}
        for key, constraint in sorted(self.tags.items()):
            if key in missing:
                continue
            value = job.tags[key]
            if constraint.pattern is None:
                accepted = constraint.accepts(value)
            else:
                # A pattern runs on the job's value in the evaluation's time budget: one the backtracking check
                # missed makes the whole rule inconclusive (a missing tag beside it included), never a stop
                try:
                    accepted = ctx.bounded(partial(constraint.accepts, value))
                except PatternTimeout as timeout:
                    return Finding.unfinished_match(self, f"tag {key}", constraint.pattern, timeout)
            if not accepted:
                bad[key] = value
        if not missing and not bad:
            return None
        problems = []
        if missing:
            problems.append("missing or empty tag(s): " + ", ".join(missing))
        for key, value in bad.items():
            problems.append(f"tag {key}={value!r} is not {self.tags[key].describe()}")
        remedy = (
            "Launch the job with "
            + ", ".join(f"{key} ({self.tags[key].describe()})" for key in [*missing, *bad])
            + " in Tags."
        )
        return Finding.of(
            self,
            "; ".join(problems),
            remedy,
            observed={"missing": missing, "invalid": bad},
            expected={key: c.describe() for key, c in self.tags.items()},
        )
