from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from smgov.adapters.dead_letter_queue import DeadLetterQueue
from smgov.cli.dlq import cmd_dlq_list, cmd_dlq_redrive
from tests.builders import FUNCTION, lambda_failure_message


@pytest.fixture
def queue(aws: None) -> tuple[Any, str]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=lambda_failure_message()["Body"])  # type: ignore[arg-type]
    return sqs, url


def args(**values: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"limit": 100, "json": False, "message_id": None, "dry_run": False, **values})


def test_list_shows_the_error_and_leaves_the_message(
    queue: tuple[Any, str], capsys: pytest.CaptureFixture[str]
) -> None:
    sqs, url = queue
    dlq = DeadLetterQueue(sqs, lambda_client=None, queue_url=url)
    assert cmd_dlq_list(args(), dlq) == 0
    assert "ValidationError" in capsys.readouterr().out
    assert len(dlq.peek()) == 1  # still there, visible again


def test_list_by_stack_names_the_job_of_a_dead_lettered_alarm_notification(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given stack gov's dead-letter queue holding an idle alarm's notification from its alarm queue, with
    # the Subject CloudWatch gives it (fails on the old code: the JOB column showed that Subject)
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="gov-DeadLetterQueue")["QueueUrl"]
    alarm = {
        "AlarmName": "gov-idle-bert-sst2-finetune-42",
        "AWSAccountId": "123456789012",
        "NewStateValue": "ALARM",
    }
    body = {
        "Type": "Notification",
        "MessageId": "n-1",
        "Subject": 'ALARM: "gov-idle-bert-sst2-finetune-42" in US East (N. Virginia)',
        "Message": json.dumps(alarm),
    }
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    outputs = {"DeadLetterQueueUrl": url, "AlarmQueueArn": "arn:aws:sqs:us-east-1:123456789012:gov-AlarmQueue"}
    monkeypatch.setattr("smgov.cli.dlq.stack_outputs", lambda stack: outputs)
    # When `smgov dlq list --stack gov --json` lists it
    assert cmd_dlq_list(args(stack="gov", queue_url=None, json=True)) == 0
    # Then its job is the one the alarm's name carries (the stack's idle alarm prefix taken off)
    (letter,) = json.loads(capsys.readouterr().out)
    assert (letter["source"], letter["job_name"]) == ("queue", "bert-sst2-finetune-42")


def test_redrive_invokes_the_function_with_the_original_event_then_deletes(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    original = json.loads(lambda_failure_message()["Body"])["requestPayload"]  # type: ignore[arg-type]
    with Stubber(lambda_client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 202},
            {
                "FunctionName": f"{FUNCTION}:$LATEST",
                "InvocationType": "Event",
                "Payload": json.dumps(original).encode(),
            },
        )
        assert cmd_dlq_redrive(args(), DeadLetterQueue(sqs, lambda_client, url)) == 0
        stub.assert_no_pending_responses()
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_failed_redrive_keeps_the_message(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    lambda_client = boto3.client("lambda", region_name="us-east-1")
    with Stubber(lambda_client) as stub:
        stub.add_client_error("invoke", service_error_code="TooManyRequestsException", http_status_code=429)
        assert cmd_dlq_redrive(args(), DeadLetterQueue(sqs, lambda_client, url)) == 1
    # released at once for the next attempt, not deleted
    assert len(DeadLetterQueue(sqs, lambda_client, url).peek()) == 1


def test_dry_run_changes_nothing(queue: tuple[Any, str], capsys: pytest.CaptureFixture[str]) -> None:
    sqs, url = queue
    assert cmd_dlq_redrive(args(dry_run=True), DeadLetterQueue(sqs, None, url)) == 0
    assert "would redrive" in capsys.readouterr().out
    assert len(DeadLetterQueue(sqs, None, url).peek()) == 1


# ---- issue 16 item 2: records a function kept failing go back to their source queue --------------------


def test_a_record_the_function_kept_failing_goes_back_to_its_queue(aws: None) -> None:
    # Given the job-events queue redriving to the dead-letter queue after one receive (as SQS does
    # after maxReceiveCount), and an event the function failed there
    sqs = boto3.client("sqs", region_name="us-east-1")
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source_url = sqs.create_queue(
        QueueName="job-events",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})},
    )["QueueUrl"]
    event = json.dumps({"detail-type": "SageMaker Training Job State Change", "detail": {"TrainingJobName": "j"}})
    sqs.send_message(QueueUrl=source_url, MessageBody=event)
    for _ in range(2):  # received, not deleted (the function failed it), received again: moved
        sqs.receive_message(QueueUrl=source_url, VisibilityTimeout=0)
    source_arn = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    # (moto does not set DeadLetterQueueSourceArn: the body's shape names the queue, as the stack's outputs do)
    dlq = DeadLetterQueue(sqs, None, dlq_url, {"eventbridge": source_arn})
    (letter,) = dlq.peek()
    # Then it is a queue dead letter naming its job and source queue, and redrive sends the original
    # body back there (no Lambda call) and deletes it from the dead-letter queue
    assert (letter.source, letter.job_name) == ("queue", "j")
    assert letter.queue_arn is not None and letter.queue_arn.endswith(":job-events")
    dlq.release(letter)
    assert cmd_dlq_redrive(args(), dlq) == 0
    (back,) = sqs.receive_message(QueueUrl=source_url)["Messages"]
    assert back["Body"] == event
    assert sqs.receive_message(QueueUrl=dlq_url).get("Messages", []) == []


