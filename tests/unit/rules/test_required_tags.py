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


# ---- constraints no SageMaker tag can meet (botocore's TagKey and TagValue shapes) ----------------


@pytest.mark.parametrize(
    ("constraint", "field"),
    [
        ({"values": ["cc#1"]}, "values"),  # '#' is outside TagValue's pattern: no tag can hold it
        ({"values": ["x" * 257]}, "values"),  # TagValue max 256
        ({"values": ["", "cc#1"]}, "values"),
        ({"pattern": "^$"}, "pattern"),  # only the empty tag, which counts as missing
        ({"pattern": r"\b"}, "pattern"),
        ({"pattern": "(?=a)"}, "pattern"),
        ({"pattern": "a{0}"}, "pattern"),
        ({"pattern": "a{257}"}, "pattern"),  # longer than any tag value
        ({"values": ["dev", "prod"], "pattern": "[A-Z]+"}, None),  # no listed value matches the pattern
    ],
    ids=[
        "bad-char",
        "too-long",
        "blank-and-bad",
        "^$",
        "word-boundary",
        "lookahead",
        "zero-repeat",
        "257",
        "disjoint",
    ],
)
def test_a_constraint_no_sagemaker_tag_can_meet_is_a_validation_error(
    constraint: dict[str, Any], field: str | None
) -> None:
    # Given a tag constraint no value a SageMaker job can carry meets, which would stop every job
    # When the rule is validated, then it is rejected, at that constraint (or its field)
    with pytest.raises(ValidationError) as caught:
        RequiredTags.model_validate({"type": "required-tags", "tags": {"env": constraint}})
    (error,) = caught.value.errors()
    assert (error["loc"], error["type"]) == (("tags", "env", *([field] if field else [])), "value_error")


@pytest.mark.parametrize("key", ["", "k" * 129, "cost#center"])
def test_a_tag_key_no_sagemaker_job_can_carry_is_a_validation_error(key: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RequiredTags.model_validate({"type": "required-tags", "tags": {key: {}}})
    (error,) = caught.value.errors()
    assert (error["loc"][:2], error["type"]) == (("tags", key), "value_error")


@pytest.mark.parametrize(
    "constraint",
    [
        {"values": ["dev", "cc#1"]},  # one value a tag can hold is enough (the other is dropped, as an empty one)
        {"values": ["équipe-\u03b1", "x" * 256, "a b", "ns:k=v/+@_.-"]},
        {"pattern": "cc-[0-9]{4}"},
        {"pattern": "a|"},  # may match the empty tag, and a non-empty one
        {"pattern": ".*"},
        {"pattern": "x{256}"},
        {"pattern": r"\d+", "values": ["12", "dev"]},
    ],
)
def test_a_constraint_some_tag_meets_stays_valid(constraint: dict[str, Any]) -> None:
    RequiredTags.model_validate({"type": "required-tags", "tags": {"env": constraint, "a:b/c=d+e-f@g_h. i": {}}})


def test_the_tag_limits_are_botocores() -> None:
    # Given SageMaker's TagKey and TagValue shapes (botocore's model)
    import unicodedata

    import botocore.session
    import regex

    from sagemaker_governance.domain import tags

    model = botocore.session.get_session().get_service_model("sagemaker")
    key, value = model.shape_for("TagKey").metadata, model.shape_for("TagValue").metadata
    # Then our limits are theirs
    assert (key["min"], key["max"], value["min"], value["max"]) == (1, tags.TAG_KEY_MAX, 0, tags.TAG_VALUE_MAX)
    assert key["pattern"] == value["pattern"] == r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)"
    # and our character test agrees with their pattern over the Basic Multilingual Plane, for every character
    # Python's Unicode database knows (one it does not know is allowed: its category may be newer than ours)
    allowed = regex.compile(value["pattern"])
    disagree = [
        hex(code)
        for code in range(0x10000)
        if unicodedata.category(chr(code)) not in ("Cn", "Cs")
        and tags.allowed_in_tag(chr(code)) != (allowed.fullmatch(chr(code)) is not None)
    ]
    assert disagree == []


@pytest.mark.parametrize(
    "pattern",
    ["([a-z0-9]+-?)+", "(a+)+", r"(\w+\s?)*", "(.*,)+", "(a{1,2})+", "(a|b+)*c", "(a|aa)*", "(?i)([A-Z]+[a-z]?)+"],
)
def test_a_pattern_that_can_backtrack_exponentially_is_a_validation_error(pattern: str) -> None:
    # Given a required tag whose pattern repeats a part that can match the same characters in more than one
    # way (nested quantifiers, overlapping alternatives): Python's re has no timeout, and one developer's
    # 27-character tag value took seconds per compliance evaluation, doubling with each further character
    rule = {"id": "project-tag", "type": "required-tags", "tags": {"project": {"pattern": pattern}}}
    # When the rule is validated, then it is rejected, naming the rule, the tag and the pattern
    with pytest.raises(ValidationError) as caught:
        RequiredTags.model_validate(rule)
    message = str(caught.value)
    assert "'project-tag'" in message and "'project'" in message and repr(pattern) in message


@pytest.mark.parametrize(
    "pattern",
    ["cc-[0-9]{4}", "[a-z0-9]+(-[a-z0-9]+)*", r"(\d+,)*\d+", "(dev|prod)+", r"v[0-9]+(\.[0-9]+)*", r"(\d|[a-z])+"],
)
def test_a_pattern_that_matches_each_value_one_way_stays_valid_and_judges_quickly(
    pattern: str, ctx: EvaluationContext
) -> None:
    # Given a required tag whose pattern matches each value one way only (the safe way to write the above)
    rule = RequiredTags.model_validate({"type": "required-tags", "tags": {"project": {"pattern": pattern}}})
    # When a job carries a long value it does not match, then the evaluation reports it (and returns at once)
    finding = rule.evaluate(job(tags={"project": "a" * 255 + "_"}), ctx)
    assert finding is not None and finding.observed["invalid"] == {"project": "a" * 255 + "_"}
