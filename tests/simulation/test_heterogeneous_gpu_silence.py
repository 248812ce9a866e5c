"""A heterogeneous 15-host job (10 CPU + 5 GPU hosts) whose GPU hosts stop publishing GPUUtilization, end to
end: the simulator's alarm evaluator (CloudWatch's missing-data rules) fires the guard's composite, and the real
stopper judges every notification, its resets going back to the evaluator. The children treat missing data as
``missing``, so a few breaching datapoints followed by silence send the GPU child to ALARM (the user guide's
row ``X - - - -``): the stopper reads the hosts' GPU data first and stops nothing on it (0 false stops), while
the same job whose GPU data keeps arriving is still stopped."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.errors import StopOutcome
from sagemaker_governance.domain.guards.base import (
    TAG_JOB,
    TAG_MANAGED_BY,
    AlarmNaming,
    AlarmPlan,
    AlarmState,
    DescribedAlarm,
    Guard,
    metric_alarm_terms,
)
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.stall_judge import MetricRead, MetricReadResult
from sagemaker_governance.events.alarms import AlarmNotification
from sagemaker_governance.service.guard_stopper import GuardStopper
from smgov.simulation.alarms import OK, AlarmEvaluator, Transition
from smgov.simulation.metrics import MetricStore, metric_key
from tests.builders import job

EPOCH = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # the job entered Training at minute 0
ACCOUNT = "123456789012"
NS = "/aws/sagemaker/TrainingJobs"
NAMING = AlarmNaming(prefix="gov-", managed_by="gov", alarm_topic_arn=f"arn:aws:sns:us-east-1:{ACCOUNT}:alarms")
GROUPS = [
    {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 10},
    {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 5},
]
GPU_HOSTS = range(11, 16)  # SageMaker assigns algo-n to the groups at random; here the last five have GPUs
EFFICIENCY_ON = {"enabled": True, "min_gpu_percent": 50, "window_minutes": 60, "stop_after_notices": 3}


class Cloud:
    """The stopper's CloudWatch over the evaluator and the metric store: the alarms' tags and definitions (as
    planned), their resets (to the evaluator, at the current minute), the hosts' one-minute GPUUtilization."""

    def __init__(self, evaluator: AlarmEvaluator, store: MetricStore, plan: AlarmPlan) -> None:
        self.evaluator, self.store, self.plan = evaluator, store, plan
        self.minute = 0
        self.resets: list[tuple[int, str]] = []

    def tags(self, name: str) -> dict[str, str] | None:
        return {TAG_JOB: "job-1", TAG_MANAGED_BY: "gov"} if name in self.evaluator.states else None

    def current_state(self, name: str) -> AlarmState | None:
        return None  # unknown: the notification is taken as current

    def definition(self, name: str) -> DescribedAlarm | None:
        request = self.plan.metric_request(name)
        if request is None:
            return None
        return DescribedAlarm(
            name=name, description=request["AlarmDescription"], terms=metric_alarm_terms(request)
        )

    def reset(self, names: Sequence[str], reason: str) -> None:
        for name in names:
            self.resets.append((self.minute, name))
            self.evaluator.set_state(name, OK, self.minute)

    def enable_actions(self, names: Sequence[str]) -> None: ...

    def disable_actions(self, names: Sequence[str]) -> None: ...

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        first, last = (int((t - EPOCH).total_seconds() // 60) for t in (start, end))
        values: dict[str, tuple[float, ...] | None] = {}
        times: dict[str, tuple[datetime, ...]] = {}
        for q in queries:
            key = metric_key(NS, q.metric, [{"Name": n, "Value": v} for n, v in q.dimensions])
            points = [
                (EPOCH + timedelta(minutes=first + i), v)
                for i, v in enumerate(self.store.datapoints(key, first, last - first, 1, q.stat))
                if v is not None
            ]
            values[q.id], times[q.id] = tuple(v for _, v in points), tuple(t for t, _ in points)
        return MetricReadResult(values, (), times)


class Jobs:
    def __init__(self, training: TrainingJob) -> None:
        self.training = training
        self.stopped: list[int] = []
        self.minute: Callable[[], int] = lambda: 0

    def describe(self, name: str) -> dict[str, Any]:
        raise AssertionError("the stopper reads the job with get_job")

    def list_tags(self, arn: str) -> dict[str, str]:
        raise AssertionError("the stopper reads the job with get_job")

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        return self.training

    def stop(self, name: str) -> StopOutcome:
        self.stopped.append(self.minute())
        return StopOutcome.STOPPED


class Notifier:
    def __init__(self) -> None:
        self.sent: list[Notification] = []

    def publish(self, message: Notification) -> str | None:
        self.sent.append(message)
        return "m-1"


class Policies:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def current(self, max_age_seconds: float | None = None) -> Policy:
        return self.policy


def run(
    guard: Guard[Any], section: dict[str, Any], gpu: Callable[[MetricStore, Any], None], minutes: int
) -> tuple[Jobs, Notifier, MemoryAuditSink, Cloud]:
    """The job under ``guard`` (the stall judge off) for ``minutes``: ``gpu`` publishes its GPU hosts' data; every
    notification of a composite going to ALARM is handled by the stopper when it is sent."""
    training = job(
        "job-1",
        {"team": "nlp", "cost-center": "cc-1", "owner": "dana"},
        SecondaryStatus="Training",
        ResourceConfig={"InstanceGroups": GROUPS},
        TrainingStartTime=EPOCH.isoformat(),
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": EPOCH.isoformat()}],
    )
    policy = Policy.model_validate({"mode": "enforce", "judge": {"enabled": False}, guard.section: section})
    plan = guard.plan(training, guard.config(policy.for_job(training)), NAMING)
    assert isinstance(plan, AlarmPlan) and plan.composite_request is not None
    store, sent = MetricStore(), list[Transition]()
    ev = AlarmEvaluator(store, epoch=EPOCH, account=ACCOUNT, region="us-east-1", on_transition=sent.append)
    for alarm in plan.alarms:
        ev.upsert({**alarm.request, "AlarmArn": f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{alarm.name}"}, 0)
    for name in plan.metric_alarm_names:
        ev.set_state(name, OK, 0)
    for n in GPU_HOSTS:
        gpu(store, metric_key(NS, "GPUUtilization", [{"Name": "Host", "Value": f"job-1/algo-{n}"}]))
    cloud, jobs, notifier, audit = Cloud(ev, store, plan), Jobs(training), Notifier(), MemoryAuditSink()
    jobs.minute = lambda: cloud.minute
    stopper = GuardStopper(
        guards=(guard,),
        jobs=jobs,
        alarms=cloud,
        arming=cloud,
        notifier=notifier,
        policies=Policies(policy),
        audit=audit,
        metrics=MemoryBusinessMetrics(),
        clock=lambda: EPOCH + timedelta(minutes=cloud.minute),
        naming=NAMING,
        account_id=ACCOUNT,
        transitions=cloud,
        gpu_data=cloud,
    )
    handled = 0
    for minute in range(minutes):
        cloud.minute = minute
        ev.run_due(minute)
        while handled < len(sent):  # a reset may send more in the same minute
            transition = sent[handled]
            handled += 1
            name = transition.alarm["AlarmName"]
            # a composite of the plan notifies (its children have no actions)
            if transition.new_state == "ALARM" and name in plan.names and plan.metric_request(name) is None:
                stopper.handle(AlarmNotification.model_validate(transition.message), f"msg-{handled}")
    return jobs, notifier, audit, cloud


def idle_then_silent(store: MetricStore, key: Any) -> None:
    store.publish(key, 0, 600.0)  # busy for an hour
    store.publish(key, 60, 0.0)  # idle for 3 minutes
    store.publish(key, 63, None)  # then no GPUUtilization at all (the agent or the driver failed)


def idle_on(store: MetricStore, key: Any) -> None:
    store.publish(key, 0, 600.0)
    store.publish(key, 60, 0.0)  # idle from minute 60, its data arriving


def low_then_silent(store: MetricStore, key: Any) -> None:
    store.publish(key, 0, 600.0)  # busy for 5 hours
    store.publish(key, 300, 10.0)  # below the minimum (50% x 8 GPUs) for 10 minutes
    store.publish(key, 310, None)  # then silent


def low_on(store: MetricStore, key: Any) -> None:
    store.publish(key, 0, 600.0)
    store.publish(key, 300, 10.0)  # below the minimum from minute 300 on


def test_idle_minutes_then_no_gpu_data_stop_nothing() -> None:
    # Given the idle guard (the stall judge off) on the heterogeneous job, its GPU hosts idle 3 minutes and then
    # silent: the GPU child goes to ALARM half an hour later on those datapoints, and the composite fires
    jobs, _, audit, cloud = run(IDLE, {}, idle_then_silent, minutes=240)
    # Then the job is never stopped: each firing is skipped for the missing GPU data, and the children reset
    assert jobs.stopped == []
    codes = [r.code for r in audit.records]
    assert codes and set(codes) == {"idle.skip.gpu-data-missing"}
    assert cloud.resets


def test_idle_gpus_whose_data_keeps_arriving_are_still_stopped() -> None:
    # Given the same job whose GPU hosts go idle at minute 60 and keep publishing it
    jobs, _, audit, _ = run(IDLE, {}, idle_on, minutes=240)
    # Then the composite fires once the window is idle and the job is stopped for idleness
    assert len(jobs.stopped) == 1 and 60 + 30 <= jobs.stopped[0] <= 60 + 35
    assert [r.code for r in audit.records] == ["idle.stop.idle"]


def test_low_minutes_then_no_gpu_data_neither_tell_nor_stop() -> None:
    # Given the efficiency guard (a stop after 3 notices: 240 minutes below the minimum), the GPU hosts below the
    # minimum for 10 minutes after 5 busy hours, then silent: both composites fire on those two datapoints
    jobs, notifier, audit, _ = run(EFFICIENCY, EFFICIENCY_ON, low_then_silent, minutes=720)
    # Then the owner is not told and the job is not stopped (each firing skipped for the missing GPU data)
    assert jobs.stopped == [] and notifier.sent == []
    codes = [r.code for r in audit.records]
    assert codes and set(codes) == {"efficiency.skip.gpu-data-missing"}


def test_gpus_below_the_minimum_with_their_data_are_told_and_stopped() -> None:
    # Given the same job whose GPU hosts stay below the minimum from minute 300, their data arriving
    jobs, notifier, audit, _ = run(EFFICIENCY, EFFICIENCY_ON, low_on, minutes=720)
    # Then its owner is told after the window and the job is stopped after the stop window, as before
    assert [r.code for r in audit.records] == ["efficiency.notify.below-minimum", "efficiency.stop.below-minimum"]
    assert len(notifier.sent) == 2 and len(jobs.stopped) == 1
