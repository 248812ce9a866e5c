"""The stopper's check of a heterogeneous composite's GPU data (service/guard_stopper.py, domain/gpu_coverage.py).

Above 10 hosts, on a cluster whose CPU hosts publish no GPUUtilization, the idle and efficiency guards' children
treat missing data as ``missing``; CloudWatch sends such a child to ALARM on a few breaching datapoints followed
by silence (its missing-data table, row ``X - - - -``). Before a stop or a notice on such a composite the stopper
reads the hosts' GPUUtilization over the window the alarm judged; asserted by decision code."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.guards.base import TAG_JOB, TAG_MANAGED_BY, AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY, EfficiencyGuardCode
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.domain.stall_judge import MetricRead, MetricReadResult
from sagemaker_governance.events.alarms import AlarmNotification
from sagemaker_governance.service.guard_stopper import GuardStopper
from sagemaker_governance.settings import Settings
from tests.builders import job
from tests.service.conftest import NOW

ACCOUNT = "123456789012"
FIRED_AT = NOW - timedelta(minutes=1)
# 10 CPU hosts and 5 GPU hosts: SageMaker assigns algo-n to the groups at random; here algo-11..15 have GPUs
HETEROGENEOUS = {
    "ResourceConfig": {
        "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 10},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 5},
        ]
    }
}
HOMOGENEOUS = {"ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16}}
GPU_HOSTS = tuple(f"job-1/algo-{n}" for n in range(11, 16))
EFFICIENCY_ON = {"enabled": True, "min_gpu_percent": 50, "window_minutes": 60, "stop_after_notices": 3}


class GpuSeries:
    """``MetricReadPort``: each host's one-minute GPUUtilization (minute -> value); records every read."""

    def __init__(self, minutes: dict[str, dict[datetime, float]] | None = None, *, fails: bool = False) -> None:
        self.minutes = minutes or {}
        self.fails = fails
        self.reads: list[tuple[datetime, datetime, int]] = []

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        self.reads.append((start, end, len(queries)))
        if self.fails:
            return MetricReadResult({q.id: None for q in queries}, ("GetMetricData failed (Throttling)",))
        values: dict[str, tuple[float, ...] | None] = {}
        times: dict[str, tuple[datetime, ...]] = {}
        for q in queries:
            series = sorted(
                (t, v) for t, v in self.minutes.get(dict(q.dimensions)["Host"], {}).items() if start <= t < end
            )
            values[q.id] = tuple(v for _, v in series)
            times[q.id] = tuple(t for t, _ in series)
        return MetricReadResult(values, (), times)


