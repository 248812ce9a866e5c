"""A record going back to its queue is received again in a minute, then five, then the queue's timeout
(handlers/_batch.py, domain/redelivery.py), not after the queue's 30-minute VisibilityTimeout.

The records are real moto SQS messages (sent, received with their receipt handles and receive counts) and
moto's SQS runs on the test's clock, the one the handlers and the delivery ledger see: a record is visible
again exactly when SQS would make it so. No sleep."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.business_metrics import BusinessMetric
from sagemaker_governance.domain.errors import AdapterError, DescriptionBehind
from sagemaker_governance.domain.redelivery import FIRST_RETRY_SECONDS, SECOND_RETRY_SECONDS, held_visibility
from sagemaker_governance.handlers._batch import MIN_REMAINING_MS, VISIBILITY_MIN_REMAINING_MS
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.service.idempotency import NOTICE_HOLD_SECONDS
from sagemaker_governance.service.job_events import JobEventsService
from smgov.simulation.harness import LocalAccount, LocalContext, local_account
from tests.builders import create_request
from tests.handlers.conftest import ENFORCE, MovableClock

TABLE = "smgov-idempotency"
QUEUE = "gov-JobEventsQueue"
QUEUE_TIMEOUT = 1800  # template.yaml: both queues' VisibilityTimeout
RESUMING = {**ENFORCE, "RESUME_MIN_TRAINING_HOURS": "24", "RESUME_MAX_ATTEMPTS": "2"}
TRANSIENT = "InternalServerError: We encountered an internal error. Please try again."
# The visibility a record whose attempt left a claim held is given: past a clone notice's hold, the longest
HELD = held_visibility(NOTICE_HOLD_SECONDS)


@dataclass
class Queue:
    url: str
    arn: str
    calls: list[dict[str, Any]] = field(default_factory=list)  # the handlers' ChangeMessageVisibilityBatch


@pytest.fixture
def env() -> dict[str, str]:
    """The functions' environment (a test parametrizes ``env`` for another)."""
    return ENFORCE


@pytest.fixture
def acct(clock: MovableClock, env: dict[str, str]) -> Iterator[LocalAccount]:
    millis = lambda: clock().timestamp() * 1000  # noqa: E731
    with (
        mock.patch("moto.sqs.models.unix_time_millis", millis),
        mock.patch("moto.sqs.models.unix_time", lambda: clock().timestamp()),
        local_account(clock, {**env, "IDEMPOTENCY_TABLE_NAME": TABLE}) as account,
    ):
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield account


@pytest.fixture
def queue(acct: LocalAccount) -> Queue:
    url = acct.sqs.create_queue(QueueName=QUEUE, Attributes={"VisibilityTimeout": str(QUEUE_TIMEOUT)})["QueueUrl"]
    arn = acct.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    made = Queue(url, arn)

    def seen(params: dict[str, Any], **_: Any) -> None:
        made.calls.append(dict(params))

    acct.root.session.events.register("provide-client-params.sqs.ChangeMessageVisibilityBatch", seen)
    return made


