"""The idle guard: the policy section, and the pure planner of the CloudWatch alarms that watch a job.

The alarm watches ``/aws/sagemaker/TrainingJobs`` ``GPUUtilization`` (dimension ``Host`` =
``<job>/algo-<n>``), which SageMaker publishes per host as the sum over its GPUs (0-100 x GPU count).

* **Every host** is watched: the alarm's value is ``MAX`` over the hosts (metric math), so the job is in
  breach only when its busiest host is idle. One host: a plain single-metric alarm.
* **More than 10 hosts** (CloudWatch allows 10 metrics in one alarm): one child metric alarm per 10
  hosts, without actions, and a composite alarm ``ALARM(c1) AND ALARM(c2) ...`` that notifies the alarm
  topic: all hosts must be idle, exactly as with one alarm.
* **Threshold** = per-GPU percent x GPU count. Heterogeneous clusters assign host names randomly across
  instance groups, so the planner cannot know which ``algo-n`` has how many GPUs. It scales by the
  *smallest* GPU count of the GPU groups: a host with more GPUs then needs even less per-GPU activity to
  count as busy, so a busy host can never look idle (do no harm). CPU, Trainium and Inferentia hosts
  publish no ``GPUUtilization``; ``MAX`` ignores them.
* **Missing data never stops a job**: ``TreatMissingData=notBreaching`` on every metric alarm.
* No GPU at all, or an instance type we cannot size: no alarm, with the reason.

Nothing here talks to AWS: the planner returns the exact request documents, the service sends them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sagemaker_governance.domain.clone import is_valid_job_name
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.pricing import DEFAULT_PRICES

IDLE_RULE_ID: Final = "idle-guard"
NAMESPACE: Final = "/aws/sagemaker/TrainingJobs"
METRIC_NAME: Final = "GPUUtilization"
HOST_DIMENSION: Final = "Host"
HOSTS_PER_ALARM: Final = 10  # CloudWatch: at most 10 MetricStat queries in one metric alarm
MAX_ALARM_RULE_LENGTH: Final = 10_240  # PutCompositeAlarm AlarmRule limit
COMPARISON: Final = "LessThanThreshold"
TAG_JOB: Final = "smgov:training-job"
TAG_MANAGED_BY: Final = "smgov:managed-by"
CHILD_MARK: Final = ".hosts-"  # job names cannot contain ".", so child names never collide with a job's


class IdlePolicy(BaseModel):
    """The idle guard: stop a training job whose GPUs have been idle for a whole window.

    A job is idle when the GPU utilization of its busiest host stays below ``threshold_percent`` per GPU
    in ``datapoints_to_alarm`` of ``evaluation_periods`` periods of ``period_seconds``, after a start-up
    grace period of ``grace_minutes`` from the moment the job (re)entered ``Training``. ``mode``
    overrides the policy's mode for this guard only; ``prices`` (USD per instance-hour) extend or replace
    the built-in price table used for the estimated-savings metric.

    The defaults (1 % per GPU, 30 one-minute periods all idle, 20-minute grace) were chosen by replaying
    real GPU traces of healthy jobs through the alarm for a grid of thresholds and windows: see
    docs/calibration.md (``make calibrate``); a test keeps them equal to the document's.

    Example:
        idle:
          enabled: true
          mode: enforce
          threshold_percent: 1
          period_seconds: 60
          evaluation_periods: 30
          datapoints_to_alarm: 30
          grace_minutes: 20
          prices: {ml.p4d.24xlarge: 37.69}
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy mode for the idle guard.")
    threshold_percent: float = Field(default=1.0, gt=0, le=100, description="Per GPU, percent.")
    period_seconds: int = Field(default=60, ge=60, le=3600)
    evaluation_periods: int = Field(default=30, ge=1, le=1440)
    datapoints_to_alarm: int = Field(default=30, ge=1, le=1440)
    grace_minutes: int = Field(default=20, ge=0, le=1440)
    prices: dict[str, float] = Field(default_factory=dict, description="Instance type -> USD per hour.")

    @field_validator("period_seconds")
    @classmethod
    def _whole_minutes(cls, value: int) -> int:
        if value % 60:
            raise ValueError("period_seconds must be a multiple of 60 (GPUUtilization is published per minute)")
        return value

    @field_validator("prices")
    @classmethod
    def _positive_prices(cls, value: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, v in value.items() if not 0 <= v < math.inf)
        if bad:
            raise ValueError(f"prices must be finite numbers >= 0: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _window_fits(self) -> IdlePolicy:
        if self.datapoints_to_alarm > self.evaluation_periods:
            raise ValueError("datapoints_to_alarm cannot exceed evaluation_periods")
        if self.period_seconds * self.evaluation_periods > 86_400:
            raise ValueError("period_seconds x evaluation_periods cannot exceed one day (CloudWatch limit)")
        return self

    @property
    def window_minutes(self) -> float:
        return self.period_seconds * self.evaluation_periods / 60

    def mode_or(self, default: Mode) -> Mode:
        return self.mode or default

    def price_table(self) -> dict[str, float]:
        return {**DEFAULT_PRICES, **self.prices}


class AlarmNaming(BaseModel):
    """How this stack names, tags and wires its alarms."""

    model_config = ConfigDict(frozen=True)

    prefix: str = Field(min_length=1, max_length=160)
    managed_by: str = Field(min_length=1, max_length=256)
    alarm_topic_arn: str | None = None

    def alarm_name(self, job_name: str) -> str:
        """The alarm that notifies the topic (the only one for up to 10 hosts)."""
        return f"{self.prefix}{job_name}"

    def child_name(self, job_name: str, first: int, last: int) -> str:
        return f"{self.prefix}{job_name}{CHILD_MARK}{first}-{last}"

    def owns(self, alarm_name: str) -> bool:
        return alarm_name.startswith(self.prefix)

    def tags(self, job_name: str) -> list[dict[str, str]]:
        return [{"Key": TAG_JOB, "Value": job_name}, {"Key": TAG_MANAGED_BY, "Value": self.managed_by}]


class AlarmNames(BaseModel):
    """The names of every alarm of one job: ``notifying`` (topic action) and the metric alarms."""

    model_config = ConfigDict(frozen=True)

    notifying: str
    metric_alarms: tuple[str, ...]
    composite: bool

    @property
    def all(self) -> tuple[str, ...]:
        """Composite first: a child alarm cannot be deleted while a composite depends on it."""
        return (self.notifying, *self.metric_alarms) if self.composite else self.metric_alarms


def host_chunks(host_count: int) -> list[tuple[int, int]]:
    """``algo-1..algo-N`` in runs of at most ``HOSTS_PER_ALARM`` (first, last), 1-based inclusive."""
    return [
        (first, min(first + HOSTS_PER_ALARM - 1, host_count))
        for first in range(1, host_count + 1, HOSTS_PER_ALARM)
    ]


def alarm_names(job_name: str, host_count: int, naming: AlarmNaming) -> AlarmNames:
    if host_count <= HOSTS_PER_ALARM:
        name = naming.alarm_name(job_name)
        return AlarmNames(notifying=name, metric_alarms=(name,), composite=False)
    children = tuple(naming.child_name(job_name, first, last) for first, last in host_chunks(host_count))
    return AlarmNames(notifying=naming.alarm_name(job_name), metric_alarms=children, composite=True)


class AlarmPlan(BaseModel):
    """The exact requests that create (or update: both calls are upserts) the alarms of one job."""

    model_config = ConfigDict(frozen=True)

    job_name: str
    names: AlarmNames
    metric_alarms: tuple[dict[str, Any], ...]  # PutMetricAlarm requests
    composite_alarm: dict[str, Any] | None = None  # PutCompositeAlarm request
    threshold: float
    evidence: dict[str, Any]

    def request(self) -> dict[str, Any]:
        """What `smgov explain` shows under ``alarm``: the PutMetricAlarm request itself, or, above 10
        hosts, every PutMetricAlarm request and the PutCompositeAlarm request."""
        if self.composite_alarm is None:
            return dict(self.metric_alarms[0])
        return {"PutMetricAlarm": list(self.metric_alarms), "PutCompositeAlarm": dict(self.composite_alarm)}


class NoAlarm(BaseModel):
    model_config = ConfigDict(frozen=True)

    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)


