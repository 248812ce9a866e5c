"""Across an organization: the StackSet template (org/stackset.yaml) and the member template it deploys
(template.yaml, expanded from SAM by `smgov org member-template`) lint clean and say what a service-managed
StackSet needs: no transform, code read in each member's own region, auto-deployment to OUs, a delegated
administrator, per-OU parameters that exist in the member template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smgov.cfn_template import load_template
from smgov.org_member import BUCKET_PARAMETER, code_keys
from tests.infrastructure.conftest import cfn_lint

ROOT = Path(__file__).resolve().parents[2]
STACKSET = ROOT / "org" / "stackset.yaml"


def packaged_text() -> str:
    """template.yaml as `sam package` leaves it: code locations are s3:// URIs."""
    text = (ROOT / "template.yaml").read_text()
    text = text.replace("CodeUri: src/functions/", "CodeUri: s3://artifacts-us-east-1/0123abcd")
    return text.replace("ContentUri: layers/dependencies/", "ContentUri: s3://artifacts-us-east-1/4567ef01")


def member_template_cli(packaged: Path, output: Path) -> subprocess.CompletedProcess[str]:
    """`smgov org member-template` in its own process, as a platform team runs it: the SAM translator
    leaves process-wide state behind that perturbs other tests' Hypothesis strategies."""
    command = [sys.executable, "-m", "smgov.cli.main", "org", "member-template", str(packaged), "-o", str(output)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def member(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("org")
    (folder / "packaged.yaml").write_text(packaged_text())
    result = member_template_cli(folder / "packaged.yaml", folder / "member.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0123abcd", "4567ef01"]  # the keys every regional bucket must hold
    expanded: dict[str, Any] = json.loads((folder / "member.json").read_text())
    return expanded


@pytest.fixture(scope="module")
def stackset() -> dict[str, Any]:
    properties: dict[str, Any] = load_template(STACKSET)["Resources"]["GovernanceStackSet"]["Properties"]
    return properties


# logical id -> (StackSetName, GovernanceMode, the OU parameter it targets)
STACKSETS = {
    "GovernanceStackSet": ("sagemaker-governance", "enforce", "EnforceOrganizationalUnitIds"),
    "AuditModeStackSet": ("sagemaker-governance-audit-mode", "audit", "AuditOrganizationalUnitIds"),
}


def test_the_stackset_template_lints_clean() -> None:
    result = cfn_lint(STACKSET)
    assert (result.returncode, result.stdout) == (0, "")


def test_the_member_template_is_plain_cloudformation_and_lints_clean(
    member: dict[str, Any], tmp_path: Path
) -> None:
    # Service-managed StackSets refuse macros, AWS::Serverless included (CreateStackSet, Capabilities)
    assert "Transform" not in member
    assert not [k for k, v in member["Resources"].items() if v["Type"].startswith("AWS::Serverless::")]
    (tmp_path / "member.json").write_text(json.dumps(member))
    result = cfn_lint(tmp_path / "member.json")
    assert (result.returncode, result.stdout) == (0, "")


def test_member_code_is_read_from_the_members_region(member: dict[str, Any]) -> None:
    code = [
        v["Properties"].get("Code") or v["Properties"].get("Content")
        for v in member["Resources"].values()
        if v["Type"] in {"AWS::Lambda::Function", "AWS::Lambda::LayerVersion"}
    ]
    assert len(code) == 4  # three functions and the layer
    assert all(c["S3Bucket"] == {"Fn::Sub": "${ArtifactBucketPrefix}-${AWS::Region}"} for c in code)
    assert code_keys(member) == ["0123abcd", "4567ef01"]
    assert BUCKET_PARAMETER in member["Parameters"]


def test_the_member_keeps_the_governance_stack(member: dict[str, Any]) -> None:
    # the same template.yaml: every parameter, the version doctor compares, every non-SAM resource
    source = load_template()
    assert set(source["Parameters"]) | {BUCKET_PARAMETER} == set(member["Parameters"])
    assert (
        member["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"]
        == (source["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"])
    )
    plain = {k for k, v in source["Resources"].items() if not v["Type"].startswith("AWS::Serverless::")}
    assert plain <= set(member["Resources"])


def test_service_managed_auto_deployed_delegated_admin() -> None:
    resources = load_template(STACKSET)["Resources"]
    assert set(resources) == set(STACKSETS)
    for name in STACKSETS:
        stackset = resources[name]["Properties"]
        assert stackset["PermissionModel"] == "SERVICE_MANAGED"
        assert stackset["AutoDeployment"] == {"Enabled": True, "RetainStacksOnAccountRemoval": False}
        assert stackset["Capabilities"] == ["CAPABILITY_IAM"]
    spec = load_template(STACKSET)["Parameters"]["CallAs"]
    assert set(spec["AllowedValues"]) == {"SELF", "DELEGATED_ADMIN"}


def test_each_mode_is_its_stacksets_own_value_so_accounts_that_join_later_get_it() -> None:
    # auto-deployment gives an account that joins a target OU later the StackSet's values, never a group's
    # ParameterOverrides (user guide, "Enable or disable automatic deployments"): the mode must not be one
    resources = load_template(STACKSET)["Resources"]
    for name, (stackset_name, mode, ous) in STACKSETS.items():
        stackset = resources[name]["Properties"]
        assert stackset["StackSetName"] == stackset_name
        values = {p["ParameterKey"]: p["ParameterValue"] for p in stackset["Parameters"]}
        assert values["GovernanceMode"] == mode, name
        (group,) = stackset["StackInstancesGroup"]
        _condition, targets, otherwise = group["Fn::If"]
        assert "ParameterOverrides" not in targets, name
        assert targets["DeploymentTargets"] == {"OrganizationalUnitIds": {"Ref": ous}}
        assert otherwise == {"Ref": "AWS::NoValue"}
    assert {m for _, m, _ in STACKSETS.values()} == set(
        load_template()["Parameters"]["GovernanceMode"]["AllowedValues"]
    )


def test_the_two_stacksets_differ_only_in_name_mode_and_targets() -> None:
    resources = load_template(STACKSET)["Resources"]

    def shared(name: str) -> dict[str, Any]:
        properties = dict(resources[name]["Properties"])
        for key in ("StackSetName", "Description", "StackInstancesGroup"):
            properties.pop(key)
        properties["Parameters"] = [p for p in properties["Parameters"] if p["ParameterKey"] != "GovernanceMode"]
        return properties

    assert shared("GovernanceStackSet") == shared("AuditModeStackSet")


def test_the_upgrade_from_one_stackset_keeps_the_enforce_accounts_and_creates_before_it_removes() -> None:
    # GovernanceStackSet is the StackSet that held both modes (same logical id and name: not replaced); its
    # enforce instances stay. The audit StackSet is created/updated first, so an account moving to it gets
    # its new stack before the old one is deleted.
    resources = load_template(STACKSET)["Resources"]
    assert resources["GovernanceStackSet"]["DependsOn"] == "AuditModeStackSet"
    assert "DependsOn" not in resources["AuditModeStackSet"]


def test_stackset_parameters_exist_in_the_member(member: dict[str, Any]) -> None:
    for name in STACKSETS:
        stackset = load_template(STACKSET)["Resources"][name]["Properties"]
        passed = {p["ParameterKey"] for p in stackset["Parameters"]}
        assert passed <= set(member["Parameters"]), name


def test_cli_refuses_an_unpackaged_template(tmp_path: Path) -> None:
    # its local code paths would mean nothing in a member account
    result = member_template_cli(ROOT / "template.yaml", tmp_path / "x.json")
    assert result.returncode == 2 and "not a `sam package` output" in result.stderr
    assert not (tmp_path / "x.json").exists()


def test_doctor_expects_exactly_what_the_sam_translator_grants(member: dict[str, Any]) -> None:
    # smgov doctor compares each deployed role with contracted_actions: it must be what SAM really builds
    # (the adapters' actions, the basic execution role's log writes, the on-failure destination's grant)
    from smgov.doctor.iam import LAMBDA_BASIC_EXECUTION, contracted_actions

    source = load_template()
    for function in ("JobEventsFunction", "IdleStopperFunction", "ReconcilerFunction"):
        role = member["Resources"][f"{function}Role"]["Properties"]
        granted: set[str] = set()
        for policy in role.get("Policies", []):
            for raw in policy["PolicyDocument"]["Statement"]:
                statement = raw["Fn::If"][1] if "Fn::If" in raw else raw
                granted |= set(
                    statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                )
        basic = {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"}
        assert basic in role["ManagedPolicyArns"]
        granted |= LAMBDA_BASIC_EXECUTION
        assert granted == contracted_actions(function, True, source["Resources"][function]), function


def test_operations_run_at_the_concurrency_they_name(stackset: dict[str, Any]) -> None:
    # STRICT_FAILURE_TOLERANCE (the default) would start at FailureTolerance + 1 accounts, not
    # MaxConcurrentPercentage (StackSetOperationPreferences.ConcurrencyMode)
    preferences = stackset["OperationPreferences"]
    assert preferences["ConcurrencyMode"] == "SOFT_FAILURE_TOLERANCE"
    assert {"MaxConcurrentPercentage", "FailureTolerancePercentage"} <= set(preferences)


def test_the_member_names_no_partition(member: dict[str, Any]) -> None:
    # the StackSet deploys one template everywhere: the translator's own ARNs (the basic execution role's
    # managed policy) were arn:aws:..., wrong in aws-cn and aws-us-gov
    text = json.dumps(member)
    assert '"arn:aws' not in text
    assert text.count("arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole") == 3


def test_partition_neutral_leaves_substitutions_alone() -> None:
    from smgov.org_member import partition_neutral

    template = {
        "A": "arn:aws:iam::aws:policy/x",
        "B": {"Fn::Sub": "arn:aws:s3:::${Bucket}"},
        "C": ["arn:aws-cn:iam::aws:policy/x", "arn:aws:sns:${AWS::Region}:1:t", "not an arn:aws:"],
    }
    assert partition_neutral(template) == {
        "A": {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/x"},
        "B": {"Fn::Sub": "arn:aws:s3:::${Bucket}"},
        "C": [
            {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/x"},
            "arn:aws:sns:${AWS::Region}:1:t",
            "not an arn:aws:",
        ],
    }
