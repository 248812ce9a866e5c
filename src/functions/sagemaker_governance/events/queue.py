"""Deliveries through an SQS queue (issue 16 item 2): both event-driven functions read one; a batch is told
from a direct event (an EventBridge or SNS event, still accepted).

A record's *owner* in the delivery ledger (``service/idempotency.py``) is its message id: only the owner's
own retry may take over a claim whose invocation died. A message sent back from the dead-letter queue by
``smgov dlq redrive`` has a new message id (``SendMessage``), so it carries the original one in the message
attribute ``DELIVERY_OWNER_ATTRIBUTE``, and that is its owner: the redriven copy of a record whose every
attempt died (never released) takes their claim over instead of being dropped as a duplicate of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from aws_lambda_powertools.utilities.parser.models import SqsModel

DELIVERY_OWNER_ATTRIBUTE = "SMGOV_DELIVERY_OWNER"


class QueuedRecord(NamedTuple):
    message_id: str  # what the partial batch response names
    body: str
    owner: str  # the delivery ledger's owner: the message id, or the original one a redrive carries
    receipt_handle: str = ""  # this receive's: what changes the record's visibility (adapters/queue.py)
    queue_arn: str = ""  # the queue it was received from (eventSourceARN)
    receive_count: int | None = None  # attributes.ApproximateReceiveCount (None: absent or unreadable)


def sqs_records(raw_event: Mapping[str, Any]) -> list[QueuedRecord] | None:
    """Each record when ``raw_event`` is an SQS batch (an event source mapping's invocation), ``None`` when
    it is not one. Raises ``pydantic.ValidationError`` for a malformed batch."""
    records = raw_event.get("Records") if isinstance(raw_event, Mapping) else None
    if not isinstance(records, list) or not records:
        return None
    first = records[0]
    if not isinstance(first, Mapping) or first.get("eventSource") != "aws:sqs":
        return None
    batch = SqsModel.model_validate(raw_event)
    queued: list[QueuedRecord] = []
    for record in batch.Records:
        carried = record.messageAttributes.get(DELIVERY_OWNER_ATTRIBUTE)
        owner = carried.stringValue if carried is not None and carried.stringValue else record.messageId
        count = record.attributes.ApproximateReceiveCount
        queued.append(
            QueuedRecord(
                record.messageId,
                str(record.body),
                owner,
                receipt_handle=record.receiptHandle,
                queue_arn=record.eventSourceARN,
                receive_count=int(count) if count and str(count).isdigit() else None,
            )
        )
    return queued


def sqs_bodies(raw_event: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``(messageId, body)`` of each record when ``raw_event`` is an SQS batch, ``None`` when it is not one."""
    records = sqs_records(raw_event)
    return None if records is None else [(r.message_id, r.body) for r in records]