def plan_idle_alarm(
    job: TrainingJob,
    idle: IdlePolicy,
    naming: AlarmNaming,
    resolved: Mapping[str, InstanceFacts] | None = None,
) -> AlarmPlan | NoAlarm:
    """The alarms that watch ``job``'s GPUs under ``idle``, or why there are none. ``resolved``: facts
    the service learnt elsewhere (EC2) for types our table does not know."""
    groups = job.instance_groups
    facts = {
        group.instance_type: (resolved or {}).get(group.instance_type) or instance_facts(group.instance_type)
        for group in groups
    }
    described = {t: f.note for t, f in facts.items()}
    if not groups or job.total_instance_count < 1:
        return NoAlarm(reason="the job names no instances; nothing to watch")
    unknown = [t for t, f in facts.items() if f.accelerator is Accelerator.UNKNOWN]
    if unknown:
        return NoAlarm(
            reason=f"cannot size the GPUs of {', '.join(unknown)}: no alarm rather than a wrong threshold",
            evidence={"instance_types": described},
        )
    gpu_counts = sorted({f.gpus for f in facts.values() if f.publishes_gpu_utilization})
    if not gpu_counts:
        return NoAlarm(
            reason="no instance of this job publishes GPUUtilization ("
            + "; ".join(f"{t}: {note}" for t, note in described.items())
            + ")",
            evidence={"instance_types": described},
        )
    gpus = gpu_counts[0]
    threshold = round(idle.threshold_percent * gpus, 6)
    hosts = job.total_instance_count
    names = alarm_names(job.name, hosts, naming)
    evidence: dict[str, Any] = {
        "threshold_percent_per_gpu": idle.threshold_percent,
        "gpus_per_host_for_scaling": gpus,
        "threshold": threshold,
        "hosts": hosts,
        "window": f"{idle.datapoints_to_alarm} of {idle.evaluation_periods} x {idle.period_seconds}s",
        "grace_minutes": idle.grace_minutes,
        "alarms": list(names.all),
    }
    if len(gpu_counts) > 1 or len(groups) > 1:
        evidence["scaling_note"] = (
            "heterogeneous cluster: hosts are assigned to groups at random, so the threshold is scaled by "
            "the smallest GPU count of the GPU groups; hosts without GPUs publish no data and are ignored"
        )
        if hosts > HOSTS_PER_ALARM and len(gpu_counts) < len(groups):
            evidence["coverage_note"] = (
                "a child alarm whose hosts all turn out to be non-GPU hosts has no data and stays OK, so the "
                "composite alarm may never fire for this job (missing data never stops a job)"
            )
    description = (
        f"sagemaker-governance idle guard for training job {job.name}: the busiest of {hosts} host(s) below "
        f"{threshold:g} GPUUtilization ({idle.threshold_percent:g}% per GPU x {gpus} GPU(s)) in "
        f"{idle.datapoints_to_alarm} of {idle.evaluation_periods} periods of {idle.period_seconds}s. "
        f"Managed by {naming.managed_by}; changes are overwritten."
    )
    actions = [naming.alarm_topic_arn] if naming.alarm_topic_arn else []
    if not names.composite:
        request = _metric_alarm(
            names.notifying,
            job_name=job.name,
            hosts=range(1, hosts + 1),
            threshold=threshold,
            idle=idle,
            naming=naming,
            description=description,
            actions=actions,
            single_metric=hosts == 1,
        )
        return AlarmPlan(
            job_name=job.name, names=names, metric_alarms=(request,), threshold=threshold, evidence=evidence
        )
    children = tuple(
        _metric_alarm(
            name,
            job_name=job.name,
            hosts=range(first, last + 1),
            threshold=threshold,
            idle=idle,
            naming=naming,
            description=description,
            actions=[],
        )
        for name, (first, last) in zip(names.metric_alarms, host_chunks(hosts), strict=True)
    )
    rule = " AND ".join(f'ALARM("{name}")' for name in names.metric_alarms)
    if len(rule) > MAX_ALARM_RULE_LENGTH:
        return NoAlarm(
            reason=f"{hosts} hosts need {len(names.metric_alarms)} child alarms: more than one composite "
            "alarm rule can hold; no alarm",
            evidence=evidence,
        )
    composite: dict[str, Any] = {
        "AlarmName": names.notifying,
        "AlarmDescription": description[:1024],
        "ActionsEnabled": True,
        "AlarmActions": actions,
        "AlarmRule": rule,
        "Tags": naming.tags(job.name),
    }
    return AlarmPlan(
        job_name=job.name,
        names=names,
        metric_alarms=children,
        composite_alarm=composite,
        threshold=threshold,
        evidence=evidence,
    )


