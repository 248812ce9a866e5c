"""The fleet simulator: simulated training jobs on a virtual clock, governed by the real service.

One run is one account over virtual minutes:

- **SageMaker** is the stateful double (``fake_sagemaker.py``) behind the handlers' boto3 client. The
  engine drives each job through its lifecycle (Starting, Downloading, Training, Uploading, Completed /
  Failed / Stopped, Spot ``Interrupted`` and restarts, ``MaxRuntimeExceeded``, ``MaxWaitTimeExceeded``)
  following the job's script, and emits a real-shaped ``SageMaker Training Job State Change`` event at
  every status change. When the service stops a job it goes ``Stopping`` and, a minute later,
  ``Stopped``; when the service creates a job (a resumed clone) the engine runs it too, following the
  source job's script from its last checkpoint.
- **CloudWatch metrics**: every GPU host publishes ``GPUUtilization`` each minute (sum over its GPUs)
  into the in-memory store; **alarms** are the ones the service created in moto CloudWatch, evaluated
  with CloudWatch's semantics; a transition publishes the real alarm message to the alarm's SNS actions.
- **Routing** follows ``template.yaml``: an event goes to every function whose rule pattern matches;
  an SNS message to every function subscribed to the topic (filter policies included).

With ``governed=False`` the same fleet runs with no service at all: the baseline.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import io
import json
import os
import random
import traceback
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sagemaker_governance.domain.guards.idle import IDLE_RULE_ID
from smgov.simulation.alarms import AlarmEvaluator, Transition, alarm_subject
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.deploy import DeployedFunction, Deployment, QueueDelivery, deploy, flatten
from smgov.simulation.fake_cloudwatch import RequestQuota
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.faults import (
    CrashingAuditSink,
    FaultInjector,
    FaultSpec,
    Throttler,
    is_state_change,
)
from smgov.simulation.harness import ACCOUNT, DUMMY_CREDENTIALS, REGION, LocalContext, patched_env
from smgov.simulation.metrics import MetricStore, metric_key
from smgov.simulation.scenario import JobSpec, Scenario, Script, gpus_of, on_demand_price
from smgov.simulation.template import TEMPLATE_PATH, load_template

GPU_NAMESPACE, GPU_METRIC = "/aws/sagemaker/TrainingJobs", "GPUUtilization"
STACK_NAME = "smgov-sim"
TAIL_MINUTES = 90  # keep the clock running this long after the last job ended (alarms, late actions)
ALARM_GRACE_MINUTES = 5  # a job in Training must have its alarm this long after (+ one schedule period)
MAX_INVOCATIONS_PER_MINUTE = 20_000
ALARM_MUTATIONS = {
    "PutMetricAlarm": ("AlarmName",),
    "PutCompositeAlarm": ("AlarmName",),
    "DeleteAlarms": ("AlarmNames",),
    "SetAlarmState": ("AlarmName",),
    "EnableAlarmActions": ("AlarmNames",),
    "DisableAlarmActions": ("AlarmNames",),
}
BILLABLE = {"downloading", "training", "uploading", "stopping"}  # "stopping" only after running
RUNNING = {"downloading", "training", "uploading"}


class SimulationError(RuntimeError):
    pass


@dataclass
class JobRun:
    """The simulator's side of one training job."""

    name: str
    script: Script
    hosts: list[tuple[str, int]]  # (host name, GPUs)
    cluster_price_per_hour: float
    instance_count: int
    created: int
    spot: bool
    max_runtime: int  # minutes
    max_wait: int | None
    checkpoint_uri: str | None
    expect_stop: bool = False
    source: str | None = None
    spec_name: str | None = None
    phase: str = "starting"
    phase_since: int = 0
    progress: int = 0
    stalled_at: int | None = None
    first_stall: int | None = None
    stopping_billable: bool = True
    accrued_at: int = 0
    billable: int = 0
    interruptions: int = 0
    stopped_by_service_at: int | None = None
    final_status: str | None = None
    final_secondary: str | None = None
    ended_at: int | None = None
    token: int = 0
    gpu_percent: float | None = None  # per GPU, what the hosts publish now (None: nothing)
    metrics: tuple[str, ...] = ()  # training metrics whose regex matches the log (published while training)
    metrics_on: bool = False
    series: list[list[Any]] = field(default_factory=list)  # [start, end, percent per GPU]

    @property
    def cost(self) -> float:
        return self.billable * self.cluster_price_per_hour / 60

    @property
    def ended(self) -> bool:
        return self.final_status is not None

    @property
    def gpu_hosts(self) -> list[tuple[str, int]]:
        return [(h, g) for h, g in self.hosts if g > 0]


@dataclass
class Invocation:
    minute: int
    function: str
    trigger: str
    error: str | None = None


@dataclass
class RunResult:
    scenario: Scenario
    seed: int
    governed: bool
    epoch: datetime
    jobs: dict[str, JobRun]
    audit: list[Any]
    invocations: Counter[str]
    errors: list[Invocation]
    aws_calls: Counter[str]
    notifications: Counter[str]
    alarm_transitions: list[dict[str, Any]]
    alarms: dict[str, dict[str, Any]]  # every alarm definition seen, by name (last version)
    deployment_notes: list[str]
    minutes: int
    evaluations: int
    # CloudWatch quota model (``cloudwatch_tps``): requests allowed/throttled per API, botocore's retry
    # sleeps and how far the service's clock ran ahead of the minute (empty when the model is off).
    throttling: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, Any] = field(default_factory=dict)
    deliveries: Counter[str] = field(default_factory=Counter)
    ground_truth: dict[str, list[str]] = field(default_factory=dict)  # invariant -> offending names


