"""Exactly-once effects under duplicate deliveries and retries after a crash, for one write per delivery.

A *delivery key* names the state change an invocation handles, not the event: SageMaker sends several
events for one state change (and EventBridge, SNS and Lambda may each deliver one twice), and they all
carry the same job, status, secondary status and secondary-status transition.

**The claim.** Before processing, the handler claims the key in the ledger (one conditional write). A
delivery whose key is already claimed is a duplicate and is not processed. The claim names its *owner*
(the SQS message, or the one a redrive from the dead-letter queue carries: ``events/queue.py``; the
invocation for a direct one), so that the owner's own retry is not taken for a
duplicate; and a claim whose answer was lost (the ledger's client sent it again after a timeout) is not
taken for a duplicate of itself (``adapters/idempotency.py``: each claim call writes a token of its own):

- the processing raised: the claim is *released* (rewritten as failed, with the effects that attempt had
  completed) before the error goes back to Lambda; the retry claims again and learns those effects;
- the function died without raising (timeout, out of memory): the claim stays; once the invocation's
  time is over, a retry by the same owner takes it over (the effects of the dead attempt are unknown:
  an audit record it wrote may be written again, with the same event id; those of released attempts
  before it are known: a claim keeps the item's done list);
- the processing raised and the release failed too (DynamoDB throttled or unreachable): the claim stays as
  after a death, and the error goes back *marked unreleased* (``mark_unreleased``). A queued record whose
  error is so marked is given the held visibility (``handlers/_batch.py``), counted from its invocation's
  end and longer than any hold it can have left: it comes back after the hold, and its retry takes the
  claim over. A retry within the hold would meet its own claim and be answered as a duplicate, whoever
  holds it: a claim held by its own owner cannot be told from a delivery that completed unmarked (below),
  which a second copy of its SQS message within the hold must find a duplicate. A direct invocation has no
  such visibility: Lambda retries it about a minute later, within the hold, and that retry is answered as a
  duplicate (the event's remaining effects lost). A known gap, on a path the template does not deploy (both
  functions are fed by queues);
- the claim itself raised (DynamoDB throttled or unreachable through botocore's retries): its outcome is
  unknown, since DynamoDB may have applied it and only its answer been lost (a read timeout, then retries
  that could not connect). Nothing was processed; the error goes back marked unreleased too, so that a
  claim so applied is over before the record comes back (the price: a claim that was not applied waits
  the held visibility as well, not the ladder's minute);
- a completed delivery keeps its claim until it expires (``IDEMPOTENCY_TTL_SECONDS``): every other
  owner's copy meanwhile (another message of the same state change) is skipped. Its own owner's (a copy of
  the same SQS message) only within the hold, or once the claim is marked *completed*; a copy of an
  unmarked delivery after the hold takes the claim over as after a death and runs again. Marking costs a
  write, so a delivery is marked only when something makes a late copy likely or costly:
  - its invocation goes on to another one (``delivery_batch``: before the next claim): Lambda returns a
    whole SQS batch to the queue when the invocation fails or times out, the records it had completed
    included, and they come back with the same message id after the visibility timeout;
  - it told someone (a notification sent by this attempt): marked at its end, so that a late copy (the
    event source mapping's delete failed and the message reappears after the queue's timeout; SQS's own
    at-least-once delivery) does not tell the owner again. Only a delivery that notifies pays it: a
    stop, a clone, an audit-mode "would", a guard's notice; never a compliant job.
  The last record of an invocation, and a single delivery, that told nobody are never marked, which
  keeps a healthy job at one write per delivery (issue 22's budget). A late copy of one runs again: its
  actions are idempotent and reach the same end state, but its audit records are written again (the same
  event id: a reader can tell) and its reads and writes made again.

**The effects.** While a delivery is processed it is the current one (``delivering``); the audit sink and
the notifier are wrapped so that each audit record (job, rule, action) and each notification (kind, job)
of a delivery happens once: an effect the released attempt completed is not repeated by the retry. No
write per effect: what a failed attempt did travels in its release. An action no wrapper sees can be noted
as an effect too (``note``): a guard's or compliance's stop (``stop_effect``, ``stop_noted``), whose retry finds
the job stopping and would otherwise not know that the stop was its own, nor that the owner is still to be told; compliance's mark (``mark_effect``), whose retry finds
the job marked evaluated and would otherwise take it for evaluated by someone else.

Only a record that says the action happened (``done``, ``already-done``) settles it. One that says it was
*not* carried out (``failed``, ``skipped``, ``audit-only``, ``exempted``, ``deferred``, ``no-action``)
does not: the attempt that wrote a clone's ``failed`` (and the stop it then ``skipped``) raised, and its
retry may create the clone and stop the job; an attempt in audit mode that wrote ``audit-only`` and then
failed may be retried after the policy was switched to enforce (the README's rollout), and its retry acts.
Those records must be written. Such a record's effect names its outcome too, so it hides only a repeat of
itself (the retry failing, or skipping, the same way), and a record of the action done hides every later
record of it (``audit_effect``). Notifications alike: "would be resumed" hides only itself, "was resumed"
every later message of its kind for the job (``notify_effect``).

The actions themselves are idempotent by construction (a stop re-reads the job and counts a job that is
already stopping as done; a clone has a deterministic name), so a retry reaches the same end state and
records the action once, with the outcome it finds (``already-done`` when the first attempt acted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

from sagemaker_governance.audit import AuditRecord, AuditSink, Outcome
from sagemaker_governance.domain.errors import AdapterError, Claim, StopOutcome, StopRefused
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification, NotificationOutcome
from sagemaker_governance.observability import logger
from sagemaker_governance.service.ports import NotifierPort

if TYPE_CHECKING:  # an annotation only: the job-events function and the reconciler never build the alarm models
    from sagemaker_governance.events.alarms import AlarmNotification

R = TypeVar("R")
E = TypeVar("E", bound=BaseException)


class LedgerPort(Protocol):
    def claim(self, key: str, owner: str, now: datetime, hold_seconds: float) -> Claim:
        """Claim ``key`` for ``owner`` (one conditional write); not granted when another delivery holds it,
        or ``owner`` itself holds it for less than ``hold_seconds`` (its invocation may still run)."""
        ...

    def release(self, key: str, owner: str, now: datetime, done: Sequence[str]) -> None:
        """The delivery failed: let its retry claim again, and tell it which effects are ``done``."""
        ...

    def complete(self, key: str, token: str, now: datetime) -> None:
        """The delivery of the claim ``token`` completed: not even its owner may take it over any more (until
        the item expires, ``now`` + the TTL)."""
        ...


@dataclass
class _Delivery:
    key: str
    done: frozenset[str] = frozenset()
    effects: list[str] = field(default_factory=list)  # completed by this attempt
    held: bool = False  # this attempt left a once-guard's claim held (``hold_left``): its error is unreleased


_current: ContextVar[_Delivery | None] = ContextVar("smgov_delivery", default=None)


@dataclass
class _Batch:
    """The deliveries one invocation handles in turn (an SQS batch)."""

    # completed: (ledger, key, token); each marked when the next delivery starts (its claim's ``now``)
    unmarked: list[tuple[LedgerPort, str, str]] = field(default_factory=list)


_batch: ContextVar[_Batch | None] = ContextVar("smgov_delivery_batch", default=None)


@contextmanager
def delivery_batch() -> Iterator[None]:
    """The deliveries of one invocation, one after another: each completed one is marked completed in the
    ledger before the next is claimed (Lambda would return it with the batch if a later record's failure
    failed the invocation); the last is left unmarked."""
    token = _batch.set(_Batch())
    try:
        yield
    finally:
        _batch.reset(token)


def _mark_completed(now: datetime) -> None:
    """The invocation goes on to another delivery: mark those it completed so far."""
    batch = _batch.get()
    if batch is None:
        return
    unmarked, batch.unmarked = batch.unmarked, []
    for ledger, key, token in unmarked:
        _complete(ledger, key, token, now)


def _complete(ledger: LedgerPort, key: str, token: str, now: datetime) -> None:
    """Mark a completed delivery so. A mark that fails is logged, not raised: no delivery is failed for it
    (its only risk is a re-run by a later copy, as without the mark)."""
    try:
        ledger.complete(key, token, now)
    except Exception:
        logger.exception("delivery not marked completed", delivery=key)


def job_delivery_key(job: TrainingJob) -> str:
    """One state change of a training job: the same for every event SageMaker sends about it, different
    for a later one (a Spot restart enters ``Training`` again with a new transition)."""
    last = job.transitions[-1] if job.transitions else None
    started = last.start_time.isoformat() if last is not None and last.start_time is not None else "-"
    return f"job:{job.name}:{job.status}:{job.secondary_status}:{len(job.transitions)}:{started}"


def alarm_delivery_key(message: AlarmNotification, message_id: str | None) -> str:
    """One state change of an alarm (SNS may deliver its notification twice)."""
    changed = message.changed_at
    when = changed.isoformat() if changed is not None else f"message:{message_id}"
    return f"alarm:{message.alarm_name}:{message.new_state}:{when}"


def current_delivery() -> str | None:
    delivery = _current.get()
    return delivery.key if delivery is not None else None


@contextmanager
def delivering(key: str, done: frozenset[str] = frozenset()) -> Iterator[_Delivery]:
    delivery = _Delivery(key, done)
    token = _current.set(delivery)
    try:
        yield delivery
    finally:
        _current.reset(token)


@dataclass(frozen=True)
class Duplicate:
    """What a duplicate delivery returns instead of processing."""

    key: str

    def as_dict(self) -> dict[str, str]:
        return {"duplicate": self.key}


def deliver(
    ledger: LedgerPort | None,
    key: str,
    process: Callable[[], R],
    *,
    owner: str,
    now: datetime,
    hold_seconds: float,
) -> R | Duplicate:
    """Run ``process`` for this delivery once (without a ledger: every time, as before)."""
    if ledger is None:
        return process()
    _mark_completed(now)
    try:
        claim = ledger.claim(key, owner, now, hold_seconds)
    except Exception as exc:  # of unknown outcome: DynamoDB may have applied it and its answer been lost
        mark_unreleased(exc)  # as a claim left held: its record gets the held visibility, past the hold
        raise
    if not claim.granted:
        logger.info("duplicate delivery skipped", delivery=key, owner=owner)
        return Duplicate(key)
    with delivering(key, claim.done) as delivery:
        try:
            result = process()
        except Exception as exc:
            try:
                ledger.release(key, owner, now, sorted({*claim.done, *delivery.effects}))
            except Exception:  # the claim stays: the owner's retry takes it over once the invocation's time is up
                logger.exception("delivery claim not released", delivery=key)
                mark_unreleased(exc)  # its record gets the held visibility, longer than the hold
            if delivery.held:  # a once-guard's claim left held: its retry must come after that hold
                mark_unreleased(exc)
            raise
    batch = _batch.get()
    if claim.token is None:
        return result
    if any(effect.startswith(_NOTIFIED) for effect in delivery.effects):
        # It told someone: marked now, so that a late copy of its message does not tell them again (a write
        # only a delivery that sent a notification makes: none on a healthy job's path)
        _complete(ledger, key, claim.token, now)
    elif batch is not None:
        batch.unmarked.append((ledger, key, claim.token))
    return result


_UNRELEASED = "smgov_unreleased"


def mark_unreleased(exc: E) -> E:
    """Mark ``exc``, a delivery's error, as one that may leave a claim held (a flag attribute on the
    exception itself): its release failed, or the claim raised with its outcome unknown. Its record must not
    come back before the claim's hold is over (``handlers/_batch.py``). Returns ``exc``."""
    setattr(exc, _UNRELEASED, True)
    return exc


