"""Reading what lands in the dead-letter queue, whichever path put it there.

Two shapes arrive:

- **EventBridge delivery failures** (the rule's ``DeadLetterConfig``): the body is the original event;
  message attributes ``RULE_ARN``, ``TARGET_ARN``, ``ERROR_CODE``, ``ERROR_MESSAGE`` say what failed.
- **Lambda asynchronous invocation failures** (``EventInvokeConfig`` on-failure destination): the body
  is an invocation record with ``requestContext.functionArn``, ``requestPayload`` (the original event)
  and ``responsePayload`` (``errorType``, ``errorMessage``).

Both give back the original payload and the function to redrive it to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class DeadLetter(BaseModel):
    model_config = ConfigDict(frozen=True)

    message_id: str
    receipt_handle: str
    source: Literal["eventbridge", "lambda", "unknown"]
    function_arn: str | None
    error: str
    payload: Any
    job_name: str | None
    attempts: int | None = None

    @property
    def redrivable(self) -> bool:
        return self.function_arn is not None and self.payload is not None


def _attribute(attributes: Mapping[str, Any], name: str) -> str | None:
    value = attributes.get(name)
    if isinstance(value, Mapping):
        text = value.get("StringValue")
        return str(text) if text is not None else None
    return None


def _job_name(payload: Any) -> str | None:
    if not isinstance(payload, Mapping):
        return None
    detail = payload.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("TrainingJobName"), str):
        return str(detail["TrainingJobName"])
    records = payload.get("Records")
    if isinstance(records, list) and records and isinstance(records[0], Mapping):
        sns = records[0].get("Sns")
        if isinstance(sns, Mapping) and isinstance(sns.get("Subject"), str):
            return str(sns["Subject"])
    return None


def parse_dead_letter(message: Mapping[str, Any]) -> DeadLetter:
    """An SQS message (as ``ReceiveMessage`` returns it) to a ``DeadLetter``; never raises on odd bodies."""
    body_text = str(message.get("Body") or "")
    raw_attributes = message.get("MessageAttributes")
    attributes: Mapping[str, Any] = raw_attributes if isinstance(raw_attributes, Mapping) else {}
    try:
        body: Any = json.loads(body_text)
    except (ValueError, RecursionError):  # not JSON, an int beyond Python's digit limit, nested too deeply
        body = None
    common = {
        "message_id": str(message.get("MessageId", "")),
        "receipt_handle": str(message.get("ReceiptHandle", "")),
    }
    if isinstance(body, Mapping) and isinstance(body.get("requestContext"), Mapping):
        context = body["requestContext"]
        response = body.get("responsePayload")
        if isinstance(response, Mapping):
            error = f"{response.get('errorType', 'Error')}: {response.get('errorMessage', '')}".strip()
        else:
            response_context = body.get("responseContext")
            function_error = (
                response_context.get("functionError") if isinstance(response_context, Mapping) else None
            )
            error = str(function_error or context.get("condition") or "failed")
        payload = body.get("requestPayload")
        attempts = context.get("approximateInvokeCount")
        return DeadLetter(
            **common,
            source="lambda",
            function_arn=str(context.get("functionArn")) if context.get("functionArn") else None,
            error=error,
            payload=payload,
            job_name=_job_name(payload),
            attempts=int(attempts) if isinstance(attempts, int) else None,
        )
    target = _attribute(attributes, "TARGET_ARN")
    if target is not None or _attribute(attributes, "RULE_ARN") is not None:
        code = _attribute(attributes, "ERROR_CODE") or "Error"
        return DeadLetter(
            **common,
            source="eventbridge",
            function_arn=target,
            error=f"{code}: {_attribute(attributes, 'ERROR_MESSAGE') or ''}".strip(),
            payload=body,
            job_name=_job_name(body),
        )
    return DeadLetter(
        **common,
        source="unknown",
        function_arn=None,
        error="unrecognised dead letter",
        payload=body,
        job_name=_job_name(body),
    )
