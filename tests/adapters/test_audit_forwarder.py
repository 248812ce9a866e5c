"""Forwarding audit records to the central audit bus (issue 21 item 2): the member's first hop, its
failures in the member's dead-letter queue, and the whole way to the audit account's log group."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.stub import Stubber

from sagemaker_governance.adapters.audit_forwarder import (
    DETAIL_TYPE,
    FORWARD_ERROR_ATTRIBUTE,
    SOURCE,
    AuditForwarder,
)
from sagemaker_governance.audit import AUDIT_MESSAGE, MemoryAuditSink
from sagemaker_governance.composition.root import Root
from sagemaker_governance.settings import Settings
from tests.adapters.conftest import CallRecorder
from tests.audit_records import MEMBER_INFO, record

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MEMBER, AUDIT_ACCOUNT, REGION = "111111111111", "999999999999", "us-east-1"


def _queue(sqs: Any, name: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", [])
    return messages


def test_a_record_goes_to_the_stacks_bus_as_the_member_log_line(aws: None) -> None:
    # Given this stack's audit bus with a rule that copies its events to a queue
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    events.create_event_bus(Name="sagemaker-governance-audit")
    capture_url, capture_arn = _queue(sqs, "capture")
    dlq_url, _ = _queue(sqs, "dlq")
    events.put_rule(
        Name="r",
        EventBusName="sagemaker-governance-audit",
        EventPattern=json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]}),
    )
    events.put_targets(
        Rule="r", EventBusName="sagemaker-governance-audit", Targets=[{"Id": "q", "Arn": capture_arn}]
    )
    recorder = CallRecorder().attach(events)
    forwarder = AuditForwarder(
        events, sqs, bus_name="sagemaker-governance-audit", dead_letter_queue_url=dlq_url, member=MEMBER_INFO
    )
    # When a record is forwarded
    forwarder.forward(record())
    # Then the event's detail is the member's log line plus who sent it, and nothing was dead-lettered
    (message,) = _received(sqs, capture_url)
    event = json.loads(message["Body"])
    assert event["source"] == SOURCE and event["detail-type"] == DETAIL_TYPE
    assert event["detail"]["message"] == AUDIT_MESSAGE
    assert event["detail"]["audit"] == record().as_log()
    assert event["detail"]["member"] == MEMBER_INFO
    assert _received(sqs, dlq_url) == []
    assert recorder.actions <= AuditForwarder.IAM_ACTIONS


def test_a_refused_put_lands_in_the_dead_letter_queue_with_its_error(aws: None) -> None:
    # Given the stack's bus is gone (PutEvents fails)
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    dlq_url, _ = _queue(sqs, "dlq")
    lost: list[str] = []
    forwarder = AuditForwarder(
        events,
        sqs,
        bus_name="missing-bus",
        dead_letter_queue_url=dlq_url,
        member=MEMBER_INFO,
        on_lost=lambda rec, error: lost.append(rec.job_name),
    )
    # When a record is forwarded
    forwarder.forward(record())
    # Then the entry it could not put is in the dead-letter queue, with the error, and nothing is lost
    (message,) = _received(sqs, dlq_url)
    body = json.loads(message["Body"])
    assert (
        body["EventBusName"] == "missing-bus" and json.loads(body["Detail"])["audit"]["job_name"] == "llm-pretrain"
    )
    assert "PutEvents failed" in message["MessageAttributes"][FORWARD_ERROR_ATTRIBUTE]["StringValue"]
    assert lost == []


def test_a_failed_entry_in_a_200_response_is_a_failure_too(aws: None) -> None:
    # Given PutEvents answers 200 with the entry failed (PutEvents reports failures per entry)
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    dlq_url, _ = _queue(sqs, "dlq")
    forwarder = AuditForwarder(events, sqs, bus_name="b", dead_letter_queue_url=dlq_url, member=MEMBER_INFO)
    with Stubber(events) as stub:
        stub.add_response(
            "put_events",
            {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}]},
            {"Entries": [forwarder.entry(record())]},
        )
        forwarder.forward(record())
    (message,) = _received(sqs, dlq_url)
    assert message["MessageAttributes"][FORWARD_ERROR_ATTRIBUTE]["StringValue"].startswith(
        "PutEvents entry failed: InternalFailure"
    )


def test_when_the_dead_letter_queue_fails_too_the_record_is_reported_lost(aws: None) -> None:
    events, sqs = boto3.client("events", region_name=REGION), boto3.client("sqs", region_name=REGION)
    lost: list[tuple[str, str]] = []
    forwarder = AuditForwarder(
        events,
        sqs,
        bus_name="missing-bus",
        dead_letter_queue_url=f"https://sqs.{REGION}.amazonaws.com/{MEMBER}/missing-queue",
        member=MEMBER_INFO,
        on_lost=lambda rec, error: lost.append((rec.job_name, error)),
    )
    forwarder.forward(record())
    ((job, error),) = lost
    assert job == "llm-pretrain" and "PutEvents failed" in error


def test_the_root_forwards_only_when_the_stack_has_an_audit_bus(aws: None) -> None:
    # Given two roots, one whose stack forwards (AUDIT_BUS_NAME set) and one that does not
    events = boto3.client("events", region_name=REGION)
    events.create_event_bus(Name="fwd")
    inner_on, inner_off = MemoryAuditSink(), MemoryAuditSink()
    on = Root(
        Settings(AUDIT_BUS_NAME="fwd", ACCOUNT_ID=MEMBER),
        boto3.session.Session(region_name=REGION),
        audit=inner_on,
    )
    off = Root(Settings(AUDIT_BUS_NAME=""), boto3.session.Session(region_name=REGION), audit=inner_off)
    assert on.audit is not None and "events" not in on._clients  # nothing built at cold start
    calls = CallRecorder().attach(on.client("events"))
    # When each writes a record
    on.audit.write(record())
    off.audit.write(record())
    # Then both keep it locally; only the forwarding one called PutEvents (and built no client otherwise)
    assert len(inner_on.records) == len(inner_off.records) == 1
    assert calls.actions == {"events:PutEvents"}
    assert off.audit_forwarder is None and "events" not in off._clients


def test_a_member_record_reaches_the_audit_accounts_log_group(aws: None) -> None:
    # Given the wiring of the two templates, in two accounts: the member's bus and forwarding rule
    # (template.yaml) and the audit account's central bus, rule and log group (org/audit-account.yaml)
    def client(service: str, account: str) -> Any:
        # moto serves each account to credentials of a role assumed in it
        sts = boto3.client("sts", region_name=REGION)
        creds = sts.assume_role(RoleArn=f"arn:aws:iam::{account}:role/test", RoleSessionName="test")["Credentials"]
        return boto3.client(  # type: ignore[call-overload]
            service,
            region_name=REGION,
            aws_access_key_id=creds["AccessKeyId"],
            aws_secret_access_key=creds["SecretAccessKey"],
            aws_session_token=creds["SessionToken"],
        )

    central_events, central_logs = client("events", AUDIT_ACCOUNT), client("logs", AUDIT_ACCOUNT)
    central_bus = central_events.create_event_bus(Name="sagemaker-governance-audit")["EventBusArn"]
    central_logs.create_log_group(logGroupName="/aws/events/sagemaker-governance-audit")
    central_events.put_rule(
        Name="to-logs", EventBusName="sagemaker-governance-audit", EventPattern=json.dumps({"source": [SOURCE]})
    )
    central_events.put_targets(
        Rule="to-logs",
        EventBusName="sagemaker-governance-audit",
        Targets=[
            {
                "Id": "logs",
                "Arn": f"arn:aws:logs:{REGION}:{AUDIT_ACCOUNT}:log-group:/aws/events/sagemaker-governance-audit",
            }
        ],
    )
    member_events, member_sqs = client("events", MEMBER), client("sqs", MEMBER)
    assert member_events.describe_event_bus()["Arn"].split(":")[4] == MEMBER
    member_events.create_event_bus(Name="sagemaker-governance-audit")
    member_events.put_rule(
        Name="forward", EventBusName="sagemaker-governance-audit", EventPattern=json.dumps({"source": [SOURCE]})
    )
    member_events.put_targets(
        Rule="forward", EventBusName="sagemaker-governance-audit", Targets=[{"Id": "central", "Arn": central_bus}]
    )
    forwarder = AuditForwarder(
        member_events,
        member_sqs,
        bus_name="sagemaker-governance-audit",
        dead_letter_queue_url=None,
        member=MEMBER_INFO,
    )
    # When the member forwards two decisions
    forwarder.forward(record("job-a"))
    forwarder.forward(record("job-b"))
    # Then both are in the central log group, whole events whose detail names the member
    found = central_logs.filter_log_events(logGroupName="/aws/events/sagemaker-governance-audit")["events"]
    details = [json.loads(e["message"])["detail"] for e in found]
    assert sorted(d["audit"]["job_name"] for d in details) == ["job-a", "job-b"]
    assert {d["member"]["account"] for d in details} == {MEMBER}
