"""Publishing notifications to people: render the versioned message at the edge.

One ``Publish`` per notification (``publish_request`` builds it; `smgov explain --json` shows it under
``notification``), with ``MessageStructure: json`` so that each kind of subscriber gets its own form
(SNS API reference, ``Publish``, ``MessageStructure``: a top-level key per transport protocol, ``default``
for the others):

* ``default`` (SQS, Lambda, ``email-json`` ...): the versioned ``smgov.notification/1`` JSON;
* ``email``: a plain-text body (``render_text``) with console links to the job, its logs and metrics;
* ``https``: the **AWS Chatbot (Amazon Q Developer in chat applications) custom notification**
  (``render_chatbot``), which a Slack or Microsoft Teams channel subscribed to the topic through Chatbot
  renders: ``version`` "1.0", ``source`` "custom", ``content`` (``textType`` "client-markdown",
  ``title``, ``description``, ``nextSteps``, ``keywords``) and ``metadata`` (``threadId``, ``summary``,
  ``eventType``, ``relatedResources``, ``additionalContext``), as the Chatbot administrator guide's
  "Custom notifications" page (custom-notifs, "Event schema" and "Parameter details") defines them.
  Chatbot subscribes to a topic over HTTPS, so an other HTTPS subscriber (a webhook) gets this form too.
  Its limits (title 250 characters, description 8,000, each next step 350, each keyword 75) are kept by
  capping each field (``CHATBOT_*``); no optional ``id`` is set (Chatbot does not need one to render).

Message attributes ``kind``, ``outcome``, ``team`` and ``owner`` let each subscription filter (SNS
subscription filter policies, ``FilterPolicyScope: MessageAttributes``): per-team chat channels,
``examples/notification-routing.yaml``.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Final
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.notifications import Notification

SUBJECT_LIMIT: Final = 100  # SNS Publish: Subject, at most 100 characters
# The custom notification's limits ("Parameter details" of the Chatbot page): ``title`` at most 250
# characters, ``description`` at most 8,000, each ``nextSteps`` item at most 350, each ``keywords`` item at
# most 75; ``additionalContext`` maps strings to strings. Within them, our own bounds for a chat message
# (a headline, a few lines, a few steps): the complete record is the versioned JSON.
CHATBOT_TITLE_MAX: Final = 250
CHATBOT_DESCRIPTION_MAX: Final = 8000
CHATBOT_NEXT_STEP_MAX: Final = 350
CHATBOT_KEYWORD_MAX: Final = 75
CHAT_TITLE_LIMIT: Final = CHATBOT_TITLE_MAX
CHAT_DESCRIPTION_LIMIT: Final = 3000
CHAT_NEXT_STEPS: Final = 8
CHAT_KEYWORDS: Final = 5
CHATBOT_VERSION: Final = "1.0"
LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
METRICS_NAMESPACE: Final = "/aws/sagemaker/TrainingJobs"
_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):\d{12}:training-job/")
_CONSOLE: Final = {
    "aws": "console.aws.amazon.com",
    "aws-cn": "console.amazonaws.cn",
    "aws-us-gov": "console.amazonaws-us-gov.com",
}


def console_links(message: Notification) -> dict[str, str]:
    """Console pages of the job, its log streams and its metrics (none without the job's ARN, or in a
    partition whose console we do not know): ``job``, ``logs``, ``metrics``."""
    match = _ARN.match(message.job_arn or "")
    host = _CONSOLE.get(match["partition"]) if match else None
    if match is None or host is None:
        return {}
    region, job = match["region"], message.job_name
    base = f"https://{region}.{host}"
    # The console's own fragment encoding of a log group: '/' as $252F (a '%2F' escaped once more, '%' as '$25').
    group = quote(LOG_GROUP, safe="").replace("%", "$25")
    return {
        "job": f"{base}/sagemaker/home?region={region}#/jobs/{job}",
        "logs": f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{group}"
        f"$3FlogStreamNameFilter$3D{quote(job, safe='')}",
        "metrics": f"{base}/cloudwatch/home?region={region}#metricsV2:graph=~();search={quote(job, safe='')};"
        f"namespace={quote(METRICS_NAMESPACE, safe='')}",
    }


_LINK_LABELS: Final = {"job": "The job", "logs": "Its logs", "metrics": "Its metrics"}


def render_text(message: Notification) -> str:
    """A plain-text body for e-mail subscribers."""
    lines = [message.headline, "", f"Job: {message.job_name}"]
    if message.job_arn:
        lines.append(f"ARN: {message.job_arn}")
    if message.team:
        lines.append(f"Team: {message.team}")
    if message.related_job:
        lines.append(f"Related job: {message.related_job}")
    lines.append(f"Outcome: {message.outcome}")
    if message.diagnosis:
        diagnosis = message.diagnosis
        lines += ["", f"Failure class: {diagnosis.get('class')} ({diagnosis.get('signature') or 'no signature'})"]
        for shown in diagnosis.get("lines") or []:
            lines.append(f"  {shown.get('host')}: {shown.get('line')}")
        for note in diagnosis.get("notes") or []:
            lines.append(f"  note: {note}")
    if message.items:
        lines += ["", "Details:"]
        for item in message.items:
            code = (
                f", code: {item.code}" if item.code else ""
            )  # the decision code the audit trail and the README name
            lines.append(f"  - [{item.rule}] {item.reason} (action: {item.action}, mode: {item.mode}{code})")
            if item.remedy:
                lines.append(f"    How to fix: {item.remedy}")
    links = console_links(message)
    if links:
        lines += ["", *(f"{_LINK_LABELS[k]}: {url}" for k, url in links.items())]
    lines += ["", "-- sagemaker-governance (reply to your platform team with questions)"]
    return "\n".join(lines)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_chatbot(message: Notification) -> dict[str, Any]:
    """The AWS Chatbot custom notification of ``message`` (module docstring: the schema and its source)."""
    description = [f"*Outcome:* {message.outcome}"]
    who = ", ".join(f"{k} {v}" for k, v in (("team", message.team), ("owner", message.owner)) if v)
    if who:
        description.append(f"*Owner:* {who}")
    if message.related_job:
        description.append(f"*Related job:* {message.related_job}")
    if message.diagnosis:
        description.append(
            f"*Failure class:* {message.diagnosis.get('class')} ({message.diagnosis.get('signature') or 'no signature'})"
        )
    description += [
        f"• [{item.rule}] {item.reason}" + (f" (`{item.code}`)" if item.code else "") for item in message.items
    ]
    steps = [f"How to fix: {item.remedy}" for item in message.items if item.remedy]
    steps += [f"{_LINK_LABELS[k]}: {url}" for k, url in console_links(message).items()]
    keywords = [k for k in (message.kind, str(message.outcome), message.team) if k]
    metadata: dict[str, Any] = {
        "threadId": message.job_name,  # one thread per job: its stop, resume and efficiency notices together
        "summary": _cap(message.headline, CHAT_TITLE_LIMIT),
        "eventType": message.kind,
        "additionalContext": {
            k: v
            for k, v in (
                ("kind", message.kind),
                ("outcome", str(message.outcome)),
                ("team", message.team),
                ("owner", message.owner),
                ("job", message.job_name),
            )
            if v
        },
    }
    if message.job_arn:
        metadata["relatedResources"] = [message.job_arn]
    return {
        "version": CHATBOT_VERSION,
        "source": "custom",
        "content": {
            "textType": "client-markdown",
            "title": _cap(message.headline, CHAT_TITLE_LIMIT),
            "description": _cap("\n".join(description), CHAT_DESCRIPTION_LIMIT),
            "nextSteps": [_cap(step, CHATBOT_NEXT_STEP_MAX) for step in steps[:CHAT_NEXT_STEPS]],
            "keywords": [_cap(word, CHATBOT_KEYWORD_MAX) for word in keywords[:CHAT_KEYWORDS]],
        },
        "metadata": metadata,
    }


def message_attributes(message: Notification) -> dict[str, dict[str, str]]:
    """What subscriptions filter on: ``kind``, ``outcome``, and ``team``/``owner`` when the job has them."""
    attributes = {
        "kind": {"DataType": "String", "StringValue": message.kind},
        "outcome": {"DataType": "String", "StringValue": str(message.outcome)},
    }
    for key, value in (("team", message.team), ("owner", message.owner)):
        if value:
            attributes[key] = {"DataType": "String", "StringValue": value}
    return attributes


def publish_request(message: Notification, topic_arn: str) -> dict[str, Any]:
    """The exact ``Publish`` request of ``message`` (its ``Message`` holds one form per protocol)."""
    body = json.dumps(message.model_dump(mode="json", by_alias=True), sort_keys=True)
    forms = {"default": body, "email": render_text(message), "https": json.dumps(render_chatbot(message))}
    return {
        "TopicArn": topic_arn,
        "Subject": message.headline[:SUBJECT_LIMIT].replace("\n", " "),
        "MessageStructure": "json",
        "Message": json.dumps(forms),
        "MessageAttributes": message_attributes(message),
    }


def explained(message: Notification, topic_arn: str = "<NotificationsTopicArn>") -> dict[str, Any]:
    """``publish_request`` with its ``Message`` opened up, for a person to read (`smgov explain --json`)."""
    request = publish_request(message, topic_arn)
    forms = json.loads(request["Message"])
    return {
        **request,
        "Message": {
            "default": json.loads(forms["default"]),
            "email": forms["email"],
            "https": json.loads(forms["https"]),
        },
    }


class SnsNotifier:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"sns:Publish"})
    # Publishing to a topic encrypted with the stack's customer key also needs these on that key.
    KMS_ACTIONS: ClassVar[frozenset[str]] = frozenset({"kms:Decrypt", "kms:GenerateDataKey"})

    def __init__(self, client: Any, topic_arn: str | None) -> None:
        self._client = client
        self._topic_arn = topic_arn

    def publish(self, message: Notification) -> str | None:
        """Publish; returns the message id, or None when no topic is configured."""
        if not self._topic_arn:
            return None
        try:
            response = self._client.publish(**publish_request(message, self._topic_arn))
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"SNS Publish failed: {exc}") from exc
        return str(response.get("MessageId"))
