"""The efficiency record of a training job that ended: how well it used the GPUs it paid for (issue 20).

When a job ends, the service reads its hosts' ``GPUUtilization`` and ``GPUMemoryUtilization`` over its
life with one ``GetMetricData`` request (paged) and writes one audit record (rule ``efficiency-record``):

* per host: mean and median GPU and GPU-memory utilization **per GPU** (SageMaker publishes the sum over
  the host's GPUs, 0-100 x GPUs) and the share of its datapoints under ``IDLE_PERCENT`` per GPU;
* for the job: the mean over its GPU hosts, **idle GPU-hours** (the GPU-hours of datapoints under
  ``IDLE_PERCENT``), **cost** (``BillableTimeInSeconds`` x instances x the hourly price: "Multiply
  BillableTimeInSeconds by the number of instances (InstanceCount) ... to get the total compute time
  SageMaker bills you", DescribeTrainingJob API reference), **idle cost** (the idle host-time at the
  host's price, scaled by billable/training time on Spot), and **Spot savings** (the API reference's
  ``1 - BillableTimeInSeconds / TrainingTimeInSeconds`` of the On-Demand price).

**Never a made-up number.** A job whose instances publish no ``GPUUtilization`` (a CPU job), one with no
datapoint at all (metrics not yet arrived or never published), a failed read: the record says what is
missing (``missing``) and carries no utilization figure. A job on GPU groups of different GPU counts is
not read either (``efficiency.record.mixed-gpus``, its cost only): a host publishes the sum over its GPUs
and SageMaker does not say which host is in which group, so no host's series can be put per GPU. A minute with no datapoint is not counted as
idle; ``coverage`` says which share of the training time had data.

**The period** (``read_period``): CloudWatch keeps one-minute datapoints for 15 days, five-minute ones for
63 days, hourly ones for 455 days (GetMetricData API reference, ``StartTime`` and "Amazon CloudWatch
retains metric data as follows"): a job that started longer ago than that is read at the coarser period.
A long or large job is also read at a coarser period so that its series stay within
``DATAPOINT_BUDGET`` datapoints (a few ``GetMetricData`` pages of 100,800 at most). With a period above
one minute the shares and idle hours are per period (``period_seconds`` says so).

Governance's own savings are not in this record: a stop's estimate is in the stop decision's evidence
(``estimated_savings_usd``); the chargeback report adds both up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from statistics import fmean, median
from typing import Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.instances import instance_facts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.metric_retention import finest_period
from sagemaker_governance.domain.stall_judge import (
    GPU,
    GPU_MEMORY,
    MAX_HOSTS_RECORDED,
    MetricRead,
    MetricReadResult,
    host_names,
)

EFFICIENCY_RULE_ID: Final = "efficiency-record"
IDLE_PERCENT: Final = 10.0  # per GPU: a datapoint under this counts as idle
MAX_DATAPOINTS_PER_PAGE: Final = 100_800  # GetMetricData, per request (API reference)
DATAPOINT_BUDGET: Final = 5 * MAX_DATAPOINTS_PER_PAGE  # at most ~5 pages per job
SERIES_PER_HOST: Final = (GPU, GPU_MEMORY)


class EfficiencyCode(StrEnum):
    MEASURED = "efficiency.record.measured"  # every GPU host's series was read, with datapoints
    PARTIAL = "efficiency.record.partial"  # some hosts' series unread or empty: figures from the others
    NO_GPU = "efficiency.record.no-gpu"  # no instance of the job publishes GPUUtilization: nothing to read
    MIXED_GPUS = "efficiency.record.mixed-gpus"  # GPU groups of different GPU counts: no host readable per GPU
    NO_METRICS = "efficiency.record.no-metrics"  # read, but no datapoint at all (delayed or never published)
    UNREAD = "efficiency.record.unread"  # the read failed: no figure
    NOT_TRAINED = "efficiency.record.not-trained"  # the job never started training: nothing to read


class HostEfficiency(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str
    gpus: int
    datapoints: int
    gpu_mean_percent: float | None
    gpu_median_percent: float | None
    gpu_under_idle_share: float | None
    gpu_memory_mean_percent: float | None
    gpu_memory_median_percent: float | None
    idle_gpu_hours: float | None
    missing: str | None = None


class EfficiencyRecord(BaseModel):
    """What one ended job used of its GPUs and what that cost (``None``: not known, ``missing`` says why)."""

    model_config = ConfigDict(frozen=True)

    code: EfficiencyCode
    instance_type: str | None
    instances: int
    gpu_hosts: int
    spot: bool
    period_seconds: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    training_hours: float | None = None
    coverage: float | None = None
    gpu_utilization_mean_percent: float | None = None
    gpu_utilization_median_percent: float | None = None
    gpu_under_idle_share: float | None = None
    gpu_memory_utilization_mean_percent: float | None = None
    idle_gpu_hours: float | None = None
    cost_usd: float | None = None
    idle_cost_usd: float | None = None
    spot_savings_usd: float | None = None
    unpriced_instance_types: tuple[str, ...] = ()
    hosts: tuple[HostEfficiency, ...] = ()
    missing: tuple[str, ...] = ()

    def evidence(self) -> dict[str, Any]:
        """The audit record's evidence: the job's figures, then per host (None values left out)."""
        out = self.model_dump(mode="json", exclude={"code", "hosts"}, exclude_none=True)
        out["idle_percent"] = IDLE_PERCENT
        if 0 < len(self.hosts) <= MAX_HOSTS_RECORDED:
            out["hosts"] = [h.model_dump(mode="json", exclude_none=True) for h in self.hosts]
        elif self.hosts:  # above MAX_HOSTS_RECORDED (the record's size: stall_judge.py) those that idled most
            ranked = sorted(self.hosts, key=lambda h: (-(h.idle_gpu_hours or 0.0), h.host))
            out["hosts"] = [h.model_dump(mode="json", exclude_none=True) for h in ranked[:MAX_HOSTS_RECORDED]]
            rest = ranked[MAX_HOSTS_RECORDED:]
            means = [h.gpu_mean_percent for h in rest if h.gpu_mean_percent is not None]
            out["hosts_omitted"] = {
                "count": len(rest),
                "kept": f"the {MAX_HOSTS_RECORDED} with the most idle GPU-hours",
                "idle_gpu_hours": round(sum(h.idle_gpu_hours or 0.0 for h in rest), 3),
                "gpu_mean_percent_range": [min(means), max(means)] if means else None,
            }
        return out

    def reason(self) -> str:
        """The figures, or (whatever the code) why there are none: a record never fails to say itself."""
        mean, idle = self.gpu_utilization_mean_percent, self.idle_gpu_hours
        if mean is None or idle is None:
            return f"no efficiency figures: {'; '.join(self.missing) or 'none measured'}"
        text = f"GPUs {mean:.0f}% busy on average; {idle:.2f} idle GPU-hours"
        if self.idle_cost_usd is not None:
            text += f" (${self.idle_cost_usd:.2f} of ${self.cost_usd or 0:.2f})"
        return text + (f"; missing: {'; '.join(self.missing)}" if self.missing else "")


class EfficiencyPlan(BaseModel):
    """The one read an ended job's record needs: its hosts' series over its training time."""

    model_config = ConfigDict(frozen=True)

    queries: tuple[MetricRead, ...]
    hosts: tuple[str, ...]
    gpus_per_host: int
    start: datetime
    end: datetime
    period_seconds: int


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits) + 0.0


def training_window(job: TrainingJob, now: datetime) -> tuple[datetime, datetime] | None:
    """[TrainingStartTime, TrainingEndTime) of the job (its end: the last modification, else ``now``)."""
    start = job.training_start_time
    if start is None:
        return None
    end = job.training_end_time or job.last_modified_time or now
    return (start, end) if end > start else None


def read_period(start: datetime, end: datetime, now: datetime, series: int) -> int:
    """The finest period (seconds) CloudWatch still keeps for ``start`` and that keeps ``series`` series of
    ``[start, end)`` within ``DATAPOINT_BUDGET`` datapoints: a multiple of the retention's period, since a
    ``StartTime`` 15 to 63 days back needs a multiple of 300 and one older a multiple of 3600, "or no data
    points in that time range is returned" (botocore's CloudWatch model, ``MetricStat.Period``;
    ``domain/metric_retention.py``)."""
    base = finest_period(start, now)
    minutes = max(1.0, (end - start).total_seconds() / 60)
    needed_seconds = 60 * series * minutes / DATAPOINT_BUDGET
    return base * max(1, math.ceil(needed_seconds / base))


def _gpu_hosts(job: TrainingJob) -> tuple[int, set[int]]:
    gpu_groups = [g for g in job.instance_groups if instance_facts(g.instance_type).publishes_gpu_utilization]
    return sum(g.instance_count for g in gpu_groups), {instance_facts(g.instance_type).gpus for g in gpu_groups}


def _base(job: TrainingJob) -> dict[str, Any]:
    groups = job.instance_groups
    return {
        "instance_type": groups[0].instance_type if len({g.instance_type for g in groups}) == 1 else None,
        "instances": job.total_instance_count,
        "gpu_hosts": _gpu_hosts(job)[0],
        "spot": job.spot,
    }


def plan(job: TrainingJob, now: datetime, prices: Mapping[str, float]) -> EfficiencyPlan | EfficiencyRecord:
    """The read the job's record needs, or the record itself when there is nothing to read."""
    window = training_window(job, now)
    gpu_hosts, sizes = _gpu_hosts(job)
    if window is None:
        return EfficiencyRecord(
            code=EfficiencyCode.NOT_TRAINED, **_base(job), missing=("the job has no training start time",)
        )
    if gpu_hosts == 0:
        types = ", ".join(sorted({g.instance_type for g in job.instance_groups})) or "no instances"
        return _cost_only(
            job, EfficiencyCode.NO_GPU, prices, window, f"GPUUtilization: no instance publishes it ({types})"
        )
    if len(sizes) > 1:
        groups = ", ".join(
            f"{g.instance_type}: {instance_facts(g.instance_type).gpus}"
            for g in job.instance_groups
            if instance_facts(g.instance_type).publishes_gpu_utilization
        )
        return _cost_only(
            job,
            EfficiencyCode.MIXED_GPUS,
            prices,
            window,
            f"GPUUtilization per GPU: GPU instance groups of different GPU counts ({groups}); a host publishes "
            "the sum over its GPUs and SageMaker does not say which host is in which group (not read)",
        )
    # Hosts are assigned to instance groups by SageMaker: every host is read (a CPU host returns nothing).
    hosts = host_names(job.name, job.total_instance_count)
    queries = tuple(
        MetricRead(f"h{i}_{s}", metric, (("Host", host),), "Average")
        for i, host in enumerate(hosts)
        for s, metric in enumerate(SERIES_PER_HOST)
    )
    return EfficiencyPlan(
        queries=queries,
        hosts=hosts,
        gpus_per_host=next(iter(sizes)),
        start=window[0],
        end=window[1],
        period_seconds=read_period(window[0], window[1], now, len(queries)),
    )


