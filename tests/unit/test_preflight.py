"""Preflight: a CreateTrainingJob request evaluated with the compliance rules, tag defaults filled."""

from __future__ import annotations

import copy
import json
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy, parse_document
from sagemaker_governance.domain.preflight_policy import PreflightPolicy
from sagemaker_governance.settings import Settings
from smgov.preflight import (
    GovernanceViolation,
    fill_tag_defaults,
    job_from_request,
    preflight_request,
)

REPO = Path(__file__).resolve().parents[2]
REQUESTS = REPO / "examples" / "requests"


def request(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REQUESTS / name).read_text())
    return data


def example_policy() -> Policy:
    """The example document over the deploy-time defaults, as `smgov --policy` builds it."""
    base = Settings.model_validate({}).base_policy_document()
    return build_policy(base, parse_document((REPO / "examples" / "policy.yaml").read_text()))


def policy(**document: Any) -> Policy:
    base: dict[str, Any] = {
        "mode": "enforce",
        "rules": [
            {"type": "required-tags", "tags": {"team": {}, "owner": {}}},
            {"type": "allowed-instance-types", "patterns": ["ml.g5.*", "ml.m5.*"]},
            {"type": "max-runtime", "max_hours": 24},
            {"type": "spot-checkpoint"},
        ],
    }
    return build_policy(base, document)


def tags_of(req: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in req.get("Tags", [])}


# ---- the job a request would create -------------------------------------------------------------


def test_a_request_becomes_a_starting_job_with_the_same_facts() -> None:
    job = job_from_request(request("non-compliant.json"))
    assert job.name == "llm-finetune-2026-11-21-11-30-00"
    assert (job.status, job.secondary_status) == ("InProgress", "Starting")
    assert job.instance_types == ("ml.p5.48xlarge",)
    assert job.total_instance_count == 12
    assert job.stopping.max_runtime_seconds == 432_000
    assert job.tags == {"team": "nlp", "cost-center": "marketing"}


def test_a_request_without_tags_is_an_untagged_job_not_an_unknown_one(now: datetime) -> None:
    req = request("compliant.json")
    del req["Tags"]
    assert job_from_request(req).tags == {}
    outcome = preflight_request(req, policy(), now, user=None)
    (violation,) = outcome.blocking
    assert violation.rule == "required-tags"
    assert "missing or empty tag(s): owner, team" in violation.reason


def test_heterogeneous_request_checks_every_instance_group(now: datetime) -> None:
    outcome = preflight_request(request("heterogeneous-exempt.json"), policy(), now)
    (violation,) = outcome.blocking
    assert violation.rule == "allowed-instance-types"
    assert violation.evidence["observed"] == ["ml.c5.18xlarge", "ml.p4d.24xlarge"]


@pytest.mark.parametrize("stopping", [None, {}, {"MaxWaitTimeInSeconds": 172_800}])
def test_a_request_without_a_max_runtime_is_judged_with_sagemaker_s_one_day_default(
    now: datetime, stopping: dict[str, int] | None
) -> None:
    # Given a request that leaves MaxRuntimeInSeconds to SageMaker (1 day), under a 12-hour limit in enforce mode
    req = request("compliant.json")
    if stopping is None:
        del req["StoppingCondition"]
    else:
        req["StoppingCondition"] = stopping
    strict = policy(rules=[{"id": "max-runtime", "type": "max-runtime", "max_hours": 12}])
    # When it is judged before launch
    outcome = preflight_request(req, strict, now, user="carol")
    # Then it is judged as the job SageMaker creates (and the service reads back): refused, and the output says so
    assert [(d.rule, d.code) for d in outcome.blocking] == [("max-runtime", "compliance.stop.violation")]
    assert any("MaxRuntimeInSeconds not set" in note for note in outcome.report()["notes"])
    assert outcome.request == req  # sent as written: SageMaker fills the default itself
    # And under a limit of a day or more the default passes
    assert not preflight_request(req, policy(), now, user="carol").refused


