from __future__ import annotations

import json

import boto3

from sagemaker_governance.adapters.sns import SnsNotifier, render_text
from sagemaker_governance.domain.notifications import Notification, NotificationItem
from tests.adapters.conftest import CallRecorder

MESSAGE = Notification(
    kind="compliance",
    job_name="job-1",
    job_arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
    team="vision",
    owner="alice",
    headline="Training job job-1 was stopped: it violates governance policy",
    outcome="stopped",
    items=(
        NotificationItem(
            rule="required-tags",
            action="stop",
            mode="enforce",
            reason="missing tag: cost-center",
            remedy="Add cost-center.",
        ),
    ),
)


def test_publishes_versioned_json_with_filterable_attributes(aws: None) -> None:
    # Given a topic with a queue subscribed (raw delivery) to capture what is published
    sns, sqs = boto3.client("sns", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
    topic = sns.create_topic(Name="n")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="q")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    recorder = CallRecorder().attach(sns)
    # When a notification is published
    SnsNotifier(sns, topic).publish(MESSAGE)
    # Then the queue gets the versioned JSON and the attributes subscribers filter on
    (received,) = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["All"])["Messages"]
    body = json.loads(received["Body"])
    assert body["schema"] == "smgov.notification/1" and body["job_name"] == "job-1"
    assert received["MessageAttributes"]["team"]["StringValue"] == "vision"
    assert recorder.actions == SnsNotifier.IAM_ACTIONS


def test_no_topic_means_no_call() -> None:
    assert SnsNotifier(client=None, topic_arn=None).publish(MESSAGE) is None


def test_text_rendering_names_the_violation_and_the_fix() -> None:
    text = render_text(MESSAGE)
    assert "missing tag: cost-center" in text and "How to fix: Add cost-center." in text
