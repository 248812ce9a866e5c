"""Compliance use case: evaluate a job on its first InProgress event; stop and notify when it violates.

Once evaluated, the job is tagged ``smgov:compliance-evaluated`` (when a marks port is given): the
reconciler evaluates, once, a job in progress that lacks the tag (its Starting event was lost). Only a mark
written after the job's creation is governance's (``is_own_mark``): one launched with the job (a console
Clone, a pasted ``ListTags`` output) is ignored, and the job evaluated and marked.

The decision is made from the event payload (no API calls) when the payload has what is needed. Before
stopping, the job is re-read (status and tags) and re-evaluated: a developer who added the missing tag
in the meantime, or a job that has already ended, is never stopped by a stale event.

A job whose current tags (the re-read's, or ``ListTags`` for an event without tags, an empty map among them:
``TrainingJob.as_event_says``; never the event's own,
which predate any mark) show the mark was evaluated already, by the reconciler (a job that waited in
``Pending`` past its grace) or by another delivery: it is not evaluated again (``compliance.skip.already-evaluated``,
nothing stopped, recorded as a violation or told). A retry of the delivery that marked it is the exception:
its failed attempt's mark (``mark_effect``, in the delivery's done list) is its own, and it evaluates as that
attempt did (the policy may have switched to enforce since). A compliant job's event reads nothing, so its
duplicate records its pass again (and tells no one).

A retry of a delivery whose failed attempt stopped the job (its ``Publish`` throttled, say, or the stop's own
answer lost) finds the job stopping: that stop is its own (``stop_noted``, in the delivery's done list), so it is
recorded ``done`` and its owner told the job was stopped, not that it had already ended.

The policy's patterns run on the job's tag values within a time budget (``TAG_PATTERN_SECONDS``, when a
``TimeBound`` is given): a rule whose pattern does not finish in it is inconclusive (nothing is stopped on it, the
other rules decide as usual), and an error names the team, the rule and the pattern, for the document to be fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain.clone import has_room_for
from sagemaker_governance.domain.compliance import (
    EVALUATED_TAG,
    ComplianceResult,
    already_evaluated,
    copied_mark,
    evaluate_compliance,
    was_evaluated,
)
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import (
    PATTERN_TIMEOUT,
    AdapterError,
    DescriptionBehind,
    JobNotFound,
    StopOutcome,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification, NotificationKind, NotificationOutcome, headline
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import (
    ComplianceNotices,
    done_before,
    is_stop_effect,
    mark_effect,
    note,
    notice_effect,
    stop_effect,
    stop_noted,
    stopped_earlier,
)
from sagemaker_governance.service.ports import (
    Clock,
    EvaluationMarksPort,
    JobsPort,
    NotifierPort,
    PolicySource,
    TimeBound,
)
from sagemaker_governance.service.recording import Trigger, record_decision

# The time one match of a team's required-tags pattern on one of the job's tag values (at most 256 characters) may
# take: each match has a budget of its own, so a slow pattern makes only its own rule inconclusive (a rule stops at
# its first pattern that does not finish), never a sound pattern of another rule that runs after it. A usual pattern (`cc-[0-9]{4}`) matches such a value in microseconds;
# the slowest kind the backtracking check lets through (`\d*\d*\d*x`, a run cut three ways) took 75 ms on 256 digits,
# about half a second on the functions' 256 MB (about a seventh of a vCPU: Lambda allocates CPU in proportion to
# memory). One that takes longer is one the check missed (`[a-z]*[a-z]*[a-z]*\d*\d*\d*#`: over 10 s on 256
# characters), and it would take as long at every evaluation of the job. A delivery evaluates at most twice (its
# event, the job re-read), so such a pattern costs it 2 s of the 40 s a record is given at worst (handlers/_batch.py),
# and each further rule holding one as much again.
TAG_PATTERN_SECONDS = 1.0


def is_first_in_progress(job: TrainingJob) -> bool:
    """The job's first ``InProgress`` event: compliance is evaluated once, not again after a Spot restart."""
    return (
        job.status == "InProgress"
        and job.secondary_status == "Starting"
        and job.count_transitions("Interrupted") == 0
        and job.count_transitions("Starting") <= 1
    )


