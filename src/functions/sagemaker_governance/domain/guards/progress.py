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
from collections.abc import Collection, Sequence
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, field_validator

from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.guards.base import (
    MAX_METRICS_PER_ALARM,
    NAMESPACE,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Arming,
    Combined,
    Guard,
    GuardConfig,
    GuardVerdict,
    Judgement,
    MetricQuery,
    NoAlarm,
    Notice,
    PlannedAlarm,
    Stale,
    Verdict,
    judged_trigger,
    metric_alarm_request,
    preconditions,
    trained_less_than,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.stall_judge import TAG_PROGRESS_MINUTES, StallKind, tolerance_hint

PROGRESS_RULE_ID: Final = "progress-guard"
JOB_DIMENSION: Final = "TrainingJobName"
STALL_MARK: Final = ".progress"  # job names cannot contain ".": never a job's or a child's alarm name
ARMER_MARK: Final = ".progress-armer"
MAX_METRICS: Final = MAX_METRICS_PER_ALARM
PERIOD_SECONDS: Final = 60
DEFAULT_WINDOW_MINUTES: Final = 120
DEFAULT_METRIC_NAMES: Final = (
    "loss",
    "train_loss",
    "training_loss",
    "train_objective_loss",
    "train_step_loss",
)
ARMED_REASON: Final = "sagemaker-governance: armed after the job published its progress metric"
RESET_REASON: Final = (
    "sagemaker-governance: reset by the stopper (too early after (re)entering Training, or stale)"
)
MOVED_REASON: Final = (
    "sagemaker-governance: the progress metrics the policy watches changed; the progress guard waits for them"
)
_SEPARATORS = re.compile(r"[\s:/\-.]+")


def normalize_metric_name(name: str) -> str:
    """``Train/Loss`` -> ``train_loss``: how metric names are compared."""
    return _SEPARATORS.sub("_", name.strip()).lower()


class ProgressRole(StrEnum):
    STALL = "stall"  # no datapoint for the window: stop (its actions are enabled only once armed)
    ARMER = "armer"  # the metric was published: arm the stall alarm


class ProgressCode(StrEnum):
    """The progress guard's decision codes (and the lifecycle's: ``progress.alarm.*``)."""

    ARM = "progress.arm.published"
    ARM_ALREADY_ENDED = "progress.arm.already-ended"
    ARM_DISABLED = "progress.arm.disabled"
    ARM_NOT_TRAINING = "progress.arm.not-training"
    STOP = "progress.stop.stalled"
    ALREADY_ENDED = "progress.skip.already-ended"
    DISABLED = "progress.skip.disabled"
    NOT_TRAINING = "progress.skip.not-training"
    STALE = "progress.skip.stale"
    TOO_EARLY = "progress.skip.too-early"
    TRIGGER = "progress.skip.trigger"  # the stall alarm fired on its trigger and no judge may decide: wait
    STRICTER_ALARM = "progress.skip.stricter-alarm"  # fired on a shorter silence than planned now: re-plan
    METRICS_MOVED = "progress.skip.metrics-moved"  # fired on other metrics than planned now: put as on entry
    EXEMPTED = "progress.skip.exempted"
    NO_METRIC_DEFINITIONS = "progress.alarm.no-metric-definitions"
    NO_PROGRESS_METRIC = "progress.alarm.no-progress-metric"


_ARMER: Final = {
    Verdict.ALREADY_ENDED: ProgressCode.ARM_ALREADY_ENDED,
    Verdict.DISABLED: ProgressCode.ARM_DISABLED,
    Verdict.NOT_TRAINING: ProgressCode.ARM_NOT_TRAINING,
}
_STALL: Final = {
    Verdict.ALREADY_ENDED: ProgressCode.ALREADY_ENDED,
    Verdict.DISABLED: ProgressCode.DISABLED,
    Verdict.NOT_TRAINING: ProgressCode.NOT_TRAINING,
    Verdict.STALE: ProgressCode.STALE,
}


class ProgressPolicy(GuardConfig):
    """The progress guard: stop a job whose training metric stopped arriving for a whole window.

    A job is watched only when one of its ``MetricDefinitions`` is named like one of ``metric_names``
    (case-insensitive; ``:``, ``/``, ``-``, ``.`` and spaces count as ``_``), and only after SageMaker has
    published that metric once. ``window_minutes`` without a single datapoint of any watched metric
    while the job is ``Training`` means it is stalled. Choose a window longer than the longest gap
    between two log lines of the metric (logging interval x step time, evaluation passes, checkpoint
    saves). ``mode`` overrides the policy's mode for this guard only.

    ``trigger_minutes``: with the stall judge on, the armed stall alarm fires after this many minutes
    without a datapoint, before the window, and the judge decides: a hang (GPUs pinned on some host, the
    rest idle) is stopped once the job's log has been silent for its rhythm's limit; without a known rhythm,
    or with every GPU idle (the idle guard's case), only after the window (the alarm is moved to what a stop
    needs: ``judge.wait.window``). ``null`` (the default): ``judge.min_silence_minutes``. A job that
    declares its window (``smgov:progress-minutes``) keeps it as the alarm's.

    Example:
        progress:
          enabled: true
          mode: enforce
          metric_names: [train_loss, loss]
          window_minutes: 120
          trigger_minutes: null
    """

    metric_names: tuple[str, ...] = Field(
        default=DEFAULT_METRIC_NAMES, description="MetricDefinitions names that count as a progress signal."
    )
    window_minutes: int = Field(
        default=DEFAULT_WINDOW_MINUTES, ge=10, le=1440, description="No datapoint for this long = stalled."
    )
    trigger_minutes: int | None = Field(
        default=None,
        ge=1,
        le=1440,
        description="With the stall judge on: the stall alarm's own window, after which the judge is asked; "
        "null: judge.min_silence_minutes.",
    )

    @field_validator("metric_names")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(n for n in (v.strip() for v in value) if n)
        if len(cleaned) != len(value):
            raise ValueError("metric_names cannot contain empty names")
        return cleaned

    @property
    def alarm_minutes(self) -> int:
        """The stall alarm's window: the trigger's when set and shorter than the window."""
        return min(self.window_minutes, self.trigger_minutes or self.window_minutes)

    def progress_metrics(self, job: TrainingJob) -> tuple[str, ...]:
        """The job's metric names (as defined, in order) that count as its progress signal."""
        wanted = {normalize_metric_name(n) for n in self.metric_names}
        seen: list[str] = []
        for definition in job.algorithm.metric_definitions:
            if normalize_metric_name(definition.name) in wanted and definition.name not in seen:
                seen.append(definition.name)
        return tuple(seen)


def _queries(job_name: str, metrics: Sequence[str]) -> list[MetricQuery]:
    return [
        MetricQuery(id=f"m{index}", metric_name=metric, dimensions=((JOB_DIMENSION, job_name),))
        for index, metric in enumerate(metrics, start=1)
    ]


def progress_alarm_names(job_name: str, naming: AlarmNaming) -> tuple[str, str]:
    """(stall, armer): the same prefix as every guard's alarms (the IAM scope and the alarm topic's policy
    cover them all)."""
    return naming.alarm_name(job_name, STALL_MARK), naming.alarm_name(job_name, ARMER_MARK)


class ProgressGuard(Guard[ProgressPolicy]):
    """Stops a job whose training metric stopped arriving for a whole window (after it arrived once)."""

    name = "progress"
    rule_id = PROGRESS_RULE_ID
    section = "progress"
    config_type = ProgressPolicy
    title = "progress guard"
    what = "progress alarms"
    rearm_reason = (
        "sagemaker-governance: the training job (re)entered Training; the progress guard waits for its metric"
    )

    def config(self, policy: Any) -> ProgressPolicy:
        """The progress section; its stall alarm a trigger (``judge.min_silence_minutes``) when the stall
        judge is on and the section sets none (the alarm alone, without a judge, must mean the window)."""
        return judged_trigger(super().config(policy), getattr(policy, "judge", None))

    # ---- alarms ---------------------------------------------------------------------------------

    def watchable(self, job: TrainingJob) -> bool:
        """Only a job with metric definitions can publish a progress metric. An event that carries the job's
        ``AlgorithmSpecification`` says whether it has any (it mirrors DescribeTrainingJob: no re-read); one
        without it says nothing, and the job is read again."""
        return bool(job.algorithm.metric_definitions) or "algorithm" not in job.model_fields_set

    def plan(self, job: TrainingJob, config: ProgressPolicy, naming: AlarmNaming) -> AlarmPlan | NoAlarm:
        """The progress alarms of ``job`` under ``config``, or why there are none. The stall alarm comes
        first: the armer must never notify about a stall alarm that does not exist yet."""
        progress = config
        defined = [d.name for d in job.algorithm.metric_definitions]
        if not defined:
            return NoAlarm(
                code=ProgressCode.NO_METRIC_DEFINITIONS,
                reason="the job defines no training metrics (AlgorithmSpecification.MetricDefinitions): no "
                "progress signal to watch",
            )
        metrics = progress.progress_metrics(job)
        if not metrics:
            return NoAlarm(
                code=ProgressCode.NO_PROGRESS_METRIC,
                reason=f"none of the job's metrics ({', '.join(defined)}) is a progress signal of the policy "
                f"({', '.join(progress.metric_names)})",
                evidence={"defined_metrics": defined, "progress_metric_names": list(progress.metric_names)},
            )
        watched = metrics[:MAX_METRICS]
        stall_name, armer_name = progress_alarm_names(job.name, naming)
        window = progress.window_minutes
        evidence: dict[str, Any] = {
            "metrics": list(watched),
            "namespace": NAMESPACE,
            "dimension": f"{JOB_DIMENSION}={job.name}",
            "window_minutes": window,
            "alarms": [stall_name, armer_name],
        }
        if len(metrics) > MAX_METRICS:
            evidence["not_watched"] = list(metrics[MAX_METRICS:])
        shown = ", ".join(watched)
        queries = _queries(job.name, watched)

        def alarm(
            name: str, *, enabled: bool, periods: int, comparison: str, missing: str, description: str
        ) -> dict[str, Any]:
            return metric_alarm_request(
                name,
                description=description,
                actions=naming.actions,
                actions_enabled=enabled,
                evaluation_periods=periods,
                datapoints_to_alarm=periods,
                threshold=1.0,
                comparison=comparison,
                treat_missing_data=missing,
                tags=naming.tags(job.name),
                queries=queries,
                stat="SampleCount",
                period=PERIOD_SECONDS,
                combined=Combined(id="datapoints", function="SUM", label="datapoints of the progress metrics"),
                single_metric=len(queries) == 1,
            )

        if progress.alarm_minutes < window:
            evidence["trigger_minutes"] = progress.alarm_minutes
        stall = alarm(
            stall_name,
            enabled=False,
            periods=progress.alarm_minutes,
            comparison="LessThanThreshold",
            missing="breaching",
            description=naming.describe(
                f"sagemaker-governance progress guard for training job {job.name}: no datapoint of {shown} for "
                f"{window} minutes while training means the job is stalled"
                + (
                    ""
                    if progress.alarm_minutes == window
                    else f" (the alarm fires after {progress.alarm_minutes}: a trigger the stall judge decides)"
                )
                + ". Its actions are enabled only after "
                f"the metric was published once (alarm {armer_name})"
            ),
        )
        armer = alarm(
            armer_name,
            enabled=True,
            periods=1,
            comparison="GreaterThanOrEqualToThreshold",
            missing="notBreaching",
            description=naming.describe(
                f"sagemaker-governance progress guard for training job {job.name}: fires when {shown} is "
                f"published, so that the stall alarm {stall_name} is armed only once the job's metric "
                "definition is known to match"
            ),
        )
        alarms = (
            PlannedAlarm(role=ProgressRole.STALL, kind=AlarmKind.METRIC, request=stall),
            PlannedAlarm(role=ProgressRole.ARMER, kind=AlarmKind.METRIC, request=armer),
        )
        return AlarmPlan(job_name=job.name, what=self.what, alarms=alarms, evidence=evidence)

    def arming(self, plan: AlarmPlan) -> Arming:
        """The armer's notification arms the stall alarm once the metric is published: a put after that puts
        the stall alarm with its actions on and the armer with its actions off, and resets the stall alarm (it
        may sit in ALARM from its silent start-up minutes), as the stopper does (``_arming``)."""
        stall = plan.name_of(ProgressRole.STALL)
        armed = tuple(
            alarm.model_copy(
                update={"request": {**alarm.request, "ActionsEnabled": alarm.role == ProgressRole.STALL}}
            )
            for alarm in plan.alarms
        )
        return Arming(
            metrics=tuple(_queries(plan.job_name, plan.evidence["metrics"])),
            stat="SampleCount",
            period_seconds=PERIOD_SECONDS,
            stop_alarm=stall,
            armed=plan.model_copy(update={"alarms": armed}),
            reset=(stall,),
            reset_reason=ARMED_REASON,
        )

    def watching(self, job: TrainingJob, config: ProgressPolicy, plan: AlarmPlan) -> str:
        return (
            f"watching the job's progress metric ({', '.join(plan.evidence['metrics'])}): once it has been "
            f"published, no datapoint for {config.window_minutes} minutes while training counts as stalled"
        )

    def owned_alarms(self, job_name: str, hosts: int, naming: AlarmNaming) -> tuple[str, ...]:
        return progress_alarm_names(job_name, naming)

    def role_of(self, alarm_name: str, job_name: str, naming: AlarmNaming) -> str | None:
        stall, armer = progress_alarm_names(job_name, naming)
        return ProgressRole.STALL if alarm_name == stall else ProgressRole.ARMER if alarm_name == armer else None

    def stops_from(self, role: str) -> bool:
        return role == ProgressRole.STALL

    def muted(self, job_name: str, actions_off: Collection[str], naming: AlarmNaming) -> tuple[str, ...]:
        """The stall alarm, when its actions are off and the armer's are too. Its actions off alone is the guard
        not armed yet (never turned on: that would stop a job whose metric was never seen); the armer's off alone
        is the guard armed (the stopper disables the armer when it arms). Both off: the stopper muted one of
        them after a judgement that held its stretch, which it makes only once the armer has fired (the metric
        was seen), so turning the stall alarm on is arming a guard that was armed or would have been."""
        stall, armer = progress_alarm_names(job_name, naming)
        return (stall,) if stall in actions_off and armer in actions_off else ()

    # ---- judging --------------------------------------------------------------------------------

    def judge(self, role: str, notice: Notice, config: ProgressPolicy) -> GuardVerdict:
        if role == ProgressRole.ARMER:
            return self._arming(notice, config)
        return self._stall(notice, config)

    def _evidence(self, notice: Notice) -> dict[str, Any]:
        evidence = dict(notice.evidence)
        if notice.metric_names is not None:
            evidence["metrics"] = list(notice.metric_names)
        return evidence

    def _arming(self, notice: Notice, progress: ProgressPolicy) -> GuardVerdict:
        """The armer fired (the metric was published): arm the stall alarm if the job is training."""
        judgement = Judgement(self.rule_id, notice.mode, self._evidence(notice))
        early = preconditions(
            judgement,
            notice,
            enabled=progress.enabled,
            title=self.title,
            codes=_ARMER,
            not_training="the stall alarm is armed when the metric is published while training",
            ended=(Action.NONE, "nothing to arm"),
        )
        if early is not None:
            return early
        stall, armer = progress_alarm_names(notice.job.name, notice.naming)
        # Reset first, enable second: the stall alarm may sit in ALARM from its silent start-up minutes
        # (actions off); enabling it in that state would not notify, and resetting after enabling could
        # race an evaluation. The armer is switched off last: if anything above fails, it fires again.
        return judgement(
            Verdict.ARM,
            Action.ARM_ALARM,
            ProgressCode.ARM,
            f"the job published its progress metric while training: the stall alarm is armed (no datapoint for "
            f"{progress.window_minutes} minutes stops the job)",
            reset=(stall,),
            reset_reason=ARMED_REASON,
            arm=(stall,),
            disarm=(armer,),
        )

    def _stall(self, notice: Notice, progress: ProgressPolicy) -> GuardVerdict:
        """The armed stall alarm fired: what to do with the job (as re-read just now)."""
        job, now = notice.job, notice.as_of  # as of the end of the window the alarm judged
        window = timedelta(minutes=progress.window_minutes)
        span = self.fired_span(progress, notice) or window  # shorter than the window: a trigger
        facts = {**self._evidence(notice), **notice.savings, "window_minutes": progress.window_minutes}
        if notice.alarm_changed_at is not None:
            facts["last_datapoint_before"] = (notice.alarm_changed_at - span).isoformat()
        judgement = Judgement(self.rule_id, notice.mode, facts)
        stall, _ = progress_alarm_names(job.name, notice.naming)
        early = preconditions(
            judgement,
            notice,
            enabled=progress.enabled,
            title=self.title,
            codes=_STALL,
            not_training="no training metric is expected; the guard is re-armed when the job next enters "
            "Training and publishes its metric",
            stale=Stale((stall,), RESET_REASON, "silent"),
        )
        if early is not None:
            return early
        # before any verdict that puts the stall alarm from the plan (armed) or stops: never on metrics not seen
        moved = self.metrics_moved(
            judgement, notice, progress, code=ProgressCode.METRICS_MOVED, reset_reason=MOVED_REASON
        )
        if moved is not None:
            return moved
        if (since := trained_less_than(job, now, span)) is not None:
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                ProgressCode.TOO_EARLY,
                f"the job (re)entered Training at {since}, less than the alarm's {span.total_seconds() / 60:g}-"
                "minute window ago: a stall cannot be established yet; the alarm is reset",
                reset=(stall,),
                reset_reason=RESET_REASON,
            )
        unjudged = self.unjudged_trigger(
            judgement,
            notice,
            progress,
            span,
            judged=progress.trigger_minutes is not None,
            code=ProgressCode.TRIGGER,
            reset_reason=RESET_REASON,
        )
        if unjudged is not None:
            return unjudged
        stricter = self.stricter_alarm(
            judgement, notice, progress, code=ProgressCode.STRICTER_ALARM, reset_reason=RESET_REASON
        )
        if stricter is not None:
            return stricter
        metrics = facts.get("metrics") or []
        named = ", ".join(metrics) if metrics else "its progress metric"
        reason = (
            f"the job published no datapoint of {named} for {span.total_seconds() / 60:g} minutes while training "
            "(after publishing it before): no training step is completing, although its GPUs may look busy"
        )
        remedy = (
            "Look for a hung collective (NCCL timeout, a rank that died), a deadlocked data loader or a job "
            "stuck in a barrier; fix it and relaunch from the last checkpoint. "
            f"{tolerance_hint(TAG_PROGRESS_MINUTES)} Otherwise ask the platform team for a longer "
            "progress.window_minutes."
        )
        return judgement.stop(
            ProgressCode.STOP, ProgressCode.EXEMPTED, reason, remedy=remedy, exempted_by=notice.exempted_by
        )

    # ---- the stall judge ------------------------------------------------------------------------

    stall_kind = StallKind.HANG

    def evidence_window(self, config: ProgressPolicy) -> timedelta:
        return timedelta(minutes=config.window_minutes)

    def rejudge_alarms(self, job: TrainingJob, naming: AlarmNaming) -> tuple[str, ...]:
        return (progress_alarm_names(job.name, naming)[0],)

    def symptom(self, config: ProgressPolicy) -> tuple[str, str]:
        window = config.window_minutes
        return (
            f"it logged no training progress for {window} minutes",
            f"looks stalled: no training progress for {window} minutes",
        )


PROGRESS: Final = ProgressGuard()
