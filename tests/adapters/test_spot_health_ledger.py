"""The Spot health ledger against moto's DynamoDB: idempotent writes per signal, a window read per type,
errors as AdapterError, exactly the IAM actions it declares."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from sagemaker_governance.adapters.spot_health import SpotHealthLedger
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.spot_health import SignalKind, SpotSignal
from tests.adapters.conftest import NOW, CallRecorder
from tests.spot_builders import create_spot_health_table

TABLE = "spot-health"


@pytest.fixture
def dynamodb(aws: None) -> Iterator[Any]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_spot_health_table(client, TABLE)
    yield client


def signal(job: str, minutes_ago: int, instance_type: str = "ml.p4d.24xlarge") -> SpotSignal:
    at = NOW - timedelta(minutes=minutes_ago)
    return SpotSignal(instance_type, SignalKind.INTERRUPTION, at, job, 0.75, interruptions=3, running_hours=4.0)


def test_a_signal_written_twice_is_one_item_and_reads_back_whole(dynamodb: Any) -> None:
    recorder = CallRecorder().attach(dynamodb)
    ledger = SpotHealthLedger(dynamodb, TABLE)
    ledger.record([signal("a", 5)])
    ledger.record([signal("a", 5)])  # a duplicate event
    wait = SpotSignal(
        "ml.p4d.24xlarge", SignalKind.CAPACITY_WAIT, NOW - timedelta(minutes=30), "a", wait_minutes=12.5
    )
    ledger.record([wait])
    read = ledger.recent("ml.p4d.24xlarge", NOW - timedelta(hours=1))
    assert sorted(read, key=lambda s: s.at) == [wait, signal("a", 5)]
    assert recorder.actions == SpotHealthLedger.IAM_ACTIONS
    item = dynamodb.scan(TableName=TABLE)["Items"][0]
    assert int(item["expiration"]["N"]) > NOW.timestamp() + 6 * 86400  # TTL: a week


def test_the_read_takes_one_type_and_the_window_only(dynamodb: Any) -> None:
    ledger = SpotHealthLedger(dynamodb, TABLE)
    ledger.record([signal("a", 5), signal("b", 90), signal("c", 5, instance_type="ml.g5.12xlarge")])
    read = ledger.recent("ml.p4d.24xlarge", NOW - timedelta(hours=1))
    assert [s.job for s in read] == ["a"]


def test_a_missing_table_is_an_adapter_error(aws: None) -> None:
    ledger = SpotHealthLedger(boto3.client("dynamodb", region_name="us-east-1"), "no-such-table")
    with pytest.raises(AdapterError):
        ledger.record([signal("a", 5)])
    with pytest.raises(AdapterError):
        ledger.recent("ml.p4d.24xlarge", NOW)


def test_an_item_of_an_older_ledger_without_counts_still_reads(dynamodb: Any) -> None:
    # Given an interruption written before the counts were (a rate only)
    ledger = SpotHealthLedger(dynamodb, TABLE)
    old = SpotSignal("ml.p4d.24xlarge", SignalKind.INTERRUPTION, NOW - timedelta(minutes=5), "a", 0.75)
    ledger.record([old])
    # Then it reads back as it was: no counts (the fleet's rate leaves it out, storms count it)
    (read,) = ledger.recent("ml.p4d.24xlarge", NOW - timedelta(hours=1))
    assert read == old and read.interruptions is None and read.running_hours is None