@pytest.mark.parametrize("stopping", ["oops", 5, ["x"]])
def test_a_malformed_stopping_condition_is_rejected_not_replaced_by_the_default(stopping: object) -> None:
    # Given a request whose StoppingCondition is not a section at all
    req = {**request("compliant.json"), "StoppingCondition": stopping}
    # Then it is rejected as malformed, never judged as a job with SageMaker's default that was not requested
    with pytest.raises(ValidationError):
        job_from_request(req)


def with_null(req: dict[str, Any], loc: tuple[str | int, ...]) -> dict[str, Any]:
    """``req`` with the member at ``loc`` written as an explicit null (its section made if the request has none)."""
    out = copy.deepcopy(req)
    section: Any = out
    for part in loc[:-1]:
        section = section.setdefault(part, {}) if isinstance(part, str) else section[part]
    section[loc[-1]] = None
    return out


@pytest.mark.parametrize(
    "loc",
    [
        ("ResourceConfig",),
        ("ResourceConfig", "InstanceType"),
        ("ResourceConfig", "InstanceCount"),
        ("ResourceConfig", "InstanceGroups"),
        ("Tags",),
        ("Tags", 0, "Value"),
        ("StoppingCondition",),
        ("StoppingCondition", "MaxRuntimeInSeconds"),
        ("StoppingCondition", "MaxWaitTimeInSeconds"),
        ("EnableManagedSpotTraining",),
        ("CheckpointConfig",),
        ("AlgorithmSpecification",),
        ("AlgorithmSpecification", "MetricDefinitions"),
        ("RoleArn",),
        ("HyperParameters",),
        ("VpcConfig",),
    ],
    ids=lambda loc: ".".join(map(str, loc)),
)
def test_an_explicit_null_member_is_rejected_not_read_as_left_out(
    loc: tuple[str | int, ...], now: datetime
) -> None:
    # Given a request (only ml.g5.* and ml.m5.* allowed, team and owner tags required) with one member written as an
    # explicit null, which botocore's ParamValidator refuses ("Invalid type for parameter ..."): it can never be sent
    req = with_null(request("compliant.json"), loc)
    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(req, model.shape_for("CreateTrainingJobRequest"))
    assert report.has_errors() and "value: None" in report.generate_report()
    # Then it is rejected as malformed, the member named, never judged as a job that leaves it out (no instance
    # type known, no tag, SageMaker's one-day limit)
    with pytest.raises(ValidationError) as raised:
        job_from_request(req)
    assert [error["loc"] for error in raised.value.errors()] == [loc]
    with pytest.raises(ValidationError):
        preflight_request(req, policy(), now, user="carol")


def test_every_explicit_null_of_a_request_is_named_once() -> None:
    req = with_null(with_null(request("compliant.json"), ("Tags",)), ("ResourceConfig", "InstanceCount"))
    with pytest.raises(ValidationError) as raised:
        job_from_request(req)
    assert sorted(error["loc"] for error in raised.value.errors()) == [
        ("ResourceConfig", "InstanceCount"),
        ("Tags",),
    ]


def test_a_request_without_a_job_name_is_rejected() -> None:
    req = request("compliant.json")
    del req["TrainingJobName"]
    with pytest.raises(ValidationError):
        job_from_request(req)


# ---- verdicts on the example requests ---------------------------------------------------------


def test_compliant_request_passes(now: datetime) -> None:
    outcome = preflight_request(request("compliant.json"), example_policy(), now, user="carol")
    assert not outcome.refused
    assert outcome.violations == ()
    assert outcome.filled_tags == {}  # owner=alice was set: never overwritten
    assert outcome.report()["verdict"] == "ok"


def test_non_compliant_request_is_refused_with_every_violation_and_its_fix(now: datetime) -> None:
    outcome = preflight_request(request("non-compliant.json"), example_policy(), now, user="carol")
    assert outcome.refused
    assert {d.rule for d in outcome.blocking} == {
        "required-tags",
        "instance-types",
        "max-instances",
        "max-runtime",
    }
    assert all(d.remedy for d in outcome.blocking)
    # the team tag says nlp, which has no override: the base instance types apply
    text = outcome.render_text()
    assert "refused by governance preflight: 4 violation(s)" in text
    assert "ml.p5.48xlarge" in text
    assert "fix: Request at most 8 instances in total." in text
    # owner was missing and the policy fills it: the only tag problem left is the cost center
    assert outcome.filled_tags == {"owner": "carol"}
    tag_violation = next(d for d in outcome.blocking if d.rule == "required-tags")
    assert "owner" not in tag_violation.reason
    assert "cost-center='marketing'" in tag_violation.reason


