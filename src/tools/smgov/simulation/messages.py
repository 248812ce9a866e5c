"""One builder for each AWS message shape the service receives: shared by the simulator and the tests.

- ``training_job_state_change``: the EventBridge event SageMaker emits on a training job's status change
  (``detail`` is the ``DescribeTrainingJob`` document with timestamps as epoch-millisecond strings and
  ``Tags`` as a map; see ``events/training-job-*.json``).
- ``scheduled_event``: the EventBridge event a ``rate(...)`` / ``cron(...)`` rule delivers.
- ``alarm_notification`` / ``alarm_subject``: the JSON document CloudWatch publishes to SNS when an alarm
  changes state (single metric, metric math and composite shapes), and the SNS ``Subject`` it uses.
- ``sns_record`` / ``sns_lambda_event``: the event SNS delivers to a subscribed Lambda function.
- ``sqs_record`` / ``sqs_lambda_event``: the event an SQS event source mapping delivers to a function.
- ``lambda_failure_record``: the invocation record Lambda sends to an asynchronous invocation's
  on-failure destination (an SQS queue's message body) when its retries are exhausted.

Only shapes live here: who sends what when is the caller's business (the simulator's delivery, a test).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

STATE_CHANGE = "SageMaker Training Job State Change"
SCHEDULED = "Scheduled Event"
SIGNATURE = "c2ltdWxhdGVk"  # base64 "simulated": nothing verifies it

REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}


# ---- timestamps ----------------------------------------------------------------------------------


def iso_millis(moment: datetime) -> str:
    """CloudWatch's notification timestamp format: ``2025-11-21T11:20:00.000+0000``."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"


def eventbridge_time(moment: datetime) -> str:
    """EventBridge's ``time``: ``2025-11-21T11:20:00Z`` (whole seconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def sns_time(moment: datetime) -> str:
    """SNS's ``Timestamp``: ``2025-11-21T11:20:00.000Z``."""
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def event_value(value: Any) -> Any:
    """A ``DescribeTrainingJob`` value as events carry it: timestamps become epoch-millisecond strings."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return str(int(moment.timestamp() * 1000))
    if isinstance(value, dict):
        return {k: event_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [event_value(v) for v in value]
    return value


# ---- EventBridge ---------------------------------------------------------------------------------


def eventbridge_event(
    detail_type: str,
    source: str,
    detail: Mapping[str, Any],
    *,
    event_id: str,
    time: datetime,
    region: str,
    account: str,
    resources: Sequence[str] = (),
) -> dict[str, Any]:
    return {
        "version": "0",
        "id": event_id,
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": eventbridge_time(time),
        "region": region,
        "resources": list(resources),
        "detail": dict(detail),
    }


def training_job_state_change(
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    event_id: str,
    time: datetime,
    region: str,
    account: str,
) -> dict[str, Any]:
    """SageMaker's state-change event for a job whose ``DescribeTrainingJob`` document is ``description``."""
    detail = {key: event_value(value) for key, value in description.items()}
    detail["Tags"] = dict(tags)
    return eventbridge_event(
        STATE_CHANGE,
        "aws.sagemaker",
        detail,
        event_id=event_id,
        time=time,
        region=region,
        account=account,
        resources=[description["TrainingJobArn"]],
    )


def scheduled_event(rule_arn: str, *, event_id: str, time: datetime, region: str, account: str) -> dict[str, Any]:
    return eventbridge_event(
        SCHEDULED,
        "aws.events",
        {},
        event_id=event_id,
        time=time,
        region=region,
        account=account,
        resources=[rule_arn],
    )


def is_state_change(event: Mapping[str, Any]) -> bool:
    return event.get("detail-type") == STATE_CHANGE


# ---- CloudWatch alarm notifications --------------------------------------------------------------


