"""The alarm guards' stopper: act on a guard alarm's ``ALARM`` notification, for every guard.

A pipeline, each step able to end it (an ignored notification is logged; every decision about a job
writes one audit record):

1. **verify** the notification: ``ALARM``, our account, our alarm-name prefix, and the alarm really exists
   in CloudWatch tagged as managed by this stack; the job comes from its tag (never parsed out of the
   name);
2. **route**: find the guard and the role of the alarm (``Guard.role_of``); an alarm whose role does not
   act (a child alarm has no action) is ignored;
3. **re-read** the job (``DescribeTrainingJob``);
4. **judge**: the guard decides from the facts (``Guard.judge``: pure); a composite alarm's notification repeats
   no child's definition, so its triggering child's is read (one ``DescribeAlarms``) when the judgement needs
   it: whether it was planned with the pinned trigger the plan now lacks (read before judging), and whether it
   fires on stricter terms than the guard plans now (``Guard.stricter_alarm``: a verdict to stop or tell is
   judged again with it); a verdict to stop or tell on a composite whose children treat missing data as
   ``missing`` (a heterogeneous cluster above 10 hosts) stands only if the hosts' ``GPUUtilization`` covers
   the window the alarm judged (one ``GetMetricData``, ``_unless_gpu_data_missing``): such a child goes to
   ``ALARM`` on a few breaching datapoints followed by none;
5. **review** a verdict to stop: the ``StopReview`` port may confirm it or veto it with more evidence
   before anything is stopped (the stall judge, ``service/stall_judge.py``, reads the job's metrics and
   logs here; without a review every verdict is accepted); a verdict that resets alarms or tells the
   owner is checked against the alarm's own state (``DescribeAlarms``): a notification superseded by a
   newer state change of its alarm (a late redelivery, a retry after a failure, a reordered delivery, the
   second of a composite's transitions while its children are reset) resets nothing, and tells nothing
   when the alarm is in ``ALARM`` again (``<guard>.skip.superseded``): the newer change is judged on its
   own notification, and acting on both would tell an owner twice of one stretch. A verdict to stop that
   the review did not confirm on evidence read just now (``GuardVerdict.confirmed``: the stall judge off,
   or a guard it does not judge) is checked too: superseded and out of ``ALARM`` now, nothing is stopped;
   the state unreadable, or a composite's triggering child's definition unread, nothing is stopped and the
   delivery fails, to be retried (``<guard>.skip.state-unread``). A stop of a guard whose stop comes only after a
   notice (``Guard.notice_before_stop``: the minimum-utilization guard) stands only if the ledger says the notice
   of the stretch was sent (``_unless_untold``); else it becomes that notice (``<guard>.notify.before-stop``);
6. **act**: widen (a vetoed stop's alarms: ``PutMetricAlarm``), reset, arm, disarm the alarms the verdict
   names; stop the job if the verdict says so and the
   decision acts (enforce mode, not exempt). A judgement that settles the alarm's stretch without acting
   (``GuardVerdict.holds``: audit mode's would-stop, an exempt job, the guard off) mutes the alarm that fired
   (``DisableAlarmActions``; it stays in ALARM): the reconciler's re-arm, meant for the stall judge's vetoes
   and lost notifications, passes it by, so the stretch is recorded and told once, not at every run; the
   reconciler turns it on again when the stretch ends or a firing could act on the job (``service/reconciler.py``);
7. **record** the audit record, then the estimated savings of a stop, then tell the owner. A retry of a
   delivery whose earlier attempt stopped the job and then failed (the record, or the message) finds the job
   stopping (already ended): it tells the owner of that stop, once (``_tell_earlier_stop``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, BusinessMetricsPort
from sagemaker_governance.domain.alarm_compare import alarm_definition, watched_metrics
from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, StopOutcome
from sagemaker_governance.domain.gpu_coverage import GpuCoverage, gpu_coverage, gpu_queries
from sagemaker_governance.domain.guards.base import (
    PINNED_TRIGGER_MARK,
    AlarmCode,
    AlarmNaming,
    AlarmPlan,
    AlarmState,
    DescribedAlarm,
    Guard,
    GuardVerdict,
    Notice,
    Verdict,
    alarm_tags_identify,
    metric_alarm_terms,
    superseded,
    training_started_at,
)
from sagemaker_governance.domain.instances import InstanceFacts, resolve_unknown
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification, NotificationKind, NotificationOutcome, headline
from sagemaker_governance.domain.pricing import estimate_savings
from sagemaker_governance.domain.stall_judge import JudgePolicy, window_start
from sagemaker_governance.events.alarms import AlarmNotification
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import (
    GuardNotices,
    stop_effect,
    stop_noted,
    stopped_earlier,
)
from sagemaker_governance.service.ports import (
    AlarmArmingPort,
    AlarmOwnershipPort,
    AlarmTransitionsPort,
    Clock,
    InstanceCatalogPort,
    JobsPort,
    NotifierPort,
    PolicySource,
)
from sagemaker_governance.service.recording import Trigger, record_decision
from sagemaker_governance.service.stall_judge import MetricReadPort

# What the stopper records when the verdict is not to stop (a stop's outcome depends on the stop).
_OUTCOMES = {
    Verdict.ARM: Outcome.DONE,
    Verdict.ALREADY_ENDED: Outcome.ALREADY_DONE,
    Verdict.EXEMPTED: Outcome.EXEMPTED,
    Verdict.DISABLED: Outcome.NO_ACTION,
    Verdict.NOT_TRAINING: Outcome.SKIPPED,
    Verdict.STALE: Outcome.SKIPPED,
    Verdict.TOO_EARLY: Outcome.SKIPPED,
    Verdict.VETOED: Outcome.SKIPPED,
    Verdict.NOTIFY: Outcome.DONE,
    Verdict.SUPERSEDED: Outcome.SKIPPED,
    Verdict.UNCONFIRMED: Outcome.SKIPPED,
}
# The verdicts a guard gives only past its stricter-alarm check (``Guard.stricter_alarm`` comes before a guard's stop,
# its exempted stop and its notice): a composite's are judged again with its triggering child's definition.
_PAST_STRICTER_CHECK = frozenset({Verdict.STOP, Verdict.EXEMPTED, Verdict.NOTIFY})
GPU_DATA_RESET_REASON = (
    "sagemaker-governance: the composite alarm fired without GPU data covering its window; reset, it fires again "
    "if the condition holds on data"
)


class StopReview(Protocol):
    """Confirms or vetoes a guard's verdict to stop, before the stopper acts on it.

    Return ``verdict`` itself to confirm it (its decision may carry more evidence), or a verdict of kind
    ``Verdict.VETOED`` (its own decision and code; it may reset alarms) to veto the stop."""

    def review(
        self, guard: Guard[Any], role: str, notice: Notice, verdict: GuardVerdict, policy: Any = None
    ) -> GuardVerdict:
        """``policy``: the job's effective policy (its guard section and the judge's settings)."""


class AlarmWindowsPort(Protocol):
    def update(self, requests: tuple[dict[str, Any], ...]) -> None:
        """``PutMetricAlarm`` each request (updates of existing alarms); raises ``AdapterError``."""


class AcceptEveryStop:
    """The default review: a guard's verdict to stop stands."""

    def review(
        self, guard: Guard[Any], role: str, notice: Notice, verdict: GuardVerdict, policy: Any = None
    ) -> GuardVerdict:
        return verdict


