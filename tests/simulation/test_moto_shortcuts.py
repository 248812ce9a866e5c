"""moto's per-request work that gives the same result every time is done once or skipped in the simulated
accounts (simulation/moto_shortcuts.py), and the answers are moto's own."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import errors, utils
from moto.core.botocore_stubber import MockRawResponse

from smgov.simulation.faults import ANSWERED_URL
from smgov.simulation.moto_shortcuts import moto_shortcuts


@pytest.fixture
def shortcuts() -> Iterator[None]:
    with mock_aws(), moto_shortcuts():
        yield


def _missing_parameter(ssm: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        ssm.get_parameter(Name="/nowhere")
    return {k: v for k, v in raised.value.response.items() if k != "ResponseMetadata"}


def test_a_request_a_double_answered_is_not_matched_against_motos_url_patterns(shortcuts: None) -> None:
    # Given a client whose GetQueueUrl a double answers in the send loop (moto's stubber runs after it)
    sqs: Any = boto3.client("sqs", region_name="us-east-1")

    def answer(request: Any, **_: Any) -> AWSResponse:
        url, request.url = request.url, ANSWERED_URL
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        return AWSResponse(url, 200, headers, MockRawResponse(b'{"QueueUrl": "answered"}'))

    sqs.meta.events.register_first("before-send.sqs.GetQueueUrl", answer)
    scans = mock.Mock(wraps=utils.get_equivalent_url_in_aws_domain)  # the stubber's first step
    with mock.patch("moto.core.botocore_stubber.get_equivalent_url_in_aws_domain", scans):
        # When the request is made
        answered = sqs.get_queue_url(QueueName="q")
        # Then the double's answer is the caller's, and moto did not look for a service to serve it
        assert answered["QueueUrl"] == "answered"
        assert scans.call_count == 0
        # while a request nobody answered still goes to moto
        sqs.create_queue(QueueName="q")
        assert scans.call_count == 1


def test_motos_error_table_is_built_once_per_service_and_its_errors_are_unchanged() -> None:
    # Given moto without the shortcuts: a missing parameter's error
    with mock_aws():
        plain = _missing_parameter(boto3.client("ssm", region_name="us-east-1"))
    # When the same parameter is read three times with them
    builds = mock.Mock(wraps=errors.ErrorLookupFactory._create_error_lut)
    with mock.patch.object(errors.ErrorLookupFactory, "_create_error_lut", builds), mock_aws(), moto_shortcuts():
        ssm = boto3.client("ssm", region_name="us-east-1")
        answers = [_missing_parameter(ssm) for _ in range(3)]
    # Then every answer is moto's own, and the service's error table was built once
    assert plain["Error"]["Code"] == "ParameterNotFound"
    assert answers == [plain] * 3
    assert builds.call_count == 1


def test_a_response_class_is_listed_once_for_its_requests(shortcuts: None) -> None:
    # Given moto serving SQS (its queue made first, so that the class has been listed)
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    listed = mock.Mock(wraps=inspect.getmembers)
    with mock.patch.object(inspect, "getmembers", listed):
        # When more requests reach the same response class
        sqs.send_message(QueueUrl=url, MessageBody="one")
        received = sqs.receive_message(QueueUrl=url)
    # Then they are served as before, without listing the class's methods again
    assert [m["Body"] for m in received["Messages"]] == ["one"]
    assert listed.call_count == 0
