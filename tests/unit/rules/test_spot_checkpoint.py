from __future__ import annotations

from sagemaker_governance.domain.rules import EvaluationContext, SpotCheckpoint
from tests.builders import job

RULE = SpotCheckpoint.model_validate({"type": "spot-checkpoint"})


def test_default_action_is_notify() -> None:
    assert RULE.on_violation == "notify"


def test_spot_without_checkpoint_is_flagged(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(EnableManagedSpotTraining=True), ctx)
    assert finding is not None and "CheckpointConfig" in finding.remedy


def test_spot_with_checkpoint_passes(ctx: EvaluationContext) -> None:
    assert (
        RULE.evaluate(job(EnableManagedSpotTraining=True, CheckpointConfig={"S3Uri": "s3://b/ck/"}), ctx) is None
    )


def test_on_demand_without_checkpoint_passes(ctx: EvaluationContext) -> None:
    assert RULE.evaluate(job(), ctx) is None


def test_an_event_that_does_not_say_spot_is_inconclusive_not_on_demand(ctx: EvaluationContext) -> None:
    # No AWS sample of the state-change event shows EnableManagedSpotTraining: its absence proves nothing
    finding = RULE.evaluate(job(EnableManagedSpotTraining=None), ctx)
    assert finding is not None and not finding.conclusive
    assert (
        RULE.evaluate(job(EnableManagedSpotTraining=None, CheckpointConfig={"S3Uri": "s3://b/ck/"}), ctx) is None
    )
