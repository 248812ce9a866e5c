"""The doubles copy the plain data they keep and answer without copy.deepcopy (simulation/copies.py), with
the same result."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from unittest import mock

import boto3

from smgov.simulation.copies import plain_copy
from smgov.simulation.fake_cloudwatch import FakeCloudWatch

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_a_plain_copy_equals_a_deep_copy_and_shares_nothing_mutable() -> None:
    # Given nested plain data, and a value of another kind inside it
    other = {"a set": {1, 2}}
    data: dict[str, Any] = {
        "name": "job",
        "count": 3,
        "rate": 0.5,
        "on": True,
        "none": None,
        "at": NOW,
        "raw": b"x",
        "price": Decimal("1.5"),
        "items": [{"Key": "team", "Value": "ml"}, ("tuple", [1])],
        "other": other["a set"],
    }
    # When it is copied
    copied = plain_copy(data)
    # Then the copy is equal to copy.deepcopy's, and no list, dict or set is shared with the original
    assert copied == copy.deepcopy(data)
    assert copied["items"] is not data["items"] and copied["items"][0] is not data["items"][0]
    assert copied["items"][1][1] is not data["items"][1][1]
    assert copied["other"] is not data["other"]
    assert copied["at"] is data["at"]  # immutable: shared, as copy.deepcopy shares it


def test_the_cloudwatch_double_answers_describe_alarms_without_copy_deepcopy() -> None:
    # Given the CloudWatch double behind a client, with an alarm
    fake = FakeCloudWatch(clock=lambda: NOW)
    client: Any = fake.attach(boto3.client("cloudwatch", region_name="us-east-1"))
    alarm = {
        "AlarmName": "a",
        "MetricName": "GPUUtilization",
        "Namespace": "/aws/sagemaker/TrainingJobs",
        "Statistic": "Average",
        "Dimensions": [{"Name": "Host", "Value": "job/algo-1"}],
        "Period": 300,
        "EvaluationPeriods": 2,
        "Threshold": 5.0,
        "ComparisonOperator": "LessThanThreshold",
    }
    deep = mock.Mock(wraps=copy.deepcopy)
    with mock.patch.object(copy, "deepcopy", deep):
        # When the alarm is written and read back
        client.put_metric_alarm(**alarm)
        (answered,) = client.describe_alarms()["MetricAlarms"]
    # Then it is answered as written, copy.deepcopy was not called, and the answer is the caller's own
    assert {k: answered[k] for k in alarm} == alarm
    assert deep.call_count == 0
    answered["Dimensions"].append({"Name": "Other", "Value": "x"})
    assert fake.alarms["a"]["Dimensions"] == alarm["Dimensions"]
