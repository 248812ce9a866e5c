"""The delivery ledger in DynamoDB: one conditional ``UpdateItem`` per delivery (``service/idempotency.py``).

An item per delivery key: ``status`` (``INPROGRESS`` from the claim on; ``FAILED`` after a release;
``COMPLETED`` once marked so),
``owner``, ``token`` (the claiming call's own), ``in_progress_until`` (epoch seconds: the claiming
invocation's end), ``done`` (the effects released attempts of this state change completed) and
``expiration``, the table's TTL attribute (epoch seconds: the TTL past the item's last claim, release or
completion mark; a duplicate's claim, which fails its condition, writes nothing). DynamoDB deletes expired
items within a few days, not at once, so the claim treats an expired item as free
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html).

The claim is an ``UpdateItem`` whose ``ConditionExpression`` admits an absent or expired item, a released one,
or the same owner's claim whose invocation is over and which was not marked completed (a completed
delivery whose SQS record comes back with its batch is a duplicate, not a takeover). It sets the claim's
attributes and leaves ``done`` as it is (the list names effects of this very state change, whoever claims
it next); ``ReturnValues=ALL_OLD`` hands the item back as it was in the same call. A failed condition is DynamoDB's
``ConditionalCheckFailedException``: a duplicate, unless the item it hands back
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``, in botocore's ``UpdateItem`` model: "returns the item
attributes for an UpdateItem operation that failed a condition check", at no extra cost) carries this
claim's own token. botocore's standard retries send a request again after a read timeout or a 5xx, and
DynamoDB may have applied the first attempt: its retry then meets our own claim. Granted, with the
``done`` list kept in the item (a ``PutItem`` claim would have replaced it, and a released attempt's
effects would be lost to that retry).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, cast

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError, Claim
from sagemaker_governance.observability import logger

# How long a delivery's item outlives its last claim, release or completion mark (a duplicate's claim writes
# nothing: the expiration does not move for it). Every copy of a delivery must find the item: a record that failed
# or was returned with its batch (a completed one too) is received again at most every VisibilityTimeout (1,800 s)
# up to maxReceiveCount (5) receives, 9,000 s (a failed record's first two retries come after 60 s and 300 s,
# handlers/_batch.py: that only shortens the span, the bound stands); and EventBridge retries delivering a late copy of an event to the queue
# for MaximumEventAgeInSeconds (3,600 s), whose own receives then span as long again (template.yaml). 12,600 s
# of copies, and a margin: 4 h. tests/infrastructure reads the template's figures against this default.
DEFAULT_TTL_SECONDS = 14_400
IN_PROGRESS, FAILED, COMPLETED = "INPROGRESS", "FAILED", "COMPLETED"
_CLAIM_NAMES = {
    "#k": "id",
    "#s": "status",
    "#o": "owner",
    "#t": "token",
    "#u": "in_progress_until",
    "#e": "expiration",
}
_CLAIMABLE = (
    "attribute_not_exists(#k) OR #e < :now OR #s = :failed OR (#s = :claimed AND #o = :owner AND #u < :now)"
)
_CLAIM = "SET #s = :claimed, #o = :owner, #t = :token, #u = :until, #e = :expires"


def _conditional_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _string(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value.get("S") if isinstance(value, dict) else None


def _done(item: Mapping[str, Any]) -> frozenset[str]:
    listed = item.get("done", {}).get("L", [])
    return frozenset(v["S"] for v in listed if isinstance(v, dict) and "S" in v)


class DeliveryLedger:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"dynamodb:UpdateItem"})
    # The table is encrypted with the stack's customer key when EncryptWithCustomerKey is true.
    KMS_ACTIONS: ClassVar[frozenset[str]] = frozenset({"kms:Decrypt", "kms:GenerateDataKey"})

    def __init__(self, client: Any, table_name: str, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self._client = client
        self._table = table_name
        self._ttl = ttl_seconds

    def claim(self, key: str, owner: str, now: datetime, hold_seconds: float) -> Claim:
        at = now.timestamp()
        token = uuid.uuid4().hex  # this call's own: botocore's retries of it send the same
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"id": {"S": key}},
                UpdateExpression=_CLAIM,
                ConditionExpression=_CLAIMABLE,
                ExpressionAttributeNames=_CLAIM_NAMES,
                ExpressionAttributeValues={
                    ":now": {"N": str(math.floor(at))},
                    ":failed": {"S": FAILED},
                    ":claimed": {"S": IN_PROGRESS},
                    ":owner": {"S": owner},
                    ":token": {"S": token},
                    ":until": {"N": str(math.ceil(at + max(hold_seconds, 0.0)))},
                    ":expires": {"N": str(math.ceil(at) + self._ttl)},
                },
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if not _conditional_failure(exc):
                raise AdapterError(f"DynamoDB UpdateItem (claim {key}) failed: {exc}") from exc
            held: Mapping[str, Any] = cast(Mapping[str, Any], exc.response.get("Item")) or {}
            if _string(held, "token") != token:
                return Claim(granted=False, pending=_string(held, "status") == IN_PROGRESS)
            # Our own claim: an earlier attempt of this very request was applied and its answer lost.
            logger.info("delivery claimed by a retried request", delivery=key, owner=owner)
            return Claim(granted=True, done=_done(held), token=token)
        except BotoCoreError as exc:  # no answer at all (a connection error, a read timeout after the retries)
            raise AdapterError(f"DynamoDB UpdateItem (claim {key}) failed: {exc}") from exc
        return Claim(granted=True, done=_done(answer.get("Attributes") or {}), token=token)

    def complete(self, key: str, token: str, now: datetime) -> None:
        """Mark the claim ``token`` completed: the same owner can no longer take it over (a duplicate
        until the item expires, ``now`` + the TTL: the mark pushes the expiration on, as a claim and a
        release do, since a duplicate's claim writes nothing). Nothing when another claim holds the key."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"id": {"S": key}},
                UpdateExpression="SET #s = :completed, #e = :expires",
                ConditionExpression="#t = :token",  # our claim still (a retry of this call finds it marked: fine)
                ExpressionAttributeNames={"#s": "status", "#t": "token", "#e": "expiration"},
                ExpressionAttributeValues={
                    ":completed": {"S": COMPLETED},
                    ":token": {"S": token},
                    ":expires": {"N": str(math.ceil(now.timestamp()) + self._ttl)},
                },
            )
        except ClientError as exc:
            if _conditional_failure(exc):  # another claim holds the key now (ours had expired): theirs
                logger.info("delivery claim not ours to mark completed", delivery=key)
                return
            raise AdapterError(f"DynamoDB UpdateItem (complete {key}) failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"DynamoDB UpdateItem (complete {key}) failed: {exc}") from exc

    def release(self, key: str, owner: str, now: datetime, done: Sequence[str]) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"id": {"S": key}},
                UpdateExpression="SET #s = :failed, #u = :now, #d = :done, #e = :expires",
                ConditionExpression="#o = :owner",
                ExpressionAttributeNames={
                    "#s": "status",
                    "#o": "owner",
                    "#u": "in_progress_until",
                    "#d": "done",
                    "#e": "expiration",
                },
                ExpressionAttributeValues={
                    ":failed": {"S": FAILED},
                    ":owner": {"S": owner},
                    ":now": {"N": str(math.floor(now.timestamp()))},
                    ":done": {"L": [{"S": effect} for effect in done]},
                    ":expires": {"N": str(math.ceil(now.timestamp()) + self._ttl)},
                },
            )
        except ClientError as exc:
            if _conditional_failure(exc):  # another delivery took the key over meanwhile: it is theirs now
                logger.warning("delivery claim taken over; not released", delivery=key)
                return
            raise AdapterError(f"DynamoDB UpdateItem (release {key}) failed: {exc}") from exc
        except BotoCoreError as exc:
            raise AdapterError(f"DynamoDB UpdateItem (release {key}) failed: {exc}") from exc
