"""Reconciler use case: repair what lost events left behind, on a schedule, level-triggered.

Each run compares what exists with what should exist and repairs the difference:

* **orphan alarm**: an alarm of this stack (named under its prefix and described as made by it: another
  stack's prefix may start with ours) whose job has ended or no longer exists (its terminal event
  was lost, or its delete was throttled and deferred) is deleted; the ended jobs' alarms of a run are
  deleted together, up to 100 names per ``DeleteAlarms`` request (``domain/reconcile.py``). The job is always re-read first (``DescribeTrainingJob``): an alarm of a job that
  is still ``InProgress`` (``Stopping`` included) is never deleted, whatever the listing said.
* **missing alarm**: a job in ``Training`` that none of a guard's alarms watches, or whose guard alarms
  lack one created with them (the composite alarm over the children of a job above 10 hosts: listed
  because ``DescribeAlarms`` asks for composites too), gets them from the guard itself (the same code as
  its Training event: the job is re-read, exemptions and the policy apply; every alarm is upserted).
  Guards plug in through ``AlarmGuard``: "the alarms this guard wants for this job now". A job no guard
  wants an alarm for is remembered (a warm container does not read it again that day under that policy),
  unless that "none" was no answer (EC2 could not size an instance type now) or the job, listed in
  ``Training``, was read out of it (the read lags the listing): it is planned again next run.
* **drifted alarm**: a guard alarm of a job in ``Training`` defined otherwise than its guard plans it for the job
  now (the policy changed since the job entered ``Training``: a higher idle threshold, a shorter window) is put
  again as planned, its state and actions kept; the job is read for that at most once per guard's alarms as
  listed under a policy version on a UTC day, and an alarm that may be judged now is left (``_drifted_alarms``).
* **stale alarm**: a judged guard alarm of a training job left in ALARM with its actions on (a vetoed pinned
  trigger, the re-judging cap, a lost notification) is reset, so the job is judged again (``_rearm``).
* **muted alarm**: a judged guard alarm the stopper muted (actions off, left in ALARM) after a judgement that
  settled its stretch without acting (audit mode's would-stop, an exempt job, the guard off: judged, recorded
  and told once per stretch, not at every run) is turned on again once its stretch has ended, or reset too
  when its guard can act on the job now (a switch to enforce while the job stays stalled; a tag of the job
  that lifted its exemption or moved it to an enforcing team: its tags are read again every
  ``judge.rearm_minutes``) (``_unmute``).
* **deferred resume**: a job that failed within the look-back (the longest ``resume.backoff_minutes`` of
  the policy and its teams, or ``resume.logs_settle_minutes`` when longer, plus three runs; further back after passes that were missed, ``_failed_since``)
  and carries ``smgov:resume-after`` (auto-resume deferred it
  for its backoff, for its last log lines to arrive, or while the job it was cloned from still ran; or the lost-end repair's auto-resume of
  it raised, ``_retry_resume``) and not its own ``smgov:resume-settled`` (a
  final skip, e.g. its source stopped by its owner: decided once, not at every run; one naming another job
  came with the job's request and is ignored, logged, ``is_settled``; so is a ``smgov:resume-after`` dated before
  the job's ``CreationTime``, ``copied_resume_after``), of a team whose auto-resume is not in audit mode (which
  defers nothing and writes no tag: a decision made again there could neither act nor be settled), is resumed once that
  time has passed and its clone (a deterministic name) does not exist
  yet, or exists but its owner was never told (the delivery ledger's ``resume:<clone>``: a Publish that
  failed after the clone was made): the same auto-resume reaction as its ``Failed`` event, which re-reads
  the job and its evidence and decides again (meeting "already exists", it tells). ``ListTrainingJobs`` (``StatusEquals=Failed``, ``LastModifiedTimeAfter``) and one
  ``ListTags`` per failed job find them; nothing else is read for a job that is not due. This pass runs
  first, within ``RESUME_SHARE`` of the run's time, so neither the listing nor the repairs starve it.
* **unevaluated job**: a job in progress for longer than ``EVALUATION_GRACE`` without the
  ``smgov:compliance-evaluated`` tag (its Starting event was lost, or it started before governance was
  deployed) is evaluated by the compliance service, once: it tags the job. Audit mode and exemptions
  apply as on the event path, and a stop re-reads the job first.

A run whose policy is unknown (a new container that cannot read the document: ``PolicyUnavailable``) repairs
nothing and fails, so that its dead-letter queue tells; the next run does the work.

Every repair leaves an audit record (trigger ``reconciler``) and a ``ReconcilerRepairs`` metric (dimension
``kind``); each run logs one summary line. A run stops before its time budget is spent (the safety margin
covers one item); the next run starts elsewhere on the ring of jobs (``domain/reconcile.py``), so every
item is eventually visited without storing a cursor. The listing of the jobs in progress gets at most half of
the run's time (``LISTING_SHARE``); a warm container continues a listing cut short at its next run
(``_list_in_progress``). Everything is safe to run concurrently with the event
handlers: creating an alarm is an upsert, deleting a missing alarm is success, stops are idempotent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.domain.alarm_compare import AlarmDefinition, alarm_definition
from sagemaker_governance.domain.alarm_deletion import deletion_batches, deletion_order
from sagemaker_governance.domain.clone import TAG_RESUME_AFTER
from sagemaker_governance.domain.compliance import was_evaluated
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, PolicyUnavailable, Throttled
from sagemaker_governance.domain.guards.base import (
    MAX_EVALUATION_SECONDS,
    DesiredAlarms,
    deletion_units,
    described_with,
    is_training,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.reconcile import (
    IN_PROGRESS_HORIZON,
    RECONCILER_RULE_ID,
    WIDENED_MARK,
    WINDOW_TERMS,
    AlarmListing,
    JobListing,
    JobSummary,
    ReconcilerCode,
    RepairKind,
    WorkItem,
    definition_changes,
    definition_period,
    group_alarms,
    left_in_alarm,
    plan_work,
    run_index,
)
from sagemaker_governance.domain.resume import (
    DeferredResume,
    copied_resume_after,
    copied_settled_mark,
    deferred_here,
    is_settled,
    resume_after_tag,
)
from sagemaker_governance.observability import RECONCILE_KEY, logger
from sagemaker_governance.service.ports import Clock, EvaluationMarksPort, JobsPort, PolicySource
from sagemaker_governance.service.recording import Trigger, record_decision
from sagemaker_governance.service.resume import cloned_from

RECONCILER_TRIGGER = "reconciler"
REARM_REASON = "sagemaker-governance: left in ALARM since the stall judge's last judgement; reset to judge again"
UNMUTE_REASON = (
    "sagemaker-governance: muted after a judgement that did not act (audit mode, exempt, guard off); the guard "
    "can act on the job now: reset to judge again"
)
DEFAULT_SAFETY_SECONDS = 20.0  # longer than one item can take (a stop, a notification, retries)
# The listing of the jobs in progress stops (between pages) once this share of the run's time is spent, so that
# the repairs always get the rest: in a busy account the 60-day window holds more pages than a run can read
# (``ListTrainingJobs`` pages jobs of every status). Half: the listing gives the repairs their jobs, the repairs
# are the point; an even split also bounds a run's gap in either.
LISTING_SHARE = 0.5
# The deferred resumes run first, within this share of the run's time, so neither the listing nor the repairs can
# starve them: a resume is a team's job waiting (they are few and cheap: a listing of the look-back and one
# ``ListTags`` per failed job), and what they leave unused goes to the listing and the repairs.
RESUME_SHARE = 0.25
# A listing continued from where the last one stopped asks for jobs created before the oldest it read plus this
# (jobs created in the same instant on both sides of a page boundary): the few read twice are merged. A page whose
# jobs all share that instant would be read again and again: the next one then starts just before it.
CONTINUE_OVERLAP = timedelta(milliseconds=1)
# A due job whose resume meets an error (an ``AdapterError``) holds the next deferred-resume pass's window at its
# failure, so that it is tried again, for at most this many passes in a row: a throttled call passes within them,
# and an error that does not pass by itself (CreateTrainingJob answered ResourceLimitExceeded, AccessDenied on
# iam:PassRole, a ListTags denied) would otherwise hold every later window at it, growing each one, and each pass
# cut short for time would read the same jobs again and never reach a due job beyond them. Three, as the usual
# look-back makes up three runs. After them the job is tried again by name at each pass (after the jobs its window
# lists, when time is left) until ``resume.late_after_hours`` after its failure, so its resume is not lost.
RESUME_HOLD_PASSES = 3

Budget = Callable[[], float]  # seconds left before the function's deadline


class LostEndRecorder(Protocol):
    """Writes what a job's end event would have (the efficiency record), once per job."""

    def record_lost_end(
        self, job: TrainingJob, trigger: Trigger, then: Callable[[], Sequence[Decision]] | None = None
    ) -> list[Decision]:
        """The record (first) and what ``then`` decided, under the end event's claim (none: handled)."""
        ...


