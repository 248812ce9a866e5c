"""Each function's role allows exactly its adapters' IAM actions, as AWS evaluates it.

Two halves: what the role's policies *grant* (inline and attached, read with ``iam:GetRolePolicy``,
``iam:GetPolicyVersion``) must equal the composition root's contract (``composition/contract.py``: each
function's adapters' ``IAM_ACTIONS``, plus ``KMS_ACTIONS`` with the customer key, plus the log-writing
actions of SAM's ``AWSLambdaBasicExecutionRole``); and each contracted action must be *allowed*
when AWS evaluates it (``iam:SimulatePrincipalPolicy``, which also applies the role's permissions boundary
and the organization's service control policies: an SCP that denies ``sagemaker:StopTrainingJob`` shows
here, not when the first idle job should have been stopped).

The simulated request names a resource of the granting statement (its ``*`` filled in) and the context
keys its condition tests (e.g. ``iam:PassedToService``), so the simulation asks what the function asks.
Where AWS authorizes a request against another resource than the grant names, the simulation names
AWS's: CloudWatch Logs checks a log group's actions against ``log-group:<name>:log-stream:`` (what a
denial names), which a grant on the group's ARN with its trailing ``:*`` matches and one on the bare
group ARN does not (the logs API model, ``LogGroup.arn``). A probe built from the grant alone would only
confirm our own belief.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import BotoCoreError, ClientError

from smgov.doctor.deployment import Deployment, error_text
from smgov.doctor.findings import Finding, Status

# The managed policy SAM attaches to every function role (writes the function's own logs).
LAMBDA_BASIC_EXECUTION = frozenset({"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"})
PROBE = "smgov-doctor-probe"  # fills the `*` of a granted resource pattern in a simulated request
_LIST_OPERATORS = ("ForAllValues:", "ForAnyValue:")
# The CloudWatch Logs actions authorized against the log group's bare ARN (the logs API model, LogGroup.arn:
# "The permissions for those three actions require the ARN version that doesn't include a trailing :*").
LOGS_BARE_GROUP_ARN_ACTIONS = frozenset({"logs:TagResource", "logs:UntagResource", "logs:ListTagsForResource"})


def as_authorized(action: str, resource: str) -> str:
    """The resource AWS evaluates ``action`` against, given a resource the grant names (``*`` filled in)."""
    if (
        action.startswith("logs:")
        and action not in LOGS_BARE_GROUP_ARN_ACTIONS
        and ":log-group:" in resource
        and ":log-stream:" not in resource
    ):
        return f"{resource.removesuffix(':' + PROBE)}:log-stream:"
    return resource


# What SAM adds to a function's role for an EventInvokeConfig destination of each type ("AWS SAM
# automatically adds the necessary permissions": SAM's EventInvokeConfig/DestinationConfig reference);
# e.g. the reconciler's on-failure queue becomes the role policy `<Function>EventInvokeConfigOnFailureSQSPolicy`.
DESTINATION_ACTIONS = {
    "SQS": "sqs:SendMessage",
    "SNS": "sns:Publish",
    "Lambda": "lambda:InvokeFunction",
    "EventBridge": "events:PutEvents",
}


def sam_actions(function_spec: Mapping[str, Any]) -> frozenset[str]:
    """The actions SAM itself grants the function's role: logging, and its async invocation destinations."""
    actions = set(LAMBDA_BASIC_EXECUTION)
    destinations = function_spec.get("Properties", {}).get("EventInvokeConfig", {}).get("DestinationConfig", {})
    for destination in destinations.values():
        if isinstance(destination, Mapping) and destination.get("Type") in DESTINATION_ACTIONS:
            actions.add(DESTINATION_ACTIONS[destination["Type"]])
    return frozenset(actions)


# Adapters the template grants only under a condition: the parameter that must be set for the grant.
CONDITIONAL_ADAPTERS: dict[str, str] = {
    "CheckpointStore": "CheckpointBucketPattern",  # ChecksCheckpointProgress
    "AuditForwarder": "CentralAuditBusArn",  # ForwardsAudit
}


def contracted_actions(
    function: str,
    customer_key: bool,
    function_spec: Mapping[str, Any],
    parameters: Mapping[str, str] | None = None,
) -> frozenset[str]:
    """The adapters' actions (``KMS_ACTIONS`` only with the customer key) and what SAM adds. With the
    deployed stack's ``parameters``, a conditional adapter counts only when its parameter is set (the
    template grants it only then); without, every adapter counts (what the template can grant)."""
    from sagemaker_governance.composition.contract import FUNCTION_ADAPTERS

    actions: set[str] = set()
    for adapter in FUNCTION_ADAPTERS[function]:
        condition = CONDITIONAL_ADAPTERS.get(adapter.__name__)
        if parameters is not None and condition is not None and not parameters.get(condition, "").strip():
            continue
        actions |= getattr(adapter, "IAM_ACTIONS", frozenset())
        if customer_key:
            actions |= getattr(adapter, "KMS_ACTIONS", frozenset())
    return frozenset(actions | sam_actions(function_spec))


