from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.rules import EvaluationContext, RequiredTags
from tests.builders import job

RULE = RequiredTags.model_validate(
    {
        "type": "required-tags",
        "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}, "env": {"values": ["dev", "prod"]}},
    }
)


def test_passes_when_every_tag_is_present_and_allowed(ctx: EvaluationContext) -> None:
    assert RULE.evaluate(job(tags={"team": "a", "cost-center": "cc-0001", "env": "dev"}), ctx) is None


def test_reports_missing_and_blank_tags(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(tags={"team": "  ", "env": "dev"}), ctx)
    assert finding is not None and finding.conclusive
    assert finding.observed["missing"] == ["cost-center", "team"]
    assert "cost-center" in finding.remedy and "team" in finding.remedy


def test_reports_values_outside_pattern_or_list(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(tags={"team": "a", "cost-center": "1234", "env": "staging"}), ctx)
    assert finding is not None
    assert finding.observed["invalid"] == {"cost-center": "1234", "env": "staging"}


def test_pattern_must_match_the_whole_value(ctx: EvaluationContext) -> None:
    finding = RULE.evaluate(job(tags={"team": "a", "cost-center": "cc-12345", "env": "dev"}), ctx)
    assert finding is not None and "cost-center" in finding.observed["invalid"]


def test_unknown_tags_are_inconclusive_not_a_violation(ctx: EvaluationContext) -> None:
    unknown = job().model_copy(update={"tags": None})
    finding = RULE.evaluate(unknown, ctx)
    assert finding is not None and not finding.conclusive


def test_invalid_pattern_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="invalid regular expression"):
        RequiredTags.model_validate({"type": "required-tags", "tags": {"x": {"pattern": "("}}})


@pytest.mark.parametrize(
    ("constraint", "field"),
    [({"values": []}, "values"), ({"values": ["", " "]}, "values"), ({"pattern": ""}, "pattern")],
    ids=["no-values", "blank-values", "empty-pattern"],
)
def test_a_constraint_no_tag_can_meet_is_a_validation_error(constraint: dict[str, Any], field: str) -> None:
    # Given a tag constraint that allows no non-empty value (an empty tag counts as missing), which would
    # stop every job, however tagged
    # When the rule is validated, then it is rejected, at that constraint's field
    with pytest.raises(ValidationError) as caught:
        RequiredTags.model_validate({"type": "required-tags", "tags": {"env": constraint}})
    (error,) = caught.value.errors()
    assert (error["loc"], error["type"]) == (("tags", "env", field), "value_error")
