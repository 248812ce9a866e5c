"""One policy for the organization: every effective document (organization, OU, account) is merged like
the functions merge the SSM document and validated before anything is written; the StackSet targets each
account once, with its own document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.domain.rules.max_instances import MaxInstanceCount
from smgov.cli.main import main
from smgov.local_policy import deployed_settings
from smgov.org_policy import OrgPolicyError, effective_documents, stackset_template

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "org-policy.yaml"


@pytest.fixture
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return loaded


@pytest.fixture
def base() -> dict[str, Any]:
    return deployed_settings(environ={}).base_policy_document()


def test_each_target_gets_the_organizations_document_with_its_overrides(
    spec: dict[str, Any], base: dict[str, Any]
) -> None:
    documents = effective_documents(spec, base)
    policies = {name: build_policy(base, json.loads(text)) for name, text in documents.items()}
    limit = {name: next(r.max for r in p.rules if isinstance(r, MaxInstanceCount)) for name, p in policies.items()}
    assert limit == {"org": 8, "ou:ou-abcd-prod1234": 16, "account:111122223333": 64}
    assert policies["ou:ou-abcd-prod1234"].mode.value == "enforce"
    assert policies["account:111122223333"].mode.value == "audit"  # its OU has no override: the organization's


def test_an_invalid_override_is_refused_before_anything_is_written(
    spec: dict[str, Any], base: dict[str, Any]
) -> None:
    spec["ous"]["ou-abcd-prod1234"]["mode"] = "sometimes"
    spec["accounts"]["111122223333"]["ou"] = "ou-not-a-target"
    with pytest.raises(OrgPolicyError) as caught:
        effective_documents(spec, base)
    assert any(e.startswith("ou:ou-abcd-prod1234: mode") for e in caught.value.errors)
    assert any("accounts.111122223333.ou" in e for e in caught.value.errors)


def test_a_document_over_the_parameter_limit_is_refused(spec: dict[str, Any], base: dict[str, Any]) -> None:
    spec["policy"]["exemptions"] = [
        {
            "job_name_prefix": f"bench-{i:04d}-",
            "rules": ["max-instances"],
            "expires": "2026-12-31",
            "reason": "x" * 40,
        }
        for i in range(60)
    ]
    with pytest.raises(OrgPolicyError, match="more than 4096"):
        effective_documents(spec, base)


def cfn_lint(templates: dict[Path, dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """cfn-lint as `make validate` runs it, in its own process: one process for every template (each file
    is linted on its own, and a finding names its file; most of a run is cfn-lint's start)."""
    for path, template in templates.items():
        path.write_text(json.dumps(template))
    command = [str(Path(sys.executable).parent / "cfn-lint"), "--regions", "us-east-1", "--", *map(str, templates)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)


def test_the_stackset_targets_every_account_once_and_lints_clean(
    spec: dict[str, Any], base: dict[str, Any], tmp_path: Path
) -> None:
    documents = effective_documents(spec, base)
    template = stackset_template(spec, documents, "/sagemaker-governance/policy")
    sandbox_set = template["Resources"]["PolicyStackSetOuAbcdSand5678"]["Properties"]
    groups = sandbox_set["StackInstancesGroup"]
    sandbox = [g["DeploymentTargets"] for g in groups]
    # the OU's group leaves the account out; the account's group is only that account
    assert sandbox == [
        {
            "OrganizationalUnitIds": ["ou-abcd-sand5678"],
            "Accounts": ["111122223333"],
            "AccountFilterType": "DIFFERENCE",
        },
        {
            "OrganizationalUnitIds": ["ou-abcd-sand5678"],
            "Accounts": ["111122223333"],
            "AccountFilterType": "INTERSECTION",
        },
    ]
    (account_group,) = [g for g in groups if g["DeploymentTargets"].get("AccountFilterType") == "INTERSECTION"]
    assert account_group["ParameterOverrides"][0]["ParameterValue"] == documents["account:111122223333"]
    # and the other OU's StackSet does not target it
    production = template["Resources"]["PolicyStackSet"]["Properties"]["StackInstancesGroup"]
    assert [g["DeploymentTargets"] for g in production] == [{"OrganizationalUnitIds": ["ou-abcd-prod1234"]}]
    # and the StackSet template and the member template it deploys both lint clean
    member = json.loads(template["Resources"]["PolicyStackSet"]["Properties"]["TemplateBody"])
    result = cfn_lint({tmp_path / "policy-stackset.json": template, tmp_path / "policy-member.json": member})
    assert (result.returncode, result.stdout) == (0, "")


def test_each_ous_document_is_its_stacksets_own_so_accounts_that_join_later_get_it(
    spec: dict[str, Any], base: dict[str, Any]
) -> None:
    # auto-deployment gives an account that joins an OU later the StackSet's values, not an OU group's
    # ParameterOverrides (user guide, "Enable or disable automatic deployments")
    documents = effective_documents(spec, base)
    resources = stackset_template(spec, documents, "/sagemaker-governance/policy")["Resources"]
    own = {
        r["Properties"]["StackSetName"]: {
            p["ParameterKey"]: p["ParameterValue"] for p in r["Properties"]["Parameters"]
        }
        for r in resources.values()
    }
    assert own == {
        "sagemaker-governance-policy": {
            "PolicyDocument": documents["ou:ou-abcd-prod1234"],  # production's document, mode enforce
            "PolicyParameterName": "/sagemaker-governance/policy",
        },
        "sagemaker-governance-policy-ou-abcd-sand5678": {
            "PolicyDocument": documents["org"],  # no OU document: the organization's
            "PolicyParameterName": "/sagemaker-governance/policy",
        },
    }
    for resource in resources.values():
        for group in resource["Properties"]["StackInstancesGroup"]:
            # only an account's own document is an override, and only in a group naming that account
            assert (
                "ParameterOverrides" not in group
                or group["DeploymentTargets"]["AccountFilterType"] == "INTERSECTION"
            )


def test_the_first_target_keeps_the_single_stacksets_id_and_is_updated_first(
    spec: dict[str, Any], base: dict[str, Any]
) -> None:
    # the upgrade from one StackSet: PolicyStackSet (same logical id and name) is updated, not replaced, and
    # removes the other OUs' parameters before their own StackSets create them (same parameter name)
    resources = stackset_template(spec, effective_documents(spec, base), "/p")["Resources"]
    assert list(resources) == ["PolicyStackSet", "PolicyStackSetOuAbcdSand5678"]
    assert "DependsOn" not in resources["PolicyStackSet"]
    assert resources["PolicyStackSetOuAbcdSand5678"]["DependsOn"] == "PolicyStackSet"


def test_targets_must_be_distinct_ou_ids(spec: dict[str, Any], base: dict[str, Any]) -> None:
    spec["targets"] = [*spec["targets"], "ou-abcd-prod1234", "Production"]
    with pytest.raises(OrgPolicyError) as caught:
        effective_documents(spec, base)
    assert "targets: ou-abcd-prod1234 listed twice" in caught.value.errors
    assert "targets: 'Production' is not an OU or root id (ou-..., r-...)" in caught.value.errors


def test_cli_writes_the_template_or_lists_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any]
) -> None:
    out = tmp_path / "policy-stackset.json"
    assert main(["org", "policy-template", str(EXAMPLE), "-o", str(out)]) == 0
    assert (
        json.loads(out.read_text())["Resources"]["PolicyStackSet"]["Properties"]["PermissionModel"]
        == "SERVICE_MANAGED"
    )
    spec["policy"]["mode"] = "sometimes"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(spec))
    assert main(["org", "policy-template", str(broken), "-o", str(tmp_path / "x.json")]) == 1
    assert "org: mode" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_the_policy_stackset_runs_at_the_concurrency_it_names(spec: dict[str, Any], base: dict[str, Any]) -> None:
    template = stackset_template(spec, effective_documents(spec, base), "/sagemaker-governance/policy")
    for resource in template["Resources"].values():
        assert resource["Properties"]["OperationPreferences"]["ConcurrencyMode"] == "SOFT_FAILURE_TOLERANCE"