@dataclass
class _RetryLedger:
    """botocore's retry sleeps on the virtual clock: ``api_seconds`` (since the epoch) may run ahead of
    the simulation's minute while the service backs off."""

    api_seconds: float = 0.0
    sleeps: int = 0
    backoff_seconds: float = 0.0
    max_lag: float = 0.0


class _Uuids:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"uuid-{seed}")

    def next(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))


class Simulation:
    _root: Any = None  # the handlers' composition root (composition/root.py) while the account is open

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int = 0,
        governed: bool = True,
        template: Mapping[str, Any] | None = None,
        template_path: Path | str = TEMPLATE_PATH,
        cloudwatch_tps: float | None = None,
        faults: FaultSpec | None = None,
    ) -> None:
        """``cloudwatch_tps``: enforce CloudWatch's request-rate quota on ``PutMetricAlarm`` and
        ``DeleteAlarms`` (3.0 is AWS's default) with botocore's real retries; None: no quota."""
        self.scenario = scenario
        self.seed = seed
        self.governed = governed
        self.template = template if template is not None else load_template(template_path)
        self.epoch = scenario.start
        self.now = 0
        self.rng = random.Random(seed)
        self.uuids = _Uuids(seed)
        self.specs = scenario.expand(seed)
        self.jobs: dict[str, JobRun] = {}
        self.checkpoints: dict[str, int] = {}
        self.store = MetricStore()
        self._heap: list[tuple[int, int, str, int]] = []  # (minute, seq, job, token)
        self._seq = 0
        self._events: list[dict[str, Any]] = []
        self._sns: list[tuple[str, str | None, str, dict[str, Any]]] = []
        self._alarm_names: set[str] = set()
        self._state_sets: list[tuple[str, str]] = []  # SetAlarmState calls by the service, in order
        self._invocations_now = 0
        self._invocation_minute = -1
        self.invocations: Counter[str] = Counter()
        self.errors: list[Invocation] = []
        self.aws_calls: Counter[str] = Counter()
        self.notifications: Counter[str] = Counter()
        self.alarm_transitions: list[dict[str, Any]] = []
        self.alarms_seen: dict[str, dict[str, Any]] = {}
        self.deployment: Deployment | None = None
        self.fake = FakeSageMaker(self.clock, region=REGION, account=ACCOUNT)
        self.evaluator = AlarmEvaluator(
            self.store, epoch=self.epoch, account=ACCOUNT, region=REGION, on_transition=self._alarm_transition
        )
        self._created_seen = 0
        self._stops_seen = 0
        self._schedules: list[tuple[int, DeployedFunction, str, int]] = []
        self._audit: Any = None
        self._cloudwatch: Any = None
        self._env_now: dict[str, str] = {}
        self._active = len(self.specs)  # jobs not yet created or not yet ended
        self._last_end = 0
        # The quota model's clock, in seconds since the epoch: botocore's backoff sleeps move it on, so
        # it may run ahead of the minute the simulation is in (the service is behind on its work).
        self.cloudwatch_tps = cloudwatch_tps
        self.quota: RequestQuota | None = None
        self._retry = _RetryLedger()
        self.faults = FaultInjector(faults, seed)
        self._held: list[tuple[int, int, str, Any]] = []  # (due minute, seq, kind, item): late deliveries
        self._checks: list[tuple[int, int, str, int]] = []  # (due minute, seq, job, token): alarm checks
        self._crasher: CrashingAuditSink | None = None
        self._throttler: Throttler | None = None
        self.deliveries: Counter[str] = Counter()
        self._watches_training = False
        self._missing_alarm: set[str] = set()
        self._orphans: list[str] = []

    # ---- clock -----------------------------------------------------------------------------------

    def clock(self) -> datetime:
        if self._retry.api_seconds > self.now * 60:  # only after botocore backed off (the quota model)
            return self.epoch + timedelta(seconds=self._retry.api_seconds)
        return self.epoch + timedelta(minutes=self.now)

    def api_seconds(self) -> float:
        """The service's clock in seconds since the epoch: the minute, or later after backoff sleeps."""
        return max(float(self.now * 60), self._retry.api_seconds)

    def _backoff(self, seconds: float) -> None:
        """botocore sleeps between retries: virtual time passes for the service."""
        self._retry.api_seconds = self.api_seconds() + seconds
        self._retry.sleeps += 1
        self._retry.backoff_seconds += seconds
        self._retry.max_lag = max(self._retry.max_lag, self._retry.api_seconds - self.now * 60)

    def at(self, minute: int) -> datetime:
        return self.epoch + timedelta(minutes=minute)

    # ---- running ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        if not self.governed:
            self._loop()
            return self._result([])
        with self._account():
            self._loop()
            self._find_orphans()
            records = list(self._audit.records)
        return self._result(records)

    def _result(self, records: list[Any]) -> RunResult:
        return RunResult(
            scenario=self.scenario,
            seed=self.seed,
            governed=self.governed,
            epoch=self.epoch,
            jobs=self.jobs,
            audit=records,
            invocations=self.invocations,
            errors=self.errors,
            aws_calls=self.aws_calls,
            notifications=self.notifications,
            alarm_transitions=self.alarm_transitions,
            alarms=self.alarms_seen,
            deployment_notes=self.deployment.notes if self.deployment else [],
            minutes=self.now,
            evaluations=self.evaluator.evaluations,
            throttling=self._throttling(),
            faults=self.faults.report() if self.faults.spec.enabled else {},
            deliveries=self.deliveries,
            ground_truth=self._ground_truth(records),
        )

    def _throttling(self) -> dict[str, Any]:
        """botocore's retry sleeps (quota model or throttle faults) and, with the quota model on, its
        requests allowed/throttled per API; empty when nothing was throttled and the model is off."""
        if self.quota is None and not self._retry.sleeps:
            return {}
        summary: dict[str, Any] = {
            "retry_sleeps": self._retry.sleeps,
            "backoff_seconds": round(self._retry.backoff_seconds, 3),
            "max_lag_seconds": round(self._retry.max_lag, 3),
        }
        if self.quota is not None:
            summary |= {"cloudwatch_tps": self.cloudwatch_tps, "requests": self.quota.summary()}
        return summary

    # ---- invariants ------------------------------------------------------------------------------

    @property
    def settle_minutes(self) -> int:
        """How long the clock runs on after the last job ended: alarm evaluations and late actions, and
        at least two runs of every scheduled function (the reconciler's last chance to repair)."""
        longest = max((every for _, _, _, every in self._schedules), default=0)
        return max(TAIL_MINUTES, 2 * longest)

    @property
    def alarm_settle_minutes(self) -> int:
        """A GPU job in Training must have its alarm after this long: a moment for the event, plus one
        period of the slowest schedule (a reconciler repairs a lost Training event on its next run)."""
        longest = max((every for _, _, _, every in self._schedules), default=0)
        return ALARM_GRACE_MINUTES + longest

    def _ground_truth(self, records: list[Any]) -> dict[str, list[str]]:
        if not self.governed:
            return {}
        deliberate = {  # the service decided, on the record, that this job gets no alarm (policy)
            r.job_name
            for r in records
            if r.rule == IDLE_RULE_ID and r.action == "none" and r.outcome.value in ("no-action", "exempted")
        }
        return {
            "orphan_alarms": sorted(self._orphans),
            "missing_alarms": sorted(self._missing_alarm - deliberate),
        }

    def _alarm_prefix(self) -> str | None:
        try:
            return self._root.alarm_naming.prefix if self._root is not None else None
        except Exception:  # no idle guard configured in this deployment
            return None

    def _watched_hosts(self, prefix: str) -> set[str]:
        hosts: set[str] = set()
        for name, alarm in self.evaluator.metric_alarms.items():
            if name.startswith(prefix):
                hosts.update(value for key in alarm.keys for _, value in key[2])
        return hosts

    def _check_alarms(self, minute: int) -> None:
        """A GPU job still in the same Training stint ``alarm_settle_minutes`` after entering it must be
        watched by one of this stack's alarms."""
        while self._checks and self._checks[0][0] <= minute:
            _, _, name, token = heapq.heappop(self._checks)
            job = self.jobs[name]
            if job.token != token or job.phase != "training" or not self._watches_training:
                continue
            prefix = self._alarm_prefix()
            if prefix is None:
                continue
            watched = self._watched_hosts(prefix)
            if not any(host in watched for host, _ in job.gpu_hosts):
                self._missing_alarm.add(name)

    def _find_orphans(self) -> None:
        """This stack's alarms left in CloudWatch whose job has ended (or never existed)."""
        prefix = self._alarm_prefix()
        if prefix is None or self._cloudwatch is None:
            return
        names: list[str] = []
        for page in self._cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        ):
            names += [a["AlarmName"] for a in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]]
        for name in names:
            rest = name[len(prefix) :]  # <job>, or <job> and a suffix (child alarms, progress alarms)
            owner = max((n for n in self.jobs if rest.startswith(n)), key=len, default=None)
            job = self.jobs.get(owner) if owner else None
            if job is None or job.ended:
                self._orphans.append(name)

    @contextlib.contextmanager
    def _account(self) -> Iterator[None]:
        """moto, the deployed template, the handlers' clients (hooked) and the SageMaker double."""
        import boto3
        from moto import mock_aws

        from sagemaker_governance.composition.root import provide
        from sagemaker_governance.observability import logger

        saved_session = boto3.DEFAULT_SESSION
        saved_level = logger.log_level
        with patched_env(DUMMY_CREDENTIALS), mock_aws():
            own = boto3.session.Session(region_name=REGION)  # the simulator's own calls are not counted
            sns, sqs, ssm = own.client("sns"), own.client("sqs"), own.client("ssm")
            self._cloudwatch = own.client("cloudwatch")
            self.deployment = deploy(
                self.template,
                self.scenario.parameters,
                stack_name=STACK_NAME,
                region=REGION,
                account=ACCOUNT,
                sns=sns,
                sqs=sqs,
                ssm=ssm,
                dynamodb=own.client("dynamodb"),  # the idempotency table: the real idempotency path runs
            )
            environment = self.deployment.environment()
            policy_name = environment.get("POLICY_PARAMETER_NAME")
            if self.scenario.policy is not None:
                if not policy_name:
                    raise SimulationError("the scenario has a policy but no function reads POLICY_PARAMETER_NAME")
                document = self.scenario.policy
                text = document if isinstance(document, str) else json.dumps(document)
                ssm.put_parameter(Name=policy_name, Value=text, Type="String", Overwrite=True)
            with patched_env(environment), virtual_backoff(self._backoff, seed=self.seed):
                self._env_now = dict(environment)
                boto3.setup_default_session(region_name=REGION)
                session = boto3.DEFAULT_SESSION
                assert session is not None
                session.events.register("before-parameter-build", self._count_call)
                session.events.register("after-call.sns.Publish", self._service_published)
                root = self._handlers_root(session)
                logger.setLevel("CRITICAL")  # failures are reported, not logged to the terminal
                for function in self.deployment.functions.values():
                    for name, every in function.schedules:
                        self._schedules.append((every, function, name, every))
                try:
                    with provide(root):
                        yield
                finally:
                    logger.setLevel(saved_level)
                    self._root = None
                    boto3.DEFAULT_SESSION = saved_session

    def _handlers_root(self, session: Any) -> Any:
        """The composition root the handlers run on (``provide``d for the whole run): the functions'
        settings, ``session`` (its calls are counted), the virtual clock, audit records and business
        metrics kept in memory; the doubles are attached to its clients."""
        from sagemaker_governance.audit import MemoryAuditSink
        from sagemaker_governance.business_metrics import MemoryBusinessMetrics
        from sagemaker_governance.composition.root import Root
        from sagemaker_governance.settings import Settings

        self._audit = MemoryAuditSink()
        self._crasher = CrashingAuditSink(self._audit, self.faults)
        root = Root(Settings.from_env(), session, self.clock, audit=self._crasher, metrics=MemoryBusinessMetrics())
        self._root = root
        if self.faults.spec.rate("throttle") > 0:
            self._throttler = Throttler(self.faults)
            self._throttler.install(session.events)
            self._throttler.route_sagemaker(root.client("sagemaker"), self.fake)
        else:
            self.fake.attach(root.client("sagemaker"))
        if self.cloudwatch_tps is not None:
            self.quota = RequestQuota.cloudwatch_alarm_writes(self.api_seconds, self.cloudwatch_tps)
            self.quota.attach(root.client("cloudwatch"))
        return root

    def _horizon(self) -> int:
        if self.scenario.horizon_hours is not None:
            return round(self.scenario.horizon_hours * 60)
        latest = 0
        for spec in self.specs:
            wait = spec.max_wait_hours or (spec.max_runtime_hours + 24 if spec.spot else spec.max_runtime_hours)
            latest = max(latest, spec.start_minute + round(wait * 60) + 60)
        return latest * 3 + 24 * 60  # room for resumed clones

    def _loop(self) -> None:
        for spec in self.specs:
            self._push(spec.start_minute, f"create:{spec.name}", 0)
        horizon = self._horizon()
        while True:
            candidates = []
            if self._heap:
                candidates.append(self._heap[0][0])
            due = self.evaluator.next_due() if self.governed else None
            active = self._active > 0 or bool(self._held)
            settled = self._last_end + self.settle_minutes
            if due is not None and (active or due <= settled):
                candidates.append(due)
            if self._schedules:
                next_run = min(s[0] for s in self._schedules)
                if active or next_run <= settled:
                    candidates.append(next_run)
            if self._held:
                candidates.append(self._held[0][0])
            if self._checks and active:
                candidates.append(self._checks[0][0])
            if not candidates:
                break
            minute = min(candidates)
            if minute > horizon:
                break
            self.now = minute
            while self._heap and self._heap[0][0] == minute:
                _, _, job_name, token = heapq.heappop(self._heap)
                self._tick(job_name, token)
                self._deliver()
            if self.governed:
                self._deliver()  # late (held) deliveries due now
                self.evaluator.run_due(minute)
                self._deliver()
                self._run_schedules(minute)
                self._check_alarms(minute)

    def _push(self, minute: int, job_name: str, token: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (minute, self._seq, job_name, token))

    def _schedule(self, job: JobRun, minute: int) -> None:
        self._push(max(minute, self.now), job.name, job.token)

    # ---- jobs ------------------------------------------------------------------------------------

    def _request(self, spec: JobSpec) -> dict[str, Any]:
        resources: dict[str, Any] = {"VolumeSizeInGB": 100}
        if spec.instance_groups is not None:
            resources["InstanceGroups"] = [
                {"InstanceGroupName": g.name, "InstanceType": g.instance_type, "InstanceCount": g.instance_count}
                for g in spec.instance_groups
            ]
        else:
            resources.update({"InstanceType": spec.instance_type, "InstanceCount": spec.instance_count})
        stopping: dict[str, int] = {"MaxRuntimeInSeconds": round(spec.max_runtime_hours * 3600)}
        if spec.spot:
            wait = spec.max_wait_hours or spec.max_runtime_hours + 24
            stopping["MaxWaitTimeInSeconds"] = round(wait * 3600)
        request: dict[str, Any] = {
            "TrainingJobName": spec.name,
            "AlgorithmSpecification": {
                "TrainingImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/train:latest",
                "TrainingInputMode": "File",
            },
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://sim-datasets/{spec.name}/"}
                    },
                }
            ],
            "OutputDataConfig": {"S3OutputPath": "s3://sim-artifacts/models/"},
            "ResourceConfig": resources,
            "StoppingCondition": stopping,
            "EnableManagedSpotTraining": spec.spot,
            "Tags": [{"Key": k, "Value": v} for k, v in spec.tags.items()],
        }
        if spec.metric_definitions:
            request["AlgorithmSpecification"]["MetricDefinitions"] = [
                {"Name": m.name, "Regex": m.regex} for m in spec.metric_definitions
            ]
        if spec.checkpoint:
            request["CheckpointConfig"] = {"S3Uri": f"s3://sim-checkpoints/{spec.name}/"}
        return request

    def _job_from_request(
        self, request: Mapping[str, Any], script: Script, *, price_source: JobSpec | None, expect_stop: bool
    ) -> JobRun:
        resources = request["ResourceConfig"]
        if resources.get("InstanceGroups"):
            groups = [(g["InstanceType"], int(g["InstanceCount"])) for g in resources["InstanceGroups"]]
        else:
            groups = [(resources["InstanceType"], int(resources.get("InstanceCount", 1)))]
        instances = [t for t, n in groups for _ in range(n)]
        order = list(range(len(instances)))
        if len(groups) > 1:  # SageMaker assigns host names randomly across instance groups
            random.Random(f"{self.seed}-{request['TrainingJobName']}").shuffle(order)
        name = request["TrainingJobName"]
        hosts = [(f"{name}/algo-{i + 1}", gpus_of(instances[k])) for i, k in enumerate(order)]
        spot = bool(request.get("EnableManagedSpotTraining"))
        factor = self.scenario.spot_price_factor if spot else 1.0
        price = sum(on_demand_price(t, self.scenario, price_source) * n for t, n in groups) * factor
        stopping = request.get("StoppingCondition", {})
        wait = stopping.get("MaxWaitTimeInSeconds")
        return JobRun(
            name=name,
            script=script,
            hosts=hosts,
            cluster_price_per_hour=price,
            instance_count=len(instances),
            created=self.now,
            spot=spot,
            max_runtime=max(1, int(stopping.get("MaxRuntimeInSeconds", 86_400)) // 60),
            max_wait=int(wait) // 60 if (spot and wait) else None,
            checkpoint_uri=(request.get("CheckpointConfig") or {}).get("S3Uri"),
            expect_stop=expect_stop,
            phase_since=self.now,
            accrued_at=self.now,
        )

    def _create(self, spec: JobSpec) -> None:
        request = self._request(spec)
        job = self._job_from_request(request, spec.script, price_source=spec, expect_stop=spec.expect_stop)
        job.spec_name = spec.name
        job.metrics = tuple(m.name for m in spec.metric_definitions if m.publishes)
        self.jobs[job.name] = job
        self.fake.launch(request)
        self._emit(job.name)
        self._schedule(job, self.now + job.script.starting_minutes)

    def _adopt_clone(self, request: dict[str, Any]) -> None:
        """The service created a training job: run it, following its source job's script."""
        source = self._source_of(request)
        spec = next((s for s in self.specs if source is not None and s.name == self.jobs[source].spec_name), None)
        script = self.jobs[source].script.resumed() if source is not None else Script(train_hours=1)
        job = self._job_from_request(request, script, price_source=spec, expect_stop=False)
        job.source = source
        job.spec_name = spec.name if spec else None
        defined = {d.get("Name") for d in request.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])}
        job.metrics = tuple(m for m in (self.jobs[source].metrics if source else ()) if m in defined)
        self.jobs[job.name] = job
        self._active += 1
        self._emit(job.name)
        self._schedule(job, self.now + job.script.starting_minutes)

    def _source_of(self, request: Mapping[str, Any]) -> str | None:
        """The job a clone was made from: named in its tags (lineage), else same checkpoint location."""
        values = {t.get("Value") for t in request.get("Tags", [])}
        named = [n for n in self.jobs if n in values]
        if named:
            return max(named, key=lambda n: self.jobs[n].created)
        uri = (request.get("CheckpointConfig") or {}).get("S3Uri")
        same = [n for n, j in self.jobs.items() if uri and j.checkpoint_uri == uri]
        if same:
            return max(same, key=lambda n: self.jobs[n].created)
        prefix = [n for n in self.jobs if request["TrainingJobName"].startswith(n)]
        return max(prefix, key=len) if prefix else None

    def _transition(self, job: JobRun, status: str, secondary: str, **kwargs: Any) -> None:
        self.fake.transition(job.name, status, secondary, **kwargs)
        self._emit(job.name)

    def _emit(self, name: str) -> None:
        if self.governed:
            self._events.append(self.fake.event(name, event_id=self.uuids.next()))

    def _accrue(self, job: JobRun) -> None:
        dt = self.now - job.accrued_at
        if dt > 0:
            if job.phase in BILLABLE and (job.phase != "stopping" or job.stopping_billable):
                job.billable += dt
            if job.phase == "training" and job.stalled_at is None:
                job.progress = min(job.progress + dt, job.script.train_minutes)
                if job.checkpoint_uri:
                    saved = job.progress - job.progress % job.script.checkpoint_every_minutes
                    if job.progress >= job.script.train_minutes:
                        saved = job.progress
                    self.checkpoints[job.checkpoint_uri] = max(self.checkpoints.get(job.checkpoint_uri, 0), saved)
        job.accrued_at = self.now

    def _publish(self, job: JobRun, percent: float | None) -> None:
        # The job's training metric: one log line a minute while it trains and makes progress.
        metrics_on = job.phase == "training" and job.stalled_at is None and percent is not None
        if metrics_on != job.metrics_on:
            job.metrics_on = metrics_on
            for name in job.metrics:
                key = metric_key(GPU_NAMESPACE, name, [{"Name": "TrainingJobName", "Value": job.name}])
                self.store.publish(key, self.now, 1.0 if metrics_on else None)
        if percent == job.gpu_percent:
            return
        job.gpu_percent = percent
        if job.series and job.series[-1][1] is None:
            job.series[-1][1] = self.now
            if job.series[-1][0] == self.now:
                job.series.pop()
        if percent is not None:
            job.series.append([self.now, None, percent])
        for host, gpus in job.gpu_hosts:
            key = metric_key(GPU_NAMESPACE, GPU_METRIC, [{"Name": "Host", "Value": host}])
            self.store.publish(key, self.now, None if percent is None else percent * gpus)

    def _enter(self, job: JobRun, phase: str) -> None:
        job.phase = phase
        job.phase_since = self.now
        job.token += 1

    def _end(self, job: JobRun, status: str, secondary: str, **kwargs: Any) -> None:
        self._publish(job, None)
        self._enter(job, "ended")
        job.final_status, job.final_secondary, job.ended_at = status, secondary, self.now
        self._active -= 1
        self._last_end = self.now
        record = self.fake.jobs[job.name]  # what DescribeTrainingJob reports for an ended job
        record["TrainingTimeInSeconds"] = record["BillableTimeInSeconds"] = job.billable * 60
        self._transition(job, status, secondary, **kwargs)

    def _tick(self, name: str, token: int) -> None:
        if name.startswith("create:"):
            spec = next(s for s in self.specs if s.name == name[7:])
            self._create(spec)
            return
        job = self.jobs[name]
        if token != job.token or job.ended:
            return
        self._accrue(job)
        script, now = job.script, self.now
        if job.phase == "stopping":
            self._end(job, "Stopped", "Stopped")
            return
        if job.max_wait is not None and now - job.created >= job.max_wait:
            self._end(job, "Stopped", "MaxWaitTimeExceeded")
            return
        if job.phase in BILLABLE and job.billable >= job.max_runtime:
            self._end(job, "Stopped", "MaxRuntimeExceeded")
            return
        if job.spot and job.phase in RUNNING and script.interruption_due(now - job.created) == now - job.created:
            self._interrupt(job)
            return
        elapsed = now - job.phase_since
        if job.phase == "starting" and elapsed >= script.starting_minutes:
            self._enter(job, "downloading")
            self._publish(job, 0.0)
            self._transition(job, "InProgress", "Downloading")
        elif job.phase == "downloading" and elapsed >= script.downloading_minutes:
            self._enter(job, "training")
            if job.checkpoint_uri and job.progress == 0:
                job.progress = self.checkpoints.get(job.checkpoint_uri, 0)
            self._transition(job, "InProgress", "Training")
            self._training_state(job)
            if self.governed and job.gpu_hosts:
                self._seq += 1
                heapq.heappush(
                    self._checks, (self.now + self.alarm_settle_minutes, self._seq, job.name, job.token)
                )
        elif job.phase == "training":
            if job.progress >= script.train_minutes:
                self._enter(job, "uploading")
                self._publish(job, 0.0)
                self._transition(job, "InProgress", "Uploading")
            elif script.fail_after_hours is not None and job.progress >= round(script.fail_after_hours * 60):
                self._end(job, "Failed", "Failed", failure_reason=script.failure_reason)
                return
            else:
                self._training_state(job)
        elif job.phase == "uploading" and elapsed >= script.uploading_minutes:
            self._end(job, "Completed", "Completed")
            return
        elif job.phase == "interrupted" and elapsed >= script.spot_capacity_wait_minutes:
            self._enter(job, "starting")
            self._transition(job, "InProgress", "Starting", message="Launching requested ML instances")
        self._schedule(job, self._next_tick(job))

    def _training_state(self, job: JobRun) -> None:
        script = job.script
        if (
            job.stalled_at is None
            and script.stall_after_minutes is not None
            and job.progress >= script.stall_after_minutes
        ):
            job.stalled_at = self.now
            job.first_stall = self.now if job.first_stall is None else job.first_stall
        if job.stalled_at is not None:
            self._publish(job, script.stall_gpu_percent)
        else:
            self._publish(job, script.gpu_at(job.progress)[0])

    def _interrupt(self, job: JobRun) -> None:
        self._publish(job, None)
        self._enter(job, "interrupted")
        job.interruptions += 1
        job.stalled_at = None  # the restarted process hangs again only when it reaches the same point
        saved = self.checkpoints.get(job.checkpoint_uri, 0) if job.checkpoint_uri else 0
        job.progress = min(job.progress, saved)
        self._transition(
            job, "InProgress", "Interrupted", message="Training job interrupted: Spot capacity reclaimed"
        )
        self._schedule(job, self._next_tick(job))

    def _next_tick(self, job: JobRun) -> int:
        script, now = job.script, self.now
        candidates: list[int] = []
        durations = {
            "starting": script.starting_minutes,
            "downloading": script.downloading_minutes,
            "uploading": script.uploading_minutes,
            "interrupted": script.spot_capacity_wait_minutes,
        }
        if job.phase in durations:
            candidates.append(job.phase_since + durations[job.phase])
        if job.phase == "training" and job.stalled_at is None:
            targets = [script.train_minutes]
            if script.fail_after_hours is not None:
                targets.append(round(script.fail_after_hours * 60))
            if script.stall_after_minutes is not None:
                targets.append(script.stall_after_minutes)
            boundary = script.next_boundary(job.progress)
            if boundary is not None:
                targets.append(boundary)
            later = [t for t in targets if t > job.progress]
            candidates.append(now + (min(later) - job.progress) if later else now)
        if job.phase in BILLABLE:
            candidates.append(now + max(0, job.max_runtime - job.billable))
        if job.max_wait is not None:
            candidates.append(job.created + job.max_wait)
        if job.spot and job.phase in RUNNING:
            due = script.interruption_due(now - job.created + 1)
            if due is not None:
                candidates.append(job.created + due)
        return max(now + 1, min(candidates)) if candidates else now + 1

    # ---- the service's side effects --------------------------------------------------------------

    def _after_invocation(self) -> None:
        while self._stops_seen < len(self.fake.stop_requests):
            name = self.fake.stop_requests[self._stops_seen]
            self._stops_seen += 1
            job = self.jobs.get(name)
            if job is None or job.ended or job.phase == "stopping":
                continue
            if self.fake.jobs[name]["TrainingJobStatus"] != "Stopping":
                continue
            self._accrue(job)
            self._publish(job, None)
            job.stopping_billable = job.phase in RUNNING
            self._enter(job, "stopping")
            job.stopped_by_service_at = self.now
            self._emit(name)
            self._schedule(job, self.now + 1)
        while self._created_seen < len(self.fake.created):
            request = self.fake.created[self._created_seen]
            self._created_seen += 1
            self._adopt_clone(request)
        if self._alarm_names:
            self._refresh_alarms()

    def _refresh_alarms(self) -> None:
        names = sorted(self._alarm_names)
        self._alarm_names.clear()
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(names), 100):
            response = self._cloudwatch.describe_alarms(AlarmNames=names[start : start + 100])
            for alarm in [*response.get("MetricAlarms", []), *response.get("CompositeAlarms", [])]:
                found[alarm["AlarmName"]] = alarm
        for name in names:
            if name in found:
                self.alarms_seen[name] = found[name]
                self.evaluator.upsert(found[name], self.now)
            else:
                self.evaluator.remove(name)
        sets, self._state_sets = self._state_sets, []
        for name, state in sets:
            if name in found:
                self.evaluator.set_state(name, state, self.now)

    def _count_call(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        self.aws_calls[f"{service}:{model.name}"] += 1
        if service == "cloudwatch" and model.name == "SetAlarmState":
            self._state_sets.append((str(params.get("AlarmName")), str(params.get("StateValue"))))
        if service == "cloudwatch" and model.name in ALARM_MUTATIONS:
            for key in ALARM_MUTATIONS[model.name]:
                value = params.get(key)
                if isinstance(value, str):
                    self._alarm_names.add(value)
                elif isinstance(value, list):
                    self._alarm_names.update(value)
        if service == "sns" and model.name == "Publish":
            self._last_publish = dict(params)

    def _service_published(self, http_response: Any, parsed: Mapping[str, Any], **_: Any) -> None:
        params = getattr(self, "_last_publish", None)
        if not params or not parsed.get("MessageId") or "TopicArn" not in params:
            return
        attributes = {
            k: {"Type": v.get("DataType", "String"), "Value": v.get("StringValue", "")}
            for k, v in params.get("MessageAttributes", {}).items()
        }
        message = params["Message"]
        if params.get("MessageStructure") == "json":
            message = json.loads(message).get("lambda") or json.loads(message).get("default", message)
        self._sns.append((params["TopicArn"], params.get("Subject"), message, attributes))

    def _alarm_transition(self, transition: Transition) -> None:
        name = transition.alarm["AlarmName"]
        self.alarm_transitions.append(
            {"minute": self.now, "alarm": name, "from": transition.old_state, "to": transition.new_state}
        )
        with contextlib.suppress(Exception):  # the alarm may have been deleted in the meantime
            self._cloudwatch.set_alarm_state(
                AlarmName=name,
                StateValue=transition.new_state,
                StateReason=transition.reason[:1023],
                StateReasonData=json.dumps(transition.reason_data),
            )
        subject = alarm_subject(name, transition.new_state, REGION)
        for action in transition.actions:
            if action.startswith("arn:aws:sns:"):
                self._sns.append((action, subject, json.dumps(transition.message), {}))

    # ---- delivery --------------------------------------------------------------------------------

    def _deliver(self) -> None:
        """Deliver what is queued: EventBridge events, then SNS messages, then late deliveries now due."""
        if not self.governed or self.deployment is None:
            return
        while True:
            if self._events:
                self._deliver_event(self._events.pop(0), faulty=True)
            elif self._sns:
                self._deliver_sns(self._sns.pop(0), faulty=True)
            elif self._held and self._held[0][0] <= self.now:
                _, _, kind, item = heapq.heappop(self._held)
                if kind == "event":
                    self._deliver_event(item, faulty=False)
                else:
                    self._send_sns(*item)
            else:
                return

    def _hold(self, kind: str, item: Any, delay: int) -> None:
        self._seq += 1
        heapq.heappush(self._held, (self.now + delay, self._seq, kind, item))

    def _deliver_event(self, event: dict[str, Any], *, faulty: bool) -> None:
        assert self.deployment is not None
        flat = flatten(event)
        targets = [
            (function, route)
            for function in self.deployment.functions.values()
            for route in function.event_routes
            if route.matches(event, flat)
        ]
        state_change = is_state_change(event)
        if targets and state_change and event["detail"].get("SecondaryStatus") == "Training":
            self._watches_training = True
        if faulty:
            if state_change and self.faults.draw("drop"):
                self.faults.injected["drop"] += 1  # EventBridge lost it: no target is invoked
                return
            if self.faults.draw("reorder"):
                self.faults.injected["reorder"] += 1
                self._hold("event", event, self.faults.delay("reorder", 1))
                return
            if state_change and self.faults.draw("duplicate"):
                self.faults.injected["duplicate"] += 1
                copy = dict(event)
                if self.faults.coin("duplicate"):  # SageMaker's repeated emission: same change, new id
                    copy["id"] = self.uuids.next()
                self._hold("event", copy, self.faults.delay("duplicate", 0))
        for function, route in targets:
            self._invoke(function, event, f"rule:{route.name}", route.queue)

    def _deliver_sns(self, item: tuple[str, str | None, str, dict[str, Any]], *, faulty: bool) -> None:
        assert self.deployment is not None
        topic, subject, message, attributes = item
        self.notifications[topic.rsplit(":", 1)[-1]] += 1
        deliveries = [
            (
                function,
                self._sns_event(topic, subject, message, attributes)
                if sns_route.queue is None
                else self._sns_notification(topic, subject, message, attributes, sns_route.queue),
                sns_route.queue,
            )
            for function in self.deployment.functions.values()
            for sns_route in function.sns_routes
            if sns_route.topic_arn == topic and sns_route.matches(attributes, message)
        ]
        if faulty and deliveries:
            if self.faults.draw("reorder"):
                self.faults.injected["reorder"] += 1
                self._hold("sns", (deliveries,), self.faults.delay("reorder", 1))
                return
            if self.faults.draw("duplicate"):  # SNS redelivers: the same MessageId
                self.faults.injected["duplicate"] += 1
                self._hold("sns", (deliveries,), self.faults.delay("duplicate", 0))
        self._send_sns(deliveries)

    def _send_sns(self, deliveries: list[tuple[DeployedFunction, Any, QueueDelivery | None]]) -> None:
        for function, envelope, queue in deliveries:
            self._invoke(function, envelope, "sns", queue)

    def _sns_notification(
        self, topic: str, subject: str | None, message: str, attributes: Mapping[str, Any], queue: QueueDelivery
    ) -> Any:
        """What SNS sends an SQS subscriber: the message itself (raw delivery), else the JSON notification."""
        if queue.raw_message_delivery:
            return message
        record = self._sns_event(topic, subject, message, attributes)["Records"][0]["Sns"]
        record["SigningCertURL"] = record.pop("SigningCertUrl")  # as SNS spells them for SQS
        record["UnsubscribeURL"] = record.pop("UnsubscribeUrl")
        return record

    def _sqs_event(self, queue: QueueDelivery, body: str, message_id: str, receive_count: int) -> dict[str, Any]:
        """An event source mapping's invocation: a batch of one SQS record (the simulator does not batch)."""
        sent = str(int(self.clock().timestamp() * 1000))
        return {
            "Records": [
                {
                    "messageId": message_id,
                    "receiptHandle": f"simulated-{message_id}-{receive_count}",
                    "body": body,
                    "attributes": {
                        "ApproximateReceiveCount": str(receive_count),
                        "SentTimestamp": sent,
                        "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                        "ApproximateFirstReceiveTimestamp": sent,
                    },
                    "messageAttributes": {},
                    "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": queue.queue_arn,
                    "awsRegion": REGION,
                }
            ]
        }

    def _sns_event(
        self, topic: str, subject: str | None, message: str, attributes: Mapping[str, Any]
    ) -> dict[str, Any]:
        subscription = f"{topic}:{self.uuids.next()}"
        return {
            "Records": [
                {
                    "EventSource": "aws:sns",
                    "EventVersion": "1.0",
                    "EventSubscriptionArn": subscription,
                    "Sns": {
                        "Type": "Notification",
                        "MessageId": self.uuids.next(),
                        "TopicArn": topic,
                        "Subject": subject,
                        "Message": message,
                        "Timestamp": self.clock().strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                        "SignatureVersion": "1",
                        "Signature": "c2ltdWxhdGVk",
                        "SigningCertUrl": f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-simulated.pem",
                        "UnsubscribeUrl": (
                            f"https://sns.{REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription}"
                        ),
                        "MessageAttributes": dict(attributes),
                    },
                }
            ]
        }

    def _run_schedules(self, minute: int) -> None:
        for index, (due, function, name, every) in enumerate(list(self._schedules)):
            if due <= minute:
                self._schedules[index] = (minute + every, function, name, every)
                event = {
                    "version": "0",
                    "id": self.uuids.next(),
                    "detail-type": "Scheduled Event",
                    "source": "aws.events",
                    "account": ACCOUNT,
                    "time": self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "region": REGION,
                    "resources": [
                        f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{STACK_NAME}-{function.logical_id}{name}"
                    ],
                    "detail": {},
                }
                self._invoke(function, event, f"schedule:{name}")
                self._deliver()

    def _invoke(
        self, function: DeployedFunction, event: Any, trigger: str, queue: QueueDelivery | None = None
    ) -> None:
        """Invoke ``function`` with ``event`` (through ``queue``: ``event`` is the message body, sent as
        SQS records; a failed record is received again up to the queue's ``maxReceiveCount``)."""
        if self._invocation_minute != self.now:
            self._invocation_minute, self._invocations_now = self.now, 0
        self._invocations_now += 1
        if self._invocations_now > MAX_INVOCATIONS_PER_MINUTE:
            raise SimulationError(
                f"more than {MAX_INVOCATIONS_PER_MINUTE} invocations at minute {self.now}: a loop?"
            )
        changed = {k: v for k, v in function.environment.items() if self._env_now.get(k) != v}
        if changed:
            os.environ.update(changed)
            self._env_now.update(changed)
        self.deliveries["delivered"] += 1
        attempts, on_failure = function.retries + 1, function.on_failure
        body, message_id = "", ""
        if queue is not None:
            attempts = queue.max_receive_count or function.retries + 1
            on_failure = queue.dead_letter_arn
            body, message_id = event if isinstance(event, str) else json.dumps(event), self.uuids.next()
        for attempt in range(attempts):
            self.invocations[function.logical_id] += 1
            context = LocalContext(function_name=function.function_name, aws_request_id=self.uuids.next())
            payload = event if queue is None else self._sqs_event(queue, body, message_id, attempt + 1)
            if self._crasher is not None:
                self._crasher.arm()
            try:
                with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # Powertools: "no application metrics"
                    response = function.handler(json.loads(json.dumps(payload)), context)
                error = None
                failed = response.get("batchItemFailures") if isinstance(response, Mapping) else None
                if queue is not None and queue.reports_item_failures and failed:
                    error = "the record is in the partial batch response's batchItemFailures"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                frames = traceback.extract_tb(exc.__traceback__)
                if frames:
                    error += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})"
            finally:
                if self._crasher is not None:
                    self._crasher.disarm()
            self._after_invocation()
            if error is None:
                self.deliveries["processed"] += 1
                return
            self.errors.append(
                Invocation(self.now, function.logical_id, trigger, f"attempt {attempt + 1}: {error}")
            )
        if on_failure:
            self.deliveries["dead_lettered"] += 1
            self.notifications["dead-letter-queue"] += 1
        else:  # no on-failure destination and no dead-letter queue: Lambda discards the event
            self.deliveries["lost"] += 1
