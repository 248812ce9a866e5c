"""Metric alarms: a ``DescribeAlarms`` ``MetricAlarms`` item, its datapoints and CloudWatch's decision.

- **Period, EvaluationPeriods, DatapointsToAlarm** (M out of N): each period's datapoint is the
  statistic of the one-minute datapoints in it; the alarm looks at the N most recent datapoints.
- **The evaluation range and missing data** follow the documented algorithm: CloudWatch retrieves
  more periods than N (here ``N + EXTRA_RANGE``); when at least N of them exist it evaluates the N most
  recent existing datapoints and ``TreatMissingData`` is not consulted; when fewer exist it fills the
  gap with the treatment (``breaching`` / ``notBreaching``), or for ``missing`` / ``ignore`` goes to
  INSUFFICIENT_DATA / keeps its state, except that a range whose only datapoints breach and whose
  oldest breaching datapoint is at least M periods old goes to ALARM ("avoiding premature
  transitions"; ``missing`` only). The two tables of the CloudWatch user guide are unit tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from smgov.simulation.alarms.base import ALARM, INSUFFICIENT_DATA, OK, AlarmDefinitionError
from smgov.simulation.alarms.metric_math import MetricQuery, evaluate_expression
from smgov.simulation.metrics import MetricKey, MetricStore, metric_key

EXTRA_RANGE = 2  # the evaluation range is EvaluationPeriods + 2 periods (the user guide's example: 3 -> 5)
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")


_COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str, str]] = {
    # operator -> (breaches, "were <phrase>", "were not <phrase>")
    "GreaterThanOrEqualToThreshold": (
        lambda v, t: v >= t,
        "greater than or equal to",
        "not greater than or equal to",
    ),
    "GreaterThanThreshold": (lambda v, t: v > t, "greater than", "not greater than"),
    "LessThanThreshold": (lambda v, t: v < t, "less than", "not less than"),
    "LessThanOrEqualToThreshold": (lambda v, t: v <= t, "less than or equal to", "not less than or equal to"),
}
_STATISTICS = {
    "Average": "Average",
    "Avg": "Average",
    "Maximum": "Maximum",
    "Max": "Maximum",
    "Minimum": "Minimum",
    "Min": "Minimum",
    "Sum": "Sum",
    "SampleCount": "SampleCount",
}


def _period_minutes(seconds: int) -> int:
    if seconds % 60:
        raise AlarmDefinitionError(f"period {seconds}s: the simulator evaluates whole minutes only")
    return max(1, seconds // 60)


def _statistic(name: str) -> str:
    try:
        return _STATISTICS[name]
    except KeyError as exc:
        raise AlarmDefinitionError(f"statistic {name!r} is not supported by the simulator") from exc


@dataclass(frozen=True)
class MetricAlarm:
    """What the evaluator needs from a ``DescribeAlarms`` ``MetricAlarms`` item (kept as ``raw``)."""

    name: str
    arn: str
    period: int  # minutes
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    queries: tuple[MetricQuery, ...]
    raw: Mapping[str, Any] = field(compare=False, hash=False)

    @property
    def keys(self) -> tuple[MetricKey, ...]:
        return tuple(q.key for q in self.queries if q.key is not None)

    @property
    def range_periods(self) -> int:
        return self.evaluation_periods + EXTRA_RANGE

    @classmethod
    def from_description(cls, alarm: Mapping[str, Any]) -> MetricAlarm:
        operator = alarm["ComparisonOperator"]
        if operator not in _COMPARISONS:
            raise AlarmDefinitionError(f"{alarm['AlarmName']}: comparison {operator} is not supported")
        treat = alarm.get("TreatMissingData") or "missing"
        if treat not in TREATMENTS:
            raise AlarmDefinitionError(f"{alarm['AlarmName']}: TreatMissingData {treat!r} is not valid")
        queries: list[MetricQuery] = []
        periods: set[int] = set()
        if alarm.get("Metrics"):
            for item in alarm["Metrics"]:
                stat = item.get("MetricStat")
                if stat is not None:
                    metric = stat["Metric"]
                    periods.add(_period_minutes(int(stat["Period"])))
                    queries.append(
                        MetricQuery(
                            id=item["Id"],
                            return_data=bool(item.get("ReturnData", False)),
                            key=metric_key(
                                metric["Namespace"], metric["MetricName"], metric.get("Dimensions", [])
                            ),
                            statistic=_statistic(stat["Stat"]),
                        )
                    )
                else:
                    queries.append(
                        MetricQuery(
                            id=item["Id"],
                            return_data=bool(item.get("ReturnData", True)),
                            expression=item["Expression"],
                        )
                    )
            if sum(q.return_data for q in queries) != 1:
                raise AlarmDefinitionError(f"{alarm['AlarmName']}: exactly one query must return data")
            if alarm.get("Period"):
                periods.add(_period_minutes(int(alarm["Period"])))
            if len(periods) != 1:
                raise AlarmDefinitionError(f"{alarm['AlarmName']}: every metric must use the same period")
            period = periods.pop()
        else:
            if "ExtendedStatistic" in alarm and not alarm.get("Statistic"):
                raise AlarmDefinitionError(f"{alarm['AlarmName']}: percentile statistics are not supported")
            period = _period_minutes(int(alarm["Period"]))
            queries.append(
                MetricQuery(
                    id="m1",
                    return_data=True,
                    key=metric_key(alarm["Namespace"], alarm["MetricName"], alarm.get("Dimensions", [])),
                    statistic=_statistic(alarm["Statistic"]),
                )
            )
        n = int(alarm["EvaluationPeriods"])
        return cls(
            name=alarm["AlarmName"],
            arn=alarm.get("AlarmArn", alarm["AlarmName"]),
            period=period,
            evaluation_periods=n,
            datapoints_to_alarm=int(alarm.get("DatapointsToAlarm") or n),
            threshold=float(alarm["Threshold"]),
            comparison=operator,
            treat_missing=treat,
            queries=tuple(queries),
            raw=dict(alarm),
        )

    def breaches(self, value: float) -> bool:
        return _COMPARISONS[self.comparison][0](value, self.threshold)

    def series(self, store: MetricStore, now: int) -> list[float | None]:
        """The alarm's datapoints over its evaluation range ending at ``now``, oldest first."""
        buckets = self.range_periods
        first = now - buckets * self.period
        values: dict[str, Any] = {}
        for query in self.queries:
            if query.key is not None and query.statistic is not None:
                values[query.id] = store.datapoints(query.key, first, buckets, self.period, query.statistic)
        result: Any = None
        for query in self.queries:
            if query.expression is not None:
                values[query.id] = evaluate_expression(query.expression, values, buckets, self.queries)
            if query.return_data:
                result = values[query.id]
        if isinstance(result, float) or result is None:
            return [result] * buckets
        if result and isinstance(result[0], list):
            raise AlarmDefinitionError(f"{self.name}: the returned expression yields several time series")
        return list(result)


