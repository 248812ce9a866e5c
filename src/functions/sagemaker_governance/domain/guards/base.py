"""What every alarm guard shares: the shape of a guard, alarm names and tags, the alarm requests' metric
math, the preconditions of a judgement, and the verdict that tells the stopper what to do.

A guard watches a training job with CloudWatch alarms of its own (named ``<prefix><job><mark>``, tagged
with the job and the stack) and judges the notifications they send:

* ``plan(job, config, naming)``: the exact requests of the alarms it wants for the job (each with a
  *role*: notifying, child, stall, armer ...), or why it wants none;
* ``owned_alarms(job, hosts, naming)``: every alarm name it may have created for the job, in deletion
  order (what the lifecycle deletes when the job ends);
* ``role_of(alarm, job, naming)``: which of its alarms a name is, if any; ``acts_on(role)``: whether a
  notification of that role is judged at all (a child alarm has no action);
* ``judge(role, notice, config)``: a pure function of the facts (the job as re-read just now, the
  notification, the policy) returning a ``GuardVerdict``: the ``Decision`` and what to do (stop, reset
  these alarms, arm or disarm these alarms, nothing).

The service layer runs one lifecycle (``service/guard_alarms.py``) and one notification router
(``service/guard_stopper.py``) for every guard; nothing there knows a guard by name.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar, Final, Generic, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from sagemaker_governance.domain.alarm_compare import alarm_definition, reads_other_metrics, watched_metrics
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts
from sagemaker_governance.domain.job import TrainingJob, is_valid_job_name
from sagemaker_governance.domain.stall_judge import StallKind

NAMESPACE: Final = "/aws/sagemaker/TrainingJobs"
MAX_METRICS_PER_ALARM: Final = 10  # CloudWatch: at most 10 MetricStat queries in one metric alarm
MAX_EVALUATION_SECONDS: Final = 86_400  # CloudWatch: EvaluationPeriods x Period at most one day
TAG_JOB: Final = "smgov:training-job"
TAG_MANAGED_BY: Final = "smgov:managed-by"
STALE_AFTER: Final = timedelta(minutes=15)  # an older notification is not acted on (the alarm is reset)
# Two state-change times closer than this are one state change: an alarm notification's ``StateChangeTime``
# and ``DescribeAlarms``' ``StateTransitionedTimestamp`` name the same instant, both to the millisecond.
SAME_STATE_CHANGE: Final = timedelta(seconds=1)
# What every alarm planned with the pinned trigger says in its description, metric and composite alike: when the
# current plan has no such trigger (the stall judge off), a firing of such an alarm cannot be told from idleness
# (``Notice.unjudged_pinned``).
PINNED_TRIGGER_MARK: Final = "a hang trigger the stall judge decides"
MAX_DESCRIPTION: Final = 1024  # PutMetricAlarm's and PutCompositeAlarm's AlarmDescription (botocore's model)
# How a widened alarm's description says why (``Guard.widened``).
WHY_VETOED: Final = "after a veto of the stall judge"
WHY_JUDGE_OFF: Final = (
    "because it fired on its trigger while the stall judge is off (a stop needs the whole window)"
)
WHY_SHORT_SPAN: Final = "because the stall judge needs a longer stretch than the trigger's before a stop"
WHY_REPLANNED: Final = "and re-created as the policy plans now, without the pinned (hang) trigger"
# The comparisons under which a higher threshold fires sooner (a stricter alarm); the others fire sooner lower.
_FIRES_BELOW: Final = frozenset({"LessThanThreshold", "LessThanOrEqualToThreshold", "LessThanLowerThreshold"})


# ---- names and tags --------------------------------------------------------------------------------


class AlarmNaming(BaseModel):
    """How this stack names, tags and wires its alarms (every guard's: one prefix for the IAM scope and
    the alarm topic's policy)."""

    model_config = ConfigDict(frozen=True)

    prefix: str = Field(min_length=1, max_length=160)
    managed_by: str = Field(min_length=1, max_length=256)
    alarm_topic_arn: str | None = None

    def alarm_name(self, job_name: str, mark: str = "") -> str:
        """``<prefix><job><mark>``: job names cannot contain ``.``, so a mark starting with one never
        makes the name of another job's alarm."""
        return f"{self.prefix}{job_name}{mark}"

    def owns(self, alarm_name: str) -> bool:
        return alarm_name.startswith(self.prefix)

    def tags(self, job_name: str) -> list[dict[str, str]]:
        return [{"Key": TAG_JOB, "Value": job_name}, {"Key": TAG_MANAGED_BY, "Value": self.managed_by}]

    @property
    def managed_note(self) -> str:
        """The sentence every alarm description of this stack carries (``describes_ours`` looks for it)."""
        return f"Managed by {self.managed_by}; changes are overwritten."

    def describe(self, body: str) -> str:
        """An alarm's description: ``body``, then the ``managed_note``, within ``MAX_DESCRIPTION`` characters.
        A body too long loses its end (marked ``...``), never the note: an alarm without it is not this
        stack's to the reconciler (never deleted, re-put at every run) nor to the doctor. The note stays last
        because the body's first sentence is what the doctor shows an alarm watches."""
        whole = f"{body}. {self.managed_note}"
        if len(whole) <= MAX_DESCRIPTION:
            return whole
        tail = f"... {self.managed_note}"
        return body[: MAX_DESCRIPTION - len(tail)] + tail

    def describes_ours(self, description: str | None) -> bool:
        """Whether an alarm's description says this stack made it (its ``managed_note``, up to the ``;``, so that
        stack ``a`` does not take the alarms of stack ``a-idle-b`` for its own). A name under our prefix is not
        enough: another stack's prefix may start with ours (``<stack>-idle-b-idle-``), and the remainder of its
        alarm's name can read as a job name. What ``DescribeAlarms`` lists tells it, at no extra call."""
        return description is not None and f"Managed by {self.managed_by};" in description

    @property
    def actions(self) -> list[str]:
        """The alarm actions of a notifying alarm: the alarm topic (none when there is no topic)."""
        return [self.alarm_topic_arn] if self.alarm_topic_arn else []


def described_with(description: str, sentence: str) -> str:
    """``description`` (an alarm's, as ``AlarmNaming.describe`` made it) followed by ``sentence``, within
    ``MAX_DESCRIPTION`` characters. Too long, the description's body loses its end (marked ``...``) before its
    "Managed by" note, as ``describe`` cuts it: neither the note (which stack the alarm is) nor the sentence (a
    widened window's, which the reconciler reads: ``domain/reconcile.py`` ``WIDENED_MARK``) is cut. A
    description without the note loses its end before the sentence."""
    whole = f"{description}{sentence}"
    if len(whole) <= MAX_DESCRIPTION:
        return whole
    at = description.rfind(" Managed by ")
    if at < 0:
        return description[: max(0, MAX_DESCRIPTION - len(sentence))] + sentence
    body, note = description[:at].rstrip("."), description[at + 1 :]
    room = max(0, MAX_DESCRIPTION - len(sentence) - len(note) - len("... "))
    return f"{body[:room]}... {note}{sentence}"[:MAX_DESCRIPTION]


def alarm_tags_identify(tags: Mapping[str, str], naming: AlarmNaming) -> str | None:
    """The training job an alarm belongs to, if its tags say this stack manages it (and name a job: a tag
    edited by hand into something that cannot be a job name identifies nothing)."""
    if tags.get(TAG_MANAGED_BY) != naming.managed_by:
        return None
    job = tags.get(TAG_JOB)
    return job if isinstance(job, str) and is_valid_job_name(job) else None


def host_chunks(host_count: int, size: int = MAX_METRICS_PER_ALARM) -> list[tuple[int, int]]:
    """``algo-1..algo-N`` in runs of at most ``size`` (first, last), 1-based inclusive."""
    return [(first, min(first + size - 1, host_count)) for first in range(1, host_count + 1, size)]


# ---- more than 10 hosts: child alarms under one composite alarm ------------------------------------

# PutCompositeAlarm's AlarmRule (botocore's cloudwatch model: the member's max length, and its documentation:
# "can specify as many as 100 'children' alarms", "as many as 500 elements. Elements are child alarms, TRUE or
# FALSE statements, and parentheses"). Tests read all three back from botocore.
MAX_ALARM_RULE_LENGTH: Final = 10_240
MAX_COMPOSITE_CHILDREN: Final = 100
MAX_ALARM_RULE_ELEMENTS: Final = 500
CHILD_HOSTS_MARK: Final = ".hosts-"  # a child's name: <parent><mark><first>-<last>; job names hold no "."


class CompositeRule(StrEnum):
    """How a composite alarm over more than 10 hosts combines its children (one per 10 hosts)."""

    ALL_IDLE = "every child in ALARM"  # every host publishes GPUUtilization
    IDLE_WHERE_DATA = "no child OK and at least one in ALARM"  # some hosts publish none (heterogeneous)


def composite_rule(children: tuple[str, ...], rule: CompositeRule) -> str:
    """The ``AlarmRule`` over ``children`` (names quoted, as the API reference allows)."""
    if rule is CompositeRule.ALL_IDLE:
        return " AND ".join(f'ALARM("{name}")' for name in children)
    not_ok = " OR ".join(f'OK("{name}")' for name in children)
    some_idle = " OR ".join(f'ALARM("{name}")' for name in children)
    return f"(NOT ({not_ok})) AND ({some_idle})"


def rule_elements(rule: str) -> int:
    """The elements of an ``AlarmRule`` as CloudWatch counts them ("child alarms, TRUE or FALSE statements,
    and parentheses"), counted on the safe side: a function's own parentheses count too."""
    references = rule.count('("')  # our rules quote every name and hold no TRUE or FALSE
    return references * 3 + (rule.count("(") - references) * 2


def composite_limits_exceeded(children: Sequence[str], rule: str) -> dict[str, dict[str, int]]:
    """Which of CloudWatch's limits on a composite alarm rule ``rule`` over ``children`` exceeds (empty: none)."""
    limits = {
        "children": (len(children), MAX_COMPOSITE_CHILDREN),
        "rule_elements": (rule_elements(rule), MAX_ALARM_RULE_ELEMENTS),
        "rule_characters": (len(rule), MAX_ALARM_RULE_LENGTH),
    }
    return {k: {"needed": n, "limit": lim} for k, (n, lim) in limits.items() if n > lim}


def child_range(alarm_name: str, stem: str) -> tuple[int, int] | None:
    """``(first, last)`` of a child alarm named ``<stem><first>-<last>``; None for any other name."""
    if not alarm_name.startswith(stem):
        return None
    first, _, last = alarm_name[len(stem) :].partition("-")
    return (int(first), int(last)) if first.isdigit() and last.isdigit() else None


def deletion_units(names: Sequence[str]) -> list[list[str]]:
    """``names`` (one job's alarms) split into what must be deleted together: each alarm with its
    ``<name>.hosts-a-b`` children after it (a composite alarm before the alarms it watches), in the order
    of ``names``. A unit of one alarm is a metric alarm; a unit of several holds one composite alarm, and
    ``DeleteAlarms`` takes at most one composite per request (its API reference)."""
    units: dict[str, list[str]] = {}
    for name in names:
        parent = name.split(CHILD_HOSTS_MARK, 1)[0]
        unit = units.setdefault(parent, [])
        if name == parent:
            unit.insert(0, name)
        elif name not in unit:
            unit.append(name)
    return list(units.values())


def children_incomplete(parent: str, observed: Collection[str]) -> bool:
    """Whether the alarms seen of a parent (a plain alarm, or a composite over ``<parent>.hosts-a-b``
    children) lack one created with them: the parent itself, or a child between others."""
    ranges = sorted(r for r in (child_range(name, f"{parent}{CHILD_HOSTS_MARK}") for name in observed) if r)
    if not ranges:
        return parent not in observed
    return parent not in observed or ranges != host_chunks(ranges[-1][1])


# ---- the alarms a guard plans ----------------------------------------------------------------------


class AlarmKind(StrEnum):
    METRIC = "metric"  # PutMetricAlarm
    COMPOSITE = "composite"  # PutCompositeAlarm


class PlannedAlarm(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str
    kind: AlarmKind
    request: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.request["AlarmName"])


class AlarmPlan(BaseModel):
    """The exact requests that create (or update: both calls are upserts) one guard's alarms of one job,
    in creation order (a composite alarm after its children; an armer after what it arms)."""

    model_config = ConfigDict(frozen=True)

    job_name: str
    what: str = Field(description="What these alarms are, for messages: 'idle alarms'.")
    alarms: tuple[PlannedAlarm, ...]
    evidence: dict[str, Any]

    @property
    def names(self) -> tuple[str, ...]:
        """Deletion order: composite alarms first (a child cannot be deleted while one depends on it)."""
        composites = [a.name for a in self.alarms if a.kind is AlarmKind.COMPOSITE]
        return (*composites, *(a.name for a in self.alarms if a.kind is AlarmKind.METRIC))

    @property
    def metric_alarm_names(self) -> tuple[str, ...]:
        """The metric alarms (what ``DescribeAlarms`` lists, what ``SetAlarmState`` resets)."""
        return tuple(a.name for a in self.alarms if a.kind is AlarmKind.METRIC)

    @property
    def metric_requests(self) -> tuple[dict[str, Any], ...]:
        """The ``PutMetricAlarm`` requests, in order."""
        return tuple(a.request for a in self.alarms if a.kind is AlarmKind.METRIC)

    @property
    def metric_updates(self) -> tuple[dict[str, Any], ...]:
        """The ``PutMetricAlarm`` requests as an update of existing alarms puts them: without ``Tags`` (an update
        ignores them), in order."""
        return tuple({k: v for k, v in r.items() if k != "Tags"} for r in self.metric_requests)

    def metric_request(self, name: object) -> dict[str, Any] | None:
        """The ``PutMetricAlarm`` request of the metric alarm named ``name``; None: the plan has none so named."""
        return next((a.request for a in self.alarms if a.kind is AlarmKind.METRIC and a.name == name), None)

    @property
    def composite_request(self) -> dict[str, Any] | None:
        """The ``PutCompositeAlarm`` request, if the plan has one."""
        return next((a.request for a in self.alarms if a.kind is AlarmKind.COMPOSITE), None)

    def name_of(self, role: str) -> str:
        """The name of the (first) alarm of ``role``."""
        return next(a.name for a in self.alarms if a.role == role)

    def request(self) -> dict[str, Any]:
        """What `smgov explain` shows under ``alarm``: the one request itself, or every request by call."""
        if len(self.alarms) == 1:
            return dict(self.alarms[0].request)
        shown: dict[str, Any] = {"PutMetricAlarm": [dict(r) for r in self.metric_requests]}
        if self.composite_request is not None:
            shown["PutCompositeAlarm"] = dict(self.composite_request)
        return shown


class AlarmCode(StrEnum):
    """The codes every guard shares (the alarm lifecycle's decisions, and the stopper's superseded
    notification): a decision's code is ``<guard name>.<code>`` (``idle.alarm.create``)."""

    CREATE = "alarm.create"  # the job (re)entered Training: create (upsert) and reset its alarms
    EXEMPTED = "alarm.exempted"  # an exemption covers the job: no alarm
    DISABLED = "alarm.disabled"  # the guard is off for this job's policy
    JOB_GONE = "alarm.job-gone"  # the job no longer exists when re-read
    LATE_EVENT = "alarm.late-event"  # the job has already ended when re-read
    DELETE = "alarm.delete"  # the job ended: delete its alarms
    DELETE_DEFERRED = "alarm.delete-deferred"  # ... DeleteAlarms throttled: the reconciler deletes them
    # The stopper, for every guard: the alarm changed state again after the notification it judged, so the
    # reset that judgement wanted is not made (the newer state change is judged on its own notification).
    SUPERSEDED = "skip.superseded"
    # ... and a verdict to stop that no review confirmed on evidence read just now, when the alarm's current state
    # cannot be read: nothing is stopped on the notification alone (the delivery fails and is retried).
    STATE_UNREAD = "skip.state-unread"
    # ... and a stop or a notice on a composite alarm whose children treat missing data as ``missing`` (a
    # heterogeneous cluster above 10 hosts), when the hosts' GPU data does not cover the window the alarm judged
    # (domain/gpu_coverage.py): such a child goes to ALARM on a few breaching datapoints followed by silence.
    GPU_DATA_MISSING = "skip.gpu-data-missing"
    # ... and a firing of an alarm the guard does not plan for the job now (the policy changed since it was created:
    # the minimum-utilization guard's stop alarm after ``stop_after_notices: 0``): never a stop or a notice on it.
    UNPLANNED = "skip.unplanned-alarm"
    # ... and a stop of a guard whose stop needs its owner told first (``Guard.notice_before_stop``: the
    # minimum-utilization guard) when no notice of the stretch was sent: told now instead, no stop on it ...
    NOTIFY_BEFORE_STOP = "notify.before-stop"
    # ... or, its notice alarm not in ALARM (the stretch's notice unknown), neither stopped nor told here
    NOT_TOLD = "skip.not-told"


class NoAlarm(BaseModel):
    """Why a guard wants no alarm for a job; ``code`` is the guard's (``idle.alarm.no-gpu``).

    ``provisional``: the plan lacked a fact because a lookup could not answer (EC2 could not size an instance
    type): "cannot know now", not "not wanted". Nothing may remember it as the job's answer; the reconciler
    plans the job again at its next run."""

    model_config = ConfigDict(frozen=True)

    code: str
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    provisional: bool = False


def job_instance_facts(job: TrainingJob, resolved: Mapping[str, InstanceFacts] | None) -> dict[str, InstanceFacts]:
    """The facts of each of the job's instance types: EC2's (``resolved``) where our table does not know it."""
    return {
        g.instance_type: (resolved or {}).get(g.instance_type) or instance_facts(g.instance_type)
        for g in job.instance_groups
    }


def unsized(facts: Mapping[str, InstanceFacts], code: str, reason: str) -> NoAlarm | None:
    """No alarm (``code``) when a type of ``facts`` stays unknown: a guard never plans on a guessed GPU count.
    Provisional when every unknown type is one EC2 could not answer for (the reconciler plans the job again at its
    next run); None when every type is sized."""
    unknown = [t for t, f in facts.items() if f.accelerator is Accelerator.UNKNOWN]
    if not unknown:
        return None
    failed = [t for t in unknown if facts[t].lookup_failed]
    provisional = len(failed) == len(unknown)
    retry = " (EC2 could not answer: the reconciler asks again at its next run)" if provisional else ""
    return NoAlarm(
        code=code,
        reason=f"cannot size the GPUs of {', '.join(unknown)}{retry}: {reason}",
        evidence={
            "instance_types": {t: f.note for t, f in facts.items()},
            **({"lookup_failed": failed} if failed else {}),
        },
        provisional=provisional,
    )


class DesiredAlarms(BaseModel):
    """The alarms a guard wants for a job now (``names``; none: not wanted), and whether that is an answer.
    ``settled`` is false when the guard's plan lacked a fact a lookup could not give (EC2 could not size an
    instance type): "none" then means "cannot know now", and the reconciler must not remember the job as one
    that needs no alarm; it plans the job again at its next run."""

    model_config = ConfigDict(frozen=True)

    names: tuple[str, ...] = ()
    settled: bool = True


class MetricQuery(BaseModel):
    """One metric an alarm reads: ``Id`` in the alarm's metric math, name, dimensions."""

    model_config = ConfigDict(frozen=True)

    id: str
    metric_name: str
    dimensions: tuple[tuple[str, str], ...]

    def metric(self) -> dict[str, Any]:
        dimensions = [{"Name": name, "Value": value} for name, value in self.dimensions]
        return {"Namespace": NAMESPACE, "MetricName": self.metric_name, "Dimensions": dimensions}


class Arming(BaseModel):
    """How the stopper arms a guard whose stop alarm is created with its actions off (the progress guard): once
    the job's metric was published in its current stint in Training, its arming alarm (one ``period_seconds``
    period) notifies and the stopper resets the stop alarm, turns its actions on and the arming alarm's off.
    Putting the plan again undoes that arming; a put that may come after it (``may_have_armed``) puts ``armed``
    instead, the alarms as the stopper leaves them, and resets ``reset`` (``reset_reason``) as the stopper
    does, when ``metrics`` were published since the stint began. When that read fails, the put keeps what
    ``stop_alarm`` (the metric alarm the stopper turns on) holds now: ``armed`` if its actions are on."""

    model_config = ConfigDict(frozen=True)

    metrics: tuple[MetricQuery, ...]
    stat: str
    period_seconds: int
    stop_alarm: str
    armed: AlarmPlan
    reset: tuple[str, ...]
    reset_reason: str


def stint_started(event: TrainingJob, reread: TrainingJob) -> datetime | None:
    """When the job entered its current stint in ``Training``: the later of the last entry its ``Training``
    event shows and the one its re-read shows (a late event shows an earlier stint than the re-read; a re-read
    lagging the event, the stint before the event's). None: neither shows one."""
    starts = [start for start in (training_started_at(event), training_started_at(reread)) if start is not None]
    return max(starts) if starts else None


def period_start(moment: datetime, period_seconds: int) -> datetime:
    """The start of the alarm period ``moment`` falls in: CloudWatch aligns an alarm's periods to the clock (a
    one-minute period is a whole UTC minute)."""
    seconds = moment.timestamp()
    return moment - timedelta(seconds=seconds - math.floor(seconds / period_seconds) * period_seconds)


def may_have_armed(started: datetime, now: datetime, period_seconds: int) -> bool:
    """Whether an arming alarm of one ``period_seconds`` period can have notified by ``now`` about a datapoint
    of the stint that began at ``started``. CloudWatch evaluates a period once it is over: the first period
    that can hold a datapoint of the stint, the one ``started`` falls in, is evaluated at its end at the
    earliest. Before that no arming of this stint can exist (a put then is the stint's timely one: its
    ``Training`` event as delivered); from then on one may."""
    return now >= period_start(started, period_seconds) + timedelta(seconds=period_seconds)


class Combined(BaseModel):
    """How an alarm over several metrics combines them: metric math ``<function>([m1, m2, ...])``."""

    model_config = ConfigDict(frozen=True)

    id: str
    function: str  # MAX, SUM ...
    label: str


def metric_alarm_request(
    name: str,
    *,
    description: str,
    actions: list[str],
    actions_enabled: bool,
    evaluation_periods: int,
    datapoints_to_alarm: int,
    threshold: float,
    comparison: str,
    treat_missing_data: str,
    tags: list[dict[str, str]],
    queries: Sequence[MetricQuery],
    stat: str,
    period: int,
    combined: Combined,
    single_metric: bool,
) -> dict[str, Any]:
    """A ``PutMetricAlarm`` request over ``queries`` (at most ``MAX_METRICS_PER_ALARM``): a plain
    single-metric alarm when ``single_metric``, else metric math that ``combined`` them. ``description``
    comes from ``AlarmNaming.describe`` (it fits, and keeps the stack's note)."""
    request: dict[str, Any] = {
        "AlarmName": name,
        "AlarmDescription": description,
        "ActionsEnabled": actions_enabled,
        "AlarmActions": actions,
        "EvaluationPeriods": evaluation_periods,
        "DatapointsToAlarm": datapoints_to_alarm,
        "Threshold": threshold,
        "ComparisonOperator": comparison,
        "TreatMissingData": treat_missing_data,
        "Tags": tags,
    }
    if single_metric:
        request.update(queries[0].metric(), Statistic=stat, Period=period)
        return request
    metrics: list[dict[str, Any]] = [
        {"Id": q.id, "MetricStat": {"Metric": q.metric(), "Period": period, "Stat": stat}, "ReturnData": False}
        for q in queries
    ]
    metrics.append(
        {
            "Id": combined.id,
            "Expression": f"{combined.function}([" + ", ".join(q.id for q in queries) + "])",
            "Label": combined.label,
            "ReturnData": True,
        }
    )
    request["Metrics"] = metrics
    return request


def _alarm_terms(evidence: Mapping[str, Any]) -> tuple[float, int, int, int] | None:
    """(threshold, period seconds, evaluation periods, datapoints to alarm) of the alarm a notification
    describes (``AlarmNotification.evidence``); None when it does not say them all (a composite alarm)."""
    threshold = evidence.get("threshold")
    numbers = [evidence.get(k) for k in ("period_seconds", "evaluation_periods", "datapoints_to_alarm")]
    if not isinstance(threshold, int | float) or not all(isinstance(n, int) and n > 0 for n in numbers):
        return None
    period, periods, datapoints = (int(n) for n in numbers)  # type: ignore[arg-type]
    return float(threshold), period, periods, datapoints


def _query_period(request: Mapping[str, Any]) -> int | None:
    """The period of a metric-math alarm's queries (its request has no top-level ``Period``)."""
    for query in request.get("Metrics", ()):
        stat = query.get("MetricStat")
        if stat and stat.get("Period"):
            return int(stat["Period"])
    return None


class DescribedAlarm(BaseModel):
    """A metric alarm as ``DescribeAlarms`` gives it, for what its notification does not say: a composite's
    notification names its triggering child but repeats neither the child's description nor its terms.
    ``terms``: its threshold, comparison and periods in the form a notification's evidence gives them
    (``metric_alarm_terms``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None = None
    terms: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, name: str, alarm: Mapping[str, Any]) -> DescribedAlarm:
        """The alarm named ``name`` as a ``DescribeAlarms`` answer or a ``PutMetricAlarm`` request spells it (the
        same fields): its description (an empty one is none) and its terms."""
        description = str(alarm.get("AlarmDescription") or "") or None
        return cls(name=name, description=description, terms=metric_alarm_terms(alarm))


def metric_alarm_terms(alarm: Mapping[str, Any]) -> dict[str, Any]:
    """A metric alarm's terms as its ``PutMetricAlarm`` request or ``DescribeAlarms`` answer spells them (the
    same fields), in the keys of a notification's evidence (``threshold``, ``comparison``, ``period_seconds``,
    ``evaluation_periods``, ``datapoints_to_alarm``); the fields it lacks are left out."""
    period = alarm.get("Period") or _query_period(alarm)
    terms = {
        "threshold": alarm.get("Threshold"),
        "comparison": alarm.get("ComparisonOperator"),
        "period_seconds": period,
        "evaluation_periods": alarm.get("EvaluationPeriods"),
        "datapoints_to_alarm": alarm.get("DatapointsToAlarm"),
    }
    return {k: v for k, v in terms.items() if v is not None}


# ---- judging a notification ------------------------------------------------------------------------


class AlarmState(NamedTuple):
    """An alarm's state value and when it last changed (``DescribeAlarms``' ``StateValue`` and
    ``StateTransitionedTimestamp``)."""

    value: str
    changed_at: datetime


def superseded(changed_at: datetime | None, current: AlarmState | None) -> bool:
    """Did the alarm change state again after the state change a notification reports? Only when both
    times are known: a notification without ``StateChangeTime`` or an alarm whose state cannot be read is
    taken as current (what the stopper did before it could tell)."""
    if changed_at is None or current is None:
        return False
    return current.changed_at - changed_at > SAME_STATE_CHANGE


def training_started_at(job: TrainingJob) -> datetime | None:
    """When the job last entered ``Training`` (a Spot restart starts the clock again)."""
    starts = [t.start_time for t in job.transitions if t.status == "Training" and t.start_time is not None]
    if starts:
        return max(starts)
    return job.training_start_time


def trained_less_than(job: TrainingJob, as_of: datetime, needed: timedelta) -> str | None:
    """When the job last (re)entered ``Training``, as a judgement's reason names it (``an unknown time``
    when no start is known), if that was less than ``needed`` before ``as_of``; None when it has been in
    ``Training`` that long (a guard may judge it)."""
    started = training_started_at(job)
    if started is not None and as_of - started >= needed:
        return None
    return "an unknown time" if started is None else started.isoformat()


def is_training(job: TrainingJob) -> bool:
    return job.status == "InProgress" and job.secondary_status == "Training"


class Verdict(StrEnum):
    """What the stopper does with a guard's judgement (and which audit outcome it records)."""

    STOP = "stop"  # stop the job (enforce) or record that it would be (audit)
    ARM = "arm"  # change the guard's alarms (reset, arm, disarm) and record it done
    ALREADY_ENDED = "already-ended"  # nothing to stop
    DISABLED = "disabled"  # the policy no longer wants the guard for this job
    NOT_TRAINING = "not-training"  # e.g. Uploading, Interrupted: the signal is expected to be quiet
    STALE = "stale"  # the notification is too old to act on
    TOO_EARLY = "too-early"  # (re)entered Training too recently to judge
    EXEMPTED = "exempted"  # a policy exemption covers the job
    VETOED = "vetoed"  # a review of the verdict to stop found evidence against it (service StopReview)
    NOTIFY = "notify"  # tell the owner (a nudge, no stop); its alarms may be reset to notify again later
    SUPERSEDED = "superseded"  # the alarm changed state again since: the judgement's reset is not made
    UNCONFIRMED = "unconfirmed"  # a stop resting on the notification alone, its alarm's state unread: not made


