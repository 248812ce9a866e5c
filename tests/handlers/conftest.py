from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest

from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from smgov.simulation.harness import LocalAccount, local_account
from smgov.simulation.job_signals import JobSignals

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ENFORCE = {
    "GOVERNANCE_MODE": "enforce",
    "REQUIRED_TAGS": "team,cost-center",
    "POLICY_PARAMETER_NAME": "/gov/policy",
}
PREFIX = "sagemaker-governance-idle-"


@dataclass
class MovableClock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock(NOW)


class NextTransitionLags:
    """The SageMaker double's ``lag``: DescribeTrainingJob lags the double's next transition for ``seconds``
    (eventual consistency): until then it answers the job as it stood before that transition."""

    def __init__(self, clock: MovableClock, seconds: int = 30) -> None:
        self.clock, self.seconds = clock, seconds
        self.armed, self.reads = True, 0

    def until(self, name: str) -> datetime | None:
        if not self.armed:
            return None
        self.armed = False
        return self.clock() + timedelta(seconds=self.seconds)

    def served(self, name: str) -> None:
        self.reads += 1


@pytest.fixture
def savings() -> MemoryBusinessMetrics:
    """The business metrics the handlers emit (the stopper's savings, the reconciler's repairs)."""
    return MemoryBusinessMetrics()


def judged_account(
    clock: MovableClock, savings: MemoryBusinessMetrics, env: dict[str, str]
) -> Iterator[LocalAccount]:
    """A local account whose jobs publish the signals the stall judge reads, with the judge enabled."""
    with local_account(clock, env, metrics=savings) as account:
        account.signals = JobSignals(clock).attach(account.cloudwatch)  # type: ignore[attr-defined]
        account.ssm.put_parameter(Name="/gov/policy", Value="judge: {enabled: true}", Type="String")
        yield account


def fire(account: LocalAccount, alarm: str, **kw: Any) -> dict[str, Any]:
    """CloudWatch's evaluation puts the alarm in ALARM and SNS delivers the notification to the stopper."""
    account.cloudwatch.set_state(alarm, kw.get("new_state", "ALARM"))
    event = account.cloudwatch.sns_event([account.cloudwatch.notification(alarm, **kw)])
    result: dict[str, Any] = account.invoke(stopper, event)
    return result


@pytest.fixture
def account() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as acct:
        yield acct


@pytest.fixture
def audit_account() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, {**ENFORCE, "GOVERNANCE_MODE": "audit"}) as acct:
        yield acct


def sqs_batch(*bodies: str, queue: str = "JobEventsQueue") -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m-{index}",
                "receiptHandle": f"r-{index}",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1763719212000",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1763719212050",
                },
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:gov-{queue}",
                "awsRegion": "us-east-1",
            }
            for index, body in enumerate(bodies)
        ]
    }


def sns_notification_body(account: LocalAccount, alarm: str) -> str:
    """The SNS notification as AlarmQueue receives it (raw delivery off: URL keys spelled for SQS)."""
    record = account.cloudwatch.sns_event([account.cloudwatch.notification(alarm)])["Records"][0]["Sns"]
    record["SigningCertURL"] = record.pop("SigningCertUrl", "https://sns.us-east-1.amazonaws.com/x.pem")
    record["UnsubscribeURL"] = record.pop("UnsubscribeUrl", "https://sns.us-east-1.amazonaws.com/?x")
    return json.dumps(record)


class Advances(Protocol):
    def advance(self, **delta: float) -> None: ...


def interrupt(account: LocalAccount, clock: Advances, name: str, times: int) -> dict[str, Any]:
    """The Spot job trains an hour, then its capacity is reclaimed, ``times`` times: the last event."""
    fake = account.sagemaker
    for index in range(times):
        if index:
            fake.transition(name, "InProgress", "Starting")
            clock.advance(minutes=2)
        fake.transition(name, "InProgress", "Training")
        clock.advance(hours=1)
        fake.transition(name, "InProgress", "Interrupted")
        clock.advance(minutes=1)
    return fake.event(name)
