"""Alarm states and the error for what the simulator cannot evaluate."""

from __future__ import annotations

ALARM, OK, INSUFFICIENT_DATA = "ALARM", "OK", "INSUFFICIENT_DATA"


class AlarmDefinitionError(ValueError):
    """The simulator cannot evaluate this alarm (an unsupported statistic, operator or expression)."""
