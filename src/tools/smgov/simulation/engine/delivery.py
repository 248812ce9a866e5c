"""Event delivery: how the platform brings events to the service's functions, faults included.

- EventBridge: a SageMaker state-change event goes to every function whose rule pattern matches;
- SNS: a message goes to every function subscribed to the topic (filter policies applied), in the
  Lambda SNS event shape;
- schedules: ``rate(...)`` rules fire on the virtual clock;
- Lambda's asynchronous invocation: a failing invocation is retried ``MaximumRetryAttempts`` times (with
  its request id), then goes to the on-failure destination (or dead-letter queue), else it is lost;
- an SQS queue between a source and a function (a rule target or an SNS subscription with protocol
  ``sqs`` read by an event source mapping): the function receives SQS batches of one record (with the
  ``batch`` fault, of every record ready at the same time, up to the mapping's ``BatchSize``); a failed
  record (exception, or listed in the partial batch response) is received again when its visibility
  timeout has passed (the queue's ``VisibilityTimeout``, or the one the function set while the record was
  in flight: ``InFlight`` answers the function's ``ChangeMessageVisibility(Batch)`` calls), up to the
  queue's ``maxReceiveCount``, then the redrive policy dead-letters it. A function that dies (the crash
  fault) answers nothing and changes no visibility: its record comes back after the queue's timeout.

With ``--faults`` (``faults.py``) events and messages are duplicated, held back (reordered) or, for
state-change events, dropped before delivery; crashes and throttles strike inside the invocation.

**Batches** (the ``batch`` fault). An event source mapping polls its queue and invokes the function with a
batch of up to ``BatchSize`` records (botocore's Lambda model, ``CreateEventSourceMapping``: "The maximum
number of records in each batch that Lambda pulls from your stream or queue and sends to your function"; the
Lambda developer guide, *Using Lambda with Amazon SQS*: Lambda reads the messages in batches and invokes the
function once for each batch), and a standard queue keeps no order (SQS developer guide: best-effort
ordering). So records of the same job (its Starting and Training events, an event and its duplicate) may
share one invocation, in any order. With the fault a queued record is not received at once: the records
ready at the same moment (those every job change, alarm, schedule or redelivery of the minute caused, once
nothing else is left to deliver) are received together, per function and queue, in batches of up to the
template's ``BatchSize`` (``QueueDelivery.batch_size``); with the fault's rate a batch comes in another order
than its records were sent (shuffled). The function answers for the batch: an exception or a death fails
every record of it, a partial batch response the records it names (an identifier that is none of the
batch's fails them all, as Lambda does), and the others are deleted. Each failed record comes back on its
own visibility timeout, to be batched with whatever is ready then. A batch is one invocation
(``invocations``); ``deliveries`` still count records.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import json
import math
import os
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders
from moto.core.botocore_stubber import MockRawResponse

from smgov.simulation.deploy import DeployedFunction, Deployment, QueueDelivery, flatten
from smgov.simulation.engine.clock import Uuids, VirtualClock
from smgov.simulation.engine.counters import Counters, Invocation, SnsMessage
from smgov.simulation.faults import ANSWERED_URL, CrashingAuditSink, DroppedEvent, FaultInjector, InjectedCrash
from smgov.simulation.harness import ACCOUNT, REGION, LocalContext
from smgov.simulation.messages import (
    is_state_change,
    scheduled_event,
    sns_lambda_event,
    sns_record,
    sqs_lambda_event,
    sqs_record,
)

MAX_INVOCATIONS_PER_MINUTE = 20_000
# (function, what it receives: the Lambda SNS event, or the queue's message body; the queue between)
SnsDelivery = list[tuple[DeployedFunction, Any, QueueDelivery | None]]
# Wraps each delivery to a function (all its attempts): (function, event, trigger) -> context manager.
InvocationHook = Callable[[DeployedFunction, Any, str], contextlib.AbstractContextManager[Any]]


class SimulationError(RuntimeError):
    pass


@dataclass(frozen=True)
class QueuedRecord:
    """An SQS record on its way to a function: its body, id and how many times it has been received."""

    function: DeployedFunction
    trigger: str
    queue: QueueDelivery
    body: str
    message_id: str
    receive_count: int = 1


# ChangeMessageVisibility's VisibilityTimeout: "Values range: 0 to 43200" (botocore's SQS model).
MAX_VISIBILITY_SECONDS = 43_200
_VISIBILITY_OPERATIONS = ("ChangeMessageVisibility", "ChangeMessageVisibilityBatch")


class InFlight:
    """The simulated queues' records in flight, and SQS's answer to a function that changes their visibility.

    A record is in flight from its receive until the function's answer; ``ChangeMessageVisibility`` (and its
    batch form) with the receipt handle of that receive and the queue's URL sets the timeout the record is
    received again after (SQS API reference: the new timeout counts from the call; a later receive reverts to
    the queue's). Anything else is refused as SQS would: another receive's handle or another queue's URL
    (``ReceiptHandleIsInvalid``), a timeout outside 0..43,200 s (``InvalidParameterValue``). Answered in
    botocore's send loop, after the throttle fault's draw, so a throttled call is retried by the client's
    own configuration like any other."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[str, int | None]] = {}  # receipt handle -> (queue URL, timeout set)
        self.throttle: Callable[[Any], AWSResponse | None] | None = None  # the throttle fault, when injected

    def install(self, session_events: Any) -> None:
        """On the session the handlers' clients are made from."""
        for operation in _VISIBILITY_OPERATIONS:
            session_events.register_first(f"before-send.sqs.{operation}", self._send)

    def received(self, receipt_handle: str, queue_url: str) -> None:
        self._records[receipt_handle] = (queue_url, None)

    def answered(self, receipt_handle: str) -> int | None:
        """The record's invocation answered: the visibility timeout it set (seconds; None: the queue's)."""
        _, seconds = self._records.pop(receipt_handle, ("", None))
        return seconds

    def change(self, queue_url: str, receipt_handle: str, seconds: Any) -> str | None:
        """One change; the error code SQS answers (None: changed)."""
        record = self._records.get(receipt_handle)
        if record is None or record[0] != queue_url:
            return "ReceiptHandleIsInvalid"
        if not isinstance(seconds, int) or not 0 <= seconds <= MAX_VISIBILITY_SECONDS:
            return "InvalidParameterValue"
        self._records[receipt_handle] = (queue_url, seconds)
        return None

    def _send(self, request: Any, **_: Any) -> AWSResponse | None:
        if self.throttle is not None:
            throttled = self.throttle(request)
            if throttled is not None:
                return throttled
        url, request.url = request.url, ANSWERED_URL
        params = json.loads(request.body or b"{}")
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        if "Entries" in params:  # ChangeMessageVisibilityBatch: each entry answered on its own
            answer: dict[str, Any] = {"Successful": [], "Failed": []}
            for entry in params["Entries"]:
                code = self.change(
                    params.get("QueueUrl", ""), entry.get("ReceiptHandle", ""), entry.get("VisibilityTimeout")
                )
                if code is None:
                    answer["Successful"].append({"Id": entry["Id"]})
                else:
                    answer["Failed"].append(
                        {"Id": entry["Id"], "SenderFault": True, "Code": code, "Message": code}
                    )
            return AWSResponse(url, 200, headers, MockRawResponse(json.dumps(answer).encode()))
        code = self.change(
            params.get("QueueUrl", ""), params.get("ReceiptHandle", ""), params.get("VisibilityTimeout")
        )
        if code is None:
            return AWSResponse(url, 200, headers, MockRawResponse(b"{}"))
        headers["x-amzn-query-error"] = f"{code};Sender"
        body = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": code}).encode()
        return AWSResponse(url, 400, headers, MockRawResponse(body))


class Delivery:
    def __init__(
        self,
        *,
        clock: VirtualClock,
        uuids: Uuids,
        counters: Counters,
        faults: FaultInjector,
        stack_name: str,
        after_invocation: Callable[[], None],
    ) -> None:
        self.clock = clock
        self.uuids = uuids
        self.counters = counters
        self.faults = faults
        self.stack_name = stack_name
        self.after_invocation = after_invocation  # the simulator applies what the service did
        self.deployment: Deployment | None = None  # set when the account is up (governed runs only)
        self.crasher: CrashingAuditSink | None = None
        self.environment: dict[str, str] = {}  # the process environment the last invocation ran with
        self.hooks: list[InvocationHook] = []
        self.in_flight = InFlight()  # the queued records being received (their visibility changes)
        self.watches_training = False  # some function receives Training events
        self._events: list[dict[str, Any]] = []
        self._sns: list[SnsMessage] = []
        self._held: list[tuple[int, int, str, Any]] = []  # (due minute, seq, kind, item): late deliveries
        self._seq = 0
        self._schedules: list[tuple[int, DeployedFunction, str, int]] = []  # (due, function, name, every)
        self._invocations_now = 0
        self._invocation_minute = -1
        self.batching = faults.spec.rate("batch") > 0  # records ready together are received together
        self._ready: list[QueuedRecord] = []  # batching: records received at the next flush (``_receive_ready``)
        self.batch_sizes: list[int] = []  # batching: the number of records of each batch received

    # ---- queues --------------------------------------------------------------------------------

    def event(self, event: dict[str, Any]) -> None:
        """An EventBridge event is put on the bus."""
        self._events.append(event)

    def sns(self, message: SnsMessage) -> None:
        """A message is published to an SNS topic."""
        self._sns.append(message)

    @property
    def pending(self) -> bool:
        """Late deliveries are still held back (or, batching, records wait for their batch)."""
        return bool(self._held) or bool(self._ready)

    def next_held(self) -> int | None:
        return self._held[0][0] if self._held else None

    # ---- schedules -----------------------------------------------------------------------------

    def add_schedules(self, deployment: Deployment) -> None:
        for function in deployment.functions.values():
            for name, every in function.schedules:
                self._schedules.append((every, function, name, every))

    @property
    def longest_schedule(self) -> int:
        return max((every for _, _, _, every in self._schedules), default=0)

    def next_schedule(self) -> int | None:
        return min(s[0] for s in self._schedules) if self._schedules else None

    def run_schedules(self, minute: int) -> None:
        for index, (due, function, name, every) in enumerate(list(self._schedules)):
            if due <= minute:
                self._schedules[index] = (minute + every, function, name, every)
                rule = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self.stack_name}-{function.logical_id}{name}"
                event = scheduled_event(
                    rule, event_id=self.uuids.next(), time=self.clock(), region=REGION, account=ACCOUNT
                )
                self.invoke(function, event, f"schedule:{name}")
                self.deliver()

    # ---- delivery ------------------------------------------------------------------------------

    def deliver(self, *, receive: bool = True) -> None:
        """Deliver what is queued: EventBridge events, then SNS messages, then late deliveries now due, then
        (batching) the queued records ready, in batches; ``receive=False`` leaves those ready for a later
        call in the same minute, so that the records of several job changes can share a batch."""
        if self.deployment is None:
            return
        while True:
            if self._events:
                self._deliver_event(self._events.pop(0), faulty=True)
            elif self._sns:
                self._deliver_sns(self._sns.pop(0), faulty=True)
            elif self._held and self._held[0][0] <= self.clock.now:
                _, _, kind, item = heapq.heappop(self._held)
                if kind == "event":
                    self._deliver_event(item, faulty=False)
                elif kind == "sqs":
                    self._redeliver(item)
                else:
                    self._send_sns(*item)
            elif self._ready and receive:
                self._receive_ready()
            else:
                return

    def _hold(self, kind: str, item: Any, delay: int) -> None:
        self._seq += 1
        heapq.heappush(self._held, (self.clock.now + delay, self._seq, kind, item))

    def _deliver_event(self, event: dict[str, Any], *, faulty: bool) -> None:
        assert self.deployment is not None
        flat = flatten(event)
        targets = [
            (function, route)
            for function in self.deployment.functions.values()
            for route in function.event_routes
            if route.matches(event, flat)
        ]
        state_change = is_state_change(event)
        if targets and state_change and event["detail"].get("SecondaryStatus") == "Training":
            self.watches_training = True
        if faulty:
            if state_change and self.faults.draw("drop"):
                self.faults.injected["drop"] += 1  # EventBridge lost it: no target is invoked
                detail = event["detail"]
                self.faults.dropped.append(
                    DroppedEvent(
                        self.clock.now,
                        detail["TrainingJobName"],
                        detail["TrainingJobStatus"],
                        detail.get("SecondaryStatus") or "",
                    )
                )
                return
            if self.faults.draw("reorder"):
                self.faults.injected["reorder"] += 1
                self._hold("event", event, self.faults.delay("reorder", 1))
                return
            if state_change and self.faults.draw("duplicate"):
                self.faults.injected["duplicate"] += 1
                copy = dict(event)
                if self.faults.coin("duplicate"):  # SageMaker's repeated emission: same change, new id
                    copy["id"] = self.uuids.next()
                self._hold("event", copy, self.faults.delay("duplicate", 0))
        for function, route in targets:
            self.invoke(function, event, f"rule:{route.name}", route.queue)

    def _deliver_sns(self, item: SnsMessage, *, faulty: bool) -> None:
        assert self.deployment is not None
        topic, subject, message, attributes = item
        self.counters.notifications[topic.rsplit(":", 1)[-1]] += 1
        deliveries: SnsDelivery = [
            (
                function,
                self.sns_event(topic, subject, message, attributes)
                if sns_route.queue is None
                else self.sns_notification(topic, subject, message, attributes, sns_route.queue),
                sns_route.queue,
            )
            for function in self.deployment.functions.values()
            for sns_route in function.sns_routes
            if sns_route.topic_arn == topic and sns_route.matches(attributes, message)
        ]
        if faulty and deliveries:
            if self.faults.draw("reorder"):
                self.faults.injected["reorder"] += 1
                self._hold("sns", (deliveries,), self.faults.delay("reorder", 1))
                return
            if self.faults.draw("duplicate"):  # SNS redelivers: the same MessageId
                self.faults.injected["duplicate"] += 1
                self._hold("sns", (deliveries,), self.faults.delay("duplicate", 0))
        self._send_sns(deliveries)

    def _send_sns(self, deliveries: SnsDelivery) -> None:
        for function, envelope, queue in deliveries:
            self.invoke(function, envelope, "sns", queue)

    def sns_notification(
        self, topic: str, subject: str | None, message: str, attributes: Mapping[str, Any], queue: QueueDelivery
    ) -> Any:
        """What SNS sends an SQS subscriber: the message itself (raw delivery), else the JSON notification."""
        if queue.raw_message_delivery:
            return message
        record = self.sns_event(topic, subject, message, attributes)["Records"][0]["Sns"]
        record["SigningCertURL"] = record.pop("SigningCertUrl")  # as SNS spells them for SQS
        record["UnsubscribeURL"] = record.pop("UnsubscribeUrl")
        return record

    def sns_event(
        self, topic: str, subject: str | None, message: str, attributes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The event SNS delivers to one subscribed function (one record)."""
        subscription = self.uuids.next()
        record = sns_record(
            topic,
            message,
            subject=subject,
            subscription_id=subscription,
            message_id=self.uuids.next(),
            timestamp=self.clock(),
            attributes=attributes,
        )
        return sns_lambda_event([record])

    # ---- Lambda --------------------------------------------------------------------------------

    def invoke(
        self, function: DeployedFunction, event: Any, trigger: str, queue: QueueDelivery | None = None
    ) -> None:
        """Invoke ``function`` with ``event`` (through ``queue``: ``event`` is the message body, sent as
        SQS records; batching, the hooks wrap the batch's invocation instead)."""
        if queue is not None and self.batching:
            self._invoke(function, event, trigger, queue)
            return
        with contextlib.ExitStack() as hooks:
            for hook in self.hooks:
                hooks.enter_context(hook(function, event, trigger))
            self._invoke(function, event, trigger, queue)

    def _invoke(self, function: DeployedFunction, event: Any, trigger: str, queue: QueueDelivery | None) -> None:
        now = self.clock.now
        if self._invocation_minute != now:
            self._invocation_minute, self._invocations_now = now, 0
        self._invocations_now += 1
        if self._invocations_now > MAX_INVOCATIONS_PER_MINUTE:
            raise SimulationError(f"more than {MAX_INVOCATIONS_PER_MINUTE} invocations at minute {now}: a loop?")
        self._environment(function)
        counters = self.counters
        counters.deliveries["delivered"] += 1
        if queue is not None:  # the queue's redrive policy, not Lambda's asynchronous retries
            body = event if isinstance(event, str) else json.dumps(event)
            record = QueuedRecord(function, trigger, queue, body, self.uuids.next())
            if self.batching:
                self._ready.append(record)
            else:
                self._receive([record])
            return
        request_id = self.uuids.next()  # Lambda's retries of an asynchronous invocation keep its request id
        for attempt in range(function.retries + 1):
            counters.invocations[function.logical_id] += 1
            error = self._attempt(function, event, request_id=request_id)
            self.after_invocation()
            if error is None:
                counters.deliveries["processed"] += 1
                return
            counters.errors.append(
                Invocation(self.clock.now, function.logical_id, trigger, f"attempt {attempt + 1}: {error}")
            )
        self._give_up(function.on_failure)

    def _environment(self, function: DeployedFunction) -> None:
        """The process environment ``function`` runs with (``Globals`` merged with its own)."""
        changed = {k: v for k, v in function.environment.items() if self.environment.get(k) != v}
        if changed:
            os.environ.update(changed)
            self.environment.update(changed)

    def _receive(self, records: list[QueuedRecord]) -> None:
        """One receive of a batch of SQS records (of one function and queue) by the event source mapping. A
        failed record stays in the queue and becomes visible again when its visibility timeout expires
        ("Handling errors for an SQS event source in Lambda", Lambda developer guide): the queue's, or the one
        the function set while the record was in flight (``InFlight``); it is received again then (on the
        minute clock: the next whole minute at the earliest), until the redrive policy's ``maxReceiveCount``
        moves it to the dead-letter queue. An exception (or a death) fails the whole batch, a partial batch
        response the records it names."""
        counters, function, queue = self.counters, records[0].function, records[0].queue
        counters.invocations[function.logical_id] += 1
        self._environment(function)
        event = self._sqs_event(queue, records)
        handles = [sqs["receiptHandle"] for sqs in event["Records"]]
        for handle in handles:
            self.in_flight.received(handle, queue.queue_url)
        named: list[str] = []
        error = self._attempt(function, event, queue, failed_items=named)
        changed = [self.in_flight.answered(handle) for handle in handles]
        self.after_invocation()
        ids = {record.message_id for record in records}
        whole = error is not None and (not named or not set(named) <= ids)  # every record of the batch failed
        for record, seconds in zip(records, changed, strict=True):
            if error is None or not (whole or record.message_id in named):
                counters.deliveries["processed"] += 1
                continue
            assert error is not None
            self._failed(record, error, seconds)

    def _failed(self, record: QueuedRecord, error: str, changed: int | None) -> None:
        """``record`` failed its receive: received again after its visibility timeout, or dead-lettered."""
        counters, function, queue = self.counters, record.function, record.queue
        counters.errors.append(
            Invocation(
                self.clock.now,
                function.logical_id,
                record.trigger,
                f"attempt {record.receive_count}: {error}",
                record.message_id,
            )
        )
        if record.receive_count < (queue.max_receive_count or function.retries + 1):
            counters.deliveries["redelivered"] += 1
            later = replace(record, receive_count=record.receive_count + 1)
            seconds = queue.visibility_timeout_seconds if changed is None else changed
            self._hold("sqs", later, max(1, math.ceil(seconds / 60)))
            return
        self._give_up(queue.dead_letter_arn)

    def _redeliver(self, record: QueuedRecord) -> None:
        if self.batching:
            self._ready.append(record)
            return
        with contextlib.ExitStack() as hooks:
            for hook in self.hooks:
                hooks.enter_context(hook(record.function, record.body, record.trigger))
            self._receive([record])

    def _receive_ready(self) -> None:
        """Batching: the records ready now, received per function and queue in batches of up to the mapping's
        ``BatchSize``, in the order they were sent unless the fault's draw shuffles a batch."""
        ready, self._ready = self._ready, []
        groups: dict[tuple[str, str], list[QueuedRecord]] = {}
        for record in ready:
            groups.setdefault((record.function.logical_id, record.queue.queue_arn), []).append(record)
        for records in groups.values():
            size = max(1, records[0].queue.batch_size)
            for first in range(0, len(records), size):
                batch = records[first : first + size]
                if len(batch) > 1 and self.faults.draw("batch"):
                    self.faults.injected["batch"] += 1
                    self.faults.shuffle("batch", batch)
                self.batch_sizes.append(len(batch))
                with contextlib.ExitStack() as hooks:
                    for record in batch:
                        for hook in self.hooks:
                            hooks.enter_context(hook(record.function, record.body, record.trigger))
                    self._receive(batch)

    def _give_up(self, on_failure: str | None) -> None:
        if on_failure:
            self.counters.deliveries["dead_lettered"] += 1
            self.counters.notifications["dead-letter-queue"] += 1
        else:  # no on-failure destination and no dead-letter queue: Lambda discards the event
            self.counters.deliveries["lost"] += 1

    def _sqs_event(self, queue: QueueDelivery, records: list[QueuedRecord]) -> dict[str, Any]:
        """An event source mapping's invocation: a batch of SQS records (of one, unless batching)."""
        return sqs_lambda_event(
            sqs_record(
                queue.queue_arn,
                record.body,
                message_id=record.message_id,
                sent_at=self.clock(),
                receive_count=record.receive_count,
            )
            for record in records
        )

    def _attempt(
        self,
        function: DeployedFunction,
        event: Mapping[str, Any],
        queue: QueueDelivery | None = None,
        *,
        request_id: str | None = None,
        failed_items: list[str] | None = None,
    ) -> str | None:
        """One invocation attempt; the error it ended with (None: success, or for a queue no record in
        the partial batch response's ``batchItemFailures``, whose ``itemIdentifier``s go to ``failed_items``). An injected crash (``InjectedCrash``) is the
        function's death, not an error it raised: nothing of the function caught it (no answer, no
        visibility changed), and Lambda counts the invocation failed: a queued record (its whole batch)
        comes back after the queue's timeout, an asynchronous invocation is retried."""
        context = LocalContext(
            function_name=function.function_name, aws_request_id=request_id or self.uuids.next()
        )
        if self.crasher is not None:
            self.crasher.arm()
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # Powertools: "no application metrics"
                response = function.handler(json.loads(json.dumps(event)), context)
            failed = response.get("batchItemFailures") if isinstance(response, Mapping) else None
            if queue is not None and queue.reports_item_failures and failed:
                if failed_items is not None:
                    failed_items += [str(item.get("itemIdentifier") or "") for item in failed]
                return "the record is in the partial batch response's batchItemFailures"
            return None
        except (Exception, InjectedCrash) as exc:
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            frames = traceback.extract_tb(exc.__traceback__)
            if frames:
                error += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})"
            return error
        finally:
            if self.crasher is not None:
                self.crasher.disarm()
