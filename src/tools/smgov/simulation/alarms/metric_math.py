"""CloudWatch metric math over the simulator's datapoints: ``MAX([m1, m2])``, ``MIN``, ``AVG``, ``SUM``,
``FILL``, ``METRICS()``, ``ABS``, arithmetic, comparison operators (1 for true, 0 for false) and
``IF(condition, a, b)`` (per datapoint: ``a`` where the condition is non-zero, else ``b``; missing where the
condition is missing). Scalars are floats, time series lists, arrays lists of
lists (``MAX([m1, m2])`` is a series, ``MAX(m1)`` a scalar)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from smgov.simulation.alarms.base import AlarmDefinitionError
from smgov.simulation.metrics import MetricKey

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?)|([A-Za-z_][A-Za-z0-9_]*)|(\"[^\"]*\"|'[^']*')|(>=|<=|==|!=|\S))")
_COMPARISONS = (">=", "<=", "==", "!=", ">", "<")


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


@dataclass(frozen=True)
class MetricQuery:
    """One item of an alarm's ``Metrics``: a metric with its statistic, or an expression over others."""

    id: str
    return_data: bool
    key: MetricKey | None = None
    statistic: str | None = None
    expression: str | None = None


Series = list[float | None]


def evaluate_expression(
    expression: str, values: Mapping[str, Any], buckets: int, queries: Sequence[MetricQuery]
) -> Any:
    """Evaluate a metric-math expression: scalars are floats, time series lists, arrays lists of lists."""
    parser = _ExpressionParser(_tokens(expression), values, buckets, queries, expression)
    result = parser.comparison()
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

    def comparison(self) -> Any:
        left = self.expr()
        while (token := self._peek()) is not None and token[0] == "sym" and token[1] in _COMPARISONS:
            self._take()
            left = _arith(token[1], left, self.expr())
        return left

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
            inner = self.comparison()
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
                    args.append(self.comparison())
                    while self._peek() == ("sym", ","):
                        self._take()
                        args.append(self.comparison())
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
        if name == "IF" and len(args) in (2, 3):
            return _if(args[0], args[1], args[2] if len(args) == 3 else None)
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


def _if(condition: Any, then: Any, otherwise: Any) -> Any:
    """``IF(condition, then, otherwise)`` per datapoint (a scalar condition picks a whole argument)."""
    if not isinstance(condition, list):
        return None if condition is None else (then if condition else otherwise)
    if _is_array(condition):
        raise AlarmDefinitionError("IF over an array of series is not supported by the simulator")

    def at(value: Any, i: int) -> Any:
        return value[i] if isinstance(value, list) else value

    return [None if c is None else (at(then, i) if c else at(otherwise, i)) for i, c in enumerate(condition)]


def _arith(op: str, left: Any, right: Any) -> Any:
    def apply(a: float | None, b: float | None) -> float | None:
        if a is None or b is None:
            return None
        if op in _COMPARISONS:
            return float({">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b}[op])
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
