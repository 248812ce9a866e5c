"""One policy for the organization, per-OU and per-account overrides, validated once, distributed by a
service-managed StackSet that writes each member's SSM policy parameter (``PolicyParameterName``).

The spec (``examples/org-policy.yaml``)::

    regions: [us-east-1, eu-west-1]
    targets: [ou-abcd-prod1234, ou-abcd-sand5678]   # every OU governed
    policy: {...}                                   # the organization's document
    ous: {ou-abcd-prod1234: {...}}                  # merged over it for the OU's accounts
    accounts: {"111122223333": {ou: ou-abcd-sand5678, policy: {...}}}   # merged over the OU's

Documents merge exactly as the functions merge the SSM document over their defaults (``merge_documents``:
rules by id, exemptions add up, anything else replaces). Every effective document (the organization's,
each OU's, each account's) is validated here, against the template's defaults, before anything is
written: a document that would not load is never distributed. The members still validate what they read
and keep their last good policy.

Distribution: the StackSet's stack instances hold one ``AWS::SSM::Parameter`` each; changing a document
updates only those parameters (no function is redeployed) and the functions read it within
``PolicyCacheSeconds``. Per-OU documents are ``ParameterOverrides`` of an OU's instances; an account's own
document is a group with ``AccountFilterType: INTERSECTION`` and the OU's group excludes it
(``DIFFERENCE``), so no instance is targeted twice.

Limits: a CloudFormation parameter value and a standard-tier SSM parameter value are each at most
4,096 bytes (CloudFormation quotas; SSM ``PutParameter``): documents are written as compact JSON and a
larger one is refused here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sagemaker_governance.domain.policy import merge_documents
from sagemaker_governance.domain.policy_document import PolicyDocumentError, build_policy

MAX_VALUE_BYTES = 4096
# The largest template `aws cloudformation deploy` sends in the request (TemplateBody: "a maximum length of
# 51,200 bytes", CloudFormation API reference); above it, awscli refuses unless given --s3-bucket, which
# uploads the template and passes its TemplateURL (up to 1 MB).
MAX_TEMPLATE_BODY_BYTES = 51_200
STACKSET_NAME = "sagemaker-governance-policy"


class OrgPolicyError(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _mapping(value: Any, where: str, errors: list[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.append(f"{where}: must be a mapping")
        return {}
    return {str(k): v for k, v in value.items()}


def effective_documents(spec: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, str]:
    """``org``, ``ou:<id>``, ``account:<id>`` -> the compact JSON each target gets; every one validated."""
    errors: list[str] = []
    org = _mapping(spec.get("policy"), "policy", errors)
    targets = [str(t) for t in spec.get("targets") or []]
    ous = _mapping(spec.get("ous"), "ous", errors)
    accounts = _mapping(spec.get("accounts"), "accounts", errors)
    if not targets:
        errors.append("targets: list the OUs to govern")
    if not spec.get("regions"):
        errors.append("regions: list the regions to govern")
    documents: dict[str, dict[str, Any]] = {"org": org}
    for ou, overlay in ous.items():
        if ou not in targets:
            errors.append(f"ous.{ou}: not one of the targets")
        documents[f"ou:{ou}"] = merge_documents(org, _mapping(overlay, f"ous.{ou}", errors))
    for account, raw in accounts.items():
        entry = _mapping(raw, f"accounts.{account}", errors)
        ou = str(entry.get("ou", ""))
        if ou not in targets:
            errors.append(f"accounts.{account}.ou: {ou or 'missing'}, not one of the targets")
        parent = documents.get(f"ou:{ou}", org)
        documents[f"account:{account}"] = merge_documents(
            parent, _mapping(entry.get("policy"), f"accounts.{account}.policy", errors)
        )
    rendered: dict[str, str] = {}
    for name, document in documents.items():
        try:
            build_policy(base, document)
        except PolicyDocumentError as exc:
            errors += [f"{name}: {e}" for e in exc.errors]
            continue
        text = json.dumps(document, separators=(",", ":"), sort_keys=True, default=str)
        if len(text.encode()) > MAX_VALUE_BYTES:
            errors.append(f"{name}: {len(text.encode())} bytes as JSON, more than {MAX_VALUE_BYTES}")
        rendered[name] = text
    if errors:
        raise OrgPolicyError(errors)
    return rendered


MEMBER_TEMPLATE: dict[str, Any] = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Description": "sagemaker-governance policy document (distributed by the organization's StackSet)",
    "Parameters": {
        "PolicyDocument": {"Type": "String", "MaxLength": MAX_VALUE_BYTES},
        "PolicyParameterName": {"Type": "String", "AllowedPattern": "^/[a-zA-Z0-9_./-]+$"},
    },
    "Resources": {
        "PolicyDocumentParameter": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {
                "Name": {"Ref": "PolicyParameterName"},
                "Type": "String",
                "Tier": "Standard",
                "Value": {"Ref": "PolicyDocument"},
                "Description": "Governance policy for this account (the organization's StackSet writes it)",
            },
        }
    },
}


def stackset_template(
    spec: Mapping[str, Any], documents: Mapping[str, str], parameter_name: str
) -> dict[str, Any]:
    """The CloudFormation template (deployed by the StackSet administrator) of the policy StackSet."""
    regions = [str(r) for r in spec["regions"]]
    accounts = {str(a): str(e["ou"]) for a, e in (spec.get("accounts") or {}).items()}
    groups: list[dict[str, Any]] = []
    for ou in [str(t) for t in spec["targets"]]:
        own = sorted(a for a, parent in accounts.items() if parent == ou)
        targets: dict[str, Any] = {"OrganizationalUnitIds": [ou]}
        if own:
            targets |= {"Accounts": own, "AccountFilterType": "DIFFERENCE"}
        group: dict[str, Any] = {"DeploymentTargets": targets, "Regions": regions}
        if f"ou:{ou}" in documents:
            group["ParameterOverrides"] = [
                {"ParameterKey": "PolicyDocument", "ParameterValue": documents[f"ou:{ou}"]}
            ]
        groups.append(group)
        for account in own:
            groups.append(
                {
                    "DeploymentTargets": {
                        "OrganizationalUnitIds": [ou],
                        "Accounts": [account],
                        "AccountFilterType": "INTERSECTION",
                    },
                    "Regions": regions,
                    "ParameterOverrides": [
                        {"ParameterKey": "PolicyDocument", "ParameterValue": documents[f"account:{account}"]}
                    ],
                }
            )
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "sagemaker-governance: one policy document for the organization (smgov org policy-template)",
        "Parameters": {
            "CallAs": {
                "Type": "String",
                "Default": "DELEGATED_ADMIN",
                "AllowedValues": ["SELF", "DELEGATED_ADMIN"],
            }
        },
        "Resources": {
            "PolicyStackSet": {
                "Type": "AWS::CloudFormation::StackSet",
                "Properties": {
                    "StackSetName": STACKSET_NAME,
                    "Description": "The governance policy document in every governed account and region",
                    "PermissionModel": "SERVICE_MANAGED",
                    "CallAs": {"Ref": "CallAs"},
                    "AutoDeployment": {"Enabled": True, "RetainStacksOnAccountRemoval": False},
                    "ManagedExecution": {"Active": True},
                    # as org/stackset.yaml: MaxConcurrentPercentage at once, not FailureTolerance + 1
                    "OperationPreferences": {
                        "ConcurrencyMode": "SOFT_FAILURE_TOLERANCE",
                        "RegionConcurrencyType": "PARALLEL",
                        "MaxConcurrentPercentage": 50,
                        "FailureTolerancePercentage": 10,
                    },
                    "TemplateBody": json.dumps(MEMBER_TEMPLATE),
                    "Parameters": [
                        {"ParameterKey": "PolicyDocument", "ParameterValue": documents["org"]},
                        {"ParameterKey": "PolicyParameterName", "ParameterValue": parameter_name},
                    ],
                    "StackInstancesGroup": groups,
                },
            }
        },
    }
