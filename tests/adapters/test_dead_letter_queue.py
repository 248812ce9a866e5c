from __future__ import annotations

import argparse
import json
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