class Notice(BaseModel):
    """The facts a guard judges a notification by (gathered by the stopper; the job was re-read)."""

    model_config = ConfigDict(frozen=True)

    job: TrainingJob
    mode: Mode
    now: datetime
    naming: AlarmNaming
    alarm_changed_at: datetime | None = None
    exempted_by: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict, description="From the alarm message.")
    savings: dict[str, Any] = Field(default_factory=dict, description="The estimate if the job is stopped.")
    metric_names: tuple[str, ...] | None = Field(default=None, description="The metrics the alarm read.")
    resolved: dict[str, InstanceFacts] = Field(
        default_factory=dict,
        description="EC2's facts of the job's instance types our table does not know (as its alarms were planned).",
    )
    fired_child: DescribedAlarm | None = Field(
        default=None,
        description="A composite alarm's triggering child as DescribeAlarms gave it (the notification repeats no "
        "child's definition); None: a metric alarm's notification, or the child not read.",
    )
    fired_metrics: frozenset[tuple[Any, ...]] | None = Field(
        default=None,
        description="The metrics the metric alarm that fired reads, as its notification repeats them (each one's "
        "namespace, name and dimensions: domain/alarm_compare.py watched_metrics); None: not repeated (a composite).",
    )
    unjudged_pinned: bool = Field(
        default=False,
        description="The alarm that fired may also fire on pinned GPUs, which the guard's plan under the current "
        "policy does not (created while the stall judge was on and the trigger planned, or its definition could "
        "not be read).",
    )

    @property
    def as_of(self) -> datetime:
        """When the window the notification reports ended: its alarm's state change, or ``now`` when that is
        unknown or later (clocks a moment apart). A notification handled late (an SQS retry, a late SNS delivery)
        is judged as of then: judged as of ``now``, the minutes since would count towards a window that in fact
        reached before the job (re)entered ``Training`` or into its grace period."""
        changed = self.alarm_changed_at
        return self.now if changed is None else min(self.now, changed)


