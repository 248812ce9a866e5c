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
