from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.rules import AllowedInstanceTypes, EvaluationContext
from tests.builders import job

RULE = AllowedInstanceTypes.model_validate(
    {"type": "allowed-instance-types", "patterns": ["ml.g5.*", "ml.m5.xlarge"]}
)


def test_glob_match_passes(ctx: EvaluationContext) -> None:
    assert RULE.evaluate(job(ResourceConfig={"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1}), ctx) is None


def test_type_outside_the_globs_violates(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(ResourceConfig={"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}), ctx)
    assert finding is not None and finding.observed == ["ml.p5.48xlarge"]


def test_every_group_of_a_heterogeneous_cluster_is_checked(ctx: EvaluationContext) -> None:
    hetero = job(
        ResourceConfig={
            "InstanceGroups": [
                {"InstanceGroupName": "a", "InstanceType": "ml.g5.2xlarge", "InstanceCount": 1},
                {"InstanceGroupName": "b", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            ]
        }
    )
    finding = RULE.evaluate(hetero, ctx)
    assert finding is not None and finding.observed == ["ml.c5.18xlarge"]


def test_glob_is_case_sensitive_and_anchored(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(ResourceConfig={"InstanceType": "ml.m5.xlarge2", "InstanceCount": 1}), ctx)
    assert finding is not None


PREFERENCES = [
    {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
]


def test_every_instance_preference_is_checked_until_sagemaker_selects_one(ctx: EvaluationContext) -> None:
    # InstancePreferences (SageMaker's model: mutually exclusive with InstanceType and InstanceGroups): any of
    # the types may be the one launched, so a type the policy refuses is a violation before the selection
    waiting = job(ResourceConfig={"InstancePreferences": PREFERENCES})
    finding = RULE.evaluate(waiting, ctx)
    assert finding is not None and finding.observed == ["ml.p5.48xlarge"]
    assert "InstancePreferences" in finding.message


def test_once_sagemaker_selected_a_type_only_that_type_counts(ctx: EvaluationContext) -> None:
    selected = {
        "InstancePreferences": PREFERENCES,
        "SelectedInstanceType": "ml.g5.48xlarge",
        "SelectedInstanceCount": 2,
    }
    placed = job(ResourceConfig=selected)
    assert placed.instance_types == ("ml.g5.48xlarge",) and placed.total_instance_count == 2
    assert RULE.evaluate(placed, ctx) is None
    on_p5 = job(ResourceConfig={**selected, "SelectedInstanceType": "ml.p5.48xlarge", "SelectedInstanceCount": 1})
    finding = RULE.evaluate(on_p5, ctx)
    assert (
        finding is not None
        and finding.observed == ["ml.p5.48xlarge"]
        and "InstancePreferences" not in finding.message
    )


@pytest.mark.parametrize("patterns", [[""], ["", " "], ["ML.G5.*"], ["Ml.p5.48xlarge", ""]])
def test_globs_that_match_no_instance_type_are_a_validation_error(patterns: list[str]) -> None:
    # Given globs no SageMaker instance type matches (empty; upper case: every type is lower case), which
    # would stop every job: the rule is rejected at its patterns
    with pytest.raises(ValidationError) as caught:
        AllowedInstanceTypes.model_validate({"type": "allowed-instance-types", "patterns": patterns})
    (error,) = caught.value.errors()
    assert (error["loc"], error["type"]) == (("patterns",), "value_error")


@pytest.mark.parametrize("patterns", [["ml.g5.*", ""], ["ml.[gp]5.*"], ["ml.[A-Za-z]5.*"], ["*"]])
def test_globs_some_instance_type_matches_stay_valid(patterns: list[str]) -> None:
    AllowedInstanceTypes.model_validate({"type": "allowed-instance-types", "patterns": patterns})


def test_every_training_instance_type_is_lower_case() -> None:
    # What the upper-case check relies on: CreateTrainingJob's InstanceType enum (botocore's model)
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    types: Any = model.shape_for("TrainingInstanceType")
    assert types.enum and all(t == t.lower() for t in types.enum)
