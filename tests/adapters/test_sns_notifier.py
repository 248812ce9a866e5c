from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
from moto.sns.utils import FilterPolicyMatcher

from sagemaker_governance.adapters.sns import (
    CHAT_DESCRIPTION_LIMIT,
    CHAT_KEYWORDS,
    CHAT_NEXT_STEPS,
    CHAT_TITLE_LIMIT,
    SnsNotifier,
    console_links,
    publish_request,
    render_chatbot,
    render_text,
)
from sagemaker_governance.domain.notifications import Notification, NotificationItem, NotificationOutcome
from smgov.cfn_template import load_template
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


def test_the_email_and_chat_forms_name_each_items_decision_code() -> None:
    # Given a message whose item carries its decision code (as every governance decision's does)
    item = MESSAGE.items[0].model_copy(update={"code": "compliance.stop.violation"})
    coded = MESSAGE.model_copy(update={"items": (item,)})
    # When it is rendered for e-mail and for chat
    text, chat = render_text(coded), render_chatbot(coded)["content"]["description"]
    # Then each item's line names the code, the key the README's codes table and the audit trail share
    assert (
        "[required-tags] missing tag: cost-center (action: stop, mode: enforce, code: compliance.stop.violation)"
        in text
    )
    assert "• [required-tags] missing tag: cost-center (`compliance.stop.violation`)" in chat


# ---- notifications people read (issue 20 item 4) --------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_message_has_a_chatbot_form_for_https_subscribers() -> None:
    # When a notification is rendered for publishing
    request = publish_request(MESSAGE, "arn:aws:sns:us-east-1:123456789012:n")
    forms = json.loads(request["Message"])
    # Then each protocol has its form: the versioned JSON by default, text by e-mail, Chatbot's over HTTPS
    assert request["MessageStructure"] == "json" and set(forms) == {"default", "email", "https"}
    assert json.loads(forms["default"])["schema"] == "smgov.notification/1"
    chat = json.loads(forms["https"])
    assert (chat["version"], chat["source"]) == ("1.0", "custom")
    assert chat["content"]["textType"] == "client-markdown"
    assert chat["content"]["title"] == MESSAGE.headline
    assert "missing tag: cost-center" in chat["content"]["description"]
    assert chat["content"]["nextSteps"][0] == "How to fix: Add cost-center."
    assert chat["metadata"]["threadId"] == "job-1" and chat["metadata"]["relatedResources"] == [MESSAGE.job_arn]
    assert chat["metadata"]["additionalContext"]["team"] == "vision"


def test_links_to_the_job_its_logs_and_its_metrics() -> None:
    links = console_links(MESSAGE)
    assert links["job"] == "https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/job-1"
    assert "log-group/$252Faws$252Fsagemaker$252FTrainingJobs" in links["logs"] and links["logs"].endswith("job-1")
    assert "metricsV2" in links["metrics"] and "search=job-1" in links["metrics"]
    steps = render_chatbot(MESSAGE)["content"]["nextSteps"]
    assert [s.split(":", 1)[0] for s in steps[1:]] == ["The job", "Its logs", "Its metrics"]
    assert links["job"] in render_text(MESSAGE)
    # a China-region job links to that partition's console; no ARN, no links (never a guessed region)
    china = MESSAGE.model_copy(
        update={"job_arn": "arn:aws-cn:sagemaker:cn-north-1:123456789012:training-job/job-1"}
    )
    assert console_links(china)["job"].startswith("https://cn-north-1.console.amazonaws.cn/")
    assert console_links(MESSAGE.model_copy(update={"job_arn": None})) == {}


def test_a_long_headline_is_capped_in_chat_not_in_the_record() -> None:
    long = MESSAGE.model_copy(update={"headline": "x" * 600})
    chat = render_chatbot(long)
    assert len(chat["content"]["title"]) == CHAT_TITLE_LIMIT and chat["content"]["title"].endswith("…")
    assert json.loads(json.loads(publish_request(long, "t")["Message"])["default"])["headline"] == "x" * 600


def _attributes(message: Notification) -> dict[str, Any]:
    """The message attributes as SNS hands them to a filter policy."""
    return {
        k: {"Type": v["DataType"], "Value": v["StringValue"]}
        for k, v in publish_request(message, "t")["MessageAttributes"].items()
    }


