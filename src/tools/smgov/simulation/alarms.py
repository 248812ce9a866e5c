"""A CloudWatch alarm evaluator with CloudWatch's semantics, over the simulator's metric store.

It evaluates the alarms that exist (as ``DescribeAlarms`` returns them) on the virtual clock:

- **Period, EvaluationPeriods, DatapointsToAlarm** (M out of N): each period's datapoint is the
  statistic of the one-minute datapoints in it; the alarm looks at the N most recent datapoints.
- **The evaluation range and missing data** follow the documented algorithm: CloudWatch retrieves
  more periods than N (here ``N + EXTRA_RANGE``); when at least N of them exist it evaluates the N most
  recent existing datapoints and ``TreatMissingData`` is not consulted; when fewer exist it fills the
  gap with the treatment (``breaching`` / ``notBreaching``), or for ``missing`` / ``ignore`` goes to
  INSUFFICIENT_DATA / keeps its state, except that a range whose only datapoints breach and whose
  oldest breaching datapoint is at least M periods old goes to ALARM ("avoiding premature
  transitions"; ``missing`` only). The two tables of the CloudWatch user guide are unit tests.
- **Metric math**: ``Metrics`` with ``MetricStat`` queries and one returned ``Expression``
  (``MAX([m1, m2])``, ``MIN``, ``AVG``, ``SUM``, ``FILL``, ``METRICS()``, ``ABS``, arithmetic).
- **Composite alarms**: ``AlarmRule`` with ``ALARM(x)``, ``OK(x)``, ``INSUFFICIENT_DATA(x)``,
  ``AND``, ``OR``, ``NOT``, ``TRUE``, ``FALSE`` and parentheses.

On every state change the evaluator reports a transition carrying the alarm notification in the format
CloudWatch publishes to SNS (``AlarmName``, ``NewStateValue``, ``Trigger``, ...). It is event-driven:
an alarm is evaluated when one of its metrics changed in its evaluation range, once per period, until
its range holds no change any more; later evaluations would see identical data, so they are skipped.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from smgov.simulation.metrics import MetricKey, MetricStore, metric_key

ALARM, OK, INSUFFICIENT_DATA = "ALARM", "OK", "INSUFFICIENT_DATA"
EXTRA_RANGE = 2  # the evaluation range is EvaluationPeriods + 2 periods (the user guide's example: 3 -> 5)
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")

REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}

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


class AlarmDefinitionError(ValueError):
    """The simulator cannot evaluate this alarm (an unsupported statistic, operator or expression)."""


def _period_minutes(seconds: int) -> int:
    if seconds % 60:
        raise AlarmDefinitionError(f"period {seconds}s: the simulator evaluates whole minutes only")
    return max(1, seconds // 60)


def _statistic(name: str) -> str:
    try:
        return _STATISTICS[name]
    except KeyError as exc:
        raise AlarmDefinitionError(f"statistic {name!r} is not supported by the simulator") from exc


# ---- metric alarms -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricQuery:
    id: str
    return_data: bool
    key: MetricKey | None = None
    statistic: str | None = None
    expression: str | None = None


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


# ---- metric math ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?)|([A-Za-z_][A-Za-z0-9_]*)|(\"[^\"]*\"|'[^']*')|(\S))")


@cache
def _tokens(text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:  # pragma: no cover - the pattern matches any non-space character
            raise AlarmDefinitionError(f"cannot read expression {text!r}")
        number, name, string, symbol = match.groups()
        if number is not None:
            out.append(("num", number))
        elif name is not None:
            out.append(("name", name))
        elif string is not None:
            out.append(("str", string[1:-1]))
        elif symbol is not None:
            out.append(("sym", symbol))
        position = match.end()
    return tuple(out)


Series = list[float | None]


def evaluate_expression(
    expression: str, values: Mapping[str, Any], buckets: int, queries: Sequence[MetricQuery]
) -> Any:
    """Evaluate a metric-math expression: scalars are floats, time series lists, arrays lists of lists."""
    parser = _ExpressionParser(_tokens(expression), values, buckets, queries, expression)
    result = parser.expr()
    if parser.position != len(parser.tokens):
        raise AlarmDefinitionError(f"unexpected {parser.tokens[parser.position][1]!r} in {expression!r}")
    return result


class _ExpressionParser:
    def __init__(
        self,
        tokens: tuple[tuple[str, str], ...],
        values: Mapping[str, Any],
        buckets: int,
        queries: Sequence[MetricQuery],
        text: str,
    ) -> None:
        self.tokens, self.values, self.buckets, self.queries, self.text = tokens, values, buckets, queries, text
        self.position = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, symbol: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if token is None or (symbol is not None and token != ("sym", symbol)):
            raise AlarmDefinitionError(f"expected {symbol or 'a value'} in {self.text!r}")
        self.position += 1
        return token

    def expr(self) -> Any:
        left = self.term()
        while (token := self._peek()) in (("sym", "+"), ("sym", "-")):
            self._take()
            assert token is not None
            left = _arith(token[1], left, self.term())
        return left

    def term(self) -> Any:
        left = self.unary()
        while (token := self._peek()) in (("sym", "*"), ("sym", "/")):
            self._take()
            assert token is not None
            left = _arith(token[1], left, self.unary())
        return left

    def unary(self) -> Any:
        if self._peek() == ("sym", "-"):
            self._take()
            return _arith("*", -1.0, self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, text = self._take()
        if kind == "num":
            return float(text)
        if kind == "str":
            return text
        if (kind, text) == ("sym", "("):
            inner = self.expr()
            self._take(")")
            return inner
        if (kind, text) == ("sym", "["):
            items = [self.expr()]
            while self._peek() == ("sym", ","):
                self._take()
                items.append(self.expr())
            self._take("]")
            return items
        if kind == "name":
            if self._peek() == ("sym", "("):
                self._take()
                args: list[Any] = []
                if self._peek() != ("sym", ")"):
                    args.append(self.expr())
                    while self._peek() == ("sym", ","):
                        self._take()
                        args.append(self.expr())
                self._take(")")
                return self.call(text.upper(), args)
            if text.upper() in ("REPEAT", "LINEAR"):
                return text.upper()
            if text not in self.values:
                raise AlarmDefinitionError(f"{self.text!r}: unknown id {text!r}")
            return self.values[text]
        raise AlarmDefinitionError(f"unexpected {text!r} in {self.text!r}")

    def call(self, name: str, args: list[Any]) -> Any:
        if name == "METRICS":
            needle = args[0] if args else ""
            return [
                self.values[q.id]
                for q in self.queries
                if q.key is not None and needle in q.id and q.id in self.values
            ]
        if name in ("MAX", "MIN", "AVG", "SUM") and len(args) == 1:
            return _reduce(name, args[0])
        if name == "ABS" and len(args) == 1:
            return _map(args[0], abs)
        if name == "FILL" and len(args) == 2:
            return _fill(args[0], args[1])
        raise AlarmDefinitionError(f"{self.text!r}: function {name} with {len(args)} argument(s) is not supported")


def _is_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], list)


def _combine(name: str, present: list[float]) -> float | None:
    if not present:
        return None
    if name == "MAX":
        return max(present)
    if name == "MIN":
        return min(present)
    if name == "SUM":
        return sum(present)
    return sum(present) / len(present)


def _reduce(name: str, value: Any) -> Any:
    if _is_array(value):  # per timestamp, across the series; missing only where every series is missing
        return [_combine(name, [v for v in column if v is not None]) for column in zip(*value, strict=True)]
    if isinstance(value, list):  # one series -> a scalar over its datapoints
        return _combine(name, [v for v in value if v is not None])
    return value


def _map(value: Any, fn: Callable[[float], float]) -> Any:
    if _is_array(value):
        return [_map(series, fn) for series in value]
    if isinstance(value, list):
        return [None if v is None else fn(v) for v in value]
    return None if value is None else fn(value)


def _fill(value: Any, filler: Any) -> Any:
    if _is_array(value):
        return [_fill(series, filler) for series in value]
    if not isinstance(value, list):
        return value
    out: Series = list(value)
    if filler == "REPEAT":
        last: float | None = None
        for i, v in enumerate(out):
            if v is None:
                out[i] = last
            else:
                last = v
        return out
    if filler == "LINEAR":
        raise AlarmDefinitionError("FILL(..., LINEAR) is not supported by the simulator")
    if isinstance(filler, list):
        return [f if v is None else v for v, f in zip(out, filler, strict=True)]
    return [filler if v is None else v for v in out]


def _arith(op: str, left: Any, right: Any) -> Any:
    def apply(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return None
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        return None if b == 0 else a / b

    if _is_array(left):
        return [_arith(op, series, right) for series in left]
    if _is_array(right):
        return [_arith(op, left, series) for series in right]
    if isinstance(left, list) and isinstance(right, list):
        return [apply(a, b) for a, b in zip(left, right, strict=True)]
    if isinstance(left, list):
        return [apply(a, right) for a in left]
    if isinstance(right, list):
        return [apply(left, b) for b in right]
    return apply(left, right)


# ---- composite alarms ----------------------------------------------------------------------------

_RULE_TOKEN = re.compile(r"\s*(ALARM|OK|INSUFFICIENT_DATA|AND|OR|NOT|TRUE|FALSE|\(|\)|\"[^\"]*\"|[^\s()\"]+)")


@dataclass(frozen=True)
class CompositeAlarm:
    name: str
    arn: str
    rule: str
    raw: Mapping[str, Any] = field(compare=False, hash=False)

    @classmethod
    def from_description(cls, alarm: Mapping[str, Any]) -> CompositeAlarm:
        composite = cls(
            alarm["AlarmName"], alarm.get("AlarmArn", alarm["AlarmName"]), alarm["AlarmRule"], dict(alarm)
        )
        composite.children()  # parse now: a bad rule is an error at registration
        return composite

    def children(self) -> set[str]:
        return {ref for _, ref in _rule_refs(self.rule)}

    def evaluate(self, state_of: Callable[[str], str]) -> bool:
        tokens = _RULE_TOKEN.findall(self.rule)
        value, position = _rule_or(tokens, 0, state_of, self.rule)
        if position != len(tokens):
            raise AlarmDefinitionError(f"unexpected {tokens[position]!r} in alarm rule {self.rule!r}")
        return value


def _rule_refs(rule: str) -> list[tuple[str, str]]:
    tokens = _RULE_TOKEN.findall(rule)
    refs = []
    for i, token in enumerate(tokens):
        if token in (ALARM, OK, INSUFFICIENT_DATA) and i + 3 < len(tokens) + 1 and tokens[i + 1 : i + 2] == ["("]:
            refs.append((token, tokens[i + 2].strip('"')))
    return refs


def _rule_or(tokens: list[str], i: int, state_of: Callable[[str], str], rule: str) -> tuple[bool, int]:
    value, i = _rule_and(tokens, i, state_of, rule)
    while i < len(tokens) and tokens[i] == "OR":
        right, i = _rule_and(tokens, i + 1, state_of, rule)
        value = value or right
    return value, i


def _rule_and(tokens: list[str], i: int, state_of: Callable[[str], str], rule: str) -> tuple[bool, int]:
    value, i = _rule_not(tokens, i, state_of, rule)
    while i < len(tokens) and tokens[i] == "AND":
        right, i = _rule_not(tokens, i + 1, state_of, rule)
        value = value and right
    return value, i


def _rule_not(tokens: list[str], i: int, state_of: Callable[[str], str], rule: str) -> tuple[bool, int]:
    if i < len(tokens) and tokens[i] == "NOT":
        value, i = _rule_not(tokens, i + 1, state_of, rule)
        return not value, i
    if i >= len(tokens):
        raise AlarmDefinitionError(f"alarm rule {rule!r} ends too early")
    token = tokens[i]
    if token == "(":
        value, i = _rule_or(tokens, i + 1, state_of, rule)
        if i >= len(tokens) or tokens[i] != ")":
            raise AlarmDefinitionError(f"missing ')' in alarm rule {rule!r}")
        return value, i + 1
    if token in ("TRUE", "FALSE"):
        return token == "TRUE", i + 1
    if token in (ALARM, OK, INSUFFICIENT_DATA):
        if tokens[i + 1 : i + 2] != ["("] or tokens[i + 3 : i + 4] != [")"]:
            raise AlarmDefinitionError(f"expected {token}(alarm-name) in alarm rule {rule!r}")
        return state_of(tokens[i + 2].strip('"')) == token, i + 4
    raise AlarmDefinitionError(f"unexpected {token!r} in alarm rule {rule!r}")


# ---- notifications -------------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"


def _dimensions(dimensions: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    return [{"value": d["Value"], "name": d["Name"]} for d in dimensions]


def _trigger(alarm: Mapping[str, Any]) -> dict[str, Any]:
    common = {
        "Period": int(alarm.get("Period") or 0),
        "EvaluationPeriods": int(alarm["EvaluationPeriods"]),
        "DatapointsToAlarm": int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"]),
        "ComparisonOperator": alarm["ComparisonOperator"],
        "Threshold": float(alarm["Threshold"]),
        "TreatMissingData": alarm.get("TreatMissingData") or "missing",
        "EvaluateLowSampleCountPercentile": alarm.get("EvaluateLowSampleCountPercentile") or "",
    }
    if alarm.get("Metrics"):
        metrics: list[dict[str, Any]] = []
        for item in alarm["Metrics"]:
            if "MetricStat" in item:
                stat = item["MetricStat"]
                metric = stat["Metric"]
                common["Period"] = common["Period"] or int(stat["Period"])
                entry: dict[str, Any] = {
                    "Id": item["Id"],
                    "MetricStat": {
                        "Metric": {
                            "Dimensions": _dimensions(metric.get("Dimensions", [])),
                            "MetricName": metric["MetricName"],
                            "Namespace": metric["Namespace"],
                        },
                        "Period": int(stat["Period"]),
                        "Stat": stat["Stat"],
                    },
                    "ReturnData": bool(item.get("ReturnData", False)),
                }
            else:
                entry = {
                    "Expression": item["Expression"],
                    "Id": item["Id"],
                    "ReturnData": bool(item.get("ReturnData", True)),
                }
            if item.get("Label"):
                entry["Label"] = item["Label"]
            metrics.append(entry)
        return {**common, "Metrics": metrics}
    return {
        "MetricName": alarm["MetricName"],
        "Namespace": alarm["Namespace"],
        "StatisticType": "Statistic",
        "Statistic": str(alarm.get("Statistic", "")).upper(),
        "Unit": alarm.get("Unit"),
        "Dimensions": _dimensions(alarm.get("Dimensions", [])),
        **common,
    }


def alarm_message(
    alarm: Mapping[str, Any],
    *,
    old_state: str,
    new_state: str,
    reason: str,
    changed_at: datetime,
    account: str,
    region: str,
    triggering_children: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON document CloudWatch publishes to an SNS topic when an alarm changes state."""
    updated = alarm.get("AlarmConfigurationUpdatedTimestamp")
    message: dict[str, Any] = {
        "AlarmName": alarm["AlarmName"],
        "AlarmDescription": alarm.get("AlarmDescription"),
        "AWSAccountId": account,
        "AlarmConfigurationUpdatedTimestamp": _iso(updated) if isinstance(updated, datetime) else updated,
        "NewStateValue": new_state,
        "NewStateReason": reason,
        "StateChangeTime": _iso(changed_at),
        "Region": REGION_NAMES.get(region, region),
        "AlarmArn": alarm.get("AlarmArn"),
        "OldStateValue": old_state,
        "OKActions": list(alarm.get("OKActions", [])),
        "AlarmActions": list(alarm.get("AlarmActions", [])),
        "InsufficientDataActions": list(alarm.get("InsufficientDataActions", [])),
    }
    if "AlarmRule" in alarm:
        message["AlarmRule"] = alarm["AlarmRule"]
        message["TriggeringChildren"] = list(triggering_children)
    else:
        message["Trigger"] = _trigger(alarm)
    return message


