"""The delivery pipeline (service/idempotency.py): claim, process, release; each effect once per delivery."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import AuditRecord, MemoryAuditSink, Outcome
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.notifications import (
    Notification,
    NotificationItem,
    NotificationKind,
    NotificationOutcome,
)
from sagemaker_governance.domain.redelivery import held_visibility
from sagemaker_governance.service.idempotency import (
    NOTICE_HOLD_SECONDS,
    CloneNotices,
    ComplianceNotices,
    Duplicate,
    OnceAuditSink,
    OnceNotifier,
    deliver,
    delivery_batch,
    mark_unreleased,
    stop_effect,
    unreleased,
)
from tests.builders import job

KEY = "job:job-1:InProgress:Starting:1:-"
QUEUE_TIMEOUT = 1800  # template.yaml: both queues' VisibilityTimeout
# The visibility a record whose error is marked unreleased is given (handlers/_batch.py), from its attempt's end
HELD = held_visibility(NOTICE_HOLD_SECONDS)


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


def test_a_claim_held_by_its_own_owner_is_a_duplicate_until_its_time_is_over(ledger: Any, now: datetime) -> None:
    # Given a claim whose delivery completed, or whose invocation died (nothing marked or released it)
    ledger.claim(KEY, "m-1", now, 60)
    # When the same message comes back (SQS's second copy, a double redrive) before, then after, its time
    early = deliver(
        ledger, KEY, lambda: "processed", owner="m-1", now=now + timedelta(seconds=30), hold_seconds=60
    )
    late = deliver(ledger, KEY, lambda: "processed", owner="m-1", now=now + timedelta(seconds=61), hold_seconds=60)
    # Then the early one is a duplicate (whoever holds the claim) and only the late one takes it over
    assert early == Duplicate(KEY) and late == "processed"
    # while another message's copy of the same state change, within the hold or after it, is a duplicate
    assert deliver(
        ledger, KEY, lambda: "again", owner="m-2", now=now + timedelta(seconds=62), hold_seconds=60
    ) == (Duplicate(KEY))


def test_a_failed_attempt_is_marked_unreleased_only_when_its_release_failed(
    ledger: Any, calls: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails() -> None:
        raise AdapterError("PutMetricAlarm throttled")

    # Given an attempt that raised and released its claim: its error is not marked
    with pytest.raises(AdapterError) as released:
        deliver(ledger, KEY, fails, owner="m-1", now=now, hold_seconds=295)
    assert not unreleased(released.value)

    # Given another whose release failed too (the ledger throttled): its error is marked, the claim stays held
    def throttled(*_: Any) -> None:
        raise AdapterError("UpdateItem throttled")

    other = "job:job-2:InProgress:Starting:1:-"
    with monkeypatch.context() as patch:
        patch.setattr(ledger, "release", throttled)
        with pytest.raises(AdapterError) as kept:
            deliver(ledger, other, fails, owner="m-2", now=now, hold_seconds=295)
    assert unreleased(kept.value) and str(kept.value) == "PutMetricAlarm throttled"

    # When its record comes back after the held visibility, past the hold
    def process() -> None:
        calls("process")

    deliver(ledger, other, process, owner="m-2", now=now + timedelta(seconds=HELD), hold_seconds=295)
    # Then the retry takes the claim over and the event is processed once
    assert calls.log.count("process") == 1


def test_a_claim_that_raised_fails_the_delivery_marked_unreleased(
    ledger: Any, calls: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a claim DynamoDB applied but whose answer never came back: botocore's retries failed too, and the
    # ledger raised (a raised claim's outcome is unknown: it may hold the key for the invocation's time)
    claim = ledger.claim

    def applied_unanswered(key: str, owner: str, at: datetime, hold_seconds: float) -> Any:
        claim(key, owner, at, hold_seconds)
        raise AdapterError("UpdateItem: read timeout")

    def process() -> None:
        calls("process")

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "claim", applied_unanswered)
        with pytest.raises(AdapterError) as failed:
            deliver(ledger, KEY, process, owner="m-1", now=now, hold_seconds=295)
    # Then nothing was processed and the error goes back marked unreleased (its record is given the held
    # visibility): a retry within the hold would meet that claim and be a duplicate of itself
    assert "process" not in calls.log
    assert unreleased(failed.value)
    early = now + timedelta(seconds=60)
    assert deliver(ledger, KEY, process, owner="m-1", now=early, hold_seconds=295) == Duplicate(KEY)
    # When the record comes back after the held visibility (960 s), past the hold
    late = now + timedelta(seconds=HELD)
    deliver(ledger, KEY, process, owner="m-1", now=late, hold_seconds=295)
    # Then its retry takes the claim over and the event is processed once
    assert calls.log.count("process") == 1


def publish_throttled() -> None:
    raise AdapterError("SNS Publish throttled")


def test_a_clone_notice_that_could_not_be_released_marks_its_deliverys_error_unreleased(
    ledger: Any, calls: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a delivery that made a clone and whose owner's message failed: the clone notice's claim (held
    # NOTICE_HOLD_SECONDS) cannot be released, while the delivery's own release succeeds
    notices = CloneNotices(ledger, lambda: now)
    release = ledger.release

    def notice_unreleased(key: str, *args: Any) -> None:
        if key.startswith("resume:"):
            raise AdapterError("UpdateItem throttled")
        release(key, *args)

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "release", notice_unreleased)
        with pytest.raises(AdapterError) as failed:
            deliver(
                ledger,
                KEY,
                lambda: notices.once("llm-r1", publish_throttled),
                owner="m-1",
                now=now,
                hold_seconds=295,
            )
    # Then the delivery's error is marked unreleased (its record is given the held visibility): a retry within
    # the notice's hold would find the owner "told already" and complete untold
    assert unreleased(failed.value) and str(failed.value) == "SNS Publish throttled"
    assert not notices.once("llm-r1", lambda: calls("told early"))
    # When the record comes back after the held visibility, past the notice's hold
    assert HELD > NOTICE_HOLD_SECONDS
    later = CloneNotices(ledger, lambda: now + timedelta(seconds=HELD))
    deliver(
        ledger,
        KEY,
        lambda: later.once("llm-r1", lambda: calls("told")),
        owner="m-1",
        now=now + timedelta(seconds=HELD),
        hold_seconds=295,
    )
    # Then the owner is told, once
    assert [c for c in calls.log if c.startswith("told")] == ["told"]


def test_a_compliance_stop_whose_telling_failed_is_owed_to_the_next_teller_and_told_once(
    ledger: Any, calls: Any, now: datetime
) -> None:
    # Given a compliance stop whose owner's message failed outside any delivery (the reconciler's repair)
    notices = ComplianceNotices(ledger, lambda: now)
    stop = stop_effect("untagged", "required-tags", "compliance.stop.violation")
    with pytest.raises(AdapterError):
        notices.once("untagged", [stop], publish_throttled)
    # When the job's Stopped event asks what is owed (twice: a copy of the event)
    told: list[tuple[str, ...]] = []
    assert notices.tell_owed("untagged", told.append)
    assert not notices.tell_owed("untagged", told.append)
    # Then the stop is told once, with its rule and code
    assert told == [(stop,)]


def test_a_job_compliance_never_stopped_is_owed_nothing(ledger: Any, now: datetime) -> None:
    # Given a job whose owner stopped it, and no compliance telling ever claimed for it
    notices = ComplianceNotices(ledger, lambda: now)
    # When its Stopped event asks what is owed
    told: list[tuple[str, ...]] = []
    # Then nothing is told
    assert not notices.tell_owed("owner-stopped", told.append)
    assert told == []


def test_a_clone_notice_claim_that_raised_marks_its_deliverys_error_unreleased(
    ledger: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a clone notice's claim DynamoDB applied but whose answer was lost for good (the ledger raised)
    claim = ledger.claim

    def notice_unanswered(key: str, *args: Any) -> Any:
        granted = claim(key, *args)
        if key.startswith("resume:"):
            raise AdapterError("UpdateItem: read timeout")
        return granted

    monkeypatch.setattr(ledger, "claim", notice_unanswered)
    notices = CloneNotices(ledger, lambda: now)
    # When the delivery that made the clone fails on it
    with pytest.raises(AdapterError) as failed:
        deliver(ledger, KEY, lambda: notices.once("llm-r1", lambda: None), owner="m-1", now=now, hold_seconds=295)
    # Then its error is marked unreleased: the notice's key may be held for its whole hold
    assert unreleased(failed.value)


def test_a_delivery_that_left_a_clone_notice_held_marks_whatever_error_it_ends_with(
    ledger: Any, now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a delivery whose clone notice could not be released, and which goes on to fail with another error
    # (the notice's own caught and another raised)
    def throttled(*_: Any) -> None:
        raise AdapterError("UpdateItem throttled")

    notices = CloneNotices(ledger, lambda: now)

    def process() -> None:
        try:
            notices.once("llm-r1", publish_throttled)
        except AdapterError as exc:
            raise RuntimeError("the reaction failed") from exc

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "release", throttled)
        with pytest.raises(RuntimeError) as failed:
            deliver(ledger, KEY, process, owner="m-1", now=now, hold_seconds=295)
    # Then the error the delivery ends with is marked unreleased all the same
    assert unreleased(failed.value)


def test_an_unreleased_mark_is_a_flag_of_the_error_itself() -> None:
    error = RuntimeError("x")
    assert not unreleased(error) and not unreleased(RuntimeError("x"))
    assert mark_unreleased(error) is error
    assert unreleased(error) and not unreleased(RuntimeError("x"))


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


def ignored_declaration(rule: str) -> Notification:
    item = NotificationItem(rule=rule, code="judge.tolerance.ignored", action="notify", mode="enforce", reason="r")
    return Notification(
        kind=NotificationKind.TOLERANCE_IGNORED,
        job_name="job-1",
        headline="h",
        outcome=NotificationOutcome.NOTIFIED,
        items=(item,),
    )


def test_a_job_whose_declarations_both_guards_ignored_is_told_of_each_once(ledger: Any, now: datetime) -> None:
    # Given a job's Training event in which the idle and the progress guard each ignore the job's declaration
    sns = Published()
    notifier = OnceNotifier(sns)

    def process() -> None:
        for rule in ("idle-guard", "progress-guard", "idle-guard"):  # the last: a copy within the same delivery
            notifier.publish(ignored_declaration(rule))

    deliver(ledger, KEY, process, owner="m-1", now=now, hold_seconds=60)
    # Then the owner reads both messages, each once
    assert [m.items[0].rule for m in sns.messages] == ["idle-guard", "progress-guard"]


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


def stopped() -> Notification:
    return Notification(
        kind=NotificationKind.COMPLIANCE, job_name="job-1", headline="h", outcome=NotificationOutcome.STOPPED
    )


def test_a_delivery_that_told_someone_is_marked_completed_and_a_late_copy_of_it_is_a_duplicate(
    ledger: Any, calls: Any, now: datetime
) -> None:
    # Given a single delivery that stops a job and tells its owner
    sns = Published()
    notifier = OnceNotifier(sns)
    deliver(ledger, KEY, lambda: notifier.publish(stopped()), owner="m-1", now=now, hold_seconds=295)
    # Then it is marked completed at once (one write more, only because someone was told)
    assert calls.log == ["claim m-1", "complete m-1"]
    # When a copy of its message (same message id) comes after the hold: the event source mapping's delete
    # failed and the message reappears after the queue's visibility
    later = now + timedelta(seconds=QUEUE_TIMEOUT)
    again = deliver(ledger, KEY, lambda: notifier.publish(stopped()), owner="m-1", now=later, hold_seconds=295)
    # Then it is a duplicate: the owner is not told twice
    assert again == Duplicate(KEY) and len(sns.messages) == 1


def test_a_delivery_that_told_nobody_is_not_marked_and_a_late_copy_of_it_runs_again(
    ledger: Any, calls: Any, now: datetime
) -> None:
    # Given a single delivery that records its action and tells nobody (a compliant job's: the healthy path)
    sink = MemoryAuditSink()
    audit = OnceAuditSink(sink)
    deliver(ledger, KEY, lambda: audit.write(record("create-alarm")), owner="m-1", now=now, hold_seconds=295)
    # Then it costs its claim only
    assert calls.log == ["claim m-1"]
    # and a copy of its message after the hold takes the claim over and runs again (its actions idempotent,
    # its audit record written again with the same event id): the price of no mark on the healthy path
    later = now + timedelta(seconds=QUEUE_TIMEOUT)
    deliver(ledger, KEY, lambda: audit.write(record("create-alarm")), owner="m-1", now=later, hold_seconds=295)
    assert len(sink.records) == 2
    # while a copy within the hold is a duplicate
    early = now + timedelta(seconds=5)
    assert deliver(ledger, KEY, lambda: None, owner="m-1", now=early, hold_seconds=295) == Duplicate(KEY)


def test_in_a_batch_a_delivery_that_told_someone_is_marked_once(ledger: Any, calls: Any, now: datetime) -> None:
    notifier = OnceNotifier(Published())
    with delivery_batch():
        deliver(ledger, "k-1", lambda: notifier.publish(stopped()), owner="m-1", now=now, hold_seconds=60)
        deliver(ledger, "k-2", lambda: "ok", owner="m-2", now=now, hold_seconds=60)
    assert calls.log == ["claim m-1", "complete m-1", "claim m-2"]


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
