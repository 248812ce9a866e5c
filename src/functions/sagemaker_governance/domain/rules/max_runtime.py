from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase


class MaxRuntime(RuleBase):
    """``StoppingCondition.MaxRuntimeInSeconds`` is at most ``max_hours``; for Managed Spot jobs
    ``MaxWaitTimeInSeconds`` is at most ``max_wait_hours`` (when set).

    Example:
        - id: max-runtime
          type: max-runtime
          max_hours: 72
          max_wait_hours: 96
    """

    type: Literal["max-runtime"]
    max_hours: PositiveFloat = Field(le=28 * 24)
    max_wait_hours: PositiveFloat | None = Field(default=None, le=28 * 24)

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        runtime = job.stopping.max_runtime_seconds
        if runtime is None:
            return Finding.unknown(self, "the job's MaxRuntimeInSeconds is not known")
        problems: list[str] = []
        observed: dict[str, float] = {"max_runtime_hours": round(runtime / 3600, 3)}
        expected: dict[str, float] = {"max_runtime_hours": self.max_hours}
        if runtime > self.max_hours * 3600:
            problems.append(
                f"MaxRuntimeInSeconds is {runtime} ({runtime / 3600:.1f} h), limit {self.max_hours:g} h"
            )
        wait = job.stopping.max_wait_seconds
        if job.spot and self.max_wait_hours is not None and wait is not None:
            observed["max_wait_hours"] = round(wait / 3600, 3)
            expected["max_wait_hours"] = self.max_wait_hours
            if wait > self.max_wait_hours * 3600:
                problems.append(
                    f"MaxWaitTimeInSeconds is {wait} ({wait / 3600:.1f} h), limit {self.max_wait_hours:g} h"
                )
        if not problems:
            if self.max_wait_hours is not None and wait is not None and not job.spot_known:
                return Finding.unknown(self, "the source does not say whether the job is Managed Spot")
            return None
        limit_seconds = int(self.max_hours * 3600)
        remedy = f"Set StoppingCondition.MaxRuntimeInSeconds <= {limit_seconds}"
        if self.max_wait_hours is not None:
            remedy += f" and MaxWaitTimeInSeconds <= {int(self.max_wait_hours * 3600)}"
        return Finding.of(self, "; ".join(problems), remedy + ".", observed=observed, expected=expected)