class AlarmGuard(Protocol):
    """A guard that watches training jobs with alarms named ``<alarm_prefix><job>[.<suffix>]``."""

    @property
    def alarm_prefix(self) -> str: ...

    def manages(self, description: str | None) -> bool:
        """Whether an alarm with this ``AlarmDescription`` was made by this stack: another stack's prefix may
        start with ours, and its alarm's name then reads as ``<our prefix><a job name>``."""
        ...

    def watches(self, job_name: str, alarm_name: str) -> bool:
        """Whether ``alarm_name`` is one of this guard's alarms for ``job_name``."""
        ...

    def notifies_elsewhere(self, actions: Collection[str]) -> bool:
        """Whether an alarm with these ``AlarmActions`` notifies a topic other than this stack's alarm topic."""
        ...

    def incomplete(self, job_name: str, observed: Collection[str]) -> bool:
        """Whether this guard's alarms in ``observed`` (some) lack one always created with them."""
        ...

    def desired_alarms(self, job: TrainingJob, policy: Policy) -> DesiredAlarms:
        """The alarms this guard wants for ``job`` now (none: not wanted; not ``settled``: cannot know now)."""
        ...

    def create_alarms(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """Create them (re-reading the job), recording the decision."""
        ...

    def planned_requests(self, job: TrainingJob, policy: Policy) -> tuple[dict[str, Any], ...] | None:
        """The ``PutMetricAlarm`` requests (without tags) of the metric alarms this guard plans for ``job`` now
        (empty: none wanted; None: cannot know now, a lookup failed)."""
        ...

    def arming_moved(self, job: TrainingJob, policy: Policy, listed: Mapping[str, AlarmDefinition | None]) -> bool:
        """Whether this guard arms its stop alarm once the job publishes what it watches and its alarms as
        ``listed`` watch other metrics than it plans now: keeping their actions would arm the plan unseen."""
        ...

    def put_entered(self, job: TrainingJob, policy: Policy) -> tuple[dict[str, Any], ...] | None:
        """Put the guard's alarms of ``job`` as its ``Training`` event would into its current stint, the arming
        decided afresh on the metrics planned now; the requests put (None: nothing planned now, nothing put)."""
        ...

    def rejudged(self, job_name: str, alarm_name: str) -> bool:
        """Whether ``alarm_name`` is one of this guard's alarms whose ALARM the stall judge decides (so one
        left in ALARM is reset to be judged again)."""
        ...

    def rearm_targets(self, job_name: str, alarm_name: str, observed: Collection[str]) -> tuple[str, ...]:
        """What to reset so that ``alarm_name``, left in ALARM, notifies again (a composite: its children)."""
        ...

    def muted(self, job_name: str, actions_off: Collection[str]) -> tuple[str, ...]:
        """This guard's alarms among ``actions_off`` that the stopper muted after a judgement that held their
        stretch (audit mode's would-stop, an exempt job, the guard off)."""
        ...

    def acts_now(self, job: TrainingJob, policy: Policy) -> bool:
        """Whether a firing of this guard's alarm could act on ``job`` now (on, enforce mode, not exempt). Reads
        the job's name, status, secondary status and tags only: the job as listed, with its ``ListTags``."""
        ...


class ComplianceEvaluator(Protocol):
    def evaluate(self, job: TrainingJob, trigger: Trigger) -> list[Decision]: ...


class JobInventoryPort(Protocol):
    def in_progress(
        self, created_after: datetime, more: Callable[[], bool], created_before: datetime | None = None
    ) -> JobListing:
        """The jobs in progress created after ``created_after`` and before ``created_before`` (none: now), newest
        first; ``more()`` is asked before each further page (False: the listing stops there, not complete, with
        the oldest job its pages held as ``reached``)."""
        ...


class FailedJobsPort(Protocol):
    def failed_since(self, since: datetime, more: Callable[[], bool]) -> JobListing:
        """The jobs that failed (last modified) at or after ``since``; ``more()`` as for ``in_progress``."""
        ...


class DeferredResumer(Protocol):
    """Auto-resume's reaction (service/resume.py): re-reads the job and decides again."""

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]: ...


class CloneNoticesPort(Protocol):
    def told(self, clone: str) -> bool:
        """Whether the owner of ``clone`` was told of it (service/idempotency.py::CloneNotices)."""
        ...


class AlarmInventoryPort(Protocol):
    def alarm_states(self, prefix: str) -> list[AlarmListing]:
        """Every alarm (metric and composite) whose name starts with ``prefix``, with its state."""
        ...


class AlarmDeletionPort(Protocol):
    def delete(self, names: Sequence[str]) -> list[str]: ...

    def reset(self, names: Sequence[str], reason: str) -> None: ...


class AlarmUpdatePort(Protocol):
    def update(self, requests: Sequence[dict[str, Any]]) -> None:
        """``PutMetricAlarm`` over existing alarms (their state kept, tags ignored); raises ``AdapterError``."""
        ...


class AlarmEnablingPort(Protocol):
    def enable_actions(self, names: Sequence[str]) -> None:
        """``EnableAlarmActions``; raises ``AdapterError``."""
        ...


_CompareKey = tuple[str, str, str, int, int]  # (job, policy digest, UTC day, guard index, its alarms as listed)
# A guard whose alarms of a job differ from its plan: the guard, its alarms' names, its key, the planned requests,
# and whether its arming was made on other metrics than the plan's (``AlarmGuard.arming_moved``)
_Drift = tuple["AlarmGuard", list[str], _CompareKey, list[dict[str, Any]], bool]


@dataclass(frozen=True)
class Orphan:
    """An ended (or vanished) job's leftover alarms, in deletion order."""

    job_name: str
    job: TrainingJob | None
    names: list[str]


class ReconcileDefect(RuntimeError):
    """Jobs whose repair raised something other than an AWS failure (a defect): raised after the run has
    repaired every other job and deleted the ended jobs' alarms."""


@dataclass
class ReconcileReport:
    jobs_in_progress: int = 0
    alarms: int = 0
    items: int = 0
    visited: list[str] = field(default_factory=list)
    repairs: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    stopped_early: bool = False
    efficiency_records: int = 0  # ended jobs' records written here (their end event lost)
    # Listings a failed page cut short (after the client's retries): "jobs-in-progress", "alarms", "failed-jobs"
    unlisted: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "jobs_in_progress": self.jobs_in_progress,
            "alarms": self.alarms,
            "items": self.items,
            "visited": len(self.visited),
            "repairs": dict(sorted(self.repairs.items())),
            "errors": self.errors,
            "stopped_early": self.stopped_early,
        }
        if self.efficiency_records:
            shown["efficiency_records"] = self.efficiency_records
        if self.unlisted:
            shown["unlisted"] = list(self.unlisted)
        return shown


