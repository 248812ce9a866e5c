"""Auto-resume of failed long-running jobs, and Spot to On-Demand fallback: policy and decisions.

Pure: the (freshly re-read) job, its description and tags, the effective policy and a ``CloneContext``
in; a ``CloneDecision`` out: the decisions to audit, the planned clone, and whether to stop the source.

When a job is resumed (``decide_resume``, on ``Failed``), all of these hold:

- its failure is of a class whose verdict is *resume* (``domain/failures.py``): the ``FailureReason`` and
  the last lines of each host's log stream, read only at failure, are classified by the failure taxonomy
  (hardware, interconnect, capacity and SageMaker-internal faults resume by default; user code and unknown
  do not). Teams add signatures and change a class's verdict (``resume.signatures``, ``resume.classes``);
  the matched line(s) and host go into the decision's evidence. Unreadable logs: the ``FailureReason``
  alone decides, and the evidence says so. Only a peer's failure seen (``ncclRemoteError`` and its kind)
  while some hosts' logs were not read (the service reads them all, up to ``MAX_LOG_HOSTS``, before it
  decides; cut there or failed): ``resume.skip.insufficient-evidence``, not a confident verdict; so is a
  resumable interconnect cause, or a peer's report a silence corroborates, while some hosts' reads failed
  (``Diagnosis.interconnect_unread``: an EFA or InfiniBand completion error is also a rank's report of a peer's
  exit, whose exception may be there). A failure
  more recent than ``logs_settle_minutes`` (5) whose logs were read but hold no cause of it (``unknown``, a
  skip or a hardware or interconnect fault resting on the ``FailureReason`` alone, a peer's report only a
  silent peer corroborates), or whose resumable interconnect cause on one host another host's silence leaves
  open (that host's log holds no line on why it ended: a user-code exception there, still in flight, would
  make the interconnect error the report of its exit; or that host's log was not read), is not decided yet:
  the failed process's last lines may still be on their way to CloudWatch Logs, so the decision is
  ``resume.defer.logs-pending`` (tagged ``smgov:resume-after``, due at the failure plus the settle period)
  and the reconciler decides then, on what the logs hold by then, for good (a job too short to resume
  anyway is decided at once);
- it trained long enough: time in the ``Training`` secondary status from SageMaker's own transition
  timestamps (days included). A clone auto-resume made (``smgov:resume-reason`` failed-transient)
  inherits its lineage's qualification, so a clone that fails again while starting (e.g. on capacity) is
  still resumed within the budget. Any other clone (a Spot or storm move, a Spot alternative, ``smgov
  resume`` by hand) never met it: its training and its source's count, or the source's qualification
  when auto-resume made the source; generations further back are not counted (do no harm);
- no orchestrator owns the job (a tuning, AutoML or labeling job, a Pipelines step, an AWS Batch service
  job: ``domain/orchestrators.py`` says how each is recognised); it retries the job itself;
- the lineage's retry budget is not spent (attempt number from the lineage tags, plus the retries
  SageMaker made inside the job under its ``RetryStrategy`` and inside earlier generations: tag
  ``smgov:sagemaker-retries`` carries their running total down the lineage);
- it has a ``CheckpointConfig`` (``require_checkpoint``, default true): otherwise the clone would start
  from scratch;
- its checkpoint location holds objects written during the failed attempt, when that can be checked
  (``ListObjectsV2``, only on the buckets the deployment names): otherwise ``require_checkpoint_progress``
  says whether to skip it or to resume anyway (from older checkpoints, or from scratch), and the decision
  says which;
- it is not a lemon: a clone that fails with the same hardware or interconnect fault on the same host
  position as its source (tag ``smgov:failure``) counts double against the budget (tag
  ``smgov:repeat-faults`` carries the extra count down the lineage); the host is the one whose log stream
  holds the matched line (``FailureReason`` names none);
- its backoff has elapsed: the attempt number picks a delay from ``backoff_minutes`` (the last entry for
  later attempts), counted from the failure. Before that the decision is ``resume.defer.backoff``: the job
  is tagged ``smgov:resume-after`` and the scheduled reconciler, which lists recently failed jobs, resumes
  it once the time has come (the same decision, re-made on the job as it is then; the clone's name is
  deterministic, so a late event and the reconciler cannot clone twice). A failure time that cannot be
  read is not guessed: the job is not resumed;
- it is not too late: no more than ``late_after_hours`` have passed since it could first be resumed (its
  failure; for a clone whose source ended after it, the source's end). A decision made later (a dead letter
  redriven days on, a replayed event, a lost end found late) is ``resume.skip.too-late``, settled: its
  owner has most likely relaunched the job by hand, and a clone would duplicate that run.

Spot fallback (``decide_spot``), at each interruption of a Managed Spot job: the cost and time to finish
on Spot against On-Demand (``domain/spot_economics.py``, from the job's transitions and checkpoint writes)
decide; the job is stopped and resumed On-Demand when On-Demand is cheaper, when Spot is not expected to
finish within ``MaxWaitTimeInSeconds`` (or at all), or when the team's deadline slack
(``spot.max_delay_hours``) is spent. ``spot.max_interruptions`` is a hard cap whatever the numbers say.
When the numbers cannot be computed (no checkpoint listing, missing or conflicting timestamps) or
``spot.economics`` is off, the count rule decides (``spot.count_rule_interruptions``) and the evidence
says why. A Spot job that ended with ``MaxWaitTimeExceeded`` is resumed On-Demand when
``spot.fallback_on_max_wait`` allows, and no more than ``spot.late_after_hours`` after it ended
(``spot.skip.too-late``; ``spot.skip.end-time-unknown`` when that time cannot be read). A job leaving Spot on its own type for its cost, its progress or
``MaxWaitTimeInSeconds`` first tries the team's ``spot.fallbacks`` on Spot, when it opted in
(``domain/spot_alternatives.py``): the first allowed, storm-free type cheaper to finish than On-Demand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from sagemaker_governance.domain.clone import (
    TAG_FAILURE,
    TAG_REASON,
    TAG_RESUME_AFTER,
    TAG_RESUME_SETTLED,
    TAG_RETRIES,
    TAG_ROOT,
    TAG_SOURCE,
    TAG_STRIKES,
    ClonePlan,
    ClonePlanError,
    Lineage,
    LineageError,
    RequestShape,
    ResumeReason,
    TooManyTags,
    clone_name,
    copied_lineage,
    counted_tags,
    has_room_for,
    own_lineage,
    plan_clone,
    role_allowed,
)
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT, PatternTimeout
from sagemaker_governance.domain.failure_evidence import CheckpointProgress, FailureEvidence
from sagemaker_governance.domain.failure_signatures import Role, Verdict
from sagemaker_governance.domain.failures import HARDWARE_CLASSES, INTERCONNECT, UNKNOWN, Diagnosis, classify
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.orchestrators import orchestrator_of, sagemaker_retries
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.spot_alternatives import choose
from sagemaker_governance.domain.spot_economics import SpotEstimate, Unknown, cluster_price, estimate
from sagemaker_governance.domain.spot_health import FleetHealth, in_interruption

RESUME_RULE_ID: Final = "auto-resume"
SPOT_RULE_ID: Final = "spot-fallback"
MAX_WAIT_EXCEEDED: Final = "MaxWaitTimeExceeded"
INTERRUPTED: Final = "Interrupted"
STARTING: Final = frozenset({"Starting", "Pending"})  # before any instance bills
BILLED_OR_INTERRUPTED: Final = frozenset({"Downloading", "Training", "Uploading", "Interrupted", "Restarting"})
_REASON_CHARS: Final = 300


class ResumeCode(StrEnum):
    """Auto-resume's decision codes."""

    CLONE = "resume.clone.transient"  # failed for a resumable reason after long enough: clone
    # ... although the failed attempt wrote no checkpoint (require_checkpoint_progress: false)
    CLONE_WITHOUT_PROGRESS = "resume.clone.without-checkpoint-progress"
    # ... although its checkpoint location could not be listed (require_checkpoint_progress: false)
    CLONE_UNCHECKED = "resume.clone.checkpoint-unchecked"
    DISABLED = "resume.skip.disabled"
    NOT_FAILED = "resume.skip.not-failed"
    USER_CODE = "resume.skip.user-code"  # the failure is classified as the user's code or configuration
    UNKNOWN = "resume.skip.unknown"  # nothing identifies the cause
    # only a peer's failure was seen (ncclRemoteError, a watchdog timeout ...), or an interconnect cause on one host
    # once the settle period is over, and some of the job's hosts' logs could not be read (more than
    # resume.log_hosts' ceiling, or a read that failed): not "not transient" but not known either, so nothing is
    # cloned on a guess
    INSUFFICIENT_EVIDENCE = "resume.skip.insufficient-evidence"
    # the classification of the failure did not finish within the service's time budget (a signature's pattern was
    # still searching the lines read): a diagnosis that did not finish is not trusted, so nothing is cloned. Settled
    DIAGNOSIS_TIMEOUT = "resume.skip.diagnosis-timeout"
    CLASS_SKIPPED = "resume.skip.class-skipped"  # a class the policy does not resume (e.g. capacity: skip)
    NO_CHECKPOINT_PROGRESS = "resume.skip.no-checkpoint-progress"  # nothing written during the failed attempt
    CHECKPOINT_UNREADABLE = "resume.skip.checkpoint-unreadable"  # the listing failed: progress not confirmed
    TOO_SHORT = "resume.skip.too-short"  # the lineage trained less than min_training_hours, as far as known
    BAD_LINEAGE = "resume.skip.bad-lineage"  # the lineage tags cannot be trusted
    ORCHESTRATED = "resume.skip.orchestrated"  # a tuning/AutoML/labeling job, Pipelines step or Batch job owns it
    BUDGET_SPENT = "resume.skip.budget-spent"  # max_attempts reached for the lineage
    NO_CHECKPOINT = "resume.skip.no-checkpoint"
    NOT_CLONABLE = "resume.skip.not-clonable"  # the job's description cannot be turned into a request
    # the job's tags leave its clone no room under SageMaker's 50 per resource (none of the owner's is dropped)
    TOO_MANY_TAGS = "resume.skip.too-many-tags"
    ROLE_NOT_ALLOWED = "resume.skip.role-not-allowed"  # governance may not pass the job's role
    JOB_GONE = "resume.skip.job-gone"  # the job no longer exists when re-read
    DEFER_BACKOFF = "resume.defer.backoff"  # resumable, but its attempt's backoff has not elapsed: later
    # failed less than resume.logs_settle_minutes ago and the logs read hold no cause of it (the diagnosis is
    # unknown, a skip or a hardware fault resting on FailureReason alone, or a peer's report with no cause), or a
    # resumable interconnect cause on one host while another host's log says nothing of its end or was not read: its last lines
    # may still be on their way to CloudWatch Logs. Tagged smgov:resume-after (the failure + the settle period):
    # the reconciler decides then, on what the logs hold by then, for good
    DEFER_LOGS_PENDING = "resume.defer.logs-pending"
    FAILURE_TIME_UNKNOWN = "resume.skip.failure-time-unknown"  # no failure time to count a backoff from
    # decided longer than late_after_hours after the job failed (or its source ended): a dead letter redriven
    # days later, whose owner has most likely relaunched the job by hand meanwhile
    TOO_LATE = "resume.skip.too-late"
    # a clone whose source (tag smgov:resumed-from) still runs: a Spot move whose stop failed; both would bill.
    # Tagged smgov:resume-after: the reconciler decides again once the source has ended
    DEFER_SOURCE_RUNNING = "resume.defer.source-running"
    # a clone whose source is still Stopping, its stop requested after the clone failed (or when, unknown):
    # likely its owner's, but a stop at its runtime limit reads Stopping too until it has ended. Tagged
    # smgov:resume-after: the reconciler decides again once the source has ended
    DEFER_SOURCE_STOPPING = "resume.defer.source-stopping"
    # a clone whose source (tag smgov:resumed-from) Completed: the lineage finished, nothing to resume
    SOURCE_COMPLETED = "resume.skip.source-completed"
    SOURCE_STOPPED = "resume.skip.source-stopped"


