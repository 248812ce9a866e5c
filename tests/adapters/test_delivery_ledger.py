"""The delivery ledger against moto's DynamoDB: one conditional PutItem per claim, and what it admits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from sagemaker_governance.adapters.idempotency import DeliveryLedger
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
    assert not ledger.claim(KEY, "m-2", NOW, 60).granted
    assert not ledger.claim(KEY, "m-2", NOW + timedelta(minutes=30), 60).granted
    # the owner itself while its invocation may still run
    assert not ledger.claim(KEY, "m-1", NOW + timedelta(seconds=30), 60).granted


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


def test_the_ledger_makes_only_the_calls_it_declares(dynamodb: Any) -> None:
    recorder = CallRecorder().attach(dynamodb)
    ledger = DeliveryLedger(dynamodb, TABLE)
    ledger.claim(KEY, "m-1", NOW, 60)
    ledger.claim(KEY, "m-2", NOW, 60)
    ledger.release(KEY, "m-1", NOW, ["x"])
    assert recorder.actions == DeliveryLedger.IAM_ACTIONS == {"dynamodb:PutItem"}
