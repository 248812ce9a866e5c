from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import Field

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase, preferences_note


class AllowedInstanceTypes(RuleBase):
    """Every instance group of the job uses an instance type matching one of the glob ``patterns``.

    Example:
        - id: instance-types
          type: allowed-instance-types
          patterns: ["ml.g5.*", "ml.p4d.24xlarge", "ml.m5.*"]
    """

    type: Literal["allowed-instance-types"]
    patterns: tuple[str, ...] = Field(min_length=1)

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
