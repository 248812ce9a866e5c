"""The delivery ledger in DynamoDB: one conditional ``PutItem`` per delivery (``service/idempotency.py``).

An item per delivery key: ``status`` (``INPROGRESS`` from the claim on; ``FAILED`` after a release),
``owner``, ``in_progress_until`` (epoch seconds: the claiming invocation's end), ``done`` (a released
attempt's completed effects) and ``expiration``, the table's TTL attribute (epoch seconds). DynamoDB
deletes expired items within a few days, not at once, so the claim treats an expired item as absent
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html).

The claim is a ``PutItem`` whose ``ConditionExpression`` admits an absent or expired item, a released one,
or the same owner's claim whose invocation is over; ``ReturnValues=ALL_OLD`` hands back the item it
replaced in the same call (a released attempt's ``done`` list). A failed condition is DynamoDB's
``ConditionalCheckFailedException``: a duplicate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError, Claim
from sagemaker_governance.observability import logger

DEFAULT_TTL_SECONDS = 7200  # EventBridge retries for 1 h, Lambda's async queue keeps events 1 h more
IN_PROGRESS, FAILED = "INPROGRESS", "FAILED"
_NAMES = {"#k": "id", "#s": "status", "#o": "owner", "#u": "in_progress_until", "#e": "expiration"}
_CLAIMABLE = "attribute_not_exists(#k) OR #e < :now OR #s = :failed OR (#o = :owner AND #u < :now)"


def _conditional_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class DeliveryLedger:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"dynamodb:PutItem"})
    # The table is encrypted with the stack's customer key when EncryptWithCustomerKey is true.
    KMS_ACTIONS: ClassVar[frozenset[str]] = frozenset({"kms:Decrypt", "kms:GenerateDataKey"})

    def __init__(self, client: Any, table_name: str, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self._client = client
        self._table = table_name
        self._ttl = ttl_seconds

    def claim(self, key: str, owner: str, now: datetime, hold_seconds: float) -> Claim:
        at = now.timestamp()
        item = {
            "id": {"S": key},
            "status": {"S": IN_PROGRESS},
            "owner": {"S": owner},
            "in_progress_until": {"N": str(math.ceil(at + max(hold_seconds, 0.0)))},
            "expiration": {"N": str(math.ceil(at) + self._ttl)},
        }
        try:
            answer = self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=_CLAIMABLE,
                ExpressionAttributeNames=_NAMES,
                ExpressionAttributeValues={
                    ":now": {"N": str(math.floor(at))},
                    ":failed": {"S": FAILED},
                    ":owner": {"S": owner},
                },
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if _conditional_failure(exc):
                return Claim(granted=False)
            raise AdapterError(f"DynamoDB PutItem (claim {key}) failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"DynamoDB PutItem (claim {key}) failed: {exc}") from exc
        old: dict[str, Any] = answer.get("Attributes") or {}
        if old.get("status", {}).get("S") != FAILED:
            return Claim(granted=True)
        done = frozenset(v["S"] for v in old.get("done", {}).get("L", []) if isinstance(v, dict) and "S" in v)
        return Claim(granted=True, done=done)

    def release(self, key: str, owner: str, now: datetime, done: Sequence[str]) -> None:
        item = {
            "id": {"S": key},
            "status": {"S": FAILED},
            "owner": {"S": owner},
            "in_progress_until": {"N": str(math.floor(now.timestamp()))},
            "done": {"L": [{"S": effect} for effect in done]},
            "expiration": {"N": str(math.ceil(now.timestamp()) + self._ttl)},
        }
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="#o = :owner",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        except ClientError as exc:
            if _conditional_failure(exc):  # another delivery took the key over meanwhile: it is theirs now
                logger.warning("delivery claim taken over; not released", delivery=key)
                return
            raise AdapterError(f"DynamoDB PutItem (release {key}) failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"DynamoDB PutItem (release {key}) failed: {exc}") from exc
