"""The deployed stack as the checks see it: its status, parameters, version and physical resources, read
once with CloudFormation (``DescribeStacks``, ``ListStackResources``, ``GetTemplate``) and STS."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})
# The SAR metadata's version (template.yaml, AWS::ServerlessRepo::Application) in YAML or JSON.
_SEMANTIC_VERSION = re.compile(r"""["']?SemanticVersion["']?\s*:\s*["']?([0-9][0-9A-Za-z.+\-]*)""")


class DeploymentUnreadable(Exception):
    """The stack cannot be read: missing, or the caller may not describe it (the message says which)."""


@dataclass
class Deployment:
    """One stack in one account and region, and a factory of clients for that region."""

    stack_name: str
    region: str
    account: str
    partition: str
    status: str
    parameters: dict[str, str]
    resources: dict[str, str]  # logical id -> physical id
    resource_types: dict[str, str]  # logical id -> resource type
    version: str | None  # the deployed template's SemanticVersion (None: deployed before it existed)
    client: Callable[[str], Any] = field(repr=False)

    def physical(self, logical_id: str) -> str | None:
        return self.resources.get(logical_id)

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"

    def parameter(self, name: str, default: str = "") -> str:
        return self.parameters.get(name, default)


def error_text(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip()
    return str(exc)


def deployed_version(template_body: Any) -> str | None:
    """The ``SemanticVersion`` of a template as ``GetTemplate`` returns it (a YAML string or parsed JSON)."""
    if isinstance(template_body, dict):
        app = template_body.get("Metadata", {}).get("AWS::ServerlessRepo::Application", {})
        version = app.get("SemanticVersion") if isinstance(app, dict) else None
        return str(version) if version is not None else None
    match = _SEMANTIC_VERSION.search(str(template_body))
    return match.group(1) if match else None


def load_deployment(session: Any, stack_name: str) -> Deployment:
    """Read the stack; raise ``DeploymentUnreadable`` when it is missing or cannot be read."""
    cache: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in cache:
            cache[service] = session.client(service, config=CLIENT_CONFIG)
        return cache[service]

    cfn = client("cloudformation")
    try:
        identity = client("sts").get_caller_identity()
        stacks = cfn.describe_stacks(StackName=stack_name).get("Stacks", [])
    except ClientError as exc:
        message = str(exc.response.get("Error", {}).get("Message", ""))
        if "does not exist" in message:
            raise DeploymentUnreadable(f"stack {stack_name!r} does not exist in this account and region") from exc
        raise DeploymentUnreadable(f"DescribeStacks {stack_name}: {error_text(exc)}") from exc
    except BotoCoreError as exc:
        raise DeploymentUnreadable(f"DescribeStacks {stack_name}: {exc}") from exc
    if not stacks:
        raise DeploymentUnreadable(f"stack {stack_name!r} does not exist in this account and region")
    stack = stacks[0]
    resources: dict[str, str] = {}
    types: dict[str, str] = {}
    try:
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name):
            for item in page.get("StackResourceSummaries", []):
                if item.get("PhysicalResourceId"):
                    resources[item["LogicalResourceId"]] = item["PhysicalResourceId"]
                    types[item["LogicalResourceId"]] = item.get("ResourceType", "")
        body = cfn.get_template(StackName=stack_name, TemplateStage="Original").get("TemplateBody")
    except (ClientError, BotoCoreError) as exc:
        raise DeploymentUnreadable(f"reading the resources of {stack_name}: {error_text(exc)}") from exc
    arn_parts = str(identity.get("Arn", "arn:aws:")).split(":")
    return Deployment(
        stack_name=stack_name,
        region=session.region_name,
        account=str(identity.get("Account", "")),
        partition=arn_parts[1] if len(arn_parts) > 1 else "aws",
        status=str(stack.get("StackStatus", "")),
        parameters={
            p["ParameterKey"]: p.get("ResolvedValue", p.get("ParameterValue", ""))
            for p in stack.get("Parameters", [])
        },
        resources=resources,
        resource_types=types,
        version=deployed_version(body),
        client=client,
    )