def _cost_only(
    job: TrainingJob,
    code: EfficiencyCode,
    prices: Mapping[str, float],
    window: tuple[datetime, datetime],
    why: str,
) -> EfficiencyRecord:
    """The record of a job that is not read (``why``): its training time and cost, no utilization figure."""
    money = costs(job, prices, *window)
    return EfficiencyRecord(
        code=code,
        **_base(job),
        start=window[0],
        end=window[1],
        training_hours=_round((window[1] - window[0]).total_seconds() / 3600, 3),
        cost_usd=money.cost_usd,
        spot_savings_usd=money.spot_savings_usd,
        unpriced_instance_types=money.unpriced,
        missing=(why, *money.notes),
    )


class Costs(NamedTuple):
    cost_usd: float | None
    spot_savings_usd: float | None
    gpu_price: float | None  # USD per hour of one GPU host (None: unpriced)
    billed_share: float  # billable / training time on Spot, else 1
    unpriced: tuple[str, ...]
    notes: list[str]


def costs(job: TrainingJob, prices: Mapping[str, float], start: datetime, end: datetime) -> Costs:
    """What the job cost: ``BillableTimeInSeconds`` x instances x the hourly price, per instance group
    (without a billable time: its training start to end). A group without a price is named, never
    guessed; the cost is then ``None``. Spot savings: (training / billable time - 1) x the cost."""
    billable, training = job.billable_seconds, job.training_time_seconds
    notes: list[str] = []
    seconds = float(billable) if billable is not None else (end - start).total_seconds()
    if billable is None:
        notes.append("BillableTimeInSeconds: cost from the training start and end times")
    cost, unpriced, gpu_price = 0.0, [], None
    for group in job.instance_groups:
        price = prices.get(group.instance_type)
        if price is None:
            unpriced.append(group.instance_type)
            continue
        cost += seconds / 3600 * group.instance_count * price
        if instance_facts(group.instance_type).publishes_gpu_utilization:
            gpu_price = price
    if unpriced:
        notes.append(f"price: none for {', '.join(sorted(unpriced))} (idle.prices: the policy's or its team's)")
    share = 1.0
    savings = None
    if job.spot and billable is not None and training:
        share = min(1.0, billable / training)
        savings = None if unpriced or not billable else _round(max(0.0, cost * (training / billable - 1)))
    return Costs(
        cost_usd=None if unpriced else _round(cost),
        spot_savings_usd=savings,
        gpu_price=gpu_price,
        billed_share=share,
        unpriced=tuple(unpriced),
        notes=notes,
    )