def _metric_alarm(
    name: str,
    *,
    job_name: str,
    hosts: range,
    threshold: float,
    idle: IdlePolicy,
    naming: AlarmNaming,
    description: str,
    actions: list[str],
    single_metric: bool = False,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "AlarmName": name,
        "AlarmDescription": description[:1024],
        "ActionsEnabled": True,
        "AlarmActions": actions,
        "EvaluationPeriods": idle.evaluation_periods,
        "DatapointsToAlarm": idle.datapoints_to_alarm,
        "Threshold": threshold,
        "ComparisonOperator": COMPARISON,
        "TreatMissingData": "notBreaching",
        "Tags": naming.tags(job_name),
    }

    def dimensions(n: int) -> list[dict[str, str]]:
        return [{"Name": HOST_DIMENSION, "Value": f"{job_name}/algo-{n}"}]

    if single_metric:
        request.update(
            Namespace=NAMESPACE,
            MetricName=METRIC_NAME,
            Dimensions=dimensions(1),
            Statistic="Average",
            Period=idle.period_seconds,
        )
        return request
    queries: list[dict[str, Any]] = [
        {
            "Id": f"m{n}",
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": METRIC_NAME, "Dimensions": dimensions(n)},
                "Period": idle.period_seconds,
                "Stat": "Average",
            },
            "ReturnData": False,
        }
        for n in hosts
    ]
    queries.append(
        {
            "Id": "busiest",
            "Expression": "MAX([" + ", ".join(q["Id"] for q in queries) + "])",
            "Label": f"GPUUtilization of the busiest host (algo-{hosts[0]}..algo-{hosts[-1]})",
            "ReturnData": True,
        }
    )
    request["Metrics"] = queries
    return request


