"""Burst: 300 and 1,000 jobs starting in one minute with ``PutMetricAlarm`` throttled at 3 per second.

Needs the simulator's CloudWatch quota model (issue 6: a token bucket on the virtual clock and a way to
start N jobs in one minute). Until it is on this branch, the figure is reported as pending.
"""

from __future__ import annotations

from typing import Any

SIZES = (300, 1000)


def measure() -> dict[str, Any]:
    return {
        "sizes": list(SIZES),
        "put_metric_alarm_rate_per_second": 3,
        "result": None,
        "reason": "pending quota model",
    }
