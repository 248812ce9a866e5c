"""The policy model: merging, validation errors, and the YAML examples in the docstrings."""

from __future__ import annotations

import inspect
import textwrap
from datetime import UTC, datetime

import pytest
import yaml
from pydantic import ValidationError

from sagemaker_governance.domain.compliance import ComplianceCode, evaluate_compliance
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.idle import IdlePolicy
from sagemaker_governance.domain.guards.progress import ProgressPolicy
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Exemption, Policy, merge_documents
from sagemaker_governance.domain.policy_document import (
    PolicyDocumentError,
    build_base_policy,
    build_policy,
    load_policy_text,
)
from sagemaker_governance.domain.rules import RULE_CLASSES
from sagemaker_governance.settings import BASE_POLICY_PARAMETERS, Settings
from tests.builders import describe


def _docstring_example(cls: type) -> object:
    doc = inspect.getdoc(cls) or ""
    assert "Example:" in doc, f"{cls.__name__} has no YAML example"
    return yaml.safe_load(textwrap.dedent(doc.split("Example:", 1)[1]))


@pytest.mark.parametrize("rule_class", RULE_CLASSES, ids=lambda c: c.__name__)
def test_every_rule_docstring_example_is_a_valid_policy(rule_class: type) -> None:
    rules = _docstring_example(rule_class)
    policy = Policy.model_validate({"rules": rules})
    assert type(policy.rules[0]) is rule_class


def test_policy_and_exemption_docstring_examples_validate() -> None:
    Policy.model_validate(_docstring_example(Policy))
    Policy.model_validate(
        {"rules": [{"type": "max-instance-count", "max": 1}], **_docstring_example(Exemption)}  # type: ignore[dict-item]
    )


def test_rules_merge_by_id_field_by_field() -> None:
    merged = merge_documents(
        {"rules": [{"id": "a", "type": "max-instance-count", "max": 4}]},
        {"rules": [{"id": "a", "max": 8}, {"id": "b", "type": "spot-checkpoint"}]},
    )
    assert merged["rules"] == [
        {"id": "a", "type": "max-instance-count", "max": 8},
        {"id": "b", "type": "spot-checkpoint"},
    ]


def test_exemptions_add_up_and_scalars_replace() -> None:
    merged = merge_documents({"mode": "audit", "exemptions": [1]}, {"mode": "enforce", "exemptions": [2]})
    assert merged == {"mode": "enforce", "exemptions": [1, 2]}


def test_settings_become_a_valid_base_policy() -> None:
    settings = Settings.from_env(
        {
            "GOVERNANCE_MODE": "enforce",
            "REQUIRED_TAGS": "team, cost-center,",
            "ALLOWED_INSTANCE_TYPES": "ml.g5.*",
        }
    )
    policy = build_policy(settings.base_policy_document())
    assert policy.mode is Mode.ENFORCE
    assert [r.id for r in policy.rules] == [
        "required-tags",
        "instance-types",
        "max-instances",
        "max-runtime",
        "spot-checkpoint",
    ]


def test_a_base_part_that_fails_falls_back_alone_named_with_its_parameters() -> None:
    # Given the deploy-time defaults of a stack whose idle window is 30 hours, a mode the schema refuses, and a
    # progress guard switched off with two fields out of bounds
    valid = Settings(GOVERNANCE_MODE="enforce").base_policy_document()
    base = {
        **valid,
        "mode": "sometimes",
        "idle": {**valid["idle"], "period_seconds": 3600},
        "progress": {"enabled": False, "window_minutes": 5, "metric_names": [""]},
    }
    # When the base policy is built
    built = build_base_policy(base, BASE_POLICY_PARAMETERS)
    # Then each failing part takes the schema's defaults (the safe mode, the calibrated idle window, a switched
    # off guard still off) and is named with the Parameters it comes from; the other parts govern as set
    assert [(f.part, f.parameters, len(f.errors)) for f in built.fallbacks] == [
        ("mode", ("GovernanceMode",), 1),
        ("idle", BASE_POLICY_PARAMETERS["idle"], 1),
        ("progress", BASE_POLICY_PARAMETERS["progress"], 2),
    ]
    assert built.policy.mode is Mode.AUDIT
    assert built.fallbacks[1].applied == IdlePolicy().model_dump(mode="json")
    assert built.fallbacks[2].applied == {**ProgressPolicy().model_dump(mode="json"), "enabled": False}
    assert built.policy.rules == build_policy(valid).rules
    # and a base that validates is built as it is
    assert build_base_policy(valid).fallbacks == ()
    assert build_base_policy(valid).policy == build_policy(valid)


