"""The fleet's Spot health ledger in DynamoDB (``domain/spot_health.py``).

One item per Spot signal: partition key ``instance_type`` (the type's market), sort key ``signal`` (the
transition's ISO 8601 start, the kind and the job: a duplicate event rewrites the same item), the job's
rate with its interruptions and running hours so far (the fleet pools them) or the wait's minutes, and
``expiration`` (the table's TTL attribute, epoch seconds: DynamoDB deletes
an expired item within a few days, not at once, so reads bound the window themselves;
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html).

Writes are ``PutItem`` (one per signal, at most three per Spot event); reads are one ``Query`` on the
type's partition from the window's start (``KeyConditionExpression`` with ``>=`` on the sort key), at most
``MAX_PAGES`` pages. Only Spot events write or read: a job on On-Demand never touches the table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.spot_health import SignalKind, SpotSignal

TTL: Final = timedelta(days=7)  # longer than any window (spot.storm.window_hours <= 168), for `smgov spot-health`
MAX_PAGES: Final = 5


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)


def sort_key(signal: SpotSignal) -> str:
    return f"{_utc(signal.at).isoformat()}#{signal.kind.value}#{signal.job}"


def item_of(signal: SpotSignal) -> dict[str, Any]:
    at = _utc(signal.at)
    item: dict[str, Any] = {
        "instance_type": {"S": signal.instance_type},
        "signal": {"S": sort_key(signal)},
        "kind": {"S": signal.kind.value},
        "job": {"S": signal.job},
        "at": {"S": at.isoformat()},
        "expiration": {"N": str(math.ceil((at + TTL).timestamp()))},
    }
    if signal.rate_per_hour is not None:
        item["rate_per_hour"] = {"N": repr(round(signal.rate_per_hour, 6))}
    if signal.wait_minutes is not None:
        item["wait_minutes"] = {"N": repr(round(signal.wait_minutes, 3))}
    if signal.az:
        item["az"] = {"S": signal.az}
    if signal.interruptions is not None:
        item["interruptions"] = {"N": str(signal.interruptions)}
    if signal.running_hours is not None:
        item["running_hours"] = {"N": repr(round(signal.running_hours, 6))}
    return item


def signal_of(item: dict[str, Any]) -> SpotSignal | None:
    """A stored item back as a signal (None for an item this version cannot read)."""
    try:
        kind = SignalKind(item["kind"]["S"])
        at = datetime.fromisoformat(item["at"]["S"])
        rate = item.get("rate_per_hour", {}).get("N")
        wait = item.get("wait_minutes", {}).get("N")
        count = item.get("interruptions", {}).get("N")
        running = item.get("running_hours", {}).get("N")
        return SpotSignal(
            instance_type=item["instance_type"]["S"],
            kind=kind,
            at=_utc(at),
            job=item["job"]["S"],
            rate_per_hour=float(rate) if rate is not None else None,
            wait_minutes=float(wait) if wait is not None else None,
            az=item.get("az", {}).get("S"),
            interruptions=int(count) if count is not None else None,
            running_hours=float(running) if running is not None else None,
        )
    except (KeyError, ValueError, TypeError):
        return None


class SpotHealthLedger:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"dynamodb:PutItem", "dynamodb:Query"})
    LAZY_CLIENT: ClassVar[bool] = True  # built at the first Spot event, not at cold start

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def record(self, signals: Iterable[SpotSignal]) -> None:
        for signal in signals:
            try:
                self._client.put_item(TableName=self._table, Item=item_of(signal))
            except (ClientError, BotoCoreError) as exc:
                raise AdapterError(f"DynamoDB PutItem (Spot health {signal.instance_type}) failed: {exc}") from exc

    def recent(self, instance_type: str, since: datetime) -> list[SpotSignal]:
        out: list[SpotSignal] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#t = :t AND #s >= :since",
            "ExpressionAttributeNames": {"#t": "instance_type", "#s": "signal"},
            "ExpressionAttributeValues": {":t": {"S": instance_type}, ":since": {"S": _utc(since).isoformat()}},
        }
        try:
            for _ in range(MAX_PAGES):
                page = self._client.query(**request)
                out += [s for s in (signal_of(item) for item in page.get("Items") or []) if s is not None]
                last = page.get("LastEvaluatedKey")
                if not last:
                    break
                request["ExclusiveStartKey"] = last
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"DynamoDB Query (Spot health {instance_type}) failed: {exc}") from exc
        return out