def hold_left(exc: E) -> E:
    """A once-guard within a delivery (``CloneNotices``) failed and may have left its own claim held (its
    release failed, or its claim raised): mark ``exc`` unreleased, and the current delivery too, so that
    whatever error the delivery ends with is marked. Returns ``exc``."""
    delivery = _current.get()
    if delivery is not None:
        delivery.held = True
    return mark_unreleased(exc)


def unreleased(exc: BaseException) -> bool:
    """Whether ``exc`` was marked by ``mark_unreleased``: its delivery's claim may still be held."""
    return getattr(exc, _UNRELEASED, False) is True


def once(effect: str, act: Callable[[], None], *, unless: str | None = None) -> bool:
    """Run ``act`` unless ``effect`` (or ``unless``) is done for the current delivery (by this attempt or one
    that failed before it); True if it ran."""
    delivery = _current.get()
    if delivery is not None and any(
        name in delivery.done or name in delivery.effects for name in (effect, unless) if name is not None
    ):
        logger.info("effect already done for this delivery", delivery=delivery.key, effect=effect)
        return False
    act()
    if delivery is not None:
        delivery.effects.append(effect)
    return True


def note(effect: str) -> None:
    """Add ``effect`` to the current delivery's effects (outside a delivery: nothing): an action a retry of the
    delivery must know this attempt made, though no wrapper records it (``stop_effect``)."""
    delivery = _current.get()
    if delivery is not None:
        delivery.effects.append(effect)


