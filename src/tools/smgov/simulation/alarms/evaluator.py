"""The stateful evaluator: keeps the alarms' states and evaluates them on the virtual clock.

It is event-driven: an alarm is evaluated when one of its metrics changed in its evaluation range, once
per period, until its range holds no change any more; later evaluations would see identical data, so
they are skipped. On every state change it reports a ``Transition`` carrying the alarm notification
in the format CloudWatch publishes to SNS.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from smgov.simulation.alarms.base import ALARM, INSUFFICIENT_DATA, OK
from smgov.simulation.alarms.composite import CompositeAlarm, rule_refs
from smgov.simulation.alarms.metric import MetricAlarm, evaluate_alarm
from smgov.simulation.messages import alarm_notification, iso_millis
from smgov.simulation.metrics import MetricKey, MetricStore, visible_until


@dataclass
class Transition:
    alarm: Mapping[str, Any]
    old_state: str
    new_state: str
    reason: str
    reason_data: dict[str, Any]
    minute: int
    message: dict[str, Any]

    @property
    def actions(self) -> list[str]:
        if not self.alarm.get("ActionsEnabled", True):
            return []
        key = {ALARM: "AlarmActions", OK: "OKActions", INSUFFICIENT_DATA: "InsufficientDataActions"}[
            self.new_state
        ]
        return list(self.alarm.get(key, []))


class AlarmEvaluator:
    """Keeps the alarms' states and evaluates them when (and only when) their data can have changed."""

    def __init__(
        self,
        store: MetricStore,
        *,
        epoch: datetime,
        account: str,
        region: str,
        on_transition: Callable[[Transition], None],
        delay: tuple[int, int] = (0, 0),
        salt: str = "",
        returns_at_once: bool = False,
    ) -> None:
        """``delay``: a datapoint arrives (min, max) minutes after its minute is complete (see
        ``metrics.visible_until``). ``returns_at_once``: after ``SetAlarmState`` the alarm is evaluated
        again in the same minute (CloudWatch: it "returns to its actual state quickly, often within
        seconds"), at most once per alarm and minute; otherwise at its next period."""
        self.store = store
        self.delay = delay
        self.salt = salt
        self.returns_at_once = returns_at_once
        self._returned: dict[str, int] = {}
        self._changed: dict[str, datetime] = {}  # alarm -> its last StateChangeTime
        # alarm -> when its state last changed outside the evaluator (a SetAlarmState by the service), if known
        self.changed_elsewhere: Callable[[str], datetime | None] = lambda _name: None
        self.epoch = epoch
        self.account = account
        self.region = region
        self.on_transition = on_transition
        self.metric_alarms: dict[str, MetricAlarm] = {}
        self.composites: dict[str, CompositeAlarm] = {}
        self.states: dict[str, str] = {}
        self.evaluations = 0
        self._watchers: dict[MetricKey, set[str]] = {}
        self._due: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        store.listeners.append(self._metric_changed)

    # registration
    def upsert(self, description: Mapping[str, Any], now: int) -> None:
        if "AlarmRule" in description:
            composite = CompositeAlarm.from_description(description)
            self.composites[composite.name] = composite
            self.states.setdefault(composite.name, INSUFFICIENT_DATA)
            self._evaluate_composite(composite, now)
            return
        alarm = MetricAlarm.from_description(description)
        self._unwatch(alarm.name)
        self.metric_alarms[alarm.name] = alarm
        self.states.setdefault(alarm.name, INSUFFICIENT_DATA)  # an update keeps the state
        for key in alarm.keys:
            self._watchers.setdefault(key, set()).add(alarm.name)
        self._schedule(alarm.name, self._aligned(now + 1, alarm.period))

    def set_state(self, name: str, state: str, now: int) -> None:
        """``SetAlarmState``: the state changes at once. A metric alarm returns to its actual state at its
        next evaluation (``returns_at_once``: in the same minute, once per minute; else at its next
        period), so it notifies again if its condition still holds. A composite alarm does not: "it returns
        to its actual state only once any of its children alarms change state. It is also reevaluated if
        you update its configuration" (the SetAlarmState API reference, botocore's cloudwatch model), so a
        composite reset while its children stay in ALARM stays in OK. (CloudWatch would also run the
        actions of the new state; the service only ever resets to ``OK`` and its alarms have no
        ``OKActions``, so nothing is published for the reset itself.)"""
        alarm = self.metric_alarms.get(name)
        composite = self.composites.get(name)
        if alarm is None and composite is None:
            return
        self.states[name] = state
        at_once = self.returns_at_once and self._returned.get(name) != now
        if at_once:
            self._returned[name] = now
        if alarm is not None:
            # A composite alarm is evaluated whenever one of its children changes state, a reset too: the
            # composite over reset children leaves ALARM, and notifies again when they return to it.
            self._children_changed(name, alarm.arn, now)
            if at_once:
                self._evaluate(alarm, now)
            else:
                self._schedule(name, self._aligned(now + 1, alarm.period))
        # a composite: evaluated again when a child changes state (``_children_changed``) or it is updated

    def remove(self, name: str) -> None:
        self._unwatch(name)
        self.metric_alarms.pop(name, None)
        self.composites.pop(name, None)
        self.states.pop(name, None)
        self._scheduled.pop(name, None)

    def _unwatch(self, name: str) -> None:
        old = self.metric_alarms.get(name)
        if old is not None:
            for key in old.keys:
                self._watchers.get(key, set()).discard(name)

    # scheduling
    @staticmethod
    def _aligned(minute: int, period: int) -> int:
        return -(-minute // period) * period

    def _schedule(self, name: str, minute: int) -> None:
        current = self._scheduled.get(name)
        if current is not None and current <= minute:
            return
        self._scheduled[name] = minute
        heapq.heappush(self._due, (minute, name))

    def _metric_changed(self, key: MetricKey, minute: int) -> None:
        for name in self._watchers.get(key, ()):
            alarm = self.metric_alarms[name]
            self._schedule(name, self._aligned(minute + 1, alarm.period))

    def next_due(self) -> int | None:
        while self._due:
            minute, name = self._due[0]
            if self._scheduled.get(name) == minute:
                return minute
            heapq.heappop(self._due)
        return None

    def run_due(self, now: int) -> None:
        """Evaluate every alarm due at or before ``now``."""
        while self._due and self._due[0][0] <= now:
            minute, name = heapq.heappop(self._due)
            if self._scheduled.get(name) != minute:
                continue
            del self._scheduled[name]
            alarm = self.metric_alarms.get(name)
            if alarm is not None:
                self._evaluate(alarm, now)
            elif name in self.composites:
                self._evaluate_composite(self.composites[name], now)

    def arrived(self, key: MetricKey, now: int) -> int:
        """The first minute of ``key`` whose datapoint has not arrived by ``now``."""
        return visible_until(key, now, self.delay, self.salt)

    def _steady(self, alarm: MetricAlarm, now: int) -> bool:
        """No later evaluation can see other data: no metric changed within the range (nor is arriving)."""
        horizon = now - alarm.range_periods * alarm.period - self.delay[1]
        for key in alarm.keys:
            if self.store.sparse(key):
                return False
            changed = self.store.last_change(key)
            if changed is not None and changed > horizon:
                return False
        return True

    def _evaluate(self, alarm: MetricAlarm, now: int) -> None:
        self.evaluations += 1
        old = self.states[alarm.name]
        arrived = None if self.delay == (0, 0) else (lambda key: self.arrived(key, now))
        result = evaluate_alarm(alarm, self.store, now, old, self.epoch, arrived=arrived)
        if not self._steady(alarm, now):
            self._schedule(alarm.name, now + alarm.period)
        if result.state == old:
            return
        self.states[alarm.name] = result.state
        reason_data = {
            "version": "1.0",
            "queryDate": iso_millis(self.epoch + timedelta(minutes=now)),
            "period": alarm.period * 60,
            "threshold": alarm.threshold,
            "evaluatedDatapoints": [
                {"timestamp": iso_millis(self.epoch + timedelta(minutes=t)), "value": v}
                for t, v in result.evaluated
                if v is not None
            ],
        }
        self._emit(alarm.raw, old=old, new=result.state, reason=result.reason, reason_data=reason_data, now=now)
        self._children_changed(alarm.name, alarm.arn, now)

    def _emit(
        self,
        raw: Mapping[str, Any],
        *,
        old: str,
        new: str,
        reason: str,
        reason_data: dict[str, Any],
        now: int,
        children: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        # Every state change has its own StateChangeTime (CloudWatch stamps it to the millisecond): an alarm
        # that returns to ALARM in the minute it was reset (``returns_at_once``) changes state a moment later
        # than its reset, never at the same instant as its previous ALARM (a consumer that keys deliveries by
        # the state change would otherwise take the new one for a duplicate of the old).
        # It also comes after a reset the service made within the minute (a service whose botocore backed off is
        # seconds into the minute): CloudWatch evaluates the reset alarm after the reset, not before it.
        name = str(raw.get("AlarmName", ""))
        changed_at = self.epoch + timedelta(minutes=now)
        last = self._changed.get(name)
        if last is not None and changed_at <= last:
            changed_at = last + timedelta(seconds=1)
        elsewhere = self.changed_elsewhere(name)
        if elsewhere is not None and changed_at <= elsewhere:
            changed_at = elsewhere + timedelta(seconds=1)
        self._changed[name] = changed_at
        message = alarm_notification(
            raw,
            old_state=old,
            new_state=new,
            reason=reason,
            changed_at=changed_at,
            account=self.account,
            region=self.region,
            triggering_children=children,
        )
        self.on_transition(Transition(raw, old, new, reason, reason_data, now, message))

    def _arn_of(self, ref: str) -> str:
        """A rule's reference to a child (its name or its ARN) as the child's ARN."""
        child = self.metric_alarms.get(ref) or self.composites.get(ref)
        return child.arn if child is not None else ref

    def _state_of(self, ref: str) -> str:
        if ref in self.states:
            return self.states[ref]
        alarms: list[MetricAlarm | CompositeAlarm] = [*self.metric_alarms.values(), *self.composites.values()]
        for alarm in alarms:
            if alarm.arn == ref:
                return self.states[alarm.name]
        return INSUFFICIENT_DATA

    def _children_changed(self, name: str, arn: str, now: int) -> None:
        for composite in list(self.composites.values()):
            if name in composite.children() or arn in composite.children():
                self._evaluate_composite(composite, now)

    def _evaluate_composite(self, composite: CompositeAlarm, now: int) -> None:
        self.evaluations += 1
        old = self.states[composite.name]
        new = ALARM if composite.evaluate(self._state_of) else OK
        if new == old:
            return
        self.states[composite.name] = new
        # as CloudWatch names them in the notification: by ARN, whether the rule names a child or its ARN
        children = [
            {"Arn": self._arn_of(ref), "State": {"Value": self._state_of(ref)}}
            for kind, ref in rule_refs(composite.rule)
            if self._state_of(ref) == kind
        ]
        reason = f"{composite.rule} was evaluated to {'TRUE' if new == ALARM else 'FALSE'}"
        reason_data = {"triggeringAlarms": children}
        self._emit(
            composite.raw, old=old, new=new, reason=reason, reason_data=reason_data, now=now, children=children
        )
        self._children_changed(composite.name, composite.arn, now)