def _dimensions(dimensions: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """Notifications spell metric dimensions ``{"value": ..., "name": ...}``."""
    return [{"value": d["Value"], "name": d["Name"]} for d in dimensions]


def _trigger(alarm: Mapping[str, Any]) -> dict[str, Any]:
    common = {
        "Period": int(alarm.get("Period") or 0),
        "EvaluationPeriods": int(alarm["EvaluationPeriods"]),
        "DatapointsToAlarm": int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"]),
        "ComparisonOperator": alarm["ComparisonOperator"],
        "Threshold": float(alarm["Threshold"]),
        # as CloudWatch's notifications spell it: a padded line, not the bare setting
        "TreatMissingData": f"- TreatMissingData:                    {alarm.get('TreatMissingData') or 'missing'}",
        "EvaluateLowSampleCountPercentile": alarm.get("EvaluateLowSampleCountPercentile") or "",
    }
    if alarm.get("Metrics"):
        metrics: list[dict[str, Any]] = []
        for item in alarm["Metrics"]:
            if "MetricStat" in item:
                stat = item["MetricStat"]
                metric = stat["Metric"]
                common["Period"] = common["Period"] or int(stat["Period"])
                entry: dict[str, Any] = {
                    "Id": item["Id"],
                    "MetricStat": {
                        "Metric": {
                            "Dimensions": _dimensions(metric.get("Dimensions", [])),
                            "MetricName": metric["MetricName"],
                            "Namespace": metric["Namespace"],
                        },
                        "Period": int(stat["Period"]),
                        "Stat": stat["Stat"],
                    },
                    "ReturnData": bool(item.get("ReturnData", False)),
                }
            else:
                entry = {
                    "Expression": item["Expression"],
                    "Id": item["Id"],
                    "ReturnData": bool(item.get("ReturnData", True)),
                }
            if item.get("Label"):
                entry["Label"] = item["Label"]
            metrics.append(entry)
        return {**common, "Metrics": metrics}
    return {
        "MetricName": alarm["MetricName"],
        "Namespace": alarm["Namespace"],
        "StatisticType": "Statistic",
        "Statistic": str(alarm.get("Statistic", "")).upper(),
        "Unit": alarm.get("Unit"),
        "Dimensions": _dimensions(alarm.get("Dimensions", [])),
        **common,
    }


def alarm_notification(
    alarm: Mapping[str, Any],
    *,
    old_state: str,
    new_state: str,
    reason: str,
    changed_at: datetime,
    account: str,
    region: str,
    triggering_children: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON document CloudWatch publishes to an SNS topic when an alarm changes state. ``alarm`` is
    the alarm as ``DescribeAlarms`` returns it (a composite has ``AlarmRule``)."""
    updated = alarm.get("AlarmConfigurationUpdatedTimestamp")
    message: dict[str, Any] = {
        "AlarmName": alarm["AlarmName"],
        "AlarmDescription": alarm.get("AlarmDescription"),
        "AWSAccountId": account,
        "AlarmConfigurationUpdatedTimestamp": iso_millis(updated) if isinstance(updated, datetime) else updated,
        "NewStateValue": new_state,
        "NewStateReason": reason,
        "StateChangeTime": iso_millis(changed_at),
        "Region": REGION_NAMES.get(region, region),
        "AlarmArn": alarm.get("AlarmArn"),
        "OldStateValue": old_state,
        "OKActions": list(alarm.get("OKActions", [])),
        "AlarmActions": list(alarm.get("AlarmActions", [])),
        "InsufficientDataActions": list(alarm.get("InsufficientDataActions", [])),
    }
    if "AlarmRule" in alarm:
        message["AlarmRule"] = alarm["AlarmRule"]
        message["TriggeringChildren"] = list(triggering_children)
    else:
        message["Trigger"] = _trigger(alarm)
    return message


def alarm_subject(alarm_name: str, new_state: str, region: str) -> str:
    subject = f'{new_state}: "{alarm_name}" in {REGION_NAMES.get(region, region)}'
    return subject if len(subject) <= 100 else subject[:97] + "..."


# ---- SNS and SQS envelopes -----------------------------------------------------------------------


def _region_of(arn: str) -> str:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 and parts[3] else "us-east-1"


def sns_record(
    topic_arn: str,
    message: str,
    *,
    message_id: str,
    subscription_id: str,
    timestamp: datetime,
    subject: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One record of the event SNS delivers to a Lambda function (``attributes`` in the delivered shape:
    ``{"name": {"Type": "String", "Value": "..."}}``)."""
    region = _region_of(topic_arn)
    subscription = f"{topic_arn}:{subscription_id}"
    return {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "EventSubscriptionArn": subscription,
        "Sns": {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": topic_arn,
            "Subject": subject,
            "Message": message,
            "Timestamp": sns_time(timestamp),
            "SignatureVersion": "1",
            "Signature": SIGNATURE,
            "SigningCertUrl": f"https://sns.{region}.amazonaws.com/SimpleNotificationService-simulated.pem",
            "UnsubscribeUrl": f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription}",
            "MessageAttributes": dict(attributes or {}),
        },
    }


def sns_lambda_event(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Records": [dict(r) for r in records]}


def sqs_record(
    queue_arn: str,
    body: str,
    *,
    message_id: str,
    sent_at: datetime,
    receive_count: int = 1,
    attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One record of the event an SQS event source mapping delivers to a Lambda function."""
    millis = str(int((sent_at if sent_at.tzinfo else sent_at.replace(tzinfo=UTC)).timestamp() * 1000))
    return {
        "messageId": message_id,
        "receiptHandle": f"simulated-{message_id}-{receive_count}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": millis,
            "SenderId": "AIDASIMULATED",
            "ApproximateFirstReceiveTimestamp": millis,
        },
        "messageAttributes": dict(attributes or {}),
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": _region_of(queue_arn),
    }


def sqs_lambda_event(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Records": [dict(r) for r in records]}


def lambda_failure_record(
    request_payload: Mapping[str, Any],
    *,
    function_arn: str,
    error_type: str,
    error_message: str,
    request_id: str,
    timestamp: datetime,
    invoke_count: int = 3,
    condition: str = "RetriesExhausted",
) -> dict[str, Any]:
    """What Lambda sends to an on-failure destination (AWS Lambda developer guide, "Capturing records of
    Lambda asynchronous invocations": ``requestContext``, ``requestPayload``, ``responseContext``,
    ``responsePayload``)."""
    moment = timestamp.astimezone(UTC) if timestamp.tzinfo else timestamp
    return {
        "version": "1.0",
        "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
        "requestContext": {
            "requestId": request_id,
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "requestPayload": dict(request_payload),
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": error_message, "errorType": error_type},
    }


def json_body(document: Mapping[str, Any] | str) -> str:
    """A message body: a mapping as JSON, a string as it is."""
    return document if isinstance(document, str) else json.dumps(document)