def done_before(prefix: str) -> str | None:
    """An effect an earlier attempt of the current delivery completed that starts with ``prefix`` (None:
    none, or outside a delivery)."""
    delivery = _current.get()
    if delivery is None:
        return None
    return next((effect for effect in sorted(delivery.done) if effect.startswith(prefix)), None)


_STOPPED = "stopped|"


def stop_effect(job_name: str, rule: str, code: str | None = None) -> str:
    """The effect name of a stop this delivery made (StopTrainingJob accepted, or its answer lost: ``stop_noted``),
    with its decision's code; without ``code``, the prefix every such name of (job, rule) starts with. A retry of
    the delivery finds the job stopping, and would tell nobody: this tells it that the stop was its own and its
    owner is still to be told (``GuardStopper``, ``ComplianceService``)."""
    head = f"{_STOPPED}{job_name}|{rule}|"
    return head if code is None else f"{head}{code}"


_NOTICED = "notice|"


def is_stop_effect(effect: str) -> bool:
    """Whether ``effect`` names a stop (``stop_effect``), not a notice owed with it (``notice_effect``)."""
    return effect.startswith(_STOPPED)


def notice_effect(job_name: str, rule: str, code: str) -> str:
    """The name of a compliance notice (a violation whose action is to tell) told in one message with a stop
    (``stop_effect``) whose telling failed outside a delivery: owed with it (``ComplianceNotices``), and told and
    recorded by whoever tells that stop (the job's ``Stopped`` event)."""
    return f"{_NOTICED}{job_name}|{rule}|{code}"


