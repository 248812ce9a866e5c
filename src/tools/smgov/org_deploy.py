"""`make org-deploy`'s guard (`smgov org deploy-check`): what a deploy of org/stackset.yaml would change,
and a refusal when it would take governance away from accounts without being told to.

`make org-deploy` passes a parameter only when its variable is given; `aws cloudformation deploy` then
keeps the previous value of every parameter it is not given (awscli's ``merge_parameters`` sends
``UsePreviousValue`` only for a key absent from ``--parameter-overrides``; ``Key=`` is the value ""). So an
upgrade without ``ENFORCE_OUS``/``AUDIT_OUS``/``CENTRAL_AUDIT_BUS_ARN`` keeps them. What is given is
compared here with the stack's previous parameters (``aws cloudformation describe-stacks``), before
anything is deployed:

- a first deploy with no OU at all is refused (the StackSet would govern no account);
- a deploy that removes an OU or a region (its accounts' stack instances are deleted: the StackSet's
  ``StackInstancesGroup`` lists only what is given) or empties ``CentralAuditBusArn`` (every member stops
  forwarding its records) is refused unless ``CONFIRM_REMOVE=yes``.

Pure: the caller reads the stack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

OU_KEYS = ("EnforceOrganizationalUnitIds", "AuditOrganizationalUnitIds")
REQUIRED_ON_CREATE = ("MemberTemplateURL", "ArtifactBucketPrefix", "Regions")
VARIABLES = {
    "MemberTemplateURL": "make org-package",
    "ArtifactBucketPrefix": "ARTIFACT_BUCKET_PREFIX",
    "Regions": "ORG_REGIONS",
    "EnforceOrganizationalUnitIds": "ENFORCE_OUS",
    "AuditOrganizationalUnitIds": "AUDIT_OUS",
    "CentralAuditBusArn": "CENTRAL_AUDIT_BUS_ARN",
}


class DeployRefused(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def previous_parameters(describe_stacks: Mapping[str, Any]) -> dict[str, str] | None:
    """The stack's parameters from ``describe-stacks`` output; None when there is no stack (``{}``)."""
    stacks = describe_stacks.get("Stacks") or []
    if not stacks:
        return None
    return {str(p["ParameterKey"]): str(p.get("ParameterValue", "")) for p in stacks[0].get("Parameters") or []}


def given_parameters(pairs: Sequence[str]) -> dict[str, str]:
    """``Key=Value`` arguments, split at the first ``=`` as awscli's ``parse_key_value_arg`` does."""
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise DeployRefused([f"{pair!r}: not Key=Value"])
        given[key] = value
    return given


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def check(previous: Mapping[str, str] | None, given: Mapping[str, str], *, confirm_remove: bool) -> list[str]:
    """What the deploy changes, one line each; DeployRefused (every reason) when it must not run."""
    errors: list[str] = []
    effective = {**(previous or {}), **given}
    ous = {key: _items(effective.get(key, "")) for key in OU_KEYS}
    both = sorted(set(ous[OU_KEYS[0]]) & set(ous[OU_KEYS[1]]))
    if both:
        errors.append(f"{', '.join(both)}: in both ENFORCE_OUS and AUDIT_OUS (an OU has one mode)")
    if previous is None:
        missing = [VARIABLES[k] for k in REQUIRED_ON_CREATE if not given.get(k)]
        if missing:
            errors.append(f"first deploy: set {', '.join(missing)}")
        if not any(ous.values()):
            errors.append("first deploy: set ENFORCE_OUS and/or AUDIT_OUS (the StackSet would govern no account)")
        if errors:
            raise DeployRefused(errors)
        return [f"{key}: {value}" for key, value in sorted(given.items())]
    removals = _removals(previous, effective, ous)
    changes = [
        f"{key}: {previous.get(key, '(none)')!r} -> {value!r}"
        for key, value in sorted(given.items())
        if previous.get(key) != value
    ]
    moving = sorted(set(_items(previous.get(OU_KEYS[1], ""))) & set(ous[OU_KEYS[0]]))
    if moving:  # org/stackset.yaml: the audit StackSet is updated first (GovernanceStackSet depends on it)
        changes.append(
            f"note: {', '.join(moving)} move from audit to enforce: their accounts have no governance stack "
            "between their removal from sagemaker-governance-audit-mode and their creation in sagemaker-governance"
        )
    if removals and not confirm_remove:
        errors += [f"{r}; rerun with CONFIRM_REMOVE=yes if that is intended" for r in removals]
    if errors:
        raise DeployRefused(errors)
    return changes + [f"confirmed: {r}" for r in removals]


def _removals(
    previous: Mapping[str, str], effective: Mapping[str, str], ous: Mapping[str, list[str]]
) -> list[str]:
    """What the deploy takes away from accounts: OUs, regions, the central audit bus."""
    removals: list[str] = []
    before_ous = {ou for key in OU_KEYS for ou in _items(previous.get(key, ""))}
    after_ous = {ou for key in OU_KEYS for ou in ous[key]}
    if before_ous and not after_ous:
        removals.append(
            "no OU left: every stack instance would be deleted (governance removed from every account)"
        )
    elif before_ous - after_ous:
        gone = ", ".join(sorted(before_ous - after_ous))
        removals.append(f"OUs removed: {gone} (their accounts' stack instances would be deleted)")
    gone_regions = set(_items(previous.get("Regions", ""))) - set(_items(effective.get("Regions", "")))
    if gone_regions:
        removals.append(
            f"regions removed: {', '.join(sorted(gone_regions))} (their stack instances would be deleted)"
        )
    if previous.get("CentralAuditBusArn") and not effective.get("CentralAuditBusArn"):
        removals.append("CentralAuditBusArn emptied: every member would stop forwarding its audit records")
    return removals


def describe_output(text: str) -> dict[str, Any]:
    loaded = json.loads(text or "{}")
    if not isinstance(loaded, dict):
        raise DeployRefused(["describe-stacks output: not a JSON object"])
    return loaded
