"""The schema a team's policy writes about failures: signatures and class verdicts (``resume.signatures``,
``resume.classes``; checked against the built-in taxonomy by ``recovery_policy.py``).

Every function validates the whole policy, so every function builds these models; the taxonomy itself
and the classification are in ``failures.py``, read only when a failure is classified or a policy names
failure classes or signatures (cold start, BENCHMARKS.md).
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from sagemaker_governance.domain.backtracking import backtracking_problem

MAX_PATTERN_CHARS: Final = 400
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class Verdict(StrEnum):
    RESUME = "resume"
    SKIP = "skip"


class Role(StrEnum):
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    GENERIC = "generic"


class Where(StrEnum):
    REASON = "reason"  # the job's FailureReason
    LOG = "log"  # the hosts' log lines
    ANY = "any"


def check_name(value: str, what: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be kebab-case (a-z, 0-9, -; at most 63 characters)")
    return value


class Signature(BaseModel):
    """One recognisable failure message (built in, or a team's in ``resume.signatures``).

    Example:
        - id: my-plugin-transport
          class: interconnect
          pattern: "MYPLUGIN: transport to rank \\\\d+ lost"
          where: log            # reason | log | any (default)
          role: cause           # cause (default) | consequence | generic
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    failure_class: str = Field(alias="class")
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    role: Role = Role.CAUSE
    where: Where = Where.ANY
    source: str | None = Field(default=None, description="Where the message text comes from.")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_name(value, "signature id")

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the pattern is empty")
        try:
            re.compile(value, re.IGNORECASE)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        # Python's re has no timeout: a pattern that can backtrack exponentially on a long non-matching log line
        # would time the resume function out, so it is refused up front (matched ignoring case, as it is used)
        problem = backtracking_problem(f"(?i){value}", searched=True)
        if problem is not None:
            raise ValueError(f"the pattern could backtrack for ever: {problem}")
        return value

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as written (``class``), so a dumped policy validates again (team merges, ``policy show``)."""
        out: dict[str, Any] = handler(self)
        if "failure_class" in out:
            out = {("class" if key == "failure_class" else key): value for key, value in out.items()}
        return out

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def applies_to(self, where: Where) -> bool:
        return self.where is Where.ANY or self.where is where


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)
