from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import Field, field_validator

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase, preferences_note


def _outside_brackets(glob: str) -> str:
    """The characters of an ``fnmatch`` glob outside its ``[...]`` sets (as fnmatch reads them: ``]`` right after
    ``[`` or ``[!`` is a member; a ``[`` never closed is a literal)."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            close = glob.find("]", j)
            if close >= 0:
                i = close + 1
                continue
        out.append(glob[i])
        i += 1
    return "".join(out)


def glob_problem(glob: str) -> str | None:
    """Why the glob matches no SageMaker instance type; None when it may match one. Every type is lower case
    (``TrainingInstanceType``, botocore's SageMaker model; a test checks it), so an upper-case letter outside a
    ``[...]`` set matches none."""
    if not glob.strip():
        return "empty"
    upper = sorted({c for c in _outside_brackets(glob) if c != c.lower()})
    if upper:
        return f"instance types are lower case ({', '.join(upper)}): write {glob.lower()!r}"
    return None


class AllowedInstanceTypes(RuleBase):
    """Every instance group of the job uses an instance type matching one of the glob ``patterns`` (at least
    one of which can match a type: an empty glob, or one with upper-case letters, matches none).

    Example:
        - id: instance-types
          type: allowed-instance-types
          patterns: ["ml.g5.*", "ml.p4d.24xlarge", "ml.m5.*"]
    """

    type: Literal["allowed-instance-types"]
    patterns: tuple[str, ...] = Field(min_length=1)

    @field_validator("patterns")
    @classmethod
    def _some_type_matches(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        # globs that match no instance type would stop every job: at least one must be able to match
        if not any(glob_problem(p) is None for p in patterns):
            why = "; ".join(f"{p!r}: {glob_problem(p)}" for p in patterns)
            raise ValueError(
                f"no pattern can match an instance type ({why}), so every job would be stopped: give globs such "
                "as 'ml.g5.*' or 'ml.p4d.24xlarge'"
            )
        return patterns

    def allows(self, instance_type: str) -> bool:
        return any(fnmatchcase(instance_type, p) for p in self.patterns)

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        types = job.possible_instance_types
        if not types:
            return Finding.unknown(self, "the job's instance types are not known")
        denied = sorted({t for t in types if not self.allows(t)})
        if not denied:
            return None
        where = preferences_note(job)
        return Finding.of(
            self,
            "instance type(s) not allowed: " + ", ".join(denied) + where,
            "Use one of " + ", ".join(self.patterns) + ", or ask the platform team for a team override.",
            observed=denied,
            expected=list(self.patterns),
        )