def receive(acct: LocalAccount, queue: Queue) -> dict[str, Any] | None:
    """What the event source mapping would invoke the function with now (None: nothing visible)."""
    messages = acct.sqs.receive_message(
        QueueUrl=queue.url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        return None
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue.arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def delete(acct: LocalAccount, queue: Queue, batch: dict[str, Any], answer: dict[str, Any]) -> None:
    """The event source mapping deletes the records the answer does not name."""
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    for record in batch["Records"]:
        if record["messageId"] not in failed:
            acct.sqs.delete_message(QueueUrl=queue.url, ReceiptHandle=record["receiptHandle"])


def receive_count(batch: dict[str, Any]) -> int:
    return int(batch["Records"][0]["attributes"]["ApproximateReceiveCount"])


def ahead_of_the_job(acct: LocalAccount, name: str) -> str:
    """A job's Training event, transitions left out, while DescribeTrainingJob still says Starting."""
    acct.sagemaker.launch(create_request(name))
    event = acct.sagemaker.event(name)
    event["detail"]["SecondaryStatus"] = "Training"
    event["detail"].pop("SecondaryStatusTransitions", None)
    return json.dumps(event)


def test_a_record_ahead_of_the_job_read_again_is_governed_a_minute_later_once(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a job's Training event that DescribeTrainingJob lags, received from the queue
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=ahead_of_the_job(acct, "late-1"))
    first = receive(acct, queue)
    assert first is not None and receive_count(first) == 1
    # When its only record fails (the invocation fails: the whole batch returns)
    with pytest.raises(DescriptionBehind):
        acct.invoke(job_events, first)
    assert acct.audit.records == [] and acct.cloudwatch.calls["PutMetricAlarm"] == 0
    # Then it is not received again before a minute has passed, but is then (not after 30 minutes)
    clock.advance(seconds=FIRST_RETRY_SECONDS - 1)
    assert receive(acct, queue) is None
    acct.sagemaker.transition("late-1", "InProgress", "Training")
    clock.advance(seconds=2)
    second = receive(acct, queue)
    assert second is not None and receive_count(second) == 2
    # and its retry claims the delivery again (the failed attempt released it) and governs the job: its
    # idle alarm is created
    answer = acct.invoke(job_events, second)
    assert answer == {"batchItemFailures": []}
    delete(acct, queue, second, answer)
    assert [r.outcome.value for r in acct.audit.records if r.action == "create-alarm"] == ["done"]
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 1
    # and a copy of the same state change later is a duplicate: the effects happened once
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=second["Records"][0]["body"])
    clock.advance(seconds=30)
    copy = receive(acct, queue)
    assert copy is not None
    assert acct.invoke(job_events, copy) == {"batchItemFailures": []}
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 1
    assert len([r for r in acct.audit.records if r.action == "create-alarm"]) == 1
    assert len(queue.calls) == 1  # only the failed receive changed a visibility


def test_the_ladder_is_a_minute_then_five_then_the_queues_own_timeout(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a record that fails every receive
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody='{"not": "an event"}')
    expected = {1: FIRST_RETRY_SECONDS, 2: SECOND_RETRY_SECONDS, 3: QUEUE_TIMEOUT}
    for count, seconds in expected.items():
        batch = receive(acct, queue)
        assert batch is not None and receive_count(batch) == count
        # When its receive fails
        with pytest.raises(ValueError):  # pydantic's ValidationError: the only record failed
            acct.invoke(job_events, batch)
        # Then it is received again after the ladder's delay, not before
        clock.advance(seconds=seconds - 1)
        assert receive(acct, queue) is None, count
        clock.advance(seconds=2)
    # and the third receive made no call: the queue's own timeout spaced it
    assert [[e["VisibilityTimeout"] for e in call["Entries"]] for call in queue.calls] == [
        [FIRST_RETRY_SECONDS],
        [SECOND_RETRY_SECONDS],
    ]
    assert all(call["QueueUrl"] == queue.url for call in queue.calls)


def test_only_the_failed_record_of_a_batch_is_made_visible_sooner(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a batch of a malformed record and a compliant job's event
    acct.sagemaker.launch(create_request("job-b"), secondary="Training")
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody='{"not": "an event"}')
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("job-b")))
    batch = receive(acct, queue)
    assert batch is not None and len(batch["Records"]) == 2
    bad = batch["Records"][0]["messageId"]
    # When the function answers, then only the malformed record is named, and only its visibility changed
    answer = acct.invoke(job_events, batch)
    assert answer == {"batchItemFailures": [{"itemIdentifier": bad}]}
    delete(acct, queue, batch, answer)
    assert [[e["ReceiptHandle"] for e in c["Entries"]] for c in queue.calls] == [
        [batch["Records"][0]["receiptHandle"]]
    ]
    clock.advance(seconds=FIRST_RETRY_SECONDS + 1)
    again = receive(acct, queue)
    assert again is not None and [r["messageId"] for r in again["Records"]] == [bad]