def stop_noted(stop: Callable[[], StopOutcome], *effects: str) -> StopOutcome:
    """Make a stop (``stop``: StopTrainingJob) and note its ``effects`` (``stop_effect``: one per decision that
    stops) when SageMaker accepted it (the adapter's ``STOPPED``, which includes a retried call whose earlier
    attempt may have made the job stopping), or when the call failed (any ``AdapterError``) other than by a refusal
    after no attempt that may have been applied (``StopRefused``, ``StopDenied``: not applied). botocore retries a
    call answered 5xx or not at all, and the error raised is the last attempt's: a stop applied by its first
    attempt, answered 5xx, whose retries were then throttled, raises a refusal. A retry of the delivery that finds
    the job stopping must take that stop for this delivery's own, not for an earlier end; a noted stop that was not
    applied is not taken for made, since ``stopped_earlier`` also needs the job ``Stopping`` or ``Stopped``. A stop
    answered "already ended" notes nothing: that job was stopping (or ended) before this delivery."""
    try:
        outcome = stop()
    except StopRefused:
        raise
    except AdapterError:
        for effect in effects:
            note(effect)
        raise
    if outcome is StopOutcome.STOPPED:
        for effect in effects:
            note(effect)
    return outcome


# The statuses of a job a stop was applied to (``Stopped`` once it ended): an earlier attempt's stop is this
# delivery's only when the job shows it; a job still running, or that completed or failed on its own, was not
# stopped by it (its StopTrainingJob had no answer and was not applied).
STOPPED_STATUSES = frozenset({"Stopping", "Stopped"})


def stopped_earlier(job_name: str, rule: str, status: str | None) -> str | None:
    """The code of the stop of ``job_name`` for ``rule`` that an earlier attempt of the current delivery made
    (``stop_noted``), which then failed (its record, its message, or the stop's own answer lost), when the job's
    current ``status`` (read by this attempt) shows a stop (``STOPPED_STATUSES``); None: none, the job not
    stopping (the noted stop was not applied), or outside a delivery. Its retry records and tells that stop as
    done."""
    if status not in STOPPED_STATUSES:
        return None
    effect = done_before(stop_effect(job_name, rule))
    return None if effect is None else effect.removeprefix(stop_effect(job_name, rule))


