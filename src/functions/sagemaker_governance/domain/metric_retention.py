"""What CloudWatch still answers of a metric, by how far back a ``GetMetricData`` read starts.

botocore's CloudWatch model, ``MetricStat.Period``: "If the StartTime parameter specifies a time stamp that
is greater than 3 hours ago, you must specify the period as follows or no data points in that time range is
returned: Start time between 3 hours and 15 days ago - Use a multiple of 60 seconds (1 minute). Start time
between 15 and 63 days ago - Use a multiple of 300 seconds (5 minutes). Start time greater than 63 days ago -
Use a multiple of 3600 seconds (1 hour)." A read that breaks the rule is not refused: each query answers
``Complete`` with no datapoint, which a reader cannot tell from a metric never published. (CloudWatch also
rounds such a ``StartTime`` down to its 5-minute or 1-hour clock interval: ``GetMetricData``, ``StartTime``.)

Every reader whose ``StartTime`` may lie more than 15 days back reads with a period from here: the
efficiency record (``domain/efficiency.py``, a job's life) and the progress guard's arming read
(``service/guard_alarms.py``, a stint up to SageMaker's 28 days of training). The stall judge reads at most
``judge.max_rejudge_minutes`` (a day) back, at one minute.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Final

# (older than, the period a read from then must be a multiple of), oldest first
RETENTION: Final = ((timedelta(days=63), 3600), (timedelta(days=15), 300))
FINEST_SECONDS: Final = 60  # a metric of standard resolution, as SageMaker publishes them


def finest_period(start: datetime, now: datetime) -> int:
    """The finest period (seconds) CloudWatch answers at ``now`` for a read from ``start``: one minute, five
    for a start more than 15 days back, an hour for one more than 63 days back."""
    for age, multiple in RETENTION:
        if now - start > age:
            return multiple
    return FINEST_SECONDS


def retained_period(start: datetime, now: datetime, period_seconds: int) -> int:
    """``period_seconds`` if CloudWatch answers it for a read from ``start``, else the finest multiple of it
    that it does (a bucket of that period sums or counts the finer ones it holds)."""
    return math.lcm(period_seconds, finest_period(start, now))