def test_a_healthy_batch_builds_no_sqs_client_and_makes_no_call(acct: LocalAccount, queue: Queue) -> None:
    # Given a compliant job's event, received from the queue
    acct.sagemaker.launch(create_request("job-a"), secondary="Training")
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("job-a")))
    batch = receive(acct, queue)
    assert batch is not None
    # When it is governed
    assert acct.invoke(job_events, batch) == {"batchItemFailures": []}
    # Then no SQS call was made and no SQS client built for it
    assert queue.calls == []
    assert not [key for key in acct.root._clients if key.startswith("sqs")]


def test_a_failed_visibility_change_is_logged_and_the_answer_stands(
    acct: LocalAccount, queue: Queue, clock: MovableClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Given SQS throttling the visibility change
    stubber = Stubber(acct.root.queue_visibility._client_factory())
    stubber.add_client_error("change_message_visibility_batch", "RequestThrottled", http_status_code=403)
    stubber.activate()
    acct.sagemaker.launch(create_request("job-b"), secondary="Training")
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody='{"not": "an event"}')
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("job-b")))
    batch = receive(acct, queue)
    assert batch is not None
    # When the function answers
    answer = acct.invoke(job_events, batch)
    # Then the answer is the same (the failed record named), the failure logged
    assert answer == {"batchItemFailures": [{"itemIdentifier": batch["Records"][0]["messageId"]}]}
    stubber.assert_no_pending_responses()
    assert "visibility not changed" in [r.getMessage() for r in caplog.records]
    # and the record comes back after the queue's own timeout: nothing is lost
    delete(acct, queue, batch, answer)
    clock.advance(seconds=QUEUE_TIMEOUT - 1)
    assert receive(acct, queue) is None
    clock.advance(seconds=2)
    assert receive(acct, queue) is not None


@dataclass
class TimedContext(LocalContext):
    left_ms: list[int] = field(default_factory=list)  # one value per call, the last one repeated

    def get_remaining_time_in_millis(self) -> int:
        return self.left_ms.pop(0) if len(self.left_ms) > 1 else self.left_ms[0]


@pytest.mark.parametrize(
    ("left_at_the_end", "changed"), [(VISIBILITY_MIN_REMAINING_MS, True), (VISIBILITY_MIN_REMAINING_MS - 1, False)]
)
def test_records_returned_unprocessed_are_made_visible_sooner_when_time_allows(
    acct: LocalAccount, queue: Queue, clock: MovableClock, left_at_the_end: int, changed: bool
) -> None:
    # Given two compliant jobs' events in one batch, and time for the first record only
    for name in ("job-a", "job-b"):
        acct.sagemaker.launch(create_request(name), secondary="Training")
        acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event(name)))
    batch = receive(acct, queue)
    assert batch is not None and len(batch["Records"]) == 2
    context = TimedContext(function_name="local", left_ms=[120_000, MIN_REMAINING_MS - 1, left_at_the_end])
    # When the function answers with the second record unprocessed
    answer = job_events(batch, context)
    second = batch["Records"][1]
    assert answer == {"batchItemFailures": [{"itemIdentifier": second["messageId"]}]}
    delete(acct, queue, batch, answer)
    # Then it is made visible in a minute, unless too little time was left for the call
    clock.advance(seconds=FIRST_RETRY_SECONDS + 1)
    again = receive(acct, queue)
    assert (again is not None) is changed
    assert len(queue.calls) == int(changed)


