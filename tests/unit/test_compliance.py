"""The compliance engine: rules -> decisions, with modes, exemptions and team overrides."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sagemaker_governance.domain.compliance import ComplianceCode, evaluate_compliance
from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.policy_document import build_policy
from tests.builders import job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def policy(**overrides: Any) -> Any:
    base: dict[str, Any] = {
        "mode": "enforce",
        "rules": [
            {"type": "required-tags", "tags": {"team": {}, "cost-center": {}}},
            {"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.g5.*"]},
        ],
    }
    base.update(overrides)
    return build_policy(base)


def test_compliant_job_gets_one_no_action_decision() -> None:
    result = evaluate_compliance(job(), policy(), NOW)
    assert [(d.rule, d.action) for d in result.decisions] == [("compliance", Action.NONE)]
    assert not result.stops and not result.notify_owner


def test_violation_in_enforce_mode_stops_and_notifies() -> None:
    result = evaluate_compliance(job(tags={"team": "vision"}), policy(), NOW)
    (decision,) = result.decisions
    assert (decision.rule, decision.action, decision.mode) == ("required-tags", Action.STOP, Mode.ENFORCE)
    assert decision.acts and result.stops and result.notify_owner


def test_audit_mode_decides_the_same_but_acts_on_nothing() -> None:
    result = evaluate_compliance(job(tags={"team": "vision"}), policy(mode="audit"), NOW)
    (decision,) = result.decisions
    assert decision.action is Action.STOP and decision.mode is Mode.AUDIT
    assert not decision.acts and not result.stops and not result.notify_owner


def test_audit_mode_may_still_notify_when_the_policy_says_so() -> None:
    result = evaluate_compliance(
        job(tags={"team": "vision"}), policy(mode="audit", notify_in_audit_mode=True), NOW
    )
    assert result.notify_owner and not result.stops


def test_per_rule_mode_overrides_the_global_mode() -> None:
    pol = build_policy(
        {
            "mode": "enforce",
            "rules": [{"type": "required-tags", "mode": "audit", "tags": {"cost-center": {}}}],
        }
    )
    (decision,) = evaluate_compliance(job(tags={"team": "vision"}), pol, NOW).decisions
    assert decision.mode is Mode.AUDIT and not decision.acts


def test_notify_only_rule_never_stops() -> None:
    pol = build_policy({"mode": "enforce", "rules": [{"type": "spot-checkpoint"}]})
    result = evaluate_compliance(job(EnableManagedSpotTraining=True), pol, NOW)
    (decision,) = result.decisions
    assert decision.action is Action.NOTIFY and not result.stops and result.notify_owner


def test_exemption_by_name_prefix_suppresses_the_action() -> None:
    pol = policy(exemptions=[{"job_name_prefix": "bench-", "expires": "2026-12-31", "reason": "approved bench"}])
    (decision,) = evaluate_compliance(job("bench-1", tags={}), pol, NOW).decisions[:1]
    assert decision.action is Action.NONE and decision.exempted_by is not None
    assert decision.evidence["would"] == "stop"


def test_exemption_by_tag_covers_only_its_rules() -> None:
    pol = policy(
        exemptions=[
            {
                "tag": {"team": "research"},
                "rules": ["instance-types"],
                "expires": "2026-12-31",
                "reason": "approved GPU trial",
            }
        ]
    )
    research = job(
        tags={"team": "research"}, ResourceConfig={"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}
    )
    decisions = {d.rule: d for d in evaluate_compliance(research, pol, NOW).decisions}
    assert decisions["instance-types"].exempted_by is not None
    assert decisions["required-tags"].action is Action.STOP  # missing cost-center is not exempt


def test_expired_exemption_is_ignored_and_noted() -> None:
    pol = policy(exemptions=[{"job_name_prefix": "bench-", "expires": "2026-11-20", "reason": "old approval"}])
    result = evaluate_compliance(job("bench-1", tags={"team": "x"}), pol, NOW)
    assert result.decisions[0].action is Action.STOP
    assert any("expired exemption" in note for note in result.notes)


def test_exemption_is_valid_through_its_expiry_day() -> None:
    pol = policy(exemptions=[{"job_name_prefix": "bench-", "expires": "2026-11-21", "reason": "last day"}])
    result = evaluate_compliance(job("bench-1", tags={"team": "x"}), pol, NOW)
    assert result.decisions[0].exempted_by is not None


def test_team_override_replaces_the_rule_for_that_team_only() -> None:
    pol = policy(teams={"vision": {"rules": [{"id": "instance-types", "patterns": ["ml.p5.*"]}]}})
    p5: dict[str, Any] = {"ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}}
    vision = evaluate_compliance(job(**p5), pol, NOW)
    nlp = evaluate_compliance(job(tags={"team": "nlp", "cost-center": "cc"}, **p5), pol, NOW)
    assert vision.decisions[0].action is Action.NONE
    assert nlp.decisions[0].rule == "instance-types" and nlp.decisions[0].action is Action.STOP


@pytest.mark.parametrize("value", ["Vision", "vision ", " VISION"])
def test_a_team_value_that_names_an_override_only_spelled_otherwise_is_not_guessed_and_is_told(value: str) -> None:
    # Given a vision override that allows ml.p5.*, and a p5 job whose team tag is vision spelled otherwise
    pol = policy(teams={"vision": {"rules": [{"id": "instance-types", "patterns": ["ml.p5.*"]}]}})
    p5: dict[str, Any] = {"ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}}
    result = evaluate_compliance(job(tags={"team": value, "cost-center": "cc"}, **p5), pol, NOW)
    # Then it is judged by the policy its value names, as IAM reads it (no override: p5 is not allowed), and the
    # owner is told which override the value missed and how to tag it
    assert [(d.rule, d.code, d.action) for d in result.decisions] == [
        ("instance-types", ComplianceCode.STOP, Action.STOP),
        ("compliance", ComplianceCode.TEAM_MISSPELLED, Action.NOTIFY),
    ]
    notice = result.decisions[1]
    assert notice.evidence == {"tag": "team", "value": value, "overrides": ["vision"]}
    assert notice.remedy is not None and "team=vision" in notice.remedy and result.notify_owner


def test_a_team_value_told_once_for_every_override_it_could_mean_and_never_for_an_exact_one() -> None:
    # Given overrides that differ only in capitalization, and a compliant job of each spelling and of another
    pol = policy(teams={"vision": {"mode": "audit"}, "Vision": {"mode": "enforce"}})

    def told(value: str) -> list[Any]:
        decisions = evaluate_compliance(job(tags={"team": value, "cost-center": "cc"}), pol, NOW).decisions
        return [d.evidence["overrides"] for d in decisions if d.code == ComplianceCode.TEAM_MISSPELLED]

    # Then a value naming neither exactly is told both (neither is chosen); an exact one, or one naming no
    # override in any spelling, is told nothing
    assert told("VISION") == [["Vision", "vision"]]
    assert told("vision") == told("Vision") == told("nlp") == []


def test_disabled_rule_is_skipped() -> None:
    pol = build_policy(policy().model_dump(mode="json"), {"rules": [{"id": "required-tags", "enabled": False}]})
    result = evaluate_compliance(job(tags={}), pol, NOW)
    assert result.decisions[0].rule == "compliance"


def test_inconclusive_rule_never_stops() -> None:
    pol = build_policy({"mode": "enforce", "rules": [{"type": "max-runtime", "max_hours": 1}]})
    (decision,) = evaluate_compliance(job(StoppingCondition=None), pol, NOW).decisions
    assert decision.action is Action.NONE and decision.code == ComplianceCode.INCONCLUSIVE


def test_instance_preferences_with_one_count_for_the_job_are_judged_on_that_count() -> None:
    # Given a max-instance-count policy and a job of InstancePreferences whose count is ResourceConfig's only
    pol = build_policy(
        {"mode": "enforce", "rules": [{"id": "max-instances", "type": "max-instance-count", "max": 8}]}
    )
    preferences = [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.p4d.24xlarge"}]
    over = job(ResourceConfig={"InstanceCount": 64, "InstancePreferences": preferences})
    unsaid = job(ResourceConfig={"InstancePreferences": preferences})
    # When each is evaluated
    (stop,) = evaluate_compliance(over, pol, NOW).decisions
    (skip,) = evaluate_compliance(unsaid, pol, NOW).decisions
    # Then 64 instances stop the job; with no count at all the rule could not decide (never compliant)
    assert (stop.rule, stop.code, stop.evidence["observed"]) == ("max-instances", ComplianceCode.STOP, 64)
    assert (skip.rule, skip.code) == ("max-instances", ComplianceCode.INCONCLUSIVE)