def _host(
    host: str, gpus: int, per_gpu: Sequence[float] | None, mem: Sequence[float], period: int
) -> HostEfficiency:
    """One host's figures from its per-GPU series (``None``: not read)."""
    if per_gpu is None:
        return HostEfficiency(
            host=host, gpus=gpus, datapoints=0, gpu_mean_percent=None, gpu_median_percent=None,
            gpu_under_idle_share=None, gpu_memory_mean_percent=None, gpu_memory_median_percent=None,
            idle_gpu_hours=None, missing="GPUUtilization not read",
        )  # fmt: skip
    idle = sum(1 for v in per_gpu if v < IDLE_PERCENT)
    return HostEfficiency(
        host=host,
        gpus=gpus,
        datapoints=len(per_gpu),
        gpu_mean_percent=_round(fmean(per_gpu)) if per_gpu else None,
        gpu_median_percent=_round(median(per_gpu)) if per_gpu else None,
        gpu_under_idle_share=_round(idle / len(per_gpu), 3) if per_gpu else None,
        gpu_memory_mean_percent=_round(fmean(mem)) if mem else None,
        gpu_memory_median_percent=_round(median(mem)) if mem else None,
        idle_gpu_hours=_round(idle * period / 3600 * gpus, 3),
        missing=None if per_gpu else "no GPUUtilization datapoint",
    )


