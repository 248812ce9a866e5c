"""How a metric alarm's definition is compared: what it fires on, and which metrics it reads.

The reconciler compares an alarm as ``DescribeAlarms`` lists it with the ``PutMetricAlarm`` request its guard
plans (``domain/reconcile.py``); the stopper compares the alarm a notification repeats (``events/alarms.py``
``AlarmTrigger.as_alarm``) with the plan (``Guard.metrics_moved``). A leaf module: the guards import it, and
the stopper runs it without the reconciler's part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# The parts of a metric alarm's definition that decide when it fires, as a ``PutMetricAlarm`` request and a
# ``DescribeAlarms`` ``MetricAlarms`` item both spell them (not its name, description, actions or tags).
AlarmDefinition = tuple[tuple[str, Any], ...]


def _dimensions(dimensions: Iterable[Mapping[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(d.get("Name")), str(d.get("Value"))) for d in dimensions or ()))


def _query(query: Mapping[str, Any]) -> tuple[Any, ...]:
    stat = query.get("MetricStat")
    if isinstance(stat, Mapping):
        metric = stat.get("Metric") or {}
        body: tuple[Any, ...] = (
            metric.get("Namespace"),
            metric.get("MetricName"),
            _dimensions(metric.get("Dimensions")),
            int(stat.get("Period") or 0),
            stat.get("Stat"),
        )
    else:
        body = (query.get("Expression"),)
    return (str(query.get("Id")), body, bool(query.get("ReturnData", True)))


def alarm_definition(alarm: Mapping[str, Any]) -> AlarmDefinition | None:
    """What a metric alarm fires on: threshold, comparison, evaluation periods, datapoints to alarm, missing
    data, and its metric (namespace, name, dimensions, period, statistic) or metric-math queries (each
    query's metric or expression; not its label), normalised so that a planned ``PutMetricAlarm`` request
    and the alarm as ``DescribeAlarms`` lists it compare equal when CloudWatch would evaluate them alike
    (dimensions in any order, ``DatapointsToAlarm`` absent = ``EvaluationPeriods``, ``TreatMissingData``
    absent = ``missing``). None: not a threshold metric alarm (a composite alarm)."""
    if not isinstance(alarm.get("Threshold"), int | float) or not isinstance(alarm.get("EvaluationPeriods"), int):
        return None
    periods = int(alarm["EvaluationPeriods"])
    terms: dict[str, Any] = {
        "Threshold": float(alarm["Threshold"]),
        "ComparisonOperator": str(alarm.get("ComparisonOperator")),
        "EvaluationPeriods": periods,
        "DatapointsToAlarm": int(alarm.get("DatapointsToAlarm") or periods),
        "TreatMissingData": str(alarm.get("TreatMissingData") or "missing"),
    }
    if alarm.get("Metrics"):
        terms["Metrics"] = tuple(sorted((_query(q) for q in alarm["Metrics"]), key=lambda q: q[0]))
    else:
        terms["Metric"] = (
            alarm.get("Namespace"),
            alarm.get("MetricName"),
            _dimensions(alarm.get("Dimensions")),
            int(alarm.get("Period") or 0),
            alarm.get("Statistic") or alarm.get("ExtendedStatistic"),
        )
    return tuple(terms.items())


def watched_metrics(definition: AlarmDefinition | None) -> frozenset[tuple[Any, ...]]:
    """The metrics an alarm's definition reads (``alarm_definition``): each one's namespace, name and dimensions,
    whatever its statistic or period; none for no definition."""
    terms = dict(definition or ())
    metric = terms.get("Metric")
    if metric is not None:
        return frozenset({tuple(metric[:3])})
    return frozenset(tuple(body[:3]) for _, body, _ in terms.get("Metrics", ()) if len(body) > 1)


def reads_other_metrics(watched: frozenset[tuple[Any, ...]], planned: Mapping[str, Any] | None) -> bool:
    """Whether an alarm that reads ``watched`` (``watched_metrics`` of it as listed, or as its notification repeats
    it) reads other metrics than the ``PutMetricAlarm`` request ``planned`` for it now: a policy moved what the
    guard watches since the alarm was put. False when either side names none (nothing to compare)."""
    theirs = watched_metrics(alarm_definition(planned)) if planned is not None else frozenset()
    return bool(watched) and bool(theirs) and watched != theirs