# ---- the stopper's view of time --------------------------------------------------------------------


def training_started_at(job: TrainingJob) -> datetime | None:
    """When the job last entered ``Training`` (a Spot restart starts a new grace period)."""
    starts = [t.start_time for t in job.transitions if t.status == "Training" and t.start_time is not None]
    if starts:
        return max(starts)
    return job.training_start_time


def grace_remaining(job: TrainingJob, idle: IdlePolicy, now: datetime) -> timedelta | None:
    """Time left in the start-up grace period; ``None`` when it is over. Unknown start: all of it."""
    started = training_started_at(job)
    grace = timedelta(minutes=idle.grace_minutes)
    if started is None:
        return grace
    left = started + grace - now
    return left if left > timedelta(0) else None


def alarm_tags_identify(tags: Mapping[str, str], naming: AlarmNaming) -> str | None:
    """The training job an alarm belongs to, if its tags say this stack manages it (and name a job: a tag
    edited by hand into something that cannot be a job name identifies nothing)."""
    if tags.get(TAG_MANAGED_BY) != naming.managed_by:
        return None
    job = tags.get(TAG_JOB)
    return job if isinstance(job, str) and is_valid_job_name(job) else None


# ---- the stopper's decision ------------------------------------------------------------------------


class Verdict(StrEnum):
    STOP = "stop"  # idle after the grace period: stop (enforce) or record (audit)
    ALREADY_ENDED = "already-ended"  # nothing to stop
    IN_GRACE = "in-grace"  # too early: reset the alarm so it can fire again
    NOT_TRAINING = "not-training"  # e.g. Uploading, Interrupted: low GPU use is expected
    STALE = "stale"  # the notification is old; reset the alarm so a current one follows if still idle
    DISABLED = "disabled"  # the policy no longer wants the idle guard for this job
    EXEMPTED = "exempted"