class SpotCode(StrEnum):
    """Spot fallback's decision codes."""

    CLONE_INTERRUPTED = "spot.clone.max-interruptions"  # the hard cap reached: clone On-Demand
    STOP_INTERRUPTED = "spot.stop.max-interruptions"  # ... and stop the Spot job
    CLONE_COUNT_RULE = "spot.clone.count-rule"  # no economics (missing data, or off): the count rule reached
    STOP_COUNT_RULE = "spot.stop.count-rule"
    CLONE_ON_DEMAND_CHEAPER = "spot.clone.on-demand-cheaper"  # finishing On-Demand costs less than on Spot
    STOP_ON_DEMAND_CHEAPER = "spot.stop.on-demand-cheaper"
    CLONE_NO_PROGRESS = "spot.clone.no-progress"  # Spot keeps too little of its work to finish at all
    STOP_NO_PROGRESS = "spot.stop.no-progress"
    CLONE_MAX_WAIT_BUDGET = "spot.clone.max-wait-budget"  # Spot would not finish within MaxWaitTimeInSeconds
    STOP_MAX_WAIT_BUDGET = "spot.stop.max-wait-budget"
    CLONE_DEADLINE = "spot.clone.deadline"  # the team's deadline slack (max_delay_hours) is spent
    STOP_DEADLINE = "spot.stop.deadline"
    CLONE_MAX_WAIT = "spot.clone.max-wait"  # ended with MaxWaitTimeExceeded: clone On-Demand
    CLONE_STORM = "spot.clone.storm"  # a new Spot job of a type in a storm: start it On-Demand (opt-in)
    # leaving Spot on its own type, it goes on Spot on another type first (spot.fallbacks + job tag opt-in)
    CLONE_ALTERNATIVE = "spot.clone.alternative"
    STOP_ALTERNATIVE = "spot.stop.alternative"
    STOP_STORM = "spot.stop.storm"  # ... and stop the Spot job before it bills
    # the job's clone exists (a move whose stop failed or never ran) and the job still runs: stop it now
    STOP_CLONE_EXISTS = "spot.stop.clone-exists"
    NO_STORM = "spot.skip.no-storm"  # a new Spot job, its type is not in a storm
    HEALTH_UNKNOWN = "spot.skip.health-unknown"  # a new Spot job, the fleet's Spot health could not be read
    DISABLED = "spot.skip.disabled"
    NOT_SPOT = "spot.skip.not-spot"
    NO_FALLBACK_ON_MAX_WAIT = "spot.skip.no-fallback-on-max-wait"
    NOT_IN_PROGRESS = "spot.skip.not-in-progress"
    # the interruption the event reported is over (the job trains again, or is in a later interruption)
    NO_LONGER_INTERRUPTED = "spot.skip.no-longer-interrupted"
    NO_LONGER_STARTING = "spot.skip.no-longer-starting"  # a new job's start event, but the job bills by now
    SPOT_CHEAPER = "spot.skip.spot-cheaper"  # the numbers say: finish on Spot
    BELOW_THRESHOLD = "spot.skip.below-threshold"  # no economics: fewer interruptions than the count rule
    BAD_LINEAGE = "spot.skip.bad-lineage"
    ORCHESTRATED = "spot.skip.orchestrated"  # its orchestrator retries it
    BUDGET_SPENT = "spot.skip.budget-spent"
    NO_CHECKPOINT = "spot.skip.no-checkpoint"
    NOT_CLONABLE = "spot.skip.not-clonable"
    TOO_MANY_TAGS = "spot.skip.too-many-tags"
    ROLE_NOT_ALLOWED = "spot.skip.role-not-allowed"
    JOB_GONE = "spot.skip.job-gone"
    TOO_LATE = "spot.skip.too-late"  # a MaxWaitTimeExceeded end decided longer than late_after_hours after it
    END_TIME_UNKNOWN = "spot.skip.end-time-unknown"  # ... or when it ended cannot be read


Codes = type[ResumeCode] | type[SpotCode]


@dataclass(frozen=True)
class CloneContext:
    now: datetime
    shape: RequestShape
    role_patterns: tuple[str, ...]  # role names governance may pass (mirrors the template's grant)


@dataclass(frozen=True)
class CloneDecision:
    """What to do about one job: ``decisions`` to audit (a ``clone``, maybe a ``stop``, or one ``none``)."""

    decisions: tuple[Decision, ...]
    plan: ClonePlan | None = None
    stop_source: bool = False
    # ``resume.defer.backoff`` / ``resume.defer.source-running`` / ``resume.defer.source-stopping``: when the
    # reconciler may resume it
    resume_after: datetime | None = None
    takes_over: TrainingJob | None = None  # ``spot.stop.clone-exists``: the existing clone the stop hands over to
    # a skip no later decision can change (the source completed, or is Stopped by its owner): a deferred
    # resume's deferral is settled (tag smgov:resume-settled), the reconciler no longer decides it again
    settled: bool = False
    # a skip made while some hosts' logs could not be read (a GetLogEvents that failed): a later read may reach
    # them, so the reconciler decides the job again (tagged smgov:resume-after, when not deferred already)
    again: bool = False

    @property
    def clone(self) -> Decision | None:
        return next((d for d in self.decisions if d.action is Action.CLONE), None)

    @property
    def stop(self) -> Decision | None:
        return next((d for d in self.decisions if d.action is Action.STOP), None)


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())  # one line
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _none(rule: str, code: str, mode: Mode, reason: str, evidence: dict[str, Any]) -> CloneDecision:
    return CloneDecision(
        decisions=(
            Decision(rule=rule, code=code, action=Action.NONE, mode=mode, reason=reason, evidence=evidence),
        )
    )


def _plan(
    rule: str,
    codes: Codes,
    mode: Mode,
    *,
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    ctx: CloneContext,
    max_attempts: int,
    require_checkpoint: bool,
    reason: ResumeReason,
    on_demand: bool,
    evidence: dict[str, Any],
    fault: str | None = None,
    instance_type: str | None = None,
) -> ClonePlan | CloneDecision:
    """The checks both capabilities share, then the plan; a ``none`` decision says which check failed.

    ``fault`` is this failure's lemon key (``<class>@<host>``): when it equals the one this job was cloned
    for (tag ``smgov:failure``), the fault recurred on the same host position and counts double."""
    owner = orchestrator_of(description, tags)
    if owner is not None:
        evidence.update(owner.evidence())
        return _none(
            rule,
            codes.ORCHESTRATED,
            mode,
            f"not resumed: the job belongs to a {owner.kind} ({owner.identity}), which retries it itself",
            evidence,
        )
    try:
        lineage = Lineage.of(job.name, tags)
    except LineageError as exc:
        return _none(rule, codes.BAD_LINEAGE, mode, f"not resumed: {exc}", evidence)
    strikes = repeat_faults(tags)
    repeated = fault is not None and lineage.attempt > 0 and tags.get(TAG_FAILURE) == fault
    if repeated:
        strikes += 1
        evidence["repeated_fault"] = fault
    retries = sagemaker_retries(job, description)
    earlier = earlier_retries(tags) if lineage.attempt > 0 else 0  # a lineage's first job has no earlier ones
    all_retries = earlier + retries.count
    evidence.update({"root_job": lineage.root, "attempt": lineage.next_attempt, "max_attempts": max_attempts})
    evidence.update(retries.evidence())
    if earlier:
        evidence["sagemaker_retries_earlier"] = earlier
    if strikes:
        evidence["repeat_faults"] = strikes
    if lineage.next_attempt + strikes + all_retries > max_attempts:
        counted = f", {strikes} more for faults that recurred on the same host" if strikes else ""
        inside = (
            f" and {all_retries} retr{'y' if all_retries == 1 else 'ies'} inside SageMaker"
            + (f" ({earlier} in earlier generations)" if earlier else "")
            if all_retries
            else ""
        )
        return _none(
            rule,
            codes.BUDGET_SPENT,
            mode,
            f"not resumed: the retry budget of lineage {lineage.root} is spent "
            f"({lineage.attempt} of {max_attempts} attempt(s) made{counted}{inside})",
            evidence,
        )
    if require_checkpoint and not job.checkpoint_s3_uri:
        return _none(
            rule,
            codes.NO_CHECKPOINT,
            mode,
            "not resumed: the job has no CheckpointConfig, so a clone would start from scratch",
            evidence,
        )
    try:
        marks = {
            TAG_FAILURE: fault or "",
            TAG_STRIKES: str(strikes) if strikes else "",
            TAG_RETRIES: str(all_retries) if all_retries else "",
        }
        plan = plan_clone(
            description,
            tags,
            ctx.shape,
            reason=reason,
            on_demand=on_demand,
            marks=marks,
            instance_type=instance_type,
        )
    except TooManyTags as exc:
        evidence["tags"] = counted_tags(tags)
        return _none(rule, codes.TOO_MANY_TAGS, mode, f"not resumed: {exc}", evidence)
    except ClonePlanError as exc:
        return _none(rule, codes.NOT_CLONABLE, mode, f"not resumed: {exc}", evidence)
    evidence.update(plan.evidence())
    if not role_allowed(job.role_arn, ctx.role_patterns):
        return _none(
            rule,
            codes.ROLE_NOT_ALLOWED,
            mode,
            f"not resumed: governance may not pass role {job.role_arn} to SageMaker "
            f"(allowed: {', '.join(ctx.role_patterns) or 'none'})",
            evidence,
        )
    return plan


