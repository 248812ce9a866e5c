"""The simulator's CloudWatch alarms: the alarms the service wrote to moto, evaluated by ``alarms``.

Whenever the service changes an alarm (``PutMetricAlarm``, ``DeleteAlarms``, ``SetAlarmState``, ...) the
mirror re-reads it with ``DescribeAlarms`` and updates the evaluator. On a transition the state is
written back to moto (``SetAlarmState``) and the notification is published to the SNS topics among the
alarm's actions for the new state.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from smgov.simulation.alarms import AlarmEvaluator, Transition
from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.counters import ServiceCalls, SnsMessage
from smgov.simulation.messages import alarm_subject
from smgov.simulation.metrics import MetricStore


class AlarmMirror:
    def __init__(
        self,
        store: MetricStore,
        calls: ServiceCalls,
        *,
        clock: VirtualClock,
        account: str,
        region: str,
        notify: Callable[[SnsMessage], None],
        delay: tuple[int, int] = (0, 0),
        salt: str = "",
    ) -> None:
        self.evaluator = AlarmEvaluator(
            store,
            epoch=clock.epoch,
            account=account,
            region=region,
            on_transition=self._transition,
            delay=delay,
            salt=salt,
            returns_at_once=True,
        )
        self.calls = calls
        self.clock = clock
        self.region = region
        self.notify = notify
        self.cloudwatch: Any = None  # the simulator's own (uncounted) client, set in the account
        self.evaluator.changed_elsewhere = self._changed_in_cloudwatch
        self.transitions: list[dict[str, Any]] = []
        self.seen: dict[str, dict[str, Any]] = {}  # every alarm definition seen, by name (last version)

    def refresh(self) -> None:
        """Re-read the alarms the service changed; apply its ``SetAlarmState`` calls."""
        if not self.calls.alarm_names:
            return
        names = sorted(self.calls.alarm_names)
        self.calls.alarm_names.clear()
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(names), 100):
            response = self.cloudwatch.describe_alarms(
                AlarmNames=names[start : start + 100], AlarmTypes=["MetricAlarm", "CompositeAlarm"]
            )
            for alarm in [*response.get("MetricAlarms", []), *response.get("CompositeAlarms", [])]:
                found[alarm["AlarmName"]] = alarm
        now = self.clock.now
        for name in names:
            if name in found:
                self.seen[name] = found[name]
                self.evaluator.upsert(found[name], now)
            else:
                self.evaluator.remove(name)
        sets, self.calls.state_sets = self.calls.state_sets, []
        for name, state in sets:
            if name in found:
                self.evaluator.set_state(name, state, now)

    def _changed_in_cloudwatch(self, name: str) -> datetime | None:
        """When the double last saw the alarm's state change (a reset by the service included)."""
        when = self.cloudwatch.transitioned_at(name) if self.cloudwatch is not None else None
        return when if isinstance(when, datetime) else None

    def _transition(self, transition: Transition) -> None:
        name = transition.alarm["AlarmName"]
        self.transitions.append(
            {"minute": self.clock.now, "alarm": name, "from": transition.old_state, "to": transition.new_state}
        )
        with contextlib.suppress(Exception):  # the alarm may have been deleted in the meantime
            # Stamped with the notification's StateChangeTime: DescribeAlarms' StateTransitionedTimestamp and the
            # notification name the same state change at the same instant.
            self.cloudwatch.record_transition(
                name,
                transition.new_state,
                transition.reason[:1023],
                at=datetime.fromisoformat(transition.message["StateChangeTime"]),
            )
        subject = alarm_subject(name, transition.new_state, self.region)
        for action in transition.actions:
            if action.startswith("arn:aws:sns:"):
                self.notify((action, subject, json.dumps(transition.message), {}))
