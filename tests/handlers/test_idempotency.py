"""Idempotency through the real handlers: duplicate and reordered deliveries, and a crash between
acting and recording, against moto's DynamoDB (the delivery ledger) and the doubles."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from moto.core.botocore_stubber import MockRawResponse

from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.audit import AuditRecord, MemoryAuditSink
from sagemaker_governance.composition.job_events import job_events_service
from sagemaker_governance.domain.errors import (
    AdapterError,
    DescriptionBehind,
    StopDenied,
    StopOutcome,
    StopRefused,
    StopUnanswered,
)
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from smgov.adapters.dead_letter_queue import DeadLetterQueue
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.fake_sagemaker import SageMakerError
from smgov.simulation.faults import ANSWERED_URL
from smgov.simulation.harness import LocalAccount, local_account
from smgov.simulation.job_signals import JobSignals, log_stream
from smgov.simulation.messages import sqs_lambda_event, sqs_record
from tests.builders import create_request
from tests.handlers.conftest import ENFORCE, NOW, MovableClock, interrupt, sns_notification_body, sqs_batch

TABLE = "smgov-idempotency"
UNTAGGED = {"owner": "bob"}
DELIVERY = "job:untagged-1:InProgress:Starting:1:2026-11-21T12:00:00+00:00"  # its state change (job_delivery_key)


def create_table() -> None:
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def acct(clock: MovableClock) -> Iterator[LocalAccount]:
    with local_account(clock, {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": TABLE}) as account:
        create_table()
        yield account


def inbox_messages(account: LocalAccount, queue_url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    sqs: Any = account.sqs
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        messages += batch
        for message in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return messages


def records(account: LocalAccount, action: str) -> list[AuditRecord]:
    return [r for r in account.audit.records if r.action == action]


class FailOnce:
    """Raise the first time ``when(args)`` holds, then behave."""

    def __init__(self, when: Any) -> None:
        self.when = when
        self.fired = False

    def __call__(self, *args: Any) -> bool:
        if not self.fired and self.when(*args):
            self.fired = True
            return True
        return False


# ---- duplicates ---------------------------------------------------------------------------------


def test_duplicate_deliveries_stop_notify_and_record_once(acct: LocalAccount, clock: MovableClock) -> None:
    # Given an untagged job (enforce mode stops it) and the owners' inbox
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    first = acct.sagemaker.event("untagged-1", event_id="11111111-1111-1111-1111-111111111111")
    # SageMaker's second event about the same state change: another id, another status message
    second = copy.deepcopy(first)
    second["id"] = "22222222-2222-2222-2222-222222222222"
    second["detail"]["SecondaryStatusTransitions"][-1]["StatusMessage"] = "Launching requested ML instances"
    # When the first event is delivered twice and the second once, a little later
    result = acct.invoke(job_events, first)
    again = acct.invoke(job_events, first)
    clock.advance(seconds=20)
    acct.invoke(job_events, second)
    # Then the job was stopped once, its owner told once, the stop recorded once
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert len(inbox_messages(acct, inbox)) == 1
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    assert again == {"duplicate": DELIVERY} and "decisions" in result  # not processed again


def test_a_spot_restart_is_a_new_state_change_not_a_duplicate(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a job in Training whose alarm was created
    acct.sagemaker.launch(create_request("spot-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("spot-1"))
    # When Spot capacity is reclaimed and the job enters Training again
    for secondary in ("Interrupted", "Starting", "Training"):
        clock.advance(minutes=10)
        acct.sagemaker.transition("spot-1", "InProgress", secondary)
    acct.invoke(job_events, acct.sagemaker.event("spot-1"))
    # Then the second Training is acted on (the alarm re-armed), not skipped as a duplicate
    assert [r.outcome.value for r in records(acct, "create-alarm")] == ["done", "done"]


def without_transitions(event: dict[str, Any]) -> dict[str, Any]:
    """The event as SageMaker may send it: its SecondaryStatusTransitions written as null."""
    unsaid = copy.deepcopy(event)
    unsaid["detail"]["SecondaryStatusTransitions"] = None
    return unsaid


def test_an_event_that_leaves_out_its_transitions_is_the_same_delivery_as_one_that_carries_them(
    acct: LocalAccount,
) -> None:
    # Given an untagged job (enforce mode stops it) whose Starting event was handled
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    acct.invoke(job_events, event)
    # When SageMaker's other event about the same state change leaves its transitions out (null)
    again = acct.invoke(job_events, without_transitions(event))
    # Then the job is read again and the delivery keyed on its transitions: a duplicate, nothing done twice
    assert again == {"duplicate": DELIVERY}
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]


def test_a_spot_restart_whose_events_leave_out_their_transitions_is_still_a_restart(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in Training whose alarm was created
    acct.sagemaker.launch(create_request("spot-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("spot-1"))
    # When Spot capacity is reclaimed and the restart's Starting and Training events leave out their transitions
    for secondary in ("Interrupted", "Starting"):
        clock.advance(minutes=10)
        acct.sagemaker.transition("spot-1", "InProgress", secondary)
    starting = acct.invoke(job_events, without_transitions(acct.sagemaker.event("spot-1")))
    clock.advance(minutes=10)
    acct.sagemaker.transition("spot-1", "InProgress", "Training")
    acct.invoke(job_events, without_transitions(acct.sagemaker.event("spot-1")))
    # Then the restart is not a first start (compliance is not evaluated again) and the alarm is re-armed
    assert not any(d["code"].startswith("compliance.") for d in starting["decisions"])
    assert [r.outcome.value for r in records(acct, "create-alarm")] == ["done", "done"]


def test_an_event_ahead_of_the_job_read_again_is_retried_not_keyed_on_an_older_history(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose Failed event, transitions left out, arrives while DescribeTrainingJob still says Training
    acct.sagemaker.launch(create_request("late-1"), secondary="Training")
    clock.advance(minutes=30)
    failed = acct.sagemaker.event("late-1")
    failed["detail"].update(
        TrainingJobStatus="Failed", SecondaryStatus="Failed", FailureReason="InternalServerError: x"
    )
    body = json.dumps(without_transitions(failed))
    # When it is delivered through the queue, then the record fails (its only one: the invocation fails, and
    # the queue delivers it again), and nothing was decided or recorded
    with pytest.raises(DescriptionBehind):
        acct.invoke(job_events, sqs_batch(body))
    assert acct.audit.records == []
    # and once DescribeTrainingJob says Failed, the same record is governed
    acct.sagemaker.transition("late-1", "Failed", "Failed", failure_reason="InternalServerError: x")
    assert acct.invoke(job_events, sqs_batch(body)) == {"batchItemFailures": []}
    assert acct.audit.records


@pytest.mark.parametrize(
    ("status", "secondary"),
    [("Stopped", "MaxWaitTimeExceeded"), ("InProgress", "Interrupted"), ("InProgress", "Pending")],
)
def test_an_event_whose_status_the_transitions_never_show_is_governed_not_retried_forever(
    acct: LocalAccount, clock: MovableClock, status: str, secondary: str
) -> None:
    # Given a job whose description is at the event's state, but whose transitions do not list it (SageMaker
    # documents Pending, Interrupted and MaxWaitTimeExceeded as SecondaryStatus values, not as transitions)
    acct.sagemaker.launch(create_request("unlisted-1"), secondary="Training")
    clock.advance(minutes=30)
    job = acct.sagemaker.jobs["unlisted-1"]
    job["TrainingJobStatus"], job["SecondaryStatus"] = status, secondary
    body = json.dumps(without_transitions(acct.sagemaker.event("unlisted-1")))
    # When its event, transitions left out, is delivered, then the record is governed at once: a lag would
    # be retried, and this one would fail every receive into the dead-letter queue
    assert acct.invoke(job_events, sqs_batch(body)) == {"batchItemFailures": []}


def test_an_event_that_carries_its_transitions_does_not_read_the_job_for_them(acct: LocalAccount) -> None:
    # Given a compliant job's Starting event, transitions included
    acct.sagemaker.launch(create_request("ok-1"))
    # When it is delivered
    acct.invoke(job_events, acct.sagemaker.event("ok-1"))
    # Then no DescribeTrainingJob is made for it (a healthy job's calls do not grow)
    assert acct.sagemaker.calls["DescribeTrainingJob"] == 0


# ---- a claim whose answer was lost ----------------------------------------------------------------


def lose_the_first_ledger_answer(account: LocalAccount) -> None:
    """DynamoDB applies the next ledger write but its answer is lost (a read timeout, a 500): botocore's
    standard retries send the same request again, and the retry meets the claim the first one wrote."""
    lost: list[int] = []

    def needs_retry(attempts: int, **_: Any) -> int | None:
        lost.append(attempts)
        return 0 if len(lost) == 1 else None

    account.root.client("dynamodb").meta.events.register_first("needs-retry.dynamodb", needs_retry)


def test_a_claim_whose_answer_was_lost_is_processed_not_skipped(acct: LocalAccount) -> None:
    # Given an untagged job (enforce mode stops it) and a ledger whose first answer is lost
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    lose_the_first_ledger_answer(acct)
    # When its Starting event arrives through the queue
    answer = acct.invoke(job_events, sqs_batch(json.dumps(acct.sagemaker.event("untagged-1"))))
    # Then the delivery is not taken for a duplicate of itself: the job is stopped and the stop recorded
    assert answer == {"batchItemFailures": []}
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]


def test_an_alarm_claim_whose_answer_was_lost_still_stops_the_idle_job(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an idle job past its grace period whose alarm fires, and a ledger whose first answer is lost
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    JobSignals(clock).attach(acct.cloudwatch).idle("idle-1")
    log_stream("idle-1")
    clock.advance(minutes=90)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    lose_the_first_ledger_answer(acct)
    # When the alarm's notification arrives through the queue
    acct.invoke(stopper, sqs_batch(sns_notification_body(acct, alarm), queue="AlarmQueue"))
    # Then the job is stopped (the alarm stays in ALARM: no second notification would come)
    assert acct.sagemaker.stop_requests == ["idle-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records if r.trigger == "idle-alarm"] == [
        ("stop", "done")
    ]


# ---- a failed attempt's records ------------------------------------------------------------------

SPOT_ENFORCE = {**ENFORCE, "SPOT_MAX_INTERRUPTIONS": "3", "IDEMPOTENCY_TABLE_NAME": TABLE}


def launch_spot(account: LocalAccount, name: str) -> None:
    request = create_request(name)
    request["CheckpointConfig"] = {"S3Uri": f"s3://bucket/checkpoints/{name}/"}
    request["EnableManagedSpotTraining"] = True
    request["StoppingCondition"] = {"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800}
    account.sagemaker.launch(request)


def spot_records(account: LocalAccount) -> list[AuditRecord]:
    return [r for r in account.audit.records if r.rule == "spot-fallback"]


def test_a_failed_attempts_failure_records_do_not_hide_its_retrys_clone_and_stop(clock: MovableClock) -> None:
    # Given a Spot job at its third interruption whose On-Demand clone cannot be created the first time:
    # that attempt records the clone failed and the stop skipped, then fails the delivery
    with local_account(clock, SPOT_ENFORCE, log_audit=False) as account:
        create_table()
        launch_spot(account, "bert-spot-3")
        batch = sqs_batch(json.dumps(interrupt(account, clock, "bert-spot-3", 3)))
        account.sagemaker.fail_next["CreateTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
        with pytest.raises(AdapterError):
            account.invoke(job_events, batch)
        # When the record comes back after the queue's visibility timeout and the retry succeeds
        clock.advance(minutes=31)
        account.invoke(job_events, batch)
        # Then the retry's clone and stop are recorded after the first attempt's failure records
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-3-r1"]
        assert account.sagemaker.stop_requests == ["bert-spot-3"]
        assert [(r.action, r.outcome.value) for r in spot_records(account)] == [
            ("clone", "failed"),
            ("stop", "skipped"),
            ("clone", "done"),
            ("stop", "done"),
        ]
        # And the same state change in another message (a duplicate) records nothing more
        duplicate = copy.deepcopy(batch)
        duplicate["Records"][0]["messageId"] = "m-duplicate"
        assert account.invoke(job_events, duplicate) == {"batchItemFailures": []}
        assert len(spot_records(account)) == 4


# ---- a completed record back with its batch ------------------------------------------------------


class LambdaTimeout(BaseException):
    """Lambda ends the runtime at the timeout: no ``except`` of ours answers for the batch."""


def test_a_completed_record_back_with_its_timed_out_batch_is_not_processed_again(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a batch whose first record (an untagged job: stopped, its owner told) completes, and whose second
    # runs into the invocation's timeout
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    acct.sagemaker.launch(create_request("slow-2"), secondary="Training")
    batch = sqs_batch(json.dumps(acct.sagemaker.event("untagged-1")), json.dumps(acct.sagemaker.event("slow-2")))
    hung: list[str] = []

    def hanging(root: Any) -> Any:
        service = job_events_service(root)

        class Hanging:
            def said(self, event: Any) -> Any:
                return service.said(event)

            def handle(self, event: Any) -> Any:
                if event.detail.name == "slow-2" and not hung:
                    hung.append(event.detail.name)
                    raise LambdaTimeout
                return service.handle(event)

        return Hanging()

    monkeypatch.setattr("sagemaker_governance.handlers.job_events.service", hanging)
    with pytest.raises(LambdaTimeout):
        acct.invoke(job_events, batch)
    # When Lambda's failed invocation returns the whole batch and it is received again (visibility timeout)
    clock.advance(minutes=31)
    assert acct.invoke(job_events, batch) == {"batchItemFailures": []}
    # Then the completed record is a duplicate: one stop, one record of it, the owner told once
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records if r.job_name == "untagged-1"] == [
        ("stop", "done")
    ]
    assert len(inbox_messages(acct, inbox)) == 1
    # And the record the timeout interrupted was processed this time
    assert "sagemaker-governance-idle-slow-2" in acct.cloudwatch.alarms


# ---- a record whose attempts all died, redriven from the dead-letter queue --------------------------


def lambda_record(queue_arn: str, message: dict[str, Any]) -> dict[str, Any]:
    """What the event source mapping hands the function for a message ``ReceiveMessage`` returned."""
    attributes = {
        name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
        for name, value in (message.get("MessageAttributes") or {}).items()
    }
    record = sqs_record(
        queue_arn, message["Body"], message_id=message["MessageId"], sent_at=NOW, attributes=attributes
    )
    return sqs_lambda_event([record])


def test_a_record_whose_attempts_all_died_is_processed_when_smgov_redrives_it(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the job-events queue (maxReceiveCount 5) and an untagged job's event whose every invocation dies
    # after its claim (a Lambda timeout: nothing releases the claim)
    sqs: Any = acct.sqs
    dlq_url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5})
    source_url = sqs.create_queue(QueueName="job-events", Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    source_arn = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    sqs.send_message(QueueUrl=source_url, MessageBody=json.dumps(acct.sagemaker.event("untagged-1")))
    dying = {"on": True}

    def hanging(root: Any) -> Any:
        service = job_events_service(root)

        class Hanging:
            def said(self, event: Any) -> Any:
                return service.said(event)

            def handle(self, event: Any) -> Any:
                if dying["on"]:
                    raise LambdaTimeout
                return service.handle(event)

        return Hanging()

    monkeypatch.setattr("sagemaker_governance.handlers.job_events.service", hanging)
    for _ in range(5):
        (message,) = sqs.receive_message(QueueUrl=source_url, VisibilityTimeout=0)["Messages"]
        with pytest.raises(LambdaTimeout):
            acct.invoke(job_events, lambda_record(source_arn, message))
        clock.advance(minutes=30)  # the queue's VisibilityTimeout
    assert sqs.receive_message(QueueUrl=source_url, VisibilityTimeout=0).get("Messages", []) == []  # dead-lettered
    # When the operator fixes the cause and redrives the dead-letter queue 20 minutes after its alarm
    dying["on"] = False
    clock.advance(minutes=20)
    dlq = DeadLetterQueue(sqs, None, dlq_url, {"eventbridge": source_arn})
    (letter,) = dlq.peek()
    dlq.redrive(letter)
    (redriven,) = sqs.receive_message(QueueUrl=source_url, MessageAttributeNames=["All"])["Messages"]
    assert redriven["MessageId"] != message["MessageId"]  # SendMessage: a new message id
    assert acct.invoke(job_events, lambda_record(source_arn, redriven)) == {"batchItemFailures": []}
    # Then the redriven copy takes the dead attempts' claim over (it carries their owner) and the job is stopped
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records if r.job_name == "untagged-1"] == [
        ("stop", "done")
    ]
    # and a copy of the same state change from another message is still a duplicate
    other = sqs_batch(redriven["Body"])
    assert acct.invoke(job_events, other) == {"batchItemFailures": []}
    assert acct.sagemaker.stop_requests == ["untagged-1"]


# ---- reordering ---------------------------------------------------------------------------------


def test_training_before_starting_leaves_the_alarm_and_stops_nothing(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a compliant job whose Starting event is delivered after its Training event
    acct.sagemaker.launch(create_request("job-1"))
    starting = acct.sagemaker.event("job-1")
    clock.advance(minutes=5)
    acct.sagemaker.transition("job-1", "InProgress", "Training")
    training = acct.sagemaker.event("job-1")
    # When they arrive out of order
    acct.invoke(job_events, training)
    acct.invoke(job_events, starting)
    # Then the alarm exists and the job runs on
    assert "sagemaker-governance-idle-job-1" in acct.cloudwatch.alarms
    assert acct.sagemaker.stop_requests == []
    assert acct.sagemaker.jobs["job-1"]["TrainingJobStatus"] == "InProgress"


def test_completed_before_training_leaves_no_alarm_behind(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a job that trained and completed, its Training event delayed past its Completed event
    acct.sagemaker.launch(create_request("job-1"), secondary="Training")
    training = acct.sagemaker.event("job-1")
    clock.advance(minutes=30)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    completed = acct.sagemaker.event("job-1")
    # When Completed arrives first
    acct.invoke(job_events, completed)
    acct.invoke(job_events, training)
    # Then no alarm is left for the ended job and nothing was stopped
    assert acct.cloudwatch.alarms == {}
    assert acct.sagemaker.stop_requests == []
    assert [r.outcome.value for r in records(acct, "create-alarm")] == []


# ---- a crash between acting and recording -------------------------------------------------------


RETRIED = "11111111-2222-3333-4444-555555555555"  # an invocation Lambda retries: every attempt carries its id


def test_a_direct_invocations_retry_within_its_unreleased_claims_hold_is_a_duplicate_a_known_gap(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an untagged job's event invoked directly (not through a queue: a path the template does not
    # deploy), whose attempt fails (SNS throttled after the stop) and whose claim could not be released (the
    # ledger throttled too): held for the invocation's 60 s
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    inbox = acct.notification_inbox()
    event = acct.sagemaker.event("untagged-1")
    crash = FailOnce(lambda _message: True)
    publish = SnsNotifier.publish

    def flaky(self: SnsNotifier, message: Any) -> str | None:
        if crash(message):
            raise AdapterError("Publish throttled")
        return publish(self, message)

    def throttled(*_: Any) -> None:
        raise AdapterError("UpdateItem throttled")

    monkeypatch.setattr(SnsNotifier, "publish", flaky)
    with monkeypatch.context() as patch:
        patch.setattr(DeliveryLedger, "release", throttled)
        with pytest.raises(AdapterError):
            acct.invoke(job_events, event, request_id=RETRIED)
    # When Lambda retries it (the same request id) within the hold
    clock.advance(seconds=30)
    # Then the retry meets its own claim and is answered as a duplicate, whoever holds the claim (a queued
    # record would have kept its queue's visibility instead, longer than the hold): Lambda counts it a
    # success and retries no more, so the owner is never told of the stop. A known gap (docs/resilience.md)
    answer = acct.invoke(job_events, event, request_id=RETRIED)
    assert set(answer) == {"duplicate"}
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    assert inbox_messages(acct, inbox) == []


def test_crash_in_the_notifier_after_the_stop_is_retried_to_one_record_and_one_message(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given SNS fails once, after the job was stopped and the stop recorded
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    crash = FailOnce(lambda _message: True)
    publish = SnsNotifier.publish

    def flaky(self: SnsNotifier, message: Any) -> str | None:
        if crash(message):
            raise RuntimeError("injected: the function died while notifying")
        return publish(self, message)

    monkeypatch.setattr(SnsNotifier, "publish", flaky)
    # When the invocation fails and Lambda retries it (the same request id)
    with pytest.raises(RuntimeError, match="injected"):
        acct.invoke(job_events, event, request_id=RETRIED)
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the job is stopped, the stop recorded once (by the attempt that acted) and the owner told once. The
    # retry finds the job stopping, and learns from the released claim that its delivery made the stop: the owner
    # is told the job was stopped, not that it had already ended
    assert acct.sagemaker.jobs["untagged-1"]["TrainingJobStatus"] == "Stopping"
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    (told,) = inbox_messages(acct, inbox)
    assert json.loads(told["Body"])["outcome"] == "stopped"


def test_crash_in_the_recorder_after_the_stop_is_retried_to_one_record(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the audit sink fails once, after StopTrainingJob succeeded
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    crash = FailOnce(lambda record: record.action == "stop")
    write = MemoryAuditSink.write

    def flaky(self: MemoryAuditSink, record: AuditRecord) -> None:
        if crash(record):
            raise RuntimeError("injected: the function died before recording")
        write(self, record)

    monkeypatch.setattr(MemoryAuditSink, "write", flaky)
    # When the invocation fails and is retried (the same request id)
    with pytest.raises(RuntimeError, match="injected"):
        acct.invoke(job_events, event, request_id=RETRIED)
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the stop happened once and is recorded once, as done: the retry finds the job stopping, and the
    # released claim says the stop was its delivery's own (a stop counted among those governance made)
    assert acct.sagemaker.stop_requests[0] == "untagged-1"
    assert acct.sagemaker.jobs["untagged-1"]["TrainingJobStatus"] == "Stopping"
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    (told,) = inbox_messages(acct, inbox)
    assert json.loads(told["Body"])["outcome"] == "stopped"


def test_a_compliance_stop_whose_answer_was_lost_is_retried_to_a_done_record_and_a_stopped_message(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given StopTrainingJob applied once but its answer lost (a read timeout past botocore's retries)
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    stop = SageMakerJobs.stop
    lost = FailOnce(lambda _name: True)

    def answer_lost(self: SageMakerJobs, name: str) -> StopOutcome:
        outcome = stop(self, name)
        if lost(name):
            raise StopUnanswered(f"StopTrainingJob {name} failed: Read timeout on endpoint URL")
        return outcome

    monkeypatch.setattr(SageMakerJobs, "stop", answer_lost)
    # When the invocation fails and is retried (the same request id)
    with pytest.raises(AdapterError, match="Read timeout"):
        acct.invoke(job_events, event, request_id=RETRIED)
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the retry, finding the job stopping, takes the stop for its delivery's own: recorded done, and the owner
    # told the job was stopped
    assert acct.sagemaker.jobs["untagged-1"]["TrainingJobStatus"] == "Stopping"
    assert [(r.action, r.code, r.outcome.value) for r in acct.audit.records] == [
        ("stop", "compliance.stop.violation", "done")
    ]
    (told,) = inbox_messages(acct, inbox)
    assert json.loads(told["Body"])["outcome"] == "stopped"


@pytest.mark.parametrize(
    "failure",
    [
        AdapterError("StopTrainingJob untagged-1 failed: ThrottlingException: Rate exceeded"),
        StopDenied("StopTrainingJob untagged-1 failed: AccessDeniedException: explicit deny"),
        StopUnanswered("StopTrainingJob untagged-1 failed: Read timeout on endpoint URL"),
    ],
    ids=["throttled-not-applied", "denied", "unanswered-not-applied"],
)
def test_a_compliance_stop_that_was_not_applied_is_not_recorded_nor_told_as_made_when_the_job_ends_on_its_own(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch, failure: AdapterError
) -> None:
    # Given a job that violates an enforced stop rule, and StopTrainingJob failing without stopping it: throttled
    # past botocore's retries, denied, or without an answer
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")

    def not_applied(self: SageMakerJobs, name: str) -> StopOutcome:
        raise failure

    monkeypatch.setattr(SageMakerJobs, "stop", not_applied)
    with pytest.raises(AdapterError):
        acct.invoke(job_events, event, request_id=RETRIED)
    # When the job fails on its own before the delivery's retry
    acct.sagemaker.transition("untagged-1", "Failed", "Failed")
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the stop is not recorded as made by governance, and its owner is not told it was stopped
    stops = [r.outcome.value for r in acct.audit.records if r.action == "stop"]
    assert "done" not in stops
    assert all(json.loads(m["Body"])["outcome"] != "stopped" for m in inbox_messages(acct, inbox))


@pytest.mark.parametrize(
    "failure",
    [
        AdapterError("StopTrainingJob idle-1 failed: ThrottlingException: Rate exceeded"),
        StopDenied("StopTrainingJob idle-1 failed: AccessDeniedException: explicit deny"),
        StopUnanswered("StopTrainingJob idle-1 failed: Read timeout on endpoint URL"),
    ],
    ids=["throttled-not-applied", "denied", "unanswered-not-applied"],
)
def test_a_guard_stop_that_was_not_applied_is_not_told_as_made_when_the_retry_no_longer_stops(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch, failure: AdapterError
) -> None:
    # Given an idle job whose alarm fires, and StopTrainingJob failing once without stopping it: throttled past
    # botocore's retries, denied, or without an answer
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    signals = JobSignals(clock).attach(acct.cloudwatch)
    signals.idle("idle-1")
    log_stream("idle-1")
    clock.advance(minutes=90)
    stops: list[str] = []

    def not_applied(self: SageMakerJobs, name: str) -> StopOutcome:
        stops.append(name)
        raise failure

    monkeypatch.setattr(SageMakerJobs, "stop", not_applied)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    event = acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)])
    with pytest.raises(AdapterError):
        acct.invoke(stopper, event, request_id=RETRIED)
    # When the job is busy again before the delivery's retry (its GPUs and logs active): the judge no longer stops
    signals.set("GPUUtilization", "idle-1/algo-1", 95.0)
    signals.set("CPUUtilization", "idle-1/algo-1", 60.0)
    log_stream("idle-1", lines_at=tuple(clock() - timedelta(minutes=m) for m in range(39, 0, -1)))
    acct.invoke(stopper, event, request_id=RETRIED)
    # Then the job runs on (one stop tried, the first attempt's) and its owner is never told it was stopped
    assert stops == ["idle-1"]
    assert acct.sagemaker.jobs["idle-1"]["TrainingJobStatus"] == "InProgress"
    assert all(json.loads(m["Body"])["outcome"] != "stopped" for m in inbox_messages(acct, inbox))


def applied_then_throttled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """StopTrainingJob's first call is applied and then raises what the adapter raises when botocore's first
    attempt was applied but answered 5xx and its retries were throttled (a plain AdapterError: the last attempt's
    answer; tests/adapters/test_sagemaker_adapter.py); later calls behave. Returns the names stopped."""
    stop = SageMakerJobs.stop
    calls: list[str] = []

    def first_applied_then_throttled(self: SageMakerJobs, name: str) -> StopOutcome:
        calls.append(name)
        outcome = stop(self, name)
        if len(calls) == 1:
            raise AdapterError(f"StopTrainingJob {name} failed: ThrottlingException: Rate exceeded")
        return outcome

    monkeypatch.setattr(SageMakerJobs, "stop", first_applied_then_throttled)
    return calls


def test_a_guard_stop_applied_whose_retries_were_throttled_is_told_once_by_the_delivery_retry(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an idle job whose alarm fires, and StopTrainingJob applied by its first HTTP attempt (answered 5xx)
    # while botocore's retries of it are throttled, so that the call fails with a throttling error
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    JobSignals(clock).attach(acct.cloudwatch).idle("idle-1")
    log_stream("idle-1")
    clock.advance(minutes=90)
    applied_then_throttled(monkeypatch)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    event = acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)])
    with pytest.raises(AdapterError, match="ThrottlingException"):
        acct.invoke(stopper, event, request_id=RETRIED)
    # When the delivery is retried and finds the job stopping
    acct.invoke(stopper, event, request_id=RETRIED)
    # Then the retry takes the stop for its delivery's own: the owner is told once that the job was stopped
    assert acct.sagemaker.jobs["idle-1"]["TrainingJobStatus"] in {"Stopping", "Stopped"}
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["stopped"]


def test_a_compliance_stop_applied_whose_retries_were_throttled_is_recorded_done_and_told_stopped_on_retry(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that violates an enforced stop rule, and StopTrainingJob applied by its first HTTP attempt
    # (answered 5xx) while botocore's retries of it are throttled
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    applied_then_throttled(monkeypatch)
    with pytest.raises(AdapterError, match="ThrottlingException"):
        acct.invoke(job_events, event, request_id=RETRIED)
    # When the delivery is retried and finds the job stopping
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the stop is recorded done, as governance's, and the owner is told once that it was stopped (not that
    # it had already ended)
    assert acct.sagemaker.jobs["untagged-1"]["TrainingJobStatus"] == "Stopping"
    assert [(r.action, r.code, r.outcome.value) for r in acct.audit.records] == [
        ("stop", "compliance.stop.violation", "done")
    ]
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["stopped"]


def applied_and_retried_by_botocore(account: LocalAccount, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """StopTrainingJob as botocore sends it when its first attempt is applied and its answer lost (a 5xx, a read
    timeout): the call's first HTTP attempt is applied, botocore sends it again, and the call ends in the retry's
    answer, which botocore's endpoint marks with the attempts before it (``RetryAttempts`` 1); later calls have
    one attempt. Returns the names stopped, one per call."""
    client = account.root.client("sagemaker")
    send = client.stop_training_job
    calls: list[str] = []

    def retried(**params: Any) -> Any:
        calls.append(params["TrainingJobName"])
        if len(calls) > 1:
            return send(**params)
        send(**params)  # applied, its answer lost
        try:
            answer = send(**params)
        except ClientError as exc:
            exc.response["ResponseMetadata"]["RetryAttempts"] = 1
            raise
        answer["ResponseMetadata"]["RetryAttempts"] = 1
        return answer

    monkeypatch.setattr(client, "stop_training_job", retried)
    return calls


def test_a_compliance_stop_applied_whose_retry_is_answered_not_stoppable_is_recorded_done_and_told_stopped(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that violates an enforced stop rule, and StopTrainingJob applied by its first HTTP attempt while
    # botocore's retry of it is answered "not stoppable" (the job is Stopping: that attempt's doing)
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    calls = applied_and_retried_by_botocore(acct, monkeypatch)
    # When the job's event is delivered
    acct.invoke(job_events, acct.sagemaker.event("untagged-1"))
    # Then the stop is governance's: recorded done, and the owner told once that the job was stopped (not that it
    # had already ended)
    assert calls == ["untagged-1"]
    assert acct.sagemaker.jobs["untagged-1"]["TrainingJobStatus"] == "Stopping"
    assert [(r.action, r.code, r.outcome.value) for r in acct.audit.records] == [
        ("stop", "compliance.stop.violation", "done")
    ]
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["stopped"]


def test_a_guard_stop_applied_whose_retry_is_answered_not_stoppable_is_told_to_its_owner(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an idle job whose alarm fires, and StopTrainingJob applied by its first HTTP attempt while botocore's
    # retry of it is answered "not stoppable"
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    JobSignals(clock).attach(acct.cloudwatch).idle("idle-1")
    log_stream("idle-1")
    clock.advance(minutes=90)
    calls = applied_and_retried_by_botocore(acct, monkeypatch)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    # When the alarm's notification is delivered
    acct.invoke(stopper, acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)]))
    # Then the stop is the guard's: recorded done, and its owner told once that the job was stopped
    assert calls == ["idle-1"]
    assert acct.sagemaker.jobs["idle-1"]["TrainingJobStatus"] in {"Stopping", "Stopped"}
    assert [(r.code, r.outcome.value) for r in records(acct, "stop")] == [("idle.stop.idle", "done")]
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["stopped"]


def test_a_compliance_stop_refused_as_the_owner_stopped_first_is_not_taken_as_made_when_the_status_is_unread(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that violates an enforced stop rule, read InProgress, and stopped by its owner just before
    # compliance's StopTrainingJob, whose only attempt is answered "not stoppable"; the adapter's read of the
    # job's status then throttled
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    event = acct.sagemaker.event("untagged-1")
    client = acct.root.client("sagemaker")
    send = client.stop_training_job
    owner_first = FailOnce(lambda: True)

    def stop_after_the_owner(**params: Any) -> Any:
        if owner_first():
            acct.sagemaker.transition("untagged-1", "Stopping", "Stopping")
            acct.sagemaker.fail_next["DescribeTrainingJob"] = SageMakerError(
                "ThrottlingException", "Rate exceeded"
            )
        try:
            return send(**params)
        except ClientError as exc:
            exc.response["ResponseMetadata"]["RetryAttempts"] = 0  # the first attempt's answer
            raise

    monkeypatch.setattr(client, "stop_training_job", stop_after_the_owner)
    with pytest.raises(StopRefused):
        acct.invoke(job_events, event, request_id=RETRIED)
    # When the delivery is retried and finds the job stopping
    acct.invoke(job_events, event, request_id=RETRIED)
    # Then the owner's stop is not taken for governance's: recorded already-done, and told as an earlier end
    assert [(r.action, r.code, r.outcome.value) for r in acct.audit.records] == [
        ("stop", "compliance.stop.violation", "already-done")
    ]
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["already-ended"]


def throttled_while_its_owner_stops(account: LocalAccount) -> list[int]:
    """The next StopTrainingJob as botocore's send loop makes it (the double answers every other call before that
    loop, as always): its first HTTP attempt throttled, so not applied, and the job stopped by its owner while
    botocore waits to retry it (``stopped_during_the_backoff``); the double answers the retry on the wire as
    SageMaker would (the job is Stopping: "not stoppable"). Returns the HTTP status of each attempt."""
    fake = account.sagemaker
    events = account.root.client("sagemaker").meta.events
    statuses: list[int] = []
    stop_operation: list[Any] = []

    def before_the_send_loop(model: Any, **kwargs: Any) -> Any:
        if model.name == "StopTrainingJob" and not statuses:
            stop_operation.append(model)
            return None  # sent through botocore's send loop, answered below
        return fake._answer(model=model, **kwargs)

    def send(request: Any, **_: Any) -> AWSResponse:
        if statuses:
            http, parsed = fake._answer(model=stop_operation[0], params={})
            error = parsed.get("Error")
            status, body = (
                http.status_code,
                {} if error is None else {"__type": error["Code"], "message": error["Message"]},
            )
        else:
            status, body = 400, {"__type": "ThrottlingException", "message": "Rate exceeded"}
        statuses.append(status)
        url, request.url = request.url, ANSWERED_URL  # moto's stubber, asked after us, leaves it alone
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.1"
        return AWSResponse(url, status, headers, MockRawResponse(json.dumps(body).encode()))

    events.unregister("before-call.sagemaker.*", fake._answer)
    events.register("before-call.sagemaker.*", before_the_send_loop)
    events.register_first("before-send.sagemaker.StopTrainingJob", send)
    return statuses


def stopped_during_the_backoff(account: LocalAccount, name: str) -> Any:
    """botocore's retry backoff, without sleeping, during which job ``name``'s owner stops it."""

    def owner_stops(_seconds: float) -> None:
        if account.sagemaker.jobs[name]["TrainingJobStatus"] == "InProgress":
            account.sagemaker.transition(name, "Stopping", "Stopping")

    return virtual_backoff(owner_stops)


def test_a_compliance_stop_throttled_while_the_owner_stops_the_job_is_not_taken_as_governances(
    acct: LocalAccount,
) -> None:
    # Given a job that violates an enforced stop rule, and compliance's StopTrainingJob throttled on its first
    # attempt (not applied) while the owner stops the job before botocore's retry, which is answered "not
    # stoppable"
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
    statuses = throttled_while_its_owner_stops(acct)
    # When the job's event is delivered
    with stopped_during_the_backoff(acct, "untagged-1"):
        acct.invoke(job_events, acct.sagemaker.event("untagged-1"))
    # Then the owner's stop is not taken for governance's: recorded already-done, and told as an earlier end
    assert statuses == [400, 400]
    assert [(r.action, r.code, r.outcome.value) for r in acct.audit.records] == [
        ("stop", "compliance.stop.violation", "already-done")
    ]
    outcomes = [json.loads(m["Body"])["outcome"] for m in inbox_messages(acct, inbox)]
    assert outcomes == ["already-ended"]


def test_a_guard_stop_throttled_while_the_owner_stops_the_job_tells_nobody_it_was_stopped(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an idle job whose alarm fires, and the guard's StopTrainingJob throttled on its first attempt (not
    # applied) while the owner stops the job before botocore's retry, which is answered "not stoppable"
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    JobSignals(clock).attach(acct.cloudwatch).idle("idle-1")
    log_stream("idle-1")
    clock.advance(minutes=90)
    statuses = throttled_while_its_owner_stops(acct)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    # When the alarm's notification is delivered
    with stopped_during_the_backoff(acct, "idle-1"):
        acct.invoke(stopper, acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)]))
    # Then the owner's stop is not taken for the guard's: recorded already-done, and nobody told it was stopped
    assert statuses == [400, 400]
    assert [(r.code, r.outcome.value) for r in records(acct, "stop")] == [("idle.stop.idle", "already-done")]
    assert inbox_messages(acct, inbox) == []


def test_idle_stopper_crash_after_the_stop_is_retried_to_one_stop_and_one_record(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an idle job past its grace period whose alarm fires, and SNS failing once
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(create_request("idle-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("idle-1"))
    JobSignals(clock).attach(acct.cloudwatch).idle("idle-1")  # what the stall judge reads: a stalled job
    log_stream("idle-1")
    clock.advance(minutes=90)
    crash = FailOnce(lambda message: message.kind == "idle-stop")
    publish = SnsNotifier.publish

    def flaky(self: SnsNotifier, message: Any) -> str | None:
        if crash(message):
            raise RuntimeError("injected: the function died while notifying")
        return publish(self, message)

    monkeypatch.setattr(SnsNotifier, "publish", flaky)
    alarm = "sagemaker-governance-idle-idle-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    event = acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)])
    # When the stopper fails, Lambda retries it (the same request id), and SNS delivers the notification once
    # more (another invocation)
    with pytest.raises(RuntimeError, match="injected"):
        acct.invoke(stopper, event, request_id=RETRIED)
    acct.invoke(stopper, event, request_id=RETRIED)
    acct.invoke(stopper, event)
    # Then: one stop and one record of it (by the attempt that acted). The retry finds the job already
    # stopping, and learns from the released claim that its delivery made the stop (the stop's effect): it
    # sends the message lost in the crash, and the second SNS copy tells nobody again (docs/resilience.md)
    assert acct.sagemaker.stop_requests == ["idle-1"]
    stops = [r for r in acct.audit.records if r.trigger == "idle-alarm"]
    assert [(r.action, r.outcome.value) for r in stops] == [("stop", "done")]
    (told,) = inbox_messages(acct, inbox)
    assert json.loads(told["Body"])["outcome"] == "stopped"


def test_without_a_table_every_delivery_is_processed(clock: MovableClock) -> None:
    # Given no idempotency table configured (local tools, the old behaviour)
    with local_account(clock, ENFORCE) as acct:
        acct.sagemaker.launch(create_request("untagged-1", tags=UNTAGGED))
        event = acct.sagemaker.event("untagged-1")
        acct.invoke(job_events, event)
        acct.invoke(job_events, event)
        # Then both deliveries were processed; the stop itself is still idempotent
        assert [r.outcome.value for r in acct.audit.records] == ["done", "already-done"]
        assert acct.root.idempotency is None