class ReconcilerService:
    def __init__(
        self,
        *,
        jobs: JobsPort,
        inventory: JobInventoryPort,
        alarm_inventory: AlarmInventoryPort,
        alarms: AlarmDeletionPort,
        guards: Sequence[AlarmGuard],
        compliance: ComplianceEvaluator,
        policies: PolicySource,
        audit: AuditSink,
        metrics: BusinessMetricsPort,
        clock: Clock,
        interval_minutes: int,
        safety_seconds: float = DEFAULT_SAFETY_SECONDS,
        lost_ends: LostEndRecorder | None = None,
        failed: FailedJobsPort | None = None,
        resume: DeferredResumer | None = None,
        arming: AlarmEnablingPort | None = None,
        notices: CloneNoticesPort | None = None,
        marks: EvaluationMarksPort | None = None,
        updates: AlarmUpdatePort | None = None,
    ) -> None:
        self._updates = updates  # guard alarms planned under an earlier policy are put as planned now (none: kept)
        self._marks = marks  # a lost end's failed auto-resume tagged smgov:resume-after (none: not retried)
        self._failed = failed
        self._arming = arming  # muted guard alarms are turned on again (none: left muted)
        self._resume = resume
        self._notices = notices  # whose clone owners were told (a due job whose clone exists, untold: retold)
        self._jobs = jobs
        self._inventory = inventory
        self._alarm_inventory = alarm_inventory
        self._alarms = alarms
        self._guards = tuple(guards)
        self._compliance = compliance
        self._policies = policies
        self._audit = audit
        self._metrics = metrics
        self._clock = clock
        self._interval = interval_minutes
        self._safety = safety_seconds
        self._lost_ends = lost_ends
        # Jobs known to be evaluated (tag seen, or evaluated here): a warm container skips their tag read.
        # Only an optimisation: a cold start reads the tags again; the tag is never removed by governance.
        self._evaluated: set[str] = set()
        # Jobs in Training for which no guard without an alarm on them wants one (no GPU, no progress
        # metric, guard off, exempt), under a policy digest on a UTC day (exemptions expire by date): a warm
        # container does not re-read them. Never a job whose "none" was no answer (a lookup failed: EC2 could
        # not size an instance type): that one is planned again at every run until it is answered.
        self._unwatched: set[tuple[str, str, str, tuple[int, ...]]] = set()
        # Muted guard alarms still in ALARM whose guard could not act on the job (audit mode, off, exempt), under a
        # policy digest on a UTC day (job, alarm, digest, day), with when the job's tags were read for that: a
        # warm container reads them again (ListTags) only once they would be judge.rearm_minutes old by the next
        # run. The tags are what can change under the same policy: a tag that matched an exemption removed, the
        # team tag moved to a team in enforce mode; such a change is seen within judge.rearm_minutes.
        self._held: dict[tuple[str, str, str, str], datetime] = {}
        self._run_key = ("", "")
        self._listings: dict[str, AlarmListing] = {}  # this run's DescribeAlarms listing, by name
        # Guards of jobs in Training whose alarms were compared with what the guard plans now, under a policy digest
        # on a UTC day, as their definitions were listed then (a hash): a warm container does not read the job
        # (DescribeTrainingJob, ListTags) again to compare them until the policy, the day or the alarms change.
        self._compared: set[_CompareKey] = set()
        # Where this container's last listing of the jobs in progress that was cut short stopped (the oldest
        # CreationTime its pages held): the next run lists the newest jobs again, then continues from there, so
        # the oldest jobs of the window are reached within a few runs however long the window (none: from the
        # newest; a cold container starts there again).
        self._listed_to: datetime | None = None
        # The failure time before which this container's deferred-resume passes decided every failed job (none:
        # not known, the usual look-back): the next pass looks back to it too, so runs whose pass failed or met an
        # error are made up (up to ``resume.late_after_hours``, after which a resume is skipped anyway). A pass cut
        # short for time moves it to where it stopped (``_deferred_resumes``): never a wider window than it handled.
        self._decided_before: datetime | None = None
        # Failed jobs whose resume met an error in this container's last passes that read them, as listed, with how
        # many such passes in a row: the window is held at such a job for its first ``RESUME_HOLD_PASSES`` only,
        # and a job no window lists is tried again by name at each pass until it is too late (none: a cold
        # container, whose window is the usual look-back, starts counting again).
        self._erring: dict[str, tuple[JobSummary, int]] = {}

    def run(self, trigger: Trigger, remaining: Budget) -> ReconcileReport:
        report = ReconcileReport()
        at_start = remaining()
        if at_start < self._safety:
            report.stopped_early = True
            return self._summarise(report)
        try:
            policy = self._policies.current()
        except PolicyUnavailable:
            # A new container that cannot read the document: acting on the defaults would stop jobs the document
            # exempts, or mark jobs evaluated under the wrong mode. The run fails (the dead-letter queue) instead.
            logger.error("reconciler run skipped: the policy is unknown")
            raise
        self._run_key = (policy.digest(), self._clock().date().isoformat())
        defects: list[tuple[str, Exception]] = []
        kept = (at_start - self._safety) * (1 - RESUME_SHARE)  # left for the listing and the repairs
        self._count(report, self._deferred_resumes(policy, trigger, lambda: remaining() - kept, report, defects))
        listing = self._jobs_listed(remaining, at_start, report)
        in_progress = list(listing.jobs)
        observed = self._observed_alarms()
        pictured = observed is not None and listing.complete  # what the run saw is the whole picture
        if observed is None:
            # A failed page leaves a partial picture of the alarms: a job would look unwatched (its alarms
            # created again over those not listed) and an orphan unseen. No item is visited this run (the
            # evaluation of unevaluated jobs waits too: the next run lists again); the deferred resumes, which
            # read neither listing, have run.
            report.errors += 1
            report.unlisted.append("alarms")
            in_progress, observed = [], {}
        items = plan_work(in_progress, observed, run_index(self._clock(), self._interval))
        report.jobs_in_progress = len(in_progress)
        report.alarms = sum(len(names) for names in observed.values())
        report.items = len(items)
        ended: list[Orphan] = []  # ended jobs' alarms, deleted together (DeleteAlarms takes 100 names)
        for item in items:
            if remaining() < self._safety:
                report.stopped_early = True
                break
            report.visited.append(item.job_name)
            self._visit(item, policy, trigger, report, ended, defects)
        self._count(report, self._delete_orphans(ended, trigger, report))
        if pictured:  # a partial listing says nothing of the jobs it did not reach
            listed = {job.name for job in in_progress}
            self._evaluated &= listed
            self._unwatched = {key for key in self._unwatched if key[0] in listed}
            self._compared = {key for key in self._compared if key[0] in listed and key[1:3] == self._run_key}
            self._held = {
                key: at for key, at in self._held.items() if key[0] in listed and key[2:] == self._run_key
            }
        summary = self._summarise(report)
        if defects:
            # The run did what it could; the invocation still fails, so the defect reaches the dead-letter queue
            # (EventInvokeConfig OnFailure) and its alarm instead of passing as a counted error.
            name, first = defects[0]
            raise ReconcileDefect(f"{len(defects)} job(s) raised; first {name}: {first!r}") from first
        return summary

    def _jobs_listed(self, remaining: Budget, at_start: float, report: ReconcileReport) -> JobListing:
        """The jobs in progress, listed within ``LISTING_SHARE`` of the run's time; a listing cut short is logged
        (a failed page also counted as an error)."""
        spendable = at_start - self._safety
        try:
            listing = self._list_in_progress(remaining, self._safety + spendable * (1 - LISTING_SHARE))
        except AdapterError as exc:  # a port that raises rather than keep the pages it read
            listing = JobListing(complete=False, error=str(exc))
        if listing.error is not None:
            # A page failed after the client's retries: the pages read are used as a listing cut short (nothing
            # is done to a job it did not reach). Counted, not raised: the next run lists again, and a throttled
            # listing is no defect to dead-letter; the run's summary line carries it (`smgov doctor` fails on it).
            report.errors += 1
            report.unlisted.append("jobs-in-progress")
            logger.error(
                "jobs in progress not all listed: a page failed", error=listing.error, listed=len(listing.jobs)
            )
        elif not listing.complete:
            # Newest first: the jobs not listed are the oldest of the horizon (or, a listing continued, those
            # between its two parts, listed by the runs before). Nothing is done to them on a guess: one with
            # alarms is re-read before they are deleted (kept while it runs).
            report.stopped_early = True
            logger.warning(
                "jobs in progress not all listed: the listing's share of the run's time ran out",
                pages=listing.pages,
                listed=len(listing.jobs),
                continues_before=self._listed_to.isoformat() if self._listed_to is not None else None,
            )
        return listing

    def _observed_alarms(self) -> dict[str, set[str]] | None:
        """This stack's alarm names by job, from every page of ``DescribeAlarms`` (None: a page failed)."""
        observed: dict[str, set[str]] = {}
        self._listings = {}
        for prefix in sorted({guard.alarm_prefix for guard in self._guards}):
            try:
                listed = self._alarm_inventory.alarm_states(prefix)
            except AdapterError as exc:
                self._listings = {}
                logger.error("alarms not listed: no item visited this run", prefix=prefix, error=str(exc))
                return None
            # Only this stack's alarms (their description says so): another stack whose prefix starts with ours
            # (stack "a-idle-b" under stack "a") is neither deleted as orphans, nor re-armed, nor taken for ours.
            listings = [
                listing for listing in listed if any(guard.manages(listing.description) for guard in self._guards)
            ]
            self._listings.update({listing.name: listing for listing in listings})
            for job, names in group_alarms([listing.name for listing in listings], prefix).items():
                observed.setdefault(job, set()).update(names)
        return observed

    def _list_in_progress(self, remaining: Budget, floor: float) -> JobListing:
        """The jobs in progress, newest first, read while ``remaining()`` stays at or above ``floor``.

        A cut-short listing is continued by this container's next run: it lists the newest jobs again with half
        of its time (new jobs need their alarms and their evaluation first), then the jobs created before where
        the last one stopped with the other half, and so on to the horizon, after which the next run starts from
        the newest again. Complete only when one run read the whole window without a gap."""
        horizon = self._clock() - IN_PROGRESS_HORIZON
        cursor = self._listed_to if self._listed_to is not None and self._listed_to > horizon else None
        newest_floor = floor if cursor is None else (remaining() + floor) / 2
        newest = self._inventory.in_progress(horizon, lambda: remaining() >= newest_floor)
        if newest.complete:
            self._listed_to = None
            return newest
        if cursor is None:
            self._listed_to = newest.reached
            return newest
        if newest.error is not None:  # a page failed: the continuation waits for the next run, where it was
            return newest
        start = cursor if newest.reached is None else min(cursor, newest.reached)
        older = self._inventory.in_progress(
            horizon, lambda: remaining() >= floor, created_before=start + CONTINUE_OVERLAP
        )
        if older.complete:
            self._listed_to = None
        elif older.reached is None:  # nothing read (its first page failed): from the same point again
            self._listed_to = start
        elif older.reached < start:
            self._listed_to = older.reached
        else:  # no step back (one instant filled its pages): step past it
            self._listed_to = start - CONTINUE_OVERLAP
        jobs = {job.name: job for job in older.jobs} | {job.name: job for job in newest.jobs}
        joined = older.complete and newest.reached is not None and newest.reached <= cursor
        return JobListing(
            jobs=tuple(sorted(jobs.values(), key=lambda job: job.name)),
            complete=joined,
            pages=newest.pages + older.pages,
            error=older.error,
        )

    # ---- one job -----------------------------------------------------------------------------------

    def _visit(
        self,
        item: WorkItem,
        policy: Policy,
        trigger: Trigger,
        report: ReconcileReport,
        ended: list[Orphan],
        defects: list[tuple[str, Exception]],
    ) -> None:
        """One work item. An AWS failure costs only this item (counted as an error); so does a defect of ours,
        kept in ``defects`` to fail the invocation once every other item is done."""
        try:
            if item.listed:
                kinds = self._in_progress(item, policy, trigger)
            else:
                orphan = self._orphan(item)
                kinds = []
                if orphan is not None:
                    ended.append(orphan)
                    kinds = self._record_lost_end(orphan, trigger, report)
        except AdapterError as exc:
            report.errors += 1
            logger.error("reconcile item failed", job=item.job_name, error=str(exc))
            return
        except Exception as exc:  # one job's defect must not leave every other job unrepaired
            report.errors += 1
            defects.append((item.job_name, exc))
            logger.exception("reconcile item raised", job=item.job_name)
            return
        self._count(report, kinds)

    def _orphan(self, item: WorkItem) -> Orphan | None:
        """A job with alarms that was not listed in progress: its alarms, if it has really ended."""
        try:
            job = self._jobs.get_job(item.job_name)
        except JobNotFound:
            job = None
        if job is not None and not job.is_terminal:
            return None  # still running (or started after the listing): its alarms stay
        names: list[str] = []
        for prefix in sorted({guard.alarm_prefix for guard in self._guards}):
            mine = [n for n in item.alarms if n.startswith(prefix)]
            if mine:
                names += [n for n in deletion_order(item.job_name, prefix, mine) if n not in names]
        return Orphan(item.job_name, job, names)

    def _record_lost_end(self, orphan: Orphan, trigger: Trigger, report: ReconcileReport) -> list[RepairKind]:
        """An ended job's alarms were left behind: its end event may be lost, and with it the job's
        efficiency record, written here once (service/efficiency.py: the same ledger key as the event
        path's). When the record is written here the end event was never handled, so a *failed* job also
        never had its auto-resume decision: it is made now, as its ``Failed`` event would have made it (a
        clone's name is deterministic: a late event creates nothing twice). A failed read is logged and
        counted; the alarms are deleted all the same. A resume that raises is tagged for the deferred-resume
        pass (``_retry_resume``): nothing else would come back to the job."""
        job, resume = orphan.job, self._resume
        if self._lost_ends is None or job is None:
            return []

        def resumed() -> Sequence[Decision]:
            # under the end event's claim: a late Failed event then finds the resume's record done too
            try:
                return resume.react(job, trigger) if resume is not None else []
            except AdapterError as exc:
                report.errors += 1
                logger.error(
                    "auto-resume of a failed job whose end event was lost failed", job=job.name, error=str(exc)
                )
                self._retry_resume(job, report)
                return []

        try:
            written = self._lost_ends.record_lost_end(job, trigger, resumed if job.status == "Failed" else None)
        except AdapterError as exc:
            report.errors += 1
            logger.error("efficiency record of an ended job failed", job=orphan.job_name, error=str(exc))
            return []
        report.efficiency_records += min(1, len(written))
        resumes = written[1:]  # the record first, then what the resume decided
        return [RepairKind.LOST_END_RESUME] if any(d.action is Action.CLONE and d.acts for d in resumes) else []

    def _retry_resume(self, job: TrainingJob, report: ReconcileReport) -> None:
        """A lost end's auto-resume that raised (a re-read that lags its end, a refused or throttled clone): the
        claim is released with the efficiency record done and the job's alarms are deleted, so no run visits it
        as an orphan again. It is tagged ``smgov:resume-after`` (now) instead, as a deferral is (not in audit mode,
        which writes no tag, when the job's tags say its team is in it): the
        deferred-resume pass (the next run's: this run's came first) decides it again, and its
        clone's name is deterministic. A job already so tagged (or settled) is left as it is. A tag that cannot
        be written is an error of the run: that job's resume is then lost, and the log says so."""
        if deferred_here(job.tags or {}, job.creation_time) or is_settled(job.name, job.tags or {}):
            return  # already the deferred-resume pass's, or decided for good (a settling copied from another
            # job's tags does not count: ``is_settled``)
        if job.tags is not None and not _resume_acts(self._policies.current(), job, job.tags):
            return  # audit mode writes no tag, and the deferred-resume pass leaves a job of a team in audit mode
        error = "this deployment cannot tag the job"
        if self._marks is not None and job.arn:
            try:
                self._marks.mark(job.arn, TAG_RESUME_AFTER, resume_after_tag(self._clock()))
            except AdapterError as exc:
                error = str(exc)
            else:
                logger.warning("auto-resume of a lost end left to the deferred-resume pass", job=job.name)
                return
        report.errors += 1
        logger.error(
            "auto-resume of a failed job whose end event was lost is not retried: its tag was not written",
            job=job.name,
            tag=TAG_RESUME_AFTER,
            error=error,
        )

    def _delete_orphans(
        self, ended: Sequence[Orphan], trigger: Trigger, report: ReconcileReport
    ) -> list[RepairKind]:
        """Delete ended jobs' alarms, as few ``DeleteAlarms`` requests as the API allows (many jobs ending
        together, whose deletes CloudWatch throttled at their end, cost a request per 100 alarms, not one
        per job). A request that fails is retried unit by unit (e.g. a composite we could not tell); one
        throttled leaves the rest for the next run."""
        repairs: list[RepairKind] = []
        # Each job's alarms in units (an alarm with its children: DeleteAlarms takes one composite per request).
        units = [(index, unit) for index, orphan in enumerate(ended) for unit in deletion_units(orphan.names)]
        deleted: dict[int, set[str]] = {}
        for batch in deletion_batches(unit for _, unit in units):
            chosen = [units[index] for index in batch]
            try:
                gone = set(self._alarms.delete([name for _, unit in chosen for name in unit]))
            except Throttled as exc:
                report.errors += 1
                logger.warning("orphan alarms deferred", jobs=len({i for i, _ in chosen}), error=str(exc))
                break
            except AdapterError as exc:
                if len(chosen) == 1:
                    report.errors += 1
                    logger.error("reconcile item failed", job=ended[chosen[0][0]].job_name, error=str(exc))
                    continue
                gone, throttled = self._delete_one_by_one(chosen, ended, report)
                for index, unit in chosen:
                    deleted.setdefault(index, set()).update(n for n in unit if n in gone)
                if throttled:
                    break
                continue
            for index, unit in chosen:
                deleted.setdefault(index, set()).update(n for n in unit if n in gone)
        for index, orphan in enumerate(ended):
            mine = [name for name in orphan.names if name in deleted.get(index, ())]
            if mine:
                self._record_orphan(orphan, mine, trigger)
                repairs.append(RepairKind.ORPHAN_ALARM)
        return repairs

    def _delete_one_by_one(
        self, chosen: Sequence[tuple[int, list[str]]], ended: Sequence[Orphan], report: ReconcileReport
    ) -> tuple[set[str], bool]:
        """A failed request's units again, one request each: what was deleted, and whether one was throttled
        (the rest is left for the next run)."""
        gone: set[str] = set()
        for index, unit in chosen:
            try:
                gone.update(self._alarms.delete(unit))
            except AdapterError as one:
                report.errors += 1
                logger.error("reconcile item failed", job=ended[index].job_name, error=str(one))
                if isinstance(one, Throttled):
                    return gone, True
        return gone, False

    def _record_orphan(self, orphan: Orphan, deleted: list[str], trigger: Trigger) -> None:
        job = orphan.job
        subject = job or TrainingJob.model_validate(
            {"TrainingJobName": orphan.job_name, "TrainingJobStatus": "NotFound"}
        )
        policy = self._policies.current()
        state = f"is {job.status}" if job is not None else "no longer exists"
        decision = Decision(
            rule=RECONCILER_RULE_ID,
            code=ReconcilerCode.ORPHAN_ALARM,
            action=Action.DELETE_ALARM,
            mode=policy.for_job(subject).mode,
            reason=f"the job {state} but its alarms were left behind (a lost event or a deferred delete): deleted",
            evidence={"repair": RepairKind.ORPHAN_ALARM.value, "deleted": deleted},
            request={"AlarmNames": list(orphan.names)},
        )
        self._record(decision, subject, policy, trigger, Outcome.DONE)

    def _in_progress(self, item: WorkItem, policy: Policy, trigger: Trigger) -> list[RepairKind]:
        summary = item.listed
        assert summary is not None
        repairs: list[RepairKind] = []
        job: TrainingJob | None = None
        # The job is read for its alarms only when some guard has no alarm on it (and may want one), or its
        # alarms are incomplete (a composite alarm gone). Those guards are in the cache key: if one of the
        # others loses an alarm later, the job is read again.
        missing = tuple(index for index, guard in enumerate(self._guards) if self._lacks(guard, item))
        unwatched_key = (item.job_name, *self._run_key, missing)
        needs_alarm = summary.in_training and bool(missing) and unwatched_key not in self._unwatched
        if needs_alarm:
            job = self._jobs.get_job(item.job_name)
        if item.job_name not in self._evaluated and summary.old_enough_to_reconcile(self._clock()):
            tags = job.tags if job is not None else self._jobs.list_tags(summary.arn)
            # a mark copied from another job (older than this one's creation) does not count: ``is_own_mark``
            created = job.creation_time if job is not None else summary.creation_time
            if was_evaluated(tags, created=created):
                self._evaluated.add(item.job_name)
            else:
                job = job if job is not None else self._jobs.get_job(item.job_name)
                if job.status == "InProgress":
                    decisions = self._compliance.evaluate(job, trigger)
                    self._evaluated.add(item.job_name)
                    repairs.append(RepairKind.UNEVALUATED_JOB)
                    if any(d.action is Action.STOP and d.acts for d in decisions):
                        return repairs  # stopped: no alarm wanted any more
        if needs_alarm and job is not None:
            repairs += self._missing_alarms(job, missing, policy, trigger, unwatched_key)
        if summary.in_training and self._updates is not None:
            repairs += self._drifted_alarms(item, job, missing, policy, trigger)
        # Last, on their own: a failed reset (throttled past botocore's retries) must not cost the job the repairs
        # above; the alarm is still in ALARM (or muted) at the next run, which resets it (or turns it on) then.
        if summary.in_training:
            repairs += self._alarm_states(item, policy, trigger)
        return repairs

    def _alarm_states(self, item: WorkItem, policy: Policy, trigger: Trigger) -> list[RepairKind]:
        repairs = [RepairKind.STALE_ALARM] if self._rearm(item, policy, trigger) else []
        return repairs + ([RepairKind.MUTED_ALARM] if self._unmute(item, policy, trigger) else [])

    def _missing_alarms(
        self,
        job: TrainingJob,
        missing: Sequence[int],
        policy: Policy,
        trigger: Trigger,
        unwatched_key: tuple[str, str, str, tuple[int, ...]],
    ) -> list[RepairKind]:
        """Create the alarms the ``missing`` guards want for ``job``. When none wants one, remember that, unless
        it was no answer (a lookup failed: EC2 could not size an instance type): the next run asks again. A job
        listed in ``Training`` but read out of it is not remembered either: the read lags the listing
        (DescribeTrainingJob right after the job's transition still answers its state before) or the job left
        ``Training`` since; no guard wants an alarm for it now, which says nothing of the job."""
        if not is_training(job):
            logger.info(
                "job listed in Training read out of it: planned again next run",
                job=job.name,
                secondary_status=job.secondary_status,
            )
            return []
        repairs: list[RepairKind] = []
        wanted, settled = False, True
        for index in missing:
            guard = self._guards[index]
            desired = guard.desired_alarms(job, policy)
            settled = settled and desired.settled
            if not desired.names:
                continue
            wanted = True
            decisions = guard.create_alarms(job, trigger)
            if any(d.action is Action.CREATE_ALARM and d.exempted_by is None for d in decisions):
                repairs.append(RepairKind.MISSING_ALARM)
        if not settled:
            logger.info("alarms of a job undecided: a lookup failed; the next run plans it again", job=job.name)
        elif not wanted:
            self._unwatched.add(unwatched_key)
        return repairs

    def _drifted_alarms(
        self, item: WorkItem, job: TrainingJob | None, missing: Sequence[int], policy: Policy, trigger: Trigger
    ) -> list[RepairKind]:
        """Put again, as its guard plans it now, a guard alarm of a job in ``Training`` whose definition (as
        listed: threshold, comparison, periods, datapoints, missing data, metric or queries) differs from the
        plan: the alarms are planned when the job enters ``Training`` and kept, so a policy made stricter (a
        higher idle threshold, a shorter window or trigger, a team's or the deployment's) would otherwise reach
        a week-long job only when it next enters ``Training``, and a stall would burn money for the old window.

        Cost: comparing needs the plan, which needs the job (``DescribeTrainingJob``, ``ListTags``): read at most
        once per guard's alarms as listed under a policy digest on a UTC day per warm container
        (``_compared``), the read of this visit reused; never for a guard whose alarm may be judged now.

        Left as they are, logged, the next run looks again: a job that cannot be read or is read out of
        ``Training``; a plan that cannot be made now (a lookup failed); a guard whose notifying alarm is in
        ``ALARM`` with its actions on (its notification may be in flight or judged: the stopper may widen,
        mute, arm or re-plan it meanwhile, and a put would undo that; the stopper's stricter-alarm check
        re-plans a firing alarm stricter than the plan itself); a composite alarm (its rule names its children
        only: they are compared). A widened alarm (the stall judge's veto: ``WIDENED_MARK``) keeps its window
        (evaluation and datapoint counts) and gets the rest of the plan. Right before the put the job's alarms
        are listed again (one ``DescribeAlarms``, on a drift only): an alarm that changed since the run's
        listing, or went to ``ALARM``, is left for the next run; each put keeps the alarm's ``ActionsEnabled``
        as just listed (an armed or muted alarm stays so). ``PutMetricAlarm`` keeps the alarm's state and no
        reset follows: the alarm is not in ``ALARM``, and CloudWatch evaluates the new terms at its next period,
        going to ``ALARM`` (and notifying) if the job breaches them; a muted alarm stays muted. Not a guard whose
        arming was made on other metrics than it plans now (``AlarmGuard.arming_moved``: the progress guard's
        watched metrics changed): kept armed, its stop alarm would treat the new metrics' missing data as a stall
        before the job ever published them. Its alarms are put as the job's entry into ``Training`` puts them
        (``AlarmGuard.put_entered``: armed only if the job published the planned metrics in its stint)."""
        updates = self._updates
        assert updates is not None
        listed = {name: seen for name in item.alarms if (seen := self._listings.get(name)) is not None}
        candidates = self._uncompared(item, listed, missing)
        if not candidates:
            return []
        if job is None:
            try:
                job = self._jobs.get_job(item.job_name)
            except (AdapterError, JobNotFound) as exc:
                logger.warning(
                    "guard alarms not compared with the plan: the job could not be read; left as they are",
                    job=item.job_name,
                    error=str(exc),
                )
                return []
        if not is_training(job):
            logger.info(
                "guard alarms not compared with the plan: the job was read out of Training",
                job=item.job_name,
                secondary_status=job.secondary_status,
            )
            return []
        drifted: list[_Drift] = []
        changes: dict[str, dict[str, Any]] = {}
        for guard, mine, key in candidates:
            requests = guard.planned_requests(job, policy)
            if requests is None:
                logger.info("guard alarms not compared with the plan: a lookup failed", job=item.job_name)
                continue
            mismatched = []
            for request in requests:
                seen = listed.get(str(request["AlarmName"]))
                planned = alarm_definition(request)
                if seen is None or seen.definition is None or planned is None:
                    continue  # missing (the missing-alarm repair's), or a composite
                keep = WINDOW_TERMS if seen.widened_from(request) else ()
                changed = definition_changes(seen.definition, planned, keep=keep)
                if changed:
                    changes[seen.name] = changed
                    mismatched.append(request)
            if mismatched:
                moved = guard.arming_moved(job, policy, {name: listed[name].definition for name in mine})
                drifted.append((guard, mine, key, mismatched, moved))
            else:
                self._compared.add(key)
        if not drifted:
            return []
        return self._replan(item, job, drifted, changes, policy, trigger, updates)

    def _uncompared(
        self, item: WorkItem, listed: dict[str, AlarmListing], missing: Sequence[int]
    ) -> list[tuple[AlarmGuard, list[str], _CompareKey]]:
        """The guards whose alarms of the job are to be compared with their plan at this run: not missing any
        (the missing-alarm repair puts them all), with a metric alarm listed, not compared under this run key
        as they are listed, none of their notifying alarms in ``ALARM`` with its actions on (logged)."""
        candidates: list[tuple[AlarmGuard, list[str], _CompareKey]] = []
        busy: list[str] = []
        for index, guard in enumerate(self._guards):
            mine = sorted(name for name in listed if guard.watches(item.job_name, name))
            if index in missing or not any(listed[name].definition is not None for name in mine):
                continue
            key = self._compare_key(item.job_name, index, {name: listed[name].definition for name in mine})
            if key in self._compared:
                continue
            if firing := [name for name in mine if listed[name].notifying_in_alarm]:
                busy += firing
                continue
            candidates.append((guard, mine, key))
        if busy:
            logger.info(
                "guard alarms in ALARM not compared with the plan: the next run does",
                job=item.job_name,
                alarms=busy,
            )
        return candidates

    def _compare_key(
        self, job_name: str, index: int, definitions: dict[str, AlarmDefinition | None]
    ) -> _CompareKey:
        """What ``_compared`` remembers of guard ``index``'s alarms of a job: their definitions (a hash)."""
        return (job_name, *self._run_key, index, hash(tuple(sorted(definitions.items()))))

    def _replan(
        self,
        item: WorkItem,
        job: TrainingJob,
        drifted: Sequence[_Drift],
        changes: dict[str, dict[str, Any]],
        policy: Policy,
        trigger: Trigger,
        updates: AlarmUpdatePort,
    ) -> list[RepairKind]:
        """Put the drifted alarms as planned, each as listed again just now (``_drifted_alarms``)."""
        try:
            fresh = {
                seen.name: seen
                for prefix in sorted({guard.alarm_prefix for guard, *_ in drifted})
                for seen in self._alarm_inventory.alarm_states(prefix + item.job_name)
            }
        except AdapterError as exc:
            logger.warning(
                "drifted guard alarms not put again: the next run tries again", job=item.job_name, error=str(exc)
            )
            return []
        puts: list[dict[str, Any]] = []
        kept: list[str] = []  # widened alarms put with their window
        retargets: list[tuple[AlarmGuard, list[str], _CompareKey]] = []
        done: list[_CompareKey] = []
        for guard, mine, key, requests, moved in drifted:
            now = [fresh.get(name) for name in mine]
            if any(seen is None or seen.notifying_in_alarm for seen in now) or any(
                fresh[name].definition != self._listings[name].definition for name in mine if name in fresh
            ):
                logger.info(
                    "drifted guard alarms changed since the run's listing or fire now: the next run compares them",
                    job=item.job_name,
                    alarms=mine,
                )
                continue
            if moved:
                retargets.append((guard, mine, key))
                continue
            mine_now = {name: self._listings[name].definition for name in mine}
            for request in requests:
                put = _as_planned(request, fresh[str(request["AlarmName"])])
                if put["EvaluationPeriods"] != request["EvaluationPeriods"]:
                    kept.append(str(put["AlarmName"]))
                puts.append(put)
                mine_now[str(put["AlarmName"])] = alarm_definition(put)
            done.append(self._compare_key(item.job_name, key[3], mine_now))  # as the next listing shows them
        try:
            if puts:
                updates.update(puts)
        except AdapterError as exc:
            logger.warning(
                "drifted guard alarms not put again: the next run tries again", job=item.job_name, error=str(exc)
            )
            puts = []
        self._compared.update(done)
        retargeted = self._retarget(item, job, retargets, policy)
        if not puts and not retargeted:
            return []
        entered = {str(put["AlarmName"]): put for requests in retargeted.values() for put in requests}
        puts += entered.values()
        names = sorted(str(request["AlarmName"]) for request in puts)
        decision = Decision(
            rule=RECONCILER_RULE_ID,
            code=ReconcilerCode.DRIFTED_ALARM,
            action=Action.CREATE_ALARM,
            mode=policy.for_job(job).mode,
            reason="the job is training and its guard alarm(s) were planned under an earlier policy (planned when it "
            "entered Training and kept): put again as the guard plans them now; their state and actions are kept, "
            "and CloudWatch evaluates the new terms at its next period"
            + (
                "; those whose watched metrics changed are put as the job's entry into Training puts them (armed only "
                "if the job published the metrics they watch now), since their arming was made on other metrics"
                if retargeted
                else ""
            ),
            evidence={
                "repair": RepairKind.DRIFTED_ALARM.value,
                "alarms": names,
                "changes": {name: changes[name] for name in names},
                "kept_window": sorted(name for name in kept if name in names),
                # put as the job's entry into Training puts them: whether each notifies now (armed or not)
                "retargeted": {
                    name: bool(put.get("ActionsEnabled", True)) for name, put in sorted(entered.items())
                },
            },
            request={"PutMetricAlarm": puts},
        )
        self._record(decision, job, policy, trigger, Outcome.DONE)
        return [RepairKind.DRIFTED_ALARM]

    def _retarget(
        self,
        item: WorkItem,
        job: TrainingJob,
        retargets: Sequence[tuple[AlarmGuard, list[str], _CompareKey]],
        policy: Policy,
    ) -> dict[int, tuple[dict[str, Any], ...]]:
        """Put the alarms of each guard whose arming was made on other metrics than it plans now
        (``AlarmGuard.arming_moved``) as the job's entry into ``Training`` puts them (``AlarmGuard.put_entered``):
        by guard index, the requests put. A guard whose put fails or plans nothing now is left for the next run."""
        out: dict[int, tuple[dict[str, Any], ...]] = {}
        for guard, mine, key in retargets:
            try:
                requests = guard.put_entered(job, policy)
            except AdapterError as exc:
                logger.warning(
                    "retargeted guard alarms not put again: the next run tries again",
                    job=item.job_name,
                    error=str(exc),
                )
                continue
            if not requests:
                continue
            out[key[3]] = requests
            now = {name: self._listings[name].definition for name in mine}
            now.update({str(put["AlarmName"]): alarm_definition(put) for put in requests})
            self._compared.add(self._compare_key(item.job_name, key[3], now))  # as the next listing shows them
        return out

    def _rearm(self, item: WorkItem, policy: Policy, trigger: Trigger) -> bool:
        """Reset the job's judged guard alarms left in ALARM (a pinned trigger the judge vetoed, a re-judging
        cap) that would sit there ``judge.rearm_minutes`` or more before the next run: each fires again at once
        if its condition lasts, and the job is judged again. Nothing else would make such an alarm notify while
        the job stays pinned. An alarm is so judged again at most ``rearm_minutes`` after its last judgement,
        and at every run when that is no longer than the interval (an alarm that went to ALARM seconds after
        one run would otherwise wait a second interval)."""
        older = self._rejudge_lead(policy)
        now = self._clock()
        stale = sorted(
            name
            for name in item.alarms
            if (listing := self._listings.get(name)) is not None
            and left_in_alarm(listing, now, older)
            and any(guard.rejudged(item.job_name, name) for guard in self._guards)
        )
        if not stale:
            return False
        # a composite notifies again only when a child changes state: its children are reset instead of it
        targets = sorted(
            {
                target
                for name in stale
                for guard in self._guards
                if guard.rejudged(item.job_name, name)
                for target in guard.rearm_targets(item.job_name, name, item.alarms)
            }
        )
        try:
            self._alarms.reset(targets, REARM_REASON)
        except AdapterError as exc:
            logger.warning(
                "stale guard alarms not reset: the next run tries again", job=item.job_name, error=str(exc)
            )
            return False
        subject = _listed_job(item)
        since = {name: listing.updated.isoformat() for name in stale if (listing := self._listings[name]).updated}
        decision = Decision(
            rule=RECONCILER_RULE_ID,
            code=ReconcilerCode.STALE_ALARM,
            action=Action.ARM_ALARM,
            mode=policy.mode,
            reason="the job is training and its guard alarm(s) sat in ALARM with their actions on (left there by the "
            "stall judge's last judgement, or an armer whose notification was lost), "
            f"{policy.judge.rearm_minutes} minutes or more by the next run: reset, so the job is judged (or its "
            "guard armed) again if the condition lasts",
            evidence={
                "repair": RepairKind.STALE_ALARM.value,
                "alarms": stale,
                "reset": targets,  # a composite's children instead of it
                "in_alarm_since": since,
            },
        )
        self._record(decision, subject, policy, trigger, Outcome.DONE)
        return True

    def _rejudge_lead(self, policy: Policy) -> timedelta:
        """How old a judgement may be at a run and still stand: ``judge.rearm_minutes`` less one interval (it
        would be ``rearm_minutes`` old by the next run), so it is made again at most ``rearm_minutes`` after the
        last one; at every run when that is no longer than the interval."""
        return max(timedelta(0), timedelta(minutes=policy.judge.rearm_minutes - self._interval))

    def _unmute(self, item: WorkItem, policy: Policy, trigger: Trigger) -> bool:
        """Turn on again the actions of the job's guard alarms the stopper muted after a judgement that held their
        stretch (audit mode's would-stop, an exempt job, the guard off: told once, not at every run): when the
        stretch has ended (the alarm left ALARM by itself), so that the next one notifies; or, the alarm still in
        ALARM, when a firing could act on the job now (enforce mode, the guard on, no exemption: a team or the
        deployment switched to enforce, or a tag of the job changed, while the job stays stalled), reset too (a
        composite: its children), so that it fires again and the job is judged, and stopped, now.

        What the guard can do is judged on the job as listed with its tags (``ListTags``: one call, no
        ``DescribeTrainingJob``): at once under a new policy or UTC day, then again whenever the last answer
        would be ``judge.rearm_minutes`` old by the next run (a tag changed meanwhile: an exemption lifted, the
        job moved to an enforcing team). A stretch that ended has its job's tags read too, for the record's team
        and mode; unreadable, the alarm is turned on all the same."""
        off = [name for name in item.alarms if (seen := self._listings.get(name)) and not seen.actions_enabled]
        muted = (
            [(guard, name) for guard in self._guards for name in guard.muted(item.job_name, off)] if off else []
        )
        if not muted or self._arming is None:
            return False
        now, lead = self._clock(), self._rejudge_lead(policy)
        ended = sorted(name for _, name in muted if self._listings[name].state != "ALARM")
        held = [
            (g, n)
            for g, n in muted
            if n not in ended
            and ((at := self._held.get((item.job_name, n, *self._run_key))) is None or now - at >= lead)
        ]
        if not ended and not held:
            return False
        summary = item.listed
        assert summary is not None
        acting: list[tuple[AlarmGuard, str]] = []
        try:
            try:
                job = _listed_job(item, self._jobs.list_tags(summary.arn))
            except AdapterError:
                if held:
                    raise  # what the guard can do is unknown: nothing is turned on; the next run asks again
                job = _listed_job(item)  # only stretches that ended: turned on, recorded without the job's team
            for guard, name in held:
                if guard.acts_now(job, policy):
                    acting.append((guard, name))
                else:
                    self._held[(item.job_name, name, *self._run_key)] = now
            enabled = sorted([*ended, *(name for _, name in acting)])
            reset = sorted({t for g, n in acting for t in g.rearm_targets(item.job_name, n, item.alarms)})
            if not enabled:
                return False
            self._arming.enable_actions(enabled)
            if reset:
                self._alarms.reset(reset, UNMUTE_REASON)
        except AdapterError as exc:
            logger.warning(
                "muted guard alarms not turned on: the next run tries again", job=item.job_name, error=str(exc)
            )
            return False
        acts = sorted(name for _, name in acting)
        decision = Decision(
            rule=RECONCILER_RULE_ID,
            code=ReconcilerCode.MUTED_ALARM,
            action=Action.ARM_ALARM,
            mode=policy.for_job(job).mode,
            reason=_unmuted_reason(stretch_ended=bool(ended), acts_now=bool(acts)),
            evidence={
                "repair": RepairKind.MUTED_ALARM.value,
                "enabled": enabled,
                "stretch_ended": ended,
                "acts_now": acts,
                "reset": reset,
            },
        )
        self._record(decision, job, policy, trigger, Outcome.DONE)
        return True

    # ---- deferred resumes ------------------------------------------------------------------------

    def _lookback(self, policy: Policy) -> timedelta:
        """How far back a deferred resume can have failed: the longest backoff of the policy and its teams,
        plus three runs (a run that failed or stopped early is made up by the next)."""
        return timedelta(minutes=_longest_backoff(policy) + 3 * self._interval)

    def _failed_since(self, policy: Policy, now: datetime) -> datetime:
        """Where this run's deferred-resume pass looks back to: the look-back, or further back to where this
        container's passes last decided every failed job (``_decided_before``), to make up for the runs since
        (a pass that failed or met an error). Never further than the longest ``resume.late_after_hours`` (a
        resume decided later is skipped as too late). Each failed job in the window costs a ``ListTags`` per
        run, so the window widens only while passes are missed, by one interval a run, and never past what the
        last pass handled: a pass cut short for time leaves the next one to start where it stopped."""
        since = now - self._lookback(policy)
        if self._decided_before is None:
            return since
        return min(since, max(self._decided_before, now - _late_after(policy)))

    def _deferred_resumes(
        self,
        policy: Policy,
        trigger: Trigger,
        remaining: Budget,
        report: ReconcileReport,
        defects: list[tuple[str, Exception]],
    ) -> list[RepairKind]:
        """The deferred resumes due within the look-back. One job's defect (an exception other than an
        ``AdapterError``) is kept in ``defects``, as an item's is, and the pass goes on: the run goes on to its
        repairs and fails at its end. A defect does not hold the look-back open (an error does, to make it up, for
        ``RESUME_HOLD_PASSES`` passes in a row): the job is tried again while it is within the usual look-back,
        each run failing on it, and a wider window would only repeat it. A job whose resume met an error in an
        earlier pass and that this window does not list is tried again by name after the listed ones (``_retried``),
        until ``resume.late_after_hours`` after its failure."""
        if self._failed is None or self._resume is None:
            return []
        now = self._clock()
        since = self._failed_since(policy, now)
        try:
            listing = self._failed.failed_since(since, lambda: remaining() >= self._safety)
        except AdapterError as exc:  # a missed pass: the next one makes it up
            report.errors += 1
            logger.error("failed jobs not listed", error=str(exc))
            return []
        _note_unlisted(listing, report)
        repairs: list[RepairKind] = []
        # The oldest failure first: a job is due a backoff after it failed, so the due jobs (the most overdue
        # first) come before those that are not yet due, whatever order the listing (newest created first) gave;
        # a job of unknown failure time is not put off. Stable: a tie keeps the listing's order.
        jobs = sorted(listing.jobs, key=lambda job: job.last_modified_time or since)
        stopped: JobSummary | None = None  # the first job left for lack of time
        erred: JobSummary | None = None  # the first job whose resume met an AdapterError
        listed = {summary.name for summary in jobs}
        retried, given_up = self._retried(listed, since, now - _late_after(policy))
        for summary in [*jobs, *retried]:
            if remaining() < self._safety:
                report.stopped_early = True
                if summary.name in listed:  # a job tried by name is left on its list for the next pass
                    stopped = summary
                break
            _, passes = self._erring.pop(summary.name, (summary, 0))  # kept only while its resume meets an error
            try:
                deferred = _deferred(summary, self._jobs.list_tags(summary.arn), policy)
                if deferred is None or now < deferred.due or self._done(deferred, summary.name):
                    continue
                job = _summary_job(summary)
                decisions = self._resume.react(job, trigger)
            except AdapterError as exc:
                report.errors += 1
                logger.error("deferred resume failed", job=summary.name, error=str(exc))
                if self._holds(summary, passes + 1, exc, too_late=summary.name in given_up):
                    erred = erred or summary
                continue
            except Exception as exc:  # one job's defect must not leave the others, and the run's repairs, undone
                defects.append((summary.name, exc))
                logger.exception("deferred resume raised", job=summary.name)
                if (passes > 0 or summary.name not in listed) and summary.name not in given_up:
                    # tried by name, or already on the list (its resume met an error before: the next window may
                    # have moved past it): it stays on the list (a defect of one pass, an odd answer, must not lose
                    # it), until it is too late as for an error. A listed job met by a defect at its first try is
                    # tried again while the usual look-back lists it.
                    self._erring[summary.name] = (summary, passes)
                continue
            if any(d.action is Action.CLONE and d.acts for d in decisions):
                repairs.append(RepairKind.DEFERRED_RESUME)
        self._decided_before = self._decided(listing, since, stopped, erred, now, policy)
        return repairs

    def _retried(
        self, listed: Collection[str], since: datetime, late: datetime
    ) -> tuple[list[JobSummary], set[str]]:
        """The jobs whose resume met an error at this container's last passes that read them and that this pass's
        window does not list (it moved past them), oldest failure first: tried again by name after the listed ones,
        so a job the window no longer holds at is not lost; and the names of those that failed before ``late``
        (``resume.late_after_hours`` ago): tried a last time, when auto-resume decides them too late, and given up
        if that meets an error again."""
        retried = sorted(
            (summary for name, (summary, _) in self._erring.items() if name not in listed),
            key=lambda job: job.last_modified_time or since,
        )
        return retried, {
            job.name for job in retried if job.last_modified_time is not None and job.last_modified_time < late
        }

    def _holds(self, summary: JobSummary, passes: int, exc: AdapterError, *, too_late: bool) -> bool:
        """Whether a job whose resume met an error at ``passes`` passes in a row (this one included) holds the next
        pass's window at its failure: for the first ``RESUME_HOLD_PASSES`` only. The pass after them says so once
        in the log; the job is still tried at each pass, by name once no window lists it, until it is too late
        (``too_late``: tried by name more than ``resume.late_after_hours`` after its failure), when it is given up
        and logged (auto-resume records ``resume.skip.too-late`` when it decides it)."""
        if too_late:
            logger.error(
                "deferred resume given up: its resume met an error at every pass until too late",
                job=summary.name,
                passes=passes,
                error=str(exc),
            )
            return False
        self._erring[summary.name] = (summary, passes)
        if passes == RESUME_HOLD_PASSES + 1:
            logger.error(
                "deferred resume no longer holds the window: its resume met an error at every pass",
                job=summary.name,
                passes=passes,
                error=str(exc),
            )
        return passes <= RESUME_HOLD_PASSES

    def _decided(
        self,
        listing: JobListing,
        since: datetime,
        stopped: JobSummary | None,
        erred: JobSummary | None,
        now: datetime,
        policy: Policy,
    ) -> datetime | None:
        """Where the next pass may start looking back (``_decided_before``), after a pass of window ``since``.

        * Every listed job visited: each one that failed a longest backoff before ``now`` was due and decided, so
          the next pass looks back to there (or as usual, when that reaches further back).
        * A job whose resume met an ``AdapterError`` (a throttled call) at no more than ``RESUME_HOLD_PASSES``
          passes in a row (``erred``): the next pass looks back to that job's failure, to try it again. A listing
          that failed, or a page of it, leaves the point where it was: the next pass makes this one up.
        * Cut short for time: the pass could not handle its window, so the next starts at the failure of the
          first job it did not read, or of the first one that met an error when that failed earlier, never
          further back than this one started (the jobs are read oldest failure first: every one before it was
          read). The window so moves forward by what a pass reads instead of growing by a run's interval at
          every run up to ``resume.late_after_hours``, with a due job beyond a pass's reach.
        * A listing cut short for time, or a first job not read whose failure time is unknown, says nothing of
          where the pass stopped: the usual look-back (a window whose listing alone takes a pass's time is wider
          than any pass handles), or the failure of the first job that met an error, never further back than
          this one started.

        Whatever the pass did, the next never starts after the failure of a job whose resume met an error here
        at its first ``RESUME_HOLD_PASSES`` passes in a row: a window that started after it would never list it
        again, and its resume would be lost to a passing error. After that the job no longer holds the window (it is
        logged, and tried again at each pass, by name once no window lists it, until it is too late): an error that
        does not pass by itself would otherwise hold every window at it, and every pass cut short for time would
        read the same jobs and never reach a due job beyond them."""
        settled = now - timedelta(minutes=_longest_backoff(policy))
        # Held at the first job that met an error, whatever else the pass did: the next pass tries it again.
        held = None if erred is None else max(since, min(erred.last_modified_time or since, settled))
        if listing.error is not None:
            return _earliest(self._decided_before, held)
        if not listing.complete:
            return held
        if stopped is not None:
            if stopped.last_modified_time is None:
                return held
            return _earliest(max(since, min(stopped.last_modified_time, settled)), held)
        if held is not None:
            return held
        return settled

    def _exists(self, name: str) -> bool:
        try:
            self._jobs.describe(name)
        except JobNotFound:
            return False
        return True

    def _told(self, clone: str) -> bool:
        """Whether a due job is done with: its clone exists and its owner was told (without the ledger: its
        clone exists). A clone whose teller failed (a throttled Publish) is handed back to auto-resume,
        which meets "already exists" and tells."""
        return self._exists(clone) and (self._notices is None or self._notices.told(clone))

    def _done(self, deferred: DeferredResume, name: str) -> bool:
        """Whether the due job ``name`` is done with: its clone was made and told (``_told``), or made and told
        under the lineage tags it was launched with (``_told_earlier``)."""
        return self._told(deferred.clone) or self._told_earlier(deferred, name)

    def _told_earlier(self, deferred: DeferredResume, name: str) -> bool:
        """Whether a due job launched with another job's lineage tags was resumed under them by a deployment before
        70dc22b: the clone those tags name (``DeferredResume.copied_clone``) exists, names this job as its source
        (``smgov:resumed-from``) and its owner was told. Auto-resume takes it for the job's clone too
        (``_CloneReaction._own_lineage``); without this the pass would hand the job over at every run, each one
        recording the clone met again. Read only for a job whose lineage tags are copied."""
        clone = deferred.copied_clone
        if clone is None or not cloned_from(self._jobs, clone, name):
            return False
        return self._notices is None or self._notices.told(clone)

    # ---- helpers -----------------------------------------------------------------------------------

    def _count(self, report: ReconcileReport, kinds: Sequence[RepairKind]) -> None:
        for kind in kinds:
            report.repairs[kind.value] += 1
            self._metrics.emit(BusinessMetric.RECONCILER_REPAIRS, kind=kind.value)

    def _lacks(self, guard: AlarmGuard, item: WorkItem) -> bool:
        """The guard has no alarm on the job, not all of those created together, or one that notifies another
        topic than the stack's alarm topic (a stack deployed again: ``notifies_elsewhere``)."""
        mine = [name for name in item.alarms if guard.watches(item.job_name, name)]
        return (
            not mine
            or guard.incomplete(item.job_name, mine)
            or any(
                guard.notifies_elsewhere(listing.actions)
                for name in mine
                if (listing := self._listings.get(name)) is not None
            )
        )

    def _record(
        self, decision: Decision, job: TrainingJob, policy: Policy, trigger: Trigger, outcome: Outcome
    ) -> None:
        record_decision(
            self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=outcome, at=self._clock()
        )

    def _summarise(self, report: ReconcileReport) -> ReconcileReport:
        logger.info("reconcile run", extra={RECONCILE_KEY: report.as_dict()})  # written at any LogLevel
        return report