@dataclass(frozen=True)
class Evaluation:
    alarm: MetricAlarm
    state: str
    old_state: str
    breaching: int
    evaluated: tuple[tuple[int, float | None], ...]  # (bucket start minute, value) of the datapoints used
    filled: int
    epoch: datetime

    @property
    def reason(self) -> str:
        """CloudWatch's ``StateReason`` text (built only when needed: it is the costly part)."""
        return _reason(
            self.alarm, state=self.state, old=self.old_state, evaluated=self.evaluated, filled=self.filled,
            epoch=self.epoch,
        )  # fmt: skip


def decide(
    values: Sequence[float | None],
    *,
    evaluation_periods: int,
    datapoints_to_alarm: int,
    treat_missing: str,
    breaches: Callable[[float], bool],
    current: str,
) -> tuple[str, int, list[int], int]:
    """CloudWatch's decision over an evaluation range (oldest first).

    Returns (new state, breaching datapoints counted, indexes of the real datapoints evaluated,
    missing datapoints filled in).
    """
    n, m = evaluation_periods, datapoints_to_alarm
    existing = [i for i, v in enumerate(values) if v is not None]
    flags = {i: breaches(values[i]) for i in existing}  # type: ignore[arg-type]
    if len(existing) >= n:
        used = existing[-n:]
        count = sum(flags[i] for i in used)
        return (ALARM if count >= m else OK), count, used, 0
    filled = n - len(existing)
    count = sum(flags.values())
    if treat_missing == "breaching":
        total = count + filled
        return (ALARM if total >= m else OK), total, existing, filled
    if treat_missing == "notBreaching":
        return (ALARM if count >= m else OK), count, existing, filled
    if not existing:
        return (INSUFFICIENT_DATA if treat_missing == "missing" else current), 0, existing, filled
    if count >= m:
        return ALARM, count, existing, 0
    if count < len(existing):
        return OK, count, existing, 0
    # Only breaching datapoints, fewer than M of them. Premature-transition rule: when the oldest of
    # them is at least M periods old the alarm goes to ALARM (treatment `missing`); otherwise it waits.
    age = len(values) - existing[0]
    if treat_missing == "missing":
        return (ALARM if age >= m else INSUFFICIENT_DATA), count, existing, 0
    return current, count, existing, 0


