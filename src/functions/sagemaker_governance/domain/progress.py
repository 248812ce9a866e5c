"""The progress guard: stop a training job whose own training metric stopped arriving.

A deadlocked collective (an NCCL hang) keeps ``GPUUtilization`` at 100% while no step completes, so the
idle guard cannot see it. The job's *training metrics* can: SageMaker parses the job's log with the
regular expressions of ``AlgorithmSpecification.MetricDefinitions`` and publishes every match to
CloudWatch, namespace ``/aws/sagemaker/TrainingJobs``, metric name = the definition's ``Name``,
dimension ``TrainingJobName`` = the job's name. A job that prints its training loss every few steps and
then prints nothing for a whole window has stopped making progress.

Two alarms per job, on the same metric(s), statistic ``SampleCount``, one-minute periods:

* **the armer** (``<prefix><job>.progress-armer``): ``SampleCount >= 1`` in one period, missing data
  not breaching. It goes to ``ALARM`` the first minute the metric is published and notifies the alarm
  topic; the stopper then *arms* the stall alarm (``EnableAlarmActions``) and disables the armer's own
  actions. A regex that never matches never publishes, so the guard is never armed and never stops.
* **the stall alarm** (``<prefix><job>.progress``): ``SampleCount < 1`` in every period of the window,
  missing data *breaching* (no datapoint at all is exactly what it looks for). It is created with
  ``ActionsEnabled: false`` and only notifies once armed.

CloudWatch cannot look back before an alarm's evaluation range, so no single alarm can know that a
metric "was published at least once": the armer's notification carries that fact to the stopper.

Only jobs with a metric definition whose name the policy lists as a progress signal are watched (names
compare case-insensitively, with ``:``, ``/``, ``-``, ``.`` and spaces equal to ``_``). Several matching
definitions: the alarms watch all of them (metric math ``SUM``) and any datapoint of any of them counts
as progress.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.idle import NAMESPACE, STALE_AFTER, AlarmNaming, training_started_at
from sagemaker_governance.domain.job import TrainingJob

PROGRESS_RULE_ID: Final = "progress-guard"
JOB_DIMENSION: Final = "TrainingJobName"
STALL_MARK: Final = ".progress"  # job names cannot contain ".": never a job's or a child's alarm name
ARMER_MARK: Final = ".progress-armer"
MAX_METRICS: Final = 10  # CloudWatch: at most 10 MetricStat queries in one alarm
PERIOD_SECONDS: Final = 60
DEFAULT_WINDOW_MINUTES: Final = 120
DEFAULT_METRIC_NAMES: Final = (
    "loss",
    "train_loss",
    "training_loss",
    "train_objective_loss",
    "train_step_loss",
)
_SEPARATORS = re.compile(r"[\s:/\-.]+")


def normalize_metric_name(name: str) -> str:
    """``Train/Loss`` -> ``train_loss``: how metric names are compared."""
    return _SEPARATORS.sub("_", name.strip()).lower()


class ProgressPolicy(BaseModel):
    """The progress guard: stop a job whose training metric stopped arriving for a whole window.

    A job is watched only when one of its ``MetricDefinitions`` is named like one of ``metric_names``
    (case-insensitive; ``:``, ``/``, ``-``, ``.`` and spaces count as ``_``), and only after SageMaker has
    published that metric once. ``window_minutes`` without a single datapoint of any watched metric
    while the job is ``Training`` means it is stalled. Choose a window longer than the longest gap
    between two log lines of the metric (logging interval x step time, evaluation passes, checkpoint
    saves). ``mode`` overrides the policy's mode for this guard only.

    Example:
        progress:
          enabled: true
          mode: enforce
          metric_names: [train_loss, loss]
          window_minutes: 120
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy mode for the progress guard.")
    metric_names: tuple[str, ...] = Field(
        default=DEFAULT_METRIC_NAMES, description="MetricDefinitions names that count as a progress signal."
    )
    window_minutes: int = Field(
        default=DEFAULT_WINDOW_MINUTES, ge=10, le=1440, description="No datapoint for this long = stalled."
    )

    @field_validator("metric_names")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(n for n in (v.strip() for v in value) if n)
        if len(cleaned) != len(value):
            raise ValueError("metric_names cannot contain empty names")
        return cleaned

    def mode_or(self, default: Mode) -> Mode:
        return self.mode or default

    def progress_metrics(self, job: TrainingJob) -> tuple[str, ...]:
        """The job's metric names (as defined, in order) that count as its progress signal."""
        wanted = {normalize_metric_name(n) for n in self.metric_names}
        seen: list[str] = []
        for definition in job.algorithm.metric_definitions:
            if normalize_metric_name(definition.name) in wanted and definition.name not in seen:
                seen.append(definition.name)
        return tuple(seen)


