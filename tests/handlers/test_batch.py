"""The partial batch response (handlers/_batch.py): a record is started only while the invocation has time
for it; the others go back to the queue unprocessed, named in the answer. The Lambda context is injected
(its remaining time scripted): no clock, no sleep."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from sagemaker_governance.domain.redelivery import (
    FIRST_RETRY_SECONDS,
    SECOND_RETRY_SECONDS,
    VisibilityChange,
    held_visibility,
)
from sagemaker_governance.events.queue import QueuedRecord
from sagemaker_governance.handlers._batch import (
    HELD_VISIBILITY_SECONDS,
    MIN_REMAINING_MS,
    VISIBILITY_MIN_REMAINING_MS,
    partial_batch,
    sooner,
)
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.service.idempotency import NOTICE_HOLD_SECONDS, mark_unreleased
from smgov.simulation.harness import LocalAccount, LocalContext, local_account
from tests.builders import create_request
from tests.handlers.conftest import ENFORCE, NOW, sqs_batch

RECORDS = [("m-0", "a"), ("m-1", "b"), ("m-2", "c")]


@dataclass
class ScriptedContext(LocalContext):
    """A Lambda context whose remaining time is read from a script, one value per call (or from ``left``)."""

    remaining: list[int] = field(default_factory=list)
    left: Callable[[], int] | None = None

    def get_remaining_time_in_millis(self) -> int:
        return self.left() if self.left is not None else self.remaining.pop(0)


def test_records_without_time_left_are_returned_unprocessed() -> None:
    # Given an invocation with time for its first record only
    context = ScriptedContext(remaining=[120_000, MIN_REMAINING_MS - 1])
    delivered: list[str] = []
    # When the batch is delivered
    answer = partial_batch(RECORDS, lambda rid, _: delivered.append(rid), failed="f", key="k", context=context)
    # Then the others were not started, and go back to the queue
    assert delivered == ["m-0"]
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-2"}]}


def test_a_batch_with_no_time_left_returns_every_record_without_failing_the_invocation() -> None:
    context = ScriptedContext(remaining=[1_000])
    delivered: list[str] = []
    answer = partial_batch(RECORDS, lambda rid, _: delivered.append(rid), failed="f", key="k", context=context)
    assert delivered == []
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["m-0", "m-1", "m-2"]


def test_a_failed_record_and_the_records_cut_short_are_all_named() -> None:
    # Given a first record that fails, then no time for the rest
    context = ScriptedContext(remaining=[120_000, 10_000])

    def deliver(record_id: str, body: str) -> None:
        raise RuntimeError(body)

    answer = partial_batch(RECORDS, deliver, failed="f", key="k", context=context)
    # Then the invocation answers (not every record failed: two were not tried) and names all three
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["m-0", "m-1", "m-2"]


def test_with_time_for_every_record_all_are_delivered() -> None:
    context = ScriptedContext(remaining=[MIN_REMAINING_MS, MIN_REMAINING_MS, MIN_REMAINING_MS])
    delivered: list[str] = []
    answer = partial_batch(RECORDS, lambda rid, _: delivered.append(rid), failed="f", key="k", context=context)
    assert delivered == ["m-0", "m-1", "m-2"] and answer == {"batchItemFailures": []}


@pytest.fixture
def acct() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as account:
        yield account


def test_the_job_events_function_stops_taking_records_when_its_time_runs_short(acct: LocalAccount) -> None:
    # Given two untagged jobs' Starting events in one batch, and time for one record
    for name in ("untagged-1", "untagged-2"):
        acct.sagemaker.launch(create_request(name, tags={"owner": "bob"}))
    batch = sqs_batch(*(json.dumps(acct.sagemaker.event(name)) for name in ("untagged-1", "untagged-2")))
    # (the time runs short once the first job is stopped: however often the handler asks)
    context = ScriptedContext(left=lambda: 20_000 if acct.sagemaker.stop_requests else 120_000)
    # When the function handles the batch
    answer = job_events(batch, context)
    # Then the second job is left for the next receive
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}


@dataclass
class Told:
    """A ``going_back``: what it was told, released and held, one pair per call."""

    calls: list[tuple[list[str], list[str]]] = field(default_factory=list)

    def __call__(self, back: Sequence[str], held: Sequence[str]) -> None:
        self.calls.append((list(back), list(held)))


def test_the_records_going_back_are_told_failed_and_unprocessed_and_none_of_a_healthy_batch() -> None:
    told = Told()

    def deliver(record_id: str, body: str) -> None:
        if record_id == "m-0":
            raise RuntimeError(body)

    # Given a first record that fails and no time for the last
    context = ScriptedContext(remaining=[120_000, 120_000, 10_000])
    answer = partial_batch(RECORDS, deliver, failed="f", key="k", context=context, going_back=told)
    # Then the records named in the answer are the ones told, none held
    assert told.calls == [(["m-0", "m-2"], [])]
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["m-0", "m-2"]
    # and a healthy batch tells nothing
    healthy = ScriptedContext(remaining=[120_000] * 3)
    partial_batch(RECORDS, lambda rid, _: None, failed="f", key="k", context=healthy, going_back=told)
    assert len(told.calls) == 1


def test_every_record_failed_the_records_are_told_before_the_invocation_fails() -> None:
    told = Told()

    def deliver(record_id: str, body: str) -> None:
        raise RuntimeError(body)

    context = ScriptedContext(remaining=[120_000] * 3)
    with pytest.raises(RuntimeError):
        partial_batch(RECORDS, deliver, failed="f", key="k", context=context, going_back=told)
    assert told.calls == [(["m-0", "m-1", "m-2"], [])]


def test_a_record_whose_claim_was_not_released_is_told_as_held() -> None:
    told = Told()

    # Given a batch whose first record failed without releasing its claim, the second failed and released it,
    # the third was done
    def deliver(record_id: str, body: str) -> None:
        if record_id == "m-0":
            raise mark_unreleased(RuntimeError(body))
        if record_id == "m-1":
            raise RuntimeError(body)

    context = ScriptedContext(remaining=[120_000] * 3)
    answer = partial_batch(RECORDS, deliver, failed="f", key="k", context=context, going_back=told)
    # Then both are named in the answer, and told apart: the released one (the retry ladder's visibility) and
    # the held one (a visibility past its claim's hold)
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == ["m-0", "m-1"]
    assert told.calls == [(["m-1"], ["m-0"])]
    # and a batch whose only record going back is held tells it too
    only = Told()

    def unreleased_only(record_id: str, body: str) -> None:
        if record_id == "m-1":
            raise mark_unreleased(RuntimeError(body))

    again = ScriptedContext(remaining=[120_000] * 3)
    partial_batch(RECORDS, unreleased_only, failed="f", key="k", context=again, going_back=only)
    assert only.calls == [([], ["m-1"])]


def test_a_failure_to_tell_leaves_the_answer_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    def going_back(back: object, held: object) -> None:
        raise RuntimeError("no SQS")

    def deliver(record_id: str, body: str) -> None:
        if record_id == "m-1":
            raise RuntimeError(body)

    context = ScriptedContext(remaining=[120_000] * 3)
    answer = partial_batch(RECORDS, deliver, failed="f", key="k", context=context, going_back=going_back)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert "visibility not changed" in [r.getMessage() for r in caplog.records]


ARN = "arn:aws:sqs:us-east-1:123456789012:q"


def queued(record_id: str, receive_count: int | None) -> QueuedRecord:
    return QueuedRecord(record_id, "{}", record_id, f"rh-{record_id}", ARN, receive_count)


@dataclass
class Visibility:
    """A ``VisibilityPort`` that keeps the changes it is asked for."""

    calls: list[list[tuple[str, int]]] = field(default_factory=list)

    def change(self, changes: Sequence[VisibilityChange]) -> int:
        self.calls.append([(c.record_id, c.seconds) for c in changes])
        return len(changes)


def test_sooner_gives_released_records_the_ladder_and_held_ones_the_held_visibility_in_one_call() -> None:
    # Given released records after their first, second and third receive, and held ones after their first and
    # fourth (the queue's own timeout counts from the receive, however late the claim was made)
    records = [
        queued("a", 1),
        queued("b", 2),
        queued("c", 3),
        queued("h1", 1),
        queued("h4", 4),
        queued("hx", None),
    ]
    visibility = Visibility()
    change = sooner(records, lambda: visibility, ScriptedContext(left=lambda: 60_000))
    # When they go back
    changed = change(["a", "b", "c"], ["h1", "h4", "hx"])
    # Then one call: the ladder's seconds for the released ones (none for the third receive: the queue's own),
    # the held visibility for every held one, past the longest hold an attempt can leave
    assert visibility.calls == [
        [
            ("a", FIRST_RETRY_SECONDS),
            ("b", SECOND_RETRY_SECONDS),
            ("h1", HELD_VISIBILITY_SECONDS),
            ("h4", HELD_VISIBILITY_SECONDS),
            ("hx", HELD_VISIBILITY_SECONDS),
        ]
    ]
    assert changed == 5
    assert HELD_VISIBILITY_SECONDS == held_visibility(NOTICE_HOLD_SECONDS) > NOTICE_HOLD_SECONDS


def test_sooner_without_time_left_changes_nothing_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    # Given a held record going back with less time left than the call needs
    visibility = Visibility()
    change = sooner(
        [queued("h", 1)], lambda: visibility, ScriptedContext(left=lambda: VISIBILITY_MIN_REMAINING_MS - 1)
    )
    # Then no call is made (it keeps the queue's own timeout), and the log says so
    assert change([], ["h"]) == 0
    assert visibility.calls == []
    assert "too little time left: visibility not changed" in [r.getMessage() for r in caplog.records]