def repeat_faults(tags: Mapping[str, str]) -> int:
    """The extra budget a lineage has spent on recurring faults (tag ``smgov:repeat-faults``; 0 if unreadable)."""
    raw = tags.get(TAG_STRIKES, "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 2 else 0


def earlier_retries(tags: Mapping[str, str]) -> int:
    """The retries SageMaker made inside the lineage's earlier generations (tag ``smgov:sagemaker-retries``;
    0 if unreadable, as ``repeat_faults``)."""
    raw = tags.get(TAG_RETRIES, "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 3 else 0


def _not_resumable(diagnosis: Diagnosis, mode: Mode, evidence: dict[str, Any]) -> CloneDecision:
    cls = diagnosis.failure_class
    if diagnosis.peer_unread:
        seen = f"only a peer's failure ({diagnosis.signature})"
        why = "the failing host's may be among them"
        return _cause_unknown(diagnosis, seen, diagnosis.hosts_unread, why, mode, evidence)
    code = {"user-code": ResumeCode.USER_CODE, UNKNOWN: ResumeCode.UNKNOWN}.get(cls, ResumeCode.CLASS_SKIPPED)
    where = f" on {diagnosis.host}" if diagnosis.host else ""
    what = f"{cls} ({diagnosis.signature}{where})" if diagnosis.signature else cls
    basis = " (from FailureReason alone: the logs could not be read)" if diagnosis.basis != "logs" else ""
    return _none(RESUME_RULE_ID, code, mode, f"not resumed: the failure is classified as {what}{basis}", evidence)


def _logs_pending(
    job: TrainingJob,
    failure: FailureEvidence | None,
    diagnosis: Diagnosis,
    resume: ResumePolicy,
    now: datetime,
) -> tuple[datetime, str] | None:
    """When (the failure + ``resume.logs_settle_minutes``) and why a decision waits for the failed process's
    last log lines: the logs were read, the failure is more recent than the settle period, and they hold no
    cause of it. CloudWatch Logs receives a host's lines from an agent that batches them, and nothing bounds
    when the last ones (the traceback that says why) arrive, so a read at the ``Failed`` event may miss them.
    No cause: the diagnosis is ``unknown`` (nothing matched, a peer's report nothing explains, only a peer's
    report with hosts unread), rests on the ``FailureReason`` alone (no host) for a skip the logs could still
    overturn or a hardware or interconnect fault whose lemon rule needs its host, or is a peer's report that
    only a silent peer corroborates (the silence may be its lines in flight); and a resumable interconnect
    cause on one host of a job whose other hosts' logs do not all say why they ended
    (``_explainable_by_silent_peer``), or were not all read (``_peers_unread``): the silent (or unread) host may be the one that died first, of a user-code exception
    still in flight, which would make the interconnect error its peer's report of the exit and the job the
    user's code (a wrong clone spends the retry budget and GPU hours; the wait costs minutes). A job of one host
    is not put off for it. None: decide now; so is a
    resumable class SageMaker itself reports (``InternalServerError``, a capacity error): no host decides
    anything of it, and its resume is not put off. Logs that could not be read
    at all are not waited for: the read failed (denied, throttled past its retries, no log group, no stream),
    which waiting does not mend, and the ``FailureReason`` decides as it always did; neither is a failure
    whose time cannot be read (its backoff and lateness cannot be counted either)."""
    settle = resume.logs_settle_minutes
    if not settle or failure is None or not failure.logs_read:
        return None
    failed_at = failure_time(job)
    if failed_at is None:
        return None
    due = failed_at + timedelta(minutes=settle)
    if now >= due:
        return None
    if diagnosis.failure_class == UNKNOWN:
        why = "the logs read hold no cause of it"
    elif diagnosis.host is None and (
        diagnosis.verdict is not Verdict.RESUME or diagnosis.failure_class in HARDWARE_CLASSES
    ):
        why = "its cause rests on the FailureReason alone, none of the logs read holds it"
    elif diagnosis.role is Role.CONSEQUENCE:
        why = "the logs read hold only a peer's report of it, corroborated by a peer's silence alone"
    elif (silent := _explainable_by_silent_peer(diagnosis)) or _peers_unread(diagnosis):
        unsaid = [f"the log of {', '.join(silent)} holds no line yet on why its process ended"] if silent else []
        if unread := _peers_unread(diagnosis):
            unsaid.append(f"{unread} other host(s)' logs could not be read")
        why = (
            f"{diagnosis.host}'s interconnect error may be its report of a peer's exit, and {' and '.join(unsaid)}"
        )
    else:
        return None
    return due, why


def _explainable_by_silent_peer(diagnosis: Diagnosis) -> tuple[str, ...]:
    """The other hosts whose silence leaves a resumable interconnect cause on one host open: an EFA or InfiniBand
    completion error is also what a rank sees when its peer's process exits, and ``classify`` takes it for the
    user's code when a user-code exception on another host precedes it (``failures._explaining``). A host whose
    read tail matches no signature (``Diagnosis.hosts_silent``) may hold that exception in its last lines, still
    on their way; on a job of one host, or when every other host's tail says why it ended (its own fault, a
    report of the peer's exit), nothing is waited for. Empty: nothing to wait for."""
    if not _interconnect_cause(diagnosis):
        return ()
    return tuple(host for host in diagnosis.hosts_silent if host != diagnosis.host)


def _interconnect_cause(diagnosis: Diagnosis) -> bool:
    """Whether the diagnosis is a resumable interconnect cause on a named host (its own line there)."""
    return (
        diagnosis.failure_class == INTERCONNECT
        and diagnosis.role is Role.CAUSE
        and diagnosis.verdict is Verdict.RESUME
        and diagnosis.host is not None
    )


def _peers_unread(diagnosis: Diagnosis) -> int:
    """The hosts whose log was not read (``Diagnosis.hosts_unread``: a read that failed, or one the read's budget
    left out) beside a resumable interconnect cause on one host: each may hold the user-code exception that would
    make the cause its peer's report of the exit, as a silent host may (``_explainable_by_silent_peer``), and
    nothing at all is known of it. Waited for as a silent host is, within the settle period; after it, the service
    has read every host up to ``MAX_LOG_HOSTS`` (``Diagnosis.interconnect_unread``), and those whose read failed
    leave the cause unknown (``_unread_peers``: no clone on missing evidence). 0: none, or not such a cause."""
    return diagnosis.hosts_unread if _interconnect_cause(diagnosis) else 0


def _logs_deferral(
    pending: tuple[datetime, str], diagnosis: Diagnosis, resume: ResumePolicy, mode: Mode, evidence: dict[str, Any]
) -> CloneDecision:
    """``resume.defer.logs-pending``: decided again at ``due`` (tagged ``smgov:resume-after``), by the reconciler."""
    due, why = pending
    evidence["logs_settle_minutes"] = resume.logs_settle_minutes
    evidence["resume_after"] = due.isoformat()
    what = f"{diagnosis.failure_class} ({diagnosis.signature})" if diagnosis.signature else diagnosis.failure_class
    deferred = Decision(
        rule=RESUME_RULE_ID,
        code=ResumeCode.DEFER_LOGS_PENDING,
        action=Action.NONE,
        mode=mode,
        reason=(
            f"not decided yet: it failed less than {resume.logs_settle_minutes} min ago and {why} (read as {what}); "
            "a failed process's last lines may reach CloudWatch Logs minutes after its end, so the reconciler "
            f"decides after {due:%Y-%m-%d %H:%M} UTC, on what the logs hold then"
        ),
        evidence=evidence,
    )
    return CloneDecision(decisions=(deferred,), resume_after=due)


def _backoff(
    job: TrainingJob,
    planned: ClonePlan,
    resume: ResumePolicy,
    mode: Mode,
    now: datetime,
    why: str,
    evidence: dict[str, Any],
) -> CloneDecision | None:
    """``resume.defer.backoff`` while the attempt's backoff runs (or a skip when the failure time is
    unknown); None: clone now."""
    wait = resume.backoff_for(planned.attempt)
    if not wait:
        return None
    failed_at = failure_time(job)
    evidence["backoff_minutes"] = wait
    if failed_at is None:
        return _none(
            RESUME_RULE_ID,
            ResumeCode.FAILURE_TIME_UNKNOWN,
            mode,
            f"not resumed: attempt {planned.attempt} waits {wait} min after the failure, and the failure "
            "time cannot be read (no Failed transition, TrainingEndTime or LastModifiedTime)",
            evidence,
        )
    due = failed_at + timedelta(minutes=wait)
    evidence["resume_after"] = due.isoformat()
    if now >= due:
        return None
    deferred = Decision(
        rule=RESUME_RULE_ID,
        code=ResumeCode.DEFER_BACKOFF,
        action=Action.NONE,
        mode=mode,
        reason=(
            f"failed with a resumable fault, {why}: attempt {planned.attempt} of {resume.max_attempts} "
            f"waits {wait} min after the failure, until {due:%Y-%m-%d %H:%M} UTC; the reconciler "
            f"resumes it then as {planned.name}"
        ),
        evidence=evidence,
    )
    return CloneDecision(decisions=(deferred,), resume_after=due)


def decide_resume(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    resume: ResumePolicy,
    default_mode: Mode,
    ctx: CloneContext,
    failure: FailureEvidence | None = None,
    checkpoint: CheckpointProgress | None = None,
    source: TrainingJob | None = None,
    next_clone: TrainingJob | None = None,
    diagnosis: Diagnosis | None = None,
) -> CloneDecision:
    """Resume a ``Failed`` job when the policy says it is worth it (see the module docstring).

    ``failure`` is what was read of the hosts' logs (None: nothing was read; the ``FailureReason`` alone
    decides), ``diagnosis`` its classification when the caller has made it (None: classified here; the
    classification costs a signature search per line read, so a caller that needed it first passes it on); ``checkpoint`` what the checkpoint location holds (None: not checked); ``source`` the job a
    clone was made from (its ``smgov:resumed-from`` tag) as it is now (None: not a clone, or the source no
    longer exists; a source that cannot be read is no decision: the service raises, and the delivery is
    retried). A clone whose source still runs is not resumed now (``resume.defer.source-running``): a Spot
    move whose stop failed left the Spot job running, and a clone of the failed clone would bill beside it
    and write the same checkpoint location; it is deferred to the reconciler, which decides again once the
    source has ended; so is one whose source is still ``Stopping`` by a stop requested after it failed
    (``resume.defer.source-stopping``: the owner's stop, or one at the source's runtime limit, is told apart
    only once it has ended). ``next_clone`` is the job under the name this job's next clone takes, read by the
    service only when the source's end denies the resume (None: none, or not read): one of this job's that
    runs or completed was made by an earlier decision, and the resume goes on to meet it."""
    mode = resume.mode or default_mode
    hours = round(job.training_seconds(ctx.now) / 3600, 2)
    evidence: dict[str, Any] = {"failure_reason": _short(job.failure_reason), "training_hours": hours}
    if not resume.enabled:
        return _none(RESUME_RULE_ID, ResumeCode.DISABLED, mode, "auto-resume is disabled by policy", evidence)
    if job.status != "Failed":
        return _none(
            RESUME_RULE_ID,
            ResumeCode.NOT_FAILED,
            mode,
            f"not resumed: the job is {job.status}, not Failed",
            evidence,
        )
    if diagnosis is None:
        diagnosis = classify(
            job.failure_reason, failure or FailureEvidence.unread("the logs were not read"), resume.taxonomy()
        )
    evidence["diagnosis"] = diagnosis.evidence()
    held = _held(
        job,
        tags,
        resume,
        mode,
        ctx.now,
        failure=failure,
        diagnosis=diagnosis,
        source=source,
        next_clone=next_clone,
        hours=hours,
        evidence=evidence,
    )
    if held is not None:
        return held
    planned = _plan(
        RESUME_RULE_ID,
        ResumeCode,
        mode,
        job=job,
        description=description,
        tags=tags,
        ctx=ctx,
        max_attempts=resume.max_attempts,
        require_checkpoint=resume.require_checkpoint,
        reason=ResumeReason.FAILED,
        on_demand=False,
        evidence=evidence,
        fault=diagnosis.lemon_key,
    )
    if isinstance(planned, CloneDecision):
        return replace(planned, settled=True)  # the job's description and tags decide: final
    code = ResumeCode.CLONE
    start = f" from checkpoint {planned.checkpoint_s3_uri}" if planned.checkpoint_s3_uri else " from scratch"
    if checkpoint is not None and planned.checkpoint_s3_uri and hours == 0:
        # The attempt never trained (e.g. no capacity while Starting): it could not have written any.
        evidence["checkpoint_progress"] = "not expected"
    elif checkpoint is not None and planned.checkpoint_s3_uri:
        evidence.update(checkpoint.evidence())
        if checkpoint.unreadable:  # do no harm: progress that cannot be confirmed is not assumed
            if resume.require_checkpoint_progress:
                return _none(
                    RESUME_RULE_ID,
                    ResumeCode.CHECKPOINT_UNREADABLE,
                    mode,
                    f"not resumed: the checkpoint location {planned.checkpoint_s3_uri} could not be checked "
                    f"({checkpoint.note}), so progress since the failed attempt started is not confirmed",
                    evidence,
                )
            code = ResumeCode.CLONE_UNCHECKED
            start = (
                f" from checkpoint {planned.checkpoint_s3_uri} (not confirmed: {checkpoint.note}; "
                "require_checkpoint_progress is off)"
            )
        elif checkpoint.checked and checkpoint.written == 0:
            if resume.require_checkpoint_progress:
                return _none(
                    RESUME_RULE_ID,
                    ResumeCode.NO_CHECKPOINT_PROGRESS,
                    mode,
                    f"not resumed: the failed attempt wrote nothing to {planned.checkpoint_s3_uri} "
                    f"({checkpoint.total} older object(s) there): a clone would redo the same work",
                    evidence,
                )
            code = ResumeCode.CLONE_WITHOUT_PROGRESS
            start = (
                f" from the older checkpoint files in {planned.checkpoint_s3_uri} (the failed attempt wrote none)"
                if checkpoint.total
                else f" from scratch ({planned.checkpoint_s3_uri} is empty)"
            )
    why = f"{diagnosis.failure_class} ({diagnosis.signature}" + (
        f" on {diagnosis.host})" if diagnosis.host else ")"
    )
    waiting = _backoff(job, planned, resume, mode, ctx.now, why, evidence)  # adds its evidence first
    decision = Decision(
        rule=RESUME_RULE_ID,
        code=code,
        action=Action.CLONE,
        mode=mode,
        reason=(
            f"failed with a resumable fault, {why}, after {hours:g} h of training: resume as "
            f"{planned.name} (attempt {planned.attempt} of {resume.max_attempts}){start}"
        ),
        evidence=evidence,
        request=planned.request,
    )
    return waiting or CloneDecision(decisions=(decision,), plan=planned)


def _held(
    job: TrainingJob,
    tags: Mapping[str, str],
    resume: ResumePolicy,
    mode: Mode,
    now: datetime,
    *,
    failure: FailureEvidence | None,
    diagnosis: Diagnosis,
    source: TrainingJob | None,
    next_clone: TrainingJob | None,
    hours: float,
    evidence: dict[str, Any],
) -> CloneDecision | None:
    """``decide_resume``'s checks before the clone is planned: the diagnosis's verdict, the source, lateness,
    the training time, and a wait for the logs' last lines (``_logs_pending``; never in audit mode, which tags
    nothing, nor on a job without room for the deferral's tags); None: plan the clone. A skip on the training
    time is final (``settled``: a deferred job is not decided again), and so is one on the diagnosis when it
    rests on logs that were read (``_read_in_full``): one decided while they could not be is decided again."""
    pending = _logs_pending(job, failure, diagnosis, resume, now)
    if pending is not None and (
        mode is Mode.AUDIT or not has_room_for(tags, TAG_RESUME_AFTER, TAG_RESUME_SETTLED)
    ):
        # Decided now on what the logs hold: audit mode tags nothing, so nothing would come back to a deferral,
        # and a job without room for the deferral's tags (SageMaker's 50) could not be deferred
        pending = None
    if diagnosis.verdict is not Verdict.RESUME:
        # A job that would not be resumed whatever its logs say (too short) is decided at once
        if pending is not None and _too_short(job, tags, source, hours, resume, mode, now, dict(evidence)) is None:
            return _logs_deferral(pending, diagnosis, resume, mode, evidence)
        # Final only on a full read: a skip decided while the logs, or some hosts' logs, could not be read (a
        # throttled read) is decided again at the next run rather than settled on the FailureReason alone
        skipped = _not_resumable(diagnosis, mode, evidence)
        if _read_in_full(failure, diagnosis):
            return replace(skipped, settled=True)
        return _again_unless_late(skipped, job, source, resume, mode, now, failure, evidence)
    held = _source_running(job, tags, source, mode, now, evidence, next_clone) or _too_late(
        job, source, resume, mode, now, evidence
    )
    if held is not None:
        return held
    short = _too_short(job, tags, source, hours, resume, mode, now, evidence)
    if short is not None:
        return replace(short, settled=True)
    if pending is not None:  # before the plan: the cause's host decides the lemon rule (its budget, its tag)
        return _logs_deferral(pending, diagnosis, resume, mode, evidence)
    if diagnosis.interconnect_unread and failure is not None and failure.hosts_failed:
        # Not settled: the hosts whose read failed may be read at the next run (when the job was deferred)
        return replace(_unread_peers(diagnosis, failure, mode, evidence), again=True)
    return None


def _again_unless_late(
    skipped: CloneDecision,
    job: TrainingJob,
    source: TrainingJob | None,
    resume: ResumePolicy,
    mode: Mode,
    now: datetime,
    failure: FailureEvidence | None,
    evidence: dict[str, Any],
) -> CloneDecision:
    """A skip on the diagnosis made while some hosts' logs could not be read is decided again on a new read
    (``again``) while a clone is still in time; past ``late_after_hours`` no read could lead to one, and the decision
    is the final ``resume.skip.too-late`` (a skip retried for a new read there was never recorded at all)."""
    if not _hosts_failed(failure):
        return skipped
    late = _too_late(job, source, resume, mode, now, dict(evidence))
    if late is not None and late.settled:
        return late
    return replace(skipped, again=True)


def _unread_peers(
    diagnosis: Diagnosis, failure: FailureEvidence, mode: Mode, evidence: dict[str, Any]
) -> CloneDecision:
    """``resume.skip.insufficient-evidence`` for a resumable interconnect cause while some hosts' logs could not be
    read (``Diagnosis.interconnect_unread``; a read that failed, which a later read may reach, not a host beyond
    what any read reaches): a user-code exception on one of them, written before it, would make the transport
    error the report of that process's exit, as the service reads every host to find out; no clone on a guess."""
    where = f" on {diagnosis.host}" if diagnosis.host else ""
    seen = f"an interconnect fault ({diagnosis.signature}{where})"
    why = "a user-code exception there, before it, would make it the report of that host's exit"
    return _cause_unknown(diagnosis, seen, failure.hosts_failed, why, mode, evidence)


def _cause_unknown(
    diagnosis: Diagnosis, seen: str, unread: int, why: str, mode: Mode, evidence: dict[str, Any]
) -> CloneDecision:
    """``resume.skip.insufficient-evidence``: the logs read show ``seen``, and ``unread`` hosts' logs could not be
    read, which leaves the cause unknown (``why``): no clone on a guess."""
    hosts = len(diagnosis.hosts_read) + diagnosis.hosts_unread
    return _none(
        RESUME_RULE_ID,
        ResumeCode.INSUFFICIENT_EVIDENCE,
        mode,
        f"not resumed: the hosts' logs read show {seen}, and {unread} of the job's {hosts} hosts' logs could not "
        f"be read: {why}, so the cause is not known",
        evidence,
    )


def diagnosis_timed_out(
    job: TrainingJob, *, resume: ResumePolicy, default_mode: Mode, now: datetime, timeout: PatternTimeout
) -> CloneDecision:
    """``resume.skip.diagnosis-timeout``: the failure's classification did not finish within the time budget the
    service runs it in (``timeout``: a signature's pattern, most likely a team's that the backtracking check let
    through, was still searching a line read). A diagnosis that did not finish is not trusted: no clone on it.

    Settled (a deferred job is not decided again): the same signature would search the same lines at the next
    decision, the reconciler's, and run out of time again, each run, until the job is too late. The job is left
    to its owner, as after any skip, and the signature to the platform team (the service logs it)."""
    mode = resume.mode or default_mode
    evidence: dict[str, Any] = {
        "failure_reason": _short(job.failure_reason),
        "training_hours": round(job.training_seconds(now) / 3600, 2),
        PATTERN_TIMEOUT: timeout.evidence(),
    }
    what = f" ({timeout.subject}: {timeout.pattern!r})" if timeout.pattern is not None else ""
    reason = (
        f"not resumed: the failure's diagnosis did not finish within {timeout.seconds:g} s, a signature's pattern "
        f"still searching the log lines read{what}: a cause not known is no ground for a clone"
    )
    return replace(_none(RESUME_RULE_ID, ResumeCode.DIAGNOSIS_TIMEOUT, mode, reason, evidence), settled=True)


def _hosts_failed(failure: FailureEvidence | None) -> bool:
    """Whether the logs were read but some hosts' reads failed (which a later read may mend); not logs that
    could not be read at all (denied, no log group: the ``FailureReason`` decides, as it always did)."""
    return failure is not None and failure.logs_read and failure.hosts_failed > 0


def _read_in_full(failure: FailureEvidence | None, diagnosis: Diagnosis) -> bool:
    """Whether a diagnosis rests on logs that were read: all of them as far as the read's budget goes (a host
    ``resume.log_hosts`` leaves out is left out by every later read too), or enough to name a known class."""
    if failure is None or not failure.logs_read:
        return False
    return diagnosis.failure_class != UNKNOWN or failure.hosts_failed == 0


def _too_short(
    job: TrainingJob,
    tags: Mapping[str, str],
    source: TrainingJob | None,
    hours: float,
    resume: ResumePolicy,
    mode: Mode,
    now: datetime,
    evidence: dict[str, Any],
) -> CloneDecision | None:
    """``resume.skip.too-short`` when the lineage has not trained ``min_training_hours``, as far as it is
    known; None: long enough. A job governance did not create (or whose lineage tags are broken: ``_plan``
    reports them) counts its own training. A clone auto-resume made (``smgov:resume-reason`` failed-transient)
    inherits the qualification its resume checked, so one that fails again while starting is still resumed.
    Any other clone (a Spot or storm move, a Spot alternative, a ``MaxWaitTimeExceeded`` fallback, ``smgov
    resume`` by hand, no reason tag) never met it: its own training and its source's (``source``, as read now;
    none when not read) count, unless the source is itself a clone auto-resume made in the same lineage (its
    tags, when read), whose qualification it inherits. Generations further back are not counted: a lineage
    whose training is not known to be long enough is not resumed (do no harm)."""
    try:
        lineage = Lineage.of(job.name, tags)
    except LineageError:
        lineage = Lineage(root=job.name, attempt=0)
    if lineage.attempt > 0 and tags.get(TAG_REASON) == ResumeReason.FAILED:
        return None
    trained = hours
    if source is not None and source.name != tags.get(TAG_SOURCE):
        source = None  # not the job this one was cloned from (an offline answer): nothing is known of that one
    if lineage.attempt > 0:
        if source is not None and _resumed_in(source, lineage.root):
            evidence["qualified_by"] = source.name
            return None
        if source is not None:
            source_hours = round(source.training_seconds(now) / 3600, 2)
            evidence["source_training_hours"] = source_hours
            trained = round(hours + source_hours, 2)
        evidence["lineage_training_hours"] = trained
    if trained >= resume.min_training_hours:
        return None
    counted = ""
    if lineage.attempt > 0:
        made = f"a {tags.get(TAG_REASON) or 'governance'} clone, which auto-resume did not make"
        known = f"{trained:g} h with its source's" if source is not None else "its source's training unknown"
        counted = f" ({made}; {known})"
    return _none(
        RESUME_RULE_ID,
        ResumeCode.TOO_SHORT,
        mode,
        f"not resumed: it trained {hours:g} h{counted}, less than the {resume.min_training_hours:g} h worth "
        "resuming",
        evidence,
    )


def source_qualifies(job_name: str, tags: Mapping[str, str]) -> bool:
    """Whether a failed job's source may carry its qualification for auto-resume: the job is a clone auto-resume
    did not make, of a source that is itself a clone (attempt 2 or later). Its source's tags are read then
    (``ListTags``): a source auto-resume made lends the job its qualification (``_too_short``)."""
    try:
        lineage = Lineage.of(job_name, tags)
    except LineageError:
        return False
    return lineage.attempt > 1 and tags.get(TAG_REASON) != ResumeReason.FAILED


def _resumed_in(source: TrainingJob, root: str) -> bool:
    """Whether ``source`` is a clone auto-resume made in lineage ``root`` (its tags, when they were read)."""
    tags = source.tags or {}
    return tags.get(TAG_REASON) == ResumeReason.FAILED and tags.get(TAG_ROOT) == root


def _dated_in_time(
    rule: str,
    mode: Mode,
    since: datetime | None,
    limit_hours: float,
    now: datetime,
    evidence: dict[str, Any],
    *,
    undated: tuple[str, str],
    too_late: tuple[str, str],
) -> CloneDecision | None:
    """A clone's time check (auto-resume's and the Spot fallback's): the ``undated`` skip (code, reason) when
    ``since`` cannot be read, the ``too_late`` one (code, reason with ``{since}``, ``{hours}``, ``{limit}``) when
    it is more than ``limit_hours`` before ``now``; None: in time. The evidence gains ``ended_at`` and
    ``late_after_hours`` once dated."""
    if since is None:
        return _none(rule, undated[0], mode, undated[1], evidence)
    evidence["ended_at"] = since.isoformat()
    evidence["late_after_hours"] = limit_hours
    age = now - since
    if age <= timedelta(hours=limit_hours):
        return None
    reason = too_late[1].format(
        since=f"{since:%Y-%m-%d %H:%M}", hours=f"{age.total_seconds() / 3600:.1f}", limit=f"{limit_hours:g}"
    )
    return _none(rule, too_late[0], mode, reason, evidence)


def _too_late(
    job: TrainingJob,
    source: TrainingJob | None,
    resume: ResumePolicy,
    mode: Mode,
    now: datetime,
    evidence: dict[str, Any],
) -> CloneDecision | None:
    """``resume.skip.too-late`` (settled: time only moves on) when the job could first be resumed more than
    ``late_after_hours`` ago, ``resume.skip.failure-time-unknown`` when that moment cannot be read (not
    guessed: a job that failed days ago is not cloned on a guess); None: in time."""
    since = resumable_since(job, source)
    late = _dated_in_time(
        RESUME_RULE_ID,
        mode,
        since,
        resume.late_after_hours,
        now,
        evidence,
        undated=(
            ResumeCode.FAILURE_TIME_UNKNOWN,
            "not resumed: the failure time cannot be read (no Failed transition, TrainingEndTime or "
            "LastModifiedTime), so whether the resume is still in time is unknown",
        ),
        too_late=(
            ResumeCode.TOO_LATE,
            "not resumed: it could be resumed from {since} UTC, {hours} h ago, more than the {limit} h within "
            "which a resume is made (a late redrive or replay): its owner has most likely relaunched it by hand",
        ),
    )
    return late if late is None or since is None else replace(late, settled=True)


def _source_running(
    job: TrainingJob,
    tags: Mapping[str, str],
    source: TrainingJob | None,
    mode: Mode,
    now: datetime,
    evidence: dict[str, Any],
    next_clone: TrainingJob | None = None,
) -> CloneDecision | None:
    """The deferral of a clone whose source still runs (``resume.defer.source-running``) or is still
    ``Stopping`` by a stop requested after the clone failed (``resume.defer.source-stopping``), or the skip of
    one whose source completed (its lineage finished, ``resume.skip.source-completed``) or was ``Stopped`` by
    a stop requested after the clone failed (``resume.skip.source-stopped``); None: go on. The deferred clone
    is tagged ``smgov:resume-after`` (due at once), so the reconciler's deferred resume, which lists recently
    failed jobs, decides again at its next run: once the source has ended the usual checks decide, while it
    still runs (or stops) the clone is deferred again (until it falls out of the reconciler's look-back).

    A skip gives way to this job's next clone when it exists and runs or completed (``next_clone``): an
    earlier decision resumed the job (before the source's stop was seen, or by a version of this code that
    did not look), and deciding again must meet it as "already exists", so that its owner is told once,
    not record "not resumed" beside it."""
    name = tags.get(TAG_SOURCE)
    if not name or source is None:
        return None
    evidence["source_job"] = name
    evidence["source_status"] = f"{source.status}/{source.secondary_status}"
    skip: CloneDecision | None = None
    if source.status == "Completed":
        # the lineage finished where it was (e.g. a Spot job whose move's stop failed trained on to the end):
        # a resume of its failed clone would train it again. A source Stopped or Failed goes on (a Spot
        # move stops its source, and its clone's failure is resumed as usual)
        skip = _none(
            RESUME_RULE_ID,
            ResumeCode.SOURCE_COMPLETED,
            mode,
            f"not resumed: the job it was cloned from, {name}, has completed ({source.status}/"
            f"{source.secondary_status}): the lineage is finished and a clone would train it again",
            evidence,
        )
    elif source.status == "Stopping" or (source.status == "Stopped" and source.secondary_status == "Stopped"):
        stopped_at, clone_failed_at = stop_time(source), failure_time(job)
        # A Spot move requests its source's stop right after creating the clone (or, its stop throttled, at
        # its retry's takeover, while the clone runs), so before the clone can fail, and nothing of the
        # service stops a source whose clone has failed (the move's fallback is spent, the takeover needs a
        # running clone): a plain stop requested after the clone failed was the owner's (or a stop for
        # another reason). The request is what counts, not the end: Stopping lasts minutes, and the move's
        # stop may end after the clone failed. Unknown times are not guessed: no clone.
        if stopped_at is None or clone_failed_at is None or stopped_at >= clone_failed_at:
            evidence["source_stopped_at"] = stopped_at.isoformat() if stopped_at else None
            evidence["clone_failed_at"] = clone_failed_at.isoformat() if clone_failed_at else None
            when = (
                "by a stop requested after this clone failed"
                if stopped_at is not None and clone_failed_at is not None
                else "and when it was asked to is not known"
            )
            if source.status == "Stopping":
                # Likely the owner's stop, but not yet certain: while it stops, SecondaryStatus reads Stopping
                # whatever the cause (botocore's SecondaryStatus), so a stop at the source's runtime limit
                # (it ends Stopped/MaxRuntimeExceeded, no owner's) cannot be told from it yet. No clone now
                # (one beside a stopping source would be denied once it is Stopped by its owner), and no
                # final skip either: deferred, decided again once the source has ended
                return _deferred(
                    ResumeCode.DEFER_SOURCE_STOPPING,
                    mode,
                    now,
                    evidence,
                    f"not resumed yet: the job it was cloned from, {name}, is stopping {when}: likely its "
                    "owner's stop of the lineage, but a stop at its runtime limit reads the same until it has "
                    "ended; it is decided again once that job has ended (at the reconciler's next runs)",
                )
            skip = _none(
                RESUME_RULE_ID,
                ResumeCode.SOURCE_STOPPED,
                mode,
                f"not resumed: the job it was cloned from, {name}, was stopped {when}, not by the Spot move "
                "that made this clone: the lineage was stopped, and a clone would train it again",
                evidence,
            )
    if skip is not None:
        if not _made_by(next_clone, job, tags):
            # final: the source has ended (Completed, or Stopped/Stopped: a Stopping one is deferred above)
            return replace(skip, settled=True)
        evidence["source_skip_met_clone"] = skip.decisions[0].code  # the resume an earlier decision made
        return None
    if source.status != "InProgress":
        return None
    return _deferred(
        ResumeCode.DEFER_SOURCE_RUNNING,
        mode,
        now,
        evidence,
        f"not resumed yet: the job it was cloned from, {name}, still runs ({source.status}/"
        f"{source.secondary_status}): a clone would bill beside it and write the same checkpoint location; "
        "it is decided again when that job ends (its end hands the clone to auto-resume) or at the "
        "reconciler's next run",
    )


def _deferred(code: ResumeCode, mode: Mode, now: datetime, evidence: dict[str, Any], reason: str) -> CloneDecision:
    """A clone's resume left to the reconciler, due at once (``smgov:resume-after``): its source has not ended."""
    evidence["resume_after"] = now.isoformat()
    deferred = Decision(
        rule=RESUME_RULE_ID, code=code, action=Action.NONE, mode=mode, reason=reason, evidence=evidence
    )
    return CloneDecision(decisions=(deferred,), resume_after=now)


def _made_by(clone: TrainingJob | None, job: TrainingJob, tags: Mapping[str, str]) -> bool:
    """Whether ``clone`` is ``job``'s next clone, made from it (``smgov:resumed-from``), running or done."""
    return (
        clone is not None
        and clone.name == next_clone_name(job.name, tags)
        and clone.tag(TAG_SOURCE) == job.name
        and clone.status in CLONE_RUNNING
    )


def stop_time(job: TrainingJob) -> datetime | None:
    """When the job's stop was requested: the start of its last ``Stopping`` transition (botocore's
    SecondaryStatus lists ``Stopping``), else its ``Stopped`` transition, else ``TrainingEndTime`` ("the
    time after model artifacts are uploaded" for a stopped job), else ``LastModifiedTime``. Each fallback
    lies after the request, so a stop they date is never taken for earlier than it was."""
    for status in ("Stopping", "Stopped"):
        starts = [t.start_time for t in job.transitions if t.status == status and t.start_time is not None]
        if starts:
            return starts[-1]
    return job.training_end_time or job.last_modified_time


ENDED_STATUSES: Final = frozenset({"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", MAX_WAIT_EXCEEDED})


def end_time(job: TrainingJob) -> datetime | None:
    """When the job ended: its last transition to an end (``ENDED_STATUSES``), else ``TrainingEndTime``, else
    ``LastModifiedTime``; None: none of them is known."""
    ends = [t.start_time for t in job.transitions if t.status in ENDED_STATUSES and t.start_time is not None]
    return ends[-1] if ends else job.training_end_time or job.last_modified_time


def resumable_since(job: TrainingJob, source: TrainingJob | None) -> datetime | None:
    """When the failed ``job`` could first be resumed: its failure, or, for a clone whose source (as read now)
    ended after it, the source's end (a clone deferred while its source ran is handed over at that end, which
    may come days after its failure). None: the failure time is unknown."""
    failed_at = failure_time(job)
    if failed_at is None or source is None or not source.is_terminal:
        return failed_at
    ended = end_time(source)
    return failed_at if ended is None else max(failed_at, ended)


def failure_time(job: TrainingJob) -> datetime | None:
    """When the job failed: its ``Failed`` transition, else ``TrainingEndTime``, else ``LastModifiedTime``."""
    failed = [t.start_time for t in job.transitions if t.status == "Failed" and t.start_time is not None]
    return failed[-1] if failed else job.training_end_time or job.last_modified_time


def resume_after_tag(moment: datetime) -> str:
    """The ``smgov:resume-after`` tag value (UTC, to the second; a valid SageMaker tag value)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_SETTLED_ON: Final = "@"  # in no decision code, in no job name ([a-zA-Z0-9-]), and allowed in a tag value


def settled_tag(code: str, job_name: str) -> str:
    """The ``smgov:resume-settled`` tag value: the settling decision's code and the job it settles
    (``<code>@<job>``, at most 40 + 1 + 63 characters: a valid SageMaker tag value)."""
    return f"{code}{_SETTLED_ON}{job_name}"


def is_settled(job_name: str, tags: Mapping[str, str]) -> bool:
    """Whether ``tags`` (``job_name``'s) carry governance's own ``smgov:resume-settled``: one that names this
    job. A mark naming another job came with this one's request (SageMaker's console Clone copies a job's tags,
    a developer pastes an earlier job's ``ListTags`` output) and is not this job's: its own deferred resume is
    still made. A mark without a job name (a bare code, written before marks named their job) cannot be told
    from a copy and is taken as governance's, as it always was."""
    value = tags.get(TAG_RESUME_SETTLED)
    if value is None:
        return False
    return _SETTLED_ON not in value or value.rsplit(_SETTLED_ON, 1)[1] == job_name


def copied_settled_mark(job_name: str, tags: Mapping[str, str]) -> str | None:
    """The value of a ``smgov:resume-settled`` on ``tags`` that names another job (``is_settled``); None: none."""
    value = tags.get(TAG_RESUME_SETTLED)
    return value if value is not None and not is_settled(job_name, tags) else None


def copied_resume_after(tags: Mapping[str, str], created: datetime | None) -> str | None:
    """The value of a ``smgov:resume-after`` on ``tags`` dated before the job was ``created``; None: none, or not so
    dated. Every deferral governance tags is due at or after the failure it defers (the failure plus its backoff
    or the settle period, or the moment a clone is found with its source still running, or a lost end's resume
    retried), and a job fails after it was created, so such a tag came with the job's request (SageMaker's
    console Clone copies a job's tags, a developer pastes a ``ListTags`` output) and is not this job's."""
    raw = tags.get(TAG_RESUME_AFTER)
    if not raw or created is None:
        return None
    try:
        due = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return raw if due < created else None


def deferred_here(tags: Mapping[str, str], created: datetime | None) -> bool:
    """Whether ``tags`` carry a ``smgov:resume-after`` of the job's own: not one dated before the job was ``created``
    (``copied_resume_after``: it came with the job's request), which the reconciler's deferred-resume pass ignores
    and a deferral of the job's own writes over."""
    return TAG_RESUME_AFTER in tags and copied_resume_after(tags, created) is None


@dataclass(frozen=True)
class DeferredResume:
    """A failed job tagged ``smgov:resume-after``: when it may be resumed and the clone that would be made."""

    due: datetime
    clone: str
    # the next clone its copied lineage tags name (``copied_lineage``), which a deployment before 70dc22b made of
    # this job under them; None: the tags are the job's own
    copied_clone: str | None = None

    @classmethod
    def of(
        cls, job_name: str, tags: Mapping[str, str], *, created: datetime | None = None
    ) -> DeferredResume | None:
        """None: not deferred, settled (``smgov:resume-settled`` of this job, ``is_settled``: decided for good),
        a ``smgov:resume-after`` dated before the job was ``created`` (``copied_resume_after``), or tags that cannot
        be trusted (then the reconciler leaves the job alone)."""
        raw = tags.get(TAG_RESUME_AFTER)
        if not raw or is_settled(job_name, tags):  # settled: decided for good, not again at each run
            return None
        try:
            due = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            if copied_resume_after(tags, created) is not None:
                return None  # copied with the job's request: not this job's deferral
            lineage = Lineage.of(job_name, own_lineage(job_name, tags))  # copied lineage tags: its own lineage
            copied = next_clone_name(job_name, tags) if copied_lineage(job_name, tags) else None
            return cls(due=due, clone=clone_name(lineage.root, lineage.next_attempt), copied_clone=copied)
        except (ValueError, LineageError):
            return None


def is_spot_interruption(job: TrainingJob) -> bool:
    """An event's job at an interruption (what routes it to Spot fallback); the re-read job is judged by
    ``in_interruption``, which counts the capacity wait after it too."""
    return job.status == "InProgress" and job.secondary_status == INTERRUPTED


def is_spot_max_wait(job: TrainingJob) -> bool:
    return job.is_terminal and job.secondary_status == MAX_WAIT_EXCEEDED


def is_resume_trigger(job: TrainingJob) -> bool:
    """The states auto-resume looks at (the template routes them with the JobEnded rule)."""
    return job.status == "Failed" and not is_spot_max_wait(job)


def is_spot_trigger(job: TrainingJob) -> bool:
    """The states Spot fallback looks at (routed by the JobInterrupted and JobEnded rules)."""
    return is_spot_interruption(job) or is_spot_max_wait(job)


def is_spot_stop(job: TrainingJob) -> bool:
    """A plain stop of a Managed Spot job (``Stopped``, not at ``MaxWaitTimeExceeded``), or of a job whose event
    does not say whether it is Spot (``spot_known``): its Spot move's clone may have failed and been deferred
    while it ran or stopped, and its end hands that clone to auto-resume (routed by the JobEnded rule). A
    stopped On-Demand job had no such clone: a clone is made beside a running job by a Spot move only."""
    return job.status == "Stopped" and not is_spot_max_wait(job) and (job.spot or not job.spot_known)


_FALLBACKS: Final[dict[SpotCode, SpotCode]] = {
    SpotCode.CLONE_INTERRUPTED: SpotCode.STOP_INTERRUPTED,
    SpotCode.CLONE_COUNT_RULE: SpotCode.STOP_COUNT_RULE,
    SpotCode.CLONE_ON_DEMAND_CHEAPER: SpotCode.STOP_ON_DEMAND_CHEAPER,
    SpotCode.CLONE_NO_PROGRESS: SpotCode.STOP_NO_PROGRESS,
    SpotCode.CLONE_MAX_WAIT_BUDGET: SpotCode.STOP_MAX_WAIT_BUDGET,
    SpotCode.CLONE_DEADLINE: SpotCode.STOP_DEADLINE,
}


# The reasons to leave Spot on the job's own type after which another type on Spot may still pay: not the
# hard cap (On-Demand whatever the numbers), the count rule (no numbers to compare) or the deadline (a
# new start costs time).
_ALTERNATIVE_TRIGGERS: Final = frozenset(
    {SpotCode.CLONE_ON_DEMAND_CHEAPER, SpotCode.CLONE_NO_PROGRESS, SpotCode.CLONE_MAX_WAIT_BUDGET}
)


def _economics(
    job: TrainingJob,
    spot: SpotPolicy,
    now: datetime,
    *,
    checkpoint: CheckpointProgress | None,
    prices: Mapping[str, float] | None,
    fleet: FleetHealth | None,
) -> SpotEstimate | Unknown:
    """The numbers for this interruption, or why there are none (then the count rule decides)."""
    if not spot.economics:
        return Unknown("spot.economics is off")
    if checkpoint is None:
        return Unknown("the checkpoint location was not listed (no CheckpointConfig or no checkpoint reader)")
    if not checkpoint.checked:
        return Unknown(f"the checkpoint location was not listed: {checkpoint.note}")
    if checkpoint.truncated:
        return Unknown("the checkpoint listing was cut short: the last checkpoint of each stint is unknown")
    return estimate(
        job,
        checkpoint.written_at,
        now,
        price_factor=spot.price_factor,
        cluster_price_per_hour=cluster_price(job, dict(prices) if prices else None),
        fleet_rate_per_hour=fleet.fleet_rate_per_hour if fleet is not None else None,
        fleet_exposure_hours=fleet.exposure_hours if fleet is not None else 0.0,
    )


def _count_verdict(interruptions: int, spot: SpotPolicy, numbers: Unknown, *, storm: bool) -> tuple[SpotCode, str]:
    """Without the numbers: the count rule (sooner in a storm when ``spot.storm.count_rule_interruptions``)."""
    limit = min(spot.count_rule_interruptions, spot.max_interruptions)
    storm = storm and spot.storm.count_rule_interruptions is not None
    if storm and spot.storm.count_rule_interruptions is not None:
        limit = min(limit, spot.storm.count_rule_interruptions)
    rule = "the count rule's (its type is in a Spot storm)" if storm else "the count rule's"
    if interruptions >= limit:
        return SpotCode.CLONE_COUNT_RULE, (
            f"was interrupted {interruptions} time(s), {rule} {limit} (no economics: {numbers.reason})"
        )
    return SpotCode.BELOW_THRESHOLD, (
        f"interrupted {interruptions} time(s); the count rule falls back at {limit} (no economics: {numbers.reason})"
    )


def _spot_verdict(
    interruptions: int, spot: SpotPolicy, numbers: SpotEstimate | Unknown, *, storm: bool = False
) -> tuple[SpotCode, str]:
    """Which fallback rule (a ``spot.clone.*`` code) applies at this interruption, or ``spot.skip.*``.
    In a storm of the job's instance type the count rule moves sooner (``spot.storm.count_rule_interruptions``)."""
    if interruptions >= spot.max_interruptions:
        return SpotCode.CLONE_INTERRUPTED, f"was interrupted {interruptions} time(s), the hard cap"
    if isinstance(numbers, Unknown):
        return _count_verdict(interruptions, spot, numbers, storm=storm)
    n = numbers
    if n.no_progress:  # the job's own numbers (once they rest on an hour of running), whatever the fleet's
        return SpotCode.CLONE_NO_PROGRESS, (
            f"keeps {n.progress_efficiency:.0%} of its running time on Spot ({n.history.lost_hours:.2f} h lost in "
            f"{interruptions} interruption(s)): it is not expected to finish on Spot"
        )
    if not n.spot_finishes:
        return SpotCode.CLONE_ON_DEMAND_CHEAPER, (
            f"would keep {n.efficiency:.0%} of its running time at its type's interruption rate in the fleet "
            f"({n.rate_per_hour:.2f} an hour with the fleet's, {n.job_rate_per_hour:.2f} its own): finishing "
            "On-Demand costs less"
        )
    assert n.spot_hours_to_finish is not None and n.spot_cost_units is not None
    if n.beyond_max_wait:
        return SpotCode.CLONE_MAX_WAIT_BUDGET, (
            f"would run out of MaxWaitTimeInSeconds even with no work left: {n.history.elapsed_hours:.1f} of "
            f"{n.max_wait_hours:.1f} h spent, and its capacity wait per interruption is "
            f"{n.history.wait_hours_per_interruption:.1f} h"
        )
    if n.on_demand_cheaper:
        return SpotCode.CLONE_ON_DEMAND_CHEAPER, (
            f"would cost {n.spot_cost_units:.1f} On-Demand cluster-hours equivalent to finish on Spot "
            f"({n.efficiency:.0%} kept) against {n.on_demand_cost_units:.1f} On-Demand"
        )
    if n.slack_spent(spot.max_delay_hours):
        return SpotCode.CLONE_DEADLINE, (
            f"would finish at least {n.least_delay_on_spot_hours:.1f} h later than an uninterrupted run on Spot "
            f"({n.delay_so_far_hours:.1f} h so far and the restart under way, even with no work left), more than "
            f"the {spot.max_delay_hours:g} h slack"
        )
    return SpotCode.SPOT_CHEAPER, (
        f"stays on Spot: {n.spot_cost_units:.1f} cluster-hours equivalent and {n.spot_hours_to_finish:.1f} h "
        f"to finish, against {n.on_demand_cost_units:.1f} and {n.on_demand_hours_to_finish:.1f} h On-Demand"
    )


def _plan_on_demand(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    spot: SpotPolicy,
    mode: Mode,
    ctx: CloneContext,
    evidence: dict[str, Any],
    *,
    reason: ResumeReason,
    require_checkpoint: bool,
) -> ClonePlan | CloneDecision:
    """The shared checks, then an On-Demand clone's plan (Spot fallback's ``_plan``)."""
    return _plan(
        SPOT_RULE_ID,
        SpotCode,
        mode,
        job=job,
        description=description,
        tags=tags,
        ctx=ctx,
        max_attempts=spot.max_attempts,
        require_checkpoint=require_checkpoint,
        reason=reason,
        on_demand=True,
        evidence=evidence,
    )


def _alternative_move(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    spot: SpotPolicy,
    mode: Mode,
    ctx: CloneContext,
    evidence: dict[str, Any],
    *,
    code: SpotCode,
    why: str,
    numbers: SpotEstimate | Unknown,
    prices: Mapping[str, float] | None,
    health: Mapping[str, FleetHealth | Unknown] | None,
    rules: Sequence[AllowedInstanceTypes],
) -> CloneDecision | None:
    """Leaving Spot on its own type, the job tries ``spot.fallbacks`` first: stop it and resume it on Spot
    on the first alternative that pays (clone first, as always); None: On-Demand, as before."""
    if not spot.fallbacks or code not in _ALTERNATIVE_TRIGGERS:
        return None
    choice = choose(
        job,
        tags,
        alternatives=spot.fallbacks,
        tag_key=spot.fallback_job_tag,
        numbers=numbers,
        prices=prices,
        health=health or {},
        rules=rules,
    )
    evidence.update(choice.evidence())
    if choice.chosen is None:
        return None
    kind = choice.chosen.instance_type
    evidence["moved_because"] = code.value
    planned = _plan(
        SPOT_RULE_ID,
        SpotCode,
        mode,
        job=job,
        description=description,
        tags=tags,
        ctx=ctx,
        max_attempts=spot.max_attempts,
        require_checkpoint=spot.require_checkpoint,
        reason=ResumeReason.SPOT_ALTERNATIVE,
        on_demand=False,
        evidence=evidence,
        instance_type=kind,
    )
    if isinstance(planned, CloneDecision):
        return planned
    return _spot_clone(
        planned,
        mode,
        evidence,
        code=SpotCode.CLONE_ALTERNATIVE,
        reason=f"Spot job {why}: resume on Spot on {kind} as {planned.name}{_where(planned)} (cheaper than On-Demand)",
        stop_code=SpotCode.STOP_ALTERNATIVE,
        stop_reason=f"Spot job {why}: stop it, its Spot clone {planned.name} on {kind} takes over",
    )


def _where(planned: ClonePlan) -> str:
    return f" from checkpoint {planned.checkpoint_s3_uri}" if planned.checkpoint_s3_uri else " from scratch"


def _spot_clone(
    planned: ClonePlan,
    mode: Mode,
    evidence: dict[str, Any],
    *,
    code: SpotCode,
    reason: str,
    stop_code: SpotCode | None,
    stop_reason: str,
) -> CloneDecision:
    """A Spot clone's decisions: the clone, and (unless the source has ended) the stop of the source it
    takes over from."""
    clone = Decision(
        rule=SPOT_RULE_ID,
        code=code,
        action=Action.CLONE,
        mode=mode,
        reason=reason,
        evidence=evidence,
        request=planned.request,
    )
    if stop_code is None:
        return CloneDecision(decisions=(clone,), plan=planned)
    stop = Decision(
        rule=SPOT_RULE_ID,
        code=stop_code,
        action=Action.STOP,
        mode=mode,
        reason=stop_reason,
        evidence=dict(evidence),
    )
    return CloneDecision(decisions=(clone, stop), plan=planned, stop_source=True)


def decide_spot(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    spot: SpotPolicy,
    default_mode: Mode,
    ctx: CloneContext,
    checkpoint: CheckpointProgress | None = None,
    prices: Mapping[str, float] | None = None,
    fleet: FleetHealth | Unknown | None = None,
    alternatives_health: Mapping[str, FleetHealth | Unknown] | None = None,
    allowed_types: Sequence[AllowedInstanceTypes] = (),
    reported: TrainingJob | None = None,
) -> CloneDecision:
    """Fall back to On-Demand at an interruption when the numbers say so (stop + clone; see the module
    docstring), or after ``MaxWaitTimeExceeded`` (clone). ``checkpoint``: the checkpoint location's
    listing (None: not listed); ``prices``: On-Demand USD per instance-hour (the evidence, and comparing
    another type); ``fleet``: the instance type's Spot health across the fleet (None: not read;
    ``Unknown``: unreadable); ``alternatives_health``: the same for each of ``spot.fallbacks``;
    ``allowed_types``: the policy's ``allowed-instance-types`` rules (an alternative must pass them);
    ``reported``: the job as the triggering event reported it (None: no event).

    A running job is moved only while it is still in an interruption (``job`` is the re-read: ``Interrupted``,
    or waiting for capacity after it in ``Starting``/``Pending``, ``in_interruption``) and, when the event
    names its interruption, in that interruption: a late or retried event (SQS retries a minute later, then
    five, then after its visibility timeout; EventBridge for up to an hour) whose job trains again is no
    reason to move it (``spot.skip.no-longer-interrupted``). A job that ended at ``MaxWaitTimeExceeded`` is resumed however
    the news arrived: it has ended, and its own end event makes the same clone."""
    mode = spot.mode or default_mode
    interruptions = job.count_transitions(INTERRUPTED)
    evidence: dict[str, Any] = {
        "interruptions": interruptions,
        "max_interruptions": spot.max_interruptions,
        "secondary_status": job.secondary_status,
    }
    if not spot.enabled:
        return _none(SPOT_RULE_ID, SpotCode.DISABLED, mode, "Spot fallback is disabled by policy", evidence)
    if not job.spot:
        return _none(SPOT_RULE_ID, SpotCode.NOT_SPOT, mode, "not a Managed Spot job: no fallback", evidence)
    ended = is_spot_max_wait(job)
    code = SpotCode.CLONE_MAX_WAIT
    alternative: CloneDecision | None = None
    if ended:
        held = _max_wait_held(job, spot, mode, ctx.now, evidence)
        if held is not None:
            return held
        reason, why = ResumeReason.SPOT_MAX_WAIT, "ran out of Spot wait time (MaxWaitTimeExceeded)"
    elif job.status != "InProgress":
        return _none(
            SPOT_RULE_ID,
            SpotCode.NOT_IN_PROGRESS,
            mode,
            f"the job is {job.status}/{job.secondary_status} now: nothing to fall back from",
            evidence,
        )
    elif (over := _interruption_over(job, reported, evidence)) is not None:
        return _none(SPOT_RULE_ID, SpotCode.NO_LONGER_INTERRUPTED, mode, over, evidence)
    else:
        health = fleet if isinstance(fleet, FleetHealth) else None
        if isinstance(fleet, Unknown):
            evidence["fleet_health"] = f"unavailable: {fleet.reason}"
        elif health is not None:
            evidence.update(health.evidence())
        numbers = _economics(job, spot, ctx.now, checkpoint=checkpoint, prices=prices, fleet=health)
        evidence.update(numbers.evidence())
        evidence["count_rule_interruptions"] = spot.count_rule_interruptions
        code, why = _spot_verdict(interruptions, spot, numbers, storm=health is not None and health.storm)
        if code not in _FALLBACKS:
            return _none(SPOT_RULE_ID, code, mode, f"Spot job {why}", evidence)
        reason = ResumeReason.SPOT_INTERRUPTED
        alternative = _alternative_move(
            job,
            description,
            tags,
            spot,
            mode,
            ctx,
            evidence,
            code=code,
            why=why,
            numbers=numbers,
            prices=prices,
            health=alternatives_health,
            rules=allowed_types,
        )
    planned = alternative or _plan_on_demand(
        job,
        description,
        tags,
        spot,
        mode,
        ctx,
        evidence,
        reason=reason,
        require_checkpoint=spot.require_checkpoint,
    )
    if isinstance(planned, CloneDecision):
        return planned
    return _spot_clone(
        planned,
        mode,
        evidence,
        code=code,
        reason=f"Spot job {why}: resume On-Demand as {planned.name}{_where(planned)}",
        stop_code=None if ended else _FALLBACKS[code],
        stop_reason=f"Spot job {why}: stop it, its On-Demand clone {planned.name} takes over",
    )


def _max_wait_held(
    job: TrainingJob, spot: SpotPolicy, mode: Mode, now: datetime, evidence: dict[str, Any]
) -> CloneDecision | None:
    """Why a job that ended at ``MaxWaitTimeExceeded`` is not resumed On-Demand: the policy does not fall back
    then, it ended more than ``spot.late_after_hours`` ago (``spot.skip.too-late``: a late redrive or replay,
    its owner has most likely relaunched it), or its end cannot be dated (``spot.skip.end-time-unknown``);
    None: resume it."""
    if not spot.fallback_on_max_wait:
        return _none(
            SPOT_RULE_ID,
            SpotCode.NO_FALLBACK_ON_MAX_WAIT,
            mode,
            "MaxWaitTimeExceeded: the policy does not fall back to On-Demand",
            evidence,
        )
    return _dated_in_time(
        SPOT_RULE_ID,
        mode,
        end_time(job),
        spot.late_after_hours,
        now,
        evidence,
        undated=(
            SpotCode.END_TIME_UNKNOWN,
            "MaxWaitTimeExceeded: not resumed On-Demand, when the job ended cannot be read (no transition, "
            "TrainingEndTime or LastModifiedTime), so whether the resume is still in time is unknown",
        ),
        too_late=(
            SpotCode.TOO_LATE,
            "MaxWaitTimeExceeded at {since} UTC, {hours} h ago, more than the {limit} h within which it is resumed "
            "On-Demand (a late redrive or replay): its owner has most likely relaunched it by hand",
        ),
    )


CLONE_RUNNING: Final = frozenset({"InProgress", "Completed"})  # a clone that took (or is taking) over
# a failed clone's resume denied by how its source ended: decided again with the job's next clone, if any
SOURCE_ENDED_SKIPS: Final = frozenset({ResumeCode.SOURCE_STOPPED, ResumeCode.SOURCE_COMPLETED})
# a failed clone's resume deferred because its source has not ended yet (runs, or stops)
SOURCE_NOT_ENDED_DEFERS: Final = frozenset({ResumeCode.DEFER_SOURCE_RUNNING, ResumeCode.DEFER_SOURCE_STOPPING})
SOURCE_ENDING: Final = frozenset({"Stopping", "Stopped"})  # a moved job, once its move's stop was sent


def next_clone_name(job_name: str, tags: Mapping[str, str]) -> str | None:
    """The name the job's next clone takes (deterministic, ``domain/clone.py``), None when its lineage tags
    cannot be trusted (no clone is planned then either)."""
    try:
        lineage = Lineage.of(job_name, tags)
    except LineageError:
        return None
    name = clone_name(lineage.root, lineage.next_attempt)
    return name if name != job_name else None


def decide_spot_takeover(
    job: TrainingJob, clone: TrainingJob | None, *, spot: SpotPolicy, default_mode: Mode
) -> CloneDecision | None:
    """Finish a move whose clone exists: ``clone`` is the job under ``next_clone_name`` (None: none). When
    its ``smgov:resumed-from`` tag names ``job``, it is running or done, and ``job`` (the re-read Spot job)
    still runs, an earlier delivery created the clone and its stop failed or never ran (the delivery is
    retried a minute later, or later still, when the job may well train again): the job is stopped
    now whatever a fresh verdict would say (``spot.stop.clone-exists``), since both would bill and write to
    the same checkpoint location. A job stopping or stopped already (``SOURCE_ENDING``) was stopped by
    that delivery, which may have failed before it told the owner: the decision is the same stop, with
    nothing left to stop (``stop_source`` false), so that the service finishes the move by telling (the
    service looks such a clone up only within a delivery). None: nothing to finish (no such clone,
    another job's, one that failed or was stopped, or a job that ended otherwise)."""
    if clone is None or not spot.enabled or not job.spot:
        return None
    if job.status != "InProgress" and job.status not in SOURCE_ENDING:
        return None
    if clone.tag(TAG_SOURCE) != job.name or clone.status not in CLONE_RUNNING:
        return None
    mode = spot.mode or default_mode
    where = "On-Demand" if not clone.spot else f"on Spot on {', '.join(clone.instance_types) or 'another type'}"
    evidence: dict[str, Any] = {
        "secondary_status": job.secondary_status,
        "interruptions": job.count_transitions(INTERRUPTED),
        "clone_name": clone.name,
        "clone_status": f"{clone.status}/{clone.secondary_status}",
        "clone_resume_reason": clone.tag(TAG_REASON),
        "on_demand": not clone.spot,
    }
    stop = Decision(
        rule=SPOT_RULE_ID,
        code=SpotCode.STOP_CLONE_EXISTS,
        action=Action.STOP,
        mode=mode,
        reason=(
            f"Spot job still runs ({job.status}/{job.secondary_status}) while its clone {clone.name} "
            f"({where}, {clone.status}; tagged {TAG_SOURCE}={job.name}) has taken over: the move was not "
            "finished (its stop failed or never ran); stop it, whatever a fresh verdict would say"
            if job.status == "InProgress"
            else f"Spot job {job.status} after its move to {clone.name} ({where}, {clone.status}; tagged "
            f"{TAG_SOURCE}={job.name}): the move is finished"
        ),
        evidence=evidence,
    )
    return CloneDecision(decisions=(stop,), stop_source=job.status == "InProgress", takes_over=clone)


def interruption_start(job: TrainingJob) -> datetime | None:
    """When the job's latest interruption began (its last ``Interrupted`` transition), if it says."""
    starts = [t.start_time for t in job.transitions if t.status == INTERRUPTED]
    return starts[-1] if starts else None


# Two readings of one transition's StartTime (the event's epoch milliseconds, DescribeTrainingJob's timestamp)
# are the same instant within this; a job's interruptions are minutes apart.
SAME_INSTANT: Final = timedelta(seconds=1)


def _same_instant(a: datetime, b: datetime) -> bool:
    return abs(a - b) <= SAME_INSTANT


def interruption_unseen(job: TrainingJob, reported: TrainingJob) -> datetime | None:
    """When the interruption ``reported`` (the event) names began, if the re-read running ``job`` does not know
    it yet: its answer lags the event (DescribeTrainingJob is read right after SageMaker's event, and may
    still say ``Training``). Taken for a lag only when the re-read's history ends before that interruption
    began (every transition it lists started earlier): a re-read that lists a later transition, or none at
    all, is not older than the event, and ``_interruption_over`` judges it. None: not a lag.

    An event whose transitions do not end in its ``Interrupted`` (it left the transitions out and they were read
    again, from a re-read that did not know the interruption yet: ``Interrupted`` is no documented
    ``SecondaryStatusTransition``, so ``with_transitions_of`` does not wait for it) is dated by its own
    ``LastModifiedTime`` ("when the status of the training job was last modified", botocore's SageMaker model)
    when the re-read's own ``LastModifiedTime`` is earlier: a re-read that is itself ``Interrupted``, or newer
    (waiting for capacity after it: ``Pending``, which is no recorded transition either), or that does not say
    when it changed, is no lag (``_interruption_over`` judges it), so a capacity wait is never retried as one."""
    if not is_spot_interruption(reported):
        return None
    listed = (
        reported.transitions[-1] if reported.transitions else None
    )  # an earlier interruption's is not this one
    seen = listed.start_time if listed is not None and listed.status == INTERRUPTED else None
    if seen is None and job.secondary_status != reported.secondary_status:
        # the re-read is older than the event only if its own LastModifiedTime says so: one waiting for capacity
        # after the interruption (Pending, no recorded transition either) is newer, never a lag to wait out
        read_at, changed_at = job.last_modified_time, reported.last_modified_time
        if read_at is not None and changed_at is not None and read_at < changed_at - SAME_INSTANT:
            seen = changed_at
    starts = [t.start_time for t in job.transitions]
    if seen is None or job.status != "InProgress" or not starts or None in starts:
        return None
    return seen if max(s for s in starts if s is not None) < seen - SAME_INSTANT else None


NOT_ENDED: Final = frozenset({"InProgress", "Stopping"})  # a job's statuses before its end


def end_unseen(job: TrainingJob, reported: TrainingJob) -> bool:
    """Whether the re-read ``job`` does not know yet the end ``reported`` (the event) says the job has reached:
    the event's job has ended (``Completed``, ``Failed``, ``Stopped``, ``MaxWaitTimeExceeded`` included) and
    DescribeTrainingJob, read right after it, still says it runs or stops (``NOT_ENDED``). A job never leaves
    its end (a training job's name is never used again, and an ended job never restarts), so that answer can
    only lag the event: a decision made on it (``resume.skip.not-failed``, a Spot verdict on an interruption
    that is over) would spend the event. A re-read that has ended, even otherwise than the event says, is not
    older than the event and is judged as read; an event of a running or stopping job reports no end."""
    return reported.is_terminal and job.status in NOT_ENDED


def _interruption_over(job: TrainingJob, reported: TrainingJob | None, evidence: dict[str, Any]) -> str | None:
    """Why the interruption the event reported is no reason to move the (re-read, running) job now, or
    None: it is still in that interruption (or in an interruption, when the event does not say which),
    its capacity wait included (``in_interruption``: until a billed status or a newer interruption)."""
    interrupted = in_interruption(job)  # Interrupted, or waiting for capacity after it (Starting/Pending)
    current = interruption_start(job) if interrupted else None
    seen = interruption_start(reported) if reported is not None else None
    if seen is not None:
        evidence["reported_interruption_at"] = seen.isoformat()
    if current is not None:
        evidence["current_interruption_at"] = current.isoformat()
    if not interrupted:
        return (
            f"the job is {job.status}/{job.secondary_status} now, out of its interruption (billed again, or "
            "no interruption on record): the interruption the event reported is over (a late or retried "
            "event), nothing to fall back from"
        )
    if seen is not None and current is not None and not _same_instant(seen, current):
        return (
            f"the job's current interruption (from {current:%Y-%m-%d %H:%M:%S} UTC) is not the one the event "
            f"reported (from {seen:%Y-%m-%d %H:%M:%S} UTC): that one is over, and the current one's own "
            "event decides"
        )
    return None


def _first_start(job: TrainingJob) -> bool:
    """Starting for the first time: waiting in ``Starting``/``Pending``, never billed, never interrupted."""
    return (
        job.status == "InProgress"
        and job.secondary_status in STARTING
        and not any(t.status in BILLED_OR_INTERRUPTED for t in job.transitions)
    )


def is_new_spot_start(job: TrainingJob) -> bool:
    """A Spot job starting for the first time (never interrupted, never billed): a storm may move it."""
    return job.spot and _first_start(job)


def may_be_new_spot_start(job: TrainingJob) -> bool:
    """``is_new_spot_start``, or a first start whose source did not say whether it is Spot: no sample or
    schema of AWS shows ``EnableManagedSpotTraining`` in the state-change event (its documented sample
    predates Managed Spot), so an event without it is read again (``DescribeTrainingJob`` says) rather
    than taken as On-Demand."""
    return (job.spot or not job.spot_known) and _first_start(job)


def storm_move_wanted(spot: SpotPolicy) -> bool:
    """The team moves new Spot jobs of a stormy type On-Demand (``spot.storm.move_new_jobs``, opt-in)."""
    return spot.enabled and spot.storm.enabled and spot.storm.move_new_jobs


def decide_spot_start(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    spot: SpotPolicy,
    default_mode: Mode,
    ctx: CloneContext,
    fleet: FleetHealth | Unknown,
) -> CloneDecision:
    """A new Spot job of an instance type in a storm starts On-Demand instead, before it bills (clone, then
    stop the Spot job while it is still ``Starting``), when the team opted in. ``job`` is the re-read of a
    job whose start event triggered: one that is past its first ``Starting``/``Pending`` by now (billed,
    interrupted or ended: a delayed event) is not moved (``spot.skip.no-longer-starting``). A job whose own
    team did not opt in (``spot``: its team's policy, its tags read when the event left them out) is no
    business of the storm move: no decision, as for an event that said the team."""
    if not storm_move_wanted(spot):
        return CloneDecision(decisions=())
    mode = spot.mode or default_mode
    evidence: dict[str, Any] = {"secondary_status": job.secondary_status}
    if not is_new_spot_start(job):
        return _none(
            SPOT_RULE_ID,
            SpotCode.NO_LONGER_STARTING,
            mode,
            f"the job is {job.status}/{job.secondary_status} now, past its first start: a storm moves only a "
            "new Spot job before it bills (a late start event), and its own events decide the rest",
            evidence,
        )
    if isinstance(fleet, Unknown):
        evidence["fleet_health"] = f"unavailable: {fleet.reason}"
        return _none(
            SPOT_RULE_ID,
            SpotCode.HEALTH_UNKNOWN,
            mode,
            f"stays on Spot: the fleet's Spot health could not be read ({fleet.reason})",
            evidence,
        )
    evidence.update(fleet.evidence())
    if not fleet.storm:
        return _none(
            SPOT_RULE_ID,
            SpotCode.NO_STORM,
            mode,
            f"stays on Spot: {fleet.instance_type} is not in a Spot storm "
            f"({fleet.interrupted_jobs} job(s) interrupted in {fleet.window_hours:g} h)",
            evidence,
        )
    planned = _plan_on_demand(
        job,
        description,
        tags,
        spot,
        mode,
        ctx,
        evidence,
        reason=ResumeReason.SPOT_STORM,
        require_checkpoint=False,  # nothing trained yet: the clone starts where the job would have
    )
    if isinstance(planned, CloneDecision):
        return planned
    why = (
        f"{fleet.instance_type} is in a Spot storm ({fleet.interrupted_jobs} job(s) interrupted, "
        f"{fleet.max_wait_jobs} out of Spot wait time in {fleet.window_hours:g} h)"
    )
    return _spot_clone(
        planned,
        mode,
        evidence,
        code=SpotCode.CLONE_STORM,
        reason=f"new Spot job: {why}: start it On-Demand as {planned.name} before it bills",
        stop_code=SpotCode.STOP_STORM,
        stop_reason=f"new Spot job: {why}: stop it while it starts, its On-Demand clone {planned.name} takes over",
    )
