"""`smgov spot-health`: the fleet's Spot health per instance type, from the ledger the job-events function
writes at each Spot event (interruptions, capacity waits, MaxWaitTimeExceeded)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sagemaker_governance.domain.recovery_policy import StormPolicy
from sagemaker_governance.domain.spot_health import FleetHealth, SpotSignal
from smgov.cli.dlq import stack_outputs

MAX_PAGES = 20


def read_ledger(client: Any, table: str, since: datetime) -> list[SpotSignal]:
    """Every signal since ``since`` (a bounded ``Scan``: the ledger keeps a week of Spot events)."""
    from sagemaker_governance.adapters.spot_health import signal_of

    out: list[SpotSignal] = []
    request: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "#a >= :since",
        "ExpressionAttributeNames": {"#a": "at"},
        "ExpressionAttributeValues": {":since": {"S": since.isoformat()}},
    }
    for _ in range(MAX_PAGES):
        page = client.scan(**request)
        out += [s for s in (signal_of(item) for item in page.get("Items") or []) if s is not None]
        if not page.get("LastEvaluatedKey"):
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return out


def health_report(signals: list[SpotSignal], now: datetime, policy: StormPolicy) -> list[dict[str, Any]]:
    types = sorted({s.instance_type for s in signals})
    rows = []
    for instance_type in types:
        health = FleetHealth.of(instance_type, signals, now, policy)
        rows.append({"instance_type": instance_type, **health.evidence()})
    return rows


def cmd_spot_health(args: argparse.Namespace, client: Any = None, now: datetime | None = None) -> int:
    table = args.table or stack_outputs(args.stack).get("SpotHealthTableName")
    if not table:
        raise SystemExit(f"stack {args.stack} has no SpotHealthTableName output")
    now = now or datetime.now(UTC)
    policy = StormPolicy(window_hours=args.hours, interrupted_jobs=args.storm_jobs)
    if client is None:
        import boto3  # here, not at the CLI's start (smgov.cli.dlq says why)

        client = boto3.client("dynamodb")
    signals = read_ledger(client, table, now - timedelta(hours=args.hours))
    rows = health_report(signals, now, policy)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no Spot interruption, capacity wait or MaxWaitTimeExceeded in the last {args.hours:g} h")
        return 0
    print(
        f"{'instance type':<20} {'interruptions':>13} {'jobs':>5} {'max-wait':>8} {'wait min':>8} {'rate/h':>7}  storm"
    )
    for row in rows:
        wait = row.get("fleet_mean_capacity_wait_minutes")
        rate = row.get("fleet_interruption_rate_per_hour")
        print(
            f"{row['instance_type']:<20} {row['fleet_interruptions']:>13} {row['fleet_interrupted_jobs']:>5} "
            f"{row['fleet_max_wait_jobs']:>8} {'-' if wait is None else f'{wait:.0f}':>8} "
            f"{'-' if rate is None else f'{rate:.2f}':>7}  {'STORM' if row['fleet_storm'] else '-'}"
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    command = sub.add_parser(
        "spot-health", help="the fleet's Spot interruptions, capacity waits and storms per instance type"
    )
    where = command.add_mutually_exclusive_group()
    where.add_argument(
        "--stack", default="sagemaker-governance", help="stack name (its SpotHealthTableName output)"
    )
    where.add_argument("--table", help="the ledger's DynamoDB table name")
    command.add_argument("--hours", type=float, default=24.0, help="the window (default 24 h)")
    command.add_argument("--storm-jobs", type=int, default=3, help="distinct jobs interrupted that make a storm")
    command.add_argument("--json", action="store_true")
    command.set_defaults(func=cmd_spot_health)
