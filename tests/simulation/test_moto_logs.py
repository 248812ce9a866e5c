"""The simulated account's FilterLogEvents honours logStreamNamePrefix, as CloudWatch Logs does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import boto3
from moto import mock_aws
from moto.logs.responses import LogsResponse

from sagemaker_governance.adapters.training_logs import LOG_GROUP, TrainingLogs
from smgov.simulation.engine.moto_logs import honoring_prefix

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
