"""The simulated account's FilterLogEvents honours logStreamNamePrefix, as CloudWatch Logs does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws
from moto.logs.responses import LogsResponse

from sagemaker_governance.adapters.training_logs import LOG_GROUP, TrainingLogs
from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.logs import GROUP, LogStreams
from smgov.simulation.engine.moto_logs import DirectLogs, honoring_prefix
from smgov.simulation.harness import REGION, patched_env

NOW = datetime.now(UTC).replace(second=0, microsecond=0)  # moto's Logs keeps recent events only


def test_another_jobs_busy_stream_is_not_the_stalled_jobs_log_activity() -> None:
    with (
        mock_aws(),
        mock.patch.object(LogsResponse, "filter_log_events", honoring_prefix(LogsResponse.filter_log_events)),
    ):
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=LOG_GROUP)
        # Given a busy job whose stream sorts before the stalled job's, and a silent stalled job
        for stream in ("a-busy/algo-1-1", "stalled/algo-1-1", "stalled-2/algo-1-1"):
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        for stream in ("a-busy/algo-1-1", "stalled-2/algo-1-1"):
            logs.put_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=stream,
                logEvents=[{"timestamp": int((NOW - timedelta(minutes=3)).timestamp() * 1000), "message": "step"}],
            )
        # When the judge reads the stalled job's activity over the last 30 minutes
        found = TrainingLogs(logs).activity("stalled", NOW - timedelta(minutes=30), NOW)
        # Then only its own stream counts: silent (moto alone answers with the busy job's line)
        assert found.streams == 1 and found.line_at is None
        busy = TrainingLogs(logs).activity("a-busy", NOW - timedelta(minutes=30), NOW)
        assert busy.line_stream == "a-busy/algo-1-1"
        none = logs.filter_log_events(logGroupName=LOG_GROUP, logStreamNamePrefix="nobody/")
        assert none["events"] == []


def _written(logs: Any, clock: VirtualClock, writer: Any) -> list[tuple[str, list[tuple[int, str]]]]:
    """Two hosts' lines flushed twice through ``writer``, read back by a client: (stream, [(time, text)])."""
    streams = LogStreams(clock)
    streams.cadence("job/algo-1", 1, 0)
    streams.cadence("job/algo-2", 5, 0)
    streams.write("job/algo-2", 7, ("Traceback (most recent call last):", "RuntimeError: boom"))
    for minute in (30, 61):
        clock.now = minute
        streams.flush(writer, minute)
    out = []
    for name in sorted(streams.streams):
        events = logs.get_log_events(logGroupName=GROUP, logStreamName=name, startFromHead=True)["events"]
        out.append((name, [(e["timestamp"], e["message"]) for e in events]))
    return out


def _flushed(account: str, *, direct: bool) -> tuple[list[tuple[str, list[tuple[int, str]]]], int]:
    """The lines read back from ``account``, written directly or by a client; PutLogEvents requests served."""
    served: list[None] = []
    put_log_events = LogsResponse.put_log_events

    def counted(self: LogsResponse) -> str:
        served.append(None)
        return put_log_events(self)

    with patched_env({"MOTO_ACCOUNT_ID": account}), mock.patch.object(LogsResponse, "put_log_events", counted):
        logs = boto3.client("logs", region_name=REGION)
        logs.create_log_group(logGroupName=GROUP)
        writer = DirectLogs(account, REGION) if direct else logs
        return _written(logs, VirtualClock(NOW - timedelta(hours=2)), writer), len(served)


def test_the_simulators_own_lines_go_into_motos_backend_as_a_client_would_put_them() -> None:
    with mock_aws():
        # Given the same hosts' lines, written by a client in one account and directly in another
        by_client, client_requests = _flushed("111111111111", direct=False)
        direct, direct_requests = _flushed("222222222222", direct=True)
    # Then moto holds the same events in the same streams, and the direct writes made no request
    assert direct == by_client and sum(len(events) for _, events in direct) > 60
    assert client_requests > 0 and direct_requests == 0