class GuardVerdict(BaseModel):
    """A guard's judgement: the decision (recorded in the audit), and what the stopper must do."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    decision: Decision
    rewindow: tuple[dict[str, Any], ...] = ()  # PutMetricAlarm updates of existing alarms (before the reset)
    reset: tuple[str, ...] = ()  # alarms to set back to OK (first), with ``reset_reason``
    reset_reason: str = ""
    arm: tuple[str, ...] = ()  # alarms whose actions to enable (second)
    disarm: tuple[str, ...] = ()  # alarms whose actions to disable (last)
    # a verdict to stop that a review (the stall judge) confirmed on evidence it read just now, not only on the
    # notification: the stopper need not ask whether the alarm has since left ALARM
    confirmed: bool = False

    @property
    def stops(self) -> bool:
        return self.verdict is Verdict.STOP

    @property
    def holds(self) -> bool:
        """Whether this judgement settles the alarm's stretch without acting on the job: a stop not carried out
        (audit mode), an exempt job, the guard switched off. Judged again while the same stretch lasts, the
        job would get the same record and the same message again, with the same savings counted once more:
        the alarm that fired is muted instead (``Guard.muted``), left in ALARM with its actions off."""
        return self.verdict in (Verdict.DISABLED, Verdict.EXEMPTED) or (self.stops and not self.decision.acts)


class Judgement:
    """Builds the verdicts of one judgement: the guard's rule, the mode and the evidence are shared."""

    def __init__(self, rule: str, mode: Mode, evidence: Mapping[str, Any]) -> None:
        self.rule = rule
        self.mode = mode
        self.evidence = dict(evidence)

    def __call__(
        self,
        verdict: Verdict,
        action: Action,
        code: str,
        reason: str,
        *,
        remedy: str | None = None,
        exempted_by: str | None = None,
        **effects: Any,
    ) -> GuardVerdict:
        decision = Decision(
            rule=self.rule,
            code=code,
            action=action,
            mode=self.mode,
            reason=reason,
            remedy=remedy,
            evidence=self.evidence,
            exempted_by=exempted_by,
        )
        return GuardVerdict(verdict=verdict, decision=decision, **effects)

    def stop(
        self, code: str, exempted_code: str, reason: str, *, remedy: str | None, exempted_by: str | None
    ) -> GuardVerdict:
        """The verdict to stop: ``STOP``, or ``EXEMPTED`` (same action, not acted on) under an exemption."""
        if exempted_by is not None:
            return self(
                Verdict.EXEMPTED, Action.STOP, exempted_code, reason, remedy=remedy, exempted_by=exempted_by
            )
        return self(Verdict.STOP, Action.STOP, code, reason, remedy=remedy)


