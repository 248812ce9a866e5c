"""CloudWatch's request-rate quota in the simulator: botocore's real retries absorb a burst."""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from sagemaker_governance.composition.root import SERVICE_CONFIGS
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.burst import burst_scenario
from smgov.simulation.engine import Simulation
from smgov.simulation.fake_cloudwatch import RequestQuota

ALARM = {
    "AlarmName": "a",
    "MetricName": "GPUUtilization",
    "Namespace": "/aws/sagemaker/TrainingJobs",
    "Statistic": "Maximum",
    "Period": 60,
    "EvaluationPeriods": 1,
    "Threshold": 1.0,
    "ComparisonOperator": "LessThanThreshold",
}


class Clock:
    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds

    def sleep(self, seconds: float) -> None:
        self.seconds += seconds


def cloudwatch(attempts: int) -> Any:
    return boto3.client(
        "cloudwatch",
        region_name="us-east-1",
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
    )


@mock_aws
def test_a_request_over_the_quota_is_a_throttling_error_botocore_recognises() -> None:
    # Given a quota of 3 PutMetricAlarm per second and a client that does not retry
    clock = Clock()
    quota = RequestQuota.cloudwatch_alarm_writes(clock, tps=3.0)
    client = quota.attach(cloudwatch(attempts=1))
    # When four requests arrive in the same instant
    for index in range(3):
        client.put_metric_alarm(**{**ALARM, "AlarmName": f"a{index}"})
    with pytest.raises(ClientError) as raised:
        client.put_metric_alarm(**{**ALARM, "AlarmName": "a3"})
    # Then the fourth is throttled the way AWS answers it, and a second later the bucket has refilled
    error = raised.value.response
    assert error["Error"]["Code"] == "ThrottlingException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    clock.seconds += 1.0
    client.put_metric_alarm(**{**ALARM, "AlarmName": "a3"})
    assert quota.summary()["PutMetricAlarm"] == {"allowed": 4, "throttled": 1}
    # and an API without a quota is never throttled
    for _ in range(10):
        client.describe_alarms()


@mock_aws
def test_standard_retries_wait_on_the_virtual_clock_until_the_quota_admits_the_request() -> None:
    # Given the CloudWatch client configuration the functions use
    clock = Clock()
    quota = RequestQuota.cloudwatch_alarm_writes(clock, tps=3.0)
    client = quota.attach(
        boto3.client("cloudwatch", region_name="us-east-1", config=SERVICE_CONFIGS["cloudwatch"])
    )
    # When 30 alarms are written back to back, botocore sleeping on the virtual clock
    with virtual_backoff(clock.sleep, seed=1):
        for index in range(30):
            client.put_metric_alarm(**{**ALARM, "AlarmName": f"a{index}"})
    # Then every one succeeded after throttles and backoff, at no more than the quota's rate
    counts = quota.summary()["PutMetricAlarm"]
    assert counts["allowed"] == 30 and counts["throttled"] > 0
    assert clock.seconds >= (30 - 3) / 3.0
    assert len(client.describe_alarms()["MetricAlarms"]) == 30


def test_the_backoff_hook_is_removed_afterwards() -> None:
    import time

    import botocore.endpoint

    endpoint: Any = botocore.endpoint
    with virtual_backoff(lambda _seconds: None):
        assert endpoint.time is not time
    assert endpoint.time is time


@mock_aws
def test_a_throttled_request_is_not_carried_out() -> None:
    # Given an alarm, and a DeleteAlarms quota spent by a client that does not retry
    clock = Clock()
    quota = RequestQuota(clock, {"DeleteAlarms": 1.0})
    client = quota.attach(cloudwatch(attempts=1))
    client.put_metric_alarm(**ALARM)
    client.delete_alarms(AlarmNames=["missing"])  # spends the one request of this second
    # When the alarm's delete is throttled
    with pytest.raises(ClientError):
        client.delete_alarms(AlarmNames=["a"])
    # Then CloudWatch refused it: the alarm is still there (moto never saw the request)
    assert [a["AlarmName"] for a in client.describe_alarms()["MetricAlarms"]] == ["a"]


@pytest.mark.heavy(15)
def test_a_burst_of_300_jobs_in_one_minute_ends_with_every_alarm_created_and_deleted() -> None:
    # Given 300 GPU jobs created in the same minute and CloudWatch's default quota (3 requests/second)
    result = Simulation(burst_scenario(300), cloudwatch_tps=3.0).run()
    # Then CloudWatch throttled the alarm writes and deletes, botocore's retries absorbed it (no failed
    # invocation, no dead letter) and every job got its alarm, deleted again when it completed
    throttling = result.throttling
    requests = throttling["requests"]
    assert requests["PutMetricAlarm"]["throttled"] > 0 and requests["DeleteAlarms"]["throttled"] > 0
    assert requests["PutMetricAlarm"]["allowed"] == 300
    assert throttling["retry_sleeps"] > 0
    assert result.errors == []
    assert result.notifications["dead-letter-queue"] == 0
    assert result.deliveries["dead_lettered"] == 0
    created = Counter(r.job_name for r in result.audit if (r.action, r.outcome.value) == ("create-alarm", "done"))
    deleted = Counter(r.job_name for r in result.audit if (r.action, r.outcome.value) == ("delete-alarm", "done"))
    assert created == deleted == Counter(list(result.jobs))
    assert result.ground_truth["orphan_alarms"] == []
    assert len(result.alarms) == 300
    assert all(job.final_status == "Completed" for job in result.jobs.values())
    # The service fell behind by the time 300 writes take at 3 per second, not more than twice that
    assert 100 <= throttling["max_lag_seconds"] <= 200


def test_deletes_throttled_past_the_retries_are_deferred_and_the_reconciler_deletes_them_in_batches() -> None:
    # Given 60 jobs ending together while CloudWatch admits one DeleteAlarms every 10 seconds
    quota = {"PutMetricAlarm": 3.0, "DeleteAlarms": 0.1}
    result = Simulation(burst_scenario(60), cloudwatch_tps=quota).run()
    # Then no delivery failed: the deletes botocore could not get through are recorded as deferred
    assert result.errors == [] and result.deliveries["dead_lettered"] == 0
    outcomes = Counter((r.code, r.outcome.value) for r in result.audit if r.action == "delete-alarm")
    deferred = outcomes[("idle.alarm.delete-deferred", "deferred")]
    assert deferred > 0
    # and the reconciler's next run deleted every one of them, with one request per 100 names
    assert outcomes[("reconciler.delete.orphan-alarm", "done")] == deferred
    assert outcomes[("idle.alarm.delete", "done")] + deferred == 60
    assert result.ground_truth["orphan_alarms"] == []
    allowed = result.throttling["requests"]["DeleteAlarms"]["allowed"]
    assert allowed == outcomes[("idle.alarm.delete", "done")] + 1