# ---- one audit view: audit records that did not reach the central bus (issue 21) --------------------


def _audit_bus_capture(events: Any, sqs: Any, bus: str) -> str:
    """The stack's audit bus with a rule copying its events to a queue (the forwarding rule's stand-in)."""
    from sagemaker_governance.adapters.audit_forwarder import SOURCE

    events.create_event_bus(Name=bus)
    url = sqs.create_queue(QueueName="forwarded")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="forward", EventBusName=bus, EventPattern=json.dumps({"source": [SOURCE]}))
    events.put_targets(Rule="forward", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    return str(url)


def test_an_audit_record_put_events_refused_is_listed_and_redriven_to_the_audit_bus(aws: None) -> None:
    from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
    from tests.audit_records import MEMBER_INFO, record

    # Given the forwarder could not put a record (its bus did not exist yet): it is in the DLQ
    sqs, events = boto3.client("sqs", region_name="us-east-1"), boto3.client("events", region_name="us-east-1")
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    forwarder = AuditForwarder(events, sqs, bus_name="gov-audit", dead_letter_queue_url=url, member=MEMBER_INFO)
    forwarder.forward(record("job-x"))
    dlq = DeadLetterQueue(sqs, None, url, events_client=events)
    (letter,) = dlq.peek(visibility_seconds=0)
    # Then it reads as an audit record not forwarded, for its job, redrivable to the audit bus
    assert (letter.source, letter.job_name, letter.bus, letter.redrivable) == (
        "audit-forward",
        "job-x",
        "gov-audit",
        True,
    )
    # When the bus exists again and the operator redrives
    forwarded = _audit_bus_capture(events, sqs, "gov-audit")
    assert cmd_dlq_redrive(args(), dlq) == 0
    # Then the same record is on the bus (and forwarded by its rule), and the message is gone
    (message,) = sqs.receive_message(QueueUrl=forwarded)["Messages"]
    assert json.loads(message["Body"])["detail"]["audit"] == record("job-x").as_log()
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_an_event_the_forwarding_rule_could_not_deliver_goes_back_on_the_stacks_audit_bus(aws: None) -> None:
    from tests.audit_records import MEMBER_INFO, record

    # Given EventBridge dead-lettered a forwarded event: the central bus refused it (RULE_ARN names the
    # stack's audit bus, TARGET_ARN the central bus)
    sqs, events = boto3.client("sqs", region_name="us-east-1"), boto3.client("events", region_name="us-east-1")
    url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    event = {
        "version": "0",
        "id": "e-1",
        "detail-type": "Governance Decision",
        "source": "sagemaker-governance",
        "account": "111111111111",
        "time": "2026-11-21T12:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"message": "governance decision", "audit": record("job-y").as_log(), "member": MEMBER_INFO},
    }

    def attribute(value: str) -> Any:
        return {"DataType": "String", "StringValue": value}

    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(event),
        MessageAttributes={
            "RULE_ARN": attribute("arn:aws:events:us-east-1:111111111111:rule/gov-audit/forward"),
            "TARGET_ARN": attribute("arn:aws:events:us-east-1:999999999999:event-bus/sagemaker-governance-audit"),
            "ERROR_CODE": attribute("NO_PERMISSIONS"),
            "ERROR_MESSAGE": attribute("not authorized"),
        },
    )
    dlq = DeadLetterQueue(sqs, None, url, events_client=events)
    (letter,) = dlq.peek(visibility_seconds=0)
    # Then it is an audit record, never a function to invoke, and goes back on the stack's own bus
    assert (letter.source, letter.job_name, letter.bus, letter.function_arn) == (
        "audit-forward",
        "job-y",
        "gov-audit",
        None,
    )
    assert "NO_PERMISSIONS" in letter.error
    forwarded = _audit_bus_capture(events, sqs, "gov-audit")
    assert cmd_dlq_redrive(args(), dlq) == 0
    (message,) = sqs.receive_message(QueueUrl=forwarded)["Messages"]
    assert json.loads(message["Body"])["detail"] == event["detail"]


# ---- the audit account's central dead-letter queue ---------------------------------------------------------

