"""Composite alarms: ``AlarmRule`` with ``ALARM(x)``, ``OK(x)``, ``INSUFFICIENT_DATA(x)``, ``AND``, ``OR``,
``NOT``, ``TRUE``, ``FALSE`` and parentheses; children named by alarm name or ARN."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from smgov.simulation.alarms.base import ALARM, INSUFFICIENT_DATA, OK, AlarmDefinitionError

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
        return {ref for _, ref in rule_refs(self.rule)}

    def evaluate(self, state_of: Callable[[str], str]) -> bool:
        tokens = _RULE_TOKEN.findall(self.rule)
        value, position = _rule_or(tokens, 0, state_of, self.rule)
        if position != len(tokens):
            raise AlarmDefinitionError(f"unexpected {tokens[position]!r} in alarm rule {self.rule!r}")
        return value


def rule_refs(rule: str) -> list[tuple[str, str]]:
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