class Stale(NamedTuple):
    """How a guard treats a stale notification: reset these alarms, with this reason; "still" = "idle"."""

    reset: tuple[str, ...]
    reset_reason: str
    still: str


def preconditions(
    judgement: Judgement,
    notice: Notice,
    *,
    enabled: bool,
    title: str,
    codes: Mapping[Verdict, str],
    not_training: str,
    ended: tuple[Action, str] = (Action.STOP, "nothing to stop"),
    stale: Stale | None = None,
) -> GuardVerdict | None:
    """The checks every guard makes first, in order: the job has already ended; the guard is disabled;
    the job is not ``Training`` (``not_training`` says why that is fine); the notification is stale
    (checked when ``stale`` is given). ``None``: none applies."""
    job = notice.job
    if job.status != "InProgress":
        action, what = ended
        return judgement(
            Verdict.ALREADY_ENDED, action, codes[Verdict.ALREADY_ENDED], f"the job is already {job.status}; {what}"
        )
    if not enabled:
        return judgement(
            Verdict.DISABLED,
            Action.NONE,
            codes[Verdict.DISABLED],
            f"the {title} is disabled for this job's policy",
        )
    if job.secondary_status != "Training":
        return judgement(
            Verdict.NOT_TRAINING,
            Action.NONE,
            codes[Verdict.NOT_TRAINING],
            f"the job is {job.secondary_status}, not Training: {not_training}",
        )
    changed = notice.alarm_changed_at
    if stale is not None and changed is not None and notice.now - changed > STALE_AFTER:
        return judgement(
            Verdict.STALE,
            Action.NONE,
            codes[Verdict.STALE],
            f"the alarm notification is from {changed.isoformat()}, too old to act on; the alarm is reset and "
            f"fires again if the job is still {stale.still}",
            reset=stale.reset,
            reset_reason=stale.reset_reason,
        )
    return None