class ComplianceService:
    def __init__(
        self,
        jobs: JobsPort,
        notifier: NotifierPort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        *,
        marks: EvaluationMarksPort | None = None,
        notices: ComplianceNotices | None = None,
        bound: TimeBound | None = None,
    ) -> None:
        self._bound = bound  # each evaluation's patterns run in a budget of its own (None: unbounded)
        self._jobs = jobs
        self._notifier = notifier
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._marks = marks
        self._notices = notices  # a stop's owner told once, whoever tells (None: no ledger, told by its stopper)

    def applies(self, job: TrainingJob) -> bool:
        return is_first_in_progress(job) or self._may_owe_telling(job)

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        if job.status == "Stopped":
            return self.tell_owed(job, trigger)
        return self.evaluate(job, trigger)

    def _may_owe_telling(self, job: TrainingJob) -> bool:
        """A stopped job whose owner compliance may still owe the news of its stop: not marked evaluated (the
        mark comes after the telling: ``_told_by_mark``), and a ledger to say. No call: a job whose event leaves
        its tags out is read (``ListTags``) by ``tell_owed``."""
        return self._notices is not None and job.status == "Stopped" and not _told_by_mark(job)

    def tell_owed(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """The job's ``Stopped`` event: tell its owner of a compliance stop whose telling failed where nothing
        retries it (the reconciler's repair: the job, stopping, is no longer in progress; a delivery whose every
        retry failed), once (``ComplianceNotices``). The stop was recorded when it was made: nothing is
        recorded here."""
        if self._notices is None:
            return []
        if job.tags is None and job.arn:
            job = job.with_tags(self._jobs.list_tags(job.arn))
            if _told_by_mark(job):
                return []
        policy = self._policies.current()
        if self._notices.tell_owed(job.name, lambda owed: self._tell_stop(job, policy, owed, trigger)):
            logger.info("compliance stop told at the job's end", job=job.name, trigger=trigger.kind)
        return []

    def _tell_stop(self, job: TrainingJob, policy: Policy, owed: tuple[str, ...], trigger: Trigger) -> None:
        """Tell the owner ``job`` was stopped for the ``owed`` stops (``stop_effect`` names), with the notices of
        the same message (``notice_effect`` names), each told as the job evaluates now when its rule still
        decides the same action, else by its rule and code alone; then record each notice ``done``: a notice is
        recorded once told, and this is its telling (the stops were recorded when they were made)."""
        now = self._evaluate(job, policy)
        stops: list[Decision] = []
        notices: list[Decision] = []
        for effect in owed:
            _, _, rule, code = effect.split("|", 3)
            action, items = (Action.STOP, stops) if is_stop_effect(effect) else (Action.NOTIFY, notices)
            found = next((d for d in now.violations if d.rule == rule and d.action is action), None)
            items.append(
                found.model_copy(update={"code": code})
                if found is not None
                else Decision(
                    rule=rule,
                    code=code,
                    action=action,
                    mode=Mode.ENFORCE,
                    reason=f"the job violated the rule {rule}"
                    if action is Action.NOTIFY
                    else f"the job was stopped for violating the rule {rule}",
                )
            )
        self._notifier.publish(self._message(job, policy, NotificationOutcome.STOPPED, [*stops, *notices]))
        self._record_told(notices, job, policy, trigger)

    def evaluate(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        policy = self._policies.current()
        reread: TrainingJob | None = None  # the job as DescribeTrainingJob and ListTags said it in this reaction
        if job.tags is None and job.arn:
            job = job.with_tags(self._jobs.list_tags(job.arn))
            if job.creation_time is None and EVALUATED_TAG in (job.tags or {}):
                # whose mark it is depends on when the job was created, which this event left out: read the
                # job (a copied mark trusted here would skip a violating job as evaluated)
                job = reread = self._dated(job)
            if self._evaluated_elsewhere(job):
                return self._skip_evaluated(job, policy, trigger)
        result = self._evaluate(job, policy)
        if result.violations or result.inconclusive:
            # before any violation is acted on or recorded (a stop, a notice, audit mode's "would stop": the
            # job may have been fixed since, or the event may show less than the job has, e.g. a tag added
            # since), and when the event left out what a rule needs: the job as DescribeTrainingJob and
            # ListTags say it now, evaluated again (not read twice: a read made above for its mark is now)
            fresh = reread or self._reread(job)
            if fresh is None:
                return self._record_all(result, job, policy, trigger, skipped="the job no longer exists")
            job = fresh
            if self._evaluated_elsewhere(job):
                return self._skip_evaluated(job, policy, trigger)
            result = self._evaluate(job, policy)
        for ignored in result.notes:
            logger.warning("exemption ignored", job=job.name, note=ignored)
        for unfinished in result.timed_out:
            logger.error(
                "policy pattern did not finish matching: rule inconclusive, fix the pattern",
                job=job.name,
                team=job.tag(policy.team_tag),
                rule=unfinished.rule,
                **unfinished.evidence[PATTERN_TIMEOUT],
            )
        stop_outcome = self._stop_if_needed(job, result)
        # A notice is recorded once its owner was told: a failed Publish leaves it to the retry (the delivery's, or
        # the reconciler's next run, which evaluates the job again: it was not marked), never recorded twice
        told = [d for d in result.decisions if d.action is Action.NOTIFY and d.acts] if result.notify_owner else []
        self._record_all(result, job, policy, trigger, stop_outcome=stop_outcome, later=told)
        if result.notify_owner:
            self._notify(job, result, policy, stop_outcome)
            self._record_told(told, job, policy, trigger)
        self._mark_evaluated(job)
        return list(result.decisions)

    def _evaluate(self, job: TrainingJob, policy: Policy) -> ComplianceResult:
        """``evaluate_compliance`` with each match of the policy's patterns run in a budget of ``TAG_PATTERN_SECONDS``
        of its own."""
        bounded = None if self._bound is None else self._matched
        return evaluate_compliance(job, policy, self._clock(), bounded=bounded)

    def _matched(self, match: Callable[[], bool]) -> bool:
        """One pattern's match on one value, in a new budget: one shared by the evaluation would be spent by a slow
        pattern, and every pattern after it (another rule's, sound) would raise at once, blamed for it."""
        assert self._bound is not None
        return self._bound(TAG_PATTERN_SECONDS)(match)

    def _record_told(
        self, notices: Sequence[Decision], job: TrainingJob, policy: Policy, trigger: Trigger
    ) -> None:
        """Record each notice done, once its owner's message was published (never before: a failed publish
        leaves it to whoever tells it later)."""
        for decision in notices:
            record_decision(
                self._audit,
                decision,
                job=job,
                policy=policy,
                trigger=trigger,
                outcome=Outcome.DONE,
                at=self._clock(),
            )

    def _evaluated_elsewhere(self, job: TrainingJob) -> bool:
        """``job``'s current tags show it evaluated, and not by a failed attempt of this delivery (whose retry
        evaluates as that attempt did). A mark older than the job (or not a time) came with its request
        (``is_own_mark``): it is ignored, logged, and the job evaluated; with the job's creation time unknown,
        any mark is taken as governance's (logged)."""
        copied = copied_mark(job.tags, job.creation_time)
        if copied is not None:
            logger.warning("mark copied from another job ignored: evaluated", job=job.name, mark=copied)
        elif job.creation_time is None and EVALUATED_TAG in (job.tags or {}):
            logger.info("job's creation time unknown: its mark is taken as governance's", job=job.name)
        return (
            was_evaluated(job.tags, created=job.creation_time)
            and done_before(mark_effect(job.name, EVALUATED_TAG)) is None
        )

    def _skip_evaluated(self, job: TrainingJob, policy: Policy, trigger: Trigger) -> list[Decision]:
        """A job evaluated before (the reconciler's repair of a job still waiting to start; an earlier event):
        its owner was told then, and a stop was made then; nothing is decided twice."""
        decision = already_evaluated(job, policy)
        logger.info(
            "job already evaluated: not evaluated again",
            job=job.name,
            evaluated_at=decision.evidence["evaluated_at"],
            trigger=trigger.kind,
        )
        record_decision(
            self._audit,
            decision,
            job=job,
            policy=policy,
            trigger=trigger,
            outcome=Outcome.ALREADY_DONE,
            at=self._clock(),
        )
        return [decision]

    def _mark_evaluated(self, job: TrainingJob) -> None:
        """Best effort: a job that cannot be tagged is evaluated again by the reconciler, which at worst
        repeats the same decision. A job that already holds SageMaker's 50 tags is not tried at all (the
        refusal is certain); the reconciler evaluates it once per container, as it then finds it unmarked. A
        mark copied from another job (``is_own_mark``) is overwritten with this evaluation's."""
        if self._marks is None or job.arn is None or was_evaluated(job.tags, created=job.creation_time):
            return
        if job.tags is not None and not has_room_for(job.tags, EVALUATED_TAG):
            # launched with SageMaker's 50 tags: AddTags would be refused, now and at every later try
            logger.warning("job at the tag limit: not marked as evaluated", job=job.name, tag=EVALUATED_TAG)
            return
        try:
            self._marks.mark(job.arn, EVALUATED_TAG, self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
        except AdapterError as exc:
            logger.warning("could not mark the job as evaluated", job=job.name, error=str(exc))
            return
        note(mark_effect(job.name, EVALUATED_TAG))  # this delivery's own mark: its retry is not skipped for it

    def _dated(self, job: TrainingJob) -> TrainingJob:
        """``job`` (its tags just listed) as ``DescribeTrainingJob`` says it, for the creation time that dates the
        mark its tags show; the tags are not listed again. ``ListTags`` answered for the job a moment ago and its
        event says it is in progress, which a deleted job cannot be (``DeleteTrainingJob`` takes only a job in a
        terminal state, not one ``InProgress`` or ``Stopping``: botocore's sagemaker model): a job not found is a
        read that lags the job's creation, not a job gone. The delivery is retried (``DescriptionBehind``, a
        minute later) rather than the mark trusted."""
        try:
            return self._jobs.get_job(job.name, tags=job.tags)
        except JobNotFound as exc:
            raise DescriptionBehind(
                f"DescribeTrainingJob {job.name}: not found yet, though ListTags answered and its "
                f"{job.status} event says it runs: the mark {EVALUATED_TAG} cannot be dated"
            ) from exc

    def _reread(self, job: TrainingJob) -> TrainingJob | None:
        try:
            return self._jobs.get_job(job.name)
        except JobNotFound:
            return None

    def _stop_if_needed(self, job: TrainingJob, result: ComplianceResult) -> Outcome | None:
        """``done`` when this delivery stopped the job: now, or in an earlier attempt that then failed (its
        message, its record, or the stop's own answer lost: ``stop_noted``), whose retry finds the job stopping;
        ``already-done`` when the job was stopping or ended before it."""
        if not result.stops:
            return None
        stops = [d for d in result.decisions if d.action is Action.STOP and d.acts]
        if job.status == "InProgress":
            effects = [stop_effect(job.name, d.rule, d.code) for d in stops]
            if stop_noted(lambda: self._jobs.stop(job.name), *effects) is StopOutcome.STOPPED:
                return Outcome.DONE
        if any(stopped_earlier(job.name, d.rule, job.status) is not None for d in stops):
            return Outcome.DONE
        return Outcome.ALREADY_DONE

    def _record_all(
        self,
        result: ComplianceResult,
        job: TrainingJob,
        policy: Policy,
        trigger: Trigger,
        *,
        stop_outcome: Outcome | None = None,
        skipped: str | None = None,
        later: list[Decision] | None = None,
    ) -> list[Decision]:
        for decision in result.decisions:
            if later and decision in later:
                continue
            reason = None
            if skipped is not None:
                outcome, reason = Outcome.SKIPPED, f"{decision.reason} (not acted on: {skipped})"
            else:
                outcome = outcome_of(decision, stop_outcome)
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
        return list(result.decisions)

    def _notify(self, job: TrainingJob, result: ComplianceResult, policy: Policy, stopped: Outcome | None) -> None:
        if stopped is Outcome.DONE:
            outcome = NotificationOutcome.STOPPED
        elif any(d.action is Action.STOP for d in result.told):
            outcome = (
                NotificationOutcome.ALREADY_ENDED
                if stopped is Outcome.ALREADY_DONE
                else NotificationOutcome.WOULD_STOP
            )
        else:
            outcome = NotificationOutcome.NOTIFIED
        # the violations the message is meant to tell, and its outcome from them alone: an audit-mode stop rule
        # beside an enforce-mode notice is neither told nor makes the message a "would stop"
        message = self._message(job, policy, outcome, result.told)
        if outcome is NotificationOutcome.STOPPED and self._notices is not None:
            # told once, whoever tells; a failed Publish leaves the stop owed to the job's Stopped event
            # its notices too: held back from the record until told (``evaluate``), they are owed with the stops
            owed = [
                stop_effect(job.name, d.rule, d.code)
                if d.action is Action.STOP
                else notice_effect(job.name, d.rule, d.code)
                for d in result.decisions
                if d.action in (Action.STOP, Action.NOTIFY) and d.acts
            ]
            self._notices.once(job.name, owed, lambda: self._notifier.publish(message))
        else:
            self._notifier.publish(message)

    def _message(
        self,
        job: TrainingJob,
        policy: Policy,
        outcome: NotificationOutcome,
        items: tuple[Decision, ...] | list[Decision],
    ) -> Notification:
        effective = policy.for_job(job)
        return Notification(
            kind=NotificationKind.COMPLIANCE,
            job_name=job.name,
            job_arn=job.arn,
            team=job.tag(effective.team_tag),
            owner=job.tag(effective.owner_tag),
            headline=headline(NotificationKind.COMPLIANCE, outcome, job.name),
            outcome=outcome,
            items=Notification.items_from(items),
        )


def _told_by_mark(job: TrainingJob) -> bool:
    """``job``'s tags carry compliance's own mark (``was_evaluated``) on a job of known creation time: its owner
    was told of any stop (the mark comes after the telling). A mark on a job whose event leaves out its creation
    time proves nothing: a mark copied with the job's request would hide a stop its owner is owed (a repair's
    stop whose Publish failed never overwrites it). The ledger says then (``ComplianceNotices.tell_owed``: a
    claim and its release, only for an event without the CreationTime SageMaker's events carry), rather than a
    ``DescribeTrainingJob`` to date the mark: a stopped job may have been deleted since (``DeleteTrainingJob``
    takes ended jobs), and the ledger answers for it all the same."""
    return job.creation_time is not None and was_evaluated(job.tags, created=job.creation_time)


def outcome_of(decision: Decision, stop_outcome: Outcome | None) -> Outcome:
    """The audit outcome of one decision, given what happened to the job."""
    if decision.exempted_by is not None:
        return Outcome.EXEMPTED
    if decision.action is Action.NONE:
        return Outcome.NO_ACTION
    if not decision.acts:
        return Outcome.AUDIT_ONLY
    if decision.action is Action.STOP:
        return stop_outcome or Outcome.DONE
    return Outcome.DONE
