"""The SDK preflight talks to moto: the request is really built, validated and (when allowed) accepted."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import boto3
import pytest
from moto import mock_aws

from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy, parse_document
from sagemaker_governance.settings import Settings

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311"


def require_sagemaker_sdk() -> ModuleType:
    """The pinned SageMaker SDK, or a skip on a developer machine without the `sdk` extra. In CI
    (``CI=true``) a missing SDK fails: these tests must never silently disappear there."""
    try:
        from sagemaker import train
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"the SageMaker SDK must be installed in CI (make test installs .[dev,sdk]): {exc}")
        pytest.skip("the SageMaker SDK is not installed: pip install -e '.[dev,sdk]'")
    return cast(ModuleType, train)


@pytest.fixture
def policy() -> Policy:
    """examples/policy.yaml over the deploy-time defaults, as `smgov --policy` builds it."""
    base = Settings.model_validate({}).base_policy_document()
    return build_policy(base, parse_document((REPO / "examples" / "policy.yaml").read_text()))


@pytest.fixture
def aws() -> Iterator[boto3.Session]:
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("s3").create_bucket(Bucket="ml-artifacts")
        session.client("iam").create_role(RoleName="SageMakerTrainingRole", AssumeRolePolicyDocument="{}")
        yield session


class SentRequests:
    """Every CreateTrainingJob body that left botocore (after validation and serialization)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any, **_: Any) -> None:
        self.bodies.append(json.loads(request.body))

    def attach(self, session: boto3.Session) -> SentRequests:
        session.events.register("before-send.sagemaker.CreateTrainingJob", self)
        return self


def request_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "examples" / "requests" / name).read_text())
    return data