# ---- the guard -------------------------------------------------------------------------------------


class GuardConfig(BaseModel):
    """A guard's policy section: every guard can be switched off and given its own mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy mode for this guard only.")

    def mode_or(self, default: Mode) -> Mode:
        return self.mode or default


C = TypeVar("C", bound=GuardConfig)
T = TypeVar("T", bound=BaseModel)


def judged_trigger(config: T, judge: Any) -> T:
    """A guard section with a ``trigger_minutes`` (its alarm fires before the window, the stall judge
    decides) as the judge allows it: none without a judge (the alarm alone must mean the whole window), the
    judge's ``min_silence_minutes`` (the shortest silence a hang is confirmed at) when the section sets none."""
    trigger = getattr(config, "trigger_minutes", None)
    if judge is None or not judge.enabled:
        return config.model_copy(update={"trigger_minutes": None}) if trigger is not None else config
    if trigger is None:
        return config.model_copy(update={"trigger_minutes": judge.min_silence_minutes})
    return config


class Sections(Protocol):
    """What a guard reads of the (effective) policy: its mode, and its section by name (``Policy``, which
    holds a section per registered guard, imports the guards: they do not import it)."""

    @property
    def mode(self) -> Mode: ...


class Guard(ABC, Generic[C]):
    """One alarm guard. Subclasses declare the class attributes and implement the abstract methods;
    registering an instance in ``domain/guards/registry.py`` plugs it into the policy (its ``section``),
    the job-events lifecycle, the stopper and the reconciler."""

    name: ClassVar[str]  # "idle": its decision codes start with it; its stop notifications are "idle-stop"
    rule_id: ClassVar[str]  # the rule in audit records, exemptions and metrics: "idle-guard"
    section: ClassVar[str | None]  # its policy section ("idle"); None: always its defaults
    config_type: ClassVar[type[GuardConfig]]
    title: ClassVar[str]  # "idle guard"
    what: ClassVar[str]  # its alarms in messages: "idle alarms"
    rearm_reason: ClassVar[str]  # StateReason of the reset after (re)creating its alarms
    sized_by_hosts: ClassVar[bool] = False  # its alarm names depend on the job's host count
    # Off for a job's policy: the lifecycle makes no call and writes no record for the job (no re-read on
    # Training, no deletion at the end; the reconciler deletes what a later policy change leaves behind).
    # For a guard that is off by default, so that it costs nothing where it is not used.
    quiet_when_disabled: ClassVar[bool] = False

    def code(self, code: AlarmCode) -> str:
        return f"{self.name}.{code.value}"

    # ---- policy ---------------------------------------------------------------------------------

    def config(self, policy: Sections) -> C:
        """This guard's section of the (effective) policy; its defaults when it has no section."""
        if self.section is None:
            return self.config_type()  # type: ignore[return-value]
        return getattr(policy, self.section)  # type: ignore[no-any-return]

    def mode(self, policy: Sections) -> Mode:
        return self.config(policy).mode_or(policy.mode)

    def warnings(self, config: C, where: str) -> list[str]:
        """What this guard's section ``config`` (at ``where`` in the document) allows but probably does not mean
        (``Policy.warnings``: ``smgov policy validate`` prints them)."""
        return []

    # ---- alarms ---------------------------------------------------------------------------------

    def watchable(self, job: TrainingJob) -> bool:
        """Whether the job can have alarms of this guard at all, from the event alone (no re-read): a job
        that cannot is neither re-read on Training nor has alarms deleted when it ends."""
        return True

    @abstractmethod
    def plan(self, job: TrainingJob, config: C, naming: AlarmNaming) -> AlarmPlan | NoAlarm: ...

    def plans_pinned_trigger(self, config: C) -> bool:
        """Whether the guard's alarms under ``config`` also fire on pinned GPUs (a hang trigger the judge
        decides)."""
        return False

    def plan_for(self, notice: Notice, config: C) -> AlarmPlan | NoAlarm:
        """The plan of the notified job's alarms as they were created (a guard that plans with EC2's facts
        for types our table lacks takes them from the notice)."""
        return self.plan(notice.job, config, notice.naming)

    def arming(self, plan: AlarmPlan) -> Arming | None:
        """How ``plan``'s stop alarm, created disarmed, is armed once the job's metric is published (None: the
        guard creates its alarms as they act, and putting them again undoes nothing)."""
        return None

    @abstractmethod
    def watching(self, job: TrainingJob, config: C, plan: AlarmPlan) -> str:
        """The reason of the decision to create ``plan``: what the alarms watch."""

    @abstractmethod
    def owned_alarms(self, job_name: str, hosts: int, naming: AlarmNaming) -> tuple[str, ...]:
        """Every alarm this guard may have created for the job, in deletion order."""

    @abstractmethod
    def role_of(self, alarm_name: str, job_name: str, naming: AlarmNaming) -> str | None:
        """Which of this guard's alarms ``alarm_name`` is for ``job_name`` (None: not one of them)."""

    def incomplete(self, job_name: str, observed: Collection[str], naming: AlarmNaming) -> bool:
        """Whether the alarms of this guard seen for the job (at least one, metric and composite alarms
        alike) lack one that is always created with them: the reconciler then re-creates the whole plan.
        Decided from the names alone (no read of the job). By default every owned alarm goes together."""
        return not set(self.owned_alarms(job_name, 0, naming)) <= set(observed)

    def acts_on(self, role: str) -> bool:
        """Whether a notification of this role is judged (an alarm without actions never notifies)."""
        return True

    def rearm_targets(
        self, alarm_name: str, job_name: str, observed: Collection[str], naming: AlarmNaming
    ) -> tuple[str, ...]:
        """What to reset so that ``alarm_name``, left in ALARM, notifies again if its condition lasts (the
        reconciler's re-arm). A metric alarm returns to its actual state after a reset: itself."""
        return (alarm_name,)

    def rejudged(self, role: str) -> bool:
        """Whether an alarm of this role is judged again when left in ALARM with its actions on (the reconciler
        re-arms it: the stall judge's vetoes, a lost notification), and so is muted after a judgement that
        ``holds`` its stretch: an alarm whose notification the stall judge decides, or that arms one."""
        return self.stall_kind is not None and self.acts_on(role)

    def mutes(self, role: str) -> bool:
        """Whether the stopper mutes an alarm of this role after a judgement that ``holds`` its stretch (audit
        mode's would-stop, an exempt job, the guard off), so that the stretch is judged once and the reconciler
        turns it on again when the stretch ends or the guard can act: every re-judged alarm by default (left in
        ALARM with its actions on, the re-arm would judge it again at every run). A guard whose stop alarm is not
        re-judged mutes it too: left in ALARM with its actions on it would never be judged again in its stretch,
        not even once the guard can act (an audit team switched to enforce while the job stays below)."""
        return self.rejudged(role)

    def muted(self, job_name: str, actions_off: Collection[str], naming: AlarmNaming) -> tuple[str, ...]:
        """This guard's alarms of the job, among those whose actions are off, that the stopper muted after a
        judgement that held their stretch (``GuardVerdict.holds``): the reconciler turns their actions on again
        when the stretch has ended or a firing could act on the job now. By default every alarm of a role it
        ``mutes`` whose actions are off (a guard that plans them with their actions on)."""
        return tuple(
            sorted(
                name
                for name in actions_off
                if (role := self.role_of(name, job_name, naming)) is not None and self.mutes(role)
            )
        )

    # ---- judging --------------------------------------------------------------------------------

    def reset_on_entry(self, role: str) -> bool:
        """Whether the lifecycle resets an alarm of this role when the job (re)enters ``Training`` again (a Spot
        restart, a late or repeated ``Training`` event, the reconciler's repair): every alarm by default, so that an
        ALARM kept through the pause notifies again. Not an alarm whose ALARM means "the owner was told of this
        stretch" (the minimum-utilization guard's notice alarm): reset, it would fire again within a minute and tell
        the owner again of the same stretch."""
        return True

    def notice_before_stop(self, job_name: str, naming: AlarmNaming) -> str | None:
        """The alarm whose notice must have been sent to the job's owner in the stretch a stop ends, before the
        stopper carries out a stop of this guard (None: a stop stands on its own evidence)."""
        return None

    def stops_from(self, role: str) -> bool:
        """Whether a notification of this role may stop the job (its decisions carry the savings estimate
        and its exemptions apply)."""
        return True

    @abstractmethod
    def judge(self, role: str, notice: Notice, config: C) -> GuardVerdict: ...

    # ---- the stall judge (domain/stall_judge.py, service/stall_judge.py) -------------------------

    stall_kind: ClassVar[StallKind | None] = None  # what its stop claims; None: its stops are not judged

    def evidence_window(self, config: C) -> timedelta | None:
        """How far back the judge reads the job's signals before confirming a stop."""
        return None

    def fired_span(self, config: C, notice: Notice) -> timedelta | None:
        """How long the condition held when the alarm fired, as far as the judge may count it: the alarm's
        window as its notification repeats it (a trigger shorter than ``evidence_window``, or a window the
        judge widened), at most ``evidence_window``; that window when the notification does not say (a
        composite alarm: never a trigger)."""
        window = self.evidence_window(config)
        periods, seconds = notice.evidence.get("evaluation_periods"), notice.evidence.get("period_seconds")
        if window is None or not isinstance(periods, int) or not isinstance(seconds, int):
            return window
        if periods < 1 or seconds < 1:
            return window
        return min(window, timedelta(seconds=periods * seconds))

    def unjudged_trigger(
        self,
        judgement: Judgement,
        notice: Notice,
        config: C,
        span: timedelta,
        *,
        judged: bool,
        code: str,
        reset_reason: str,
    ) -> GuardVerdict | None:
        """The verdict on an alarm that fired on its trigger (``span``, shorter than ``evidence_window``: it was
        created while the stall judge was on) when no judge will decide now (``judged`` false): a stop needs the
        whole window, so the alarm is widened to it and reset; never a stop. None: not such a case."""
        window = self.evidence_window(config)
        if judged or window is None or span >= window:
            return None
        minutes = math.ceil(window.total_seconds() / 60)
        return judgement(
            Verdict.TOO_EARLY,
            Action.NONE,
            code,
            f"the {self.title}'s alarm fired on its {span.total_seconds() / 60:g}-minute trigger and the stall judge "
            f"is off: a stop needs the {minutes}-minute window; the alarm is widened to it and reset",
            rewindow=self.widened(notice, config, minutes, WHY_JUDGE_OFF),
            reset=self.rejudge_alarms(notice.job, notice.naming),
            reset_reason=reset_reason,
        )

    def rejudge_alarms(self, job: TrainingJob, naming: AlarmNaming) -> tuple[str, ...]:
        """The alarms to reset when the judge does not confirm a stop (they fire again if it persists)."""
        return ()

    def stricter_than_planned(self, notice: Notice, config: C) -> dict[str, Any] | None:
        """How the metric alarm that fired is stricter than the one the guard plans for the job now, as its
        notification repeats its definition (a composite's: its triggering child's, ``Notice.fired_child``, against
        the planned child of that name): a threshold that fires sooner (higher under a "less than" comparison), or
        less breaching time needed (``DatapointsToAlarm`` x period), or the same within a longer range. An alarm
        is planned when the job enters ``Training`` and kept: a policy made laxer since (a lowered idle threshold,
        a longer window) leaves it firing on the old terms. None: not stricter (laxer, equal), or nothing to
        compare (a composite's child not read, a definition without its terms; the guard plans no such alarm
        for the job now)."""
        plan = self.plan_for(notice, config)
        if not isinstance(plan, AlarmPlan):
            return None
        child = notice.fired_child
        fired = child.name if child is not None else notice.evidence.get("alarm")
        planned = plan.metric_request(fired)
        terms = _alarm_terms(child.terms if child is not None else notice.evidence)
        if planned is None or terms is None:
            return None
        threshold, period, periods, datapoints = terms
        p_threshold = float(planned["Threshold"])
        p_period = int(planned.get("Period") or _query_period(planned) or 60)
        p_periods, p_datapoints = int(planned["EvaluationPeriods"]), int(planned["DatapointsToAlarm"])
        below = planned["ComparisonOperator"] in _FIRES_BELOW
        sooner = threshold > p_threshold if below else threshold < p_threshold
        breach, p_breach = datapoints * period, p_datapoints * p_period
        shorter = breach < p_breach or (breach == p_breach and periods * period > p_periods * p_period)
        if not sooner and not shorter:
            return None
        return {
            **({"child_alarm": child.name} if child is not None else {}),
            "alarm_threshold": threshold,
            "planned_threshold": p_threshold,
            "alarm_window": f"{datapoints} of {periods} x {period}s",
            "planned_window": f"{p_datapoints} of {p_periods} x {p_period}s",
            "stricter_in": [w for w, s in (("threshold", sooner), ("window", shorter)) if s],
        }

    def unplanned(self, notice: Notice, config: C) -> bool:
        """Whether the alarm that fired (its notification's ``alarm``: a composite's own name) is one the guard does
        not plan for the job now: a plan without it, or no alarm at all. An alarm is planned when the job enters
        ``Training`` and kept, so a policy changed since may leave one the plan no longer has (the
        minimum-utilization guard's stop alarm once a team sets ``stop_after_notices: 0``: "never a stop"). False
        when the notification does not name it, or when the plan lacked a fact a lookup could not give now
        (``NoAlarm.provisional``: judged as before, on the alarm as created)."""
        fired = notice.evidence.get("alarm")
        if not isinstance(fired, str):
            return False
        plan = self.plan_for(notice, config)
        if isinstance(plan, NoAlarm):
            return not plan.provisional
        return fired not in plan.names

    def replanned(
        self, notice: Notice, config: C, alarms: tuple[str, ...] | None = None
    ) -> tuple[dict[str, Any], ...]:
        """The ``PutMetricAlarm`` updates that put ``alarms`` (default: those ``rejudge_alarms`` names) back as
        the guard plans them for the job now (its requests without tags: an update ignores them), armed."""
        plan = self.plan_for(notice, config)
        if not isinstance(plan, AlarmPlan):
            return ()
        wanted = set(alarms if alarms is not None else self.rejudge_alarms(notice.job, notice.naming))
        return tuple({**r, "ActionsEnabled": True} for r in plan.metric_updates if r["AlarmName"] in wanted)

    def stricter_alarm(
        self,
        judgement: Judgement,
        notice: Notice,
        config: C,
        *,
        code: str,
        reset_reason: str,
        alarms: tuple[str, ...] | None = None,
    ) -> GuardVerdict | None:
        """The verdict on an alarm stricter than the current plan (``stricter_than_planned``): never a stop (or a
        notice) on terms the policy no longer holds; its metric alarms (``alarms``, default ``rejudge_alarms``)
        are put again as planned now and reset, so the job is judged again on the current terms if it
        persists. None: not such a case (judge as usual). A guard asks it before any verdict to stop (exempted or
        not) or to tell: the stopper reads a composite's triggering child (``Notice.fired_child``) only when a
        first judgement without it gives one of those, and judges again with it. An alarm the guard does not plan
        for the job now at all (``unplanned``) never stops or tells either (``<guard>.skip.unplanned-alarm``): nothing
        is put or reset (there is no plan to put it as), and it is not muted, which would have the reconciler turn
        it on and reset it again at every run while the guard can act on the job; left in ``ALARM``, it notifies
        again only after a new state change (a guard whose alarms the reconciler re-arms, at most every
        ``judge.rearm_minutes``)."""
        if self.unplanned(notice, config):
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                self.code(AlarmCode.UNPLANNED),
                f"the {self.title}'s alarm {notice.evidence.get('alarm')} is not among the alarms the policy plans for "
                "the job now (the policy changed after it was created): never a stop or a notice on an alarm the "
                "policy no longer wants; it is left as it is and acts again only on a new state change",
            )
        drift = self.stricter_than_planned(notice, config)
        if drift is None:
            return None
        names = alarms if alarms is not None else self.rejudge_alarms(notice.job, notice.naming)
        replanned = self.replanned(notice, config, names)
        judgement.evidence.update(drift)
        return judgement(
            Verdict.TOO_EARLY,
            Action.NONE,
            code,
            f"the {self.title}'s alarm fired on stricter terms than the policy plans for the job now (threshold "
            f"{drift['alarm_threshold']:g}, {drift['alarm_window']}; planned: {drift['planned_threshold']:g}, "
            f"{drift['planned_window']}): the policy changed after the alarm was created; the alarms are put again "
            "as planned now and reset, and a stop needs them to fire again",
            rewindow=replanned,
            reset=tuple(r["AlarmName"] for r in replanned) or names,
            reset_reason=reset_reason,
        )

    def metrics_moved(
        self, judgement: Judgement, notice: Notice, config: C, *, code: str, reset_reason: str
    ) -> GuardVerdict | None:
        """The verdict on a notification of an alarm that reads other metrics (namespace, name, dimensions:
        ``Notice.fired_metrics``) than the guard plans for it now, when the guard arms its stop alarm once the job
        publishes what it watches (``arming``: the progress guard, after a policy changed its metric names). Every
        put of the stop alarm from the plan (``widened``, ``replanned``) turns its actions on, which would arm it on
        metrics the job may never have published: missing data breaching, it would fire after its window and stop
        a healthy job. So never a stop, a question to the judge or a widening on it: the guard's metric alarms are
        put as the job's entry into ``Training`` puts them, the plan (the stop alarm's actions off, the arming
        alarm's on), and reset (``reset_reason``), so that the arming alarm arms the guard once the job publishes
        the planned metrics. None: not such a case (the metrics unrepeated, the same, or nothing planned now)."""
        fired = notice.fired_metrics
        plan = self.plan_for(notice, config) if fired is not None else None
        if fired is None or not isinstance(plan, AlarmPlan) or self.arming(plan) is None:
            return None
        planned = plan.metric_request(notice.evidence.get("alarm"))
        if planned is None or not reads_other_metrics(fired, planned):
            return None
        watched = watched_metrics(alarm_definition(planned))
        requests = plan.metric_updates
        judgement.evidence.update(
            alarm_metrics=sorted(str(metric[1]) for metric in fired),
            planned_metrics=sorted(str(metric[1]) for metric in watched),
            retargeted={str(r["AlarmName"]): bool(r.get("ActionsEnabled", True)) for r in requests},
        )
        return judgement(
            Verdict.TOO_EARLY,
            Action.NONE,
            code,
            f"the {self.title}'s alarm fired on other metrics ({', '.join(judgement.evidence['alarm_metrics'])}) "
            f"than the policy has it watch for the job now ({', '.join(judgement.evidence['planned_metrics'])}): "
            "the policy changed after it was armed, and armed on metrics the job may never have published it would "
            "stop a healthy job; its alarms are put again as the job's entry into Training puts them (the stall "
            "alarm off until the new metrics are published) and reset, never a stop on this notification",
            rewindow=requests,
            reset=plan.metric_alarm_names,
            reset_reason=reset_reason,
        )

    def stall_threshold(self, job: TrainingJob, config: C, notice: Notice) -> float | None:
        """The per-host value below which the alarm's metric counted as stalled (None: not a threshold)."""
        return None

    def pinned_threshold(self, job: TrainingJob, config: C, notice: Notice) -> float | None:
        """The per-host value at or above which every host counted as pinned busy, when the guard's alarm
        also fires on pinned GPUs (a hang trigger: the judge then judges a hang); None: it does not."""
        return None

    def hang_verdict(self, verdict: GuardVerdict, config: C, span: timedelta) -> GuardVerdict:
        """The stop verdict when the judge confirmed a hang behind a pinned trigger that fired after ``span``
        (default: unchanged)."""
        return verdict

    def widened(
        self, notice: Notice, config: C, minutes: int, why: str = WHY_VETOED
    ) -> tuple[dict[str, Any], ...]:
        """The ``PutMetricAlarm`` updates that give the alarms ``rejudge_alarms`` names a window of ``minutes``
        (the stall judge's re-judging after a veto, or a trigger widened to the window): the guard's own
        requests with more evaluation periods (an M-of-N alarm keeps its ratio), armed (they fired), without
        tags (an update ignores them, and needs no ``cloudwatch:TagResource``). ``why`` ends the description's
        "Widened to N minutes" sentence, for whoever reads the alarm in the console. Empty when the guard
        plans no alarm for the job now."""
        out: list[dict[str, Any]] = []
        for request in self.replanned(notice, config):
            period = int(request.get("Period") or _query_period(request) or 60)
            periods = min(max(1, -(-minutes * 60 // period)), MAX_EVALUATION_SECONDS // period)
            ratio = request["DatapointsToAlarm"] / request["EvaluationPeriods"]
            request.update(
                EvaluationPeriods=periods,
                DatapointsToAlarm=max(1, min(periods, round(periods * ratio))),
                AlarmDescription=described_with(  # a description at the limit keeps the sentence and the note
                    str(request.get("AlarmDescription", "")),
                    f" Widened to {minutes} minutes {why}; back to the guard's window when the job (re)enters "
                    "Training.",
                ),
            )
            out.append(request)
        return tuple(out)

    @abstractmethod
    def symptom(self, config: C) -> tuple[str, str]:
        """What a stop tells the owner: (after "was stopped: ", after "Training job <name> ")."""
