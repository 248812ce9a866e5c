"""The CloudFormation and Logs Insights adapters: requests, polling, errors, declared IAM actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.errors import AdapterError
from smgov.adapters.cloudformation import StackNotFound, StackOutputs
from smgov.adapters.logs_insights import LogsInsights, QueryFailed, QueryTimedOut, QueryTruncated, model_max_rows
from tests.adapters.conftest import CallRecorder
from tests.cli.local_aws import clients

END = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class Ticks:
    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, 0

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_adapters_call_exactly_what_they_declare() -> None:
    cfn_client, logs_client, cfn, logs = clients()
    cfn_calls, logs_calls = CallRecorder().attach(cfn_client), CallRecorder().attach(logs_client)
    cfn.deploy("s", {"JobEventsLogGroupName": "/g"})
    logs.create_log_group("/g")
    logs.running_polls = 5
    ticks = Ticks()
    StackOutputs(cfn_client).audit_log_groups("s")
    insights = LogsInsights(logs_client, sleep=ticks.sleep, monotonic=lambda: ticks.now, timeout_seconds=2)
    with pytest.raises(QueryTimedOut):
        insights.run(["/g"], "fields @timestamp", start=END - timedelta(hours=1), end=END)
    assert cfn_calls.actions == StackOutputs.IAM_ACTIONS
    assert logs_calls.actions == LogsInsights.IAM_ACTIONS


def test_only_log_group_outputs_are_used_in_a_stable_order() -> None:
    cfn_client, _, cfn, _ = clients()
    cfn.deploy("s", {"ZLogGroupName": "/z", "ALogGroupName": "/a", "DeadLetterQueueUrl": "https://q"})
    assert StackOutputs(cfn_client).audit_log_groups("s") == ["/a", "/z"]
    with pytest.raises(StackNotFound):
        StackOutputs(cfn_client).outputs("missing")


def test_a_missing_log_group_is_an_adapter_error() -> None:
    _, logs_client, _, _ = clients()
    with pytest.raises(AdapterError, match="StartQuery failed"):
        LogsInsights(logs_client).run(["/nope"], "fields @timestamp", start=END - timedelta(hours=1), end=END)


@pytest.mark.parametrize("status", ["Failed", "Cancelled", "Timeout", "Unknown"])
def test_a_query_that_ends_badly_raises(status: str) -> None:
    _, logs_client, _, logs = clients()
    logs.create_log_group("/g")
    logs.final_status = status
    ticks = Ticks()
    insights = LogsInsights(logs_client, sleep=ticks.sleep, monotonic=lambda: ticks.now)
    with pytest.raises(QueryFailed, match=status):
        insights.run(["/g"], "fields @timestamp", start=END - timedelta(hours=1), end=END)
    assert ticks.sleeps == 1


def test_request_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    _, logs_client, _, logs = clients()
    logs.create_log_group("/g")
    logs.running_polls = 0
    rows: Any = LogsInsights(logs_client, sleep=lambda s: None).run(
        ["/g"], "fields @timestamp", start=END - timedelta(days=7), end=END, limit=10
    )
    assert rows == []
    ((_, params),) = [c for c in logs.calls if c[0] == "StartQuery"]
    assert params == {
        "logGroupNames": ["/g"],
        "startTime": int((END - timedelta(days=7)).timestamp()),
        "endTime": int(END.timestamp()),
        "queryString": "fields @timestamp",
        "limit": 10,
    }


def test_a_query_asks_for_the_most_rows_the_service_model_allows_and_reads_every_page() -> None:
    import botocore.session

    # botocore's logs model: StartQuery.limit up to 100,000, GetQueryResults pages by nextToken
    model: Any = botocore.session.get_session().get_service_model("logs")
    assert model.operation_model("StartQuery").input_shape.members["limit"].metadata["max"] == 100_000
    assert "nextToken" in model.operation_model("GetQueryResults").input_shape.members
    assert model_max_rows(object()) == 10_000  # no model to read: the maximum of older models
    # Given 25 events and pages of 10 (maxItems, as AWS pages by 10,000)
    _, logs_client, _, logs = clients()
    logs.create_log_group("/g")
    logs.running_polls, logs.PAGE = 0, 10
    for n in range(25):
        logs.put("/g", END - timedelta(minutes=n), {"n": n})
    # When the query runs without a limit of its own, then every row comes back, from three pages
    rows = LogsInsights(logs_client, sleep=lambda s: None).run(
        ["/g"], "fields n", start=END - timedelta(hours=1), end=END
    )
    assert len(rows) == 25
    assert [p.get("nextToken") for name, p in logs.calls if name == "GetQueryResults"] == [None, "10", "20"]
    # And a query that comes back with as many rows as it may is an error, not a silent cut
    with pytest.raises(QueryTruncated, match="25 rows"):
        LogsInsights(logs_client, sleep=lambda s: None, max_rows=25).run(
            ["/g"], "fields n", start=END - timedelta(hours=1), end=END
        )


def test_the_cli_connects_through_the_adapters() -> None:
    from smgov.cli.visibility import aws_dependencies

    deps = aws_dependencies("eu-west-1")
    assert isinstance(deps.stacks, StackOutputs) and isinstance(deps.insights, LogsInsights)
    assert deps.stacks._client.meta.region_name == "eu-west-1"
    assert deps.insights._client.meta.region_name == "eu-west-1"
    assert deps.now().tzinfo is UTC


def test_missing_credentials_are_an_adapter_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    session = boto3.session.Session(region_name="us-east-1")
    with pytest.raises(AdapterError, match="credentials"):
        StackOutputs(session.client("cloudformation")).outputs("s")
    with pytest.raises(AdapterError, match="credentials"):
        LogsInsights(session.client("logs")).run(["/g"], "fields @timestamp", start=END, end=END)


def test_stack_set_instances_are_read_page_by_page_with_their_status() -> None:
    # Given a StackSet of two instances, on two pages, one whose last operation failed
    import boto3
    from botocore.stub import Stubber

    from smgov.adapters.cloudformation import StackInstance, StackSetInstances

    client = boto3.client("cloudformation", region_name="us-east-1")
    recorder = CallRecorder().attach(client)
    with Stubber(client) as stub:
        stub.add_response(
            "list_stack_instances",
            {
                "Summaries": [
                    {
                        "Account": "111111111111",
                        "Region": "us-east-1",
                        "Status": "CURRENT",
                        "StackInstanceStatus": {"DetailedStatus": "SUCCEEDED"},
                    }
                ],
                "NextToken": "t",
            },
            {"StackSetName": "sagemaker-governance", "CallAs": "DELEGATED_ADMIN"},
        )
        stub.add_response(
            "list_stack_instances",
            {
                "Summaries": [
                    {
                        "Account": "222222222222",
                        "Region": "eu-west-1",
                        "Status": "OUTDATED",
                        "StatusReason": "Access denied",
                        "StackInstanceStatus": {"DetailedStatus": "FAILED"},
                    }
                ]
            },
            {"StackSetName": "sagemaker-governance", "CallAs": "DELEGATED_ADMIN", "NextToken": "t"},
        )
        instances = StackSetInstances(client).list("sagemaker-governance")
    assert instances == [
        StackInstance(
            account="111111111111",
            region="us-east-1",
            status="CURRENT",
            detailed_status="SUCCEEDED",
            stack_set="sagemaker-governance",  # each instance names its StackSet (one per mode)
        ),
        StackInstance(
            account="222222222222",
            region="eu-west-1",
            status="OUTDATED",
            detailed_status="FAILED",
            reason="Access denied",
            stack_set="sagemaker-governance",
        ),
    ]
    assert recorder.actions == StackSetInstances.IAM_ACTIONS
    with Stubber(client) as stub:
        stub.add_client_error("list_stack_instances", "StackSetNotFoundException", "no such StackSet")
        with pytest.raises(AdapterError, match="no such StackSet"):
            StackSetInstances(client).list("sagemaker-governance", "SELF")
