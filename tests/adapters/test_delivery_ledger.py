"""The delivery ledger against moto's DynamoDB: one conditional UpdateItem per claim, and what it admits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ConnectTimeoutError

from sagemaker_governance.adapters.idempotency import DEFAULT_TTL_SECONDS, DeliveryLedger
from sagemaker_governance.domain.errors import AdapterError, Claim
from sagemaker_governance.service.idempotency import NOTICE_HOLD_SECONDS, CloneNotices
from tests.adapters.conftest import NOW, CallRecorder

TABLE = "ledger"
KEY = "job:j:InProgress:Training:3:2026-11-21T12:00:00+00:00"


@pytest.fixture
def dynamodb(aws: None) -> Iterator[Any]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield client


@pytest.fixture
def ledger(dynamodb: Any) -> DeliveryLedger:
    return DeliveryLedger(dynamodb, TABLE, ttl_seconds=3600)


def test_the_first_claim_is_granted_and_a_duplicate_is_not(ledger: DeliveryLedger) -> None:
    assert ledger.claim(KEY, "m-1", NOW, 60).granted
    # another message with the same state change, now or after the first invocation's time
    assert ledger.claim(KEY, "m-2", NOW, 60) == Claim(granted=False, pending=True)
    assert ledger.claim(KEY, "m-2", NOW + timedelta(minutes=30), 60) == Claim(granted=False, pending=True)
    # the owner itself while its invocation may still run (or its delivery completed unmarked): the same refusal
    assert ledger.claim(KEY, "m-1", NOW + timedelta(seconds=30), 60) == Claim(granted=False, pending=True)


def test_the_owner_takes_its_claim_over_once_its_invocation_is_over(ledger: DeliveryLedger) -> None:
    # Given a claim whose invocation died without releasing it (timeout, out of memory)
    assert ledger.claim(KEY, "m-1", NOW, 60).granted
    # When the same message is received again after the invocation's time
    retry = ledger.claim(KEY, "m-1", NOW + timedelta(seconds=61), 60)
    # Then it processes it (what the dead attempt did is unknown)
    assert retry.granted and retry.done == frozenset()


def test_a_release_lets_the_retry_in_with_what_was_done(ledger: DeliveryLedger) -> None:
    # Given an attempt that failed after writing one audit record
    ledger.claim(KEY, "m-1", NOW, 60)
    ledger.release(KEY, "m-1", NOW, ["audit|j|required-tags|stop"])
    # When its retry claims the delivery (at once: the release ended the hold)
    retry = ledger.claim(KEY, "m-1", NOW, 60)
    # Then it is granted and learns the effect already done; the next claim is a duplicate again
    assert retry.granted and retry.done == {"audit|j|required-tags|stop"}
    assert not ledger.claim(KEY, "m-2", NOW, 60).granted


def test_an_expired_claim_is_absent_before_dynamodb_deletes_it(ledger: DeliveryLedger) -> None:
    ledger.claim(KEY, "m-1", NOW, 60)
    assert ledger.claim(KEY, "m-2", NOW + timedelta(seconds=3601), 60).granted


def test_a_release_after_a_takeover_leaves_the_new_claim(ledger: DeliveryLedger) -> None:
    # Given m-1's claim taken over by... m-1's own retry, later failing again: releases only ever act on
    # their own owner's claim; another owner's claim stays
    ledger.claim(KEY, "m-1", NOW - timedelta(hours=2), 60)
    assert ledger.claim(KEY, "m-2", NOW, 60).granted  # the first expired
    ledger.release(KEY, "m-1", NOW, [])  # a late release of the expired claim
    assert not ledger.claim(KEY, "m-3", NOW, 60).granted


def lose_first_answer(client: Any) -> list[int]:
    """DynamoDB applies the next ``UpdateItem`` but its answer is lost (a read timeout, a 500): botocore's
    standard retry handler sends the same request again. Returns the attempts botocore made."""
    made: list[int] = []

    def lost(attempts: int, **_: Any) -> int | None:
        made.append(attempts)
        return 0 if len(made) == 1 else None  # retry at once; then botocore's own judgement

    client.meta.events.register_first("needs-retry.dynamodb", lost)
    return made


def test_a_claim_whose_answer_was_lost_is_granted_to_its_own_retry(ledger: DeliveryLedger, dynamodb: Any) -> None:
    # Given a claim DynamoDB applies but whose answer never arrives
    made = lose_first_answer(dynamodb)
    # When botocore retries it and the retry's condition fails on the claim the first attempt wrote
    claim = ledger.claim(KEY, "m-1", NOW, 60)
    # Then the claim is ours: granted, not a duplicate
    assert made == [1, 2]
    assert claim.granted and claim.done == frozenset()
    # And anyone else is still a duplicate
    assert not ledger.claim(KEY, "m-2", NOW, 60).granted


def test_a_claim_applied_whose_answer_and_retries_are_lost_raises_and_holds_the_key(dynamodb: Any) -> None:
    # Given a client that sends a claim once more after a lost answer, and no more (no backoff to wait for)
    client = boto3.client(
        "dynamodb", region_name="us-east-1", config=Config(retries={"mode": "standard", "total_max_attempts": 2})
    )
    lose_first_answer(client)

    def unreachable(request: Any, **_: Any) -> None:
        if sent:
            raise ConnectTimeoutError(endpoint_url=request.url)
        sent.append(request.url)

    sent: list[str] = []
    client.meta.events.register("before-send.dynamodb.UpdateItem", unreachable)
    # When DynamoDB applies the claim, its answer is lost, and the retry cannot connect
    with pytest.raises(AdapterError, match="claim"):
        DeliveryLedger(client, TABLE).claim(KEY, "m-1", NOW, 295)
    # Then the ledger raised although the claim holds the key: its owner's retry within the hold is refused
    ledger = DeliveryLedger(dynamodb, TABLE)
    assert not ledger.claim(KEY, "m-1", NOW + timedelta(seconds=60), 295).granted
    assert ledger.claim(KEY, "m-1", NOW + timedelta(seconds=1800), 295).granted


def test_a_retried_claim_keeps_what_a_released_attempt_did(ledger: DeliveryLedger, dynamodb: Any) -> None:
    # Given an attempt that failed after writing an audit record, and released the delivery
    ledger.claim(KEY, "m-1", NOW, 60)
    ledger.release(KEY, "m-1", NOW, ["audit|j|required-tags|stop"])
    # When its retry's claim is applied, its answer lost, and botocore sends it again
    lose_first_answer(dynamodb)
    retry = ledger.claim(KEY, "m-1", NOW + timedelta(minutes=30), 60)
    # Then the retry still learns the effect done (the claim left the item's done list in place)
    assert retry.granted and retry.done == {"audit|j|required-tags|stop"}


def test_a_lost_answer_to_another_owners_condition_failure_stays_a_duplicate(
    ledger: DeliveryLedger, dynamodb: Any
) -> None:
    # Given m-1's claim, then m-2's claim, which DynamoDB refuses and whose answer is lost
    assert ledger.claim(KEY, "m-1", NOW, 60).granted
    lose_first_answer(dynamodb)
    # Then botocore's retry meets m-1's claim, not m-2's: a duplicate
    assert not ledger.claim(KEY, "m-2", NOW, 60).granted


def test_a_takeover_learns_what_an_earlier_released_attempt_did(ledger: DeliveryLedger) -> None:
    # Given a released attempt, then a retry that died without releasing (its claim stays)
    ledger.claim(KEY, "m-1", NOW, 60)
    ledger.release(KEY, "m-1", NOW, ["notify|stopped|j"])
    assert ledger.claim(KEY, "m-1", NOW, 60).granted
    # When the same message comes back after that invocation's time
    late = ledger.claim(KEY, "m-1", NOW + timedelta(seconds=61), 60)
    # Then the released attempt's effect is still known (the dead attempt's own are not)
    assert late.granted and late.done == {"notify|stopped|j"}


def test_a_completed_claim_is_a_duplicate_even_to_its_owner(ledger: DeliveryLedger) -> None:
    # Given a delivery that completed and was marked so
    claim = ledger.claim(KEY, "m-1", NOW, 60)
    assert claim.token is not None
    ledger.complete(KEY, claim.token, NOW)
    # When its SQS record comes back with its batch after the invocation's time (same message id)
    again = ledger.claim(KEY, "m-1", NOW + timedelta(minutes=30), 60)
    # Then it is a duplicate, as is any other message, until the item expires; within the claim's hold too
    assert again == Claim(granted=False)
    assert ledger.claim(KEY, "m-1", NOW + timedelta(seconds=30), 60) == Claim(granted=False)
    assert not ledger.claim(KEY, "m-2", NOW + timedelta(minutes=30), 60).granted
    assert ledger.claim(KEY, "m-1", NOW + timedelta(seconds=3601), 60).granted


def test_a_completed_record_returned_with_its_batch_stays_a_duplicate_through_every_receive(
    dynamodb: Any,
) -> None:
    # Given the deployed ledger (its default TTL) and a record claimed 3 s into its invocation, completed and
    # marked before the next record's claim; the next record then times the invocation out
    ledger = DeliveryLedger(dynamodb, TABLE)
    claim = ledger.claim(KEY, "m-1", NOW + timedelta(seconds=3), 297)
    assert claim.token is not None
    marked = NOW + timedelta(seconds=4)
    ledger.complete(KEY, claim.token, marked)
    # When the whole batch comes back every VisibilityTimeout (1,800 s, polled ~1 s late) up to
    # maxReceiveCount (5) receives (template.yaml)
    receives = [NOW + timedelta(seconds=k * 1801 + 3) for k in range(1, 5)]
    # Then each receive of the completed record is a duplicate, the fifth included
    assert [ledger.claim(KEY, "m-1", at, 297).granted for at in receives] == [False] * 4
    # and the mark pushed the item's expiration on
    item = dynamodb.get_item(TableName=TABLE, Key={"id": {"S": KEY}})["Item"]
    assert int(item["expiration"]["N"]) == int(marked.timestamp()) + DEFAULT_TTL_SECONDS


def test_marking_a_claim_another_one_replaced_changes_nothing(ledger: DeliveryLedger) -> None:
    # Given m-1's claim expired and m-2's claim on the key since
    old = ledger.claim(KEY, "m-1", NOW - timedelta(hours=2), 60)
    assert old.token is not None
    assert ledger.claim(KEY, "m-2", NOW, 60).granted
    # When m-1's mark arrives late
    ledger.complete(KEY, old.token, NOW)
    # Then m-2's claim is still one its owner takes over once its invocation is over
    assert ledger.claim(KEY, "m-2", NOW + timedelta(seconds=61), 60).granted


def test_the_ledger_makes_only_the_calls_it_declares(dynamodb: Any) -> None:
    recorder = CallRecorder().attach(dynamodb)
    ledger = DeliveryLedger(dynamodb, TABLE)
    claim = ledger.claim(KEY, "m-1", NOW, 60)
    ledger.claim(KEY, "m-2", NOW, 60)
    ledger.release(KEY, "m-1", NOW, ["x"])
    assert claim.token is not None
    ledger.complete(KEY, claim.token, NOW)
    assert recorder.actions == DeliveryLedger.IAM_ACTIONS == {"dynamodb:UpdateItem"}


def test_a_told_clone_stays_told_past_its_notice_hold(ledger: DeliveryLedger) -> None:
    # Given a clone whose owner was told through the real ledger (its key marked completed)
    clock = {"now": NOW}
    notices = CloneNotices(ledger, lambda: clock["now"])
    told: list[str] = []
    assert notices.once("llm-r1", lambda: told.append("llm-r1"))
    # When another path meets the same clone after the claim's hold is over
    clock["now"] = NOW + timedelta(seconds=NOTICE_HOLD_SECONDS + 1)
    # Then the owner is not told again: the mark, not the hold, keeps it told
    assert not notices.once("llm-r1", lambda: told.append("again"))
    assert told == ["llm-r1"]


def test_a_refusal_says_whether_the_holder_has_finished(ledger: DeliveryLedger) -> None:
    # A claim held and not completed: refused as pending (its holder may still fail and release it)
    first = ledger.claim(KEY, "notice", NOW, 900)
    assert ledger.claim(KEY, "notice", NOW + timedelta(seconds=30), 900) == Claim(granted=False, pending=True)
    # once completed: refused, and not pending (done)
    assert first.token is not None
    ledger.complete(KEY, first.token, NOW)
    assert ledger.claim(KEY, "notice", NOW + timedelta(seconds=30), 900) == Claim(granted=False, pending=False)