def alarm_subject(alarm_name: str, new_state: str, region: str) -> str:
    subject = f'{new_state}: "{alarm_name}" in {REGION_NAMES.get(region, region)}'
    return subject if len(subject) <= 100 else subject[:97] + "..."


# ---- the stateful evaluator ----------------------------------------------------------------------


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
    ) -> None:
        self.store = store
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
        """``SetAlarmState``: the state changes at once and the alarm is evaluated again at the next
        period, so it notifies again if its condition still holds. (CloudWatch would also run the
        actions of the new state; the service only ever resets to ``OK`` and its alarms have no
        ``OKActions``, so nothing is published here.)"""
        alarm = self.metric_alarms.get(name)
        if alarm is None:
            if name in self.composites:
                self.states[name] = state
            return
        self.states[name] = state
        self._schedule(name, self._aligned(now + 1, alarm.period))

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

    def _steady(self, alarm: MetricAlarm, now: int) -> bool:
        horizon = now - alarm.range_periods * alarm.period
        for key in alarm.keys:
            changed = self.store.last_change(key)
            if changed is not None and changed > horizon:
                return False
        return True

    def _evaluate(self, alarm: MetricAlarm, now: int) -> None:
        self.evaluations += 1
        old = self.states[alarm.name]
        result = evaluate_alarm(alarm, self.store, now, old, self.epoch)
        if not self._steady(alarm, now):
            self._schedule(alarm.name, now + alarm.period)
        if result.state == old:
            return
        self.states[alarm.name] = result.state
        reason_data = {
            "version": "1.0",
            "queryDate": _iso(self.epoch + timedelta(minutes=now)),
            "period": alarm.period * 60,
            "threshold": alarm.threshold,
            "evaluatedDatapoints": [
                {"timestamp": _iso(self.epoch + timedelta(minutes=t)), "value": v}
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
        message = alarm_message(
            raw,
            old_state=old,
            new_state=new,
            reason=reason,
            changed_at=self.epoch + timedelta(minutes=now),
            account=self.account,
            region=self.region,
            triggering_children=children,
        )
        self.on_transition(Transition(raw, old, new, reason, reason_data, now, message))

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
        children = [
            {"Arn": ref, "State": {"Value": self._state_of(ref)}}
            for kind, ref in _rule_refs(composite.rule)
            if self._state_of(ref) == kind
        ]
        reason = f"{composite.rule} was evaluated to {'TRUE' if new == ALARM else 'FALSE'}"
        reason_data = {"triggeringAlarms": children}
        self._emit(
            composite.raw, old=old, new=new, reason=reason, reason_data=reason_data, now=now, children=children
        )
        self._children_changed(composite.name, composite.arn, now)