def test_document_errors_are_precise() -> None:
    text = """
    mode: enforcing
    rules:
      - type: max-instance-count
        max: -1
      - type: no-such-rule
    """
    with pytest.raises(PolicyDocumentError) as caught:
        load_policy_text(textwrap.dedent(text))
    errors = "\n".join(caught.value.errors)
    assert "mode:" in errors and "'enforcing'" in errors
    assert "rules.0.max-instance-count.max" in errors
    assert "no-such-rule" in errors


def test_yaml_syntax_errors_name_the_line() -> None:
    with pytest.raises(PolicyDocumentError, match=r"line 2, column \d+: not valid YAML"):
        load_policy_text("mode: audit\nrules: [a, b}\nteams: {}\n")


def test_a_document_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(PolicyDocumentError, match="mapping"):
        load_policy_text("- 1\n- 2\n")


def test_unknown_fields_are_rejected_not_ignored() -> None:
    with pytest.raises(PolicyDocumentError, match="modee"):
        load_policy_text("modee: enforce\n")


def test_duplicate_rule_ids_are_rejected() -> None:
    with pytest.raises(PolicyDocumentError, match="duplicate rule id"):
        build_policy({"rules": [{"type": "spot-checkpoint"}, {"type": "spot-checkpoint"}]})


def test_invalid_team_override_is_reported_with_the_team() -> None:
    with pytest.raises(PolicyDocumentError, match=r"teams\.vision"):
        build_policy(
            {
                "rules": [{"type": "max-instance-count", "max": 2}],
                "teams": {"vision": {"rules": [{"id": "max-instance-count", "max": 0}]}},
            }
        )


def test_a_rule_patch_naming_no_rule_of_the_base_says_so() -> None:
    # Given a base without a required-tags rule (a stack deployed with RequiredTags=""), and documents that
    # patch a rule of that id, globally and for a team: a patch without type, as for a rule of the base
    base = Settings.from_env({"REQUIRED_TAGS": ""}).base_policy_document()
    patch = {"rules": [{"id": "required-tags", "enabled": False}]}
    # When each is validated, then the error is the rule's missing type, for that rule id (globally: its code)
    with pytest.raises(ValidationError) as caught:
        Policy.model_validate(merge_documents(base, patch))
    (error,) = caught.value.errors()
    assert (error["type"], error["ctx"]) == ("rule_type_missing", {"id": "required-tags"})
    with pytest.raises(
        PolicyDocumentError, match=r"teams\.research: .*rule id 'required-tags' is not in the base"
    ):
        build_policy(base, {"teams": {"research": patch}})


def test_exemption_must_match_something() -> None:
    with pytest.raises(PolicyDocumentError, match="job_name_prefix or tag"):
        build_policy({"exemptions": [{"reason": "all of them", "expires": "2030-01-01"}]})


def test_digest_changes_with_content() -> None:
    a = build_policy({"mode": "audit"})
    b = build_policy({"mode": "enforce"})
    assert a.digest() != b.digest() and a.digest() == build_policy({"mode": "audit"}).digest()


def test_a_job_whose_tags_are_unknown_may_be_under_any_team() -> None:
    # Given a policy with two teams
    policy = Policy.model_validate({"teams": {"vision": {"mode": "enforce"}, "nlp": {"mode": "audit"}}})
    tagged = TrainingJob.model_validate({**describe(), "Tags": {"team": "nlp"}})
    # Then a job with known tags is under its team's policy only; one whose tags are unknown under any
    assert [p.mode for p in policy.possible_for(tagged)] == [Mode.AUDIT]
    unknown = tagged.model_copy(update={"tags": None})
    assert policy.possible_for(unknown) == (policy, policy.for_team("nlp"), policy.for_team("vision"))


def _instances(name: str, count: int) -> TrainingJob:
    resources = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": count, "VolumeSizeInGB": 50}
    tags = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"}
    return TrainingJob.model_validate({**describe(name, ResourceConfig=resources), "Tags": tags})


