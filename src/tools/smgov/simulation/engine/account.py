"""The simulated AWS account of a governed run: moto, the deployed template, the handlers' clients.

Inside ``SimulatedAccount``: moto serves every AWS API except SageMaker (the stateful double, attached
to the handlers' own client); moto's CloudWatch answers alarms and metric reads from the simulator
(``cloudwatch_backend.py``) and its Logs holds the jobs' log streams (``logs.py``, written when the
service reads); the template's resources exist (``deploy.py``); the handlers' composition root uses
the virtual clock, an in-memory audit sink (wrapped by the crash fault) and a boto3 session whose calls
are counted. The simulator's own calls go through another session (not counted).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest import mock

from smgov.simulation import model_rules
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.botocore_models import share_models
from smgov.simulation.deploy import Deployment, deploy
from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.cloudwatch_backend import SimulatedCloudWatch
from smgov.simulation.engine.counters import ServiceCalls
from smgov.simulation.engine.delivery import InFlight
from smgov.simulation.engine.logs import GROUP as LOG_GROUP
from smgov.simulation.engine.logs import LogStreams
from smgov.simulation.engine.moto_logs import LogReads
from smgov.simulation.engine.moto_ssm import ParameterReads
from smgov.simulation.fake_cloudwatch import RequestQuota
from smgov.simulation.fake_dynamodb import LedgerTable
from smgov.simulation.fake_s3 import CheckpointObjects
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.faults import CrashingAuditSink, FaultInjector, Throttler
from smgov.simulation.harness import ACCOUNT, DUMMY_CREDENTIALS, REGION, patched_env
from smgov.simulation.scenario import OrgSpec, Scenario


class AccountError(RuntimeError):
    pass


class SimulatedAccount:
    def __init__(
        self,
        template: Mapping[str, Any],
        scenario: Scenario,
        *,
        stack_name: str,
        seed: int,
        clock: VirtualClock,
        calls: ServiceCalls,
        fake: FakeSageMaker,
        faults: FaultInjector,
        cloudwatch_tps: float | Mapping[str, float] | None,
        cloudwatch: SimulatedCloudWatch,
        logs: LogStreams,
        checkpoint_objects: CheckpointObjects | None = None,
        account: str = ACCOUNT,
        central: OrgSpec | None = None,
        in_flight: InFlight | None = None,
    ) -> None:
        self.template = template
        self.scenario = scenario
        self.stack_name = stack_name
        self.seed = seed
        self.clock = clock
        self.calls = calls
        self.fake = fake
        self.faults = faults
        self.cloudwatch_tps = cloudwatch_tps
        self.simulated_cloudwatch = cloudwatch
        self.logs = logs
        self.logs_writer: Any = None
        self.checkpoint_objects = checkpoint_objects
        self.deployment: Deployment | None = None
        self.cloudwatch: Any = None  # the simulator's own CloudWatch client (its calls are not counted)
        self.environment: dict[str, str] = {}
        self.audit: Any = None
        self.crasher: CrashingAuditSink | None = None
        self.quota: RequestQuota | None = None
        self.ledger_table: LedgerTable | None = None  # the idempotency table's items (moto keeps the others)
        self.root: Any = None  # the handlers' composition root (composition/root.py) while the account is open
        self.account = account  # moto serves this account id (MOTO_ACCOUNT_ID) while the account is open
        # One audit view (issue 21): the audit account's bus, rule and log group exist in the same moto;
        # what reached its log group is read before the account closes.
        self.central = central
        self.in_flight = in_flight  # the simulated queues' records: answers the handlers' visibility changes
        self.central_events: list[dict[str, Any]] = []
        self.dead_lettered_audit: list[dict[str, Any]] = []

    def alarm_prefix(self) -> str | None:
        """This stack's alarm-name prefix (None: no idle guard configured in this deployment)."""
        try:
            return self.root.alarm_naming.prefix if self.root is not None else None
        except Exception:  # no idle guard configured in this deployment
            return None

    @contextmanager
    def open(self) -> Iterator[SimulatedAccount]:
        import boto3
        from moto import mock_aws
        from moto.logs.responses import LogsResponse

        from sagemaker_governance.composition.root import provide
        from sagemaker_governance.observability import logger
        from smgov.simulation.botocore_shortcuts import unsigned, user_agents_once
        from smgov.simulation.engine.moto_logs import DirectLogs, honoring_prefix
        from smgov.simulation.moto_shortcuts import moto_shortcuts

        share_models()
        saved_session = boto3.DEFAULT_SESSION
        saved_level = logger.log_level
        with (
            patched_env({**DUMMY_CREDENTIALS, "MOTO_ACCOUNT_ID": self.account}),
            mock_aws(),
            self.simulated_cloudwatch.installed(),
            mock.patch("moto.logs.models.utcnow", self._naive_utc_now),
            mock.patch("moto.events.models.unix_time_millis", self._event_millis),
            mock.patch.object(LogsResponse, "filter_log_events", honoring_prefix(LogsResponse.filter_log_events)),
            mock.patch.object(LogsResponse, "describe_log_streams", self._describe_log_streams(LogsResponse)),
            moto_shortcuts(),  # after every patch of a response class
            user_agents_once(),
        ):
            own = boto3.session.Session(region_name=REGION)  # the simulator's own calls are not counted
            ssm = own.client("ssm")
            self.cloudwatch = self.simulated_cloudwatch.direct
            own.client("logs").create_log_group(logGroupName=LOG_GROUP)
            self.logs_writer = DirectLogs(self.account, REGION)  # the jobs' lines: into moto's backend
            if self.central is not None:
                self._open_central(own)
            self.deployment = deploy(
                self.template,
                self.scenario.parameters,
                stack_name=self.stack_name,
                region=REGION,
                account=self.account,
                sns=own.client("sns"),
                sqs=own.client("sqs"),
                ssm=ssm,
                dynamodb=own.client("dynamodb"),  # the idempotency table: the real idempotency path runs
                events=own.client("events"),  # the stack's audit bus and its forwarding rule
            )
            environment = self.deployment.environment()
            self._put_policy(ssm, environment)
            with patched_env(environment), virtual_backoff(self.clock.backoff, seed=self.seed):
                self.environment = dict(environment)
                boto3.setup_default_session(region_name=REGION)
                session = boto3.DEFAULT_SESSION
                assert session is not None
                self.calls.install(session.events)
                unsigned(session.events)  # moto checks no signature
                if self.in_flight is not None:
                    self.in_flight.install(session.events)
                model_rules.install(session.events)  # what AWS checks of a request and botocore does not
                # The service reads CloudWatch Logs: the lines due by now are written first (those of the
                # streams the request names, when it names some).
                session.events.register("before-parameter-build.cloudwatch-logs", self._flush_logs)
                self.root = self._handlers_root(session)
                logger.setLevel("CRITICAL")  # failures are reported, not logged to the terminal
                try:
                    with provide(self.root):
                        yield self
                    if self.central is not None:
                        self._collect_central(own)
                finally:
                    logger.setLevel(saved_level)
                    self.root = None
                    boto3.DEFAULT_SESSION = saved_session

    def _open_central(self, own: Any) -> None:
        """org/audit-account.yaml in the audit account: the central bus, its rule and the log group."""
        assert self.central is not None
        central = self.central
        with patched_env({"MOTO_ACCOUNT_ID": central.audit_account}):
            events, logs = own.client("events"), own.client("logs")
            events.create_event_bus(Name=central.bus_name)
            logs.create_log_group(logGroupName=central.log_group)
            pattern = {"source": ["sagemaker-governance"], "detail-type": ["Governance Decision"]}
            events.put_rule(
                Name=f"{central.bus_name}-to-logs", EventBusName=central.bus_name, EventPattern=json.dumps(pattern)
            )
            group_arn = f"arn:aws:logs:{REGION}:{central.audit_account}:log-group:{central.log_group}"
            events.put_targets(
                Rule=f"{central.bus_name}-to-logs",
                EventBusName=central.bus_name,
                Targets=[{"Id": "CentralAuditLogGroup", "Arn": group_arn}],
            )

    def _collect_central(self, own: Any) -> None:
        """What reached the central log group, and what the member dead-lettered instead (nothing lost silently)."""
        assert self.central is not None and self.deployment is not None
        with patched_env({"MOTO_ACCOUNT_ID": self.central.audit_account}):
            logs = own.client("logs")
            pages = logs.get_paginator("filter_log_events").paginate(logGroupName=self.central.log_group)
            self.central_events = [json.loads(e["message"]) for page in pages for e in page["events"]]
        url = self.environment.get("DEAD_LETTER_QUEUE_URL")
        if url:
            sqs = own.client("sqs")
            while True:
                batch = sqs.receive_message(  # hidden, not deleted: the run is over, nothing reads after us
                    QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=43200
                )
                messages = batch.get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    if "SMGOV_AUDIT_FORWARD_ERROR" in message.get("MessageAttributes", {}):
                        self.dead_lettered_audit.append(json.loads(message["Body"]))

    def _event_millis(self, dt: datetime | None = None) -> float:
        """moto's EventBridge stamps a log-group target's event with this time: the virtual clock's."""
        return (dt or self.clock().astimezone(UTC).replace(tzinfo=None)).replace(tzinfo=UTC).timestamp() * 1000

    def _handlers_root(self, session: Any) -> Any:
        """The composition root the handlers run on (``provide``d for the whole run): the functions'
        settings, ``session`` (its calls are counted), the virtual clock, audit records and business
        metrics kept in memory; the doubles are attached to its clients."""
        from sagemaker_governance.audit import MemoryAuditSink
        from sagemaker_governance.business_metrics import MemoryBusinessMetrics
        from sagemaker_governance.composition.root import Root
        from sagemaker_governance.settings import Settings

        self.audit = MemoryAuditSink()
        self.crasher = CrashingAuditSink(self.audit, self.faults)
        root = Root(Settings.from_env(), session, self.clock, audit=self.crasher, metrics=MemoryBusinessMetrics())
        throttler: Throttler | None = None
        if self.faults.spec.rate("throttle") > 0:
            throttler = Throttler(self.faults)
            throttler.install(session.events)
            if self.in_flight is not None:
                self.in_flight.throttle = throttler.throttled
            throttler.route_sagemaker(root.client("sagemaker"), self.fake)
            if self.cloudwatch_tps is None:  # without the quota model: the double answers, unless throttled
                throttler.route_cloudwatch(root.client("cloudwatch"), self.simulated_cloudwatch.alarms)
        else:
            self.fake.attach(root.client("sagemaker"))
        if self.checkpoint_objects is not None and root.settings.checkpoint_bucket_pattern:
            self.checkpoint_objects.attach(root.client("s3"))  # the deployment checks checkpoint progress
        if self.cloudwatch_tps is not None:
            tps = self.cloudwatch_tps
            self.quota = (
                RequestQuota(self.clock.api_seconds, tps)
                if isinstance(tps, Mapping)
                else RequestQuota.cloudwatch_alarm_writes(self.clock.api_seconds, tps)
            )
            self.quota.attach(root.client("cloudwatch"))
        elif self.faults.spec.rate("throttle") == 0:  # nothing happens in the send loop: answer directly
            self.simulated_cloudwatch.alarms.attach(root.client("cloudwatch"))
        ledger = root.settings.idempotency_table
        if ledger:  # the delivery ledger's writes, answered in process (moto keeps the other tables)
            self.ledger_table = LedgerTable(frozenset({ledger}))
            self.ledger_table.attach(root.client("dynamodb"), throttler)
        LogReads(self.account, REGION, throttler).attach(root.client("logs"))  # the judge's reads, in process
        if root.settings.policy_parameter_name:  # the policy store's reads, in process
            ParameterReads(self.account, REGION, throttler).attach(root.client("ssm"))
        return root

    def _describe_log_streams(self, response: Any) -> Any:
        """moto's ``DescribeLogStreams``, its ``lastEventTimestamp`` lagging when the scenario says so."""
        from smgov.simulation.engine.moto_logs import lagging_last_event

        lag = self.scenario.log_last_event_lag_minutes
        original = response.describe_log_streams
        return original if lag is None else lagging_last_event(original, lag, self._naive_utc_now)

    def _naive_utc_now(self) -> datetime:
        """moto's Logs accepts events of the last 14 days by its clock: the virtual one here."""
        return self.clock().astimezone(UTC).replace(tzinfo=None)

    def _flush_logs(self, params: Mapping[str, Any], **_: Any) -> None:
        named = params.get("logStreamNames") or ([params["logStreamName"]] if "logStreamName" in params else [])
        self.logs.flush(
            self.logs_writer, self.clock.now, names=frozenset(named), prefix=params.get("logStreamNamePrefix")
        )

    def _put_policy(self, ssm: Any, environment: Mapping[str, str]) -> None:
        """The scenario's policy document, in the SSM parameter the functions read."""
        if self.scenario.policy is None:
            return
        name = environment.get("POLICY_PARAMETER_NAME")
        if not name:
            raise AccountError("the scenario has a policy but no function reads POLICY_PARAMETER_NAME")
        document = self.scenario.policy
        text = document if isinstance(document, str) else json.dumps(document)
        ssm.put_parameter(Name=name, Value=text, Type="String", Overwrite=True)