def _document(raw: Any) -> dict[str, Any]:
    """A policy document as IAM returns it: parsed by botocore, or URL-encoded JSON."""
    if isinstance(raw, dict):
        return raw
    parsed: dict[str, Any] = json.loads(unquote(str(raw)))
    return parsed


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(iam: Any, role_name: str) -> list[dict[str, Any]]:
    """Every statement of the role's inline and attached policies."""
    statements: list[dict[str, Any]] = []
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=role_name):
        for name in page.get("PolicyNames", []):
            document = _document(iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"])
            statements += _as_list(document.get("Statement", []))
    for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=role_name):
        for attached in page.get("AttachedPolicies", []):
            policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
            version = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"])
            statements += _as_list(_document(version["PolicyVersion"]["Document"]).get("Statement", []))
    return statements


def granted_actions(statements: Iterable[Mapping[str, Any]]) -> set[str]:
    return {a for s in statements if s.get("Effect") == "Allow" for a in _as_list(s.get("Action", []))}


def probe_request(action: str, statements: Iterable[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A resource and context entries the first statement granting ``action`` would allow."""
    for statement in statements:
        if statement.get("Effect") != "Allow" or action not in _as_list(statement.get("Action", [])):
            continue
        resource = str(_as_list(statement.get("Resource", "*"))[0])
        resource = resource if resource == "*" else as_authorized(action, resource.replace("*", PROBE))
        entries = []
        for operator, conditions in (statement.get("Condition") or {}).items():
            if operator == "Null":  # only whether a key is present: the other operators' entries supply it
                continue
            for key, values in conditions.items():
                listed = operator.startswith(_LIST_OPERATORS)
                value = str(_as_list(values)[0]).replace("*", PROBE)
                entries.append(
                    {
                        "ContextKeyName": key,
                        "ContextKeyValues": [value],
                        "ContextKeyType": "stringList" if listed else "string",
                    }
                )
        return resource, entries
    return "*", []


def _denied_by(result: Mapping[str, Any]) -> str:
    why = [f"decision {result.get('EvalDecision')}"]
    if result.get("OrganizationsDecisionDetail", {}).get("AllowedByOrganizations") is False:
        why.append("denied by a service control policy")
    if result.get("PermissionsBoundaryDecisionDetail", {}).get("AllowedByPermissionsBoundary") is False:
        why.append("denied by the role's permissions boundary")
    return ", ".join(why)


def check_function_roles(
    d: Deployment, template: Mapping[str, Any], customer_key: bool, simulator: Any = None
) -> list[Finding]:
    """Each function's role grants exactly its contracted actions (under the stack's parameters) and AWS
    allows each when it evaluates it."""
    from sagemaker_governance.composition.contract import FUNCTION_ADAPTERS

    iam, lam = d.client("iam"), d.client("lambda")
    simulator = simulator or iam
    out: list[Finding] = []
    for function in FUNCTION_ADAPTERS:
        name = d.physical(function)
        if name is None:
            out.append(Finding("iam", function, Status.FAIL, "no such function in the stack"))
            continue
        try:
            role_arn = lam.get_function_configuration(FunctionName=name)["Role"]
            statements = role_statements(iam, role_arn.rsplit("/", 1)[-1])
        except (ClientError, BotoCoreError, KeyError, ValueError) as exc:
            out.append(Finding("iam", function, Status.UNKNOWN, f"could not read its role: {error_text(exc)}"))
            continue
        expected = contracted_actions(
            function, customer_key, template.get("Resources", {}).get(function, {}), d.parameters
        )
        granted = granted_actions(statements)
        problems = []
        if extra := sorted(granted - expected):
            problems.append(f"grants more than its adapters use: {extra}")
        if missing := sorted(expected - granted):
            problems.append(f"does not grant: {missing}")
        denied = []
        for action in sorted(expected & granted):
            resource, context = probe_request(action, statements)
            try:
                results = simulator.simulate_principal_policy(
                    PolicySourceArn=role_arn, ActionNames=[action], ResourceArns=[resource], ContextEntries=context
                ).get("EvaluationResults", [])
            except (ClientError, BotoCoreError) as exc:
                out.append(
                    Finding(
                        "iam", f"{function} {action}", Status.UNKNOWN, f"could not simulate: {error_text(exc)}"
                    )
                )
                continue
            for result in results:
                if result.get("EvalDecision") != "allowed":
                    denied.append(f"{action} on {resource} ({_denied_by(result)})")
        if denied:
            problems.append("denied when AWS evaluates it: " + "; ".join(denied))
        ok_detail = f"{role_arn.rsplit('/', 1)[-1]} allows exactly its {len(expected)} action(s)"
        out.append(Finding.from_problems("iam", function, problems, ok_detail))
    return out