# ---- names -----------------------------------------------------------------------------------------


class ProgressAlarmNames(BaseModel):
    model_config = ConfigDict(frozen=True)

    stall: str
    armer: str

    @property
    def all(self) -> tuple[str, ...]:
        return (self.stall, self.armer)


def progress_alarm_names(job_name: str, naming: AlarmNaming) -> ProgressAlarmNames:
    """Same prefix as the idle alarm (the IAM scope and the alarm topic's policy cover both)."""
    base = naming.alarm_name(job_name)
    return ProgressAlarmNames(stall=f"{base}{STALL_MARK}", armer=f"{base}{ARMER_MARK}")


class ProgressRole(StrEnum):
    STALL = "stall"
    ARMER = "armer"


def progress_role(alarm_name: str, job_name: str, naming: AlarmNaming) -> ProgressRole | None:
    names = progress_alarm_names(job_name, naming)
    if alarm_name == names.stall:
        return ProgressRole.STALL
    if alarm_name == names.armer:
        return ProgressRole.ARMER
    return None


# ---- planning --------------------------------------------------------------------------------------


class ProgressAlarmPlan(BaseModel):
    """The exact PutMetricAlarm requests of one job's progress alarms (both are upserts)."""

    model_config = ConfigDict(frozen=True)

    job_name: str
    names: ProgressAlarmNames
    stall_alarm: dict[str, Any]
    armer_alarm: dict[str, Any]
    metrics: tuple[str, ...]
    evidence: dict[str, Any]

    @property
    def requests(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Stall alarm first: the armer must never notify about a stall alarm that does not exist yet."""
        return (self.stall_alarm, self.armer_alarm)

    def request(self) -> dict[str, Any]:
        """What `smgov explain` shows under ``alarm``."""
        return {"PutMetricAlarm": [dict(r) for r in self.requests]}


class NoProgressAlarm(BaseModel):
    model_config = ConfigDict(frozen=True)

    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)


def plan_progress_alarms(
    job: TrainingJob, progress: ProgressPolicy, naming: AlarmNaming
) -> ProgressAlarmPlan | NoProgressAlarm:
    """The progress alarms of ``job`` under ``progress``, or why there are none."""
    defined = [d.name for d in job.algorithm.metric_definitions]
    if not defined:
        return NoProgressAlarm(
            reason="the job defines no training metrics (AlgorithmSpecification.MetricDefinitions): no "
            "progress signal to watch"
        )
    metrics = progress.progress_metrics(job)
    if not metrics:
        return NoProgressAlarm(
            reason=f"none of the job's metrics ({', '.join(defined)}) is a progress signal of the policy "
            f"({', '.join(progress.metric_names)})",
            evidence={"defined_metrics": defined, "progress_metric_names": list(progress.metric_names)},
        )
    watched = metrics[:MAX_METRICS]
    names = progress_alarm_names(job.name, naming)
    window = progress.window_minutes
    evidence: dict[str, Any] = {
        "metrics": list(watched),
        "namespace": NAMESPACE,
        "dimension": f"{JOB_DIMENSION}={job.name}",
        "window_minutes": window,
        "alarms": list(names.all),
    }
    if len(metrics) > MAX_METRICS:
        evidence["not_watched"] = list(metrics[MAX_METRICS:])
    actions = [naming.alarm_topic_arn] if naming.alarm_topic_arn else []
    shown = ", ".join(watched)
    stall = _alarm(
        names.stall,
        job_name=job.name,
        metrics=watched,
        naming=naming,
        actions=actions,
        actions_enabled=False,
        periods=window,
        comparison="LessThanThreshold",
        missing="breaching",
        description=(
            f"sagemaker-governance progress guard for training job {job.name}: no datapoint of {shown} for "
            f"{window} minutes while training means the job is stalled. Its actions are enabled only after "
            f"the metric was published once (alarm {names.armer}). Managed by {naming.managed_by}; changes "
            "are overwritten."
        ),
    )
    armer = _alarm(
        names.armer,
        job_name=job.name,
        metrics=watched,
        naming=naming,
        actions=actions,
        actions_enabled=True,
        periods=1,
        comparison="GreaterThanOrEqualToThreshold",
        missing="notBreaching",
        description=(
            f"sagemaker-governance progress guard for training job {job.name}: fires when {shown} is "
            f"published, so that the stall alarm {names.stall} is armed only once the job's metric "
            f"definition is known to match. Managed by {naming.managed_by}; changes are overwritten."
        ),
    )
    return ProgressAlarmPlan(
        job_name=job.name, names=names, stall_alarm=stall, armer_alarm=armer, metrics=watched, evidence=evidence
    )


def _alarm(
    name: str,
    *,
    job_name: str,
    metrics: tuple[str, ...],
    naming: AlarmNaming,
    actions: list[str],
    actions_enabled: bool,
    periods: int,
    comparison: str,
    missing: str,
    description: str,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "AlarmName": name,
        "AlarmDescription": description[:1024],
        "ActionsEnabled": actions_enabled,
        "AlarmActions": actions,
        "EvaluationPeriods": periods,
        "DatapointsToAlarm": periods,
        "Threshold": 1.0,
        "ComparisonOperator": comparison,
        "TreatMissingData": missing,
        "Tags": naming.tags(job_name),
    }
    dimensions = [{"Name": JOB_DIMENSION, "Value": job_name}]
    if len(metrics) == 1:
        request.update(
            Namespace=NAMESPACE,
            MetricName=metrics[0],
            Dimensions=dimensions,
            Statistic="SampleCount",
            Period=PERIOD_SECONDS,
        )
        return request
    queries: list[dict[str, Any]] = [
        {
            "Id": f"m{index}",
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dimensions},
                "Period": PERIOD_SECONDS,
                "Stat": "SampleCount",
            },
            "ReturnData": False,
        }
        for index, metric in enumerate(metrics, start=1)
    ]
    queries.append(
        {
            "Id": "datapoints",
            "Expression": "SUM([" + ", ".join(q["Id"] for q in queries) + "])",
            "Label": "datapoints of the progress metrics",
            "ReturnData": True,
        }
    )
    request["Metrics"] = queries
    return request


# ---- the stopper's decisions -----------------------------------------------------------------------


class ProgressVerdict(StrEnum):
    ARM = "arm"  # the metric was published while training: enable the stall alarm's actions
    STOP = "stop"  # armed, and no datapoint for the whole window while training
    ALREADY_ENDED = "already-ended"
    NOT_TRAINING = "not-training"
    TOO_EARLY = "too-early"  # the job (re)entered Training less than a window ago: reset the alarm
    STALE = "stale"
    DISABLED = "disabled"
    EXEMPTED = "exempted"


class ProgressDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: ProgressVerdict
    decision: Decision

    @property
    def resets_alarm(self) -> bool:
        return self.verdict in (ProgressVerdict.TOO_EARLY, ProgressVerdict.STALE)


def _verdict(kind: ProgressVerdict, action: Action, mode: Mode, reason: str, **extra: Any) -> ProgressDecision:
    return ProgressDecision(
        verdict=kind,
        decision=Decision(
            rule=PROGRESS_RULE_ID,
            action=action,
            mode=mode,
            reason=reason,
            remedy=extra.get("remedy"),
            evidence=extra.get("evidence") or {},
            exempted_by=extra.get("exempted_by"),
        ),
    )


def decide_progress_arming(
    job: TrainingJob, progress: ProgressPolicy, mode: Mode, *, evidence: dict[str, Any] | None = None
) -> ProgressDecision:
    """The armer fired (the metric was published): arm the stall alarm if the job is training."""
    facts = dict(evidence or {})
    if job.status != "InProgress":
        return _verdict(
            ProgressVerdict.ALREADY_ENDED, Action.NONE, mode, f"the job is already {job.status}; nothing to arm",
            evidence=facts,
        )  # fmt: skip
    if not progress.enabled:
        return _verdict(
            ProgressVerdict.DISABLED, Action.NONE, mode, "the progress guard is disabled for this job's policy",
            evidence=facts,
        )  # fmt: skip
    if job.secondary_status != "Training":
        return _verdict(
            ProgressVerdict.NOT_TRAINING,
            Action.NONE,
            mode,
            f"the job is {job.secondary_status}, not Training: the stall alarm is armed when the metric is "
            "published while training",
            evidence=facts,
        )
    return _verdict(
        ProgressVerdict.ARM,
        Action.ARM_ALARM,
        mode,
        f"the job published its progress metric while training: the stall alarm is armed (no datapoint for "
        f"{progress.window_minutes} minutes stops the job)",
        evidence=facts,
    )


def decide_progress_stop(
    job: TrainingJob,
    progress: ProgressPolicy,
    mode: Mode,
    now: datetime,
    *,
    alarm_changed_at: datetime | None,
    exempted_by: str | None = None,
    evidence: dict[str, Any] | None = None,
) -> ProgressDecision:
    """The armed stall alarm fired: what to do with the job (as re-read just now)."""
    window = timedelta(minutes=progress.window_minutes)
    facts = dict(evidence or {})
    facts["window_minutes"] = progress.window_minutes
    if alarm_changed_at is not None:
        facts["last_datapoint_before"] = (alarm_changed_at - window).isoformat()
    if job.status != "InProgress":
        return _verdict(
            ProgressVerdict.ALREADY_ENDED, Action.STOP, mode, f"the job is already {job.status}; nothing to stop",
            evidence=facts,
        )  # fmt: skip
    if not progress.enabled:
        return _verdict(
            ProgressVerdict.DISABLED, Action.NONE, mode, "the progress guard is disabled for this job's policy",
            evidence=facts,
        )  # fmt: skip
    if job.secondary_status != "Training":
        return _verdict(
            ProgressVerdict.NOT_TRAINING,
            Action.NONE,
            mode,
            f"the job is {job.secondary_status}, not Training: no training metric is expected; the guard is "
            "re-armed when the job next enters Training and publishes its metric",
            evidence=facts,
        )
    if alarm_changed_at is not None and now - alarm_changed_at > STALE_AFTER:
        return _verdict(
            ProgressVerdict.STALE,
            Action.NONE,
            mode,
            f"the alarm notification is from {alarm_changed_at.isoformat()}, too old to act on; the alarm is "
            "reset and fires again if the job is still silent",
            evidence=facts,
        )
    started = training_started_at(job)
    if started is None or now - started < window:
        since = "an unknown time" if started is None else started.isoformat()
        return _verdict(
            ProgressVerdict.TOO_EARLY,
            Action.NONE,
            mode,
            f"the job (re)entered Training at {since}, less than the {progress.window_minutes}-minute window "
            "ago: a stall cannot be established yet; the alarm is reset",
            evidence=facts,
        )
    metrics = facts.get("metrics") or []
    named = ", ".join(metrics) if metrics else "its progress metric"
    reason = (
        f"the job published no datapoint of {named} for {progress.window_minutes} minutes while training "
        "(after publishing it before): no training step is completing, although its GPUs may look busy"
    )
    remedy = (
        "Look for a hung collective (NCCL timeout, a rank that died), a deadlocked data loader or a job "
        "stuck in a barrier; fix it and relaunch from the last checkpoint. If the job legitimately logs its "
        "metric less often than the window, ask the platform team for a longer progress.window_minutes."
    )
    if exempted_by is not None:
        return _verdict(
            ProgressVerdict.EXEMPTED, Action.STOP, mode, reason, remedy=remedy, exempted_by=exempted_by,
            evidence=facts,
        )  # fmt: skip
    return _verdict(ProgressVerdict.STOP, Action.STOP, mode, reason, remedy=remedy, evidence=facts)