def test_a_retry_that_comes_after_the_jobs_end_event_creates_nothing(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a Training event that failed its first receive (DescribeTrainingJob lagged it)
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=ahead_of_the_job(acct, "quick-1"))
    first = receive(acct, queue)
    assert first is not None
    with pytest.raises(DescriptionBehind):
        acct.invoke(job_events, first)
    # and, within the minute, the job trained, completed, and its Completed event was governed
    clock.advance(seconds=20)
    acct.sagemaker.transition("quick-1", "InProgress", "Training")
    clock.advance(seconds=20)
    acct.sagemaker.transition("quick-1", "Completed", "Completed")
    acct.invoke(job_events, acct.sagemaker.event("quick-1"))
    # When the Training event's retry arrives a minute after its first receive, after the end
    clock.advance(seconds=FIRST_RETRY_SECONDS - 40 + 1)
    retry = receive(acct, queue)
    assert retry is not None and receive_count(retry) == 2
    assert acct.invoke(job_events, retry) == {"batchItemFailures": []}
    # Then it creates no alarm for the ended job (out of order, as an EventBridge retry always could be)
    assert acct.cloudwatch.alarms == {}
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 0


class FullContext(LocalContext):
    """A 300 s function's context at its first record: the claim it makes is held for about 295 s."""

    def get_remaining_time_in_millis(self) -> int:
        return 295_000


def visibilities(queue: Queue) -> list[list[tuple[str, int]]]:
    """Each ``ChangeMessageVisibilityBatch`` call's (receipt handle, visibility) pairs."""
    return [[(e["ReceiptHandle"], e["VisibilityTimeout"]) for e in c["Entries"]] for c in queue.calls]


def held_back(acct: LocalAccount, queue: Queue, clock: MovableClock, first: dict[str, Any]) -> None:
    """``first``'s one record was given the held visibility, not the ladder's minute: it is not received a
    minute later, nor until a second before the held visibility runs out."""
    assert visibilities(queue) == [[(first["Records"][0]["receiptHandle"], HELD)]]
    clock.advance(seconds=FIRST_RETRY_SECONDS + 1)
    assert receive(acct, queue) is None
    clock.advance(seconds=HELD - FIRST_RETRY_SECONDS - 2)
    assert receive(acct, queue) is None


def completes_when_back(acct: LocalAccount, queue: Queue, clock: MovableClock) -> None:
    """Two seconds on, the record is received again (its second receive) and its retry completes (deleted)."""
    clock.advance(seconds=2)
    second = receive(acct, queue)
    assert second is not None and receive_count(second) == 2
    answer = job_events(dict(second), FullContext())
    assert answer == {"batchItemFailures": []}
    delete(acct, queue, second, answer)


def test_a_record_whose_failed_attempt_could_not_release_comes_back_after_the_hold_and_is_governed_once(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a job's Training event whose first receive fails (a throttled call) and whose claim could not be
    # released (the ledger throttled too): the claim stays held for the invocation's time, about 295 s
    acct.sagemaker.launch(create_request("held-1"))
    acct.sagemaker.transition("held-1", "InProgress", "Training")
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("held-1")))
    first = receive(acct, queue)
    assert first is not None
    with (
        mock.patch.object(JobEventsService, "handle", side_effect=AdapterError("PutMetricAlarm throttled")),
        mock.patch.object(DeliveryLedger, "release", side_effect=AdapterError("UpdateItem throttled")),
        pytest.raises(AdapterError),
    ):
        job_events(dict(first), FullContext())
    # Then its visibility is the held one, not the ladder's minute: no retry a minute later meets its own claim
    # still held (a duplicate of itself, deleted, the event lost); it is not received before the held visibility
    held_back(acct, queue, clock, first)
    # When it comes back, long after the hold, its retry takes the claim over and governs the job once
    completes_when_back(acct, queue, clock)
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 1
    assert [r.outcome.value for r in acct.audit.records if r.action == "create-alarm"] == ["done"]
    # and nothing is left in the queue: processed once, nothing lost
    clock.advance(seconds=QUEUE_TIMEOUT * 3)
    assert receive(acct, queue) is None