def test_a_team_override_applies_to_the_request(now: datetime) -> None:
    req = request("non-compliant.json")
    req["Tags"] = [{"Key": "team", "Value": "vision"}, {"Key": "cost-center", "Value": "cc-1000"}]
    req["ResourceConfig"]["InstanceCount"] = 2
    req["StoppingCondition"]["MaxRuntimeInSeconds"] = 3600
    outcome = preflight_request(req, example_policy(), now, user="carol")
    assert not outcome.refused, outcome.render_text()  # vision may use ml.p5.*


def test_exemptions_apply_as_in_the_service(now: datetime) -> None:
    outcome = preflight_request(request("heterogeneous-exempt.json"), example_policy(), now, user="carol")
    assert not outcome.refused
    (exempt,) = [d for d in outcome.decisions if d.exempted_by]
    assert exempt.rule == "max-instances"
    assert "PLAT-412" in outcome.render_text()


# ---- what refuses ---------------------------------------------------------------------------


def test_audit_mode_violations_are_warnings_not_refusals(now: datetime) -> None:
    req = request("non-compliant.json")
    outcome = preflight_request(req, policy(mode="audit"), now)
    assert not outcome.refused
    assert outcome.warnings and all(d.mode is Mode.AUDIT for d in outcome.warnings)
    assert outcome.report()["verdict"] == "warnings"


def test_refuse_on_any_and_strict_refuse_audit_mode_violations(now: datetime) -> None:
    req = request("non-compliant.json")
    assert preflight_request(req, policy(mode="audit", preflight={"refuse_on": "any"}), now).refused
    assert preflight_request(req, policy(mode="audit"), now, strict=True).refused


def test_notify_only_rules_warn(now: datetime) -> None:
    req = request("spot-no-checkpoint-no-owner.json")
    outcome = preflight_request(req, policy(preflight={"tag_defaults": {"owner": "${user}"}}), now, user="dana")
    assert not outcome.refused
    (warning,) = outcome.warnings
    assert (warning.rule, warning.action) == ("spot-checkpoint", Action.NOTIFY)


def test_violation_exception_lists_each_violation_and_remedy(now: datetime) -> None:
    outcome = preflight_request(request("non-compliant.json"), policy(), now)
    error = GovernanceViolation(outcome)
    assert error.violations == outcome.blocking
    for decision in outcome.blocking:
        assert decision.reason in str(error)
        assert decision.remedy is not None and decision.remedy in str(error)


# ---- tag defaults -----------------------------------------------------------------------------


def test_defaults_fill_missing_and_empty_tags_in_place() -> None:
    pol = policy(preflight={"tag_defaults": {"owner": "${user}", "env": "dev", "team": "unassigned"}})
    req = request("compliant.json")
    req["Tags"] = [{"Key": "team", "Value": "vision"}, {"Key": "owner", "Value": "  "}]
    filled_request, filled = fill_tag_defaults(req, pol, "erin")
    assert filled == {"owner": "erin", "env": "dev"}
    assert filled_request["Tags"] == [
        {"Key": "team", "Value": "vision"},
        {"Key": "owner", "Value": "erin"},
        {"Key": "env", "Value": "dev"},
    ]
    assert req["Tags"][1]["Value"] == "  "  # the caller's request is not mutated


def test_user_placeholder_without_a_user_is_not_filled(now: datetime) -> None:
    pol = policy(preflight={"tag_defaults": {"owner": "${user}"}})
    req = request("compliant.json")
    req["Tags"] = [{"Key": "team", "Value": "vision"}]
    outcome = preflight_request(req, pol, now, user=None)
    assert outcome.filled_tags == {}
    assert outcome.refused and "owner" in outcome.blocking[0].reason


def test_user_names_are_made_tag_safe() -> None:
    pol = policy(preflight={"tag_defaults": {"owner": "${user}"}})
    _, filled = fill_tag_defaults({"TrainingJobName": "j", "Tags": []}, pol, "CORP\\frank#1")
    assert filled == {"owner": "CORP-frank-1"}


