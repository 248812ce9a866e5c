"""Reading what lands in the dead-letter queue, whichever path put it there.

Three shapes arrive:

- **EventBridge delivery failures** (the rule's ``DeadLetterConfig``): the body is the original event;
  message attributes ``RULE_ARN``, ``TARGET_ARN``, ``ERROR_CODE``, ``ERROR_MESSAGE`` say what failed.
  The target is a function, or (the job-events rules) the job-events queue.
- **Records a function failed ``maxReceiveCount`` times** (a source queue's redrive policy: the
  job-events and alarm queues): the body is the message as it was in the source queue (an EventBridge
  event, or an SNS notification). The system attribute ``DeadLetterQueueSourceArn`` (in SQS's API
  model) names that queue; without it, the body's shape does (``default_queues``: the stack's
  job-events queue for an EventBridge event, its alarm queue for an SNS notification, which is also
  what an alarm-queue subscription's delivery failure holds).
- **Audit records not forwarded** (one audit view, issue 21): a record the function's ``PutEvents`` to the
  stack's audit bus failed (adapters/audit_forwarder.py: the body is the ``PutEvents`` entry, attributes
  ``SMGOV_AUDIT_FORWARD_ERROR`` and ``SMGOV_AUDIT_BUS``), or an event the forwarding rule could not
  deliver to the central bus (an EventBridge delivery failure whose target is an event bus; the rule's
  ARN names the stack's audit bus). Both are redriven by putting the event on the stack's audit bus
  again, whose rule forwards it.
- **Audit records the central log group refused** (the audit account's central dead-letter queue,
  org/audit-account.yaml): an EventBridge delivery failure whose target is a CloudWatch Logs log group. It
  is redriven by writing the event into that log group as the rule's target writes it (the whole event as
  the message, its ``time`` as the timestamp), which keeps the member's ``account``; re-putting it on the
  central bus would make the audit account its sender.
- **Lambda asynchronous invocation failures** (``EventInvokeConfig`` on-failure destination: the
  reconciler): the body is an invocation record with ``requestContext.functionArn``, ``requestPayload``
  (the original event) and ``responsePayload`` (``errorType``, ``errorMessage``).

Each gives back the original payload and where to redrive it: the function (invoked again), the log
group (written again), or the source queue (the body sent to it again, so the event source mapping delivers it like the first time;
a record the function failed keeps its delivery owner, ``DeadLetter.owner``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.reconcile import job_of_alarm
from sagemaker_governance.events.queue import DELIVERY_OWNER_ATTRIBUTE


class DeadLetter(BaseModel):
    model_config = ConfigDict(frozen=True)

    message_id: str
    receipt_handle: str
    source: Literal["eventbridge", "lambda", "queue", "audit-forward", "audit-log", "unknown"]
    function_arn: str | None
    error: str
    payload: Any
    job_name: str | None
    attempts: int | None = None
    queue_arn: str | None = None  # redrive by sending ``body`` to this queue (instead of invoking)
    bus: str | None = None  # redrive by putting the event (``entry``) on this event bus (an audit record)
    entry: dict[str, Any] | None = None  # the PutEvents entry to put on ``bus``
    # redrive by writing ``body`` into this log group (ARN) at ``log_timestamp`` (epoch milliseconds): a record
    # the central audit rule could not write (None when the event has no readable time: not redrivable)
    log_group: str | None = None
    log_timestamp: int | None = None
    body: str = ""
    # The delivery ledger's owner of a record the function failed (``events/queue.py``): its original message
    # id, which a redrive carries (SendMessage gives the copy a new one) so that the copy takes over the claim
    # its dead attempts left, instead of being a duplicate of them. None: not a record we received.
    owner: str | None = None

    @property
    def redrivable(self) -> bool:
        if self.bus is not None:
            return self.entry is not None
        if self.log_group is not None:
            return self.log_timestamp is not None and bool(self.body)
        return (self.function_arn is not None or self.queue_arn is not None) and self.payload is not None

    @property
    def target(self) -> str | None:
        return self.bus or self.log_group or self.queue_arn or self.function_arn


def _attribute(attributes: Mapping[str, Any], name: str) -> str | None:
    value = attributes.get(name)
    if isinstance(value, Mapping):
        text = value.get("StringValue")
        return str(text) if text is not None else None
    return None


def _alarm_job(message: Any, alarm_prefix: str | None) -> str | None:
    """The job of the alarm an SNS notification's ``Message`` (CloudWatch's alarm JSON) names, as the service
    reads an alarm name (``job_of_alarm``); None without the stack's prefix or a readable alarm name. The
    notification's ``Subject`` (``ALARM: "<alarm>" in <region>``) is CloudWatch's text, not a job."""
    if alarm_prefix is None or not isinstance(message, str):
        return None
    try:
        alarm = json.loads(message)
    except (ValueError, RecursionError):
        return None
    name = alarm.get("AlarmName") if isinstance(alarm, Mapping) else None
    return job_of_alarm(name, alarm_prefix) if isinstance(name, str) else None


def _job_name(payload: Any, alarm_prefix: str | None) -> str | None:
    if not isinstance(payload, Mapping):
        return None
    detail = payload.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("TrainingJobName"), str):
        return str(detail["TrainingJobName"])
    records = payload.get("Records")
    if isinstance(records, list) and records and isinstance(records[0], Mapping):
        sns = records[0].get("Sns")
        if isinstance(sns, Mapping):
            return _alarm_job(sns.get("Message"), alarm_prefix)
    if payload.get("Type") == "Notification":  # an SNS notification as SQS receives it
        return _alarm_job(payload.get("Message"), alarm_prefix)
    return None


def _is_queue(arn: str | None) -> bool:
    return bool(arn) and str(arn).split(":")[2:3] == ["sqs"]


def _is_bus(arn: str | None) -> bool:
    return bool(arn) and str(arn).split(":")[2:3] == ["events"] and ":event-bus/" in str(arn)


def _is_log_group(arn: str | None) -> bool:
    parts = str(arn or "").split(":")
    return parts[2:3] == ["logs"] and parts[5:6] == ["log-group"] and len(parts) >= 7


def log_group_name(arn: str) -> str:
    """``arn:aws:logs:<region>:<account>:log-group:<name>[:*]`` -> ``<name>``."""
    return arn.split(":log-group:", 1)[1].removesuffix(":*")


def _event_millis(event: Any) -> int | None:
    """An EventBridge event's ``time`` (``2026-11-28T10:00:00Z``) in epoch milliseconds (None: none)."""
    text = event.get("time") if isinstance(event, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _audit_entry(event: Any, bus: str) -> dict[str, Any] | None:
    """The PutEvents entry that puts a forwarded audit event back on ``bus`` (None: not such an event)."""
    if not isinstance(event, Mapping) or not isinstance(event.get("detail"), Mapping):
        return None
    return {
        "Source": str(event.get("source", "")),
        "DetailType": str(event.get("detail-type", "")),
        "Detail": json.dumps(event["detail"], sort_keys=True, separators=(",", ":")),
        "EventBusName": bus,
        "Resources": [str(r) for r in event.get("resources") or []],
    }


def _audit_job(detail: Any) -> str | None:
    audit = detail.get("audit") if isinstance(detail, Mapping) else None
    return (
        str(audit["job_name"]) if isinstance(audit, Mapping) and isinstance(audit.get("job_name"), str) else None
    )


def _shape(body: Any) -> str | None:
    if isinstance(body, Mapping) and "detail-type" in body and "detail" in body:
        return "eventbridge"
    if isinstance(body, Mapping) and body.get("Type") == "Notification" and "Message" in body:
        return "sns"
    return None


def parse_dead_letter(
    message: Mapping[str, Any], default_queues: Mapping[str, str] | None = None, alarm_prefix: str | None = None
) -> DeadLetter:
    """An SQS message (as ``ReceiveMessage`` returns it) to a ``DeadLetter``; never raises on odd bodies.

    ``default_queues``: body shape (``eventbridge``, ``sns``) -> the queue such a message came from, for
    a message without ``DeadLetterQueueSourceArn``. ``alarm_prefix``: the stack's idle alarm prefix, which
    names the job of a dead-lettered alarm notification (None: its job is not known)."""
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
        "body": body_text,
    }
    raw_system = message.get("Attributes")
    source_queue = raw_system.get("DeadLetterQueueSourceArn") if isinstance(raw_system, Mapping) else None
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
            job_name=_job_name(payload, alarm_prefix),
            attempts=int(attempts) if isinstance(attempts, int) else None,
        )
    forward_error = _attribute(attributes, "SMGOV_AUDIT_FORWARD_ERROR")
    if forward_error is not None and isinstance(body, Mapping):
        bus = _attribute(attributes, "SMGOV_AUDIT_BUS") or str(body.get("EventBusName", ""))
        entry = {k: body[k] for k in ("Source", "DetailType", "Detail", "Resources") if k in body}
        try:
            detail = json.loads(str(body.get("Detail", "")))
        except ValueError:
            detail = None
        return DeadLetter(
            **common,
            source="audit-forward",
            function_arn=None,
            error=f"audit record not put on {bus}: {forward_error}",
            payload=body,
            job_name=_audit_job(detail),
            bus=bus or None,
            entry={**entry, "EventBusName": bus} if bus else None,
        )
    target = _attribute(attributes, "TARGET_ARN")
    rule = _attribute(attributes, "RULE_ARN")
    if _is_bus(target) and rule is not None and rule.count("/") == 2:
        # the forwarding rule (on the stack's audit bus: rule/<bus>/<rule>) could not reach the central bus
        own_bus = rule.split("/")[1]
        code = _attribute(attributes, "ERROR_CODE") or "Error"
        return DeadLetter(
            **common,
            source="audit-forward",
            function_arn=None,
            error=f"not delivered to the central audit bus {target}: {code}: "
            f"{_attribute(attributes, 'ERROR_MESSAGE') or ''}".strip(),
            payload=body,
            job_name=_audit_job(body.get("detail") if isinstance(body, Mapping) else None),
            bus=own_bus,
            entry=_audit_entry(body, own_bus),
        )
    if _is_log_group(target):
        # the central audit rule (org/audit-account.yaml) could not write a member's record to its log group
        code = _attribute(attributes, "ERROR_CODE") or "Error"
        millis = _event_millis(body)
        return DeadLetter(
            **common,
            source="audit-log",
            function_arn=None,
            error=f"not written to the central log group {target}: {code}: "
            f"{_attribute(attributes, 'ERROR_MESSAGE') or ''}".strip()
            + ("" if millis is not None else " (the event has no time to write it at: not redrivable)"),
            payload=body,
            job_name=_audit_job(body.get("detail") if isinstance(body, Mapping) else None),
            log_group=target,
            log_timestamp=millis,
        )
    if target is not None or rule is not None:
        code = _attribute(attributes, "ERROR_CODE") or "Error"
        return DeadLetter(
            **common,
            source="eventbridge",
            function_arn=None if _is_queue(target) else target,
            queue_arn=target if _is_queue(target) else None,
            error=f"{code}: {_attribute(attributes, 'ERROR_MESSAGE') or ''}".strip(),
            payload=body,
            job_name=_job_name(body, alarm_prefix),
        )
    shape = _shape(body)
    if not (isinstance(source_queue, str) and _is_queue(source_queue)) and shape in (default_queues or {}):
        source_queue = (default_queues or {})[str(shape)]
    if isinstance(source_queue, str) and _is_queue(source_queue):
        count = raw_system.get("ApproximateReceiveCount") if isinstance(raw_system, Mapping) else None
        return DeadLetter(
            **common,
            source="queue",
            function_arn=None,
            queue_arn=source_queue,
            error="the function failed it on every receive (the source queue's maxReceiveCount)",
            payload=body,
            job_name=_job_name(body, alarm_prefix),
            attempts=int(count) if isinstance(count, str) and count.isdigit() else None,
            # SQS moves the message to the dead-letter queue (its enqueue timestamp unchanged, "Setting-up
            # dead-letter queue retention"): its id is the one the function's claims named, unless an earlier
            # redrive carried the original one
            owner=_attribute(attributes, DELIVERY_OWNER_ATTRIBUTE) or common["message_id"] or None,
        )
    return DeadLetter(
        **common,
        source="unknown",
        function_arn=None,
        error="unrecognised dead letter",
        payload=body,
        job_name=_job_name(body, alarm_prefix),
    )