def test_a_rule_without_id_of_a_base_rules_type_is_added_beside_it_and_validate_says_so() -> None:
    # Given the stack's base (rule max-instances: 16) and a document that raises the limit by the rule's type,
    # without its id, and whose vision team adds a notify rule under the base's max-runtime, with its own id
    base = Settings.from_env({"GOVERNANCE_MODE": "enforce"}).base_policy_document()
    by_type = """
rules: [{type: max-instance-count, max: 64}]
teams: {vision: {rules: [{id: runtime-notice, type: max-runtime, max_hours: 24, on_violation: notify}]}}
"""
    policy = load_policy_text(by_type, base)
    # When a 32-instance job is evaluated, then both rules apply, and the base's still stops it
    result = evaluate_compliance(_instances("big-1", 32), policy, datetime(2026, 11, 27, tzinfo=UTC))
    assert [(d.rule, d.code) for d in result.decisions] == [("max-instances", ComplianceCode.STOP)]
    # and validate warns once for each policy (not again for the team), the rule without id with the id that
    # changes the base's rule, the team's rule of its own id as a second rule only
    warnings = [w for w in policy.warnings() if "enabled rules of type" in w]
    assert [w.split(":", 1)[0] for w in warnings] == ["rules", "teams.vision.rules"]
    assert "(max-instances, max-instance-count)" in warnings[0] and "(id: max-instances)" in warnings[0]
    assert "(max-runtime, runtime-notice)" in warnings[1] and "as id" not in warnings[1]
    # while the document that names the rule by its id changes it: no stop, no warning
    by_id = load_policy_text("rules: [{id: max-instances, max: 64}]\n", base)
    assert evaluate_compliance(_instances("big-1", 32), by_id, datetime(2026, 11, 27, tzinfo=UTC)).stops is False
    assert by_id.warnings() == []


def test_an_exemption_naming_no_rule_id_exempts_nothing_and_validate_says_so() -> None:
    # Given an exemption for bench- jobs that names the rules by type and by section (max-instance-count,
    # idle), a second one by the ids (max-instances, idle-guard), and a team rule one may name too
    base = Settings.from_env({"GOVERNANCE_MODE": "enforce"}).base_policy_document()
    document = """
exemptions:
  - {job_name_prefix: bench-, rules: [max-instance-count, idle], expires: 2099-12-31, reason: INC-1 by type}
  - {job_name_prefix: scale-, rules: [max-instances, idle-guard, progress-guard, efficiency, p5-only],
     expires: 2099-12-31, reason: INC-2 by id}
teams: {nlp: {rules: [{id: p5-only, type: allowed-instance-types, patterns: ["ml.p5.*"]}]}}
"""
    policy = load_policy_text(document, base)
    # When a 32-instance vision job of each is evaluated, then the first is still stopped (no rule of its
    # ids), the second exempt
    now = datetime(2026, 11, 27, tzinfo=UTC)
    by_type = evaluate_compliance(_instances("bench-1", 32), policy, now)
    by_id = evaluate_compliance(_instances("scale-1", 32), policy, now)
    assert [(d.rule, d.code) for d in by_type.decisions] == [("max-instances", ComplianceCode.STOP)]
    assert [(d.rule, d.code) for d in by_id.decisions] == [("max-instances", ComplianceCode.EXEMPTED)]
    # and validate warns about the first only, naming the ids it meant (a guard's id and a team's rule are ids)
    (warning,) = [w for w in policy.warnings() if w.startswith("exemptions")]
    assert warning.startswith("exemptions[0] (INC-1 by type): rules max-instance-count, idle name no rule id")
    assert "type of rule max-instances" in warning and "its rule id is idle-guard" in warning


def test_an_exemption_with_an_empty_rule_list_exempts_nothing_and_validate_says_so() -> None:
    # Given an exemption written with rules: [] (meant as "every rule", which is rules left out)
    base = Settings.from_env({"GOVERNANCE_MODE": "enforce"}).base_policy_document()
    document = """
exemptions:
  - {job_name_prefix: bench-, rules: [], expires: 2099-12-31, reason: INC-3 empty}
  - {job_name_prefix: scale-, expires: 2099-12-31, reason: INC-4 every rule}
"""
    policy = load_policy_text(document, base)
    # When a 32-instance job of each is evaluated, then the first is stopped, the second exempt
    now = datetime(2026, 11, 27, tzinfo=UTC)
    assert [d.code for d in evaluate_compliance(_instances("bench-1", 32), policy, now).decisions] == [
        ComplianceCode.STOP
    ]
    assert [d.code for d in evaluate_compliance(_instances("scale-1", 32), policy, now).decisions] == [
        ComplianceCode.EXEMPTED
    ]
    # and validate warns about the empty list only
    assert [w.split(":")[0] for w in policy.warnings() if w.startswith("exemptions")] == [
        "exemptions[0] (INC-3 empty)"
    ]
