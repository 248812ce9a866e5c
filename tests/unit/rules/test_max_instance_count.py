from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.rules import EvaluationContext, MaxInstanceCount
from tests.builders import job

RULE = MaxInstanceCount.model_validate({"type": "max-instance-count", "max": 4})


def test_at_the_limit_passes(ctx: EvaluationContext) -> None:
    assert RULE.evaluate(job(ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 4}), ctx) is None


def test_over_the_limit_summed_over_groups_violates(ctx: EvaluationContext) -> None:
    hetero = job(
        ResourceConfig={
            "InstanceGroups": [
                {"InstanceGroupName": "a", "InstanceType": "ml.g5.2xlarge", "InstanceCount": 3},
                {"InstanceGroupName": "b", "InstanceType": "ml.c5.xlarge", "InstanceCount": 2},
            ]
        }
    )
    finding = RULE.evaluate(hetero, ctx)
    assert finding is not None and finding.observed == 5


def test_zero_is_not_a_valid_limit() -> None:
    with pytest.raises(ValidationError):
        MaxInstanceCount.model_validate({"type": "max-instance-count", "max": 0})


def test_the_largest_instance_preference_counts_until_sagemaker_selects_one(ctx: EvaluationContext) -> None:
    rule = MaxInstanceCount.model_validate({"type": "max-instance-count", "max": 4})
    preferences = [
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 8},
        {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
    ]
    finding = rule.evaluate(job(ResourceConfig={"InstancePreferences": preferences}), ctx)
    assert finding is not None and finding.observed == 8
    placed = job(ResourceConfig={"InstancePreferences": preferences, "SelectedInstanceType": "ml.g5.12xlarge"})
    assert placed.total_instance_count == 2 and rule.evaluate(placed, ctx) is None  # the count of its preference


# botocore's model (InstancePreference.InstanceCount): either every preference has its count, or none has
# and ResourceConfig.InstanceCount is the job's one count, which SageMaker applies to each preference
ONE_COUNT = {
    "InstanceCount": 64,
    "InstancePreferences": [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.p4d.24xlarge"}],
}


def test_one_count_for_the_job_is_the_count_of_every_preference(ctx: EvaluationContext) -> None:
    # Given a job of InstancePreferences that gives its 64 instances once, in ResourceConfig
    waiting = job(ResourceConfig=ONE_COUNT)
    # and the same job once SageMaker selected a type, its answer without SelectedInstanceCount
    placed = job(ResourceConfig={**ONE_COUNT, "SelectedInstanceType": "ml.p4d.24xlarge"})
    # When the rule judges each, then each is the job's 64 instances, over the limit (never 0)
    for each in (waiting, placed):
        finding = RULE.evaluate(each, ctx)
        assert finding is not None and finding.conclusive and finding.observed == 64


@pytest.mark.parametrize(
    "resources",
    [
        {"InstancePreferences": [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.p4d.24xlarge"}]},
        {"InstancePreferences": [{"InstanceType": "ml.p5.48xlarge"}], "SelectedInstanceType": "ml.p5.48xlarge"},
        {"InstanceType": "ml.p5.48xlarge"},
    ],
    ids=["preferences", "selected", "instance-type"],
)
def test_a_count_the_source_does_not_say_is_inconclusive_not_zero(
    resources: dict[str, Any], ctx: EvaluationContext
) -> None:
    # Given a job whose source names its instance type(s) but no count, neither per preference nor for the job
    finding = RULE.evaluate(job(ResourceConfig=resources), ctx)
    # Then the rule cannot decide: no pass on 0 instances
    assert finding is not None and not finding.conclusive
