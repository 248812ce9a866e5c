"""Run the real Lambda handlers locally: moto for AWS services, the SageMaker double for SageMaker.

``LocalAccount`` sets the functions' environment, starts moto, builds a composition root (the handlers'
clients, the given clock, audit records and business metrics kept in memory), provides it to the
handlers and attaches the SageMaker and CloudWatch doubles to the very clients the handlers use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from smgov.simulation import model_rules
from smgov.simulation.botocore_shortcuts import unsigned
from smgov.simulation.fake_cloudwatch import FakeCloudWatch
from smgov.simulation.fake_sagemaker import FakeSageMaker

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass
class LocalContext:
    """The parts of the Lambda context object Powertools reads."""

    function_name: str = "local"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:local"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


@contextmanager
def patched_env(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


class LocalAccount:
    """An offline AWS account the real handlers run against."""

    def __init__(
        self,
        clock: Callable[[], datetime],
        environment: Mapping[str, str],
        *,
        log_audit: bool = True,
        metrics: MemoryBusinessMetrics | None = None,
        guards: tuple[Any, ...] | None = None,
    ) -> None:
        import boto3

        from sagemaker_governance.audit import LogAuditSink, MemoryAuditSink
        from sagemaker_governance.composition.root import Root
        from sagemaker_governance.settings import Settings

        self.clock = clock
        self.environment = dict(environment)
        self.audit = MemoryAuditSink(forward=LogAuditSink().write if log_audit else None)
        self.metrics = metrics if metrics is not None else MemoryBusinessMetrics()
        extra: dict[str, Any] = {} if guards is None else {"guards": guards}  # default: the registered ones
        session = boto3.session.Session()
        model_rules.install(session.events)  # what AWS checks of a request and botocore does not
        unsigned(session.events)  # moto checks no signature
        self.root = Root(Settings.from_env(), session, clock, audit=self.audit, metrics=self.metrics, **extra)
        self.sagemaker = FakeSageMaker(clock, region=REGION, account=ACCOUNT)
        self.sagemaker.attach(self.root.client("sagemaker"))
        # moto has no composite alarms: the idle guard's alarms are answered by a CloudWatch double.
        self.cloudwatch = FakeCloudWatch(clock, region=REGION, account=ACCOUNT)
        self.cloudwatch.attach(self.root.client("cloudwatch"))
        self.sns = boto3.client("sns", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.ssm = boto3.client("ssm", region_name=REGION)
        self._invocations = 0

    def notification_inbox(self, name: str = "inbox") -> str:
        """A queue subscribed (raw delivery) to the notifications topic: what owners would receive."""
        queue_url: str = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        self.sns.subscribe(
            TopicArn=self.environment["NOTIFICATIONS_TOPIC_ARN"],
            Protocol="sqs",
            Endpoint=attributes["QueueArn"],
            Attributes={"RawMessageDelivery": "true"},
        )
        return queue_url

    def invoke(
        self,
        handler: Callable[[Any, Any], Any],
        event: Mapping[str, Any],
        name: str = "local",
        *,
        request_id: str | None = None,
    ) -> Any:
        """``handler`` on ``event`` as one invocation: a request id of its own, as Lambda gives each (another
        delivery of the same event too), unless ``request_id`` names an earlier one (Lambda's retry of an
        asynchronous invocation keeps its id)."""
        self._invocations += 1
        rid = request_id or f"00000000-0000-0000-0000-{self._invocations:012d}"
        return handler(dict(event), LocalContext(function_name=name, aws_request_id=rid))


@contextmanager
def local_account(
    clock: Callable[[], datetime],
    environment: Mapping[str, str],
    *,
    topic_name: str = "governance-notifications",
    log_audit: bool = True,
    metrics: MemoryBusinessMetrics | None = None,
    guards: tuple[Any, ...] | None = None,
) -> Iterator[LocalAccount]:
    """moto + the SageMaker double + the functions' environment, for the duration of the block."""
    from moto import mock_aws

    from sagemaker_governance.composition.root import provide
    from smgov.simulation.botocore_models import share_models
    from smgov.simulation.botocore_shortcuts import user_agents_once
    from smgov.simulation.moto_shortcuts import moto_shortcuts

    share_models()
    with patched_env(DUMMY_CREDENTIALS), mock_aws(), moto_shortcuts(), user_agents_once():
        import boto3

        sns = boto3.client("sns", region_name=REGION)
        topic_arn = sns.create_topic(Name=topic_name)["TopicArn"]
        alarm_topic_arn = sns.create_topic(Name="governance-alarms")["TopicArn"]
        env = {
            "NOTIFICATIONS_TOPIC_ARN": topic_arn,
            "ALARM_TOPIC_ARN": alarm_topic_arn,
            "ACCOUNT_ID": ACCOUNT,
            **environment,
        }
        with patched_env(env):
            account = LocalAccount(clock, env, log_audit=log_audit, metrics=metrics, guards=guards)
            with provide(account.root):
                yield account
