"""`make org-deploy` never takes governance away unasked: a parameter is passed only when its variable is
given (an upgrade keeps the OUs, the central bus, CallAs), ORG_REGIONS is required, and `smgov org
deploy-check` refuses a first deploy without OUs and any removal of OUs, regions or the central bus
without CONFIRM_REMOVE=yes. Offline: `make -n`, and `make` itself with a stand-in `aws` on PATH that
answers describe-stacks and records the deploy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smgov.org_deploy import DeployRefused, check, given_parameters

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = (
    "ENFORCE_OUS",
    "AUDIT_OUS",
    "CENTRAL_AUDIT_BUS_ARN",
    "CALL_AS",
    "ARTIFACT_BUCKET_PREFIX",
    "ORG_REGIONS",
)
URL = "https://acme-smgov-us-east-1.s3.us-east-1.amazonaws.com/member-0123456789abcdef.json"
PREVIOUS = {
    "MemberTemplateURL": URL,
    "ArtifactBucketPrefix": "acme-smgov",
    "Regions": "us-east-1,eu-west-1",
    "EnforceOrganizationalUnitIds": "ou-abcd-prod1234",
    "AuditOrganizationalUnitIds": "ou-abcd-sand5678",
    "CallAs": "DELEGATED_ADMIN",
    "CentralAuditBusArn": "arn:aws:events:us-east-1:999999999999:event-bus/sagemaker-governance-audit",
}

FAKE_AWS = """#!/bin/bash
if [ "$2" = describe-stacks ]; then
    if [ -n "${FAKE_DESCRIBE_ERROR:-}" ]; then echo "$FAKE_DESCRIBE_ERROR" >&2; exit 254; fi
    if [ -f "$FAKE_PREVIOUS" ]; then cat "$FAKE_PREVIOUS"; exit 0; fi
    echo "An error occurred (ValidationError) when calling the DescribeStacks operation: Stack with id $4 does not exist" >&2
    exit 254
fi
echo "$@" > "$FAKE_DEPLOYED"
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES and k != "CONFIRM_REMOVE"}
    return env | extra


def make_dry_run(*assignments: str) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", "-n", "org-deploy", *assignments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=clean_env())


def deployed_parameters(dry_run: str) -> dict[str, str]:
    line = next(x for x in dry_run.splitlines() if "--parameter-overrides" in x)
    return given_parameters(line.split("--parameter-overrides", 1)[1].split())


def test_an_upgrade_without_the_optional_variables_passes_only_what_is_given() -> None:
    result = make_dry_run("ORG_REGIONS=us-east-1 eu-west-1", "ARTIFACT_BUCKET_PREFIX=acme-smgov")
    assert result.returncode == 0, result.stderr
    # every other parameter (the OUs, the central bus, CallAs) keeps its previous value
    assert deployed_parameters(result.stdout) == {
        "MemberTemplateURL": "$(<.aws-sam/org/member-url.txt)",
        "Regions": "us-east-1,eu-west-1",
        "ArtifactBucketPrefix": "acme-smgov",
    }
    # the guard runs first, on the same parameters
    check_line = result.stdout.index("smgov org deploy-check")
    assert check_line < result.stdout.index("aws cloudformation deploy")
    assert "--confirm-remove" not in result.stdout


def test_a_variable_given_empty_is_passed_empty_and_confirmation_is_explicit() -> None:
    result = make_dry_run("ORG_REGIONS=us-east-1", "ENFORCE_OUS=", "CENTRAL_AUDIT_BUS_ARN=", "CONFIRM_REMOVE=yes")
    assert result.returncode == 0, result.stderr
    parameters = deployed_parameters(result.stdout)
    assert parameters["EnforceOrganizationalUnitIds"] == "" and parameters["CentralAuditBusArn"] == ""
    assert "AuditOrganizationalUnitIds" not in parameters and "CallAs" not in parameters
    assert "--confirm-remove" in result.stdout


def test_org_deploy_requires_org_regions() -> None:
    # the Makefile's default (us-east-1) would delete every other region's instances
    result = make_dry_run("ENFORCE_OUS=ou-abcd-prod1234")
    assert result.returncode == 2
    assert "set ORG_REGIONS" in result.stderr and "aws cloudformation" not in result.stdout


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    # smgov from this checkout (the venv's entry point may be another checkout's)
    (bin_dir / "smgov").write_text(f'#!/bin/bash\nexec "{sys.executable}" -m smgov.cli.main "$@"\n')
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    org_dir = tmp_path / "org"
    org_dir.mkdir()
    (org_dir / "member-url.txt").write_text(URL + "\n")
    return {
        "bin": bin_dir,
        "org": org_dir,
        "previous": tmp_path / "previous.json",
        "deployed": tmp_path / "deployed",
    }