STALE_AFTER: Final = timedelta(minutes=15)


class IdleVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    decision: Decision

    @property
    def resets_alarm(self) -> bool:
        return self.verdict in (Verdict.IN_GRACE, Verdict.STALE)


def decide_idle_stop(
    job: TrainingJob,
    idle: IdlePolicy,
    mode: Mode,
    now: datetime,
    *,
    alarm_changed_at: datetime | None,
    exempted_by: str | None = None,
    evidence: Mapping[str, Any] | None = None,
) -> IdleVerdict:
    """What to do with a job whose idle alarm went to ALARM (the job as re-read just now)."""
    facts = dict(evidence or {})
    window = f"{idle.datapoints_to_alarm} of {idle.evaluation_periods} periods of {idle.period_seconds}s"

    def verdict(kind: Verdict, action: Action, reason: str, **extra: Any) -> IdleVerdict:
        return IdleVerdict(
            verdict=kind,
            decision=Decision(
                rule=IDLE_RULE_ID,
                action=action,
                mode=mode,
                reason=reason,
                remedy=extra.get("remedy"),
                evidence=facts,
                exempted_by=extra.get("exempted_by"),
            ),
        )

    if job.status != "InProgress":
        return verdict(Verdict.ALREADY_ENDED, Action.STOP, f"the job is already {job.status}; nothing to stop")
    if not idle.enabled:
        return verdict(Verdict.DISABLED, Action.NONE, "the idle guard is disabled for this job's policy")
    if job.secondary_status != "Training":
        return verdict(
            Verdict.NOT_TRAINING,
            Action.NONE,
            f"the job is {job.secondary_status}, not Training: low GPU use is expected; the alarm is re-armed "
            "when the job next enters Training",
        )
    if alarm_changed_at is not None and now - alarm_changed_at > STALE_AFTER:
        return verdict(
            Verdict.STALE,
            Action.NONE,
            f"the alarm notification is from {alarm_changed_at.isoformat()}, too old to act on; the alarm is "
            "reset and fires again if the job is still idle",
        )
    left = grace_remaining(job, idle, now)
    if left is not None:
        return verdict(
            Verdict.IN_GRACE,
            Action.NONE,
            f"within the {idle.grace_minutes}-minute start-up grace period ({left.total_seconds() / 60:.0f} min "
            "left); the alarm is reset and fires again if the job is still idle",
        )
    reason = (
        f"GPU utilization stayed below {idle.threshold_percent:g}% per GPU on every host in {window} "
        f"after the {idle.grace_minutes}-minute grace period"
    )
    remedy = (
        "If the job was stalled (hung collective, dead data loader, waiting on input), fix it and relaunch "
        "from its last checkpoint. If long low-GPU phases are expected, ask the platform team for a team "
        "override of the idle guard."
    )
    if exempted_by is not None:
        return verdict(Verdict.EXEMPTED, Action.STOP, reason, remedy=remedy, exempted_by=exempted_by)
    return verdict(Verdict.STOP, Action.STOP, reason, remedy=remedy)