def mark_effect(job_name: str, tag: str) -> str:
    """The effect name of a mark this delivery put on the job (``tag``, e.g. ``smgov:compliance-evaluated``). A
    retry of the delivery finds the job marked by its own failed attempt, not by another delivery or the
    reconciler: compliance evaluates it again (the policy may have switched to enforce since:
    ``ComplianceService``)."""
    return f"marked|{job_name}|{tag}"


# The outcomes that say the action happened (or was found done): only their records settle it. Every other one
# (failed, skipped, audit-only, exempted, deferred, no-action) says it was not carried out: a retry may carry it
# out (the attempt raised; the policy may have switched from audit to enforce meanwhile).
SETTLED = frozenset({Outcome.DONE, Outcome.ALREADY_DONE})
# A notification's outcomes that report the action done (or the job found ended): the twin of ``SETTLED``.
NOTICE_SETTLED = frozenset(
    {NotificationOutcome.STOPPED, NotificationOutcome.RESUMED, NotificationOutcome.ALREADY_ENDED}
)


def audit_effect(job_name: str, rule: str, action: str, outcome: Outcome | None = None) -> str:
    """The effect name of an audit record in a delivery's ``done`` list: (job, rule, action) for a record
    that settles the action (``SETTLED``, or with no ``outcome`` given); that and the outcome for any other
    (it hides only a record of the same outcome)."""
    settled = f"audit|{job_name}|{rule}|{action}"
    return settled if outcome is None or outcome in SETTLED else f"{settled}|{outcome.value}"


_NOTIFIED = "notify|"  # the prefix of every notification's effect name


def notify_effect(kind: str, job_name: str, outcome: NotificationOutcome | None = None) -> str:
    """The effect name of a notification, as ``audit_effect``'s: (kind, job) for one that reports the action
    done (``NOTICE_SETTLED``, or with no ``outcome`` given); that and the outcome for any other ("would be
    resumed" hides only itself, never the retry's "was resumed")."""
    settled = f"{_NOTIFIED}{kind}|{job_name}"
    return settled if outcome is None or outcome in NOTICE_SETTLED else f"{settled}|{outcome.value}"


class OnceAuditSink:
    """Writes each audit record of a delivery once: a retry does not record the same action twice, and a
    failed attempt's record of an action not carried out (``failed``, ``skipped``, ``audit-only``, ...) does
    not hide what its retry did."""

    def __init__(self, inner: AuditSink) -> None:
        self._inner = inner

    def write(self, record: AuditRecord) -> None:
        once(
            audit_effect(record.job_name, record.rule, record.action, record.outcome),
            lambda: self._inner.write(record),
            unless=audit_effect(record.job_name, record.rule, record.action),
        )


class OnceNotifier:
    """Publishes each notification of a delivery once: an owner is not told twice, and a failed attempt's
    "would be" message does not hide the retry's "was"."""

    def __init__(self, inner: NotifierPort) -> None:
        self._inner = inner

    def publish(self, message: Notification) -> str | None:
        sent: list[str | None] = []
        kind = f"{message.kind}:{message.subject}" if message.subject else message.kind  # one per guard, say
        once(
            notify_effect(kind, message.job_name, message.outcome),
            lambda: sent.append(self._inner.publish(message)),
            unless=notify_effect(kind, message.job_name),
        )
        return sent[0] if sent else None


# A clone's notice: "told" and "counted" belong to the clone, not to the delivery that met it. The clone may be
# made by an event's delivery or by the reconciler's deferred resume (outside any delivery), and either may fail
# after making it (a throttled Publish) and be retried by the other.
CLONE_NOTICE_OWNER = (
    "clone-notice"  # one owner for every teller: a dead teller's claim is taken over after the hold
)
# Every ledger notice's hold (a clone's, an ignored declaration's: ``_LedgerNotices``), longer than either
# function's timeout (300 s). A record whose attempt left this claim held (``hold_left``) comes
# back after the held visibility derived from it (handlers/_batch.py: 960 s from the attempt's end), or when that
# call failed after the queues' VisibilityTimeout (1,800 s) from the receive (tests/infrastructure checks both).
NOTICE_HOLD_SECONDS = 900.0
# The item must outlive the reconciler's look-back for deferred resumes (the longest backoff, at most a day, plus
# three runs, each at most a day apart): the composition root gives the notices' ledger this TTL at least.
CLONE_NOTICE_TTL_SECONDS = 7 * 24 * 3600


