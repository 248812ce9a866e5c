"""The idle guard: the policy section, and the pure planner of the CloudWatch alarms that watch a job.

The alarm watches ``/aws/sagemaker/TrainingJobs`` ``GPUUtilization`` (dimension ``Host`` =
``<job>/algo-<n>``), which SageMaker publishes per host as the sum over its GPUs (0-100 x GPU count).

* **Every host** is watched: the alarm's value is ``MAX`` over the hosts (metric math), so the job is in
  breach only when its busiest host is idle. An alarm over one host (a one-host job, or the last child of
  11, 21 ... hosts) is a plain single-metric alarm: ``MAX([m1])`` of one series is no metric math at all.
* **More than 10 hosts** (CloudWatch allows 10 metrics in one alarm): one child metric alarm per 10
  hosts, without actions, and a composite alarm ``ALARM(c1) AND ALARM(c2) ...`` that notifies the alarm
  topic: all hosts must be idle, exactly as with one alarm.
* **CloudWatch's limits on a composite** (PutCompositeAlarm API reference, botocore's ``cloudwatch``
  model): its ``AlarmRule`` names at most 100 child alarms, has at most 500 elements and 10,240
  characters. A job needing more (over 1,000 hosts, fewer with long names) gets no alarm, with the code
  ``idle.alarm.too-many-hosts`` and the limits in the evidence. A second level of composites would lift
  that, but ``DeleteAlarms`` takes at most one composite alarm per call and the reconciler would have to
  follow two levels: not built for a size no SageMaker training job is known to reach.
* **Heterogeneous clusters above 10 hosts with hosts that publish no GPUUtilization** (CPU, Trainium,
  Inferentia groups): SageMaker does not say which ``algo-n`` belongs to which instance group ("log
  streams ... are not grouped by instance groups", heterogeneous cluster guide), so a child may hold CPU
  hosts only and never have data. There the children treat missing data as ``missing`` (a child without
  any data goes to ``INSUFFICIENT_DATA``) and the composite rule is ``(NOT (OK(c1) OR OK(c2) ...)) AND
  (ALARM(c1) OR ALARM(c2) ...)``: no child whose hosts show GPU activity, and at least one child with
  idle data. A child without data never blocks the composite. But a child treating missing data as
  ``missing`` also goes to ``ALARM`` on a few idle datapoints followed by none: CloudWatch moves it there
  when the oldest breaching datapoint in its evaluation range is at least ``DatapointsToAlarm`` periods old
  and every newer one is breaching or missing (the user guide's missing-data table, row ``X - - - -``). Three
  idle minutes and then no ``GPUUtilization`` (an agent or driver failure on the GPU hosts) fire the
  composite half an hour later. So the stopper reads the hosts' ``GPUUtilization`` over the alarm's window
  before it acts on such a composite, and stops nothing when that data does not cover the window
  (``idle.skip.gpu-data-missing``; ``domain/gpu_coverage.py``).
* **Threshold** = per-GPU percent x GPU count. Heterogeneous clusters assign host names randomly across
  instance groups, so the planner cannot know which ``algo-n`` has how many GPUs. It scales by the
  *smallest* GPU count of the GPU groups: a host with more GPUs then needs even less per-GPU activity to
  count as busy, so a busy host can never look idle (do no harm). CPU, Trainium and Inferentia hosts
  publish no ``GPUUtilization``; ``MAX`` ignores them.
* **Missing data never stops a job**: ``TreatMissingData=notBreaching`` on every metric alarm (except
  the heterogeneous children above, whose composite's firing the stopper checks against the hosts' data).
* No GPU at all, or an instance type we cannot size: no alarm, with the reason.

Nothing here talks to AWS: the planner returns the exact request documents, the service sends them; the
stopper's judgement of the notifying alarm's ``ALARM`` is ``IdleGuard.judge``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, field_validator, model_validator

from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.guards.base import (
    CHILD_HOSTS_MARK,
    MAX_ALARM_RULE_ELEMENTS,
    MAX_ALARM_RULE_LENGTH,
    MAX_COMPOSITE_CHILDREN,
    MAX_METRICS_PER_ALARM,
    PINNED_TRIGGER_MARK,
    WHY_REPLANNED,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Combined,
    CompositeRule,
    Guard,
    GuardConfig,
    GuardVerdict,
    Judgement,
    MetricQuery,
    NoAlarm,
    Notice,
    PlannedAlarm,
    Sections,
    Stale,
    Verdict,
    child_range,
    composite_rule,
    host_chunks,
    job_instance_facts,
    judged_trigger,
    metric_alarm_request,
    preconditions,
    rule_elements,
    trained_less_than,
    training_started_at,
    unsized,
)
from sagemaker_governance.domain.instances import InstanceFacts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.pricing import DEFAULT_PRICES
from sagemaker_governance.domain.stall_judge import TAG_IDLE_MINUTES, StallKind, tolerance_hint

IDLE_RULE_ID: Final = "idle-guard"
METRIC_NAME: Final = "GPUUtilization"
HOST_DIMENSION: Final = "Host"
HOSTS_PER_ALARM: Final = MAX_METRICS_PER_ALARM
COMPARISON: Final = "LessThanThreshold"
CHILD_MARK: Final = CHILD_HOSTS_MARK  # job names cannot contain ".", so child names never collide with a job's
RESET_REASON: Final = "sagemaker-governance: reset by the idle stopper (grace period or stale notification)"


def pinned_expression(
    metrics: list[dict[str, Any]], pinned: float, idle: float, first: int, last: int
) -> dict[str, Any]:
    """The alarm's value with the pinned trigger: the busiest host's GPUUtilization, but 0 (breaching) in a
    minute where every host is at or above ``pinned``, or (several hosts) where some host is pinned, the
    least busy is below ``idle`` and the hosts' mean is at least half of ``pinned``: a stuck host (its GPUs
    idle) that the others wait for, spinning in the collective. With the other hosts idle, that mean holds
    once the pinned hosts are at least half of the cluster: one host computing while the others wait idle
    (a rank-0 evaluation) is told apart from three hosts up, not on two (one pinned, one idle: the mean is
    exactly half), where the alarm fires and the stall judge decides on the job's log and metrics (the
    README lists it among the trigger's risks). CloudWatch metric math: ``MIN``/``MAX``/``AVG`` over
    a list of series are series, comparison operators return 1 or 0, arithmetic combines series point by
    point, and ``IF(condition, a, b)`` picks per datapoint (CloudWatch user guide, "Metric math syntax and
    functions", "Using IF expressions"). A third host in between (neither pinned nor idle) is not seen
    here: the stall judge reads every host and vetoes a hang when any host's GPUs worked
    (``judge.veto.gpu-working``)."""
    ids = ", ".join(m["Id"] for m in metrics if "MetricStat" in m)
    busiest, least, mean = f"MAX([{ids}])", f"MIN([{ids}])", f"AVG([{ids}])"
    if first == last:
        condition, shown = f"{least} >= {pinned:g}", "0 while every host is pinned"
    else:
        stuck = f"({least} < {idle:g}) * ({mean} >= {pinned / 2:g})"
        condition = f"(({busiest} >= {pinned:g}) * (({least} >= {pinned:g}) + {stuck})) >= 1"
        shown = "0 while every host is pinned, or at least half are and another idle"
    return {
        "Id": "busiest",
        "Expression": f"IF({condition}, 0, {busiest})",
        "Label": f"GPUUtilization of the busiest host (algo-{first}..algo-{last}); {shown}",
        "ReturnData": True,
    }


def _trigger_evidence(periods: int, idle: IdlePolicy) -> dict[str, str]:
    """The plan's evidence of an alarm that is a trigger (fires before the window; the judge decides)."""
    if periods == idle.evaluation_periods:
        return {}
    return {"trigger": f"{periods} x {idle.period_seconds}s (the stall judge decides; a stop needs the window)"}


class IdleRole(StrEnum):
    NOTIFYING = "notifying"  # the alarm with the topic action (the only one for up to 10 hosts)
    CHILD = "child"  # above 10 hosts: one metric alarm per 10 hosts, no action, under the composite


class IdleCode(StrEnum):
    """The idle guard's decision codes (and the lifecycle's: ``idle.alarm.*``, ``guards.base.AlarmCode``)."""

    STOP = "idle.stop.idle"
    ALREADY_ENDED = "idle.skip.already-ended"
    DISABLED = "idle.skip.disabled"
    NOT_TRAINING = "idle.skip.not-training"
    STALE = "idle.skip.stale"
    GRACE = "idle.skip.grace"
    TOO_EARLY = "idle.skip.too-early"
    EXEMPTED = "idle.skip.exempted"
    HUNG = "idle.stop.hung"  # the pinned trigger: GPUs pinned busy, no training metric, logs silent
    TRIGGER = "idle.skip.trigger"  # the alarm fired on its trigger, and no judge may confirm a hang: wait
    PINNED_UNJUDGED = "idle.skip.pinned-trigger"  # fired with a pinned trigger the current plan lacks: re-plan
    STRICTER_ALARM = (
        "idle.skip.stricter-alarm"  # fired on stricter terms than planned now (a policy change): re-plan
    )
    NO_INSTANCES = "idle.alarm.no-instances"
    UNKNOWN_INSTANCE = "idle.alarm.unknown-instance"
    NO_GPU = "idle.alarm.no-gpu"
    TOO_MANY_HOSTS = "idle.alarm.too-many-hosts"


_JUDGED: Final = {
    Verdict.ALREADY_ENDED: IdleCode.ALREADY_ENDED,
    Verdict.DISABLED: IdleCode.DISABLED,
    Verdict.NOT_TRAINING: IdleCode.NOT_TRAINING,
    Verdict.STALE: IdleCode.STALE,
}


class IdlePolicy(GuardConfig):
    """The idle guard: stop a training job whose GPUs have been idle for a whole window.

    A job is idle when the GPU utilization of its busiest host stays below ``threshold_percent`` per GPU
    in ``datapoints_to_alarm`` of ``evaluation_periods`` periods of ``period_seconds``, after a start-up
    grace period of ``grace_minutes`` from the moment the job (re)entered ``Training``. ``mode``
    overrides the policy's mode for this guard only; ``prices`` (USD per instance-hour) extend or replace
    the built-in price table used for the estimated-savings metric.

    The defaults (1 % per GPU, 30 one-minute periods all idle, 20-minute grace) were chosen by replaying
    real GPU traces of healthy jobs through the alarm for a grid of thresholds and windows: see
    docs/calibration.md (``make calibrate``); a test keeps them equal to the document's.

    ``pinned_percent`` (95 % per GPU; ``null``: off) makes the same alarm the **trigger for hangs** of jobs
    that no progress metric watches: a minute in which every host is at or above it counts as breaching
    too (metric math ``IF(MIN(hosts) >= pinned, 0, MAX(hosts))``), and so does, on several hosts, a minute
    in which at least half the hosts are pinned while another is idle (one stuck host the others wait for), so a cluster
    pinned busy for the whole window fires the alarm and the stall judge decides, from the job's training
    metrics and log lines, whether it is hung (a collective spinning at 100 %) or computing. The alarm alone never stops a pinned
    job: with the judge off (``judge.enabled: false``) the pinned trigger is off too.

    ``trigger_minutes``: with the pinned trigger on, the alarm fires after this many idle or pinned minutes,
    before the window, and the stall judge decides: it stops a hang once the job has been silent for its
    log rhythm's limit (never under ``judge.min_silence_minutes``), and it never stops for idleness before
    the whole window (an idle trigger is moved to the window: ``judge.wait.window``). ``null`` (the
    default): ``judge.min_silence_minutes``, the shortest silence a hang is confirmed at. Not shortened: an
    M-of-N window, a job of more than 10 hosts (its composite alarm's notification does not say its
    children's window), a job that declares its own window. Equal to the window: the alarm fires after the
    window only.

    Example:
        idle:
          enabled: true
          mode: enforce
          threshold_percent: 1
          period_seconds: 60
          evaluation_periods: 30
          datapoints_to_alarm: 30
          grace_minutes: 20
          pinned_percent: 95
          trigger_minutes: null
          prices: {ml.p4d.24xlarge: 37.69}
    """

    threshold_percent: float = Field(default=1.0, gt=0, le=100, description="Per GPU, percent.")
    period_seconds: int = Field(default=60, ge=60, le=3600)
    evaluation_periods: int = Field(default=30, ge=1, le=1440)
    datapoints_to_alarm: int = Field(default=30, ge=1, le=1440)
    grace_minutes: int = Field(default=20, ge=0, le=1440)
    pinned_percent: float | None = Field(
        default=95.0,
        gt=0,
        le=100,
        description="Per GPU, percent: every host at or above it for the window also fires the alarm (a hang "
        "trigger for the stall judge); null: off.",
    )
    trigger_minutes: int | None = Field(
        default=None,
        ge=1,
        le=1440,
        description="With the pinned trigger: the alarm's own window, after which the stall judge is asked (a "
        "hang is stopped at the job's silence limit, idleness never before the window); null: "
        "judge.min_silence_minutes.",
    )
    prices: dict[str, float] = Field(default_factory=dict, description="Instance type -> USD per hour.")

    @model_validator(mode="before")
    @classmethod
    def _one_sets_both(cls, data: Any) -> Any:
        """Only one of ``evaluation_periods`` / ``datapoints_to_alarm`` given: both take its value (idle for
        the whole window; M-of-N only when a document says so explicitly)."""
        if isinstance(data, Mapping):
            given = [k for k in ("evaluation_periods", "datapoints_to_alarm") if k in data]
            if len(given) == 1:
                return {**data, "evaluation_periods": data[given[0]], "datapoints_to_alarm": data[given[0]]}
        return data

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

    def alarm_window(self, *, triggered: bool) -> tuple[int, int]:
        """The alarm's (evaluation periods, datapoints to alarm): the trigger's when the alarm may be one (the
        pinned trigger on, not a composite's child: the judge must read the window that fired from the
        notification) and the trigger is shorter than a whole window (M-of-N keeps its own), else the
        window's."""
        whole = (self.evaluation_periods, self.datapoints_to_alarm)
        if not triggered or self.pinned_percent is None or self.trigger_minutes is None:
            return whole
        if self.datapoints_to_alarm != self.evaluation_periods:
            return whole
        periods = max(1, min(self.evaluation_periods, math.ceil(self.trigger_minutes * 60 / self.period_seconds)))
        return periods, periods

    def price_table(self) -> dict[str, float]:
        return {**DEFAULT_PRICES, **self.prices}


def alarm_names(job_name: str, host_count: int, naming: AlarmNaming) -> tuple[str, tuple[str, ...]]:
    """The notifying alarm's name and the metric alarms' names (the notifying alarm itself for up to 10
    hosts, else one child per 10 hosts under a composite alarm of that name)."""
    notifying = naming.alarm_name(job_name)
    if host_count <= HOSTS_PER_ALARM:
        return notifying, (notifying,)
    children = tuple(naming.alarm_name(job_name, f"{CHILD_MARK}{a}-{b}") for a, b in host_chunks(host_count))
    return notifying, children


def grace_remaining(job: TrainingJob, idle: IdlePolicy, now: datetime) -> timedelta | None:
    """Time left in the start-up grace period; ``None`` when it is over. Unknown start: all of it."""
    started = training_started_at(job)
    grace = timedelta(minutes=idle.grace_minutes)
    if started is None:
        return grace
    left = started + grace - now
    return left if left > timedelta(0) else None


class IdleGuard(Guard[IdlePolicy]):
    """Stops a job whose busiest host's GPUs stayed idle for a whole window after its grace period."""

    name = "idle"
    rule_id = IDLE_RULE_ID
    section = "idle"
    config_type = IdlePolicy
    title = "idle guard"
    what = "idle alarms"
    rearm_reason = "sagemaker-governance: the training job (re)entered Training; idle evaluation starts afresh"
    sized_by_hosts = True
    uses_instance_facts = True  # its plan takes ``resolved`` facts (EC2's) for types the table lacks

    def config(self, policy: Sections) -> IdlePolicy:
        """The idle section; without the pinned trigger when the stall judge is off (the alarm alone must
        never stop a job whose GPUs are busy)."""
        idle = super().config(policy)
        judge = getattr(policy, "judge", None)
        if idle.pinned_percent is not None and judge is not None and not judge.enabled:
            idle = idle.model_copy(update={"pinned_percent": None})
        return judged_trigger(idle, judge)

    # ---- alarms ---------------------------------------------------------------------------------

    def plan(
        self,
        job: TrainingJob,
        config: IdlePolicy,
        naming: AlarmNaming,
        resolved: Mapping[str, InstanceFacts] | None = None,
    ) -> AlarmPlan | NoAlarm:
        """The alarms that watch ``job``'s GPUs under ``config``, or why there are none. ``resolved``: facts
        the service learnt elsewhere (EC2) for instance types our table does not know (issue 16 item 3)."""
        idle = config
        groups = job.instance_groups
        facts = job_instance_facts(job, resolved)
        described = {t: f.note for t, f in facts.items()}
        if not groups or job.total_instance_count < 1:
            return NoAlarm(code=IdleCode.NO_INSTANCES, reason="the job names no instances; nothing to watch")
        # A lookup that could not answer is no fact: unless a type is unknown for good (EC2 does not know it), the
        # answer may change, and the reconciler plans the job again at its next run.
        unknown = unsized(facts, IdleCode.UNKNOWN_INSTANCE, "no alarm rather than a wrong threshold")
        if unknown is not None:
            return unknown
        gpu_counts = sorted({f.gpus for f in facts.values() if f.publishes_gpu_utilization})
        if not gpu_counts:
            return NoAlarm(
                code=IdleCode.NO_GPU,
                reason="no instance of this job publishes GPUUtilization ("
                + "; ".join(f"{t}: {note}" for t, note in described.items())
                + ")",
                evidence={"instance_types": described},
            )
        gpus = gpu_counts[0]
        threshold = round(idle.threshold_percent * gpus, 6)
        trigger = idle.pinned_percent if self.plans_pinned_trigger(idle) else None
        pinned = None if trigger is None else round(trigger * gpus, 6)
        hosts = job.total_instance_count
        notifying, metric_alarms = alarm_names(job.name, hosts, naming)
        composite = hosts > HOSTS_PER_ALARM
        periods, datapoints = idle.alarm_window(triggered=not composite and pinned is not None)
        evidence: dict[str, Any] = {
            "threshold_percent_per_gpu": idle.threshold_percent,
            "gpus_per_host_for_scaling": gpus,
            "threshold": threshold,
            "hosts": hosts,
            "window": f"{idle.datapoints_to_alarm} of {idle.evaluation_periods} x {idle.period_seconds}s",
            "grace_minutes": idle.grace_minutes,
            "alarms": [notifying, *metric_alarms] if composite else list(metric_alarms),
        }
        evidence.update(_trigger_evidence(periods, idle))
        if pinned is not None:
            evidence["pinned_percent_per_gpu"] = idle.pinned_percent
            evidence["pinned_threshold"] = pinned
        silent_hosts = any(not f.publishes_gpu_utilization for f in facts.values())
        rule_kind = CompositeRule.IDLE_WHERE_DATA if silent_hosts else CompositeRule.ALL_IDLE
        if len(gpu_counts) > 1 or len(groups) > 1:
            evidence["scaling_note"] = (
                "heterogeneous cluster: hosts are assigned to groups at random, so the threshold is scaled by "
                "the smallest GPU count of the GPU groups; hosts without GPUs publish no data and are ignored"
            )
        if composite:
            evidence["composite_rule"] = rule_kind.value
            if rule_kind is CompositeRule.IDLE_WHERE_DATA:
                evidence["coverage_note"] = (
                    "some hosts publish no GPUUtilization and SageMaker does not say which algo-n they are: a "
                    "child alarm without data (INSUFFICIENT_DATA) does not block the composite; at least one "
                    "child must be in ALARM on idle data, and none OK"
                )
        description = naming.describe(
            f"sagemaker-governance idle guard for training job {job.name}: the busiest of {hosts} host(s) below "
            f"{threshold:g} GPUUtilization ({idle.threshold_percent:g}% per GPU x {gpus} GPU(s)) in "
            f"{datapoints} of {periods} periods of {idle.period_seconds}s"
            + (
                ""
                if pinned is None
                else f", or every host at or above {pinned:g} ({idle.pinned_percent:g}% per GPU: pinned), or at least "
                f"half the hosts pinned while another is below the threshold (a stuck host): {PINNED_TRIGGER_MARK}"
            )
        )

        def metric_alarm(name: str, first: int, last: int, actions: list[str]) -> dict[str, Any]:
            request = metric_alarm_request(
                name,
                description=description,
                actions=actions,
                actions_enabled=True,
                evaluation_periods=periods,
                datapoints_to_alarm=datapoints,
                threshold=threshold,
                comparison=COMPARISON,
                treat_missing_data="notBreaching",
                tags=naming.tags(job.name),
                queries=[
                    MetricQuery(
                        id=f"m{n}", metric_name=METRIC_NAME, dimensions=((HOST_DIMENSION, f"{job.name}/algo-{n}"),)
                    )
                    for n in range(first, last + 1)
                ],
                stat="Average",
                period=idle.period_seconds,
                combined=Combined(
                    id="busiest",
                    function="MAX",
                    label=f"GPUUtilization of the busiest host (algo-{first}..algo-{last})",
                ),
                single_metric=first == last and pinned is None,
            )
            if pinned is not None:
                request["Metrics"][-1] = pinned_expression(request["Metrics"], pinned, threshold, first, last)
            return request

        if not composite:
            alarm = PlannedAlarm(
                role=IdleRole.NOTIFYING,
                kind=AlarmKind.METRIC,
                request=metric_alarm(notifying, 1, hosts, naming.actions),
            )
            return AlarmPlan(job_name=job.name, what=self.what, alarms=(alarm,), evidence=evidence)
        rule = composite_rule(metric_alarms, rule_kind)
        limits = {
            "children": (len(metric_alarms), MAX_COMPOSITE_CHILDREN),
            "rule_elements": (rule_elements(rule), MAX_ALARM_RULE_ELEMENTS),
            "rule_characters": (len(rule), MAX_ALARM_RULE_LENGTH),
        }
        exceeded = {k: {"needed": n, "limit": lim} for k, (n, lim) in limits.items() if n > lim}
        if exceeded:
            return NoAlarm(
                code=IdleCode.TOO_MANY_HOSTS,
                reason=f"{hosts} hosts need {len(metric_alarms)} child alarms under one composite alarm, beyond "
                f"what CloudWatch allows in a composite alarm rule ({', '.join(sorted(exceeded))}); no alarm "
                "rather than one that watches only some hosts",
                evidence={  # not the names of alarms that will not exist (a record stays small)
                    **{k: v for k, v in evidence.items() if k != "alarms"},
                    "child_alarms_needed": len(metric_alarms),
                    "composite_limits_exceeded": exceeded,
                },
            )
        treat_missing = "missing" if rule_kind is CompositeRule.IDLE_WHERE_DATA else "notBreaching"
        children = tuple(
            PlannedAlarm(
                role=IdleRole.CHILD,
                kind=AlarmKind.METRIC,
                request={**metric_alarm(name, first, last, []), "TreatMissingData": treat_missing},
            )
            for name, (first, last) in zip(metric_alarms, host_chunks(hosts), strict=True)
        )
        composite_request: dict[str, Any] = {
            "AlarmName": notifying,
            "AlarmDescription": description,
            "ActionsEnabled": True,
            "AlarmActions": naming.actions,
            "AlarmRule": rule,
            "Tags": naming.tags(job.name),
        }
        top = PlannedAlarm(role=IdleRole.NOTIFYING, kind=AlarmKind.COMPOSITE, request=composite_request)
        return AlarmPlan(job_name=job.name, what=self.what, alarms=(*children, top), evidence=evidence)

    def watching(self, job: TrainingJob, config: IdlePolicy, plan: AlarmPlan) -> str:
        return (
            f"watching GPU utilization of {job.total_instance_count} host(s): below "
            f"{config.threshold_percent:g}% per GPU for {config.window_minutes:g} minutes after a "
            f"{config.grace_minutes}-minute grace period counts as idle"
        )

    def owned_alarms(self, job_name: str, hosts: int, naming: AlarmNaming) -> tuple[str, ...]:
        notifying, metric_alarms = alarm_names(job_name, hosts, naming)
        return (notifying, *metric_alarms) if hosts > HOSTS_PER_ALARM else metric_alarms

    def incomplete(self, job_name: str, observed: Collection[str], naming: AlarmNaming) -> bool:
        """The composite alarm is gone while children remain (deleted by hand, or its creation failed after
        the children's), or a child is missing between others. CloudWatch refuses to delete an alarm a
        composite alarm's rule names (the DeleteAlarms API reference: a composite in a cycle cannot be
        deleted "because there is always still a composite alarm that depends on" it), so a last child
        cannot go missing while its composite exists; a plain alarm of up to 10 hosts is complete alone."""
        head = naming.alarm_name(job_name)
        ranges = sorted(
            r for r in (child_range(name, f"{head}{CHILD_MARK}") for name in observed) if r is not None
        )
        if not ranges:
            return head not in observed
        return head not in observed or ranges != host_chunks(ranges[-1][1])

    def role_of(self, alarm_name: str, job_name: str, naming: AlarmNaming) -> str | None:
        head = naming.alarm_name(job_name)
        if alarm_name == head:
            return IdleRole.NOTIFYING
        return IdleRole.CHILD if alarm_name.startswith(f"{head}{CHILD_MARK}") else None

    def acts_on(self, role: str) -> bool:
        return role == IdleRole.NOTIFYING

    def rearm_targets(
        self, alarm_name: str, job_name: str, observed: Collection[str], naming: AlarmNaming
    ) -> tuple[str, ...]:
        """The notifying alarm; above 10 hosts, its children instead. A composite reset stays in OK while its
        children stay in ALARM: "it returns to its actual state only once any of its children alarms change
        state" (the SetAlarmState API reference). A child reset returns to ALARM at its next evaluation, a
        change of state that has the composite evaluated again and notify. The composite itself is not
        reset: were one child's reset to fail after it, the composite would sit in OK, no longer seen as left
        in ALARM, and never be re-armed; and reset after its children had already returned, it would stay in
        OK over children in ALARM."""
        if self.role_of(alarm_name, job_name, naming) != IdleRole.NOTIFYING:
            return (alarm_name,)
        children = sorted(a for a in observed if self.role_of(a, job_name, naming) == IdleRole.CHILD)
        return tuple(children) or (alarm_name,)

    # ---- judging --------------------------------------------------------------------------------

    def judge(self, role: str, notice: Notice, config: IdlePolicy) -> GuardVerdict:
        """The notifying alarm went to ALARM: what to do with the job (as re-read just now)."""
        idle, job, now = config, notice.job, notice.as_of  # as of the end of the window the alarm judged
        judgement = Judgement(self.rule_id, notice.mode, {**notice.evidence, **notice.savings})
        _, metric_alarms = alarm_names(job.name, job.total_instance_count, notice.naming)
        early = preconditions(
            judgement,
            notice,
            enabled=idle.enabled,
            title=self.title,
            codes=_JUDGED,
            not_training="low GPU use is expected; the alarm is re-armed when the job next enters Training",
            stale=Stale(metric_alarms, RESET_REASON, "idle"),
        )
        if early is not None:
            return early
        left = grace_remaining(job, idle, now)
        if left is not None:
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                IdleCode.GRACE,
                f"within the {idle.grace_minutes}-minute start-up grace period ({left.total_seconds() / 60:.0f} "
                "min left); the alarm is reset and fires again if the job is still idle",
                reset=metric_alarms,
                reset_reason=RESET_REASON,
            )
        span = self.fired_span(idle, notice) or self.evidence_window(idle)
        if (since := trained_less_than(job, now, span)) is not None:
            # Idle minutes before Training (Downloading, Starting) must not count towards the window.
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                IdleCode.TOO_EARLY,
                f"the job (re)entered Training at {since}, less than the alarm's {span.total_seconds() / 60:g}-"
                "minute window ago: idle minutes before Training do not count; the alarm is reset",
                reset=metric_alarms,
                reset_reason=RESET_REASON,
            )
        unjudged = self.unjudged_trigger(
            judgement,
            notice,
            idle,
            span,
            judged=idle.pinned_percent is not None,
            code=IdleCode.TRIGGER,
            reset_reason=RESET_REASON,
        )
        if unjudged is not None:
            return unjudged
        if notice.unjudged_pinned:
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                IdleCode.PINNED_UNJUDGED,
                "the alarm was created with the pinned (hang) trigger, which the current policy does not plan (the "
                "stall judge off, or idle.pinned_percent null): this firing may be pinned GPUs, not idleness; the "
                "alarms are re-created as planned now, without the trigger, and reset; a stop needs them to fire "
                "again",
                rewindow=self.widened(notice, idle, math.ceil(idle.window_minutes), WHY_REPLANNED),
                reset=metric_alarms,
                reset_reason=RESET_REASON,
            )
        stricter = self.stricter_alarm(
            judgement, notice, idle, code=IdleCode.STRICTER_ALARM, reset_reason=RESET_REASON
        )
        if stricter is not None:
            return stricter
        applied, window = self.applied_terms(notice, idle)
        judgement.evidence["threshold_percent_per_gpu_applied"] = applied
        judgement.evidence["threshold_percent_per_gpu"] = idle.threshold_percent
        reason = (
            f"GPU utilization stayed below {applied:g}% per GPU on every host in {window} "
            f"after the {idle.grace_minutes}-minute grace period"
        )
        remedy = (
            "If the job was stalled (hung collective, dead data loader, waiting on input), fix it and relaunch "
            f"from its last checkpoint. {tolerance_hint(TAG_IDLE_MINUTES)} Otherwise ask the platform team for a "
            "team override of the idle guard."
        )
        return judgement.stop(
            IdleCode.STOP, IdleCode.EXEMPTED, reason, remedy=remedy, exempted_by=notice.exempted_by
        )

    def applied_terms(self, notice: Notice, idle: IdlePolicy) -> tuple[float, str]:
        """The per-GPU threshold and the window of the alarm that fired, as its notification says (an alarm
        planned under a laxer policy than today's is judged on its own terms); the policy's when it does not
        (a composite alarm's notification carries no definition)."""
        window = f"{idle.datapoints_to_alarm} of {idle.evaluation_periods} periods of {idle.period_seconds}s"
        threshold, plan = notice.evidence.get("threshold"), self.plan_for(notice, idle)
        gpus = plan.evidence.get("gpus_per_host_for_scaling") if isinstance(plan, AlarmPlan) else None
        if not isinstance(threshold, int | float) or not isinstance(gpus, int) or gpus < 1:
            return idle.threshold_percent, window
        ev = notice.evidence
        if all(
            isinstance(ev.get(k), int) for k in ("datapoints_to_alarm", "evaluation_periods", "period_seconds")
        ):
            window = (
                f"{ev['datapoints_to_alarm']} of {ev['evaluation_periods']} periods of {ev['period_seconds']}s"
            )
        return round(float(threshold) / gpus, 4), window

    # ---- the stall judge ------------------------------------------------------------------------

    stall_kind = StallKind.IDLE

    def evidence_window(self, config: IdlePolicy) -> timedelta:
        return timedelta(minutes=config.window_minutes)

    def rejudge_alarms(self, job: TrainingJob, naming: AlarmNaming) -> tuple[str, ...]:
        return alarm_names(job.name, job.total_instance_count, naming)[1]

    def plans_pinned_trigger(self, config: IdlePolicy) -> bool:
        # none at or below the idle threshold (a pinned minute would then be an idle one too)
        return config.pinned_percent is not None and config.pinned_percent > config.threshold_percent

    def plan_for(self, notice: Notice, config: IdlePolicy) -> AlarmPlan | NoAlarm:
        return self.plan(notice.job, config, notice.naming, resolved=notice.resolved)

    def stall_threshold(self, job: TrainingJob, config: IdlePolicy, notice: Notice) -> float | None:
        """The alarm's threshold (from its notification; a composite's has none: the plan's)."""
        threshold = notice.evidence.get("threshold")
        if isinstance(threshold, int | float):
            return float(threshold)
        plan = self.plan_for(notice, config)
        value = plan.evidence.get("threshold") if isinstance(plan, AlarmPlan) else None
        return float(value) if isinstance(value, int | float) else None

    def pinned_threshold(self, job: TrainingJob, config: IdlePolicy, notice: Notice) -> float | None:
        """The per-host value at or above which every host counted as pinned (None: no pinned trigger)."""
        plan = self.plan_for(notice, config)
        value = plan.evidence.get("pinned_threshold") if isinstance(plan, AlarmPlan) else None
        return float(value) if isinstance(value, int | float) else None

    def hang_verdict(self, verdict: GuardVerdict, config: IdlePolicy, span: timedelta) -> GuardVerdict:
        """The stop verdict when the alarm fired on pinned GPUs (not idle ones) and the judge confirmed a hang."""
        reason = (
            f"the GPUs stayed pinned at or above {config.pinned_percent:g}% per GPU (on every host, or on some "
            f"while the others were idle: a stuck host) for the alarm's {span.total_seconds() / 60:g} minutes "
            "while the job published no training metric and wrote no log line for as long as its log rhythm "
            "allows: a hang (a collective spinning), not computation"
        )
        remedy = (
            "Look for a hung collective (NCCL timeout, a rank that died) or a deadlock; fix it and relaunch from "
            "the last checkpoint. A job that computes at full GPU for long stretches without a log line should log "
            "a line (or define a training metric) at least every few minutes."
        )
        decision = verdict.decision.model_copy(
            update={"code": IdleCode.HUNG.value, "reason": reason, "remedy": remedy}
        )
        return verdict.model_copy(update={"decision": decision})

    def symptom(self, config: IdlePolicy) -> tuple[str, str]:
        return "its GPUs were idle", "looks idle"


IDLE: Final = IdleGuard()
