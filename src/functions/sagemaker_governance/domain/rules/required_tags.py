from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase


class TagConstraint(BaseModel):
    """What a required tag's value may be: any non-empty value, one of ``values``, or a full ``pattern`` match."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    values: tuple[str, ...] | None = None
    pattern: str | None = None

    @field_validator("values")
    @classmethod
    def _some_value(cls, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
        # an empty tag counts as missing: a list without a non-empty value allows no tag at all
        if values is not None and not any(value.strip() for value in values):
            raise ValueError(
                "values has no non-empty value (an empty tag counts as missing), so no tag would be allowed: "
                "list the allowed values, or leave values out to allow any non-empty value"
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
        if pattern is not None:
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:  # too deep or too large: not usable
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
        return pattern

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
    tags: dict[str, TagConstraint] = Field(min_length=1)

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        if job.tags is None:
            return Finding.unknown(self, "the job's tags are not known")
        missing = sorted(key for key in self.tags if not job.tags.get(key, "").strip())
        bad = {
            key: job.tags[key]
            for key, constraint in sorted(self.tags.items())
            if key not in missing and not constraint.accepts(job.tags[key])
        }
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
