"""Whether the hosts' GPU data covers the window a heterogeneous composite alarm judged (domain/gpu_coverage.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sagemaker_governance.domain.gpu_coverage import STOPPED_SLACK, gpu_coverage, gpu_queries
from sagemaker_governance.domain.stall_judge import MetricReadResult

END = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
START = END - timedelta(minutes=30)
QUERIES = gpu_queries("job-1", 3)  # algo-1 publishes no GPUUtilization (a CPU host), algo-2 and algo-3 do


def read(newest: timedelta, *, with_times: bool = True) -> MetricReadResult:
    """algo-2 and algo-3 with a datapoint every minute of the window up to ``newest`` before its end."""
    minutes = tuple(
        START + timedelta(minutes=m) for m in range(int((END - newest - START).total_seconds() // 60) + 1)
    )
    values: dict[str, tuple[float, ...] | None] = {
        "g0": (),
        "g1": tuple(0.0 for _ in minutes),
        "g2": tuple(0.0 for _ in minutes),
    }
    times = {"g0": (), "g1": minutes, "g2": minutes} if with_times else {}
    return MetricReadResult(values, (), times)


def test_data_that_arrives_a_few_minutes_late_still_covers_the_window() -> None:
    # Given both GPU hosts' newest minute as old as the alarm's period plus the ingestion slack
    covered = gpu_coverage(
        QUERIES,
        read(timedelta(minutes=1) + STOPPED_SLACK),
        start=START,
        end=END,
        period_seconds=60,
        min_coverage=0.5,
    )
    # Then the window is covered: a host without any data (a CPU host) does not count against it
    assert covered.covered and covered.evidence["hosts_with_data"] == 2


def test_data_that_stopped_a_minute_earlier_does_not() -> None:
    stopped = timedelta(minutes=2) + STOPPED_SLACK
    covered = gpu_coverage(QUERIES, read(stopped), start=START, end=END, period_seconds=60, min_coverage=0.5)
    assert not covered.covered and set(covered.evidence["stopped"]) == {"job-1/algo-2", "job-1/algo-3"}


def test_a_reader_that_cannot_say_when_its_datapoints_are_covers_nothing() -> None:
    covered = gpu_coverage(
        QUERIES,
        read(timedelta(minutes=1), with_times=False),
        start=START,
        end=END,
        period_seconds=60,
        min_coverage=0.5,
    )
    assert not covered.covered