def run_make(fake: dict[str, Path], *assignments: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", "org-deploy", f"BIN={fake['bin']}", f"ORG_DIR={fake['org']}"]
    environment = clean_env(
        PATH=f"{fake['bin']}:{os.environ['PATH']}",
        FAKE_PREVIOUS=str(fake["previous"]),
        FAKE_DEPLOYED=str(fake["deployed"]),
        PYTHONPATH=os.pathsep.join(sys.path),
        **env,
    )
    return subprocess.run(
        [*command, *assignments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=environment,
        timeout=120,
    )


def with_previous(fake: dict[str, Path], parameters: dict[str, str]) -> None:
    stack = {
        "StackName": "sagemaker-governance-org",
        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    }
    fake["previous"].write_text(json.dumps({"Stacks": [stack]}))


def deployed(fake: dict[str, Path]) -> dict[str, str] | None:
    if not fake["deployed"].exists():
        return None
    return given_parameters(fake["deployed"].read_text().split("--parameter-overrides", 1)[1].split())


def test_the_readmes_upgrade_keeps_the_ous_and_the_central_bus(fake: dict[str, Path]) -> None:
    with_previous(fake, PREVIOUS)
    result = run_make(fake, "ORG_REGIONS=us-east-1 eu-west-1", "ARTIFACT_BUCKET_PREFIX=acme-smgov")
    assert result.returncode == 0, result.stderr
    sent = deployed(fake)
    assert sent is not None and set(sent) == {"MemberTemplateURL", "Regions", "ArtifactBucketPrefix"}
    assert "upgrade" in result.stdout


@pytest.mark.parametrize(
    ("assignments", "reason"),
    [
        (
            ("ORG_REGIONS=us-east-1 eu-west-1", "ENFORCE_OUS=", "AUDIT_OUS="),
            "every stack instance would be deleted",
        ),
        (("ORG_REGIONS=us-east-1 eu-west-1", "AUDIT_OUS="), "OUs removed: ou-abcd-sand5678"),
        (("ORG_REGIONS=us-east-1",), "regions removed: eu-west-1"),
        (("ORG_REGIONS=us-east-1 eu-west-1", "CENTRAL_AUDIT_BUS_ARN="), "stop forwarding"),
    ],
)
def test_a_removal_is_refused_unless_confirmed(
    fake: dict[str, Path], assignments: tuple[str, ...], reason: str
) -> None:
    with_previous(fake, PREVIOUS)
    refused = run_make(fake, *assignments)
    assert refused.returncode != 0 and reason in refused.stderr and "CONFIRM_REMOVE=yes" in refused.stderr
    assert deployed(fake) is None  # nothing deployed
    confirmed = run_make(fake, *assignments, "CONFIRM_REMOVE=yes")
    assert confirmed.returncode == 0, confirmed.stderr
    assert deployed(fake) is not None


def test_a_first_deploy_without_ous_is_refused(fake: dict[str, Path]) -> None:
    refused = run_make(fake, "ORG_REGIONS=us-east-1", "ARTIFACT_BUCKET_PREFIX=acme-smgov", "CONFIRM_REMOVE=yes")
    assert refused.returncode != 0 and "set ENFORCE_OUS and/or AUDIT_OUS" in refused.stderr
    assert deployed(fake) is None
    created = run_make(
        fake, "ORG_REGIONS=us-east-1", "ARTIFACT_BUCKET_PREFIX=acme-smgov", "AUDIT_OUS=ou-abcd-sand5678"
    )
    assert created.returncode == 0, created.stderr
    assert deployed(fake) == {
        "MemberTemplateURL": URL,
        "Regions": "us-east-1",
        "ArtifactBucketPrefix": "acme-smgov",
        "AuditOrganizationalUnitIds": "ou-abcd-sand5678",
    }


def test_a_stack_that_cannot_be_read_is_not_taken_for_a_first_deploy(fake: dict[str, Path]) -> None:
    result = run_make(
        fake, "ORG_REGIONS=us-east-1", "ENFORCE_OUS=ou-abcd-prod1234", FAKE_DESCRIBE_ERROR="AccessDenied"
    )
    assert result.returncode != 0 and "AccessDenied" in result.stderr
    assert deployed(fake) is None


def test_moving_an_ou_between_modes_is_no_removal() -> None:
    given = {"EnforceOrganizationalUnitIds": "ou-abcd-prod1234,ou-abcd-sand5678", "AuditOrganizationalUnitIds": ""}
    lines = check(PREVIOUS, given, confirm_remove=False)
    assert any(line.startswith("AuditOrganizationalUnitIds:") for line in lines)


def test_an_ou_in_both_modes_is_refused_even_when_confirmed() -> None:
    with pytest.raises(DeployRefused, match="in both ENFORCE_OUS and AUDIT_OUS"):
        check(PREVIOUS, {"AuditOrganizationalUnitIds": "ou-abcd-prod1234"}, confirm_remove=True)


def test_a_move_from_audit_to_enforce_says_its_accounts_are_without_a_stack_for_a_while() -> None:
    given = {"EnforceOrganizationalUnitIds": "ou-abcd-prod1234,ou-abcd-sand5678", "AuditOrganizationalUnitIds": ""}
    lines = check(PREVIOUS, given, confirm_remove=False)
    assert any(line.startswith("note: ou-abcd-sand5678 move from audit to enforce") for line in lines)
