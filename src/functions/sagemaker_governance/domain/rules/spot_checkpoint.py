from __future__ import annotations

from typing import Literal

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase


class SpotCheckpoint(RuleBase):
    """A Managed Spot job without ``CheckpointConfig`` restarts from scratch after every interruption
    and cannot be resumed. Flagged; by default only the owner is told (``on_violation: notify``).

    Example:
        - id: spot-checkpoint
          type: spot-checkpoint
          on_violation: notify
    """

    type: Literal["spot-checkpoint"]
    on_violation: Literal["stop", "notify"] = "notify"

    def evaluate(self, job: TrainingJob, ctx: EvaluationContext) -> Finding | None:
        if job.checkpoint_s3_uri:
            return None
        if not job.spot_known:  # an event may leave EnableManagedSpotTraining out: no proof of On-Demand
            return Finding.unknown(self, "the source does not say whether the job is Managed Spot")
        if not job.spot:
            return None
        return Finding.of(
            self,
            "Managed Spot training without CheckpointConfig: an interruption loses all progress",
            "Set CheckpointConfig.S3Uri (and save checkpoints to /opt/ml/checkpoints) so the job can resume.",
            observed={"EnableManagedSpotTraining": True, "CheckpointConfig": None},
            expected={"CheckpointConfig.S3Uri": "an S3 URI"},
        )