def clone_notice_key(clone: str) -> str:
    return f"resume:{clone}"


# A job's ignored tolerance declaration (domain/tolerance.py): told once per job, guard and declared value, whoever
# creates the guard's alarms (the job's Training event, a copy of it, or the reconciler's repair before it).
TOLERANCE_NOTICE_OWNER = "tolerance-notice"


def tolerance_notice_key(job_name: str, guard_section: str, value: str) -> str:
    """Job names hold no ":"; the value, last, may."""
    return f"tolerance:{job_name}:{guard_section}:{value}"


# A guard's notice of a stretch (the minimum-utilization guard's): told once per state change of its notice alarm,
# and what a stop of that stretch needs first, its owner told (``GuardStopper``: a stop without it becomes a notice).
GUARD_NOTICE_OWNER = "guard-notice"


def guard_notice_key(alarm: str, changed_at: datetime) -> str:
    """A notice alarm's state change (its notification's ``StateChangeTime``, ``DescribeAlarms``'
    ``StateTransitionedTimestamp``: the same instant), to the second. Alarm names hold no spaces; the time, last,
    holds ``:``."""
    return f"guard-notice:{alarm} {changed_at.astimezone(UTC).replace(microsecond=0).isoformat()}"


class NoticePending(RuntimeError):
    """A notice's key is held by a teller that has not finished: the delivery comes back after the hold."""


class _LedgerNotices:
    """Tell an owner once per subject, whoever tells: a claim of the subject's key in the delivery ledger (one
    conditional ``UpdateItem``, one ``owner`` for every teller, held ``NOTICE_HOLD_SECONDS``), marked
    completed once told, released when telling failed (the next to meet the subject tells). Only a subject to
    tell costs these writes (two): a healthy job never has one.

    When telling failed and the release failed too, the key may stay held for the hold, and a retry within it
    would find the owner "told already" and complete, the owner never told: the error is marked unreleased
    (``hold_left``), so the delivery's record comes back after the held visibility (``handlers/_batch.py``),
    past the hold, and its retry tells. A claim refused while another teller's claim is unfinished (``pending``:
    a concurrent teller, or an attempt of this delivery that died between its claim and its Publish) is not
    "told" either: within a delivery it fails the same way (``NoticePending``), and the retry finds the key
    completed (told) or free to take; outside one (the reconciler) it is left to that teller and its
    delivery's retries. A claim that raises (its outcome unknown) is the subject's call (``_unclaimed``)."""

    OWNER: ClassVar[str]

    def __init__(self, ledger: LedgerPort, clock: Callable[[], datetime]) -> None:
        self._ledger = ledger
        self._clock = clock

    def _once(self, key: str, tell: Callable[[], object], *, owed: Sequence[str] = ()) -> bool:
        """Run ``tell`` unless the owner was told (or is being told) of ``key``; True if it ran. A telling that
        fails releases the key with ``owed`` (and what an earlier failed teller left owed): what it was to tell,
        for a later teller that does not know it (``ComplianceNotices``)."""
        now = self._clock()
        try:
            claim = self._ledger.claim(key, self.OWNER, now, NOTICE_HOLD_SECONDS)
        except Exception as exc:  # of unknown outcome: DynamoDB may have applied it, its answer lost
            return self._unclaimed(key, exc, tell)
        if not self._granted(key, claim):
            return False
        return self._tell(key, claim, now, tell, sorted({*claim.done, *owed}))

    def _granted(self, key: str, claim: Claim) -> bool:
        """Whether ``claim`` is granted; a claim refused while another teller holds the key raises within a
        delivery."""
        if not claim.granted:
            if claim.pending and _current.get() is not None:
                # Another teller holds the key and may still fail (its Publish throttled, its process killed
                # before it told): "told already" could be never. Within a delivery, come back after the hold
                # and claim again (completed by then: told; released or taken over: ours to tell).
                logger.info("owner being told by another: back after the hold", notice=key)
                raise hold_left(NoticePending(f"{key} is held by a teller that has not finished"))
            logger.info("owner told already", notice=key)
            return False
        return True

    def _tell(
        self, key: str, claim: Claim, now: datetime, tell: Callable[[], object], owed: Sequence[str]
    ) -> bool:
        """Run ``tell`` under the granted ``claim``: completed when it told, released with ``owed`` when not."""
        try:
            tell()
        except Exception as exc:
            try:
                self._ledger.release(key, self.OWNER, now, owed)
            except Exception:  # the claim stays: taken over once its hold is over
                logger.exception("notice not released", notice=key)
                hold_left(exc)  # the delivery's record must come back after the hold, not "told already"
            raise
        if claim.token is not None:
            try:
                self._ledger.complete(key, claim.token, self._clock())
            except Exception:  # told: at worst told again once the hold is over
                logger.exception("notice not marked completed", notice=key)
        return True

    def _unclaimed(self, key: str, exc: Exception, tell: Callable[[], object]) -> bool:
        """The claim raised: fail, its delivery marked as one that may have left the key held (``hold_left``)."""
        hold_left(exc)
        raise exc


