"""Auto-resume and Spot fallback use cases: re-read the job, decide (pure), clone, stop, audit, notify.

Two reactions share one engine:

- ``AutoResumeReaction`` on ``Failed``: resume a long-running job that failed for a transient reason; when
  its attempt's backoff has not elapsed, tag the job ``smgov:resume-after`` (``resume.defer.backoff``,
  outcome ``deferred``) and leave the resume to the reconciler, which calls the same reaction once the time
  has come (``service/reconciler.py``); a recent failure whose logs hold no cause of it yet is deferred the
  same way (``resume.defer.logs-pending``, due ``resume.logs_settle_minutes`` after the failure: its last
  lines may reach CloudWatch Logs after its ``Failed`` event); a failed clone whose source still runs is deferred the same way
  (``resume.defer.source-running``, due at once), until the source has ended, and so is one whose source is
  still stopping by a stop requested after the clone failed (``resume.defer.source-stopping``: likely its
  owner's, but a stop at its runtime limit reads ``Stopping`` too until it has ended); the source's own end
  (its resume, a Spot job's ``MaxWaitTimeExceeded``, or its plain ``Stopped``) that meets that clone hands it
  to this reaction; a
  source that completed, or whose owner stopped it (``Stopped``/``Stopped``), denies the resume
  (``resume.skip.source-completed``, ``resume.skip.source-stopped``), unless the clone's next clone exists and runs (an earlier decision made
  it): then the resume meets it as "already exists" and its owner is told once;
- ``SpotFallbackReaction`` on ``InProgress/Interrupted`` (stop and resume On-Demand when finishing there
  is cheaper or Spot would miss its deadline: the job's checkpoint writes are listed at each interruption
  for the numbers; the count rule without them; on Spot on another type first when the team lists
  ``spot.fallbacks`` and the job opted in: each alternative's Spot health is read too) and on a Spot job
  that ended with ``MaxWaitTimeExceeded`` (resume On-Demand); on a Spot job's plain ``Stopped`` it only hands
  over the job's deferred failed clone, if there is one (``_stopped``).

The event only triggers: the job is re-read (``DescribeTrainingJob`` + every page of ``ListTags``)
and the decision is made from what SageMaker says now; a re-read that still runs or stops after an event of
the job's end lags the event (``end_unseen``) and decides nothing: ``DescriptionBehind``, the delivery is
retried. Safe under duplicate and late events: the
clone's name is deterministic (a second ``CreateTrainingJob`` meets "already exists", which counts as
done once the existing job's lineage tag shows it is the same clone and it runs or has completed: one that
failed or was stopped is recorded skipped, its owner not told 'resumed'; a Spot move whose clone of that name
failed or was stopped is skipped instead: the job's Spot fallback is spent, ``_fallback_spent``), the clone is created *before*
the source is stopped (a clone that cannot be created never costs the user their running job), and a
job is stopped only while it is still ``InProgress``. A running Spot job is moved only while it is still in
the interruption its event reported (a late or retried event whose job trains again moves nothing), and a
new one only while it has not started billing (a delayed start event moves nothing).

The owner is told of a clone, and it is counted, once per clone, even when the attempt that created it
failed before doing so (the notification throttled): with the delivery ledger, "told" belongs to the clone
(``CloneNotices``: the key ``resume:<clone>``), so whoever meets the clone next tells, if nobody has: the
event's retry, another delivery, or the reconciler, whose deferred resume makes clones outside any
delivery and hands a due job whose clone exists back to this reaction while its owner is untold. Without
the ledger only the attempt that created the clone tells.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.domain.clone import (
    LINEAGE_TAGS,
    TAG_REASON,
    TAG_RESUME_AFTER,
    TAG_RESUME_SETTLED,
    TAG_SOURCE,
    CreateOutcome,
    InvalidCloneRequest,
    RequestShape,
    ResumeReason,
    copied_lineage,
    has_room_for,
    own_lineage,
)
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import (
    AdapterError,
    DescriptionBehind,
    JobNotFound,
    LogsUnread,
    PatternTimeout,
    StopOutcome,
)
from sagemaker_governance.domain.failure_evidence import CheckpointProgress, FailureEvidence
from sagemaker_governance.domain.failures import Diagnosis, classify
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification, NotificationKind, NotificationOutcome, headline
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.recovery_policy import (
    EVERY_HOST_MIN_LINES,
    MAX_LOG_HOSTS,
    ResumePolicy,
    SpotPolicy,
    StormPolicy,
)
from sagemaker_governance.domain.resume import (
    CLONE_RUNNING,
    RESUME_RULE_ID,
    SOURCE_ENDED_SKIPS,
    SOURCE_ENDING,
    SOURCE_NOT_ENDED_DEFERS,
    SPOT_RULE_ID,
    CloneContext,
    CloneDecision,
    Codes,
    ResumeCode,
    SpotCode,
    decide_resume,
    decide_spot,
    decide_spot_start,
    decide_spot_takeover,
    deferred_here,
    diagnosis_timed_out,
    end_unseen,
    failure_time,
    interruption_unseen,
    is_new_spot_start,
    is_resume_trigger,
    is_settled,
    is_spot_max_wait,
    is_spot_stop,
    is_spot_trigger,
    may_be_new_spot_start,
    next_clone_name,
    resume_after_tag,
    settled_tag,
    source_qualifies,
    storm_move_wanted,
)
from sagemaker_governance.domain.rules.base import unbounded
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.spot_alternatives import opted_in
from sagemaker_governance.domain.spot_economics import Unknown
from sagemaker_governance.domain.spot_health import FleetHealth, in_interruption, signals_of, spot_type
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import CloneNotices, once
from sagemaker_governance.service.ports import (
    Bounded,
    CheckpointsPort,
    Clock,
    EvaluationMarksPort,
    FailureLogsPort,
    JobsPort,
    NotifierPort,
    PolicySource,
    SpotHealthPort,
    TimeBound,
)
from sagemaker_governance.service.recording import Trigger, record_decision

# The time a job's diagnosis may take: every signature (the built-in 27 and the team's) searched in every line read,
# at most twice (the first hosts, then every host up to 64 when those show no cause), in one budget. Measured on a
# developer's core: about 0.2 ms of CPU per line of 175 characters, 2 ms per line of 1,750. The functions' 256 MB
# get about a seventh of a vCPU (Lambda allocates CPU in proportion to memory), so a 64-host job at the default
# budgets (8 hosts' 200 lines, then 100 lines of every host: about 8,800 lines searched) takes some 10 to 15 s there
# when its lines are short: 20 s leaves that room. A search that needs more is a slow pattern the backtracking check
# missed (as it did `.*={50}x`: 0.27 s a line, on lines a progress bar writes by the hundred), or lines so long and many that
# it would be lost anyway: five failed jobs in one batch (the job-events function's BatchSize) then take 100 s of
# its 300 s, and a record that diagnoses for 20 s leaves its AWS calls half the 40 s a record is given at worst
# (handlers/_batch.py).
DIAGNOSIS_SECONDS = 20.0


def cloned_from(jobs: JobsPort, clone: str, source: str) -> bool:
    """Whether the job called ``clone`` exists and was made from ``source`` (its ``smgov:resumed-from``):
    ``DescribeTrainingJob``, then ``ListTags``. The question a job launched with another job's lineage tags asks of
    the clone those tags name (auto-resume, the reconciler, ``smgov resume``): a deployment before lineage tags
    were dated to their job may have resumed it under them. A read that fails raises ``AdapterError``."""
    try:
        existing = jobs.describe(clone)
    except JobNotFound:
        return False
    return jobs.list_tags(str(existing.get("TrainingJobArn") or clone)).get(TAG_SOURCE) == source


class LauncherPort(Protocol):
    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome: ...


class _CloneReaction:
    rule: str = ""
    kind: NotificationKind  # of the message sent when a clone is created
    metric: BusinessMetric  # counted for each clone created
    codes: Codes

    def __init__(
        self,
        jobs: JobsPort,
        launcher: LauncherPort,
        notifier: NotifierPort,
        policies: PolicySource,
        audit: AuditSink,
        *,
        clock: Clock,
        shape: Callable[[], RequestShape],
        role_patterns: tuple[str, ...],
        metrics: BusinessMetricsPort,
        logs: FailureLogsPort | None = None,
        checkpoints: CheckpointsPort | None = None,
        spot_health: SpotHealthPort | None = None,
        marks: EvaluationMarksPort | None = None,
        notices: CloneNotices | None = None,
        handoff: Callable[[TrainingJob, Trigger], list[Decision]] | None = None,
        bound: TimeBound | None = None,
    ) -> None:
        self._bound = bound  # the time budget of a diagnosis (None: unbounded)
        self._handoff = handoff  # auto-resume, for this job's failed clone deferred while it ran (None: none)
        self._notices = notices  # tells each clone's owner once, whoever made it (None: no ledger)
        self._spot_health = spot_health
        self._marks = marks  # tags a deferred job for the reconciler (None: cannot, the record says so)
        self._logs = logs
        self._checkpoints = checkpoints
        self._jobs = jobs
        self._launcher = launcher
        self._notifier = notifier
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._shape = shape  # CreateTrainingJob's request shape, read when a clone is planned (not at cold start)
        self._role_patterns = role_patterns
        self._metrics = metrics

    # ---- the Reaction protocol ---------------------------------------------------------------

    def applies(self, job: TrainingJob) -> bool:
        raise NotImplementedError

    def _decide(
        self,
        job: TrainingJob,
        description: dict[str, Any],
        tags: dict[str, str],
        policy: Policy,
        ctx: CloneContext,
        event: TrainingJob,
    ) -> CloneDecision:
        raise NotImplementedError

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        policy = self._policies.current()
        try:
            description = self._jobs.describe(job.name)
            tags = self._jobs.list_tags(str(description.get("TrainingJobArn") or job.arn))
        except JobNotFound:
            decision = Decision(
                rule=self.rule,
                code=self.codes.JOB_GONE,
                action=Action.NONE,
                mode=policy.for_job(job).mode,
                reason="the job no longer exists",
            )
            self._record(decision, job, policy, trigger, Outcome.SKIPPED)
            return [decision]
        tags = self._own_lineage(job.name, tags)
        fresh = TrainingJob.model_validate({**description, "Tags": tags})
        if end_unseen(fresh, job):  # decided on this read, the event would be spent: read again, in a minute
            raise DescriptionBehind(
                f"DescribeTrainingJob {job.name}: {fresh.status}/{fresh.secondary_status}, not yet the event's "
                f"{job.status}/{job.secondary_status}"
            )
        effective = policy.for_job(fresh)
        ctx = CloneContext(now=self._clock(), shape=self._shape(), role_patterns=self._role_patterns)
        result = self._decide(fresh, description, tags, effective, ctx, job)
        return list(self._execute(result, fresh, policy, effective, trigger))

    # ---- acting ------------------------------------------------------------------------------

    def _execute(
        self, result: CloneDecision, job: TrainingJob, policy: Policy, effective: Policy, trigger: Trigger
    ) -> tuple[Decision, ...]:
        """Act on the decisions and record them; what was decided in the end (the decisions, or the
        not-clonable one when SageMaker refused the clone's request)."""
        if result.resume_after is not None:
            self._defer(result, job, policy, trigger)
            return result.decisions
        clone, stop, plan = result.clone, result.stop, result.plan
        if clone is None or plan is None:
            if result.again:
                self._within_reach(job, effective)
            for decision in result.decisions:
                self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
            if result.settled:
                self._settle(result, job)
            elif result.again:
                self._decide_again(result, job)
            return result.decisions
        if not clone.acts:
            for decision in result.decisions:
                self._record(decision, job, policy, trigger, Outcome.AUDIT_ONLY)
            if effective.notify_in_audit_mode:
                self._notify(job, effective, result, plan.name, plan.on_demand, NotificationOutcome.WOULD_RESUME)
            return result.decisions
        try:
            created = self._launcher.create_training_job(plan.request)
        except InvalidCloneRequest as exc:
            return self._refused(clone, stop, job, policy, trigger, exc)
        except AdapterError as exc:
            self._record(clone, job, policy, trigger, Outcome.FAILED, reason=f"{clone.reason} (failed: {exc})")
            if stop is not None:
                self._record(
                    stop, job, policy, trigger, Outcome.SKIPPED, reason=f"{stop.reason} (not stopped: no clone)"
                )
            raise
        clone_outcome = Outcome.DONE
        if created is CreateOutcome.ALREADY_EXISTS:
            owner, status = self._source_of(plan.name)
            if status is None:
                # SageMaker says the name is taken, yet does not find the job: made a moment ago (by a duplicate
                # delivery, the reconciler), and a read right after a create may lag it. Whose it is decides
                # the record: read again in a minute rather than record this resume failed
                raise DescriptionBehind(
                    f"CreateTrainingJob {plan.name}: already exists, but DescribeTrainingJob does not find it yet"
                )
            if owner != plan.source:
                reason = (
                    f"{clone.reason} (not created: a job named {plan.name} exists and was resumed from {owner!r})"
                )
                self._record(clone, job, policy, trigger, Outcome.FAILED, reason=reason)
                if stop is not None:
                    self._record(
                        stop, job, policy, trigger, Outcome.SKIPPED, reason=f"{stop.reason} (not stopped)"
                    )
                logger.error("clone name taken by another job", job=job.name, clone=plan.name, owner=owner)
                return result.decisions
            clone_outcome = Outcome.ALREADY_DONE
            if status not in CLONE_RUNNING:
                if stop is not None and result.stop_source:
                    return self._fallback_spent(result, clone, stop, job, policy, effective, trigger, status)
                return self._clone_not_running(result, clone, job, policy, trigger, status)
        self._record(clone, job, policy, trigger, clone_outcome)
        if stop is not None and result.stop_source:
            stopped = Outcome.ALREADY_DONE
            if job.status == "InProgress" and self._jobs.stop(job.name) is StopOutcome.STOPPED:
                stopped = Outcome.DONE
            self._record(stop, job, policy, trigger, stopped)
        self._tell_once(
            plan.name,
            lambda: self._notify(job, effective, result, plan.name, plan.on_demand, NotificationOutcome.RESUMED),
            job=job,
            kind=plan.reason.value,
            created=clone_outcome is Outcome.DONE,
        )
        return result.decisions

    def _tell_once(
        self, clone: str, notify: Callable[[], None], *, job: TrainingJob, kind: str, created: bool
    ) -> None:
        """Tell the owner of a clone and count it, once per clone: with the ledger, whoever meets the clone
        first tells (``CloneNotices``: the event's delivery or the reconciler, the one that made it or a
        retry after its Publish failed); without it, only the attempt that created it (``created``). Inside
        a delivery the metric's and the notifier's once-guards also hold."""

        def tell() -> None:
            notify()  # first: a Publish that fails leaves the clone uncounted for the retry
            once(f"metric|{self.metric.value}|{job.name}", lambda: self._count(kind))

        if self._notices is not None:
            self._notices.once(clone, tell)
        elif created:
            tell()

    def _fallback_spent(
        self,
        result: CloneDecision,
        clone: Decision,
        stop: Decision,
        job: TrainingJob,
        policy: Policy,
        effective: Policy,
        trigger: Trigger,
        status: str | None,
    ) -> tuple[Decision, ...]:
        """A move of a running job meets its next clone from an earlier move, failed or stopped. Stopping the
        job would leave nothing running, so it stays on Spot. The clone's name is deterministic (the
        lineage's root and the job's next attempt), so every later move of this job plans that same name:
        its Spot fallback is spent. Nothing was created or stopped, and the records say so (skipped, with
        the existing clone's status); the owner is told the job stays on Spot, once per clone with the ledger
        (``CloneNotices.once_spent``: each later interruption is a delivery of its own), else once per delivery."""
        assert result.plan is not None
        name = result.plan.name
        evidence = {"clone_status": status, "spot_fallback": "spent"}
        skipped = (
            clone.model_copy(
                update={
                    "reason": (
                        f"{clone.reason} (not created: {name} exists from an earlier move and is {status}; every "
                        "later move of this job plans that name, so its Spot fallback is spent: it stays on Spot)"
                    ),
                    "evidence": {**clone.evidence, **evidence},
                }
            ),
            stop.model_copy(
                update={
                    "reason": f"{stop.reason} (not stopped: its clone {name} exists but is {status})",
                    "evidence": {**stop.evidence, **evidence},
                }
            ),
        )
        for decision in skipped:
            self._record(decision, job, policy, trigger, Outcome.SKIPPED)
        logger.warning(
            "clone exists but does not run; Spot fallback spent", job=job.name, clone=name, status=status
        )
        spent = CloneDecision(decisions=skipped, plan=result.plan)
        on_demand = result.plan.on_demand

        def tell() -> None:
            self._notify(job, effective, spent, name, on_demand, NotificationOutcome.NOTIFIED)

        if self._notices is not None:
            self._notices.once_spent(name, tell)  # once per clone, not at every later interruption
        else:
            tell()
        return skipped

    def _clone_not_running(
        self,
        result: CloneDecision,
        clone: Decision,
        job: TrainingJob,
        policy: Policy,
        trigger: Trigger,
        status: str | None,
    ) -> tuple[Decision, ...]:
        """A clone with nothing to stop meets its name held by this job's own clone that failed or was
        stopped (e.g. a Spot job ended at ``MaxWaitTimeExceeded`` whose earlier move's clone failed): nothing
        runs in its place, so it is not done. The record says so (skipped, with the existing clone's status)
        and the owner is not told it was resumed; the failed clone's own resume (its event, or the
        reconciler's deferred resume) decides about it."""
        assert result.plan is not None
        name = result.plan.name
        handed = self._resume_deferred(name, status, trigger, job)
        evidence: dict[str, Any] = {"clone_status": status}
        note = "nothing runs in its place"
        if handed is not None:
            evidence["clone_resume"] = handed
            note = f"its deferred resume is decided now: {handed}"
        skipped = clone.model_copy(
            update={
                "reason": f"{clone.reason} (not created: {name} exists from an earlier clone and is {status}: "
                f"{note})",
                "evidence": {**clone.evidence, **evidence},
            }
        )
        self._record(skipped, job, policy, trigger, Outcome.SKIPPED)
        logger.warning("clone exists but does not run", job=job.name, clone=name, status=status)
        return (skipped,)

    def _clone_resume(self) -> Callable[[TrainingJob, Trigger], list[Decision]] | None:
        return self._handoff

    def _resume_deferred(self, name: str, status: str | None, trigger: Trigger, source: TrainingJob) -> str | None:
        """This job, now ended, meets its clone ``name`` that failed and was deferred while this job ran
        (``smgov:resume-after``, ``resume.defer.source-running`` or ``-stopping``): the reconciler may never come back to it (its
        look-back counts from the clone's failure, and this job may have trained on for hours), so the clone's
        resume is decided here, as the reconciler would (auto-resume re-reads it: budget, backoff, the
        ledger's one notice). A clone whose backoff is not yet due is deferred again and stays within the
        reconciler's reach (its failure is more recent than the longest backoff). The code the clone's resume
        decided; None: nothing handed over (not failed, not deferred, or no auto-resume here)."""
        decisions = self._hand_over_deferred(name, status, trigger, source)
        return next((d.code for d in decisions if d.rule == RESUME_RULE_ID), None)

    def _hand_over_deferred(
        self, name: str, status: str | None, trigger: Trigger, source: TrainingJob
    ) -> list[Decision]:
        """``_resume_deferred``'s hand-over: the clone's resume's decisions, none when nothing was handed over.
        ``status``: the clone's, as the caller read it (None: not read, ``DescribeTrainingJob`` says);
        ``source``: the job handing it over, as its caller knows it (its event, or its re-read). The clone's
        tags are read only once it is known to have failed; a read that fails raises ``AdapterError``. A
        clone whose ``smgov:resumed-from`` tag names another job is not handed over (logged): it is not this job's
        (lineage tags this job was launched with from another job are ignored, ``own_lineage``, so the name is
        its own lineage's).

        The clone's resume reads ``source`` again (``DescribeTrainingJob``), right after the event of its end:
        when that answer still says it runs or stops (the clone deferred again for this source,
        ``SOURCE_NOT_ENDED_DEFERS``) while ``source`` has ended, it lags the event, and a hand-over spent on it
        would leave the clone past the reconciler's look-back undecided: ``DescriptionBehind`` (the delivery is
        retried in a minute, the read caught up)."""
        resume = self._clone_resume()
        if resume is None or status not in (None, "Failed"):
            return []
        try:
            existing = self._jobs.describe(name)
            if existing.get("TrainingJobStatus") != "Failed":
                return []
            tags = self._jobs.list_tags(str(existing.get("TrainingJobArn") or name))
        except JobNotFound:
            return []
        if TAG_RESUME_AFTER not in tags or is_settled(name, tags):
            return []
        if tags.get(TAG_SOURCE) != source.name:
            # The name is this job's next clone's, but the clone was made from another job (a job of that name
            # launched otherwise): its own source's end, or the reconciler, decides it
            logger.warning(
                "deferred clone not made from this job; not handed over",
                job=source.name,
                clone=name,
                clone_source=tags.get(TAG_SOURCE),
            )
            return []
        clone = TrainingJob.model_validate(
            {
                "TrainingJobName": name,
                "TrainingJobArn": str(existing.get("TrainingJobArn") or ""),
                "TrainingJobStatus": "Failed",
            }
        )
        decisions = resume(clone, trigger)
        logger.info("deferred clone handed to auto-resume", clone=name, codes=[d.code for d in decisions])
        behind = next(
            (
                d
                for d in decisions
                if d.code in SOURCE_NOT_ENDED_DEFERS and d.evidence.get("source_job") == source.name
            ),
            None,
        )
        if behind is not None and source.is_terminal:
            raise DescriptionBehind(
                f"DescribeTrainingJob {source.name}: {behind.evidence.get('source_status')}, not yet its end "
                f"{source.status}/{source.secondary_status} (its deferred clone {name} was deferred again)"
            )
        return decisions

    def _refused(
        self,
        clone: Decision,
        stop: Decision | None,
        job: TrainingJob,
        policy: Policy,
        trigger: Trigger,
        exc: InvalidCloneRequest,
    ) -> tuple[Decision, ...]:
        """SageMaker (or botocore) refused the clone's request as invalid: a retry would meet the same refusal,
        so it is recorded as not clonable (the source is left as it is) and not raised for a redelivery. A
        deferred resume so refused is settled with that code (``_settle``): the reconciler, which lists the
        job at every run of its look-back, would otherwise ask for the same clone and record it again."""
        refused = Decision(
            rule=self.rule,
            code=self.codes.NOT_CLONABLE,
            action=Action.NONE,
            mode=clone.mode,
            reason=f"not resumed: the clone's request was refused ({exc}); a retry would be refused the same way",
            evidence={**clone.evidence, "refused": str(exc)},
        )
        self._record(refused, job, policy, trigger, Outcome.NO_ACTION)
        self._settle(CloneDecision(decisions=(refused,)), job)
        if stop is not None:
            self._record(
                stop, job, policy, trigger, Outcome.SKIPPED, reason=f"{stop.reason} (not stopped: no clone)"
            )
        logger.error("clone request refused", job=job.name, clone=clone.evidence.get("clone_name"), error=str(exc))
        return (refused,)

    def _defer(self, result: CloneDecision, job: TrainingJob, policy: Policy, trigger: Trigger) -> None:
        """Remember a resume that waits for its backoff on the job itself (``AddTags``), where the reconciler
        finds it. A tag that cannot be written is a failure (the delivery is retried), never a silent loss."""
        (decision,) = result.decisions
        assert result.resume_after is not None
        if decision.mode is not Mode.ENFORCE:
            self._record(decision, job, policy, trigger, Outcome.AUDIT_ONLY)
            return
        if self._marks is None or not job.arn:
            reason = f"{decision.reason} (not remembered: this deployment cannot tag the job)"
            self._record(decision, job, policy, trigger, Outcome.NO_ACTION, reason=reason)
            return
        value = resume_after_tag(result.resume_after)
        try:
            self._marks.mark(job.arn, TAG_RESUME_AFTER, value)
        except AdapterError as exc:
            reason = f"{decision.reason} (failed: {TAG_RESUME_AFTER} not written: {exc})"
            self._record(decision, job, policy, trigger, Outcome.FAILED, reason=reason)
            raise
        self._record(decision, job, policy, trigger, Outcome.DEFERRED)

    def _settle(self, result: CloneDecision, job: TrainingJob) -> None:
        """A deferred resume decided for good (a final skip of a job tagged ``smgov:resume-after``, or its
        clone's request refused as invalid): tag it ``smgov:resume-settled=<code>@<job>`` (``AddTags``, as the
        deferral was tagged: the service has no ``DeleteTags``), so that the reconciler, which lists it at
        every run of its look-back, does not decide and record it again. The value names the job, so that a
        copy of it on another job's request is not taken for that job's settling (``is_settled``). A tag that cannot be written is logged, not raised: the decision stands,
        and the next run decides (and records) it again and tags it then. Audit mode writes no tag: a job of a team
        in audit mode is not visited by the reconciler's deferred-resume pass (``ReconcilerService``), so nothing
        needs settling there."""
        if self._marks is None or not job.arn or job.tag(TAG_RESUME_AFTER) is None:
            return  # never deferred (or not by a deployment that tags): the reconciler does not visit it
        if result.decisions[0].mode is not Mode.ENFORCE:
            return  # audit mode writes no tag (a smgov:resume-after copied with the job's request, or tagged before
            # its team's switch to audit mode)
        code = result.decisions[0].code or ""
        try:
            self._marks.mark(job.arn, TAG_RESUME_SETTLED, settled_tag(code, job.name))
        except AdapterError as exc:
            logger.warning("deferred resume not marked settled", job=job.name, code=code, error=str(exc))

    def _within_reach(self, job: TrainingJob, effective: Policy) -> None:
        """A skip made while some hosts' logs could not be read (``CloneDecision.again``) is handed to the reconciler
        (``_decide_again``) only while its look-back surely lists the job at its next run: the job failed less than
        the team's longest wait (``resume.backoff_minutes``, or ``logs_settle_minutes`` when longer) ago, and the
        look-back is the longest of every team's plus three runs (``ListTrainingJobs``' ``LastModifiedTimeAfter``
        counts from the failure; a tag does not move it). Later (a ``Failed`` delivery retried for hours, the
        reconciler deciding a deferral at its due time), a tag would go unread and the resume be lost to one
        throttled read: ``LogsUnread`` is raised before anything is recorded, for the decision to be made again on a
        new read. A failure time that cannot be read is handed over, as before."""
        failed_at = failure_time(job)
        if failed_at is None:
            return
        waited = self._clock() - failed_at
        if waited >= timedelta(minutes=effective.resume.longest_wait()):
            raise LogsUnread(
                f"{job.name}: some hosts' logs could not be read, {waited.total_seconds() / 60:.0f} minutes after the "
                "failure, past where the reconciler's look-back surely lists the job: decided again on a new read"
            )

    def _decide_again(self, result: CloneDecision, job: TrainingJob) -> None:
        """A skip made while some hosts' logs could not be read (``CloneDecision.again``), on a job not deferred
        yet (a late or retried ``Failed`` delivery, a failure older than the settle period, the lost-end repair):
        tag it ``smgov:resume-after`` (now), so that the reconciler's deferred-resume pass, at its next run,
        decides it again on a new read, as it does a deferred job's (within its look-back), rather than leave the
        resume lost to one throttled read. Enforce mode only (audit mode writes no tag), and only with room for
        the deferral's tag and its settling within SageMaker's 50; a tag that cannot be written is logged."""
        tags = job.tags or {}
        if self._marks is None or not job.arn or job.tags is None:
            return
        if deferred_here(tags, job.creation_time):
            return  # deferred already (one copied with the job's request, dated before it, is written over)
        if result.decisions[0].mode is not Mode.ENFORCE or not has_room_for(
            tags, TAG_RESUME_AFTER, TAG_RESUME_SETTLED
        ):
            return
        try:
            self._marks.mark(job.arn, TAG_RESUME_AFTER, resume_after_tag(self._clock()))
        except AdapterError as exc:
            logger.warning("skip on unread logs not handed to the reconciler", job=job.name, error=str(exc))

    def _own_lineage(self, name: str, tags: dict[str, str]) -> dict[str, str]:
        """The job's tags without lineage tags it was launched with from another job (``own_lineage``), logged;
        kept when a deployment before lineage tags were dated to their job (70dc22b) already resumed or moved the
        job under them: the job those tags name as its next clone exists and names this job as its source
        (``smgov:resumed-from``), so it is this job's clone, met as "already exists" and told once, not made
        again under the job's own lineage (``_earlier_clone``). Read only when the tags are copied."""
        if not copied_lineage(name, tags):
            return tags
        copied = {key: tags[key] for key in LINEAGE_TAGS if key in tags}
        earlier = self._earlier_clone(name, tags)
        if earlier is not None:
            logger.warning(
                "lineage tags copied from another job kept: the job was cloned under them", job=name, clone=earlier
            )
            return tags
        logger.warning("lineage tags copied from another job ignored", job=name, tags=copied)
        return own_lineage(name, tags)

    def _earlier_clone(self, name: str, tags: dict[str, str]) -> str | None:
        """The job the copied lineage ``tags`` name as ``name``'s next clone, when it exists and was made from
        ``name`` (``DescribeTrainingJob``, ``ListTags``); None: none. A read that fails raises ``AdapterError``:
        a clone of this job may run, so nothing is decided (the delivery, or the reconciler's next run, retries)."""
        clone = next_clone_name(name, tags)
        if clone is None:
            return None
        try:
            made = cloned_from(self._jobs, clone, name)
        except AdapterError as exc:
            logger.warning(
                "clone under copied lineage tags unreadable; retried", job=name, clone=clone, error=str(exc)
            )
            raise
        return clone if made else None

    def _named(self, name: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The job called ``name`` (``DescribeTrainingJob``) and its tags (every page of ``ListTags``);
        ``JobNotFound`` when there is none."""
        existing = self._jobs.describe(name)
        return existing, self._jobs.list_tags(str(existing.get("TrainingJobArn") or name))

    def _job_named(self, name: str) -> TrainingJob | None:
        """``_named`` as a job with its tags; None when there is none (a failed read raises ``AdapterError``)."""
        try:
            existing, tags = self._named(name)
        except JobNotFound:
            return None
        return TrainingJob.model_validate({**existing, "Tags": tags})

    def _source_of(self, clone_name: str) -> tuple[str | None, str | None]:
        """The ``smgov:resumed-from`` tag of an existing job (who it is a clone of) and its status; (None,
        None) when there is no such job."""
        try:
            existing, tags = self._named(clone_name)
        except JobNotFound:
            return None, None
        return tags.get(TAG_SOURCE), existing.get("TrainingJobStatus")

    def _record(
        self,
        decision: Decision,
        job: TrainingJob,
        policy: Policy,
        trigger: Trigger,
        outcome: Outcome,
        *,
        reason: str | None = None,
    ) -> None:
        record_decision(
            self._audit,
            decision,
            job=job,
            policy=policy,
            trigger=trigger,
            outcome=outcome,
            at=self._clock(),
            reason=reason,
        )

    def _count(self, reason: str) -> None:
        self._metrics.emit(self.metric, reason=reason)

    def _notify(
        self,
        job: TrainingJob,
        effective: Policy,
        result: CloneDecision,
        clone_name: str,
        on_demand: bool,
        outcome: NotificationOutcome,
    ) -> None:
        self._notifier.publish(
            Notification(
                kind=self.kind,
                job_name=job.name,
                job_arn=job.arn,
                team=job.tag(effective.team_tag),
                owner=job.tag(effective.owner_tag),
                headline=headline(
                    self.kind, outcome, job.name, clone=clone_name, on_demand=on_demand and job.spot
                ),
                outcome=outcome,
                items=Notification.items_from(result.decisions),
                related_job=clone_name,
                diagnosis=result.clone.evidence.get("diagnosis") if result.clone is not None else None,
            )
        )


def _with_evidence(result: CloneDecision, lookup: str) -> CloneDecision:
    """``result`` with the failed clone lookup in each decision's evidence (``clone_lookup``)."""
    decisions = tuple(
        d.model_copy(update={"evidence": {**d.evidence, "clone_lookup": f"failed: {lookup}"}})
        for d in result.decisions
    )
    return replace(result, decisions=decisions)


def _every_host_lines(resume: ResumePolicy, hosts_total: int) -> int:
    """The last lines read of each host when every host is read: the first read's budget
    (``log_hosts`` x ``log_lines`` lines) shared by the hosts read (up to ``MAX_LOG_HOSTS``, the first ones
    included: the port reads them again), never fewer than ``EVERY_HOST_MIN_LINES`` (a failed process's
    root-cause line sits within its last hundred lines or so) nor more than ``log_lines``. The second read
    is at most max(budget, 64 x 100) lines: the team's own budget, or 6,400 lines at the defaults (25 a
    host would miss a failing host's exception under torchrun's report)."""
    hosts = min(hosts_total, MAX_LOG_HOSTS)
    shared = resume.log_hosts * resume.log_lines // max(hosts, 1)
    return min(resume.log_lines, max(EVERY_HOST_MIN_LINES, shared))


def _joined(first: FailureEvidence, every: FailureEvidence, lines: int) -> FailureEvidence:
    """Every host's tail, in the second read's order (failing host first, as it reads now), each host read
    first keeping its first, longer tail; a host the second read missed (its ``GetLogEvents`` failed) keeps
    its first tail too. The hosts cut are the second read's (beyond ``MAX_LOG_HOSTS``)."""
    kept = {h.host: h for h in first.hosts}
    hosts = [kept.pop(h.host, h) for h in every.hosts]
    hosts += [h for h in first.hosts if h.host in kept]
    note = f"the hosts not read first: their last {lines} lines each (the first read's budget shared)"
    return replace(
        every,
        hosts=tuple(hosts),
        hosts_total=max(every.hosts_total, first.hosts_total),
        notes=(*every.notes, note),
    )


class AutoResumeReaction(_CloneReaction):
    """On ``Failed``: resume a long-running job that failed for a transient reason."""

    rule = RESUME_RULE_ID
    kind = NotificationKind.RESUME
    metric = BusinessMetric.JOBS_RESUMED
    codes = ResumeCode

    def applies(self, job: TrainingJob) -> bool:
        return is_resume_trigger(job)

    def _clone_resume(self) -> Callable[[TrainingJob, Trigger], list[Decision]] | None:
        return self._handoff or self.react

    def _decide(
        self,
        job: TrainingJob,
        description: dict[str, Any],
        tags: dict[str, str],
        policy: Policy,
        ctx: CloneContext,
        event: TrainingJob,
    ) -> CloneDecision:
        resume = policy.resume
        failure: FailureEvidence | None = None
        diagnosis: Diagnosis | None = None
        checkpoint: CheckpointProgress | None = None
        source: TrainingJob | None = None
        if resume.enabled and job.status == "Failed":  # evidence is read at failure only
            # Classified once (a signature search per line read), for every decision made of it below, within one
            # budget of DIAGNOSIS_SECONDS: a diagnosis that does not finish in it is no ground for a clone
            budget = unbounded if self._bound is None else self._bound(DIAGNOSIS_SECONDS)
            try:
                failure, diagnosis = self._read_failure_logs(job, resume, budget)
                diagnosis = diagnosis or budget(partial(classify, job.failure_reason, failure, resume.taxonomy()))
            except PatternTimeout as timeout:
                logger.error(
                    # the budget is the diagnosis's: the signature named was searching when it ran out, and a slow one
                    # searched before it may have spent most of it
                    "diagnosis did not finish in its time budget: not resumed; the signature searching then is named",
                    job=job.name,
                    team=job.tag(policy.team_tag),
                    subject=timeout.subject,
                    pattern=timeout.pattern,
                    bound_seconds=timeout.seconds,
                )
                return diagnosis_timed_out(
                    job, resume=resume, default_mode=policy.mode, now=ctx.now, timeout=timeout
                )
            checkpoint = self._read_checkpoint(job)
            source = self._read_source(job, tags)

        def decide(next_clone: TrainingJob | None = None) -> CloneDecision:
            return decide_resume(
                job,
                description,
                tags,
                resume=resume,
                default_mode=policy.mode,
                ctx=ctx,
                failure=failure,
                checkpoint=checkpoint,
                source=source,
                next_clone=next_clone,
                diagnosis=diagnosis,
            )

        result = decide()
        if any(d.code in SOURCE_ENDED_SKIPS for d in result.decisions):
            # The source's end denies the resume: unless an earlier decision made the clone already (and may
            # not have told its owner), which the resume must then meet as "already exists"
            existing = self._next_clone(job, tags)
            if existing is not None:
                result = decide(existing)
        return result

    def _next_clone(self, job: TrainingJob, tags: dict[str, str]) -> TrainingJob | None:
        """The job under the name this job's next clone takes, with its tags (``DescribeTrainingJob`` and
        ``ListTags``), read only when its source's end denies its resume. None: there is none. A read that
        fails raises ``AdapterError``: a skip recorded beside a clone that may run untold would settle the
        job for good, so the delivery (or the reconciler's next run) is retried."""
        name = next_clone_name(job.name, tags)
        if name is None:
            return None
        try:
            return self._job_named(name)
        except AdapterError as exc:
            logger.warning("next clone unreadable; retried", job=job.name, clone=name, error=str(exc))
            raise AdapterError(f"the next clone {name} of {job.name} could not be read: {exc}") from exc

    def _read_source(self, job: TrainingJob, tags: dict[str, str]) -> TrainingJob | None:
        """The job a clone was made from (tag ``smgov:resumed-from``), as it is now: a clone may not be
        resumed while it still runs (``DescribeTrainingJob``, only for a failed clone). None: not a clone,
        or the source no longer exists. A read that fails (throttled) raises ``AdapterError``: the source is
        not assumed ended (do no harm: no clone), and the decision is not made without it either, so the
        delivery (or the reconciler's next run) is retried rather than completed without a resume. Its tags
        are read too (``ListTags``) when they may carry the job's qualification (``source_qualifies``: a Spot
        move of an auto-resumed clone, say)."""
        name = tags.get(TAG_SOURCE)
        if not name or name == job.name:
            return None
        try:
            described = self._jobs.describe(name)
            if not source_qualifies(job.name, tags):
                return TrainingJob.model_validate(described)
            source_tags = self._jobs.list_tags(str(described.get("TrainingJobArn") or name))
            return TrainingJob.model_validate({**described, "Tags": source_tags})
        except JobNotFound:
            return None
        except AdapterError as exc:
            logger.warning("source of a clone unreadable; retried", job=job.name, source=name, error=str(exc))
            raise AdapterError(f"the source {name} of clone {job.name} could not be read: {exc}") from exc

    def _read_failure_logs(
        self, job: TrainingJob, resume: ResumePolicy, budget: Bounded = unbounded
    ) -> tuple[FailureEvidence, Diagnosis | None]:
        """The hosts' log tails: ``resume.log_hosts`` of them, failing host first, then every host (up to
        ``MAX_LOG_HOSTS``) when the job has more hosts and those show no cause (``Diagnosis.cause_unread``:
        nothing at all, or only a peer's failure, ``Diagnosis.peer_unread``: an ``ncclRemoteError`` or a
        watchdog timeout nothing explains) or a resumable interconnect diagnosis (``Diagnosis.interconnect_unread``:
        a peer's report a silence corroborates, or an EFA or InfiniBand completion error, which is also a rank's
        report of its peer's exit; a user-code exception before either on a host not read would make the job the
        user's code). The failing
        host is the one whose stream's ``lastEventTimestamp`` is the earliest, which CloudWatch Logs updates
        "on an eventual consistency basis" (typically within an hour; absent for a recent stream, then the
        order is by name): on a job of more hosts than ``log_hosts`` that order may leave the failing peer
        unread, and the survivors' reports alone are no verdict. The second read is one more
        ``DescribeLogStreams`` and one ``GetLogEvents`` per host (a few pages at most) within the budget of
        the first (``_every_host_lines``); the port reads the first hosts again, and their first, longer
        tails are kept. Any other cause among the first hosts (a GPU's ECC error: no peer's exit explains it)
        is decided on the first read. A second read that fails keeps the first, and a diagnosis that still
        misses hosts whose read failed is ``resume.skip.insufficient-evidence`` (for a peer's report, also
        hosts beyond ``MAX_LOG_HOSTS``). With the evidence, its diagnosis when one was made of it (the
        first read's, which decided that no second read was needed), so that it is not classified twice. A
        classification runs in the diagnosis's ``budget`` (``PatternTimeout`` when it runs out; none by default)."""
        failure = self._read_logs(job, resume.log_lines, resume.log_hosts)
        if failure.hosts_total <= resume.log_hosts or resume.log_hosts >= MAX_LOG_HOSTS:
            return failure, None
        first = budget(partial(classify, job.failure_reason, failure, resume.taxonomy()))
        if not (first.cause_unread or first.interconnect_unread):
            return failure, first
        lines = _every_host_lines(resume, failure.hosts_total)
        every = self._read_logs(job, lines, MAX_LOG_HOSTS)
        if not every.logs_read:
            # the hosts the first read's budget left out were to be read by this one, which failed: they count as
            # failed reads (a later read may reach them), but for those beyond what any read reaches
            note = "the other hosts could not be read: " + "; ".join(every.notes)
            cut = max(failure.hosts_total - MAX_LOG_HOSTS, 0)
            return replace(failure, notes=(*failure.notes, note), hosts_cut=min(failure.hosts_cut, cut)), None
        if first.interconnect_unread:
            why = "an interconnect fault in the first hosts' logs, which a peer's exit may explain: read them all"
        elif first.peer_unread:
            why = "only a peer's failure in the first hosts' logs: read them all"
        else:
            why = "no cause in the first hosts' logs, which may have left out the failing one: read them all"
        logger.info(
            why,
            job=job.name,
            hosts=len(every.hosts),
            of=every.hosts_total,
            lines=lines,
        )
        return _joined(failure, every, lines), None

    def _read_logs(self, job: TrainingJob, lines: int, hosts: int) -> FailureEvidence:
        if self._logs is None:
            return FailureEvidence.unread("this deployment does not read training logs")
        try:
            return self._logs.tails(job.name, lines=lines, hosts=hosts)
        except AdapterError as exc:  # do no harm: decide from FailureReason alone, and say why
            logger.warning("training logs unreadable", job=job.name, error=str(exc))
            return FailureEvidence.unread(f"the logs could not be read: {exc}")

    def _read_checkpoint(self, job: TrainingJob) -> CheckpointProgress | None:
        uri = job.checkpoint_s3_uri
        if uri is None:
            return None
        since = job.training_start_time or job.creation_time
        if self._checkpoints is None:
            return CheckpointProgress.out_of_scope("this deployment names no checkpoint bucket")
        if since is None:
            return CheckpointProgress.unknown("the failed attempt's start time is unknown")
        try:
            return self._checkpoints.progress(uri, since)
        except AdapterError as exc:
            logger.warning("checkpoint location unreadable", job=job.name, error=str(exc))
            return CheckpointProgress.unknown(f"the checkpoint location could not be listed: {exc}")


class SpotFallbackReaction(_CloneReaction):
    """On ``Interrupted`` and on ``MaxWaitTimeExceeded``: move a Managed Spot job to On-Demand."""

    rule = SPOT_RULE_ID
    kind = NotificationKind.SPOT_FALLBACK
    metric = BusinessMetric.SPOT_FALLBACKS
    codes = SpotCode

    def applies(self, job: TrainingJob) -> bool:
        return (
            is_spot_trigger(job)
            or is_spot_stop(job)
            or (self._spot_health is not None and may_be_new_spot_start(job))
        )

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        if is_spot_stop(job):
            return self._stopped(job, trigger)
        if may_be_new_spot_start(job) and not any(
            storm_move_wanted(p.spot) for p in self._policies.current().possible_for(job)
        ):
            return []  # a new (Spot?) job of a team that does not move them (tags unsaid: of no team): no AWS call
        return super().react(job, trigger)

    def _stopped(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """A Spot job's plain stop (``is_spot_stop``: the owner's, or its runtime limit) hands over its Spot
        move's clone that failed and was deferred while the job ran or stopped (``_hand_over_deferred``), as
        its end at ``MaxWaitTimeExceeded`` does: the reconciler's look-back counts from the clone's failure,
        and a job that stops late in it (or after it) ends where no run lists the clone again. The job's tags
        are the event's (``ListTags`` only when it has none); its next clone's name is read
        (``DescribeTrainingJob``): when there is no such clone (the common case), or it did not fail, or it
        is not deferred, nothing is recorded and nothing more is called. A read that fails raises
        ``AdapterError`` (the delivery is retried): a deferred clone may be there; so does the clone's read of
        this job that still says it runs or stops (``DescriptionBehind``, from the hand-over). Twice is
        harmless: a settled clone is not handed over again, and auto-resume's own decision is idempotent."""
        if self._clone_resume() is None:
            return []
        try:
            tags = job.tags if job.tags is not None else self._jobs.list_tags(job.arn or job.name)
            name = next_clone_name(job.name, self._own_lineage(job.name, tags))
            return [] if name is None else self._hand_over_deferred(name, None, trigger, job)
        except DescriptionBehind:
            raise  # the clone's resume read this job as still running or stopping: read again in a minute
        except AdapterError as exc:
            logger.warning("stopped job's deferred clone unreadable; retried", job=job.name, error=str(exc))
            raise

    def _decide(
        self,
        job: TrainingJob,
        description: dict[str, Any],
        tags: dict[str, str],
        policy: Policy,
        ctx: CloneContext,
        event: TrainingJob,
    ) -> CloneDecision:
        spot = policy.spot
        unseen = interruption_unseen(job, event) if spot.enabled else None
        if unseen is not None:  # decided on this read, the interruption would be over: read again, in a minute
            raise DescriptionBehind(
                f"DescribeTrainingJob {job.name}: {job.status}/{job.secondary_status}, its history before the "
                f"interruption the event reported (from {unseen:%Y-%m-%d %H:%M:%S} UTC)"
            )
        if not job.spot and not is_spot_trigger(job):
            return CloneDecision(decisions=())  # a start event whose job DescribeTrainingJob says is On-Demand
        clone = self._clone_of(job, tags, spot)
        if isinstance(clone, Unknown):
            # A decision that plans a clone goes on (it meets "already exists" if an earlier move made it, and
            # its owner and status are checked then) and says the lookup failed. One that plans none would
            # complete the delivery while a move's clone may run beside the Spot job (a retry whose job trains
            # again: spot.skip.no-longer-interrupted), both billing for good: do no harm, stop nothing on
            # unknown data, but fail the delivery so that it is retried
            result = self._decide_spot(job, description, tags, policy, ctx, event)
            if result.plan is None or result.clone is None:
                raise AdapterError(f"{clone.reason}: no clone planned, the move's takeover cannot be ruled out")
            return _with_evidence(result, clone.reason)
        takeover = decide_spot_takeover(job, clone, spot=spot, default_mode=policy.mode)
        if takeover is not None:  # an earlier delivery's move made the clone: finish it before deciding anew
            return takeover
        return self._decide_spot(job, description, tags, policy, ctx, event)

    def _decide_spot(
        self,
        job: TrainingJob,
        description: dict[str, Any],
        tags: dict[str, str],
        policy: Policy,
        ctx: CloneContext,
        event: TrainingJob,
    ) -> CloneDecision:
        spot = policy.spot
        if may_be_new_spot_start(event):  # a first start's event: the storm move, while the job is still new
            start_fleet: FleetHealth | Unknown = Unknown("not read: the job is past its first start")
            # the team's own policy decides (an event that left the tags out was let through for any team that
            # opted in): the fleet is read only for a team that moves new jobs
            if is_new_spot_start(job) and storm_move_wanted(spot):
                start_fleet = self._fleet(job, spot.storm, ctx.now) or Unknown("no Spot health ledger")
            return decide_spot_start(
                job, description, tags, spot=spot, default_mode=policy.mode, ctx=ctx, fleet=start_fleet
            )
        fleet: FleetHealth | Unknown | None = None
        interrupted = in_interruption(job)  # Interrupted, or waiting for capacity after it: decide_spot's test
        if spot.enabled and job.spot and (interrupted or is_spot_max_wait(job)) and spot.storm.enabled:
            self._record_signals(job, ctx.now)
            fleet = self._fleet(job, spot.storm, ctx.now)
        checkpoint: CheckpointProgress | None = None
        alternatives: dict[str, FleetHealth | Unknown] = {}
        if spot.enabled and spot.economics and job.spot and interrupted:
            checkpoint = self._checkpoint_writes(job)  # read at an interruption only: a healthy job pays nothing
            alternatives = self._alternatives_health(job, tags, spot, ctx.now)
        return decide_spot(
            job,
            description,
            tags,
            spot=spot,
            default_mode=policy.mode,
            ctx=ctx,
            checkpoint=checkpoint,
            prices=policy.price_table(),
            fleet=fleet,
            alternatives_health=alternatives,
            allowed_types=[r for r in policy.rules if isinstance(r, AllowedInstanceTypes)],
            reported=event,
        )

    def _clone_of(self, job: TrainingJob, tags: dict[str, str], spot: SpotPolicy) -> TrainingJob | Unknown | None:
        """The job under the name the job's next clone takes, if one exists: read (``DescribeTrainingJob``
        and its tags) only for a running Spot job of a team whose Spot fallback is on (or a stopping or
        stopped one, with the ledger: its move may be untold). ``Unknown``: the
        read failed (throttled): no takeover, the ordinary decision goes on."""
        name = next_clone_name(job.name, tags)
        # a stopping or stopped job, with the ledger: its move's earlier attempt may have stopped it and then
        # failed before telling the owner (told once per clone)
        ending = job.status in SOURCE_ENDING and self._notices is not None
        if name is None or not spot.enabled or not job.spot or not (job.status == "InProgress" or ending):
            return None
        try:
            return self._job_named(name)
        except AdapterError as exc:
            logger.warning("clone lookup failed", job=job.name, clone=name, error=str(exc))
            return Unknown(f"the job under its next clone's name {name} could not be read: {exc}")

    def _execute(
        self, result: CloneDecision, job: TrainingJob, policy: Policy, effective: Policy, trigger: Trigger
    ) -> tuple[Decision, ...]:
        if result.takes_over is None:
            return super()._execute(result, job, policy, effective, trigger)
        clone = result.takes_over
        (stop,) = result.decisions
        if not stop.acts:
            self._record(stop, job, policy, trigger, Outcome.AUDIT_ONLY)
            return result.decisions
        stopped = Outcome.ALREADY_DONE
        if result.stop_source and self._jobs.stop(job.name) is StopOutcome.STOPPED:
            stopped = Outcome.DONE
        self._record(stop, job, policy, trigger, stopped)
        # Told when this stop finished the move (the delivery that created the clone never got this far), or,
        # with the ledger, when the move's owner was not told yet (an earlier attempt stopped the job and
        # failed before telling): once per clone.
        reason = clone.tag(TAG_REASON)
        self._tell_once(
            clone.name,
            lambda: self._notify(job, effective, result, clone.name, not clone.spot, NotificationOutcome.RESUMED),
            job=job,
            kind=reason if reason in set(ResumeReason) else "unknown",  # a dimension: ours only
            created=stopped is Outcome.DONE,
        )
        return result.decisions

    def _alternatives_health(
        self, job: TrainingJob, tags: dict[str, str], spot: SpotPolicy, now: datetime
    ) -> dict[str, FleetHealth | Unknown]:
        """The Spot health of each type the team lists to try before On-Demand, read only for a job that
        opted in (one ledger Query per type; the deciding job left out)."""
        if not spot.fallbacks or not spot.storm.enabled or not opted_in(tags, spot.fallback_job_tag):
            return {}
        out: dict[str, FleetHealth | Unknown] = {}
        for alternative in spot.fallbacks:
            health = self._fleet_of(alternative.instance_type, job.name, spot.storm, now)
            out[alternative.instance_type] = health or Unknown("no Spot health ledger")
        return out

    def _record_signals(self, job: TrainingJob, now: datetime) -> None:
        """Write this Spot event to the fleet's ledger (do no harm: a failed write is logged, not raised)."""
        if self._spot_health is None:
            return
        signals = signals_of(job, now)
        if isinstance(signals, Unknown) or not signals:
            return
        try:
            self._spot_health.record(signals)
        except AdapterError as exc:
            logger.warning("spot health not recorded", job=job.name, error=str(exc))

    def _fleet(self, job: TrainingJob, storm: StormPolicy, now: datetime) -> FleetHealth | Unknown | None:
        """The job's instance type over the window (None: no ledger in this deployment)."""
        instance_type = spot_type(job)
        if self._spot_health is None:
            return None
        if instance_type is None:
            return Unknown("the job's instance type is unknown")
        return self._fleet_of(instance_type, job.name, storm, now)

    def _fleet_of(
        self, instance_type: str, job_name: str, storm: StormPolicy, now: datetime
    ) -> FleetHealth | Unknown | None:
        if self._spot_health is None:
            return None
        try:
            signals = self._spot_health.recent(instance_type, now - timedelta(hours=storm.window_hours))
        except AdapterError as exc:
            logger.warning("spot health unreadable", job=job_name, error=str(exc))
            return Unknown(f"the ledger could not be read: {exc}")
        return FleetHealth.of(instance_type, signals, now, storm, exclude_job=job_name)

    def _checkpoint_writes(self, job: TrainingJob) -> CheckpointProgress | None:
        """Every checkpoint the job wrote since it was created (work kept per stint)."""
        uri = job.checkpoint_s3_uri
        if uri is None:
            return None
        if self._checkpoints is None:
            return CheckpointProgress.out_of_scope("this deployment names no checkpoint bucket")
        if job.creation_time is None:
            return CheckpointProgress.unknown("the job's creation time is unknown")
        try:
            return self._checkpoints.progress(uri, job.creation_time)
        except AdapterError as exc:
            logger.warning("checkpoint location unreadable", job=job.name, error=str(exc))
            return CheckpointProgress.unknown(f"the checkpoint location could not be listed: {exc}")