def test_team_overrides_choose_their_own_defaults() -> None:
    pol = policy(
        preflight={"tag_defaults": {"env": "dev"}},
        teams={"vision": {"preflight": {"tag_defaults": {"env": "research"}}}},
    )
    _, filled = fill_tag_defaults({"Tags": [{"Key": "team", "Value": "vision"}]}, pol, None)
    assert filled == {"env": "research"}
    _, filled = fill_tag_defaults({"Tags": [{"Key": "team", "Value": "nlp"}]}, pol, None)
    assert filled == {"env": "dev"}


def test_defaults_can_be_switched_off(now: datetime) -> None:
    pol = policy(preflight={"tag_defaults": {"owner": "${user}"}})
    req = {**request("compliant.json"), "Tags": [{"Key": "team", "Value": "vision"}]}
    assert preflight_request(req, pol, now, user="gil", fill_defaults=False).refused


@given(
    existing=st.dictionaries(st.sampled_from(["team", "owner", "env", "x"]), st.sampled_from(["", " ", "a", "b"])),
    defaults=st.dictionaries(st.sampled_from(["team", "owner", "env", "y"]), st.sampled_from(["d", "${user}"])),
)
def test_defaults_never_overwrite_and_never_duplicate_keys(
    existing: dict[str, str], defaults: dict[str, str]
) -> None:
    pol = Policy.model_validate({"preflight": PreflightPolicy(tag_defaults=defaults)})
    req = {"TrainingJobName": "j", "Tags": [{"Key": k, "Value": v} for k, v in existing.items()]}
    snapshot = copy.deepcopy(req)
    out, filled = fill_tag_defaults(req, pol, "user1")
    keys = [t["Key"] for t in out["Tags"]]
    assert len(keys) == len(set(keys))
    final = tags_of(out)
    for key, value in existing.items():
        if value.strip():
            assert final[key] == value
    for key in defaults:
        assert final.get(key, "").strip()  # every default ends up non-empty
    assert set(filled) == {k for k in defaults if not existing.get(k, "").strip()}
    assert req == snapshot


# ---- the policy section -------------------------------------------------------------------------


def test_preflight_docstring_example_is_a_valid_policy_section() -> None:
    doc = PreflightPolicy.__doc__ or ""
    example = yaml.safe_load(textwrap.dedent(doc.split("Example:", 1)[1]))
    assert Policy.model_validate(example).preflight.tag_defaults == {"owner": "${user}", "env": "dev"}


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        ({"owner": "${login}"}, "unknown placeholder(s) ${login}"),
        ({"aws:owner": "x"}, "not starting with 'aws:'"),
        ({"owner": "${user"}, "unterminated placeholder"),
        ({"owner": "x" * 300}, "longer than 256"),
    ],
)
def test_invalid_tag_defaults_are_rejected_with_the_reason(defaults: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
        Policy.model_validate({"preflight": {"tag_defaults": defaults}})


def test_unknown_preflight_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="refuse"):
        Policy.model_validate({"preflight": {"refuse": "always"}})


def test_a_declared_window_the_service_would_ignore_is_a_warning_before_launch(now: datetime) -> None:
    # Given a compliant request that declares a 9-hour idle window (over the default cap of 240 minutes)
    # and a valid 180-minute progress window
    compliant = request("compliant.json")
    compliant["Tags"] = [
        *compliant["Tags"],
        {"Key": "smgov:idle-minutes", "Value": "540"},
        {"Key": "smgov:progress-minutes", "Value": "180"},
    ]
    # When it is checked
    outcome = preflight_request(compliant, example_policy(), now, user="carol")
    # Then it is launched with one warning, the ignored tag with its fix; the valid one says nothing
    assert not outcome.refused
    (warning,) = outcome.warnings
    assert (warning.code, warning.rule) == ("judge.tolerance.ignored", "idle-guard") and warning.remedy
    assert "smgov:idle-minutes" in outcome.render_text()
    # and a strict preflight refuses it
    assert preflight_request(compliant, example_policy(), now, user="carol", strict=True).refused
