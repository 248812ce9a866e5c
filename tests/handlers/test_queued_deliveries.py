"""Deliveries through the queues (issue 16 item 2): SQS batches in, partial batch responses out.

The job-events function reads JobEventsQueue (EventBridge events as bodies), the idle stopper reads
AlarmQueue (SNS notifications as bodies, raw delivery off). A record that fails is named in
``batchItemFailures`` (it returns to the queue, then to the dead-letter queue); the others are done.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request
from tests.conftest import EVENTS
from tests.handlers.conftest import ENFORCE, NOW, sns_notification_body, sqs_batch

PREFIX = "sagemaker-governance-idle-"


@pytest.fixture
def acct() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as account:
        yield account


def test_a_batch_of_state_changes_is_governed_record_by_record(acct: LocalAccount) -> None:
    # Given two jobs entering Training, delivered in one SQS batch
    for name in ("job-a", "job-b"):
        acct.sagemaker.launch(create_request(name), secondary="Training")
    batch = sqs_batch(*(json.dumps(acct.sagemaker.event(name)) for name in ("job-a", "job-b")))
    # When the function handles it, then both get their alarm and no record is reported failed
    assert acct.invoke(job_events, batch) == {"batchItemFailures": []}
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}job-a", f"{PREFIX}job-b"}


def test_a_malformed_record_fails_alone(acct: LocalAccount) -> None:
    # Given a batch whose first record is not a state change and whose second is
    acct.sagemaker.launch(create_request("job-b"), secondary="Training")
    batch = sqs_batch('{"not": "an event"}', json.dumps(acct.sagemaker.event("job-b")))
    # Then only the malformed record returns to the queue; the other is done
    assert acct.invoke(job_events, batch) == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}
    assert list(acct.cloudwatch.alarms) == [f"{PREFIX}job-b"]


def test_the_same_state_change_twice_in_a_batch_acts_once() -> None:
    # EventBridge delivers at least once: a duplicate in the same batch is one delivery (the idempotency
    # key is the state change, whatever the delivery).
    import boto3

    table = "smgov-idempotency"
    with local_account(lambda: NOW, {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": table}) as acct:
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        acct.sagemaker.launch(create_request("job-a"), secondary="Training")
        event = json.dumps(acct.sagemaker.event("job-a"))
        assert acct.invoke(job_events, sqs_batch(event, event)) == {"batchItemFailures": []}
        assert acct.cloudwatch.calls["PutMetricAlarm"] == 1


def test_the_sample_batches_parse() -> None:
    # events/sqs-*.json: what the two event source mappings send (real SQS record shapes).
    from sagemaker_governance.events.alarms import queued_alarm_notification
    from sagemaker_governance.events.job_state import TrainingJobStateChange
    from sagemaker_governance.events.queue import sqs_bodies

    batch = sqs_bodies(json.loads((EVENTS / "sqs-job-events-batch.json").read_text()))
    assert batch is not None and len(batch) == 2
    names = [TrainingJobStateChange.model_validate_json(body).detail.name for _, body in batch]
    assert len(names) == 2
    alarms = sqs_bodies(json.loads((EVENTS / "sqs-idle-alarm.json").read_text()))
    assert alarms is not None
    ((_, body),) = alarms
    message_id, notification = queued_alarm_notification(body)
    assert message_id and notification.alarm_name.startswith("sagemaker-governance-idle-")
    # a direct EventBridge event is not a batch
    assert sqs_bodies(json.loads((EVENTS / "training-job-training.json").read_text())) is None


def test_a_records_delivery_owner_is_its_message_id_or_the_one_a_redrive_carries() -> None:
    from sagemaker_governance.events.queue import DELIVERY_OWNER_ATTRIBUTE, sqs_records

    batch = sqs_batch("{}", "{}")
    batch["Records"][1]["messageAttributes"] = {
        DELIVERY_OWNER_ATTRIBUTE: {"stringValue": "m-original", "dataType": "String"}
    }
    records = sqs_records(batch)
    assert records is not None
    assert [(r.message_id, r.owner) for r in records] == [("m-0", "m-0"), ("m-1", "m-original")]


def test_the_stopper_reads_alarm_notifications_from_its_queue(acct: LocalAccount) -> None:
    # Given a job in Training with its alarm in ALARM (within the grace period: the stopper resets it)
    acct.sagemaker.launch(create_request("job-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    alarm = f"{PREFIX}job-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    batch = sqs_batch(sns_notification_body(acct, alarm), '{"Type": "Notification"}', queue="AlarmQueue")
    # When the queue delivers it next to a broken record, then the alarm is judged (one audit record)
    # and only the broken record fails
    result = acct.invoke(stopper, batch)
    assert result == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert [r.trigger for r in acct.audit.records if r.trigger == "idle-alarm"] == ["idle-alarm"]
