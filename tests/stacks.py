"""A deployed governance stack, as the CLI's ``--stack`` reads it (CloudFormation ``DescribeStacks``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from botocore.stub import Stubber


@contextmanager
def deployed_stack(parameters: dict[str, str], name: str = "gov", reads: int = 1) -> Iterator[None]:
    """CloudFormation, for the CLI, answering DescribeStacks for one stack deployed with ``parameters``
    (``reads`` times, each of them expected)."""
    client = boto3.client("cloudformation", region_name="us-east-1")
    stub = Stubber(client)
    stack = {
        "StackName": name,
        "CreationTime": "2026-01-01T00:00:00Z",
        "StackStatus": "CREATE_COMPLETE",
        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    }
    for _ in range(reads):
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": name})
    from smgov.adapters import cloudformation

    with stub, pytest.MonkeyPatch.context() as patch:
        patch.setattr(cloudformation.StackOutputs, "connect", classmethod(lambda cls, region=None: cls(client)))
        yield
        stub.assert_no_pending_responses()