def test_cli_warns_when_the_template_is_too_large_to_send_in_the_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: dict[str, Any]
) -> None:
    # 34 accounts with their own document of about 1 KB: awscli refuses a template file over 51,200 bytes
    # without --s3-bucket (the reviewer's big34 case, 61,857 bytes)
    spec["policy"]["exemptions"] = [
        {
            "job_name_prefix": f"bench-{i:02d}-",
            "rules": ["max-instances"],
            "expires": "2026-12-31",
            "reason": "x" * 40,
        }
        for i in range(10)
    ]
    sandbox = spec["targets"][-1]
    spec["accounts"] = {
        f"1000000000{i:02d}": {"ou": sandbox, "policy": {"rules": [{"id": "max-instances", "max": 32}]}}
        for i in range(34)
    }
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump(spec))
    out = tmp_path / "policy-stackset.json"
    assert main(["org", "policy-template", str(big), "-o", str(out)]) == 0
    assert out.stat().st_size > 51_200
    err = capsys.readouterr().err
    assert f"{out.stat().st_size:,} bytes" in err and "--s3-bucket" in err
    # the example fits, and says nothing
    assert main(["org", "policy-template", str(EXAMPLE), "-o", str(out)]) == 0
    assert out.stat().st_size <= 51_200 and capsys.readouterr().err == ""