def test_a_record_whose_claim_was_applied_unanswered_comes_back_after_the_hold_and_is_governed_once(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given an untagged job's Starting event (enforce: the job must be stopped), received from the queue
    acct.sagemaker.launch(create_request("unanswered-1", tags={"owner": "bob"}))
    inbox = acct.notification_inbox()
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("unanswered-1")))
    first = receive(acct, queue)
    assert first is not None
    # When DynamoDB applies its delivery's claim but the answer never comes back (a read timeout, then
    # botocore's retries fail to connect: the ledger raises), so the claim is held for about 295 s
    claim = DeliveryLedger.claim

    def applied_unanswered(self: DeliveryLedger, key: str, *args: Any) -> Any:
        claim(self, key, *args)
        raise AdapterError(f"DynamoDB UpdateItem (claim {key}) failed: Read timeout")

    with mock.patch.object(DeliveryLedger, "claim", applied_unanswered), pytest.raises(AdapterError):
        job_events(dict(first), FullContext())
    # Then its visibility is the held one, not the ladder's minute: a retry a minute later would meet that
    # claim, be answered as a duplicate of itself and deleted (the job never stopped); it is not received
    # before the held visibility
    held_back(acct, queue, clock, first)
    # When it comes back, long after the hold, its retry takes the claim over and completes
    completes_when_back(acct, queue, clock)
    # Then the job is stopped, recorded and its owner told, once
    assert acct.sagemaker.stop_requests == ["unanswered-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    assert len(acct.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])) == 1
    clock.advance(seconds=QUEUE_TIMEOUT * 3)
    assert receive(acct, queue) is None


def failed_after_a_day(acct: LocalAccount, clock: MovableClock, queue: Queue, name: str) -> str:
    """A long job with checkpoints that failed transiently after 26 hours (auto-resume clones it): its
    Failed event queued; the owners' inbox."""
    request = create_request(name)
    request["CheckpointConfig"] = {"S3Uri": f"s3://bucket/checkpoints/{name}/"}
    acct.sagemaker.launch(request)
    inbox = acct.notification_inbox()
    clock.advance(minutes=5)
    acct.sagemaker.transition(name, "InProgress", "Training")
    clock.advance(hours=26)
    acct.sagemaker.transition(name, "Failed", "Failed", failure_reason=TRANSIENT)
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event(name)))
    return inbox


