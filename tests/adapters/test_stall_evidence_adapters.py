"""The stall judge's readers against moto (request shapes, paging, error translation)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.stub import Stubber
from moto.logs.responses import LogsResponse

from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.training_logs import LOG_GROUP, RHYTHM_PAGES, LogsUnavailable, TrainingLogs
from sagemaker_governance.domain.stall_judge import JudgePolicy, LogRhythm, MetricRead
from sagemaker_governance.service.stall_judge import StallJudge
from smgov.simulation.engine.moto_logs import honoring_prefix
from tests.adapters.conftest import CallRecorder

NOW = datetime.now(UTC).replace(second=0, microsecond=0)  # moto's CloudWatch keeps recent datapoints only


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.fixture
def logs(aws: None) -> Any:
    client = boto3.client("logs", region_name="us-east-1")
    client.create_log_group(logGroupName=LOG_GROUP)
    return client


def test_a_line_in_the_window_of_the_jobs_own_streams_is_found(logs: Any) -> None:
    # Given two streams of job-1 (an old line, a recent one) and a busy stream of job-10
    for stream in ("job-1/algo-1-1700000000", "job-1/algo-2-1700000000", "job-10/algo-1-1700000000"):
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    at = NOW - timedelta(minutes=5)
    logs.put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName="job-1/algo-2-1700000000",
        logEvents=[
            {"timestamp": _millis(NOW - timedelta(hours=2)), "message": "epoch 1"},
            {"timestamp": _millis(at), "message": "step 90"},
        ],
    )
    logs.put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName="job-10/algo-1-1700000000",
        logEvents=[{"timestamp": _millis(at), "message": "x"}],
    )
    recorder = CallRecorder().attach(logs)
    reader = TrainingLogs(logs)
    # When the window covers the recent line
    found = reader.activity("job-1", NOW - timedelta(minutes=30), NOW)
    # Then it is found, in job-1's stream; another job's streams never count
    assert found.streams == 2 and found.line_stream == "job-1/algo-2-1700000000"
    assert found.line_at == at
    quiet = reader.activity("job-1", NOW - timedelta(minutes=4), NOW)
    assert quiet.streams == 2 and quiet.line_at is None and not quiet.truncated
    assert recorder.actions == TrainingLogs.IAM_ACTIONS


def test_no_stream_at_all_is_reported_not_read_as_silence(logs: Any) -> None:
    assert TrainingLogs(logs).activity("job-2", NOW - timedelta(minutes=30), NOW).streams == 0


def test_an_unreadable_log_group_raises(aws: None) -> None:
    client = boto3.client("logs", region_name="us-east-1")  # no log group
    with pytest.raises(LogsUnavailable, match="ResourceNotFoundException"):
        TrainingLogs(client).activity("job-1", NOW - timedelta(minutes=30), NOW)


def test_empty_pages_with_a_token_are_followed_and_a_cut_short_search_says_so() -> None:
    client = boto3.client("logs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    stubber.add_response("describe_log_streams", {"logStreams": [{"logStreamName": "job-1/algo-1-1"}]})
    for _ in range(10):
        stubber.add_response("filter_log_events", {"events": [], "nextToken": "more"})
    with stubber:
        found = TrainingLogs(client).activity("job-1", NOW - timedelta(minutes=30), NOW)
    assert found.truncated and found.line_at is None


def test_the_rhythm_is_the_times_of_the_jobs_own_lines_across_its_streams(logs: Any) -> None:
    # Given job-1's two hosts logging every 2 minutes (host 2 a minute later) and, once, a 10-minute gap
    start = NOW - timedelta(minutes=40)
    minutes = [*range(0, 20, 2), *range(29, 38, 2)]
    for host, offset in (("algo-1", 0), ("algo-2", 1)):
        stream = f"job-1/{host}-1700000000"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        events = [
            {"timestamp": _millis(start + timedelta(minutes=m + offset)), "message": "step"} for m in minutes
        ]
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="job-10/algo-1-1700000000")
    logs.put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName="job-10/algo-1-1700000000",
        logEvents=[{"timestamp": _millis(start + timedelta(minutes=25)), "message": "another job"}],
    )
    recorder = CallRecorder().attach(logs)
    # When its rhythm is read over the 40 minutes (moto searching by stream prefix as CloudWatch Logs does)
    with mock.patch.object(LogsResponse, "filter_log_events", honoring_prefix(LogsResponse.filter_log_events)):
        rhythm = TrainingLogs(logs).rhythm("job-1", start, NOW)
    # Then both hosts' lines count, merged in time (gaps of a minute, and 10 from minute 19 to 29); another
    # job's line never fills a gap
    assert rhythm.complete and rhythm.lines == 30
    assert rhythm.longest_gap_seconds == 10 * 60 and rhythm.last_line_at == start + timedelta(minutes=38)
    assert recorder.actions <= TrainingLogs.IAM_ACTIONS


def test_a_rhythm_read_past_its_page_budget_is_incomplete_and_a_failed_one_raises() -> None:
    client = boto3.client("logs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    line = {"logStreamName": "job-1/algo-1-1", "timestamp": _millis(NOW - timedelta(minutes=1)), "message": "x"}
    for _ in range(RHYTHM_PAGES):
        stubber.add_response("filter_log_events", {"events": [line], "nextToken": "more"})
    stubber.add_client_error("filter_log_events", "ThrottlingException")
    with stubber:
        cut = TrainingLogs(client).rhythm("job-1", NOW - timedelta(minutes=30), NOW)
        assert not cut.complete and cut.lines == RHYTHM_PAGES
        with pytest.raises(LogsUnavailable, match="ThrottlingException"):
            TrainingLogs(client).rhythm("job-1", NOW - timedelta(minutes=30), NOW)


class ChattyLog:
    """FilterLogEvents over a job that logs 100 lines a minute (a line every 600 ms), none in ``quiet``
    (``[from, to)`` in ms): up to 10,000 events a page, a token while more; ``calls`` counts the requests."""

    def __init__(self, quiet: list[tuple[int, int]]) -> None:
        self.quiet = quiet
        self.calls: list[dict[str, Any]] = []

    def filter_log_events(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        at = int(request.get("nextToken") or request["startTime"])
        at = -(-at // 600) * 600  # onto the job's 600 ms grid
        events: list[dict[str, Any]] = []
        while at <= request["endTime"] and len(events) < 10_000:
            if not any(begin <= at < end for begin, end in self.quiet):
                events.append({"logStreamName": "job-1/algo-1-1", "timestamp": at, "message": "step"})
            at += 600
        return {"events": events, **({"nextToken": str(at)} if at <= request["endTime"] else {})}


class Job:
    name = "job-1"


def test_a_chatty_jobs_rhythm_reads_its_older_log_only_once_its_silence_reaches_the_recent_limit() -> None:
    # Given a job 3 days in Training that logs 100 lines a minute and went 40 minutes without a line in its
    # fifth hour
    started = NOW - timedelta(days=3)
    phase = (_millis(started + timedelta(hours=5)) + 1, _millis(started + timedelta(hours=5, minutes=40)))
    judge = StallJudge(CloudWatchMetricData(mock.Mock()), TrainingLogs(healthy := ChattyLog([phase])))
    # When its rhythm is read (a pinned trigger judged) while it logs
    rhythm = judge.rhythm(Job(), NOW, started, JudgePolicy())
    # Then its last 240 minutes are read, in the 3 pages they were before the whole stint was read, and give
    # 20 minutes: the older gaps could only lengthen a limit not reached
    assert isinstance(rhythm, LogRhythm) and rhythm.silence_minutes(JudgePolicy()) == 20
    assert len(healthy.calls) == 3
    assert {c["startTime"] for c in healthy.calls} == {_millis(NOW - timedelta(minutes=240))}
    # and once the job has been silent for 25 minutes, past those 20, the stint's older part is read from its
    # entry into Training (cut short at the page cap) and its 40-minute phase sets the limit: 120
    hung = ChattyLog([phase, (_millis(NOW - timedelta(minutes=25)), _millis(NOW) + 1)])
    rhythm = StallJudge(CloudWatchMetricData(mock.Mock()), TrainingLogs(hung)).rhythm(
        Job(), NOW, started, JudgePolicy()
    )
    assert isinstance(rhythm, LogRhythm) and rhythm.silence_minutes(JudgePolicy()) == 120
    assert len(hung.calls) == 3 + RHYTHM_PAGES and hung.calls[3]["startTime"] == _millis(started)


def test_metric_series_are_read_oldest_first_and_failures_are_reported(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    dims = [{"Name": "Host", "Value": "job-1/algo-1"}]
    for minute, value in ((3, 10.0), (2, 20.0), (1, 30.0)):
        cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/TrainingJobs",
            MetricData=[
                {
                    "MetricName": "CPUUtilization",
                    "Dimensions": dims,
                    "Value": value,
                    "Timestamp": NOW - timedelta(minutes=minute),
                }
            ],
        )
    recorder = CallRecorder().attach(cloudwatch)
    queries = [
        MetricRead("cpu", "CPUUtilization", (("Host", "job-1/algo-1"),), "Average"),
        MetricRead("loss", "loss", (("TrainingJobName", "job-1"),), "SampleCount"),
    ]
    result = CloudWatchMetricData(cloudwatch).read(
        queries, NOW - timedelta(minutes=10), NOW + timedelta(minutes=1)
    )
    assert result.values["cpu"] == (10.0, 20.0, 30.0)
    assert result.times["cpu"] == tuple(
        NOW - timedelta(minutes=m) for m in (3, 2, 1)
    )  # when, for the quiet stretch
    assert result.values["loss"] == () and result.times["loss"] == ()
    assert result.errors == ()
    # CloudWatch signs as `monitoring`; its IAM prefix is `cloudwatch`
    assert {a.replace("monitoring:", "cloudwatch:") for a in recorder.actions} == CloudWatchMetricData.IAM_ACTIONS

    stubbed = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(stubbed)
    stubber.add_client_error("get_metric_data", service_error_code="Throttling", http_status_code=400)
    with stubber:
        failed = CloudWatchMetricData(stubbed).read(queries, NOW - timedelta(minutes=10), NOW)
    assert failed.values == {"cpu": None, "loss": None}
    assert "Throttling" in failed.errors[0]


def test_a_query_cloudwatch_left_out_of_its_answer_is_unread_not_an_empty_series() -> None:
    # Given an answer that holds the CPU query's result but none for the training metric's, when it is read,
    # then the metric is reported unread (no datapoint would read as "no progress": a hang confirmed on data
    # that never came), and the CPU series still counts
    client = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                {
                    "Id": "cpu",
                    "Timestamps": [NOW - timedelta(minutes=1)],
                    "Values": [4.0],
                    "StatusCode": "Complete",
                }
            ],
            "Messages": [{"Code": "InternalError", "Value": "one query could not be answered"}],
        },
    )
    queries = [
        MetricRead("cpu", "CPUUtilization", (("Host", "job-1/algo-1"),), "Average"),
        MetricRead("loss", "loss", (("TrainingJobName", "job-1"),), "SampleCount"),
    ]
    with stubber:
        result = CloudWatchMetricData(client).read(queries, NOW - timedelta(minutes=10), NOW)
    assert result.values["cpu"] == (4.0,) and result.values.get("loss") is None
    assert result.errors == ("loss {'TrainingJobName': 'job-1'}: no result returned",)