def evaluate_alarm(alarm: MetricAlarm, store: MetricStore, now: int, current: str, epoch: datetime) -> Evaluation:
    values = alarm.series(store, now)
    state, count, used, filled = decide(
        values,
        evaluation_periods=alarm.evaluation_periods,
        datapoints_to_alarm=alarm.datapoints_to_alarm,
        treat_missing=alarm.treat_missing,
        breaches=alarm.breaches,
        current=current,
    )
    first = now - alarm.range_periods * alarm.period
    evaluated = tuple((first + i * alarm.period, values[i]) for i in used)
    return Evaluation(
        alarm,
        state,
        current,
        count,
        evaluated,
        filled,
        epoch,
    )


def _stamp(epoch: datetime, minute: int) -> str:
    return (epoch + timedelta(minutes=minute)).strftime("%d/%m/%y %H:%M:%S")


def _reason(
    alarm: MetricAlarm,
    *,
    state: str,
    old: str,
    evaluated: tuple[tuple[int, float | None], ...],
    filled: int,
    epoch: datetime,
) -> str:
    if state == INSUFFICIENT_DATA:
        return f"Insufficient Data: {alarm.range_periods} datapoints were unknown."
    if not evaluated and filled:
        treated = "Breaching" if alarm.treat_missing == "breaching" else "NonBreaching"
        return (
            f"Threshold Crossed: no datapoints were received for {filled} period"
            f"{'s' if filled != 1 else ''} and {filled} missing datapoint"
            f"{'s were' if filled != 1 else ' was'} treated as [{treated}]."
        )
    _, yes, no = _COMPARISONS[alarm.comparison]
    shown = [(t, v) for t, v in reversed(evaluated) if v is not None and (alarm.breaches(v) == (state == ALARM))]
    points = ", ".join(f"{v!r} ({_stamp(epoch, t)})" for t, v in shown)
    total = len(evaluated) + filled
    verb = "was" if len(shown) == 1 else "were"
    phrase = yes if state == ALARM else no
    m = alarm.datapoints_to_alarm
    return (
        f"Threshold Crossed: {len(shown)} out of the last {total} datapoints [{points}] {verb} {phrase} the "
        f"threshold ({alarm.threshold!r}) (minimum {m} datapoint{'s' if m != 1 else ''} for "
        f"{old} -> {state} transition)."
    )
