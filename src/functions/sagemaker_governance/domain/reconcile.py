"""The reconciler's pure part: which job an alarm belongs to, the work list of one run, its order.

The reconciler is level-triggered, like a controller: it compares what exists (this stack's alarms, the
training jobs in progress) with what should exist and repairs the difference, whatever event was lost.

Order and time budget. A run works through one item per job (every job in progress and every job that
has one of this stack's alarms), in a stable order: the job names sorted, as a ring. Each run starts at
a different point of the ring, ``frac(run x (sqrt(5) - 1) / 2)`` of the way round, and goes round
until its time budget is spent. No cursor is stored anywhere: by the three-gap theorem the start points
of ``N`` consecutive runs leave no gap larger than about ``2.62 / N`` of the ring, so when every run
gets through at least a fraction ``f`` of the items, each item is visited within ``3 / f`` runs (and a
run normally gets through all of them). Nothing is lost when a run stops early: the next run looks again.

Deleting an ended job's alarms (their order, the ``DeleteAlarms`` requests) is in ``alarm_deletion.py``:
the job-events function deletes them too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemaker_governance.domain.alarm_compare import AlarmDefinition, alarm_definition
from sagemaker_governance.domain.guards.base import MAX_DESCRIPTION
from sagemaker_governance.domain.job import TERMINAL_STATUSES, is_valid_job_name, parse_timestamp

RECONCILER_RULE_ID: Final = "reconciler"
# A training job name: what CreateTrainingJob accepts. An alarm under our prefix whose remainder is not a
# job name (followed by an optional ".suffix") is not one of ours and is never touched.
_STEP: Final = (math.sqrt(5) - 1) / 2  # the golden-ratio rotation: the most even spread of start points
# Compliance is evaluated by the event path within seconds of a job's start. The reconciler leaves a job
# alone for this long, so that it does not evaluate a job whose Starting event is still on its way.
EVALUATION_GRACE: Final = timedelta(minutes=15)
# How far back the reconciler lists the jobs in progress (ListTrainingJobs CreationTimeAfter): the longest a job
# can be InProgress by botocore's SageMaker model (StoppingCondition), with two days' margin. Pending at most
# MaxPendingTimeInSeconds (its "max": 2,419,200 s, 28 days), then running at most 30 days in all ("The maximum
# time that a TrainingJob can run in total, including any time spent publishing metrics or archiving and
# uploading models after it has been stopped, is 30 days"; MaxRuntimeInSeconds at most 28 days). The model
# bounds neither a Spot job's MaxWaitTimeInSeconds (no "max") nor a job queued on a training plan before the
# plan starts (not counted in MaxPendingTimeInSeconds): such a job, in progress longer, is not listed; its
# alarms are still never deleted while it runs (an unlisted job's alarms are deleted only once a re-read says
# it has ended), and its events are handled as any job's. Without a bound the listing reads every job the
# account ever ran: SageMaker keeps them, and it pages MaxResults jobs of any status before StatusEquals.
IN_PROGRESS_HORIZON: Final = timedelta(days=60)


class ReconcilerCode(StrEnum):
    """The reconciler's own decision codes (missing alarms and unevaluated jobs are repaired by the guard
    and compliance themselves, with their codes and trigger ``reconciler``)."""

    ORPHAN_ALARM = "reconciler.delete.orphan-alarm"  # the job ended or is gone; its alarms were left behind
    STALE_ALARM = "reconciler.rearm.stale-alarm"  # a guard alarm left in ALARM too long: reset, judged again
    # a guard alarm the stopper muted after a judgement that held its stretch: on again (stretch over, or acts)
    MUTED_ALARM = "reconciler.rearm.muted-alarm"
    # a training job's guard alarm defined otherwise than its guard plans it now (the policy changed): put as planned
    DRIFTED_ALARM = "reconciler.replan.drifted-alarm"


class RepairKind(StrEnum):
    ORPHAN_ALARM = "orphan-alarm"  # an alarm of a job that has ended or no longer exists: deleted
    MISSING_ALARM = "missing-alarm"  # a job in Training without its alarm(s): created
    UNEVALUATED_JOB = "unevaluated-job"  # a job in progress that compliance never evaluated: evaluated
    DEFERRED_RESUME = "deferred-resume"  # a failed job whose resume waited for its backoff: resumed now
    LOST_END_RESUME = "lost-end-resume"  # a failed job whose Failed event was lost: auto-resume decided now
    STALE_ALARM = "stale-alarm"  # a judged guard alarm left in ALARM longer than judge.rearm_minutes: reset
    MUTED_ALARM = "muted-alarm"  # a guard alarm muted for its stretch: on again when it ended or it can act
    DRIFTED_ALARM = "drifted-alarm"  # a guard alarm planned under an earlier policy: put again as planned now


# What ``Guard.widened`` writes in the description of an alarm whose window it widened ("... Widened to N
# minutes after a veto of the stall judge; back to the guard's window when the job (re)enters Training.").
WIDENED_MARK: Final = " Widened to "
WINDOW_TERMS: Final = ("EvaluationPeriods", "DatapointsToAlarm")  # what a widened alarm keeps of its own


def definition_changes(
    listed: AlarmDefinition, planned: AlarmDefinition, *, keep: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """How ``listed`` differs from ``planned``, term by term (``was``, ``now``), the terms in ``keep`` aside
    (a widened alarm's window); a metric or its queries shown as ``changed``. Empty: the same alarm."""
    was, now, kept = dict(listed), dict(planned), set(keep)
    return {
        term: {"was": _shown(was.get(term)), "now": _shown(now.get(term))}
        for term in sorted(set(was) | set(now))
        if term not in kept and was.get(term) != now.get(term)
    }


def definition_period(terms: Mapping[str, Any]) -> int:
    """The period in seconds of an alarm's definition (``dict(alarm_definition(...))``): its metric's, or its
    queries' first; 60 when it says none."""
    metric = terms.get("Metric")
    periods = [metric[3]] if metric else [body[3] for _, body, _ in terms.get("Metrics", ()) if len(body) > 1]
    return next((int(p) for p in periods if p), 60)


def _shown(value: Any) -> Any:
    return "changed" if isinstance(value, tuple) else value


class AlarmListing(BaseModel):
    """One alarm as ``DescribeAlarms`` lists it: what the reconciler needs of its state."""

    model_config = ConfigDict(frozen=True)

    name: str
    state: str | None = None
    updated: datetime | None = None  # StateTransitionedTimestamp (else StateUpdatedTimestamp)
    actions_enabled: bool = True
    description: str | None = None  # AlarmDescription: says which stack made it (AlarmNaming.describes_ours)
    actions: tuple[str, ...] = ()  # AlarmActions: the topic it notifies (none: a composite's child)
    # what it fires on (``alarm_definition``; None: a composite alarm, or not listed with its definition)
    definition: AlarmDefinition | None = None

    @property
    def widened(self) -> bool:
        """Whether the stopper widened its window (``Guard.widened``: after a veto of the stall judge, or a
        trigger that fired with the judge off), which it keeps until the job (re)enters ``Training``."""
        return self.description is not None and WIDENED_MARK in self.description

    def widened_from(self, planned: Mapping[str, Any]) -> bool:
        """Whether the stopper widened this alarm from the ``planned`` ``PutMetricAlarm`` request (its window is
        then kept): its description says so (``widened``), or the alarm was widened before ``Guard.widened`` kept
        that sentence within CloudWatch's limit (``described_with``): a description the plan's already filled cut
        it, so it is ``MAX_DESCRIPTION`` long, the planned one followed by at most the start of ``WIDENED_MARK``,
        and its window is longer than the plan's. A policy that shortens the window of such an alarm (its
        description otherwise unchanged) then reaches it at the job's next entry into ``Training``, as before the
        reconciler compared definitions; the stopper's next widening writes the sentence."""
        if self.widened:
            return True
        description, base = self.description or "", str(planned.get("AlarmDescription") or "")
        listed, plan = dict(self.definition or ()), alarm_definition(planned)
        return (
            len(description) == MAX_DESCRIPTION
            and description.startswith(base)
            and WIDENED_MARK.startswith(description[len(base) :])
            and plan is not None
            and int(listed.get("EvaluationPeriods") or 0) > dict(plan)["EvaluationPeriods"]
        )

    @property
    def notifying_in_alarm(self) -> bool:
        """In ``ALARM`` with its actions on and an action to notify: its notification may be on its way to the
        stopper, or being judged (a child of a composite notifies nothing)."""
        return self.state == "ALARM" and self.actions_enabled and bool(self.actions)


def left_in_alarm(listing: AlarmListing, now: datetime, older_than: timedelta) -> bool:
    """Whether an alarm has sat in ``ALARM`` (with its actions on) for at least ``older_than``: the stall
    judge left it there (a vetoed pinned trigger, the re-judging cap) and nothing will make it notify again
    while the condition lasts. An alarm whose actions are off (a progress alarm not yet armed, an alarm the
    stopper muted after a judgement that held its stretch: audit mode's would-stop) never is."""
    return (
        listing.state == "ALARM"
        and listing.actions_enabled
        and listing.updated is not None
        and now - listing.updated >= older_than
    )


class JobSummary(BaseModel):
    """One ``TrainingJobSummaries`` item of ``ListTrainingJobs``."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    name: str = Field(alias="TrainingJobName", min_length=1, max_length=63)
    arn: str = Field(alias="TrainingJobArn", min_length=1)
    status: str = Field(alias="TrainingJobStatus", min_length=1)
    secondary_status: str | None = Field(default=None, alias="SecondaryStatus")
    creation_time: datetime | None = Field(default=None, alias="CreationTime")
    last_modified_time: datetime | None = Field(default=None, alias="LastModifiedTime")

    _times = field_validator("creation_time", "last_modified_time", mode="before")(parse_timestamp)

    @property
    def in_training(self) -> bool:
        return self.status == "InProgress" and self.secondary_status == "Training"

    def old_enough_to_reconcile(self, now: datetime) -> bool:
        """Whether the event path has had its chance with this job (a job of unknown age: yes)."""
        return self.creation_time is None or now - self.creation_time >= EVALUATION_GRACE


class JobListing(BaseModel):
    """The jobs one ``ListTrainingJobs`` listing found, and whether it read every page: a listing stops
    between pages when its run's time is spent or a page fails (``complete`` False; newest first, so what is
    missing is the oldest jobs of its window)."""

    model_config = ConfigDict(frozen=True)

    jobs: tuple[JobSummary, ...] = ()
    complete: bool = True
    pages: int = 0
    # The oldest CreationTime among the jobs its pages held, of any status (none: unknown): where a listing cut
    # short stopped, from which a later one continues (``CreationTimeBefore``)
    reached: datetime | None = None
    # Why it stopped when a page failed after the client's retries (throttled, a 5xx, no answer): the pages read
    # before are kept, ``complete`` False
    error: str | None = None


def job_of_alarm(alarm_name: str, prefix: str) -> str | None:
    """The training job an alarm of this stack watches (``<prefix><job>`` or ``<prefix><job>.<suffix>``;
    job names cannot contain a dot), or ``None`` when the alarm is not one of ours."""
    if not alarm_name.startswith(prefix):
        return None
    job = alarm_name[len(prefix) :].split(".", 1)[0]
    return job if is_valid_job_name(job) else None


class WorkItem(BaseModel):
    """What one run does for one job: ``listed`` when it is in progress, ``alarms`` it has now."""

    model_config = ConfigDict(frozen=True)

    job_name: str
    listed: JobSummary | None
    alarms: tuple[str, ...]


def run_index(now: datetime, interval_minutes: int) -> int:
    """Which scheduled run this is (consecutive runs get consecutive numbers)."""
    return int(now.timestamp() // 60) // max(1, interval_minutes)


def ring_start(count: int, run: int) -> int:
    """Where run number ``run`` starts on a ring of ``count`` items."""
    if count == 0:
        return 0
    return int(math.fmod(run * _STEP, 1.0) * count) % count


def plan_work(in_progress: Iterable[JobSummary], alarms: Mapping[str, Iterable[str]], run: int) -> list[WorkItem]:
    """Every job to look at, in this run's order: ``alarms`` maps a job name to its alarm names."""
    listed = {job.name: job for job in in_progress if job.status not in TERMINAL_STATUSES}
    names = sorted(set(listed) | set(alarms))
    start = ring_start(len(names), run)
    return [
        WorkItem(job_name=name, listed=listed.get(name), alarms=tuple(sorted(alarms.get(name, ()))))
        for name in names[start:] + names[:start]
    ]


def group_alarms(alarm_names: Iterable[str], prefix: str) -> dict[str, list[str]]:
    """This stack's alarm names by the job they watch (names that are not ours are left out)."""
    by_job: dict[str, list[str]] = {}
    for name in alarm_names:
        job = job_of_alarm(name, prefix)
        if job is not None:
            by_job.setdefault(job, []).append(name)
    return by_job