class CloneNotices(_LedgerNotices):
    """Tell a clone's owner (and count the clone) once, whoever made it: the key ``resume:<clone>``
    (``_LedgerNotices``). A claim that raised fails the delivery, marked unreleased: its retry, past the hold,
    tells (the owner of a clone must learn of it)."""

    OWNER = CLONE_NOTICE_OWNER

    def once(self, clone: str, tell: Callable[[], None]) -> bool:
        """Run ``tell`` unless the clone's owner was told (or is being told); True if it ran."""
        return self._once(clone_notice_key(clone), tell)

    def once_spent(self, clone: str, tell: Callable[[], None]) -> bool:
        """Run ``tell``, the message that a Spot job stays on Spot because ``clone``, its next move's name, exists
        failed or stopped (its fallback spent), unless it was told (or is being told): once per clone (the key
        ``spent:<clone>``), not at every later interruption, each its own delivery; True if it ran."""
        return self._once(f"spent:{clone}", tell)

    def told(self, clone: str) -> bool:
        """Whether the clone's owner was told (or is being told): the reconciler's check before it hands a
        due job whose clone exists to auto-resume again. A claim it is granted is released at once (two
        writes, for an untold clone only)."""
        key, now = clone_notice_key(clone), self._clock()
        claim = self._ledger.claim(key, self.OWNER, now, 0.0)
        if not claim.granted:
            return True
        self._ledger.release(key, self.OWNER, now, ())
        return False


# A compliance stop's notice: told once, whoever tells (the delivery that stopped the job, the reconciler's repair
# that did, or the job's Stopped event when the telling failed where nothing retries it).
COMPLIANCE_NOTICE_OWNER = "compliance-notice"


def compliance_notice_key(job_name: str) -> str:
    return f"compliance:{job_name}"