CENTRAL_GROUP = "/aws/events/sagemaker-governance-audit"


def _central_dead_letter(sqs: Any, url: str, at: datetime) -> dict[str, Any]:
    """What EventBridge puts in the central dead-letter queue when the central rule cannot write a record."""
    from tests.audit_records import MEMBER_INFO, record

    event = {
        "version": "0",
        "id": "e-9",
        "detail-type": "Governance Decision",
        "source": "sagemaker-governance",
        "account": "111111111111",  # the member that sent it
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [],
        "detail": {"message": "governance decision", "audit": record("job-z").as_log(), "member": MEMBER_INFO},
    }

    def attribute(value: str) -> Any:
        return {"DataType": "String", "StringValue": value}

    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(event),
        MessageAttributes={
            "RULE_ARN": attribute(
                "arn:aws:events:us-east-1:999999999999:rule/sagemaker-governance-audit/sagemaker-governance-audit-to-logs"
            ),
            "TARGET_ARN": attribute(f"arn:aws:logs:us-east-1:999999999999:log-group:{CENTRAL_GROUP}"),
            "ERROR_CODE": attribute("ResourceNotFoundException"),
            "ERROR_MESSAGE": attribute("The specified log group does not exist."),
        },
    )
    return event


def test_a_record_the_central_log_group_refused_is_written_back_with_its_time_and_member(aws: None) -> None:
    sqs, logs = boto3.client("sqs", region_name="us-east-1"), boto3.client("logs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="central-dlq")["QueueUrl"]
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    event = _central_dead_letter(sqs, url, at)
    # (no Lambda client: a log group must never be invoked)
    dlq = DeadLetterQueue(sqs, None, url, logs_client=lambda region: boto3.client("logs", region_name=region))
    # When the log group is back and the operator redrives
    logs.create_log_group(logGroupName=CENTRAL_GROUP)
    assert cmd_dlq_redrive(args(), dlq) == 0
    # Then the whole event is in the log group at the event's time, with the member's account, and the letter
    # is gone
    (written,) = logs.filter_log_events(logGroupName=CENTRAL_GROUP)["events"]
    assert json.loads(written["message"]) == event and json.loads(written["message"])["account"] == "111111111111"
    assert written["timestamp"] == int(at.timestamp() * 1000)
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []
    # and a second letter goes into the same stream
    _central_dead_letter(sqs, url, at + timedelta(minutes=1))
    assert cmd_dlq_redrive(args(), dlq) == 0
    assert len(logs.filter_log_events(logGroupName=CENTRAL_GROUP)["events"]) == 2


def test_a_central_record_the_log_group_still_refuses_stays_in_the_queue(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    sqs, logs = boto3.client("sqs", region_name="us-east-1"), boto3.client("logs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="central-dlq")["QueueUrl"]
    dlq = DeadLetterQueue(sqs, None, url, logs_client=lambda region: boto3.client("logs", region_name=region))
    # Given a record whose log group does not exist yet, and one too old to write at its time
    _central_dead_letter(sqs, url, datetime.now(UTC) - timedelta(hours=1))
    assert cmd_dlq_redrive(args(), dlq) == 1
    assert "CreateLogStream" in capsys.readouterr().err
    logs.create_log_group(logGroupName=CENTRAL_GROUP)
    old = DeadLetterQueue(sqs, None, url, logs_client=lambda region: logs)
    _central_dead_letter(sqs, url, datetime.now(UTC) - timedelta(days=20))
    assert cmd_dlq_redrive(args(), old) == 1
    assert "14 days" in capsys.readouterr().err
    # Then the one too old is still there (the other was written once its group existed), and nothing was lost
    (left,) = dlq.peek(visibility_seconds=0)
    assert left.source == "audit-log" and left.redrivable
    assert len(logs.filter_log_events(logGroupName=CENTRAL_GROUP)["events"]) == 1


def test_the_audit_stacks_central_queue_is_found_by_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    from smgov.cli import dlq as dlq_cli

    url = "https://sqs.us-east-1.amazonaws.com/999999999999/central-dlq"
    monkeypatch.setattr(dlq_cli, "stack_outputs", lambda stack: {"CentralDeadLetterQueueUrl": url})
    monkeypatch.setattr(boto3, "client", lambda service, **kw: (service, kw.get("region_name")))
    queue = dlq_cli.open_queue(argparse.Namespace(queue_url=None, stack="sagemaker-governance-audit"))
    assert queue._queue_url == url
    assert queue._logs is not None and queue._logs("eu-west-1") == ("logs", "eu-west-1")  # the group's region
    monkeypatch.setattr(dlq_cli, "stack_outputs", lambda stack: {})
    with pytest.raises(SystemExit, match="CentralDeadLetterQueueUrl"):
        dlq_cli.open_queue(argparse.Namespace(queue_url=None, stack="nope"))