def _longest_backoff(policy: Policy) -> int:
    """The longest ``resume.backoff_minutes`` (or ``resume.logs_settle_minutes``, when longer) of the policy and
    its teams: how long after its failure a deferred resume can fall due (``ResumePolicy.longest_wait``)."""
    policies = [policy, *(policy.for_team(team) for team in policy.teams)]
    return max(p.resume.longest_wait() for p in policies)


def _deferred(summary: JobSummary, tags: dict[str, str], policy: Policy) -> DeferredResume | None:
    """The job's deferred resume (``DeferredResume.of``); a settling mark it carries that names another job (copied
    with its request: ``is_settled``) is ignored, and so is a ``smgov:resume-after`` dated before the job's
    ``CreationTime`` (copied with its request: ``copied_resume_after``); the log says so. None too for a job of a
    team in audit mode (``_resume_acts``)."""
    name = summary.name
    copied = copied_settled_mark(name, tags)
    if copied is not None and TAG_RESUME_AFTER in tags:
        logger.warning("settled mark copied from another job ignored", job=name, mark=copied)
    if (after := copied_resume_after(tags, summary.creation_time)) is not None:
        logger.warning("resume-after copied from another job ignored", job=name, resume_after=after)
    deferred = DeferredResume.of(name, tags, created=summary.creation_time)
    if deferred is None or not _resume_acts(policy, _summary_job(summary), tags):
        return None
    return deferred