@dataclass(frozen=True)
class _ChildRead:
    """A composite alarm's triggering child as the stopper read it for the notification (one ``DescribeAlarms``):
    ``read`` when a child was named and the read answered (``definition`` None: no such alarm); ``error`` when
    the read failed. Neither: a metric alarm's notification, no child named, or no reader."""

    read: bool = False
    definition: DescribedAlarm | None = None
    error: AdapterError | None = None


@dataclass(frozen=True)
class StopperResult:
    alarm: str
    outcome: str
    reason: str
    job: str | None = None
    action: str | None = None
    code: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class GuardStopper:
    def __init__(
        self,
        *,
        guards: tuple[Guard[Any], ...],
        jobs: JobsPort,
        alarms: AlarmOwnershipPort,
        arming: AlarmArmingPort,
        notifier: NotifierPort,
        policies: PolicySource,
        audit: AuditSink,
        metrics: BusinessMetricsPort,
        clock: Clock,
        naming: AlarmNaming,
        account_id: str,
        review: StopReview | None = None,
        windows: AlarmWindowsPort | None = None,
        transitions: AlarmTransitionsPort | None = None,
        instances: InstanceCatalogPort | None = None,
        gpu_data: MetricReadPort | None = None,
        notices: GuardNotices | None = None,
    ) -> None:
        self._guards = guards
        # a guard's notices told once per state change of its notice alarm, and whether one was before a stop that
        # needs it (None: no ledger; a stop then stands on its alarm, as before)
        self._notices = notices
        # the hosts' GPUUtilization, read before a stop or a notice on a composite whose children treat missing
        # data as missing (None: unread, so no such stop or notice)
        self._gpu_data = gpu_data
        self._instances = instances  # EC2's facts of types our table lacks, as the job's alarms were planned
        self._jobs = jobs
        self._alarms = alarms
        self._arming = arming
        self._notifier = notifier
        self._policies = policies
        self._audit = audit
        self._metrics = metrics
        self._clock = clock
        self._naming = naming
        self._account_id = account_id
        self._review = review or AcceptEveryStop()
        self._windows = windows
        self._transitions = transitions

    def handle(self, message: AlarmNotification, message_id: str | None = None) -> StopperResult:
        name = message.alarm_name
        # 1. verify
        if message.new_state != "ALARM":
            return self._ignore(name, f"state {message.new_state}: only ALARM is acted on")
        if message.account_id != self._account_id or not self._naming.owns(name):
            return self._ignore(name, "not a guard alarm of this stack (account or name prefix)")
        tags = self._alarms.tags(name)
        if tags is None:
            return self._ignore(name, "the alarm does not exist (any more)")
        job_name = alarm_tags_identify(tags, self._naming)
        if job_name is None:
            return self._ignore(name, "the alarm is not tagged as managed by this stack")
        # 2. route
        routed = self._route(name, job_name)
        if routed is None:
            return self._ignore(name, f"no guard acts on this alarm of {job_name} (a child alarm has no action)")
        guard, role = routed
        # 3. re-read
        try:
            job = self._jobs.get_job(job_name)
        except JobNotFound:
            return self._ignore(name, f"training job {job_name} does not exist")
        return self._judge_and_act(guard, role, job, message, message_id)

    def _route(self, alarm_name: str, job_name: str) -> tuple[Guard[Any], str] | None:
        for guard in self._guards:
            role = guard.role_of(alarm_name, job_name, self._naming)
            if role is not None:
                return (guard, role) if guard.acts_on(role) else None
        return None

    def _resolved(self, guard: Guard[Any], job: TrainingJob) -> dict[str, InstanceFacts]:
        """EC2's facts of the job's instance types our table does not know, for a guard that planned its alarms
        with them (its thresholds, its pinned trigger and its re-planned windows come from the same plan) or whose
        stop the stall judge reviews (how many GPUs each host has: without it a host's GPU load cannot be told
        from a CPU-only host's). Read only here, when an alarm fired (cached for the container's life)."""
        uses = getattr(guard, "uses_instance_facts", False) or guard.stall_kind is not None
        if self._instances is None or not uses:
            return {}
        return resolve_unknown((g.instance_type for g in job.instance_groups), self._instances.facts)

    def _triggering_child(self, message: AlarmNotification) -> _ChildRead:
        """A composite's triggering child as ``DescribeAlarms`` gives it (one read, made for a composite's
        notification only: it repeats neither the child's description nor its terms). A metric alarm's
        notification repeats its own definition: nothing is read."""
        children = message.triggering_child_names() if message.is_composite else ()
        if not children or self._transitions is None:
            return _ChildRead()
        try:
            return _ChildRead(read=True, definition=self._transitions.definition(children[0]))
        except AdapterError as exc:
            logger.warning("alarm definition unread: no stop on it", alarm=children[0], error=str(exc))
            return _ChildRead(error=exc)

    @staticmethod
    def _fires_on_pinned(message: AlarmNotification, child: _ChildRead | None) -> bool:
        """Whether the alarm that fired was planned with the pinned trigger (its description says so; a
        composite's is its triggering child's). Unknown (no child named, no reader, the read failed): True, so
        that no stop is made on it."""
        if not message.is_composite:
            return PINNED_TRIGGER_MARK in (message.description or "")
        if child is None or not child.read:
            return True
        return PINNED_TRIGGER_MARK in ((child.definition.description if child.definition else None) or "")

    def _judged_with_child(
        self,
        guard: Guard[Any],
        role: str,
        notice: Notice,
        config: Any,
        message: AlarmNotification,
        child: _ChildRead | None,
    ) -> tuple[GuardVerdict, _ChildRead | None]:
        """The guard's verdict on ``notice``; a composite's verdict past the stricter-alarm check judged again with
        its triggering child's definition, read now unless ``child`` was read before judging. The child as read."""
        verdict = guard.judge(role, notice, config)
        if not message.is_composite or child is not None or verdict.verdict not in _PAST_STRICTER_CHECK:
            return verdict, child
        child = self._triggering_child(message)
        if child.definition is None:
            return verdict, child
        return guard.judge(role, notice.model_copy(update={"fired_child": child.definition}), config), child

    def _judge_and_act(
        self, guard: Guard[Any], role: str, job: TrainingJob, message: AlarmNotification, message_id: str | None
    ) -> StopperResult:
        now = self._clock()
        policy = self._policies.current()
        effective = policy.for_job(job)
        config = guard.config(effective)
        stops = guard.stops_from(role)
        exemption = effective.exemption_for(job, guard.rule_id, now)[0] if stops else None
        savings = estimate_savings(job, effective.price_table(), now) if stops else None
        # A composite's triggering child is read (one DescribeAlarms) when a judgement needs its definition: whether
        # it has the pinned trigger the plan now lacks (before judging), or whether it is stricter than planned now
        # (a verdict past that check is judged again with it); a grace or stale firing reads nothing more.
        child: _ChildRead | None = None
        pinned_unplanned = guard.stall_kind is not None and not guard.plans_pinned_trigger(config)
        if pinned_unplanned and message.is_composite:
            child = self._triggering_child(message)
        notice = Notice(
            job=job,
            mode=config.mode_or(effective.mode),
            now=now,
            naming=self._naming,
            alarm_changed_at=message.changed_at,
            exempted_by=exemption.label() if exemption else None,
            evidence=message.evidence(),
            savings=savings.evidence() if savings is not None else {},
            metric_names=_metric_names(message),
            fired_metrics=_fired_metrics(message),
            resolved=self._resolved(guard, job),
            fired_child=child.definition if child is not None else None,
            unjudged_pinned=pinned_unplanned and self._fires_on_pinned(message, child),
        )
        # 4. judge, 5. review a stop
        verdict, child = self._judged_with_child(guard, role, notice, config, message, child)
        if verdict.stops or verdict.verdict is Verdict.NOTIFY:
            verdict = self._unless_gpu_data_missing(guard, notice, config, effective, message, child, verdict)
        if verdict.stops:
            verdict = self._review.review(guard, role, notice, verdict, effective)
        unread: AdapterError | None = None
        if verdict.stops and not verdict.confirmed:
            verdict, unread = self._unless_stop_superseded(guard, message, verdict, child)
        # the stretch's notice (alarm, state change) a notice tells: its own alarm's, or the notice of a stop untold
        verdict, told_of, unread = self._unless_untold(
            guard, job, verdict, (message.alarm_name, message.changed_at), unread
        )
        if verdict.reset or verdict.verdict is Verdict.NOTIFY:
            verdict = self._unless_superseded(guard, message, verdict)
        # 6. act (an alarm whose judgement held its stretch is muted: judged once per stretch)
        mute = (message.alarm_name,) if verdict.holds and guard.mutes(role) else ()
        outcome = self._act(job, verdict, mute)
        # 7. record, count, tell
        decision = verdict.decision
        trigger = Trigger(kind=f"{guard.name}-alarm", event_id=message_id)
        record_decision(self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=outcome, at=now)
        if unread is not None:
            raise unread  # the delivery is retried: judged again with the alarm's state (or stale, and reset)
        if verdict.verdict is Verdict.NOTIFY and (decision.mode is Mode.ENFORCE or effective.notify_in_audit_mode):
            self._tell_notice(guard, job, verdict, told_of, config=config, policy=effective)
        if verdict.stops:
            if outcome is Outcome.DONE and savings is not None:
                self._metrics.emit(BusinessMetric.ESTIMATED_SAVINGS_USD, savings.usd, rule=guard.rule_id)
            if outcome is Outcome.DONE or (outcome is Outcome.AUDIT_ONLY and effective.notify_in_audit_mode):
                self._notify(
                    guard,
                    job,
                    verdict,
                    outcome,
                    config=config,
                    team_tag=effective.team_tag,
                    owner_tag=effective.owner_tag,
                )
        if stops and outcome is not Outcome.DONE:
            self._tell_earlier_stop(
                guard, job, verdict, config=config, team_tag=effective.team_tag, owner_tag=effective.owner_tag
            )
        return StopperResult(
            alarm=message.alarm_name,
            job=job.name,
            action=decision.action.value,
            outcome=outcome.value,
            reason=decision.reason,
            code=decision.code,
        )

    def _tell_notice(
        self,
        guard: Guard[Any],
        job: TrainingJob,
        verdict: GuardVerdict,
        told_of: tuple[str, datetime | None],
        *,
        config: Any,
        policy: Any,
    ) -> None:
        """Tell the owner a guard's notice, once per state change of the notice alarm it tells of (``told_of``),
        with the ledger: what a stop of that stretch asks first (``_unless_untold``)."""

        def tell() -> None:
            self._notify_notice(
                guard, job, verdict, config=config, team_tag=policy.team_tag, owner_tag=policy.owner_tag
            )

        alarm, changed = told_of
        if self._notices is None or changed is None:
            tell()
        else:
            self._notices.once(alarm, changed, tell)

    def _unless_untold(
        self,
        guard: Guard[Any],
        job: TrainingJob,
        verdict: GuardVerdict,
        told_of: tuple[str, datetime | None],
        unread: AdapterError | None,
    ) -> tuple[GuardVerdict, tuple[str, datetime | None], AdapterError | None]:
        """A stop of a guard whose stop needs its owner told first (``Guard.notice_before_stop``: the
        minimum-utilization guard) stands only when the notice of the stretch it ends was sent: the notice alarm is in
        ``ALARM`` (one ``DescribeAlarms``: the stretch's notice is its state change) and the ledger says its owner
        was told of that change (``GuardNotices``). A notice only recorded (audit mode without
        ``notify_in_audit_mode``, the guard off) is none: a team switched to enforce, or the guard on again, would
        otherwise stop a job whose owner never heard of it. Untold, the stop becomes that notice
        (``<guard>.notify.before-stop``, told once under the notice alarm's state change, so a later stop of the
        same stretch finds it told); the notice alarm not in ``ALARM``, neither (``<guard>.skip.not-told``: its own
        notification tells). Either way the stop alarm is left as it is: this stretch is not stopped on it. The
        state unread: nothing stopped, the delivery retried (``<guard>.skip.state-unread``). Without a ledger or
        an alarm-state reader the verdict stands (a stop on its alarm, as before). Returns the verdict, the notice
        it tells of, and the read error to raise after recording (``unread``: one already met, nothing asked)."""
        alarm = guard.notice_before_stop(job.name, self._naming)
        asks = verdict.stops and verdict.decision.acts and unread is None
        if not asks or alarm is None or self._notices is None or self._transitions is None:
            return verdict, told_of, unread
        try:
            current = self._transitions.current_state(alarm)
        except AdapterError as exc:
            why = "the notice alarm's state could not be read, so whether the owner was told of this stretch is unknown"
            return self._unconfirmed(guard, verdict, why, exc), told_of, exc
        decision = verdict.decision
        if current is not None and current.value == "ALARM":
            if self._notices.told(alarm, current.changed_at):
                return verdict, told_of, None
            code, kind, action = guard.code(AlarmCode.NOTIFY_BEFORE_STOP), Verdict.NOTIFY, Action.NOTIFY
            reason = (
                f"{decision.reason}; but its owner was not sent the notice of this stretch (its notice alarm has been "
                f"in ALARM since {current.changed_at.isoformat()}, and that notice was only recorded: audit mode, or the "
                "guard off), so the job is not stopped: its owner is told now, and this stretch is not stopped"
            )
            told_of = (alarm, current.changed_at)
        else:
            code, kind, action = guard.code(AlarmCode.NOT_TOLD), Verdict.TOO_EARLY, Action.NONE
            reason = (
                f"{decision.reason}; but its notice alarm is not in ALARM ({current.value if current else 'unknown'}), "
                "so no notice of this stretch is known to have reached its owner: the job is not stopped (the notice "
                "alarm's own notification tells the owner)"
            )
        update = {
            "code": code,
            "action": action,
            "reason": reason,
            "evidence": {**decision.evidence, "stop_code": decision.code, "notice_alarm": alarm},
        }
        return GuardVerdict(verdict=kind, decision=decision.model_copy(update=update)), told_of, None

    def _unless_gpu_data_missing(
        self,
        guard: Guard[Any],
        notice: Notice,
        config: Any,
        policy: Any,
        message: AlarmNotification,
        child: _ChildRead | None,
        verdict: GuardVerdict,
    ) -> GuardVerdict:
        """A verdict to stop or to tell on a composite alarm whose children treat missing data as ``missing`` (the
        idle and efficiency guards' plan of a heterogeneous cluster above 10 hosts), checked against the hosts'
        ``GPUUtilization`` over the window the alarm judged (one ``GetMetricData``, whether or not the stall judge
        is on; ``domain/gpu_coverage.py``): such a child goes to ALARM on a few breaching datapoints followed by
        silence, so the firing alone is no evidence. Not covered (or unread): nothing is stopped or told, the
        skip is recorded (``<guard>.skip.gpu-data-missing``) and the composite's children are reset, to fire
        again if the condition holds on data. Any other alarm's verdict is returned as it is, and nothing read."""
        if not message.is_composite:
            return verdict
        plan = guard.plan_for(notice, config)
        if not isinstance(plan, AlarmPlan):
            return verdict
        job = notice.job
        children = guard.rearm_targets(message.alarm_name, job.name, plan.metric_alarm_names, self._naming)
        requests = {name: r for name in children if (r := plan.metric_request(name)) is not None}
        if not any(r.get("TreatMissingData") == "missing" for r in requests.values()):
            return verdict
        fired = message.triggering_child_names()
        planned = requests.get(fired[0]) if fired else None
        terms = {
            **metric_alarm_terms(planned or next(iter(requests.values()))),
            **(child.definition.terms if child is not None and child.definition is not None else {}),
        }
        period, periods = terms.get("period_seconds"), terms.get("evaluation_periods")
        if not isinstance(period, int) or not isinstance(periods, int) or period < 1 or periods < 1:
            return verdict  # a plan always names them
        end = notice.as_of
        start = window_start(end, timedelta(seconds=period * periods), training_started_at(job))
        settings: JudgePolicy = getattr(policy, "judge", None) or JudgePolicy()
        queries = gpu_queries(job.name, job.total_instance_count)
        if self._gpu_data is None:
            coverage = GpuCoverage(False, "the hosts' GPUUtilization cannot be read here (no metric reader)", {})
        else:
            read = self._gpu_data.read(queries, start, end)
            coverage = gpu_coverage(
                queries, read, start=start, end=end, period_seconds=period, min_coverage=settings.min_coverage
            )
        if coverage.covered:
            return verdict
        decision = verdict.decision
        undone = "stopped" if verdict.stops else "told"
        logger.info("composite alarm fired without GPU data: no stop or notice", job=job.name, code=decision.code)
        reason = (
            f"{coverage.reason}: the composite alarm's children treat missing data as missing (some hosts publish "
            "no GPUUtilization), and such a child goes to ALARM on a few breaching datapoints followed by none, so "
            f"this firing is no evidence; the job is not {undone}, and the children are reset (they fire again if "
            f"the condition holds on data). The judgement was: {decision.reason}"
        )
        update = {
            "code": guard.code(AlarmCode.GPU_DATA_MISSING),
            "action": Action.NONE,
            "reason": reason,
            "remedy": None,
            "evidence": {**decision.evidence, "skipped_code": decision.code, "gpu_coverage": coverage.evidence},
        }
        return GuardVerdict(
            verdict=Verdict.VETOED,
            decision=decision.model_copy(update=update),
            reset=tuple(requests),
            reset_reason=GPU_DATA_RESET_REASON,
        )

    def _unless_stop_superseded(
        self, guard: Guard[Any], message: AlarmNotification, verdict: GuardVerdict, child: _ChildRead | None
    ) -> tuple[GuardVerdict, AdapterError | None]:
        """A verdict to stop that no review confirmed on evidence read just now (the stall judge off, or none for
        the guard) rests on the notification alone, which may be late (an SQS retry, a late SNS delivery, under
        the stale limit): the alarm's current state is read first. Changed since the notification and not in
        ``ALARM`` now (the job recovered, or the alarm was reset): superseded, nothing stopped (a stretch that
        goes on fires again and is judged on its own notification). Back in ``ALARM``, or its last change
        unknown: the verdict stands. Unreadable, or a composite's triggering child's definition unread (whether
        it fired on stricter terms than the policy plans now is unknown): nothing stopped on the notification
        alone; the skip is recorded (``<guard>.skip.state-unread``) and the error returned with it, for the
        caller to raise after recording, so that the delivery is retried."""
        if self._transitions is None:
            return verdict, None
        if child is not None and child.error is not None:
            why = (
                "the definition of the composite alarm's triggering child could not be read, so whether it fired on "
                "stricter terms than the policy plans for the job now is unknown"
            )
            return self._unconfirmed(guard, verdict, why, child.error), child.error
        try:
            current = self._transitions.current_state(message.alarm_name)
        except AdapterError as exc:
            logger.warning("alarm state unreadable: no stop on the notification alone", alarm=message.alarm_name)
            why = (
                "the alarm's current state could not be read, and nothing but the notification (which may be late) "
                "says the condition still holds"
            )
            return self._unconfirmed(guard, verdict, why, exc), exc
        changed = message.changed_at
        if current is None or changed is None or not superseded(changed, current) or current.value == "ALARM":
            return verdict, None
        return self._superseded(guard, verdict, current, changed, "stop"), None

    @staticmethod
    def _unconfirmed(guard: Guard[Any], verdict: GuardVerdict, why: str, exc: AdapterError) -> GuardVerdict:
        """The verdict that stops nothing instead of ``verdict``: ``why`` a read failed (``exc``) and left it
        unconfirmed."""
        decision = verdict.decision
        update = {
            "code": guard.code(AlarmCode.STATE_UNREAD),
            "action": Action.NONE,
            "reason": f"{why}: the job is not stopped, and the delivery is retried ({exc}). The judgement was: "
            f"{decision.reason}",
            "remedy": None,
            "evidence": {**decision.evidence, "unconfirmed_code": decision.code, "error": str(exc)[:300]},
        }
        return GuardVerdict(verdict=Verdict.UNCONFIRMED, decision=decision.model_copy(update=update))

    def _unless_superseded(
        self, guard: Guard[Any], message: AlarmNotification, verdict: GuardVerdict
    ) -> GuardVerdict:
        """The verdict, or one that does nothing, when the alarm changed state again after the notification's
        state change: its reset would make an alarm that has since changed state (and fired again, judged on
        its own notification) fire once more; its notice is told by the newer notification when the alarm is
        in ``ALARM`` again (a notice superseded by a recovery is still sent: it is the only telling of that
        stretch). The alarm's state unreadable: the notification is taken as current, as before."""
        if self._transitions is None:
            return verdict
        try:
            current = self._transitions.current_state(message.alarm_name)
        except AdapterError as exc:
            logger.warning("alarm state unreadable: taken as current", alarm=message.alarm_name, error=str(exc))
            return verdict
        changed = message.changed_at
        if current is None or changed is None or not superseded(changed, current):
            return verdict
        if verdict.verdict is Verdict.NOTIFY and current.value != "ALARM":
            return verdict
        undone = "notice" if verdict.verdict is Verdict.NOTIFY else "reset"
        return self._superseded(guard, verdict, current, changed, undone)

    def _superseded(
        self, guard: Guard[Any], verdict: GuardVerdict, current: AlarmState, changed: datetime, undone: str
    ) -> GuardVerdict:
        """The verdict that does nothing instead of ``verdict``: its ``undone`` effect is not made."""
        decision = verdict.decision
        reason = (
            f"the alarm changed state again (to {current.value}) at {current.changed_at.isoformat()}, after this "
            f"notification's change at {changed.isoformat()}: that newer change is judged on its own notification, "
            f"so this judgement's {undone} is not made. The judgement was: {decision.reason}"
        )
        update = {
            "code": guard.code(AlarmCode.SUPERSEDED),
            "action": Action.NONE,
            "reason": reason,
            "remedy": None,
            "evidence": {
                **decision.evidence,
                "superseded_code": decision.code,
                "alarm_state_now": current.value,
                "alarm_changed_again_at": current.changed_at.isoformat(),
            },
        }
        return GuardVerdict(verdict=Verdict.SUPERSEDED, decision=decision.model_copy(update=update))

    def _act(self, job: TrainingJob, verdict: GuardVerdict, mute: tuple[str, ...] = ()) -> Outcome:
        if verdict.rewindow and self._windows is not None:
            self._windows.update(verdict.rewindow)
        if verdict.reset:
            self._alarms.reset(verdict.reset, verdict.reset_reason)
        if verdict.arm:
            self._arming.enable_actions(verdict.arm)
        if verdict.disarm or mute:
            self._arming.disable_actions((*verdict.disarm, *mute))
        if verdict.verdict is Verdict.NOTIFY and not verdict.decision.acts:
            return Outcome.AUDIT_ONLY  # audit mode: the notice is recorded (sent only if notify_in_audit_mode)
        if not verdict.stops:
            return _OUTCOMES[verdict.verdict]
        if not verdict.decision.acts:
            return Outcome.AUDIT_ONLY
        # a retry of this delivery (the record or the message below failed) finds the job stopping: the noted stop
        # says the owner is still to be told (``_tell_earlier_stop``)
        effect = stop_effect(job.name, verdict.decision.rule, verdict.decision.code)
        if stop_noted(lambda: self._jobs.stop(job.name), effect) is not StopOutcome.STOPPED:
            return Outcome.ALREADY_DONE
        return Outcome.DONE

    def _tell_earlier_stop(
        self,
        guard: Guard[Any],
        job: TrainingJob,
        verdict: GuardVerdict,
        *,
        config: Any,
        team_tag: str,
        owner_tag: str,
    ) -> None:
        """An earlier attempt of this delivery stopped the job and then failed (SNS ``Publish`` throttled, say):
        this retry found the job stopping (already ended) and would tell nobody. The owner is told it was stopped,
        under the code of that stop; the notifier (``OnceNotifier``) sends it only if that attempt did not."""
        code = stopped_earlier(job.name, guard.rule_id, job.status)
        if code is None:
            return
        reason = (
            f"the {guard.title} stopped the job on this alarm's notification ({code}); telling its owner failed "
            f"then, and the delivery's retry, which found the job {job.status}, tells them now"
        )
        update = {"code": code, "action": Action.STOP, "reason": reason, "remedy": None}
        told = GuardVerdict(verdict=Verdict.STOP, decision=verdict.decision.model_copy(update=update))
        self._notify(guard, job, told, Outcome.DONE, config=config, team_tag=team_tag, owner_tag=owner_tag)

    def _notify(
        self,
        guard: Guard[Any],
        job: TrainingJob,
        verdict: GuardVerdict,
        outcome: Outcome,
        *,
        config: Any,
        team_tag: str,
        owner_tag: str,
    ) -> None:
        said = NotificationOutcome.STOPPED if outcome is Outcome.DONE else NotificationOutcome.WOULD_STOP
        kind = NotificationKind.guard_stop(guard.name)
        self._notifier.publish(
            Notification(
                kind=kind,
                job_name=job.name,
                job_arn=job.arn,
                team=job.tag(team_tag),
                owner=job.tag(owner_tag),
                headline=headline(kind, said, job.name, symptom=guard.symptom(config)),
                outcome=said,
                items=Notification.items_from([verdict.decision]),
            )
        )

    def _notify_notice(
        self,
        guard: Guard[Any],
        job: TrainingJob,
        verdict: GuardVerdict,
        *,
        config: Any,
        team_tag: str,
        owner_tag: str,
    ) -> None:
        """A guard's nudge: the owner gets the evidence and the suggestion (no stop)."""
        kind = NotificationKind.guard_notice(guard.name)
        self._notifier.publish(
            Notification(
                kind=kind,
                job_name=job.name,
                job_arn=job.arn,
                team=job.tag(team_tag),
                owner=job.tag(owner_tag),
                headline=headline(kind, NotificationOutcome.NOTIFIED, job.name, symptom=guard.symptom(config)),
                outcome=NotificationOutcome.NOTIFIED,
                items=Notification.items_from([verdict.decision]),
            )
        )

    def _ignore(self, alarm: str, reason: str) -> StopperResult:
        logger.info("alarm notification ignored", alarm=alarm, reason=reason)
        return StopperResult(alarm=alarm, outcome="ignored", reason=reason)


def _fired_metrics(message: AlarmNotification) -> frozenset[tuple[Any, ...]] | None:
    """The metrics the alarm reads as its notification repeats them (``watched_metrics``: namespace, name and
    dimensions, compared as the reconciler compares a listed alarm with its plan); None when the message has no
    trigger (a composite) or repeats no metric."""
    if message.trigger is None:
        return None
    return watched_metrics(alarm_definition(message.trigger.as_alarm())) or None


def _metric_names(message: AlarmNotification) -> tuple[str, ...] | None:
    """The metrics the alarm read (None when the message has no trigger)."""
    trigger = message.trigger
    if trigger is None:
        return None
    if trigger.metric_name:
        return (trigger.metric_name,)
    return tuple(
        q.metric_stat.metric.metric_name
        for q in trigger.metrics
        if q.metric_stat is not None and q.metric_stat.metric.metric_name
    )
