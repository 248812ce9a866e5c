"""A deep copy of the plain data the doubles keep and answer: request parameters, alarms, training jobs.

They are dicts, lists and tuples of strings, numbers, booleans, None, datetimes and bytes (what botocore
validates a request into, and what the doubles build), so a copy is a walk over the containers; the
scalars are immutable and shared, as ``copy.deepcopy`` shares them. ``copy.deepcopy``'s generic dispatch
and memo table cost several times as much for the same result (the CloudWatch double's DescribeAlarms
copies every alarm it answers: about 3 % of a fleet run). Anything else is copied by ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
from datetime import datetime
from decimal import Decimal
from typing import TypeVar

T = TypeVar("T")
_SHARED = (str, int, float, bool, type(None), datetime, bytes, Decimal)  # immutable: not copied


def plain_copy(value: T) -> T:
    """``copy.deepcopy(value)`` for plain data (shared references inside it are copied once each time)."""
    kind = type(value)
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}  # type: ignore[attr-defined,return-value]
    if kind is list:
        return [plain_copy(item) for item in value]  # type: ignore[attr-defined,return-value]
    if kind is tuple:
        return tuple(plain_copy(item) for item in value)  # type: ignore[attr-defined,return-value]
    if kind in _SHARED:
        return value
    return copy.deepcopy(value)
