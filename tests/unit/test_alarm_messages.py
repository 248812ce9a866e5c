"""CloudWatch alarm notifications through SNS: the real shapes parse; anything else is rejected."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.alarm_compare import alarm_definition, watched_metrics
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.progress import PROGRESS, ProgressPolicy
from sagemaker_governance.events.alarms import AlarmNotification, alarm_notifications
from smgov.simulation.messages import alarm_notification
from tests.builders import job
from tests.conftest import load_event


def only(sample: str) -> AlarmNotification:
    ((message_id, message),) = alarm_notifications(load_event(sample))
    assert message_id
    return message


def test_single_metric_alarm() -> None:
    message = only("idle-alarm-single-metric.json")
    assert message.new_state == "ALARM" and not message.is_composite
    assert message.trigger is not None and not message.trigger.is_metric_math
    assert message.trigger.hosts() == ("bert-sst2-finetune-42/algo-1",)
    evidence = message.evidence()
    assert evidence["threshold"] == 1.0 and evidence["datapoints_to_alarm"] == 30
    # CloudWatch writes the setting as a padded line ("- TreatMissingData:   notBreaching"): the setting itself
    assert evidence["treat_missing_data"] == "notBreaching"
    assert "Threshold Crossed" in evidence["state_reason"]
    assert message.changed_at is not None


def test_the_newest_datapoint_the_state_reason_lists_is_in_the_evidence() -> None:
    # CloudWatch's NewStateReason lists the datapoints that crossed, newest first (events/*.json)
    assert only("idle-alarm-ok.json").evidence()["newest_value"] == 212.5
    base = {"AlarmName": "a", "AWSAccountId": "1", "NewStateValue": "ALARM"}
    listed = (
        "Threshold Crossed: 3 out of the last 3 datapoints [70.0 (21/11/26 11:45:00), 62.5 (21/11/26 11:55:00), "
        "80.0 (21/11/26 11:50:00)] were less than the threshold (200.0) (minimum 3 datapoints for OK -> ALARM "
        "transition)."
    )
    message = AlarmNotification.model_validate({**base, "NewStateReason": listed})
    assert message.evidence()["newest_value"] == 62.5  # by its time, whatever the order
    # no datapoint listed (a composite, missing data treated as breaching): none
    for reason in (
        "arn:aws:cloudwatch alarm a transitioned to ALARM",
        "Threshold Crossed: no datapoints were received for 20 periods and 20 missing datapoints were treated "
        "as [Breaching].",
    ):
        assert (
            "newest_value" not in AlarmNotification.model_validate({**base, "NewStateReason": reason}).evidence()
        )


def test_metric_math_alarm() -> None:
    message = only("idle-alarm-metric-math.json")
    assert message.trigger is not None and message.trigger.is_metric_math
    assert len(message.trigger.hosts()) == 2
    assert message.evidence()["expression"] == "MAX([m1, m2])"


def test_a_notification_names_the_metrics_its_alarm_reads_as_the_alarm_request_names_them() -> None:
    # What the stopper compares with the plan (Guard.metrics_moved), as the reconciler compares a listed alarm
    for sample, metrics in (
        ("idle-alarm-single-metric.json", 1),
        ("idle-alarm-metric-math.json", 2),
        ("progress-alarm-stalled.json", 1),
    ):
        trigger = only(sample).trigger
        assert trigger is not None
        watched = watched_metrics(alarm_definition(trigger.as_alarm()))
        assert len(watched) == metrics and all(namespace and name and dims for namespace, name, dims in watched)
    # and a progress stall alarm over two metrics (metric math) and its armer, notified, name what they were put with
    naming = AlarmNaming(prefix="gov-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")
    definitions = [{"Name": "train:loss", "Regex": "l=(.*)"}, {"Name": "val:loss", "Regex": "v=(.*)"}]
    spec = {"TrainingImage": "img:1", "TrainingInputMode": "File", "MetricDefinitions": definitions}
    policy = ProgressPolicy(metric_names=("train_loss", "val_loss"))
    plan = PROGRESS.plan(job(AlgorithmSpecification=spec), policy, naming)
    assert isinstance(plan, AlarmPlan)
    for request in plan.metric_requests:
        sent = alarm_notification(
            request,
            old_state="OK",
            new_state="ALARM",
            reason="Threshold Crossed",
            changed_at=datetime(2026, 11, 21, 12, tzinfo=UTC),
            account="1",
            region="us-east-1",
        )
        trigger = AlarmNotification.model_validate(sent).trigger
        assert trigger is not None and trigger.is_metric_math
        watched = watched_metrics(alarm_definition(trigger.as_alarm()))
        assert {name for _, name, _ in watched} == {"train:loss", "val:loss"}
        assert watched == watched_metrics(alarm_definition(request))


def test_composite_alarm() -> None:
    message = only("idle-alarm-composite.json")
    assert message.is_composite and message.trigger is None
    assert message.alarm_rule is not None and "AND" in message.alarm_rule


def test_ok_transition_parses() -> None:
    assert only("idle-alarm-ok.json").new_state == "OK"


def test_a_message_that_is_not_json_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        alarm_notifications(load_event("idle-alarm-not-json.json"))


def test_json_that_is_not_an_alarm_is_a_validation_error() -> None:
    event = load_event("idle-alarm-ok.json")
    event["Records"][0]["Sns"]["Message"] = json.dumps({"hello": "world"})
    with pytest.raises(ValidationError):
        alarm_notifications(event)


def test_an_event_that_is_not_sns_is_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        alarm_notifications(load_event("training-job-training.json"))


def test_dimension_keys_in_either_case() -> None:
    body = json.loads(load_event("idle-alarm-single-metric.json")["Records"][0]["Sns"]["Message"])
    body["Trigger"]["Dimensions"] = [{"Name": "Host", "Value": "j/algo-1"}]
    message = AlarmNotification.model_validate(body)
    assert message.trigger is not None and message.trigger.hosts() == ("j/algo-1",)
