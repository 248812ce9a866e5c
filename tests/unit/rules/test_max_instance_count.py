from __future__ import annotations

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
