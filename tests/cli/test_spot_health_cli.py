"""`smgov spot-health` reads the ledger (moto DynamoDB) and prints each instance type's health."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sagemaker_governance.adapters.spot_health import SpotHealthLedger
from sagemaker_governance.domain.spot_health import SignalKind, SpotSignal
from smgov.cli.main import build_parser
from smgov.cli.spot_health import cmd_spot_health
from tests.spot_builders import create_spot_health_table

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_spot_health_table(client, "t")
        ledger = SpotHealthLedger(client, "t")
        ledger.record(
            [
                SpotSignal("ml.p4d.24xlarge", SignalKind.INTERRUPTION, NOW - timedelta(minutes=m), f"j{m}", 1.2)
                for m in (10, 20, 30)
            ]
            + [SpotSignal("ml.g5.12xlarge", SignalKind.INTERRUPTION, NOW - timedelta(hours=3), "calm", 0.1)]
            + [SpotSignal("ml.g5.12xlarge", SignalKind.INTERRUPTION, NOW - timedelta(days=3), "old", 0.1)]
        )
        yield client


def run(client: Any, *argv: str) -> int:
    args = build_parser().parse_args(["spot-health", "--table", "t", *argv])
    return cmd_spot_health(args, client=client, now=NOW)


def test_each_type_with_its_storm_flag(table: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(table, "--json") == 0
    rows = {r["instance_type"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ml.p4d.24xlarge"]["fleet_storm"] is True
    assert rows["ml.p4d.24xlarge"]["fleet_interrupted_jobs"] == 3
    assert rows["ml.g5.12xlarge"]["fleet_interruptions"] == 1  # the 3-day-old one is outside the 24 h
    assert rows["ml.g5.12xlarge"]["fleet_storm"] is False


def test_the_table_view(table: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(table) == 0
    out = capsys.readouterr().out
    assert "ml.p4d.24xlarge" in out and "STORM" in out
    assert isinstance(build_parser().parse_args(["spot-health"]), argparse.Namespace)
