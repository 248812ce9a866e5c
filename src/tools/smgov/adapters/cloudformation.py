"""The deployed stack's outputs and parameters: where the CLI finds the audit log groups and the dashboard,
and the settings its functions run with (``--stack``)."""

from __future__ import annotations

from typing import Any, ClassVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.errors import AdapterError

LOG_GROUP_OUTPUT_SUFFIX = "LogGroupName"
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})


class StackNotFound(AdapterError):
    pass


class StackOutputs:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudformation:DescribeStacks"})

    def __init__(self, client: Any) -> None:
        self._client = client

    @classmethod
    def connect(cls, region: str | None = None) -> StackOutputs:
        """From the caller's AWS configuration (the CLI)."""
        import boto3

        return cls(boto3.client("cloudformation", region_name=region, config=CLIENT_CONFIG))

    def outputs(self, stack_name: str) -> dict[str, str]:
        """``OutputKey -> OutputValue`` of a stack."""
        stack = self._stack(stack_name)
        return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", []) if "OutputValue" in o}

    def _stack(self, stack_name: str) -> dict[str, Any]:
        try:
            response = self._client.describe_stacks(StackName=stack_name)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
                raise StackNotFound(f"stack {stack_name!r} not found in this account and region") from exc
            raise AdapterError(f"DescribeStacks {stack_name} failed: {exc}") from exc
        except BotoCoreError as exc:  # no credentials, no network, ...
            raise AdapterError(f"DescribeStacks {stack_name} failed: {exc}") from exc
        stacks = response.get("Stacks", [])
        if not stacks:
            raise StackNotFound(f"stack {stack_name!r} not found in this account and region")
        stack: dict[str, Any] = stacks[0]
        return stack

    def parameters(self, stack_name: str) -> dict[str, str]:
        """``ParameterKey -> ParameterValue`` of a stack (what its functions' environment was built from)."""
        stack = self._stack(stack_name)
        return {
            p["ParameterKey"]: p.get("ResolvedValue", p["ParameterValue"])
            for p in stack.get("Parameters", [])
            if "ParameterValue" in p and p["ParameterValue"] != "****"  # NoEcho values are masked
        }

    def audit_log_groups(self, stack_name: str) -> list[str]:
        """Every function log group the stack exports (outputs named ``<Function>LogGroupName``)."""
        outputs = self.outputs(stack_name)
        groups = sorted(v for k, v in outputs.items() if k.endswith(LOG_GROUP_OUTPUT_SUFFIX) and v)
        if not groups:
            raise AdapterError(
                f"stack {stack_name!r} has no *{LOG_GROUP_OUTPUT_SUFFIX} outputs: is it sagemaker-governance?"
            )
        return groups


class StackInstance(BaseModel):
    """One account and region of the StackSet: where governance should run (``ListStackInstances``)."""

    model_config = ConfigDict(frozen=True)

    account: str
    region: str
    status: str  # CURRENT, OUTDATED, INOPERABLE (StackInstanceSummary.Status)
    detailed_status: str | None = None  # StackInstanceStatus.DetailedStatus: SUCCEEDED, FAILED, ...
    reason: str | None = None
    stack_set: str | None = None  # the StackSet it is an instance of (None: not said)


class StackSetInstances:
    """The StackSet's instances, read in the account that administers it (``--call-as``)."""

    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudformation:ListStackInstances"})

    def __init__(self, client: Any) -> None:
        self._client = client

    @classmethod
    def connect(cls, region: str | None = None) -> StackSetInstances:
        import boto3

        return cls(boto3.client("cloudformation", region_name=region, config=CLIENT_CONFIG))

    def list(self, stack_set: str, call_as: str = "DELEGATED_ADMIN") -> list[StackInstance]:
        try:
            pages = self._client.get_paginator("list_stack_instances").paginate(
                StackSetName=stack_set, CallAs=call_as
            )
            summaries = [s for page in pages for s in page.get("Summaries", [])]
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"ListStackInstances {stack_set} (call as {call_as}) failed: {exc}") from exc
        return [
            StackInstance(
                account=str(s.get("Account", "")),
                region=str(s.get("Region", "")),
                status=str(s.get("Status", "")),
                detailed_status=(s.get("StackInstanceStatus") or {}).get("DetailedStatus"),
                reason=s.get("StatusReason"),
                stack_set=stack_set,
            )
            for s in summaries
        ]
