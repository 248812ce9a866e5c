from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from sagemaker_governance.events.queue import DELIVERY_OWNER_ATTRIBUTE
from smgov.dead_letters import parse_dead_letter
from tests.builders import FUNCTION, lambda_failure_message
from tests.conftest import load_event


def test_lambda_destination_record_yields_payload_function_and_error() -> None:
    letter = parse_dead_letter(lambda_failure_message())
    assert letter.source == "lambda" and letter.attempts == 3
    assert letter.function_arn == f"{FUNCTION}:$LATEST"
    assert letter.error.startswith("ValidationError: 1 validation error")
    assert letter.payload["id"] == "ffffffff-0000-4000-8000-000000000009"
    assert letter.redrivable


def test_eventbridge_dead_letter_yields_the_event_and_its_target() -> None:
    event = load_event("training-job-starting.json")
    message = {
        "MessageId": "m-2",
        "ReceiptHandle": "h-2",
        "Body": json.dumps(event),
        "MessageAttributes": {
            "RULE_ARN": {
                "DataType": "String",
                "StringValue": "arn:aws:events:us-east-1:123456789012:rule/gov-JobStarting",
            },
            "TARGET_ARN": {"DataType": "String", "StringValue": FUNCTION},
            "ERROR_CODE": {"DataType": "String", "StringValue": "SDK_CLIENT_ERROR"},
            "ERROR_MESSAGE": {"DataType": "String", "StringValue": "Lambda throttled"},
        },
    }
    letter = parse_dead_letter(message)
    assert (letter.source, letter.function_arn, letter.job_name) == (
        "eventbridge",
        FUNCTION,
        "resnet50-imagenet-2025-11-21-10-00-00",
    )
    assert letter.error == "SDK_CLIENT_ERROR: Lambda throttled"


def test_unrecognised_body_is_kept_but_not_redrivable() -> None:
    letter = parse_dead_letter({"MessageId": "m", "ReceiptHandle": "h", "Body": "not json"})
    assert letter.source == "unknown" and not letter.redrivable


@given(
    st.dictionaries(
        st.sampled_from(["MessageId", "ReceiptHandle", "Body", "MessageAttributes"]),
        st.one_of(st.text(), st.none(), st.dictionaries(st.text(), st.text())),
    )
)
def test_any_message_parses_without_raising(message: dict[str, object]) -> None:
    parse_dead_letter(message)


def test_an_eventbridge_failure_to_reach_the_job_events_queue_redrives_to_the_queue() -> None:
    queue = "arn:aws:sqs:us-east-1:123456789012:gov-JobEventsQueue-1A2B"
    message = {
        "MessageId": "m-1",
        "ReceiptHandle": "r",
        "Body": json.dumps(
            {"detail-type": "SageMaker Training Job State Change", "detail": {"TrainingJobName": "j"}}
        ),
        "MessageAttributes": {
            "RULE_ARN": {"StringValue": "arn:aws:events:us-east-1:123456789012:rule/gov-JobStartingRule"},
            "TARGET_ARN": {"StringValue": queue},
            "ERROR_CODE": {"StringValue": "SQS.AccessDenied"},
        },
    }
    letter = parse_dead_letter(message)
    assert (letter.source, letter.queue_arn, letter.function_arn) == ("eventbridge", queue, None)
    assert letter.redrivable and letter.target == queue and letter.job_name == "j"


def _queued_alarm(subject: str) -> dict[str, object]:
    """A dead-lettered alarm notification as the alarm queue held it (raw delivery off: the SNS envelope)."""
    sns = load_event("idle-alarm-single-metric.json")["Records"][0]["Sns"]
    body = {"Type": "Notification", "MessageId": sns["MessageId"], "Subject": subject, "Message": sns["Message"]}
    return {
        "MessageId": "m-2",
        "ReceiptHandle": "r",
        "Body": json.dumps(body),
        "Attributes": {"DeadLetterQueueSourceArn": "arn:aws:sqs:us-east-1:123456789012:gov-AlarmQueue-9Z"},
    }


def test_an_alarm_notification_names_the_job_of_its_alarm_not_the_sns_subject() -> None:
    # Given an idle alarm's notification dead-lettered from the alarm queue, with the Subject CloudWatch
    # gives it (fails on the old code: the JOB column showed that Subject)
    message = _queued_alarm('ALARM: "sagemaker-governance-idle-bert-sst2-finetune-42" in US East (N. Virginia)')
    # When it is read with the stack's idle alarm prefix
    letter = parse_dead_letter(message, alarm_prefix="sagemaker-governance-idle-")
    # Then its job is the one the alarm name carries, and it goes back to the alarm queue
    assert letter.source == "queue" and letter.redrivable
    assert letter.job_name == "bert-sst2-finetune-42"


