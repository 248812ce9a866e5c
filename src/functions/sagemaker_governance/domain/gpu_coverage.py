"""Whether a guard's composite alarm that treats missing data as ``missing`` fired on GPU data (pure).

Above 10 hosts, on a cluster with hosts that publish no ``GPUUtilization`` (a heterogeneous cluster's CPU,
Trainium or Inferentia groups), the idle and efficiency guards' child alarms treat missing data as
``missing``: a child that holds CPU hosts only has no data and must not block the composite. But such a
child also goes to ``ALARM`` on a few breaching datapoints followed by silence: CloudWatch sends an alarm to
``ALARM`` when the oldest available breaching datapoint in its evaluation range is at least
``DatapointsToAlarm`` periods old and every more recent one is breaching or missing (the CloudWatch user
guide's missing-data table, row ``X - - - -``; the knowledge-center article "Why did my CloudWatch alarm
send me a notification after a single breached data point?"). Three idle minutes and then an agent or
driver failure on every GPU host (no ``GPUUtilization`` any more) fire the idle guard's composite half an
hour later; ten low minutes and then silence fire the efficiency guard's stop composite.

So before it stops a job or tells its owner on such a composite, the stopper reads each host's
``GPUUtilization`` (one-minute ``Average``, one ``GetMetricData``) over the window the alarm judged, as of its
state change, and ``gpu_coverage`` says whether the data covers it: some host published for at least
``judge.min_coverage`` of the window's minutes (the stall judge's own measure of a thin series), and no host
that published in the window stopped publishing before the window's end (its newest minute at most the
alarm's period plus ``STOPPED_SLACK`` before the end: CloudWatch ingests a minute's datapoint a few minutes
late). A read that failed, or a reader that cannot say when its datapoints are, covers nothing: missing data
never stops a job.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple

from sagemaker_governance.domain.stall_judge import GPU, MetricRead, MetricReadResult, host_names

# How long before the window's end a host's newest GPUUtilization minute may be, beyond the alarm's period,
# and the host still count as publishing (the metric's ingestion delay).
STOPPED_SLACK: Final = timedelta(minutes=5)
MAX_HOSTS_NAMED: Final = 5


class GpuCoverage(NamedTuple):
    """Whether the hosts' GPU data covers the window; why not, in words; what was read."""

    covered: bool
    reason: str
    evidence: dict[str, Any]


def gpu_queries(job_name: str, hosts: int) -> tuple[MetricRead, ...]:
    """One ``GPUUtilization`` series per host of the job (``Host=<job>/algo-<n>``), one-minute Average."""
    return tuple(
        MetricRead(f"g{i}", GPU, (("Host", host),), "Average")
        for i, host in enumerate(host_names(job_name, hosts))
    )


def gpu_coverage(
    queries: Sequence[MetricRead],
    read: MetricReadResult,
    *,
    start: datetime,
    end: datetime,
    period_seconds: int,
    min_coverage: float,
) -> GpuCoverage:
    """Whether ``read`` (``queries`` over ``[start, end)``) covers the window the alarm judged (see the module
    docstring); ``period_seconds``: the alarm's period."""
    minutes = max(1, int((end - start).total_seconds() // 60))
    need = max(1, int(minutes * min_coverage))  # as the stall judge counts a thin series
    evidence: dict[str, Any] = {
        "window": {"start": start.isoformat(), "end": end.isoformat(), "minutes": minutes},
        "min_coverage": min_coverage,
        "minutes_needed": need,
    }
    if read.errors:
        evidence["unread"] = list(read.errors)[:MAX_HOSTS_NAMED]
        return GpuCoverage(False, f"the hosts' GPUUtilization could not be read ({read.errors[0]})", evidence)
    published: dict[str, tuple[int, datetime | None]] = {}
    for query in queries:
        values = read.values.get(query.id)
        if values is None:
            evidence["unread"] = [f"{GPU} of {dict(query.dimensions)['Host']}"]
            return GpuCoverage(False, f"the {GPU} of a host was not read", evidence)
        if values:
            times = read.times.get(query.id, ())
            newest = max(times) if len(times) == len(values) else None
            published[dict(query.dimensions)["Host"]] = (len(values), newest)
    evidence["hosts_with_data"] = len(published)
    if not published:
        return GpuCoverage(
            False, f"no host of the job published {GPU} in the {minutes}-minute window the alarm judged", evidence
        )
    best = max(count for count, _ in published.values())
    evidence["most_minutes_on_a_host"] = best
    if best < need:
        return GpuCoverage(
            False,
            f"no host published {GPU} for more than {best} of the {minutes} minutes of the window the alarm judged "
            f"(at least {need} are needed, judge.min_coverage {min_coverage:g})",
            evidence,
        )
    latest_allowed = end - timedelta(seconds=period_seconds) - STOPPED_SLACK
    if any(newest is None for _, newest in published.values()):
        return GpuCoverage(False, f"when the hosts' {GPU} datapoints were is unknown", evidence)
    stopped = {
        host: newest
        for host, (_, newest) in sorted(published.items())
        if newest is not None and newest < latest_allowed
    }
    if stopped:
        evidence["stopped"] = {host: t.isoformat() for host, t in list(stopped.items())[:MAX_HOSTS_NAMED]}
        named = ", ".join(
            f"{host} (last at {t.isoformat()})" for host, t in list(stopped.items())[:MAX_HOSTS_NAMED]
        )
        more = f" and {len(stopped) - MAX_HOSTS_NAMED} more" if len(stopped) > MAX_HOSTS_NAMED else ""
        return GpuCoverage(
            False,
            f"{GPU} stopped arriving before the end of the window the alarm judged ({end.isoformat()}) on "
            f"{named}{more}",
            evidence,
        )
    return GpuCoverage(True, f"{GPU} covers the {minutes}-minute window the alarm judged", evidence)
