from __future__ import annotations

from sagemaker_governance.domain.rules import EvaluationContext, MaxRuntime
from tests.builders import job

RULE = MaxRuntime.model_validate({"type": "max-runtime", "max_hours": 24, "max_wait_hours": 48})


def test_within_limits_passes(ctx: EvaluationContext) -> None:
    assert RULE.evaluate(job(StoppingCondition={"MaxRuntimeInSeconds": 24 * 3600}), ctx) is None


def test_runtime_over_the_limit_violates(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(StoppingCondition={"MaxRuntimeInSeconds": 5 * 86400}), ctx)
    assert finding is not None and finding.observed["max_runtime_hours"] == 120
    assert "86400" in finding.remedy


def test_spot_wait_over_the_limit_violates(ctx: EvaluationContext) -> None:
    spot = job(
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 72 * 3600},
    )
    finding = RULE.evaluate(spot, ctx)
    assert finding is not None and "MaxWaitTimeInSeconds" in finding.message


def test_wait_time_is_ignored_for_on_demand_jobs(ctx: EvaluationContext) -> None:
    on_demand = job(StoppingCondition={"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 72 * 3600})
    assert RULE.evaluate(on_demand, ctx) is None


def test_missing_stopping_condition_is_inconclusive(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(StoppingCondition=None), ctx)
    assert finding is not None and not finding.conclusive


def test_a_wait_time_of_a_job_whose_source_does_not_say_spot_is_inconclusive(ctx: EvaluationContext) -> None:
    unsaid = job(
        EnableManagedSpotTraining=None,
        StoppingCondition={"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 72 * 3600},
    )
    finding = RULE.evaluate(unsaid, ctx)
    assert finding is not None and not finding.conclusive
    # a runtime over its limit is a violation whatever the job is
    over = job(EnableManagedSpotTraining=None, StoppingCondition={"MaxRuntimeInSeconds": 5 * 86400})
    assert (finding := RULE.evaluate(over, ctx)) is not None and finding.conclusive