def fail_telling_and_leave_the_notice_held(acct: LocalAccount, batch: dict[str, Any]) -> None:
    """The function on ``batch``: the clone is made, SNS throttles the owner's message, and the clone notice's
    claim (resume:<clone>, held 900 s) cannot be released, while the delivery's own release succeeds."""

    def throttled(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")

    release = DeliveryLedger.release

    def notice_unreleased(self: DeliveryLedger, key: str, *args: Any) -> None:
        if key.startswith("resume:"):
            raise AdapterError(f"DynamoDB UpdateItem (release {key}) failed: throttled")
        release(self, key, *args)

    sns = acct.root.client("sns")
    sns.meta.events.register("before-call.sns.Publish", throttled)
    try:
        with mock.patch.object(DeliveryLedger, "release", notice_unreleased), pytest.raises(AdapterError):
            job_events(dict(batch), FullContext())
    finally:
        sns.meta.events.unregister("before-call.sns.Publish", throttled)


def told_once(acct: LocalAccount, inbox: str, clone: str) -> None:
    """One clone, its owner told once and the clone counted once."""
    assert [r["TrainingJobName"] for r in acct.sagemaker.created] == [clone]
    told = acct.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    assert len(told) == 1
    assert len(acct.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1


@pytest.mark.parametrize("env", [RESUMING])
def test_a_record_whose_clone_notice_could_not_be_released_comes_back_after_the_hold_and_tells_once(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a long job's Failed event (auto-resume clones it), received from the queue
    inbox = failed_after_a_day(acct, clock, queue, "notice-1")
    first = receive(acct, queue)
    assert first is not None
    # When its clone is made, SNS throttles the owner's message, and the clone notice's claim cannot be released
    fail_telling_and_leave_the_notice_held(acct, first)
    assert [r["TrainingJobName"] for r in acct.sagemaker.created] == ["notice-1-r1"]
    # Then its visibility is the held one, not the ladder's minute: a retry within the notice's hold would find
    # the owner "told already" and complete (never told, the clone never counted)
    held_back(acct, queue, clock, first)
    # When it comes back, past the notice's hold, and its retry completes
    completes_when_back(acct, queue, clock)
    # Then that retry met the clone ("already exists"), told the owner and counted the clone, once
    told_once(acct, inbox, "notice-1-r1")
    clock.advance(seconds=QUEUE_TIMEOUT * 3)
    assert receive(acct, queue) is None


@pytest.mark.parametrize("env", [RESUMING])
def test_a_clone_notice_held_by_an_invocation_that_started_late_is_over_before_its_record_comes_back(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a long job's Failed event, received by the event source mapping (the queue's 1,800 s visibility
    # counts from this receive), and the function invoked 1,000 s later (the mapping retried an invocation
    # Lambda throttled while the batch stayed in flight)
    inbox = failed_after_a_day(acct, clock, queue, "notice-2")
    first = receive(acct, queue)
    assert first is not None
    late = 1000
    clock.advance(seconds=late)
    # When its clone is made, SNS throttles the owner's message, and the clone notice's claim, held 900 s from
    # now, cannot be released
    fail_telling_and_leave_the_notice_held(acct, first)
    # Then it is not received when the queue's timeout from the receive runs out (the notice's claim, 801 s
    # old, still held: its retry would find the owner "told already")
    clock.advance(seconds=QUEUE_TIMEOUT - late + 1)
    assert receive(acct, queue) is None
    # since it was given the held visibility, counted from the end of the invocation
    assert visibilities(queue) == [[(first["Records"][0]["receiptHandle"], HELD)]]
    clock.advance(seconds=HELD - (QUEUE_TIMEOUT - late + 1) - 1)
    assert receive(acct, queue) is None
    # When it comes back, past the notice's hold, and its retry completes
    completes_when_back(acct, queue, clock)
    # Then that retry told the owner of the clone and counted it, once; nothing is left in the queue
    told_once(acct, inbox, "notice-2-r1")
    clock.advance(seconds=QUEUE_TIMEOUT * 3)
    assert receive(acct, queue) is None


def test_of_two_failed_records_the_released_one_gets_the_ladder_and_the_unreleased_one_the_held_visibility(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given a batch of two jobs' Training events that both fail (a throttled call), the first record's claim
    # not released (the ledger throttled for it), the second's released
    for name in ("held-a", "held-b"):
        acct.sagemaker.launch(create_request(name))
        acct.sagemaker.transition(name, "InProgress", "Training")
        acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event(name)))
    batch = receive(acct, queue)
    assert batch is not None and len(batch["Records"]) == 2
    unreleased, released = batch["Records"]
    release = DeliveryLedger.release

    def throttled_for_the_first(self: DeliveryLedger, key: str, owner: str, *args: Any) -> None:
        if owner == unreleased["messageId"]:
            raise AdapterError("UpdateItem throttled")
        release(self, key, owner, *args)

    def throttled(*_: Any) -> None:  # each delivery's own error
        raise AdapterError("PutMetricAlarm throttled")

    with (
        mock.patch.object(JobEventsService, "handle", side_effect=throttled),
        mock.patch.object(DeliveryLedger, "release", throttled_for_the_first),
        pytest.raises(AdapterError),
    ):
        job_events(dict(batch), FullContext())
    # Then both visibilities are changed in one call: the released record's to the ladder's minute, the
    # unreleased one's to the held visibility
    assert visibilities(queue) == [
        [(released["receiptHandle"], FIRST_RETRY_SECONDS), (unreleased["receiptHandle"], HELD)]
    ]
    # and it comes back a minute later, the unreleased one after the held visibility; each governed once
    clock.advance(seconds=FIRST_RETRY_SECONDS + 1)
    again = receive(acct, queue)
    assert again is not None and [r["messageId"] for r in again["Records"]] == [released["messageId"]]
    delete(acct, queue, again, job_events(dict(again), FullContext()))
    clock.advance(seconds=HELD - FIRST_RETRY_SECONDS - 2)
    assert receive(acct, queue) is None
    clock.advance(seconds=2)
    late = receive(acct, queue)
    assert late is not None and [r["messageId"] for r in late["Records"]] == [unreleased["messageId"]]
    assert job_events(dict(late), FullContext()) == {"batchItemFailures": []}
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 2
    assert sorted(r.job_name for r in acct.audit.records if r.action == "create-alarm") == ["held-a", "held-b"]


def test_a_second_copy_of_a_completed_record_within_its_hold_is_a_duplicate(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given an untagged job's event, received and governed (stopped, its owner told) as a batch of one: its
    # claim is never marked completed and stays held by its message for the invocation's time
    acct.sagemaker.launch(create_request("untagged-1", tags={"owner": "bob"}))
    inbox = acct.notification_inbox()
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("untagged-1")))
    batch = receive(acct, queue)
    assert batch is not None
    assert job_events(dict(batch), FullContext()) == {"batchItemFailures": []}
    # When SQS delivers a second copy of the same message (same message id: at-least-once) within the hold
    clock.advance(seconds=5)
    copy = json.loads(json.dumps(batch))
    # Then it is a duplicate: answered as done, not failed back to the queue to be taken over later
    assert job_events(copy, FullContext()) == {"batchItemFailures": []}
    assert queue.calls == []
    # and the job was stopped once, recorded once, its owner told once
    assert acct.sagemaker.stop_requests == ["untagged-1"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    told = acct.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    assert len(told) == 1


def test_a_copy_of_a_completed_record_that_told_its_owner_is_a_duplicate_after_its_hold_too(
    acct: LocalAccount, queue: Queue, clock: MovableClock
) -> None:
    # Given an untagged job's event, received and governed as a batch of one: stopped, its owner told
    writes: list[str] = []
    acct.root.session.events.register(
        "provide-client-params.dynamodb.UpdateItem", lambda params, **_: writes.append(params["UpdateExpression"])
    )
    acct.sagemaker.launch(create_request("untagged-2", tags={"owner": "bob"}))
    inbox = acct.notification_inbox()
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("untagged-2")))
    batch = receive(acct, queue)
    assert batch is not None
    assert job_events(dict(batch), FullContext()) == {"batchItemFailures": []}
    # Then its claim was marked completed (a second write, made because someone was told)
    assert len(writes) == 2
    # When a copy of the same message (same message id) arrives after the claim's hold: at-least-once
    # delivery, or the event source mapping's delete failed and the message reappears after 1,800 s
    clock.advance(seconds=QUEUE_TIMEOUT)
    copy = json.loads(json.dumps(batch))
    # Then it is a duplicate: the job was stopped and recorded once, its owner told once
    assert job_events(copy, FullContext()) == {"batchItemFailures": []}
    assert acct.sagemaker.stop_requests == ["untagged-2"]
    assert [(r.action, r.outcome.value) for r in acct.audit.records] == [("stop", "done")]
    told = acct.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    assert len(told) == 1


def test_a_compliant_jobs_record_makes_one_ledger_write(acct: LocalAccount, queue: Queue) -> None:
    # Given a compliant job's Training event (the healthy path: an idle alarm created, nobody told)
    writes: list[str] = []
    acct.root.session.events.register(
        "provide-client-params.dynamodb.UpdateItem", lambda params, **_: writes.append(params["UpdateExpression"])
    )
    acct.sagemaker.launch(create_request("job-c"), secondary="Training")
    acct.sqs.send_message(QueueUrl=queue.url, MessageBody=json.dumps(acct.sagemaker.event("job-c")))
    batch = receive(acct, queue)
    assert batch is not None
    # When it is governed
    assert acct.invoke(job_events, batch) == {"batchItemFailures": []}
    # Then the ledger is written once: its claim, no completion mark
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 1
    assert len(writes) == 1