def _summary_job(summary: JobSummary) -> TrainingJob:
    """The failed job as ``ListTrainingJobs`` gave it (name, ARN, status): what auto-resume re-reads."""
    return TrainingJob.model_validate(
        {"TrainingJobName": summary.name, "TrainingJobArn": summary.arn, "TrainingJobStatus": summary.status}
    )


def _resume_acts(policy: Policy, job: TrainingJob, tags: dict[str, str]) -> bool:
    """Whether auto-resume acts on the job (its team's ``resume.mode``, else its mode, is enforce). Audit mode
    defers nothing and writes no tag, so a ``smgov:resume-after`` on a job of a team in audit mode was copied with
    its request or tagged before the team switched to audit mode: a decision made again for it could neither act
    nor be settled, and would be recorded (and told) at every run of the look-back. The event decided it; it is
    left, and the log says so."""
    effective = policy.for_job(job.model_copy(update={"tags": tags}))
    if (effective.resume.mode or effective.mode) is Mode.ENFORCE:
        return True
    logger.info("deferred resume of a job in audit mode left: audit mode defers nothing", job=job.name)
    return False


def _note_unlisted(listing: JobListing, report: ReconcileReport) -> None:
    """Count and log a listing of the failed jobs that did not read every page: the listed ones (the newest) are
    decided all the same, and the next run lists again."""
    if listing.error is not None:  # a page failed
        report.errors += 1
        report.unlisted.append("failed-jobs")
        logger.error("failed jobs not all listed: a page failed", error=listing.error, pages=listing.pages)
    elif not listing.complete:  # the run's time ran out
        report.stopped_early = True
        logger.warning("failed jobs not all listed: the run's time ran out", pages=listing.pages)


