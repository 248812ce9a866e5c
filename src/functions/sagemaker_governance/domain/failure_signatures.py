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
        # would time the resume function out, so it is refused up front (matched ignoring case, in the form it is
        # matched in: words in order are read in one pass, ``matching_form``)
        problem = backtracking_problem(f"(?i){matching_form(value)}", searched=True)
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
    return re.compile(matching_form(pattern), re.IGNORECASE)


# What a piece between two ``.*`` of a words-in-order pattern may hold (``matching_form``): characters that each
# match one character other than a newline, or nothing (``\b``, ``\B``). An escaped letter or digit is one of the
# few named here (``\n``, ``\s``, ``\D``, ``\W`` can match a newline; ``\1`` is a reference).
_PIECE_ESCAPES: Final = frozenset("dwSbB")
_SPECIAL: Final = frozenset("()[]{}|?*+^$")


def matching_form(pattern: str) -> str:
    """``pattern`` as it is matched: words in order (``NCCL WARN.*Call to .* failed``, pieces of single characters
    between ``.*``) with each piece but the last found at its first place after the one before, in an atomic group
    (``NCCL WARN(?>.*?Call to ).* failed``); any other pattern as written.

    Both find a line alike (``re.search`` succeeds on the same lines; a signature asks nothing else of a match): a
    piece of single characters has one length, so the first place it matches ends first, and what follows it
    (``.*`` and the rest) can start at any later place it could have started at, on the same line (neither ``.``
    nor a piece's characters match a newline). So the one place the atomic group keeps is as good as any later one,
    where ``.*`` tries every place from the line's end back, and again for the next piece at every one of them:
    ``x.*y.*z.*w`` took 454 s on a crafted line of 2,000 characters (domain/backtracking.py), and words in order
    are what teams write for log messages (NCCL's ``NCCL WARN ... Call to ... failed``)."""
    pieces = _words_in_order(pattern)
    if pieces is None or len(pieces) < 3:
        return pattern
    first, *middle, last = pieces
    return first + "".join(f"(?>.*?{piece})" for piece in middle) + ".*" + last


def _words_in_order(pattern: str) -> list[str] | None:
    """The pieces of ``pattern`` between its ``.*`` (or ``.*?``) when each is made of single characters only (a
    literal, an escaped punctuation mark, ``.``, one of ``_PIECE_ESCAPES``); None otherwise."""
    pieces: list[str] = []
    piece: list[str] = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            escaped = pattern[at + 1 : at + 2]
            if not escaped or escaped == "\n" or (escaped.isalnum() and escaped not in _PIECE_ESCAPES):
                return None
            piece.append(pattern[at : at + 2])
            at += 2
            continue
        if char == "." and pattern[at + 1 : at + 2] == "*":
            pieces.append("".join(piece))
            piece = []
            at += 3 if pattern[at + 2 : at + 3] == "?" else 2
            continue
        if char in _SPECIAL or char == "\n":
            return None
        piece.append(char)
        at += 1
    pieces.append("".join(piece))
    if any(not piece for piece in pieces[1:-1]):
        return None  # ``.*.*``: not words in order (the checker judges it as written)
    return pieces
