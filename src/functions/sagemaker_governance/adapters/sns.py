"""Publishing notifications to people: render the versioned message at the edge."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.notifications import Notification

SUBJECT_LIMIT = 100


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
            lines.append(f"  - [{item.rule}] {item.reason} (action: {item.action}, mode: {item.mode})")
            if item.remedy:
                lines.append(f"    How to fix: {item.remedy}")
    lines += ["", "-- sagemaker-governance (reply to your platform team with questions)"]
    return "\n".join(lines)


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
        body = json.dumps(message.model_dump(mode="json", by_alias=True), sort_keys=True)
        attributes = {
            "kind": {"DataType": "String", "StringValue": message.kind},
            "outcome": {"DataType": "String", "StringValue": message.outcome},
        }
        for key, value in (("team", message.team), ("owner", message.owner)):
            if value:
                attributes[key] = {"DataType": "String", "StringValue": value}
        try:
            response = self._client.publish(
                TopicArn=self._topic_arn,
                Subject=message.headline[:SUBJECT_LIMIT].replace("\n", " "),
                MessageStructure="json",
                Message=json.dumps({"default": body, "email": render_text(message)}),
                MessageAttributes=attributes,
            )
        except ClientError as exc:
            raise AdapterError(f"SNS Publish failed: {exc}") from exc
        return str(response.get("MessageId"))
