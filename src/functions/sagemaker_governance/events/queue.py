"""Deliveries through an SQS queue (issue 16 item 2): both event-driven functions read one; a batch is told
from a direct event (an EventBridge or SNS event, still accepted)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.parser.models import SqsModel


def sqs_bodies(raw_event: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``(messageId, body)`` of each record when ``raw_event`` is an SQS batch (an event source mapping's
    invocation), ``None`` when it is not one. Raises ``pydantic.ValidationError`` for a malformed batch."""
    records = raw_event.get("Records") if isinstance(raw_event, Mapping) else None
    if not isinstance(records, list) or not records:
        return None
    first = records[0]
    if not isinstance(first, Mapping) or first.get("eventSource") != "aws:sqs":
        return None
    batch = SqsModel.model_validate(raw_event)
    return [(record.messageId, str(record.body)) for record in batch.Records]
