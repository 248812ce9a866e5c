from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase


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
        if not job.instance_groups:
            return Finding.unknown(self, "the job's instance count is not known")
        if job.total_instance_count <= self.max:
            return None
        return Finding.of(
            self,
            f"{job.total_instance_count} instances requested, at most {self.max} allowed",
            f"Request at most {self.max} instances in total.",
            observed=job.total_instance_count,
            expected=f"<= {self.max}",
        )
