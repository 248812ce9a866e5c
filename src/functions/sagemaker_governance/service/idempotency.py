"""Exactly-once effects under duplicate deliveries and retries after a crash.

A *delivery key* names the state change an invocation handles, not the event: SageMaker sends several
events for one state change (and EventBridge, SNS and Lambda may each deliver one twice), and they all
carry the same job, status, secondary status and secondary-status transition. While a delivery is
processed its key is the current one (``delivering``); the audit sink and the notifier are wrapped so
that each audit record (job, rule, action) and each notification (kind, job) of that delivery happens
once, even when a retry re-runs the delivery after a crash between acting and recording.

The actions themselves are idempotent by construction (a stop re-reads the job and counts a job that is
already stopping as done; a clone has a deterministic name), so a retry reaches the same end state and
records the action once, with the outcome it finds (``already-done`` when the first attempt acted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, TypeVar

from sagemaker_governance.audit import AuditRecord, AuditSink
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.events import AlarmNotification
from sagemaker_governance.service.ports import NotifierPort

R = TypeVar("R")
_current: ContextVar[str | None] = ContextVar("smgov_delivery", default=None)


class LedgerPort(Protocol):
    def deliver(self, key: str, process: Callable[[], R]) -> R: ...

    def once(self, key: str, effect: Callable[[], None]) -> None: ...


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
    return _current.get()


@contextmanager
def delivering(key: str) -> Iterator[None]:
    token = _current.set(key)
    try:
        yield
    finally:
        _current.reset(token)


def deliver(ledger: LedgerPort | None, key: str, process: Callable[[], R]) -> R:
    """Run ``process`` for this delivery once (without a ledger: every time, as before)."""
    if ledger is None:
        return process()
    with delivering(key):
        return ledger.deliver(key, process)


class OnceAuditSink:
    """Writes each audit record of a delivery once: a retry does not record the same action twice."""

    def __init__(self, inner: AuditSink, ledger: LedgerPort) -> None:
        self._inner = inner
        self._ledger = ledger

    def write(self, record: AuditRecord) -> None:
        delivery = _current.get()
        if delivery is None:
            self._inner.write(record)
            return
        key = f"{delivery}|audit|{record.job_name}|{record.rule}|{record.action}"
        self._ledger.once(key, lambda: self._inner.write(record))


class OnceNotifier:
    """Publishes each notification of a delivery once: an owner is not told twice."""

    def __init__(self, inner: NotifierPort, ledger: LedgerPort) -> None:
        self._inner = inner
        self._ledger = ledger

    def publish(self, message: Notification) -> str | None:
        delivery = _current.get()
        if delivery is None:
            return self._inner.publish(message)
        sent: list[str | None] = []
        key = f"{delivery}|notify|{message.kind}|{message.job_name}"
        self._ledger.once(key, lambda: sent.append(self._inner.publish(message)))
        return sent[0] if sent else None
