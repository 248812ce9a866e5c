"""CloudWatch metric math over the simulator's datapoints: ``MAX([m1, m2])``, ``MIN``, ``AVG``, ``SUM``,
``FILL``, ``METRICS()``, ``ABS``, arithmetic, comparison operators (1 for true, 0 for false) and
``IF(condition, a, b)`` (per datapoint: ``a`` where the condition is non-zero, else ``b``; missing where the
condition is missing). Scalars are floats, time series lists, arrays lists of
lists (``MAX([m1, m2])`` is a series, ``MAX(m1)`` a scalar)."""

from __future__ import annotations

import operator
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
    return _Evaluation(values, queries, expression).run(_compiled(expression))


# The expression as a tree, read once per text (an alarm's expression is evaluated every simulated minute):
# ("num", float) | ("str", text) | ("id", name) | ("word", "REPEAT" | "LINEAR") | ("array", items)
# | ("call", NAME, args) | ("op", symbol, left, right) | ("neg", operand)
_Node = tuple[Any, ...]


@cache
def _compiled(text: str) -> _Node:
    parser = _ExpressionParser(_tokens(text), text)
    tree = parser.comparison()
    if parser.position != len(parser.tokens):
        raise AlarmDefinitionError(f"unexpected {parser.tokens[parser.position][1]!r} in {text!r}")
    return _shared(tree, {})


def _shared(node: _Node, seen: dict[_Node, _Node]) -> _Node:
    """The tree with every repeated subtree one object: the idle guard's expression names ``MAX([...])`` and
    ``MIN([...])`` of the same hosts twice each, and an evaluation computes each object once (``_Evaluation``)."""
    found = seen.get(node)
    if found is not None:
        return found
    kind = node[0]
    if kind == "op":
        node = (kind, node[1], _shared(node[2], seen), _shared(node[3], seen))
    elif kind == "neg":
        node = (kind, _shared(node[1], seen))
    elif kind == "array":
        node = (kind, tuple(_shared(item, seen) for item in node[1]))
    elif kind == "call":
        node = (kind, node[1], tuple(_shared(arg, seen) for arg in node[2]))
    return seen.setdefault(node, node)


class _ExpressionParser:
    def __init__(self, tokens: tuple[tuple[str, str], ...], text: str) -> None:
        self.tokens, self.text = tokens, text
        self.position = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, symbol: str | None = None) -> tuple[str, str]:
        token = self._peek()
        if token is None or (symbol is not None and token != ("sym", symbol)):
            raise AlarmDefinitionError(f"expected {symbol or 'a value'} in {self.text!r}")
        self.position += 1
        return token

    def comparison(self) -> _Node:
        left = self.expr()
        while (token := self._peek()) is not None and token[0] == "sym" and token[1] in _COMPARISONS:
            self._take()
            left = ("op", token[1], left, self.expr())
        return left

    def expr(self) -> _Node:
        left = self.term()
        while (token := self._peek()) in (("sym", "+"), ("sym", "-")):
            self._take()
            assert token is not None
            left = ("op", token[1], left, self.term())
        return left

    def term(self) -> _Node:
        left = self.unary()
        while (token := self._peek()) in (("sym", "*"), ("sym", "/")):
            self._take()
            assert token is not None
            left = ("op", token[1], left, self.unary())
        return left

    def unary(self) -> _Node:
        if self._peek() == ("sym", "-"):
            self._take()
            return ("neg", self.unary())
        return self.primary()

    def primary(self) -> _Node:
        kind, text = self._take()
        if kind == "num":
            return ("num", float(text))
        if kind == "str":
            return ("str", text)
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
            return ("array", tuple(items))
        if kind == "name":
            if self._peek() == ("sym", "("):
                self._take()
                args: list[_Node] = []
                if self._peek() != ("sym", ")"):
                    args.append(self.comparison())
                    while self._peek() == ("sym", ","):
                        self._take()
                        args.append(self.comparison())
                self._take(")")
                return ("call", text.upper(), tuple(args))
            if text.upper() in ("REPEAT", "LINEAR"):
                return ("word", text.upper())
            return ("id", text)
        raise AlarmDefinitionError(f"unexpected {text!r} in {self.text!r}")


class _Evaluation:
    """One evaluation of a compiled expression over the alarm's values (left to right, as it reads). A
    subtree the expression repeats is one object (``_shared``) and is computed once: every operation here
    builds new lists and none changes its arguments, so the value computed first is the value again."""

    def __init__(self, values: Mapping[str, Any], queries: Sequence[MetricQuery], text: str) -> None:
        self.values, self.queries, self.text = values, queries, text
        self._done: dict[int, Any] = {}  # id of a compiled node -> its value (the tree outlives the evaluation)

    def run(self, node: _Node) -> Any:
        done = self._done.get(id(node), _NOT_YET)
        if done is not _NOT_YET:
            return done
        value = self._run(node)
        self._done[id(node)] = value
        return value

    def _run(self, node: _Node) -> Any:
        kind = node[0]
        if kind == "op":
            left = self.run(node[2])
            return _arith(node[1], left, self.run(node[3]))
        if kind == "id":
            if node[1] not in self.values:
                raise AlarmDefinitionError(f"{self.text!r}: unknown id {node[1]!r}")
            return self.values[node[1]]
        if kind == "call":
            return self.call(node[1], [self.run(arg) for arg in node[2]])
        if kind == "neg":
            return _arith("*", -1.0, self.run(node[1]))
        if kind == "array":
            return [self.run(item) for item in node[1]]
        return node[1]  # num, str, word

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


_NOT_YET = object()


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


# MAX, MIN and SUM across series, per timestamp (AVG: the sum over the count), as ``_combine`` computes them.
_ACROSS: dict[str, Callable[[Sequence[float]], float]] = {"MAX": max, "MIN": min, "SUM": sum}


def _reduce(name: str, value: Any) -> Any:
    if _is_array(value):  # per timestamp, across the series; missing only where every series is missing
        columns = zip(*value, strict=True)
        across = _ACROSS.get(name)
        if all(type(series) is list and None not in series for series in value):  # no datapoint missing
            if across is not None:
                return list(map(across, columns))
            return [sum(column) / len(column) for column in columns]
        present = ([v for v in column if v is not None] for column in columns)
        if across is not None:
            return [across(values) if values else None for values in present]
        return [sum(values) / len(values) if values else None for values in present]
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


def _divide(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


_OPERATIONS: dict[str, Callable[[float, float], float | None]] = {
    ">=": lambda a, b: float(a >= b),
    "<=": lambda a, b: float(a <= b),
    "==": lambda a, b: float(a == b),
    "!=": lambda a, b: float(a != b),
    ">": lambda a, b: float(a > b),
    "<": lambda a, b: float(a < b),
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
}


def _arith(op: str, left: Any, right: Any) -> Any:
    operation = _OPERATIONS[op]
    if _is_array(left):
        return [_arith(op, series, right) for series in left]
    if _is_array(right):
        return [_arith(op, left, series) for series in right]
    if isinstance(left, list) and isinstance(right, list):
        return [None if a is None or b is None else operation(a, b) for a, b in zip(left, right, strict=True)]
    if isinstance(left, list):
        if right is None:
            return [None] * len(left)
        return [None if a is None else operation(a, right) for a in left]
    if isinstance(right, list):
        if left is None:
            return [None] * len(right)
        return [None if b is None else operation(left, b) for b in right]
    return None if left is None or right is None else operation(left, right)
