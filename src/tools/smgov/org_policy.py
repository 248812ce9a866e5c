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

Distribution: the StackSets' stack instances hold one ``AWS::SSM::Parameter`` each; changing a document
updates only those parameters (no function is redeployed) and the functions read it within
``PolicyCacheSeconds``. One StackSet per target OU, with the OU's document as its own value (an account
that joins the OU later gets it: ``stackset_template``); an account's own document is a group of its OU's
StackSet with ``AccountFilterType: INTERSECTION`` and the OU's group excludes it (``DIFFERENCE``), so no
instance is targeted twice.

Limits: a CloudFormation parameter value and a standard-tier SSM parameter value are each at most
4,096 bytes (CloudFormation quotas; SSM ``PutParameter``): documents are written as compact JSON and a
larger one is refused here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sagemaker_governance.domain.policy import merge_documents
from sagemaker_governance.domain.policy_document import PolicyDocumentError, build_policy

MAX_VALUE_BYTES = 4096
TARGET_ID = re.compile(r"^(ou-[0-9a-z]{4,32}-[a-z0-9]{8,32}|r-[0-9a-z]{4,32})$")
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
    # one StackSet per target, named after it: an OU or root id (Organizations' patterns), each once
    errors += [
        f"targets: {t!r} is not an OU or root id (ou-..., r-...)" for t in targets if not TARGET_ID.match(t)
    ]
    errors += [f"targets: {t} listed twice" for t in sorted({t for t in targets if targets.count(t) > 1})]
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
    """The CloudFormation template (deployed by the StackSet administrator) of the policy StackSets: one per
    target OU, its OU's document (the organization's, when the OU has none) as the StackSet's own value.

    Not one StackSet with per-OU ``ParameterOverrides``: auto-deployment gives an account that joins an OU
    later the StackSet's values, not the overrides (CloudFormation user guide, "Enable or disable automatic
    deployments"), so a new account got the organization's document, with its mode, instead of its OU's.
    An account's own document stays an override of its OU's StackSet (it names an account that exists).

    The first target's StackSet keeps the logical id and name of the single StackSet before
    (``PolicyStackSet``, ``sagemaker-governance-policy``): it is updated, not replaced, and its accounts
    keep their parameter. The others depend on it: it is updated first, removing the instances of the
    other OUs, whose parameter (same name) their own StackSet can only create once it is gone."""
    regions = [str(r) for r in spec["regions"]]
    accounts = {str(a): str(e["ou"]) for a, e in (spec.get("accounts") or {}).items()}
    resources: dict[str, Any] = {}
    for index, ou in enumerate(str(t) for t in spec["targets"]):
        own = sorted(a for a, parent in accounts.items() if parent == ou)
        targets: dict[str, Any] = {"OrganizationalUnitIds": [ou]}
        if own:
            targets |= {"Accounts": own, "AccountFilterType": "DIFFERENCE"}
        groups: list[dict[str, Any]] = [{"DeploymentTargets": targets, "Regions": regions}]
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
        resource: dict[str, Any] = {
            "Type": "AWS::CloudFormation::StackSet",
            "Properties": {
                "StackSetName": STACKSET_NAME if index == 0 else f"{STACKSET_NAME}-{ou}",
                "Description": f"The governance policy document of OU {ou}, in every account and region of it",
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
                    {
                        "ParameterKey": "PolicyDocument",
                        "ParameterValue": documents.get(f"ou:{ou}", documents["org"]),
                    },
                    {"ParameterKey": "PolicyParameterName", "ParameterValue": parameter_name},
                ],
                "StackInstancesGroup": groups,
            },
        }
        if index:
            resource["DependsOn"] = FIRST_LOGICAL_ID
        resources[FIRST_LOGICAL_ID if index == 0 else logical_id(ou)] = resource
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
        "Resources": resources,
    }


FIRST_LOGICAL_ID = "PolicyStackSet"


def logical_id(ou: str) -> str:
    """``ou-abcd-sand5678`` -> ``PolicyStackSetOuAbcdSand5678`` (logical ids are alphanumeric)."""
    return FIRST_LOGICAL_ID + "".join(c for c in ou.title() if c.isalnum())
