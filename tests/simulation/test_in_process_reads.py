"""The service's Logs and SSM reads answered in process (simulation/engine/moto_logs.py ``LogReads``,
simulation/engine/moto_ssm.py ``ParameterReads``) get what moto's wire answers: the same parsed answers,
the same errors, and botocore's retries after a throttled first attempt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.logs.responses import LogsResponse

from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.engine.moto_logs import LogReads, honoring_prefix
from smgov.simulation.engine.moto_ssm import ParameterReads
from smgov.simulation.faults import FaultInjector, FaultSpec, Throttler
from smgov.simulation.harness import ACCOUNT, REGION

GROUP = "/aws/sagemaker/TrainingJobs"
NOW = datetime.now(UTC).replace(second=0, microsecond=0)  # moto's Logs keeps recent events only
RETRIES = Config(retries={"mode": "standard", "max_attempts": 3})


def _without_request_ids(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without its ``ResponseMetadata`` (request ids, dates and headers differ per request)."""
    return {key: value for key, value in answer.items() if key != "ResponseMetadata"}


def _outcome(call: Any) -> Any:
    try:
        return _without_request_ids(call())
    except ClientError as err:
        return ("error", err.response["Error"]["Code"], err.response["Error"]["Message"])


@pytest.fixture
def logs_pair() -> Any:
    """A client moto's wire answers and one ``LogReads`` answers, over the same backend with two jobs' lines."""
    with (
        mock_aws(),
        mock.patch.object(LogsResponse, "filter_log_events", honoring_prefix(LogsResponse.filter_log_events)),
    ):
        wire = boto3.client("logs", region_name=REGION)
        wire.create_log_group(logGroupName=GROUP)
        for n, stream in enumerate(("job-a/algo-1-1", "job-a/algo-2-1", "job-b/algo-1-1")):
            wire.create_log_stream(logGroupName=GROUP, logStreamName=stream)
            wire.put_log_events(
                logGroupName=GROUP,
                logStreamName=stream,
                logEvents=[
                    {"timestamp": int((NOW - timedelta(minutes=m + n)).timestamp() * 1000), "message": f"step {m}"}
                    for m in range(12, 0, -3)
                ],
            )
        in_process = LogReads(ACCOUNT, REGION).attach(boto3.client("logs", region_name=REGION))
        yield wire, in_process


def test_log_reads_in_process_answer_as_motos_wire(logs_pair: Any) -> None:
    wire, in_process = logs_pair
    start = int((NOW - timedelta(minutes=8)).timestamp() * 1000)
    requests: list[tuple[str, dict[str, Any]]] = [
        ("describe_log_streams", {"logGroupName": GROUP, "logStreamNamePrefix": "job-a/"}),
        ("describe_log_streams", {"logGroupName": GROUP, "logStreamNamePrefix": "nobody/"}),
        ("describe_log_streams", {"logGroupName": "/missing"}),
        ("filter_log_events", {"logGroupName": GROUP, "logStreamNamePrefix": "job-a/", "startTime": start}),
        ("filter_log_events", {"logGroupName": GROUP, "logStreamNamePrefix": "job-b/", "limit": 2}),
        ("filter_log_events", {"logGroupName": GROUP, "logStreamNamePrefix": "nobody/"}),
        ("filter_log_events", {"logGroupName": "/missing", "logStreamNamePrefix": "job-a/"}),
        ("get_log_events", {"logGroupName": GROUP, "logStreamName": "job-a/algo-2-1", "startFromHead": True}),
        ("get_log_events", {"logGroupName": GROUP, "logStreamName": "job-a/algo-1-1", "limit": 2}),
    ]
    for operation, params in requests:
        # When the same request is sent over moto's wire and answered in process
        expected = _outcome(partial(getattr(wire, operation), **params))
        got = _outcome(partial(getattr(in_process, operation), **params))
        # Then the answers are the same, errors included (and the requests exercise both)
        assert got == expected, (operation, params)
    assert _outcome(lambda: wire.describe_log_streams(logGroupName="/missing"))[0] == "error"
    assert (
        len(_outcome(lambda: wire.filter_log_events(logGroupName=GROUP, logStreamNamePrefix="job-a/"))["events"])
        == 8
    )


def test_parameter_reads_in_process_answer_as_motos_wire() -> None:
    with mock_aws():
        wire = boto3.client("ssm", region_name=REGION)
        in_process = ParameterReads(ACCOUNT, REGION).attach(boto3.client("ssm", region_name=REGION))
        # Given no parameter, then one written twice
        missing = [
            _outcome(lambda c=c: c.get_parameter(Name="/policy", WithDecryption=False)) for c in (wire, in_process)
        ]
        wire.put_parameter(Name="/policy", Value="{}", Type="String")
        wire.put_parameter(Name="/policy", Value='{"mode": "audit"}', Type="String", Overwrite=True)
        found = [
            _outcome(lambda c=c: c.get_parameter(Name="/policy", WithDecryption=False)) for c in (wire, in_process)
        ]
    # Then both answer alike: ParameterNotFound, then the second version
    assert missing[0] == missing[1] and missing[0][:2] == ("error", "ParameterNotFound")
    for answer in found:
        answer["Parameter"].pop("LastModifiedDate")  # moto's clock at each read
    assert found[0] == found[1] and found[0]["Parameter"]["Version"] == 2
    assert found[0]["Parameter"]["Value"] == '{"mode": "audit"}'


def _scripted(throttler: Throttler, draws: list[bool], monkeypatch: Any) -> list[bool]:
    drawn: list[bool] = []
    script = iter(draws)

    def draw(name: str) -> bool:
        drawn.append(value := next(script))
        return value

    monkeypatch.setattr(throttler.injector, "draw", draw)
    return drawn


def test_a_throttled_first_read_goes_through_the_send_loop_and_is_retried(monkeypatch: Any) -> None:
    waited: list[float] = []
    with mock_aws(), virtual_backoff(waited.append):
        throttler = Throttler(FaultInjector(FaultSpec.parse("throttle=0.5"), seed=0))
        session = boto3.session.Session(region_name=REGION)
        throttler.install(session.events)
        ssm = ParameterReads(ACCOUNT, REGION, throttler).attach(session.client("ssm", config=RETRIES))
        boto3.client("ssm", region_name=REGION).put_parameter(Name="/policy", Value="{}", Type="String")
        # Given a first attempt drawn throttled before the send loop, and a retry drawn in it that is not
        drawn = _scripted(throttler, [True, False], monkeypatch)
        # When the policy is read
        answer = ssm.get_parameter(Name="/policy", WithDecryption=False)
    # Then botocore backed off once and moto's wire answered the retry; one throttle was injected
    assert drawn == [True, False] and len(waited) == 1 and throttler.injector.injected["throttle"] == 1
    assert answer["Parameter"]["Value"] == "{}" and answer["ResponseMetadata"]["RetryAttempts"] == 1