def record(
    job: TrainingJob,
    read: EfficiencyPlan,
    result: MetricReadResult,
    prices: Mapping[str, float],
) -> EfficiencyRecord:
    """The job's record from what was read (``result``), its billable and training times and ``prices``."""
    base = _base(job)
    common: dict[str, Any] = {
        **base,
        "period_seconds": read.period_seconds,
        "start": read.start,
        "end": read.end,
        "training_hours": _round((read.end - read.start).total_seconds() / 3600, 3),
    }
    money = costs(job, prices, read.start, read.end)
    common.update(
        cost_usd=money.cost_usd, spot_savings_usd=money.spot_savings_usd, unpriced_instance_types=money.unpriced
    )
    missing = [*result.errors, *money.notes]
    gpus = read.gpus_per_host
    series = {
        host: ([v / gpus for v in result.values.get(f"h{i}_0") or ()], result.values.get(f"h{i}_0") is not None)
        for i, host in enumerate(read.hosts)
    }
    memory_series = {
        host: [v / gpus for v in result.values.get(f"h{i}_1") or ()] for i, host in enumerate(read.hosts)
    }
    hosts = [
        _host(host, gpus, values if was_read else None, memory_series[host], read.period_seconds)
        for host, (values, was_read) in series.items()
    ]
    measured = [h for h in hosts if h.datapoints > 0]
    if not measured:
        code = EfficiencyCode.UNREAD if result.errors else EfficiencyCode.NO_METRICS
        if not result.errors:
            missing.append(
                "GPUUtilization: no datapoint of any host over the training time (delayed or not published)"
            )
        return EfficiencyRecord(code=code, **common, missing=tuple(missing))
    short = base["gpu_hosts"] - len(measured)
    if short > 0:
        missing.append(f"GPUUtilization: {short} of {base['gpu_hosts']} GPU hosts with no datapoint")
    partial = bool(result.errors) or short > 0
    every = [v for values, _ in series.values() for v in values]
    every_memory = [v for values in memory_series.values() for v in values]
    idle_hours = sum(h.idle_gpu_hours or 0.0 for h in measured)
    training_minutes = max(1e-9, (read.end - read.start).total_seconds() / 60)
    coverage = len(every) * read.period_seconds / 60 / (training_minutes * max(1, base["gpu_hosts"]))
    # idle host-hours at the host's price; on Spot scaled by what was billed of the training time
    idle_cost = None if money.gpu_price is None else idle_hours / gpus * money.gpu_price * money.billed_share
    return EfficiencyRecord(
        code=EfficiencyCode.PARTIAL if partial else EfficiencyCode.MEASURED,
        **common,
        coverage=_round(min(1.0, coverage), 3),
        gpu_utilization_mean_percent=_round(fmean(every)),
        gpu_utilization_median_percent=_round(median(every)),
        gpu_under_idle_share=_round(sum(1 for v in every if v < IDLE_PERCENT) / len(every), 3),
        gpu_memory_utilization_mean_percent=_round(fmean(every_memory)) if every_memory else None,
        idle_gpu_hours=_round(idle_hours, 3),
        idle_cost_usd=_round(idle_cost),
        hosts=tuple(hosts),
        missing=tuple(missing),
    )
