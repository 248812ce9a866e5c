from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase, preferences_note


class MaxInstanceCount(RuleBase):
    """Jobs may not request more than ``max`` instances in total (over all instance groups).

    Example:
        - id: max-instances
          type: max-instance-count
          max: 8
    """

    type: Literal["max-instance-count"]
    max: PositiveInt

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        count = job.largest_possible_instance_count
        if count is None:
            return Finding.unknown(self, "the job's instance count is not known")
        if count <= self.max:
            return None
        where = preferences_note(job)
        return Finding.of(
            self,
            f"{count} instances requested{where}, at most {self.max} allowed",
            f"Request at most {self.max} instances in total.",
            observed=count,
            expected=f"<= {self.max}",
        )
