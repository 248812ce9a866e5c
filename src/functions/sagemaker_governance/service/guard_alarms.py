"""The alarm guards' lifecycle, one for every guard: create a job's alarms when it enters Training, delete
them when it ends (the guard says which alarms: ``domain/guards``).

* ``InProgress``/``Training`` (first start, Spot restart, duplicate delivery): re-read the job and create
  the guard's alarms only if it is still ``InProgress`` (a late event must not leave an alarm for an
  ended job). ``PutMetricAlarm``/``PutCompositeAlarm`` are upserts; the metric alarms are then reset to
  ``OK`` so that a job that restarted training is judged afresh (an update alone keeps the old state and
  would never notify again; a guard whose alarms start disarmed is disarmed again), except an alarm whose
  ``ALARM`` says the owner was told of the stretch (``Guard.reset_on_entry``: the minimum-utilization guard's
  notice alarm, which would tell the owner again). A restart is told by
  the event's transitions as well as the re-read's (``training_entries``): the re-read, right after the
  event, may still answer the job before this ``Training``.
  A guard whose stop alarm is created disarmed and armed by the stopper (the progress guard: ``Arming``)
  would be disarmed again by a put that comes after that arming (a late event after the reconciler's repair,
  a redelivery, a held-back event of an earlier Spot stint, the repair itself), its armer unable to notify
  again. A put made after the end of the period the stint's entry fell in (``may_have_armed``; before it the
  armer cannot have fired for this stint, so a timely event reads nothing) asks whether the job published
  the metric since (one ``GetMetricData``, in the armer's period or, for a stint that began more than 15
  days ago, the finest multiple of it CloudWatch still answers from then: ``domain/metric_retention.py``)
  and, if so, puts the alarms as the stopper leaves them. When that read fails, it keeps what the stop alarm
  holds (one ``DescribeAlarms`` of its ``ActionsEnabled``, on that path only): armed, it is put armed;
  disarmed, missing or unreadable, the plan, as before.
  A job the guard cannot watch at all, seen from the event (e.g. no metric definitions), is not re-read.
* ``Completed``/``Failed``/``Stopped``: delete the guard's alarms of the job (a missing alarm is
  success); a job it could never watch had none: no call, no record. An event that does not say the job's
  tags (left out, or an empty map) costs one ``ListTags`` first, so that the record names the job's team and
  owner, in its mode (a failed read fails the delivery before anything is deleted). A delete CloudWatch still throttles
  after botocore's retries (many jobs ending together: ``DeleteAlarms`` has a quota of 3 requests per
  second per account and region) is recorded as deferred, not failed: the delivery succeeds and the
  reconciler deletes an ended job's leftover alarms on its next run, up to 100 names per request. An
  ended job's alarm costs nothing in the meantime: the stopper re-reads the job before it acts.
* A guard off by default (``quiet_when_disabled``: the minimum-utilization guard) makes no call and no record
  for a job whose own policy leaves it off, on any event. When some team turns it on and the event does not
  say the job's tags (left out, or an empty map), they are read first (one ``ListTags``, which the re-read and
  the deletion record then use). A job whose policy turned the guard off while it ran keeps those alarms until
  the reconciler's orphan repair deletes them once it has ended (the stopper re-reads the job before it acts).

A job may declare its own window for a guard (``smgov:idle-minutes``, ``smgov:progress-minutes``, within
the team's ``judge.max_declared_minutes``: ``domain/tolerance.py``). The effective policy applies it; when
the guard's alarms are created, one more record says whether the declaration was applied
(``judge.tolerance.applied``) or ignored (``judge.tolerance.ignored``), and an ignored one is told to the
owner at the job's first entry into ``Training`` (a Spot restart does not tell again; in audit mode only
with ``notify_in_audit_mode``). With the delivery ledger it is told once per job, guard and declared value
(``ToleranceNotices``): the reconciler's repair before a late Training event, or a copy of the event, records
the declaration again but does not tell again. A job without these tags gets neither, and no ledger call.

Alarms are created in audit mode too: it is the stopper that only records in audit mode. Each guard's
``GuardAlarms`` is also the reconciler's ``AlarmGuard`` (the alarms it wants for a job now, and how to
create them).

The lifecycle accepts a policy document read up to ``LIFECYCLE_POLICY_MAX_AGE_SECONDS`` ago (the store's
own ``PolicyCacheSeconds`` when that is longer): an alarm's thresholds are fixed when it is created anyway,
and the reconciler compares the stack's alarms with the policy every ``ReconcileIntervalMinutes``. It
spares a job's ``Training`` event the SSM read its ``Starting`` event made minutes before. Decisions that
stop a job (compliance, the stopper) keep the store's cache time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from sagemaker_governance.audit import AuditSink, Outcome
from sagemaker_governance.domain.alarm_compare import (
    AlarmDefinition,
    alarm_definition,
    reads_other_metrics,
    watched_metrics,
)
from sagemaker_governance.domain.alarm_deletion import deletion_requests
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, Throttled
from sagemaker_governance.domain.guards.base import (
    AlarmCode,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Arming,
    DesiredAlarms,
    Guard,
    GuardConfig,
    NoAlarm,
    deletion_units,
    is_training,
    may_have_armed,
    period_start,
    stint_started,
)
from sagemaker_governance.domain.instances import resolve_unknown
from sagemaker_governance.domain.job import TrainingJob, training_entries
from sagemaker_governance.domain.metric_retention import retained_period
from sagemaker_governance.domain.notifications import Notification, NotificationKind, NotificationOutcome, headline
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.stall_judge import MetricRead
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import ToleranceNotices
from sagemaker_governance.service.ports import (
    AlarmLifecyclePort,
    Clock,
    InstanceCatalogPort,
    JobsPort,
    NotifierPort,
    PolicySource,
)
from sagemaker_governance.service.recording import Trigger, record_decision

if TYPE_CHECKING:  # annotations only: the lifecycle never runs the stall judge (cold start)
    from sagemaker_governance.service.stall_judge import MetricReadPort

LIFECYCLE_POLICY_MAX_AGE_SECONDS = 600  # the reconciler's default interval (ReconcileIntervalMinutes)

# What a put whose arming read failed found in the guard's stop alarm (evidence ``arming_seen``)
ARMED, DISARMED, MISSING, UNREAD = "armed", "disarmed", "missing", "unread"
OTHER_METRICS = "other-metrics"  # its actions on, for other metrics than planned: no arming of the planned ones


class GuardAlarms:
    """One guard's alarms through a job's life (a job-events ``Reaction``, a reconciler ``AlarmGuard``)."""

    def __init__(
        self,
        guard: Guard[Any],
        *,
        jobs: JobsPort,
        alarms: AlarmLifecyclePort,
        policies: PolicySource,
        audit: AuditSink,
        clock: Clock,
        naming: AlarmNaming,
        instances: InstanceCatalogPort | None = None,
        notifier: NotifierPort | None = None,
        metric_data: MetricReadPort | None = None,
        notices: ToleranceNotices | None = None,
    ) -> None:
        self.guard = guard
        self._notifier = notifier
        self._notices = notices  # an ignored declaration told once, whoever creates the alarms (None: no ledger)
        self._metric_data = metric_data  # None: a put never reads whether the guard was armed (offline)
        self._jobs = jobs
        self._alarms = alarms
        self._policies = policies
        self._audit = audit
        self._clock = clock
        self._naming = naming
        self._instances = instances

    def _plan(self, job: TrainingJob, config: Any) -> AlarmPlan | NoAlarm:
        """The guard's plan, with EC2's facts for instance types our table does not know (issue 16 item 3)."""
        if self._instances is None or not getattr(self.guard, "uses_instance_facts", False):
            return self.guard.plan(job, config, self._naming)
        resolved = resolve_unknown((g.instance_type for g in job.instance_groups), self._instances.facts)
        plan: AlarmPlan | NoAlarm = self.guard.plan(job, config, self._naming, resolved=resolved)  # type: ignore[call-arg]
        return plan

    def applies(self, job: TrainingJob) -> bool:
        return is_training(job) or job.is_terminal

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        policy = self._policies.current(LIFECYCLE_POLICY_MAX_AGE_SECONDS)
        if self.guard.quiet_when_disabled:
            if job.tags is None and job.is_terminal and not self.guard.watchable(job):
                return []  # a job it could never watch had no alarm: no call, no record
            if job.tags is None and any(self.guard.config(p).enabled for p in policy.possible_for(job)):
                # Some team turns it on and the event did not say the job's team: its tags first (one ListTags,
                # which the re-read below then takes as said; a failed read fails the delivery)
                job = self._with_own_tags(job)
            if not any(self.guard.config(p).enabled for p in policy.possible_for(job)):
                # off for the job's team: nothing to create, and nothing to delete (alarms left by a run the
                # guard was on for are deleted by the reconciler's orphan repair once the job has ended)
                return []
        if job.is_terminal:
            return self._delete(job, policy, trigger)
        return self._create(job, policy, trigger)

    # ---- Training: create ------------------------------------------------------------------------

    def _create(self, event_job: TrainingJob, policy: Policy, trigger: Trigger) -> list[Decision]:
        created = self._create_alarms(event_job, policy, trigger)
        decision, job = created if isinstance(created, tuple) else (created, None)
        if job is None:
            return [decision]
        first = training_entries(event_job, job) <= 1
        return [*self._tolerance(job, policy, trigger, decision, first_training=first), decision]

    def _create_alarms(
        self, event_job: TrainingJob, policy: Policy, trigger: Trigger
    ) -> Decision | tuple[Decision, TrainingJob]:
        """The create decision, with the job as re-read when its alarms were created (or are exempt)."""
        guard = self.guard
        if not guard.watchable(event_job):
            unwatched = guard.plan(event_job, guard.config(policy.for_job(event_job)), self._naming)
            if isinstance(unwatched, NoAlarm):
                decision = self._none(policy, event_job, unwatched.code, unwatched.reason)
                return self._record(decision, event_job, policy, trigger, Outcome.NO_ACTION)
        try:
            # the event's tags: no ListTags (an event that left them out or sent an empty map: ListTags)
            job = self._jobs.get_job(event_job.name, event_job.tags)
        except JobNotFound:
            decision = self._none(
                policy,
                event_job,
                guard.code(AlarmCode.JOB_GONE),
                f"the job no longer exists; no {guard.what} created",
            )
            return self._record(decision, event_job, policy, trigger, Outcome.SKIPPED)
        effective = policy.for_job(job)
        config = guard.config(effective)
        mode = config.mode_or(effective.mode)
        if job.status != "InProgress":
            reason = f"the job is already {job.status} (late Training event); no alarm created"
            decision = self._none(policy, job, guard.code(AlarmCode.LATE_EVENT), reason)
            return self._record(decision, job, policy, trigger, Outcome.SKIPPED)
        if not config.enabled:
            reason = f"the {guard.title} is disabled for this job's policy"
            decision = self._none(policy, job, guard.code(AlarmCode.DISABLED), reason)
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        plan = self._plan(job, config)
        if isinstance(plan, NoAlarm):
            decision = Decision(
                rule=guard.rule_id,
                code=plan.code,
                action=Action.NONE,
                mode=mode,
                reason=plan.reason,
                evidence=plan.evidence,
            )
            return self._record(decision, job, policy, trigger, Outcome.NO_ACTION)
        exemption, expired = effective.exemption_for(job, guard.rule_id, self._clock())
        for old in expired:
            logger.warning("exemption ignored", job=job.name, note=f"expired exemption: {old.label()}")
        decision = Decision(
            rule=guard.rule_id,
            code=guard.code(AlarmCode.CREATE if exemption is None else AlarmCode.EXEMPTED),
            action=Action.CREATE_ALARM,
            mode=mode,
            reason=guard.watching(job, config, plan),
            evidence=plan.evidence,
            request=plan.request(),
            exempted_by=exemption.label() if exemption else None,
        )
        if exemption is not None:
            return self._record(decision, job, policy, trigger, Outcome.EXEMPTED)
        decision = self._put(plan, decision, mode, event_job, job)
        return self._record(decision, job, policy, trigger, Outcome.DONE), job

    def _put(
        self,
        plan: AlarmPlan,
        decision: Decision,
        mode: Mode,
        event_job: TrainingJob,
        job: TrainingJob,
        *,
        retarget: bool = False,
    ) -> Decision:
        """Put the guard's alarms: the plan, or as the stopper leaves them when it armed the guard in the job's
        current stint; the create decision with what was put. ``retarget``: the alarms as they exist watch other
        metrics than the plan (the reconciler's re-plan, ``put_entered``), so their arming says nothing of the
        planned ones: a failed read keeps no arming from the stop alarm, and a put of the plan is reset."""
        guard = self.guard
        # Only in enforce mode: in audit mode the stopper may also have muted the armed stall alarm after a
        # would-stop (actions off, left in ALARM: the stretch told once), which an armed put and reset would
        # undo, the same stretch judged and recorded again; a put there is the plan, as before.
        arming = guard.arming(plan) if self._metric_data is not None and mode is Mode.ENFORCE else None
        published = self._published_in_stint(arming, event_job, job) if arming is not None else False
        unread: dict[str, Any] = {}
        if published is None and arming is not None and not retarget:
            # The read failed: a job already hung publishes nothing more, so an arming undone now would never
            # come back. Keep what the stop alarm holds (one DescribeAlarms, on this path only).
            seen = self._current_arming(arming, job)
            unread = {"arming_unread": True, "arming_seen": seen, "arming_kept": seen == ARMED}
        if arming is not None and (published or unread.get("arming_kept")):
            # The stopper may have armed the guard in this stint already: put it as the stopper leaves it.
            self._alarms.put(arming.armed)
            self._alarms.reset(arming.reset, arming.reset_reason)
            evidence = {**decision.evidence, **unread, "armed": True}
            decision = decision.model_copy(update={"evidence": evidence, "request": arming.armed.request()})
        else:
            self._alarms.put(plan)
            if unread:
                decision = decision.model_copy(update={"evidence": {**decision.evidence, **unread}})
            if retarget or published is None or training_entries(event_job, job) > 1:
                # Back in Training (a Spot restart, a retry): the alarm kept its state through the pause, and
                # an ALARM from then would never notify again. CloudWatch leaves an updated alarm's state as it
                # was and starts a new one in INSUFFICIENT_DATA (PutMetricAlarm), so on the first entry no
                # reset is needed: an alarm that exists then (the reconciler's repair before a late Training
                # event) holds the state of this job's own data. Whether the guard was armed unread (None) and
                # its stop alarm not seen armed: the reset lets its arming alarm notify again while the job
                # publishes. Retargeted (the reconciler's re-plan onto other metrics): the arming alarm, left in
                # ALARM with its actions off by the stopper's arming on the metrics it watched before, notifies when
                # the planned ones are published. Not an alarm whose ALARM says its owner was told of the stretch
                # (``Guard.reset_on_entry``: the minimum-utilization guard's notice alarm): it would tell again.
                names = tuple(
                    a.name for a in plan.alarms if a.kind is AlarmKind.METRIC and guard.reset_on_entry(a.role)
                )
                if names:
                    self._alarms.reset(names, guard.rearm_reason)
        return decision

    def _published_in_stint(self, arming: Arming, event_job: TrainingJob, job: TrainingJob) -> bool | None:
        """Whether the job published the guard's arming metrics since it entered its current stint in
        ``Training``, when the put may come after the stopper armed the guard in that stint (``may_have_armed``):
        a late event (a retry after ``DescriptionBehind``, a redelivery, a redrive, a held-back event of an
        earlier stint) or the reconciler's repair. A put within the stint's first period (a timely event)
        reads nothing: False. None: the read failed (logged)."""
        started = stint_started(event_job, job)
        now = self._clock()
        if self._metric_data is None or not is_training(job) or started is None:
            return False
        if not may_have_armed(started, now, arming.period_seconds):
            return False
        period = arming.period_seconds
        since = period_start(started, period)  # the armer's first period of the stint
        # A stint that began more than 15 days ago (SageMaker trains for up to 28) is read in 5-minute periods
        # (more than 63 days: hours) from the interval its entry fell in, as CloudWatch rounds such a StartTime
        # anyway: a finer period from then answers no datapoint at all, which would read as never published
        # (``domain/metric_retention.py``). A datapoint counted in a coarser bucket is one published.
        while (kept := retained_period(since, now, period)) != period:
            since, period = period_start(started, kept), kept
        queries = [MetricRead(q.id, q.metric_name, q.dimensions, arming.stat) for q in arming.metrics]
        read = self._metric_data.read(queries, since, now, period)
        values = [read.values.get(q.id) for q in queries]
        if any(v and any(x > 0 for x in v) for v in values):
            return True
        if any(v is None for v in values):
            logger.warning("arming unread", job=job.name, guard=self.guard.name, errors=list(read.errors)[:5])
            return None
        return False

    def _current_arming(self, arming: Arming, job: TrainingJob) -> str:
        """What the guard's stop alarm holds now, asked when a put could not read whether the job published
        (``_published_in_stint`` None): ``armed`` (its actions on: the stopper armed it, and the put keeps it),
        ``disarmed``, ``missing`` (no such alarm: nothing was armed), ``other-metrics`` (its actions on, but it
        reads other metrics than the plan's stop alarm, namespace, name and dimensions as ``watched_metrics``
        compares them: armed on what the job published of those, which says nothing of the planned ones, after a
        policy changed the progress metrics) or ``unread`` (that read failed too). Only ``armed`` is kept: a guard
        is never armed on no evidence, nor disarmed against the evidence there is.
        The alarm cannot tell this stint's arming from an earlier one's: a restart whose first put this is (its
        timely event handled after its entry's minute) keeps an earlier stint's arming, as a restart whose
        ``Training`` event is lost does (the stopper then waits the alarm's window from the new entry). Logged
        either way."""
        try:
            alarm = self._alarms.metric_alarm(arming.stop_alarm)
        except AdapterError as exc:
            logger.warning(
                "alarm arming unread", job=job.name, guard=self.guard.name, alarm=arming.stop_alarm, error=str(exc)
            )
            return UNREAD
        enabled = alarm.get("ActionsEnabled") if alarm is not None else None
        seen = MISSING if not isinstance(enabled, bool) else ARMED if enabled else DISARMED
        if seen == ARMED and alarm is not None and self._reads_other_metrics(arming, alarm):
            seen = OTHER_METRICS
        logger.warning(
            "arming from the alarm", job=job.name, guard=self.guard.name, alarm=arming.stop_alarm, seen=seen
        )
        return seen

    @staticmethod
    def _reads_other_metrics(arming: Arming, alarm: Mapping[str, Any]) -> bool:
        """Whether the stop alarm as listed (``alarm``) reads other metrics than ``arming`` puts it with; False
        when the listing shows none (nothing to compare)."""
        return reads_other_metrics(
            watched_metrics(alarm_definition(alarm)), arming.armed.metric_request(arming.stop_alarm)
        )

    # ---- declared tolerance (domain/tolerance.py) ----------------------------------------------

    def _tolerance(
        self, job: TrainingJob, policy: Policy, trigger: Trigger, created: Decision, *, first_training: bool
    ) -> list[Decision]:
        """The record of the job's declaration for this guard, if it has one (every time: an auditor sees each
        decision); an ignored one is told to the owner once: at the first entry into Training
        (``first_training``), and with the ledger only by the first to create the alarms then (the Training
        event, a copy of it, the reconciler's repair: ``ToleranceNotices``)."""
        team = policy.for_team(job.tag(policy.team_tag))
        declared = [d for d in team.declared_tolerance(job) if d.section == self.guard.section]
        if not declared:
            return []
        declaration = declared[0]
        decision = declaration.decision(created.mode, getattr(self.guard.config(team), "window_minutes", None))
        outcome = Outcome.DONE if declaration.applied else Outcome.NO_ACTION
        self._record(decision, job, policy, trigger, outcome)
        tells = decision.mode is Mode.ENFORCE or team.notify_in_audit_mode
        notifier = self._notifier
        if declaration.applied or not first_training or not tells or notifier is None:
            return [decision]
        kind = NotificationKind.TOLERANCE_IGNORED
        message = Notification(
            kind=kind,
            job_name=job.name,
            job_arn=job.arn,
            team=job.tag(team.team_tag),
            owner=job.tag(team.owner_tag),
            headline=headline(kind, NotificationOutcome.NOTIFIED, job.name, symptom=("", declaration.tag)),
            outcome=NotificationOutcome.NOTIFIED,
            items=Notification.items_from([decision]),
        )
        if self._notices is None:
            notifier.publish(message)
        else:
            self._notices.once(job.name, declaration.section, declaration.value, lambda: notifier.publish(message))
        return [decision]

    # ---- the reconciler's view (service/reconciler.py: an ``AlarmGuard``) ------------------------

    @property
    def alarm_prefix(self) -> str:
        return self._naming.prefix

    def manages(self, description: str | None) -> bool:
        """Whether an alarm so described was made by this stack (not only named under its prefix)."""
        return self._naming.describes_ours(description)

    def watches(self, job_name: str, alarm_name: str) -> bool:
        return self.guard.role_of(alarm_name, job_name, self._naming) is not None

    def notifies_elsewhere(self, actions: Collection[str]) -> bool:
        """Whether an alarm with these actions notifies another topic than the stack's alarm topic: the stack
        was deleted and deployed again (the topic's name, so its ARN, is CloudFormation's, new each time) while
        the job trained, and its alarms, kept, still notify the deleted topic: nothing would ever stop the job.
        An alarm without actions (a composite's child) notifies nothing, by design."""
        topic = self._naming.alarm_topic_arn
        return topic is not None and any(action != topic for action in actions)

    def rejudged(self, job_name: str, alarm_name: str) -> bool:
        """An alarm of this guard whose notification the stall judge decides (the notifying idle alarm, the
        progress stall alarm), or that arms such an alarm (the progress armer: left in ALARM with its actions
        on, its notification was lost or came before the alarms were created again, and the guard would never
        be armed); not a child, not a nudge's alarm."""
        role = self.guard.role_of(alarm_name, job_name, self._naming)
        return role is not None and self.guard.rejudged(role)

    def muted(self, job_name: str, actions_off: Collection[str]) -> tuple[str, ...]:
        """This guard's alarms of the job that the stopper muted after a judgement that held their stretch
        (audit mode's would-stop, an exempt job, the guard off), among ``actions_off``."""
        return self.guard.muted(job_name, actions_off, self._naming)

    def acts_now(self, job: TrainingJob, policy: Policy) -> bool:
        """Whether a firing of this guard's alarm could act on ``job`` now: the guard on for it, in enforce
        mode, no exemption (a muted alarm is then turned on and reset: the team switched to enforce, the guard
        back on, the exemption expired or its tag removed, while the job stays stalled). Reads the job's name,
        status, secondary status and tags only (the reconciler passes the job as listed, with its tags)."""
        effective = policy.for_job(job)
        config = self.guard.config(effective)
        if not is_training(job) or not config.enabled or config.mode_or(effective.mode) is not Mode.ENFORCE:
            return False
        exemption, _ = effective.exemption_for(job, self.guard.rule_id, self._clock())
        return exemption is None

    def rearm_targets(self, job_name: str, alarm_name: str, observed: Collection[str]) -> tuple[str, ...]:
        """What the reconciler resets so that this judged alarm notifies again (a composite: its children)."""
        return self.guard.rearm_targets(alarm_name, job_name, observed, self._naming)

    def incomplete(self, job_name: str, observed: Collection[str]) -> bool:
        """Whether this guard's alarms seen for the job lack one created with them (a composite alarm)."""
        return self.guard.incomplete(job_name, observed, self._naming)

    def desired_alarms(self, job: TrainingJob, policy: Policy) -> DesiredAlarms:
        """The alarms (metric and composite) this guard wants for ``job`` now: none when
        the job is not training, the guard is off for it, it has nothing to watch, or it is exempt; none and
        not settled when its plan lacked a fact a lookup could not give now (EC2 could not size a type).
        (Whether an alarm is armed is the stopper's business, not compared here.)"""
        if not is_training(job):
            return DesiredAlarms()
        effective = policy.for_job(job)
        config = self.guard.config(effective)
        if not config.enabled:
            return DesiredAlarms()
        plan = self._plan(job, config)
        if not isinstance(plan, AlarmPlan):
            return DesiredAlarms(settled=not plan.provisional)
        exemption, _ = effective.exemption_for(job, self.guard.rule_id, self._clock())
        return DesiredAlarms() if exemption is not None else DesiredAlarms(names=plan.names)

    def planned_requests(self, job: TrainingJob, policy: Policy) -> tuple[dict[str, Any], ...] | None:
        """The ``PutMetricAlarm`` requests of the metric alarms this guard plans for ``job`` now, as its Training
        event would put them (without tags: an update ignores them). Empty: it wants none (not training, the
        guard off, nothing to watch, exempt); None: it cannot know now (a lookup failed: EC2 could not size an
        instance type). Composite alarms are left out: their rule names their children only."""
        if not is_training(job):
            return ()
        effective = policy.for_job(job)
        config = self.guard.config(effective)
        if not config.enabled:
            return ()
        plan = self._plan(job, config)
        if not isinstance(plan, AlarmPlan):
            return None if plan.provisional else ()
        exemption, _ = effective.exemption_for(job, self.guard.rule_id, self._clock())
        if exemption is not None:
            return ()
        return plan.metric_updates

    def arming_moved(self, job: TrainingJob, policy: Policy, listed: Mapping[str, AlarmDefinition | None]) -> bool:
        """Whether putting this guard's alarms of ``job`` as planned now, their actions as ``listed``, would move an
        arming onto metrics it was not made on: the guard's stop alarm is armed once the job publishes what it
        watches (the progress guard: ``Arming``), and an alarm as listed watches other metrics (``watched_metrics``:
        namespace, name, dimensions) than the plan's (a policy's ``progress.metric_names`` changed). The arming
        depends on nothing else the policy sets: the metrics' statistic and period, the armer's threshold and the
        stop alarm's missing-data treatment are the guard's own; the window is not what was seen."""
        if not is_training(job):
            return False
        config = self.guard.config(policy.for_job(job))
        plan = self._plan(job, config) if config.enabled else None
        if not isinstance(plan, AlarmPlan) or self.guard.arming(plan) is None:
            return False
        return any(
            (seen := listed.get(str(request["AlarmName"]))) is not None
            and reads_other_metrics(watched_metrics(seen), request)
            for request in plan.metric_requests
        )

    def put_entered(self, job: TrainingJob, policy: Policy) -> tuple[dict[str, Any], ...] | None:
        """Put this guard's alarms of ``job`` (read just now, in ``Training``) as its ``Training`` event puts them
        into the job's current stint, when their arming was made on other metrics (``arming_moved``): armed if the
        job published the planned metrics in this stint (one ``GetMetricData``), else the plan, the stop alarm's
        actions off and the arming alarm's on, reset so that it notifies once they are published (``_put``). A
        failed read keeps no arming. The ``PutMetricAlarm`` requests put (without tags); None: nothing planned now
        (not training, the guard off, nothing to watch, a lookup failed, exempt): nothing put."""
        if not is_training(job):
            return None
        effective = policy.for_job(job)
        config = self.guard.config(effective)
        plan = self._plan(job, config) if config.enabled else None
        if not isinstance(plan, AlarmPlan) or effective.exemption_for(job, self.guard.rule_id, self._clock())[0]:
            return None
        mode = config.mode_or(effective.mode)
        decision = Decision(
            rule=self.guard.rule_id,
            code=self.guard.code(AlarmCode.CREATE),
            action=Action.CREATE_ALARM,
            mode=mode,
            reason=self.guard.watching(job, config, plan),
            evidence=plan.evidence,
            request=plan.request(),
        )
        put = self._put(plan, decision, mode, job, job, retarget=True)
        armed = self.guard.arming(plan) if put.evidence.get("armed") else None
        return (armed.armed if armed is not None else plan).metric_updates

    def create_alarms(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        """Create the job's alarms as its Training event would (the job is re-read first)."""
        return self._create(job, self._policies.current(LIFECYCLE_POLICY_MAX_AGE_SECONDS), trigger)

    # ---- terminal: delete ------------------------------------------------------------------------

    def _delete(self, job: TrainingJob, policy: Policy, trigger: Trigger) -> list[Decision]:
        guard = self.guard
        if not guard.watchable(job):
            return []
        hosts = job.total_instance_count
        gone = False
        if guard.sized_by_hosts and hosts == 0:  # an event without ResourceConfig: ask SageMaker
            try:
                described = self._jobs.get_job(job.name)
            except JobNotFound:
                hosts, gone = 1, True
            else:
                hosts = described.total_instance_count
                job = job if job.tags is not None else job.with_tags(described.tags or {})
        if not gone:
            # The record's team, owner and mode are the job's: tags the event did not say are read before
            # anything is deleted (a read made above is used; a failed one fails the delivery, retried, with
            # nothing deleted or recorded on the default team's terms meanwhile)
            job = self._with_own_tags(job)
        names = guard.owned_alarms(job.name, hosts, self._naming)
        # DeleteAlarms takes at most one composite alarm per request: a guard with several composites (one
        # per role above 10 hosts) deletes them in as many requests; every other plan in one.
        try:
            deleted: list[str] = []
            for request in deletion_requests(deletion_units(names)):
                deleted += self._alarms.delete(request)
        except Throttled as exc:
            logger.warning("alarm delete deferred", job=job.name, error=str(exc))
            deferred = Decision(
                rule=guard.rule_id,
                code=guard.code(AlarmCode.DELETE_DEFERRED),
                action=Action.DELETE_ALARM,
                mode=self._mode(policy, job),
                reason=(
                    f"the job is {job.status} but CloudWatch throttled deleting its {guard.what}: "
                    "the reconciler deletes them on its next run"
                    + (f" ({len(deleted)} deleted before the throttle)" if deleted else "")
                ),
                # the alarms earlier requests deleted (a guard with several composites deletes them one request
                # each): gone now, so the reconciler's repair of the rest will not name them
                evidence={"throttled": str(exc)[:300], "deleted": deleted},
                request={"AlarmNames": list(names)},
            )
            return [self._record(deferred, job, policy, trigger, Outcome.DEFERRED)]
        decision = Decision(
            rule=guard.rule_id,
            code=guard.code(AlarmCode.DELETE),
            action=Action.DELETE_ALARM,
            mode=self._mode(policy, job),
            reason=(
                f"the job is {job.status}: its {guard.what} are deleted"
                if deleted
                else f"the job is {job.status}: no {guard.what} to delete"
            ),
            evidence={"deleted": deleted},
            request={"AlarmNames": list(names)},
        )
        outcome = Outcome.DONE if deleted else Outcome.ALREADY_DONE
        return [self._record(decision, job, policy, trigger, outcome)]

    # ---- helpers ---------------------------------------------------------------------------------

    def _with_own_tags(self, job: TrainingJob) -> TrainingJob:
        """``job`` with its tags: the event's, else ``ListTags`` (``AdapterError`` when it fails: the delivery
        is retried). A job SageMaker no longer has (``DeleteTrainingJob`` after its end: no ARN to list, or a
        ``ListTags`` that fails on a job ``DescribeTrainingJob`` no longer finds) is left as it is: its alarms are
        still deleted, recorded without its tags, rather than the delivery failed into the dead-letter queue."""
        if job.tags is not None:
            return job
        try:
            if job.arn is not None:
                try:
                    return job.with_tags(self._jobs.list_tags(job.arn))
                except AdapterError:
                    self._jobs.describe(job.name)  # JobNotFound: gone; found: the read really failed
                    raise
            return job.with_tags(self._jobs.get_job(job.name).tags or {})
        except JobNotFound:
            logger.warning("tags unread: the job no longer exists", job=job.name, guard=self.guard.name)
            return job

    def _mode(self, policy: Policy, job: TrainingJob) -> Mode:
        effective = policy.for_job(job)
        config: GuardConfig = self.guard.config(effective)
        return config.mode_or(effective.mode)

    def _none(self, policy: Policy, job: TrainingJob, code: str, reason: str) -> Decision:
        return Decision(
            rule=self.guard.rule_id, code=code, action=Action.NONE, mode=self._mode(policy, job), reason=reason
        )

    def _record(
        self, decision: Decision, job: TrainingJob, policy: Policy, trigger: Trigger, outcome: Outcome
    ) -> Decision:
        record_decision(
            self._audit, decision, job=job, policy=policy, trigger=trigger, outcome=outcome, at=self._clock()
        )
        return decision
