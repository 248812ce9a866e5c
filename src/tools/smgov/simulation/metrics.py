"""An in-memory CloudWatch metric store for the simulator, kept as piecewise-constant segments.

A simulated host publishes one datapoint per minute. Storing each minute of a fleet running for days
would cost millions of points, so a series is a list of segments ``[start, end)`` during which the
host published the same value every minute (``end`` is ``None`` while it still does). Aggregating a
period (Average, Maximum, ...) over segments gives exactly what CloudWatch computes from the
individual one-minute datapoints.

A segment may also hold a datapoint only every ``every`` minutes (a training metric logged once per
epoch): its datapoints are at ``start``, ``start + every``, ... Readers may pass ``until``: datapoints at
or after that minute have not arrived yet (CloudWatch's ingestion delay, see ``visible_until``).

Every change is announced to listeners, so the alarm evaluator only wakes the alarms whose metrics
changed instead of evaluating every alarm every minute.
"""

from __future__ import annotations

import functools
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Dimensions = tuple[tuple[str, str], ...]
MetricKey = tuple[str, str, Dimensions]

STATISTICS = ("Average", "Maximum", "Minimum", "Sum", "SampleCount")
# What CloudWatch keeps of a metric, by the age of a read's StartTime (botocore's model, MetricStat.Period):
# older than 3 hours, a multiple of 60 s; 15 to 63 days, of 300 s; older, of 3600 s, "or no data points in
# that time range is returned". (Minutes here: the simulator's clock.) The simulator's GetMetricData and the
# handler and service tests' doubles (``job_signals.py``, tests/service) answer by it.
RETENTION_MULTIPLES: tuple[tuple[int, int], ...] = ((63 * 1440, 3600), (15 * 1440, 300), (180, 60))


def kept_at(period_seconds: int, age_minutes: int) -> bool:
    """Whether CloudWatch answers a ``period_seconds`` read whose StartTime is ``age_minutes`` old."""
    for older_than, multiple in RETENTION_MULTIPLES:
        if age_minutes > older_than:
            return period_seconds % multiple == 0
    return True


def metric_key(namespace: str, name: str, dimensions: Iterable[Mapping[str, str]] = ()) -> MetricKey:
    """The identity of a metric: namespace, name and its dimensions (order does not matter)."""
    dims = tuple(sorted((str(d["Name"]), str(d["Value"])) for d in dimensions))
    return (namespace, name, dims)


@dataclass
class Segment:
    start: int
    end: int | None  # exclusive; None while the value is still being published
    value: float
    every: int = 1  # a datapoint every N minutes from ``start``

    def overlap(self, lo: int, hi: int) -> int:
        """How many of the segment's datapoints fall in ``[lo, hi)``."""
        end = hi if self.end is None else min(self.end, hi)
        begin = max(self.start, lo)
        if end <= begin:
            return 0
        if self.every == 1:
            return end - begin
        first = self.start + -(-(begin - self.start) // self.every) * self.every
        return 0 if first >= end else (end - 1 - first) // self.every + 1

    def has(self, minute: int) -> bool:
        return (
            self.start <= minute
            and (self.end is None or minute < self.end)
            and (minute - self.start) % self.every == 0
        )


def visible_until(key: MetricKey, now: int, delay: tuple[int, int], salt: str = "") -> int:
    """The first minute whose datapoint has not arrived by ``now``: the datapoint of minute ``t`` (complete
    at ``t + 1``) arrives ``d`` minutes later, ``d`` drawn per datapoint in ``[min, max]`` (seeded by the
    key and the minute). Arrival is taken as in order: a later datapoint is not seen before an earlier."""
    low, high = delay
    cutoff = now - low  # minutes before this may have arrived (t + 1 + low <= now)
    if high == low:
        return cutoff
    t = cutoff - 1
    while t >= now - high - 1:
        if t + 1 + low + _spread(salt, key, t, high - low + 1) <= now:
            return t + 1
        t -= 1
    return now - high


@functools.lru_cache(maxsize=1 << 17)
def _spread(salt: str, key: MetricKey, t: int, span: int) -> int:
    """The delay beyond the minimum of the datapoint of ``key``'s minute ``t`` (kept: an alarm evaluated each
    minute, and each read of its metric, asks again for the same minutes)."""
    return zlib.crc32(f"{salt}|{key}|{t}".encode()) % span


class MetricStore:
    def __init__(self) -> None:
        self._series: dict[MetricKey, list[Segment]] = {}
        self._starts: dict[MetricKey, list[int]] = {}
        self._last_change: dict[MetricKey, int] = {}
        self.listeners: list[Callable[[MetricKey, int], None]] = []

    def publish(self, key: MetricKey, minute: int, value: float | None, every: int = 1) -> None:
        """From ``minute`` on, publish ``value`` every ``every`` minutes (``None``: stop publishing)."""
        series = self._series.setdefault(key, [])
        starts = self._starts.setdefault(key, [])
        current = series[-1] if series and series[-1].end is None else None
        if current is not None and value is not None and current.value == value and current.every == every:
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
            series.append(Segment(minute, None, float(value), every))
            starts.append(minute)
        self._last_change[key] = minute
        for listener in self.listeners:
            listener(key, minute)

    def last_change(self, key: MetricKey) -> int | None:
        """The latest minute at which the metric started, changed or stopped (None: never published)."""
        return self._last_change.get(key)

    def sparse(self, key: MetricKey) -> bool:
        """The metric is being published less often than every minute (its data changes as time passes)."""
        series = self._series.get(key)
        return series is not None and bool(series) and series[-1].end is None and series[-1].every > 1

    def segments(self, key: MetricKey) -> list[Segment]:
        return [Segment(s.start, s.end, s.value, s.every) for s in self._series.get(key, [])]

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
        return segment.value if segment.has(minute) else None

    def aggregate(self, key: MetricKey, start: int, end: int, statistic: str) -> float | None:
        """One period's statistic over the one-minute datapoints in ``[start, end)``; None when none exist."""
        series = self._series.get(key)
        if not series or end <= start:
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
        self,
        key: MetricKey,
        first_bucket_start: int,
        buckets: int,
        period: int,
        statistic: str,
        *,
        until: int | None = None,
    ) -> list[float | None]:
        """``buckets`` consecutive period datapoints, oldest first, starting at ``first_bucket_start``;
        datapoints at or after ``until`` have not arrived (None: all have)."""
        series = self._series.get(key)
        if not series:
            return [None] * buckets
        if period == 1:  # one-minute periods: every statistic of one datapoint is the datapoint
            values = self._minutes(key, first_bucket_start, buckets)
            if until is not None and until < first_bucket_start + buckets:
                seen = max(0, until - first_bucket_start)
                values[seen:] = [None] * (buckets - seen)
            if statistic == "SampleCount":
                return [None if v is None else 1.0 for v in values]
            return values
        limit = first_bucket_start + buckets * period if until is None else until
        return [
            self.aggregate(
                key,
                first_bucket_start + i * period,
                min(first_bucket_start + (i + 1) * period, limit),
                statistic,
            )
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
            if hi <= lo:
                continue
            if segment.every == 1:
                out[lo - start : hi - start] = [segment.value] * (hi - lo)
                continue
            first = segment.start + -(-(lo - segment.start) // segment.every) * segment.every
            for minute in range(first, hi, segment.every):
                out[minute - start] = segment.value
        return out
