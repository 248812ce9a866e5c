from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from smgov.simulation.fake_sagemaker import FakeSageMaker

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def fake_sagemaker() -> FakeSageMaker:
    return FakeSageMaker(clock=lambda: NOW)


@pytest.fixture
def sagemaker_client(fake_sagemaker: FakeSageMaker) -> Any:
    return fake_sagemaker.attach(boto3.client("sagemaker", region_name="us-east-1"))


class CallRecorder:
    """Records the IAM action of every AWS call a client makes (to check adapters' IAM_ACTIONS)."""

    def __init__(self) -> None:
        self.actions: set[str] = set()

    def attach(self, client: Any) -> CallRecorder:
        prefix = client.meta.service_model.signing_name
        client.meta.events.register(
            "before-call.*.*", lambda model, **_: self.actions.add(f"{prefix}:{model.name}")
        )
        return self
