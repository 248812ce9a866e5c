"""What a run counts: Lambda invocations and errors, AWS calls by operation, notifications, deliveries.

``ServiceCalls`` is the botocore hook on the handlers' session (the composition root's boto3 session):
it counts every call the service makes and tells the simulator what the service changed that the
simulator must mirror (alarm writes, SNS publishes). The simulator's own calls (alarm reads, state
write-back) use another session and are not counted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# CloudWatch calls that change an alarm, and the request keys naming it.
ALARM_MUTATIONS = {
    "PutMetricAlarm": ("AlarmName",),
    "PutCompositeAlarm": ("AlarmName",),
    "DeleteAlarms": ("AlarmNames",),
    "SetAlarmState": ("AlarmName",),
    "EnableAlarmActions": ("AlarmNames",),
    "DisableAlarmActions": ("AlarmNames",),
}

SnsMessage = tuple[str, str | None, str, dict[str, Any]]  # (topic ARN, subject, message, attributes)
CallListener = Callable[[str, str, Mapping[str, Any]], None]  # (service, operation, request parameters)


@dataclass
class Invocation:
    minute: int
    function: str
    trigger: str
    error: str | None = None
    record: str | None = None  # a queued record's message id (its receives share it)


@dataclass
class Counters:
    invocations: Counter[str] = field(default_factory=Counter)  # by function (every attempt)
    errors: list[Invocation] = field(default_factory=list)
    aws_calls: Counter[str] = field(default_factory=Counter)  # "<service>:<Operation>"
    notifications: Counter[str] = field(default_factory=Counter)  # by topic name (and dead-letter-queue)
    deliveries: Counter[str] = field(default_factory=Counter)  # delivered, processed, dead_lettered, lost


class ServiceCalls:
    """botocore hooks: ``before-parameter-build`` (every call) and ``after-call.sns.Publish``."""

    def __init__(self, counters: Counters, *, published: Callable[[SnsMessage], None]) -> None:
        self.counters = counters
        self.published = published
        self.alarm_names: set[str] = set()  # alarms the service changed since the last mirror refresh
        self.state_sets: list[tuple[str, str]] = []  # SetAlarmState calls by the service, in order
        self.listeners: list[CallListener] = []
        self._last_publish: dict[str, Any] | None = None

    def install(self, events: Any) -> None:
        events.register("before-parameter-build", self.before_call)
        events.register("after-call.sns.Publish", self.after_publish)

    def before_call(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_id.hyphenize()
        self.counters.aws_calls[f"{service}:{model.name}"] += 1
        if service == "cloudwatch" and model.name == "SetAlarmState":
            self.state_sets.append((str(params.get("AlarmName")), str(params.get("StateValue"))))
        if service == "cloudwatch" and model.name in ALARM_MUTATIONS:
            for key in ALARM_MUTATIONS[model.name]:
                value = params.get(key)
                if isinstance(value, str):
                    self.alarm_names.add(value)
                elif isinstance(value, list):
                    self.alarm_names.update(value)
        if service == "sns" and model.name == "Publish":
            self._last_publish = dict(params)
        for listener in self.listeners:
            listener(service, model.name, params)

    def after_publish(self, http_response: Any, parsed: Mapping[str, Any], **_: Any) -> None:
        """The service published to SNS: deliver it to the topic's subscribers."""
        params = self._last_publish
        if not params or not parsed.get("MessageId") or "TopicArn" not in params:
            return
        attributes = {
            k: {"Type": v.get("DataType", "String"), "Value": v.get("StringValue", "")}
            for k, v in params.get("MessageAttributes", {}).items()
        }
        message = params["Message"]
        if params.get("MessageStructure") == "json":
            message = json.loads(message).get("lambda") or json.loads(message).get("default", message)
        self.published((params["TopicArn"], params.get("Subject"), message, attributes))
