"""One run: one account over virtual minutes, governed by the real service or not at all (baseline).

The clock jumps from one thing that can happen to the next: a job's tick (``lifecycle``), an alarm due
for evaluation (``alarm_mirror``), a late delivery or a schedule (``delivery``), an invariant check
(``invariants``). Each minute: the jobs' ticks (each followed by delivery of what it emitted), late
deliveries, alarm evaluations (and their notifications), schedules, invariant checks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from smgov.cfn_template import TEMPLATE_PATH, load_template
from smgov.simulation.engine.account import SimulatedAccount
from smgov.simulation.engine.alarm_mirror import AlarmMirror
from smgov.simulation.engine.clock import Uuids, VirtualClock
from smgov.simulation.engine.cloudwatch_backend import SimulatedCloudWatch
from smgov.simulation.engine.counters import CallListener, Counters, Invocation, ServiceCalls
from smgov.simulation.engine.delivery import Delivery, InvocationHook
from smgov.simulation.engine.invariants import ALARM_GRACE_MINUTES, InvariantWatch
from smgov.simulation.engine.jobs import JobRun
from smgov.simulation.engine.lifecycle import Lifecycle
from smgov.simulation.engine.logs import LogStreams
from smgov.simulation.engine.telemetry import Telemetry
from smgov.simulation.fake_s3 import CheckpointObjects
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.faults import FaultInjector, FaultSpec, LaggingReads, LateLogs
from smgov.simulation.harness import ACCOUNT, REGION
from smgov.simulation.metrics import MetricStore
from smgov.simulation.scenario import OrgSpec, Scenario

STACK_NAME = "smgov-sim"
TAIL_MINUTES = 90  # keep the clock running this long after the last job ended (alarms, late actions)


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
    # One audit view (an org scenario's member run): the account, the events that reached the central
    # log group and the audit records dead-lettered instead
    account: str = ACCOUNT
    central_events: list[dict[str, Any]] = field(default_factory=list)
    dead_lettered_audit: list[dict[str, Any]] = field(default_factory=list)
    # The reconciler's interval (the longest schedule): how much later a failed delivery or run is repaired.
    repair_minutes: int = 0


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int = 0,
        governed: bool = True,
        template: Mapping[str, Any] | None = None,
        template_path: Path | str = TEMPLATE_PATH,
        cloudwatch_tps: float | Mapping[str, float] | None = None,
        faults: FaultSpec | None = None,
        account: str = ACCOUNT,
        central: OrgSpec | None = None,
    ) -> None:
        """``cloudwatch_tps``: enforce CloudWatch's request-rate quota on ``PutMetricAlarm`` and
        ``DeleteAlarms`` (3.0 is AWS's default) with botocore's real retries, or a rate per API (e.g.
        ``{"PutMetricAlarm": 3.0, "DeleteAlarms": 0.2}``); None: no quota. ``account``: the account id the
        run is in; ``central``: the organization's audit account (one member of an org scenario: its
        records are forwarded there)."""
        self.scenario = scenario
        self.seed = seed
        self.governed = governed
        self.template = template if template is not None else load_template(template_path)
        self.epoch = scenario.start
        self.rng = random.Random(seed)
        self.uuids = Uuids(seed)
        self.specs = scenario.expand(seed)
        self.clock = VirtualClock(self.epoch)
        self.store = MetricStore()
        self.counters = Counters()
        self.faults = FaultInjector(faults, seed)
        self.account_id = account
        self.fake = FakeSageMaker(self.clock, region=REGION, account=account)
        if self.faults.spec.rate("lag") > 0:  # DescribeTrainingJob lags transitions (eventual consistency)
            self.fake.lag = LaggingReads(self.faults, lambda: self.clock.now, self.clock.at)
        self.delivery = Delivery(
            clock=self.clock,
            uuids=self.uuids,
            counters=self.counters,
            faults=self.faults,
            stack_name=STACK_NAME,
            after_invocation=self._after_invocation,
        )
        self.calls = ServiceCalls(self.counters, published=self.delivery.sns)
        self.alarms = AlarmMirror(
            self.store,
            self.calls,
            clock=self.clock,
            account=account,
            region=REGION,
            notify=self.delivery.sns,
            delay=scenario.metric_delay_minutes,
            salt=str(seed),
        )
        self.logs = LogStreams(self.clock)
        if self.faults.spec.rate("late-logs") > 0:  # a failed job's last lines reach CloudWatch Logs late
            self.logs.late = LateLogs(self.faults)
        self.lifecycle = Lifecycle(
            scenario,
            self.specs,
            seed=seed,
            clock=self.clock,
            fake=self.fake,
            telemetry=Telemetry(self.store, seed=seed, logs=self.logs),
            logs=self.logs,
            emit=self._emit,
        )
        self.checkpoint_objects = CheckpointObjects(self.clock.at, lambda: self.clock.now)  # S3 under each job's
        # CheckpointConfig: the checkpoints of its progress, and the files its save phases write
        self.lifecycle.on_checkpoint = self.checkpoint_objects.save
        self.lifecycle.on_files = self.checkpoint_objects.writing
        self.lifecycle.on_earlier = self.checkpoint_objects.earlier
        self.account = SimulatedAccount(
            self.template,
            scenario,
            stack_name=STACK_NAME,
            seed=seed,
            clock=self.clock,
            calls=self.calls,
            fake=self.fake,
            faults=self.faults,
            cloudwatch_tps=cloudwatch_tps,
            cloudwatch=SimulatedCloudWatch(
                self.store, self.clock, delay=scenario.metric_delay_minutes, salt=str(seed), account=account
            ),
            logs=self.logs,
            checkpoint_objects=self.checkpoint_objects,
            account=account,
            central=central,
            in_flight=self.delivery.in_flight,
        )
        self.invariants = InvariantWatch(
            self.lifecycle.jobs,
            self.alarms.evaluator,
            alarm_prefix=self.account.alarm_prefix,
            settle_minutes=lambda: self.alarm_settle_minutes,
            watching=lambda: self.delivery.watches_training,
        )
        if governed:
            self.lifecycle.on_training = lambda job: self.invariants.entered_training(job, self.now)

    # ---- what others read and extend -----------------------------------------------------------

    @property
    def now(self) -> int:
        return self.clock.now

    @property
    def jobs(self) -> dict[str, JobRun]:
        return self.lifecycle.jobs

    @property
    def aws_calls(self) -> Counter[str]:
        return self.counters.aws_calls

    def api_seconds(self) -> float:
        return self.clock.api_seconds()

    def on_invocation(self, hook: InvocationHook) -> None:
        """Wrap every delivery to a function (all its attempts) in ``hook(function, event, trigger)``."""
        self.delivery.hooks.append(hook)

    def on_call(self, listener: CallListener) -> None:
        """Call ``listener(service, operation, params)`` for every AWS call the service makes."""
        self.calls.listeners.append(listener)

    # ---- running ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        if not self.governed:
            self._loop()
            return self._result([])
        with self.account.open() as account:
            self.alarms.cloudwatch = account.cloudwatch
            self.delivery.deployment = account.deployment
            self.delivery.environment = dict(account.environment)
            self.delivery.crasher = account.crasher
            assert account.deployment is not None
            self.delivery.add_schedules(account.deployment)
            self._loop()
            self.invariants.find_orphans(account.cloudwatch)
            records = list(account.audit.records)
        return self._result(records)

    def _emit(self, name: str) -> None:
        if self.governed:
            self.delivery.event(self.faults.sparse(self.fake.event(name, event_id=self.uuids.next())))

    def _after_invocation(self) -> None:
        self.lifecycle.after_service()
        self.alarms.refresh()

    @property
    def settle_minutes(self) -> int:
        """How long the clock runs on after the last job ended: alarm evaluations and late actions, and
        at least two runs of every scheduled function (the reconciler's last chance to repair)."""
        return max(TAIL_MINUTES, 2 * self.delivery.longest_schedule)

    @property
    def alarm_settle_minutes(self) -> int:
        """A GPU job in Training must have its alarm after this long: a moment for the event, plus one
        period of the slowest schedule (a reconciler repairs a lost Training event on its next run); with
        crashes injected, one more period: a reconciler run can die, and none is retried (the template's
        ``EventInvokeConfig.MaximumRetryAttempts: 0``: the next run makes up for it)."""
        periods = 2 if self.faults.spec.rates.get("crash") else 1
        return ALARM_GRACE_MINUTES + periods * self.delivery.longest_schedule

    def _loop(self) -> None:
        lifecycle, delivery, evaluator = self.lifecycle, self.delivery, self.alarms.evaluator
        horizon = lifecycle.horizon()
        while True:
            candidates = []
            tick = lifecycle.next_tick()
            if tick is not None:
                candidates.append(tick)
            due = evaluator.next_due() if self.governed else None
            active = lifecycle.active > 0 or delivery.pending
            settled = lifecycle.last_end + self.settle_minutes
            if due is not None and (active or due <= settled):
                candidates.append(due)
            next_run = delivery.next_schedule()
            if next_run is not None and (active or next_run <= settled):
                candidates.append(next_run)
            held = delivery.next_held()
            if held is not None:
                candidates.append(held)
            check = self.invariants.next_check()
            if check is not None and active:
                candidates.append(check)
            if not candidates:
                break
            minute = min(candidates)
            if minute > horizon:
                break
            self.clock.now = minute
            # batching: the records of every job change of the minute wait to be received together (below)
            lifecycle.run_ticks(minute, lambda: delivery.deliver(receive=not delivery.batching))
            if self.governed:
                delivery.deliver()  # late (held) deliveries due now
                evaluator.run_due(minute)
                delivery.deliver()
                delivery.run_schedules(minute)
                self.invariants.check(minute)

    def _result(self, records: list[Any]) -> RunResult:
        counters = self.counters
        return RunResult(
            scenario=self.scenario,
            seed=self.seed,
            governed=self.governed,
            epoch=self.epoch,
            jobs=self.jobs,
            audit=records,
            invocations=counters.invocations,
            errors=counters.errors,
            aws_calls=counters.aws_calls,
            notifications=counters.notifications,
            alarm_transitions=self.alarms.transitions,
            alarms=self.alarms.seen,
            deployment_notes=self.account.deployment.notes if self.account.deployment else [],
            minutes=self.now,
            evaluations=self.alarms.evaluator.evaluations,
            throttling=self._throttling(),
            faults=self._faults(),
            deliveries=counters.deliveries,
            ground_truth=self.invariants.ground_truth(records) if self.governed else {},
            account=self.account_id,
            central_events=list(self.account.central_events),
            dead_lettered_audit=list(self.account.dead_lettered_audit),
            repair_minutes=self.delivery.longest_schedule,
        )

    def _faults(self) -> dict[str, Any]:
        """What the fault injector reports, with (batching) how many batches of each size were received."""
        if not self.faults.spec.enabled:
            return {}
        report = self.faults.report()
        if self.delivery.batching:
            report["batch_sizes"] = dict(sorted(Counter(self.delivery.batch_sizes).items()))
        return report

    def _throttling(self) -> dict[str, Any]:
        """botocore's retry sleeps (quota model or throttle faults) and, with the quota model on, its
        requests allowed/throttled per API; empty when nothing was throttled and the model is off."""
        quota = self.account.quota
        if quota is None and not self.clock.sleeps:
            return {}
        summary = self.clock.retry_summary()
        if quota is not None:
            summary |= {"cloudwatch_tps": self.account.cloudwatch_tps, "requests": quota.summary()}
        return summary
