"""An in-memory CloudWatch metric store for the simulator, kept as piecewise-constant segments.

A simulated host publishes one datapoint per minute. Storing each minute of a fleet running for days
would cost millions of points, so a series is a list of segments ``[start, end)`` during which the
host published the same value every minute (``end`` is ``None`` while it still does). Aggregating a
period (Average, Maximum, ...) over segments gives exactly what CloudWatch computes from the
individual one-minute datapoints.

Every change is announced to listeners, so the alarm evaluator only wakes the alarms whose metrics
changed instead of evaluating every alarm every minute.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Dimensions = tuple[tuple[str, str], ...]
MetricKey = tuple[str, str, Dimensions]

STATISTICS = ("Average", "Maximum", "Minimum", "Sum", "SampleCount")


def metric_key(namespace: str, name: str, dimensions: Iterable[Mapping[str, str]] = ()) -> MetricKey:
    """The identity of a metric: namespace, name and its dimensions (order does not matter)."""
    dims = tuple(sorted((str(d["Name"]), str(d["Value"])) for d in dimensions))
    return (namespace, name, dims)


@dataclass
class Segment:
    start: int
    end: int | None  # exclusive; None while the value is still being published
    value: float

    def overlap(self, lo: int, hi: int) -> int:
        end = hi if self.end is None else min(self.end, hi)
        return max(0, end - max(self.start, lo))


class MetricStore:
    def __init__(self) -> None:
        self._series: dict[MetricKey, list[Segment]] = {}
        self._starts: dict[MetricKey, list[int]] = {}
        self._last_change: dict[MetricKey, int] = {}
        self.listeners: list[Callable[[MetricKey, int], None]] = []

    def publish(self, key: MetricKey, minute: int, value: float | None) -> None:
        """From ``minute`` on, publish ``value`` every minute (``None``: stop publishing)."""
        series = self._series.setdefault(key, [])
        starts = self._starts.setdefault(key, [])
        current = series[-1] if series and series[-1].end is None else None
        if current is not None and value is not None and current.value == value:
            return
        if current is None and value is None:
            return
        if current is not None:
            if minute < current.start:
                raise ValueError(f"metric {key} written out of order at minute {minute}")
            if minute == current.start:  # replaced in the same minute: the later value wins
                series.pop()
                starts.pop()
            else:
                current.end = minute
        if value is not None:
            series.append(Segment(minute, None, float(value)))
            starts.append(minute)
        self._last_change[key] = minute
        for listener in self.listeners:
            listener(key, minute)

    def last_change(self, key: MetricKey) -> int | None:
        """The latest minute at which the metric started, changed or stopped (None: never published)."""
        return self._last_change.get(key)

    def segments(self, key: MetricKey) -> list[Segment]:
        return [Segment(s.start, s.end, s.value) for s in self._series.get(key, [])]

    def keys(self) -> list[MetricKey]:
        return list(self._series)

    def value_at(self, key: MetricKey, minute: int) -> float | None:
        series = self._series.get(key)
        if not series:
            return None
        index = bisect_right(self._starts[key], minute) - 1
        if index < 0:
            return None
        segment = series[index]
        if segment.end is not None and minute >= segment.end:
            return None
        return segment.value

    def aggregate(self, key: MetricKey, start: int, end: int, statistic: str) -> float | None:
        """One period's statistic over the one-minute datapoints in ``[start, end)``; None when none exist."""
        series = self._series.get(key)
        if not series:
            return None
        first = max(0, bisect_right(self._starts[key], start) - 1)
        count = 0
        total = 0.0
        high = float("-inf")
        low = float("inf")
        for segment in series[first:]:
            if segment.start >= end:
                break
            n = segment.overlap(start, end)
            if n <= 0:
                continue
            count += n
            total += segment.value * n
            high = max(high, segment.value)
            low = min(low, segment.value)
        if count == 0:
            return None
        if statistic == "Average":
            return total / count
        if statistic == "Maximum":
            return high
        if statistic == "Minimum":
            return low
        if statistic == "Sum":
            return total
        if statistic == "SampleCount":
            return float(count)
        raise ValueError(f"statistic {statistic!r} is not supported by the simulator (use one of {STATISTICS})")

    def datapoints(
        self, key: MetricKey, first_bucket_start: int, buckets: int, period: int, statistic: str
    ) -> list[float | None]:
        """``buckets`` consecutive period datapoints, oldest first, starting at ``first_bucket_start``."""
        series = self._series.get(key)
        if not series:
            return [None] * buckets
        if period == 1:  # one-minute periods: every statistic of one datapoint is the datapoint
            if statistic == "SampleCount":
                return [None if v is None else 1.0 for v in self._minutes(key, first_bucket_start, buckets)]
            return self._minutes(key, first_bucket_start, buckets)
        return [
            self.aggregate(key, first_bucket_start + i * period, first_bucket_start + (i + 1) * period, statistic)
            for i in range(buckets)
        ]

    def _minutes(self, key: MetricKey, start: int, count: int) -> list[float | None]:
        """The one-minute values in ``[start, start + count)``, walking the segments once."""
        series = self._series[key]
        out: list[float | None] = [None] * count
        index = max(0, bisect_right(self._starts[key], start) - 1)
        end = start + count
        for segment in series[index:]:
            if segment.start >= end:
                break
            lo = max(segment.start, start)
            hi = end if segment.end is None else min(segment.end, end)
            if hi > lo:
                out[lo - start : hi - start] = [segment.value] * (hi - lo)
        return out