def _late_after(policy: Policy) -> timedelta:
    """The longest ``resume.late_after_hours`` of the policy and its teams: a resume decided later after its
    failure is skipped as too late (``resume.skip.too-late``)."""
    policies = [policy, *(policy.for_team(team) for team in policy.teams)]
    return timedelta(hours=max(p.resume.late_after_hours for p in policies))


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    """The earlier of two points where the next deferred-resume pass may start, ``None`` (the usual look-back)
    only when both are."""
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def _listed_job(item: WorkItem, tags: dict[str, str] | None = None) -> TrainingJob:
    """The job as ListTrainingJobs gave it (name, status, secondary status, ARN), with its tags when they were
    read (``ListTags``): the audit record's subject when it was not read, what a muted alarm's guard judges."""
    summary = item.listed
    assert summary is not None
    return TrainingJob.model_validate(
        {
            "TrainingJobName": item.job_name,
            "TrainingJobStatus": summary.status,
            "SecondaryStatus": summary.secondary_status,
            "TrainingJobArn": summary.arn,
            **({"Tags": dict(tags)} if tags is not None else {}),
        }
    )


def _as_planned(request: dict[str, Any], seen: AlarmListing) -> dict[str, Any]:
    """The put of a drifted alarm: its planned request, with its ``ActionsEnabled`` as listed (an armed progress
    stall alarm, a disarmed one, a muted alarm stay so); a widened alarm keeps its window and says so."""
    put = {**request, "ActionsEnabled": seen.actions_enabled}
    listed = dict(seen.definition or ())
    description = seen.description or ""
    period = definition_period(dict(alarm_definition(request) or ()))
    if seen.widened_from(request) and period * int(listed.get("EvaluationPeriods", 0)) <= MAX_EVALUATION_SECONDS:
        put.update({term: listed[term] for term in WINDOW_TERMS})
        if seen.widened:  # else widened before its sentence was kept: the plan's description, which says it too
            widening = description[description.index(WIDENED_MARK) :]
            put["AlarmDescription"] = described_with(str(request.get("AlarmDescription", "")), widening)
    return put


def _unmuted_reason(*, stretch_ended: bool, acts_now: bool) -> str:
    done = []
    if stretch_ended:
        done.append("those out of ALARM (their stretch has ended) are turned on, so the next stretch is judged")
    if acts_now:
        done.append(
            "those whose guard can act on the job now (enforce mode, the guard on, no exemption) are turned on and "
            "reset, so the job is judged again now if it is still stalled"
        )
    return (
        "the job's guard alarm(s) muted after a judgement that did not act (audit mode, an exemption, the guard "
        "off): " + "; ".join(done)
    )