def published(value: float, since: timedelta, until: timedelta = timedelta(0)) -> dict[str, dict[datetime, float]]:
    """Every GPU host at ``value`` each minute from ``since`` to ``until`` before the alarm fired."""
    first, last = FIRED_AT - since, FIRED_AT - until
    minutes = int((last - first).total_seconds() // 60)
    return {host: {first + timedelta(minutes=m): value for m in range(minutes)} for host in GPU_HOSTS}


def training(resources: dict[str, Any], hours: float = 8.0) -> TrainingJob:
    started = (NOW - timedelta(hours=hours)).isoformat()
    return job(
        "job-1",
        SecondaryStatus="Training",
        TrainingStartTime=started,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": started}],
        **resources,
    )


def policy(judge: bool = False) -> Any:
    return build_policy(
        Settings().base_policy_document(),
        {"mode": "enforce", "judge": {"enabled": judge}, "efficiency": EFFICIENCY_ON},
    )


def put(plan: AlarmPlan, composite: str, alarms: Any) -> tuple[str, ...]:
    """The plan's alarms as CloudWatch holds them, ``composite`` in ALARM and tagged: its children's names."""
    alarms.put(plan)
    alarms.alarms[composite] = "ALARM"
    alarms.tagged[composite] = {TAG_JOB: "job-1", TAG_MANAGED_BY: "gov"}
    return tuple(n for n in plan.metric_alarm_names if n.startswith(f"{composite}.hosts-"))


def fired(composite: str, child: str) -> AlarmNotification:
    return AlarmNotification.model_validate(
        {
            "AlarmName": composite,
            "AWSAccountId": ACCOUNT,
            "NewStateValue": "ALARM",
            "StateChangeTime": FIRED_AT.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
            "AlarmRule": f'ALARM("{child}")',
            "TriggeringChildren": [{"Arn": f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{child}"}],
        }
    )


@pytest.fixture
def stopper(
    jobs: Any, alarms: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, naming: AlarmNaming
) -> Any:
    def build(gpu_data: GpuSeries | None) -> GuardStopper:
        return GuardStopper(
            guards=GUARDS,
            jobs=jobs,
            alarms=alarms,
            arming=alarms,
            notifier=notifier,
            policies=policies,
            audit=audit,
            metrics=MemoryBusinessMetrics(),
            clock=lambda: NOW,
            naming=naming,
            account_id=ACCOUNT,
            transitions=alarms,
            gpu_data=gpu_data,
        )

    return build


def idle_composite(
    resources: dict[str, Any], jobs: Any, alarms: Any, policies: Any, naming: AlarmNaming
) -> tuple[str, ...]:
    """job-1 on ``resources`` in Training, the judge off, its idle composite in ALARM: its children."""
    policies.policy = policy()
    jobs.jobs["job-1"] = training(resources)
    plan = IDLE.plan(jobs.jobs["job-1"], IDLE.config(policies.policy.for_job(jobs.jobs["job-1"])), naming)
    assert isinstance(plan, AlarmPlan)
    return put(plan, naming.alarm_name("job-1"), alarms)


def test_three_idle_minutes_then_no_gpu_data_stop_nothing_with_the_judge_off(
    stopper: Any, jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any, naming: AlarmNaming
) -> None:
    # Given a 15-host heterogeneous job, the judge off, whose GPU hosts were idle for 3 minutes and then published
    # no GPUUtilization at all (an agent or driver failure): its GPU child went to ALARM on those 3 datapoints
    children = idle_composite(HETEROGENEOUS, jobs, alarms, policies, naming)
    gpu = GpuSeries(published(0.0, since=timedelta(minutes=32), until=timedelta(minutes=29)))
    # When the composite's notification comes
    result = stopper(gpu).handle(fired(naming.alarm_name("job-1"), children[1]), "msg-1")
    # Then the job is not stopped: one read of the 15 hosts' GPUUtilization over the alarm's window, as of its
    # state change, finds one of its 30 minutes with data; the skip is recorded and the children reset, to fire again on data
    assert (result.code, result.outcome) == ("idle.skip.gpu-data-missing", "skipped")
    assert "stop job-1" not in calls.log
    assert [(end, n) for _, end, n in gpu.reads] == [(FIRED_AT, 15)]
    assert [e for e in calls.log if e.startswith("reset")] == [f"reset {name}" for name in children]
    (record,) = audit.records
    assert record.evidence["skipped_code"] == IdleCode.STOP
    coverage = record.evidence["gpu_coverage"]
    assert (coverage["most_minutes_on_a_host"], coverage["minutes_needed"]) == (1, 15)


def test_gpu_hosts_idle_to_the_end_of_the_window_are_stopped_as_before(
    stopper: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, naming: AlarmNaming
) -> None:
    # Given the same job whose GPU hosts published idle data every minute of the window, up to its end
    children = idle_composite(HETEROGENEOUS, jobs, alarms, policies, naming)
    gpu = GpuSeries(published(0.0, since=timedelta(minutes=60), until=timedelta(minutes=1)))
    # When the composite fires, then the data covers the window and the job is stopped for idleness
    result = stopper(gpu).handle(fired(naming.alarm_name("job-1"), children[1]), "msg-1")
    assert result.code == IdleCode.STOP and "stop job-1" in calls.log and len(gpu.reads) == 1


def test_one_gpu_host_whose_data_stopped_before_the_windows_end_stops_nothing(
    stopper: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, naming: AlarmNaming
) -> None:
    # Given four GPU hosts idle to the end of the window and the fifth silent for its last 20 minutes
    children = idle_composite(HETEROGENEOUS, jobs, alarms, policies, naming)
    minutes = published(0.0, since=timedelta(minutes=60), until=timedelta(minutes=1))
    minutes[GPU_HOSTS[-1]] = {
        t: v for t, v in minutes[GPU_HOSTS[-1]].items() if t < FIRED_AT - timedelta(minutes=20)
    }
    # When the composite fires, then whether that host is idle is unknown: nothing is stopped
    result = stopper(GpuSeries(minutes)).handle(fired(naming.alarm_name("job-1"), children[1]), "msg-1")
    assert result.code == "idle.skip.gpu-data-missing" and "stop job-1" not in calls.log


@pytest.mark.parametrize("gpu", [GpuSeries(fails=True), None], ids=["read-fails", "no-reader"])
def test_gpu_data_that_cannot_be_read_stops_nothing(
    stopper: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, naming: AlarmNaming, gpu: GpuSeries | None
) -> None:
    # Given the heterogeneous job's composite firing, and GetMetricData throttled (or no reader at all)
    children = idle_composite(HETEROGENEOUS, jobs, alarms, policies, naming)
    # When it is judged, then nothing is stopped on a firing whose data could not be checked
    result = stopper(gpu).handle(fired(naming.alarm_name("job-1"), children[0]), "msg-1")
    assert result.code == "idle.skip.gpu-data-missing" and "stop job-1" not in calls.log


def test_a_homogeneous_composite_reads_no_gpu_data(
    stopper: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, naming: AlarmNaming
) -> None:
    # Given a 16-host job of one GPU type: its children treat missing data as not breaching
    children = idle_composite(HOMOGENEOUS, jobs, alarms, policies, naming)
    gpu = GpuSeries()
    # When its composite fires, then it is stopped as before, and nothing more is read
    result = stopper(gpu).handle(fired(naming.alarm_name("job-1"), children[0]), "msg-1")
    assert result.code == IdleCode.STOP and "stop job-1" in calls.log and gpu.reads == []


@pytest.mark.parametrize(
    "alarm",
    [(".efficiency-stop", 240, EfficiencyGuardCode.STOP), (".efficiency", 60, EfficiencyGuardCode.NOTIFY)],
    ids=["stop", "notice"],
)
def test_ten_low_minutes_then_no_gpu_data_neither_stop_nor_tell(
    stopper: Any,
    jobs: Any,
    alarms: Any,
    policies: Any,
    audit: MemoryAuditSink,
    calls: Any,
    naming: AlarmNaming,
    alarm: tuple[str, int, str],
) -> None:
    mark, window, skipped = alarm
    # Given the heterogeneous job under the efficiency guard (stop after 3 notices: a 240-minute stop window),
    # whose GPU hosts were below the minimum for 10 minutes and then published nothing: the child goes to ALARM
    # once those two 5-minute datapoints are as old as the window
    policies.policy = policy()
    jobs.jobs["job-1"] = training(HETEROGENEOUS)
    plan = EFFICIENCY.plan(
        jobs.jobs["job-1"], EFFICIENCY.config(policies.policy.for_job(jobs.jobs["job-1"])), naming
    )
    assert isinstance(plan, AlarmPlan)
    composite = naming.alarm_name("job-1", mark)
    children = put(plan, composite, alarms)
    gpu = GpuSeries(published(10.0, since=timedelta(minutes=window), until=timedelta(minutes=window - 10)))
    # When the composite's notification comes
    result = stopper(gpu).handle(fired(composite, children[1]), "msg-1")
    # Then the job is neither stopped nor its owner told: 10 minutes of data do not cover the window
    assert result.code == "efficiency.skip.gpu-data-missing" and "stop job-1" not in calls.log
    assert not any(e.startswith("notify") for e in calls.log)
    ((start, end, _),) = gpu.reads
    assert end - start == timedelta(minutes=window)
    assert audit.records[0].evidence["skipped_code"] == skipped