def test_an_alarm_notification_without_the_stack_prefix_names_no_job() -> None:
    # Given the same notification read without a prefix (--queue-url) or with another stack's
    message = _queued_alarm('ALARM: "sagemaker-governance-idle-bert-sst2-finetune-42" in US East (N. Virginia)')
    # Then no job is named rather than a guess
    assert parse_dead_letter(message).job_name is None
    assert parse_dead_letter(message, alarm_prefix="other-stack-idle-").job_name is None


def test_an_alarm_notification_whose_message_is_not_alarm_json_names_no_job() -> None:
    body = json.dumps({"Type": "Notification", "MessageId": "x", "Subject": 'ALARM: "gov-idle-j"', "Message": "{"})
    letter = parse_dead_letter({"MessageId": "m", "ReceiptHandle": "r", "Body": body}, alarm_prefix="gov-idle-")
    assert letter.job_name is None


def test_a_record_the_function_failed_keeps_its_delivery_owner_through_redrives() -> None:
    # Given a record the function failed, dead-lettered by the job-events queue (its message id kept), and
    # the same record after an earlier redrive (a new message id, the original one in the owner attribute)
    queue = "arn:aws:sqs:us-east-1:123456789012:gov-JobEventsQueue-1A2B"
    body = json.dumps({"detail-type": "SageMaker Training Job State Change", "detail": {"TrainingJobName": "j"}})
    first = {
        "MessageId": "m-0",
        "ReceiptHandle": "r",
        "Body": body,
        "Attributes": {"DeadLetterQueueSourceArn": queue},
    }
    again = {
        **first,
        "MessageId": "m-redriven",
        "MessageAttributes": {DELIVERY_OWNER_ATTRIBUTE: {"DataType": "String", "StringValue": "m-0"}},
    }
    # Then both name the original message as the owner a redrive carries
    assert parse_dead_letter(first).owner == "m-0"
    assert parse_dead_letter(again).owner == "m-0"
    # and an event EventBridge could not deliver to the queue was never received: no owner to carry
    undelivered = {
        "MessageId": "m-1",
        "ReceiptHandle": "r",
        "Body": body,
        "MessageAttributes": {"RULE_ARN": {"StringValue": "arn:aws:events:us-east-1:123456789012:rule/gov-R"}},
    }
    assert parse_dead_letter(undelivered).owner is None


# ---- the audit account's central dead-letter queue: a record the central rule could not write ---------------

CENTRAL_RULE = (
    "arn:aws:events:us-east-1:999999999999:rule/sagemaker-governance-audit/sagemaker-governance-audit-to-logs"
)
CENTRAL_GROUP = "arn:aws:logs:us-east-1:999999999999:log-group:/aws/events/sagemaker-governance-audit"


def central_letter(event: dict[str, object]) -> dict[str, object]:
    def attribute(value: str) -> dict[str, str]:
        return {"DataType": "String", "StringValue": value}

    return {
        "MessageId": "m-c",
        "ReceiptHandle": "h-c",
        "Body": json.dumps(event),
        "MessageAttributes": {
            "RULE_ARN": attribute(CENTRAL_RULE),
            "TARGET_ARN": attribute(CENTRAL_GROUP),
            "ERROR_CODE": attribute("ResourceNotFoundException"),
            "ERROR_MESSAGE": attribute("The specified log group does not exist."),
        },
    }


def forwarded_event(**overrides: object) -> dict[str, object]:
    from tests.audit_records import MEMBER_INFO, record

    detail = {"message": "governance decision", "audit": record("j1").as_log(), "member": MEMBER_INFO}
    return {
        "version": "0",
        "id": "e1",
        "detail-type": "Governance Decision",
        "source": "sagemaker-governance",
        "account": "111111111111",
        "time": "2026-11-28T10:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
        **overrides,
    }


def test_a_record_the_central_log_group_refused_is_written_back_to_it_not_invoked() -> None:
    letter = parse_dead_letter(central_letter(forwarded_event()))
    # not a function to invoke (before: source eventbridge, function_arn the log group, Lambda-Invoked)
    assert (letter.source, letter.function_arn, letter.queue_arn, letter.bus) == ("audit-log", None, None, None)
    assert (letter.log_group, letter.target, letter.job_name) == (CENTRAL_GROUP, CENTRAL_GROUP, "j1")
    assert letter.log_timestamp == int(datetime(2026, 11, 28, 10, tzinfo=UTC).timestamp() * 1000)  # event time
    assert letter.redrivable and "ResourceNotFoundException" in letter.error


def test_a_central_record_without_a_time_is_kept_but_not_redrivable() -> None:
    event = forwarded_event()
    del event["time"]
    letter = parse_dead_letter(central_letter(event))
    assert letter.source == "audit-log" and not letter.redrivable
    assert "no time" in letter.error
