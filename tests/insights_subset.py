"""A strict reader for the subset of the Logs Insights language our queries use, for tests.

moto's Logs Insights understands only ``fields``/``sort``/``limit`` over ``@`` fields (no ``filter``, no
JSON fields, no ``stats``), so the tests check our queries with this instead: it splits a query into its
commands, and evaluates ``filter`` clauses (``field = "text"``, ``!=``, ``and``, ``or``, parentheses)
against log lines flattened the way Insights discovers JSON fields (nested keys joined by dots).
Anything outside the subset raises, so a query that drifts from it fails loudly instead of passing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

COMMANDS = ("fields", "filter", "stats", "sort", "limit", "display")
_TOKEN = re.compile(r'\s*(?:(?P<str>"[^"\\]*")|(?P<op>!=|=)|(?P<paren>[()])|(?P<word>[A-Za-z_@][\w.@-]*))')


def commands(query: str) -> list[tuple[str, str]]:
    """``[(command, arguments), ...]``; ``SOURCE`` clauses (dashboard log widgets) are skipped."""
    out: list[tuple[str, str]] = []
    for part in query.split("|"):
        text = part.strip()
        if text.startswith("SOURCE "):
            continue
        name, _, rest = text.partition(" ")
        if name not in COMMANDS:
            raise ValueError(f"unsupported Logs Insights command {name!r} in {query!r}")
        out.append((name, rest.strip()))
    return out


def flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A JSON log line's fields as Insights names them: ``{"audit": {"rule": "x"}}`` -> ``audit.rule``."""
    out: dict[str, Any] = {}
    for key, value in document.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _tokens(expression: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKEN.match(expression, position)
        if not match or match.end() == position:
            raise ValueError(f"cannot read filter at {expression[position:]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


class _Filter:
    """A recursive-descent reading of one ``filter`` expression over a flattened log line."""

    def __init__(self, expression: str, line: Mapping[str, Any]) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.fields = flatten(line)
        self.position = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def primary(self) -> bool:
        token = self.take()
        if token == ("paren", "("):
            value = self.disjunction()
            if self.take() != ("paren", ")"):
                raise ValueError(f"unbalanced parentheses in {self.expression!r}")
            return value
        if token[0] != "word":
            raise ValueError(f"expected a field in {self.expression!r}, got {token[1]!r}")
        op, literal = self.take(), self.take()
        if op[0] != "op" or literal[0] != "str":
            raise ValueError(f'expected `field = "text"` in {self.expression!r}')
        actual = self.fields.get(token[1])
        actual_text = None if actual is None else (actual if isinstance(actual, str) else json.dumps(actual))
        equal = actual_text == literal[1][1:-1]
        return equal if op[1] == "=" else (actual is not None and not equal)

    def conjunction(self) -> bool:
        value = self.primary()
        while self.peek() == ("word", "and"):
            self.take()
            value = self.primary() and value
        return value

    def disjunction(self) -> bool:
        value = self.conjunction()
        while self.peek() == ("word", "or"):
            self.take()
            value = self.conjunction() or value
        return value


def matches(expression: str, line: Mapping[str, Any]) -> bool:
    """Evaluate one ``filter`` expression against a flattened log line."""
    parser = _Filter(expression, line)
    result = parser.disjunction()
    if parser.position != len(parser.tokens):
        raise ValueError(f"unexpected {parser.tokens[parser.position][1]!r} in {expression!r}")
    return result


def selects(query: str, line: Mapping[str, Any]) -> bool:
    """True when every ``filter`` of the query keeps this log line."""
    return all(matches(args, line) for name, args in commands(query) if name == "filter")


def output_fields(query: str) -> list[str]:
    """Fields a query reads from the log events in ``fields``, ``display``, ``stats ... by``, and inside stats
    functions (a second ``stats`` reads the first one's output, which ``execute`` checks)."""
    out: list[str] = []
    stats_seen = 0
    for name, args in commands(query):
        if name in ("fields", "display"):
            out += [f.strip() for f in args.split(",")]
        elif name == "stats" and (stats_seen := stats_seen + 1) == 1:
            aggregates, _, by = args.partition(" by ")
            out += re.findall(r"\(([\w.@]+)\)", aggregates)
            out += [f.strip() for f in by.split(",") if f.strip()]
    return [f for f in out if f != "*"]


# ---- executing a query over log events ----------------------------------------------------------

# ``max`` and ``latest`` (the value of the event with the latest timestamp): "Functions to use with stats"
# in the Logs Insights query syntax reference (CWL_QuerySyntax-Stats).
_AGGREGATE = re.compile(r"^(count|count_distinct|sum|max|latest)\(([\w.@*]+)\)\s+as\s+(\w+)$")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def _timestamp(millis: int) -> str:
    from datetime import UTC, datetime

    moment = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def _stats(args: str, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    aggregates_text, _, by_text = args.partition(" by ")
    by = [f.strip() for f in by_text.split(",") if f.strip()]
    aggregates = []
    for part in aggregates_text.split(","):
        match = _AGGREGATE.match(part.strip())
        if not match:
            raise ValueError(f"unsupported stats expression {part.strip()!r}")
        aggregates.append(match.groups())
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(f) for f in by), []).append(row)
    out = []
    for key, members in groups.items():
        result: dict[str, Any] = {f: v for f, v in zip(by, key, strict=True) if v is not None}
        for function, field, alias in aggregates:
            values: list[Any] = (
                members if field == "*" else [m[field] for m in members if m.get(field) is not None]
            )
            if function == "count":
                result[alias] = len(values)
            elif function == "count_distinct":
                result[alias] = len({json.dumps(v, sort_keys=True) for v in values})
            elif function == "latest":  # events are in timestamp order
                if values:
                    result[alias] = values[-1]
            elif function == "max" and values:  # a time statistic is shown as Insights shows times
                result[alias] = _timestamp(max(values)) if field == "@timestamp" else max(values)
            elif values:  # sum of no numbers: Insights leaves the statistic out
                result[alias] = float(sum(float(v) for v in values))
        out.append(result)
    return out, by + [alias for _, _, alias in aggregates]


def _check_stats(query: str, args: str, defined: list[str], before: list[str]) -> None:
    """A stats after ``before`` (the commands so far), where the previous stats defined ``defined``: "Use
    multiple stats commands in a single query" (CWL_QuerySyntax-Stats): at most two; a sort or limit only
    after the second; the second refers only to fields the first defined."""
    if "stats" not in before:
        return
    if before.count("stats") > 1:
        raise ValueError(f"more than two stats in {query!r}")
    if "sort" in before or "limit" in before:
        raise ValueError(f"sort or limit before the second stats in {query!r}")
    aggregates_text, _, by_text = args.partition(" by ")
    read = re.findall(r"\(([\w.@]+)\)", aggregates_text) + [f.strip() for f in by_text.split(",")]
    undefined = {f for f in read if f and f != "*" and f not in defined}
    if undefined:
        raise ValueError(f"the second stats reads {sorted(undefined)}, not defined by the first")


def execute(query: str, events: list[tuple[int, dict[str, Any]]]) -> list[list[dict[str, str]]]:
    """Run a query over ``(timestamp_ms, json_line)`` events; rows shaped like GetQueryResults'."""
    rows: list[dict[str, Any]] = [
        {**flatten(line), "@timestamp": ts, "@message": json.dumps(line), "@ptr": f"ptr-{n}"}
        for n, (ts, line) in enumerate(events)
    ]
    columns: list[str] | None = None
    before: list[str] = []  # the commands so far
    for name, args in commands(query):
        if name == "filter":
            rows = [row for row in rows if matches(args, row)]
        elif name in ("fields", "display"):
            columns = [f.strip() for f in args.split(",")]
        elif name == "stats":
            _check_stats(query, args, columns or [], before)
            rows, columns = _stats(args, rows)
        elif name == "sort":
            field, _, order = args.partition(" ")
            present = [r for r in rows if r.get(field) is not None]
            missing = [r for r in rows if r.get(field) is None]
            rows = sorted(present, key=lambda r: r[field], reverse=order.strip() != "asc") + missing
        elif name == "limit":
            rows = rows[: int(args)]
        before.append(name)
    if columns is None:
        columns = ["@timestamp", "@message"]
    results = []
    for row in rows:
        cells = []
        for column in columns:
            if row.get(column) is None:
                continue  # Insights leaves out fields an event does not have
            value = _timestamp(row[column]) if column == "@timestamp" else _text(row[column])
            cells.append({"field": column, "value": value})
        if "stats" not in before:
            cells.append({"field": "@ptr", "value": row["@ptr"]})
        results.append(cells)
    return results
