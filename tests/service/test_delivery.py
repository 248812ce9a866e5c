"""The delivery pipeline (service/idempotency.py): claim, process, release; each effect once per delivery."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import AuditRecord, MemoryAuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError, ClaimHeld
from sagemaker_governance.domain.notifications import Notification, NotificationKind, NotificationOutcome
from sagemaker_governance.service.idempotency import (
    Duplicate,
    OnceAuditSink,
    OnceNotifier,
    deliver,
    delivery_batch,
)
from tests.builders import job

KEY = "job:job-1:InProgress:Starting:1:-"


def record(action: str = "stop", outcome: Outcome = Outcome.DONE, mode: Mode = Mode.ENFORCE) -> AuditRecord:
    decision = Decision(
        rule="required-tags",
        code="compliance.stop.violation",
        action=Action(action),
        mode=mode,
        reason="r",
    )
    return AuditRecord.of(
        decision,
        job=job(),
        outcome=outcome,
        at=datetime(2026, 11, 21),
        trigger="job-state-change",
        event_id="e-1",
        team_tag="team",
        owner_tag="owner",
        policy_digest=None,
    )


def test_a_claimed_delivery_is_processed_once(ledger: Any, calls: Any, now: datetime) -> None:
    # Given a first delivery that processes
    first = deliver(ledger, KEY, lambda: calls("process") or "result", owner="m-1", now=now, hold_seconds=60)
    # When the same state change arrives in another message
    again = deliver(ledger, KEY, lambda: calls("process") or "result", owner="m-2", now=now, hold_seconds=60)
    # Then the claim came before the processing, and the duplicate was not processed
    assert first == "result" and again == Duplicate(KEY)
    assert calls.log == ["claim m-1", "process", "claim m-2"]


def test_a_failed_attempt_releases_with_its_done_effects_and_the_retry_skips_them(
    ledger: Any, calls: Any, now: datetime
) -> None:
    # Given an attempt that wrote its audit record, then failed while notifying
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)

    def attempt(fail: bool) -> str:
        audit.write(record())
        if fail:
            raise RuntimeError("notify failed")
        calls("notified")
        return "ok"

    with pytest.raises(RuntimeError):
        deliver(ledger, KEY, lambda: attempt(True), owner="m-1", now=now, hold_seconds=60)
    # When its retry runs (same message)
    result = deliver(ledger, KEY, lambda: attempt(False), owner="m-1", now=now, hold_seconds=60)
    # Then the release carried the written record, which the retry did not write again
    assert result == "ok"
    assert calls.log == [
        "claim m-1",
        "release m-1 ['audit|job-1|required-tags|stop']",
        "claim m-1",
        "notified",
    ]
    assert len(sink.records) == 1


def test_a_claim_still_held_by_its_owner_fails_its_early_retry_and_is_taken_over_after_its_time(
    ledger: Any, now: datetime
) -> None:
    # Given a claim whose invocation died, or raised and could not release it (nothing released it)
    ledger.claim(KEY, "m-1", now, 60)
    # When the same message comes back before the invocation's time is over
    # Then it is failed for a later retry, not answered as a duplicate (its record would be deleted)
    with pytest.raises(ClaimHeld):
        deliver(ledger, KEY, lambda: "processed", owner="m-1", now=now + timedelta(seconds=30), hold_seconds=60)
    # and when it comes back after, it takes the claim over
    late = deliver(ledger, KEY, lambda: "processed", owner="m-1", now=now + timedelta(seconds=61), hold_seconds=60)
    assert late == "processed"
    # while another message's copy of the same state change, within the hold or after it, is a duplicate
    assert deliver(
        ledger, KEY, lambda: "again", owner="m-2", now=now + timedelta(seconds=62), hold_seconds=60
    ) == (Duplicate(KEY))


def test_a_failed_attempt_whose_release_failed_is_processed_by_a_retry_after_its_hold_once(
    ledger: Any, calls: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an attempt that raised and whose release failed too (the ledger throttled): its claim stays held
    def throttled(*_: Any) -> None:
        raise AdapterError("throttled")

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "release", throttled)
        with pytest.raises(AdapterError):
            deliver(ledger, KEY, throttled, owner="m-1", now=now, hold_seconds=295)

    # When its retries come 60 s and 360 s later (the retry ladder)
    def process() -> None:
        calls("process")

    with pytest.raises(ClaimHeld):
        deliver(ledger, KEY, process, owner="m-1", now=now + timedelta(seconds=60), hold_seconds=295)
    deliver(ledger, KEY, process, owner="m-1", now=now + timedelta(seconds=360), hold_seconds=295)
    # Then the event is processed once, by the retry after the hold
    assert calls.log.count("process") == 1


def test_the_same_effect_twice_in_one_delivery_happens_once(ledger: Any, now: datetime) -> None:
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)

    def process() -> None:
        audit.write(record())
        audit.write(record())
        audit.write(record("none"))

    deliver(ledger, KEY, process, owner="m-1", now=now, hold_seconds=60)
    assert [r.action for r in sink.records] == ["stop", "none"]


def test_a_failed_attempts_failure_records_do_not_hide_what_its_retry_did(ledger: Any, now: datetime) -> None:
    # Given an attempt that records its clone failed and the stop it therefore skipped, then raises
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)

    def failing() -> None:
        audit.write(record("clone", Outcome.FAILED))
        audit.write(record("stop", Outcome.SKIPPED))
        raise RuntimeError("CreateTrainingJob throttled")

    def succeeding() -> None:
        audit.write(record("clone", Outcome.DONE))
        audit.write(record("stop", Outcome.DONE))

    with pytest.raises(RuntimeError):
        deliver(ledger, KEY, failing, owner="m-1", now=now, hold_seconds=60)
    # When its retry clones and stops
    deliver(ledger, KEY, succeeding, owner="m-1", now=now, hold_seconds=60)
    # Then both of the retry's records are written after the failure records
    assert [(r.action, r.outcome) for r in sink.records] == [
        ("clone", Outcome.FAILED),
        ("stop", Outcome.SKIPPED),
        ("clone", Outcome.DONE),
        ("stop", Outcome.DONE),
    ]


def test_a_failure_repeated_is_recorded_once_and_nothing_after_the_action_is_done(
    ledger: Any, now: datetime
) -> None:
    # Given attempts that each record the clone failed, then one that records it done and fails later on
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)

    def attempt(outcome: Outcome, *, fail: bool) -> Callable[[], None]:
        def process() -> None:
            audit.write(record("clone", outcome))
            if fail:
                raise RuntimeError("failed")

        return process

    for outcome in (Outcome.FAILED, Outcome.FAILED, Outcome.DONE):
        with pytest.raises(RuntimeError):
            deliver(ledger, KEY, attempt(outcome, fail=True), owner="m-1", now=now, hold_seconds=60)
    # When the next retry finds the clone there
    deliver(ledger, KEY, attempt(Outcome.ALREADY_DONE, fail=False), owner="m-1", now=now, hold_seconds=60)
    # Then the repeated failure is recorded once, and once done the action is recorded no more
    assert [r.outcome for r in sink.records] == [Outcome.FAILED, Outcome.DONE]


@pytest.mark.parametrize(
    ("outcome", "mode"),
    [
        (Outcome.AUDIT_ONLY, Mode.AUDIT),
        (Outcome.EXEMPTED, Mode.ENFORCE),
        (Outcome.DEFERRED, Mode.ENFORCE),
        (Outcome.NO_ACTION, Mode.ENFORCE),
    ],
)
def test_a_failed_attempts_record_of_an_action_not_carried_out_does_not_hide_its_retrys_action(
    ledger: Any, now: datetime, outcome: Outcome, mode: Mode
) -> None:
    # Given an attempt that records the clone and the stop not carried out (audit mode, an exemption, a
    # quota's deferral), then fails later in the delivery
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)

    def not_carried_out() -> None:
        audit.write(record("clone", outcome, mode))
        audit.write(record("stop", outcome, mode))
        raise RuntimeError("SNS Publish failed")

    def carried_out() -> None:
        audit.write(record("clone", Outcome.DONE))
        audit.write(record("stop", Outcome.DONE))

    with pytest.raises(RuntimeError):
        deliver(ledger, KEY, not_carried_out, owner="m-1", now=now, hold_seconds=60)
    with pytest.raises(RuntimeError):  # and its retry, the same way
        deliver(ledger, KEY, not_carried_out, owner="m-1", now=now, hold_seconds=60)
    # When a later retry (the policy switched to enforce meanwhile) clones and stops
    deliver(ledger, KEY, carried_out, owner="m-1", now=now, hold_seconds=60)
    # Then the records of the action not carried out are written once, and the retry's records after them
    assert [(r.action, r.outcome) for r in sink.records] == [
        ("clone", outcome),
        ("stop", outcome),
        ("clone", Outcome.DONE),
        ("stop", Outcome.DONE),
    ]


class Published:
    def __init__(self) -> None:
        self.messages: list[Notification] = []

    def publish(self, message: Notification) -> str | None:
        self.messages.append(message)
        return f"sns-{len(self.messages)}"


def resumed(outcome: NotificationOutcome) -> Notification:
    return Notification(
        kind=NotificationKind.RESUME, job_name="job-1", headline="h", outcome=outcome, related_job="job-1-r1"
    )


def test_a_notification_that_the_action_was_done_is_not_hidden_by_one_that_said_it_would_be(
    ledger: Any, now: datetime
) -> None:
    # Given an attempt that tells the owner the job would be resumed (audit mode), then fails
    sns = Published()
    notifier = OnceNotifier(sns)

    def attempt(outcome: NotificationOutcome, *, fail: bool) -> Callable[[], None]:
        def process() -> None:
            notifier.publish(resumed(outcome))
            if fail:
                raise RuntimeError("DeleteAlarms failed")

        return process

    for _ in range(2):  # and its retry, the same way
        with pytest.raises(RuntimeError):
            deliver(
                ledger,
                KEY,
                attempt(NotificationOutcome.WOULD_RESUME, fail=True),
                owner="m-1",
                now=now,
                hold_seconds=60,
            )
    # When a retry (the policy switched to enforce) resumes the job, fails later, and the next retry finds it done
    with pytest.raises(RuntimeError):
        deliver(
            ledger, KEY, attempt(NotificationOutcome.RESUMED, fail=True), owner="m-1", now=now, hold_seconds=60
        )
    deliver(ledger, KEY, attempt(NotificationOutcome.RESUMED, fail=False), owner="m-1", now=now, hold_seconds=60)
    deliver(
        ledger, "k-2", attempt(NotificationOutcome.WOULD_RESUME, fail=False), owner="m-2", now=now, hold_seconds=60
    )
    # Then the owner is told it would be resumed once and that it was resumed once; nothing hides a later
    # delivery's message
    assert [m.outcome for m in sns.messages] == [
        NotificationOutcome.WOULD_RESUME,
        NotificationOutcome.RESUMED,
        NotificationOutcome.WOULD_RESUME,
    ]


def test_once_the_owner_is_told_the_action_was_done_a_would_be_message_of_the_delivery_is_not_sent(
    ledger: Any, now: datetime
) -> None:
    sns = Published()
    notifier = OnceNotifier(sns)

    def process() -> None:
        notifier.publish(resumed(NotificationOutcome.RESUMED))
        notifier.publish(resumed(NotificationOutcome.WOULD_RESUME))

    deliver(ledger, KEY, process, owner="m-1", now=now, hold_seconds=60)
    assert [m.outcome for m in sns.messages] == [NotificationOutcome.RESUMED]


def test_in_a_batch_a_completed_delivery_is_marked_before_the_next_is_claimed(
    ledger: Any, calls: Any, now: datetime
) -> None:
    # Given an invocation's batch of three deliveries, the second of which fails
    def process(name: str, *, fail: bool = False) -> Callable[[], str]:
        def run() -> str:
            calls(f"process {name}")
            if fail:
                raise RuntimeError(name)
            return name

        return run

    with delivery_batch():
        deliver(ledger, "k-1", process("m-1"), owner="m-1", now=now, hold_seconds=60)
        with pytest.raises(RuntimeError):
            deliver(ledger, "k-2", process("m-2", fail=True), owner="m-2", now=now, hold_seconds=60)
        deliver(ledger, "k-3", process("m-3"), owner="m-3", now=now, hold_seconds=60)
    # Then the first is marked completed before the invocation goes on; the failed one is released, not
    # marked; the last is left unmarked (only the answer follows it)
    assert calls.log == [
        "claim m-1",
        "process m-1",
        "complete m-1",
        "claim m-2",
        "process m-2",
        "release m-2 []",
        "claim m-3",
        "process m-3",
    ]
    # And the first one's record, back with the batch after the invocation's time, is a duplicate
    later = now + timedelta(minutes=30)
    assert deliver(ledger, "k-1", process("m-1"), owner="m-1", now=later, hold_seconds=60) == Duplicate("k-1")


def test_a_single_delivery_costs_no_mark(ledger: Any, calls: Any, now: datetime) -> None:
    deliver(ledger, KEY, lambda: "ok", owner="m-1", now=now, hold_seconds=60)
    with delivery_batch():
        deliver(ledger, "k-2", lambda: "ok", owner="m-2", now=now, hold_seconds=60)
    assert calls.log == ["claim m-1", "claim m-2"]


def test_a_mark_that_fails_does_not_fail_the_next_delivery(ledger: Any, calls: Any, now: datetime) -> None:
    # Given a ledger whose completion mark fails
    def broken(key: str, token: str, now: datetime) -> None:
        raise RuntimeError("DynamoDB unavailable")

    ledger.complete = broken
    # When the invocation goes on to its second delivery
    with delivery_batch():
        deliver(ledger, "k-1", lambda: "ok", owner="m-1", now=now, hold_seconds=60)
        second = deliver(ledger, "k-2", lambda: "second", owner="m-2", now=now, hold_seconds=60)
    # Then the second is processed (the first is only left unmarked, as a last record is)
    assert second == "second"


def test_without_a_ledger_every_delivery_is_processed_and_every_effect_written(now: datetime) -> None:
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)
    for _ in range(2):
        deliver(None, KEY, lambda: audit.write(record()), owner="m-1", now=now, hold_seconds=60)
    assert len(sink.records) == 2