def test_the_routing_sample_sends_each_team_its_own_and_the_rest_to_the_platform_team() -> None:
    # Given the documented subscriptions' filter policies
    resources = load_template(EXAMPLES / "notification-routing.yaml")["Resources"]
    policies = {
        name: r["Properties"]["FilterPolicy"]
        for name, r in resources.items()
        if r["Type"] == "AWS::SNS::Subscription"
    }
    assert all(r["Properties"]["FilterPolicyScope"] == "MessageAttributes" for r in resources.values())

    def routed(message: Notification) -> set[str]:
        return {
            name
            for name, policy in policies.items()
            if FilterPolicyMatcher(policy, "MessageAttributes").matches(_attributes(message), "")
        }

    nlp_notice = MESSAGE.model_copy(update={"team": "nlp", "outcome": NotificationOutcome.NOTIFIED})
    nlp_stop = MESSAGE.model_copy(update={"team": "nlp"})
    vision_notice = MESSAGE.model_copy(update={"outcome": NotificationOutcome.NOTIFIED})
    untagged = MESSAGE.model_copy(update={"team": None, "outcome": NotificationOutcome.NOTIFIED})
    # Then each message reaches exactly the subscriptions meant for it
    assert routed(nlp_notice) == {"NlpTeam"}
    assert routed(nlp_stop) == {"NlpTeam", "PlatformTeam"}
    assert routed(vision_notice) == set()
    assert routed(untagged) == {"PlatformTeam"}


# ---- the custom notification's limits (the Chatbot page's "Parameter details"), one test each ------------

LONGEST_JOB = "j" * 63  # CreateTrainingJob: a job name has at most 63 characters
WORST = Notification(
    kind="efficiency-notice",
    job_name=LONGEST_JOB,
    job_arn=f"arn:aws:sagemaker:ap-southeast-2:123456789012:training-job/{LONGEST_JOB}",
    team="t" * 256,  # a tag value may hold 256 characters
    owner="o" * 256,
    headline="h" * 1000,
    outcome="notified",
    items=tuple(
        NotificationItem(rule=f"rule-{n}", action="notify", mode="enforce", reason="r" * 2000, remedy="f" * 2000)
        for n in range(12)
    ),
)


def test_chatbot_version_and_source_are_the_schemas_constants() -> None:
    chat = render_chatbot(WORST)
    assert (
        chat["version"] == "1.0"
        and chat["source"] == "custom"
        and chat["content"]["textType"] == "client-markdown"
    )
    assert set(chat) == {"version", "source", "content", "metadata"}  # no field the schema does not define
    assert set(chat["content"]) == {"textType", "title", "description", "nextSteps", "keywords"}
    assert set(chat["metadata"]) <= {"threadId", "summary", "eventType", "relatedResources", "additionalContext"}


def test_chatbot_title_at_most_250_characters() -> None:
    assert len(render_chatbot(WORST)["content"]["title"]) <= 250


def test_chatbot_description_at_most_8000_characters() -> None:
    description = render_chatbot(WORST)["content"]["description"]
    assert len(description) <= 8000 and len(description) == CHAT_DESCRIPTION_LIMIT  # our tighter cap


def test_chatbot_each_next_step_at_most_350_characters_and_links_whole() -> None:
    steps = render_chatbot(WORST)["content"]["nextSteps"]
    assert len(steps) == CHAT_NEXT_STEPS and all(len(step) <= 350 for step in steps)
    # the console links of the longest job name fit whole (a cut link would lead nowhere)
    worst_links = render_chatbot(WORST.model_copy(update={"items": ()}))["content"]["nextSteps"]
    assert [s.split(": ", 1)[1] for s in worst_links] == list(console_links(WORST).values())
    assert all(len(step) <= 350 for step in worst_links)


def test_chatbot_each_keyword_at_most_75_characters() -> None:
    keywords = render_chatbot(WORST)["content"]["keywords"]
    assert 0 < len(keywords) <= CHAT_KEYWORDS and all(len(k) <= 75 for k in keywords)


def test_chatbot_additional_context_maps_strings_to_strings() -> None:
    context = render_chatbot(WORST)["metadata"]["additionalContext"]
    assert context and all(isinstance(k, str) and isinstance(v, str) for k, v in context.items())
    assert all(isinstance(r, str) for r in render_chatbot(WORST)["metadata"]["relatedResources"])