class ComplianceNotices(_LedgerNotices):
    """Tell a job's owner once that compliance stopped it when the stop was made outside any delivery: the
    reconciler's repair of a job that lacked its evaluation, which nothing retries (the job, stopping, is no
    longer listed in progress). The key ``compliance:<job>`` (``_LedgerNotices``); a telling that fails releases
    it with the stop's effects (``stop_effect``: rule and code), and the job's ``Stopped`` event tells what they
    owe (``tell_owed``); a claim that raised tells anyway (``_unclaimed``). A stop made by a delivery (the job's Starting event) is told by that delivery and its
    retries (``OnceNotifier``, ``stopped_earlier``): no key, no write."""

    OWNER = COMPLIANCE_NOTICE_OWNER

    def once(self, job_name: str, stops: Sequence[str], tell: Callable[[], object]) -> bool:
        """Run ``tell``, the owner's message that the job was stopped for ``stops`` (``stop_effect`` names, and
        the message's notices: ``notice_effect``), unless they were told (or are being told); True if it ran.
        Within a delivery it runs as it is."""
        if _current.get() is not None:
            tell()
            return True
        return self._once(compliance_notice_key(job_name), tell, owed=stops)

    def tell_owed(self, job_name: str, tell: Callable[[tuple[str, ...]], object]) -> bool:
        """Run ``tell`` with the stops an earlier teller failed to tell (``stop_effect`` names) and the notices of
        the same message (``notice_effect``), if a stop is owed and not told since; True if it ran. A key never claimed (a job compliance did not stop) costs a claim and its
        release."""
        key, now = compliance_notice_key(job_name), self._clock()
        claim = self._ledger.claim(key, self.OWNER, now, NOTICE_HOLD_SECONDS)
        if not self._granted(key, claim):
            return False
        owed = tuple(sorted(effect for effect in claim.done if effect.startswith((_STOPPED, _NOTICED))))
        if not any(effect.startswith(_STOPPED) for effect in owed):
            try:
                self._ledger.release(key, self.OWNER, now, sorted(claim.done))
            except Exception:  # nothing to tell: the key is taken over once its hold is over
                logger.exception("notice not released", notice=key)
            return False
        return self._tell(key, claim, now, lambda: tell(owed), owed)

    def _unclaimed(self, key: str, exc: Exception, tell: Callable[[], object]) -> bool:
        """Outside a delivery (the reconciler's stop, which nothing retries) a claim that raised tells anyway,
        logged: skipped, the stop would be owed to nobody (the key holds no effects for the job's ``Stopped``
        event) and its owner never told; told, at worst a teller whose claim's answer was lost meets the key
        held and tells nothing more. A telling that then fails is the run's error, as a failed Publish is."""
        if _current.get() is not None:
            return super()._unclaimed(key, exc, tell)
        logger.warning("compliance notice not claimed: told anyway", notice=key, error=str(exc)[:300])
        tell()
        return True


class GuardNotices(_LedgerNotices):
    """Tell a job's owner once of a guard's notice alarm's state change (``guard-notice:<alarm> <time>``,
    ``_LedgerNotices``), and answer whether they were told of it: the minimum-utilization guard stops a job only
    after its owner was sent the notice of the stretch the stop ends (a notice only recorded, in audit mode or
    with the guard off, is no notice). A claim that raised fails the delivery, marked unreleased (retried past
    the hold: the owner is told, or the stop judged, then)."""

    OWNER = GUARD_NOTICE_OWNER

    def once(self, alarm: str, changed_at: datetime, tell: Callable[[], object]) -> bool:
        """Run ``tell`` unless the owner was told (or is being told) of this state change; True if it ran."""
        return self._once(guard_notice_key(alarm, changed_at), tell)

    def told(self, alarm: str, changed_at: datetime) -> bool:
        """Whether the owner was told (or is being told) of this state change of ``alarm``: a claim refused. A
        claim granted is released at once (two writes, made only before a stop)."""
        key, now = guard_notice_key(alarm, changed_at), self._clock()
        claim = self._ledger.claim(key, self.OWNER, now, 0.0)
        if not claim.granted:
            return True
        self._ledger.release(key, self.OWNER, now, ())
        return False


class ToleranceNotices(_LedgerNotices):
    """Tell a job's owner once that its declared window for a guard was ignored (``GuardAlarms``), whoever
    creates the guard's alarms first: the key ``tolerance:<job>:<guard>:<value>`` (``_LedgerNotices``). A
    declaration is told at the job's first entry into ``Training`` only; the key keeps the reconciler's repair
    and a late or repeated Training event of that stint from telling it again. A claim that raised
    (throttled, denied) tells anyway, logged: a warning told twice does no harm, one never told leaves the owner
    puzzled by the team's window."""

    OWNER = TOLERANCE_NOTICE_OWNER

    def once(self, job_name: str, guard_section: str, value: str, tell: Callable[[], object]) -> bool:
        """Run ``tell`` unless the owner was told (or is being told) of this declaration; True if it ran."""
        return self._once(tolerance_notice_key(job_name, guard_section, value), tell)

    def _unclaimed(self, key: str, exc: Exception, tell: Callable[[], object]) -> bool:
        logger.warning("tolerance notice not claimed: told anyway", notice=key, error=str(exc)[:300])
        try:
            tell()
        except Exception as failed:  # the claim may hold the key: the delivery's retry must come after the hold
            hold_left(failed)
            raise
        return True
