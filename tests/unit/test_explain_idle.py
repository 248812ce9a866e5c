"""`smgov explain` shows the idle guard's alarm decisions with the exact requests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import botocore.session
from botocore.validate import ParamValidator

from sagemaker_governance.domain.policy import Policy
from smgov.cli.main import main
from smgov.explain import explain_event
from tests.conftest import EVENTS, load_event

NOW = datetime(2025, 11, 21, 10, 30, tzinfo=UTC)
MODEL: Any = botocore.session.get_session().get_service_model("cloudwatch")


def idle_decision(result: dict[str, Any]) -> dict[str, Any]:
    (decision,) = [d for d in result["decisions"] if d["rule"] == "idle-guard"]
    return dict(decision)


def test_training_event_explains_the_exact_put_metric_alarm_request() -> None:
    result = explain_event(load_event("training-job-training.json"), Policy(), now=NOW)
    decision = idle_decision(result)
    assert decision["action"] == "create-alarm"
    alarm = decision["alarm"]
    report = ParamValidator().validate(alarm, MODEL.operation_model("PutMetricAlarm").input_shape)
    assert not report.has_errors(), report.generate_report()
    assert alarm["Threshold"] == 4.0  # ml.g5.12xlarge: 4 GPUs x 1%
    # the pinned trigger (95% x 4 GPUs), and on two hosts the stuck host (one pinned, one below 4, the mean
    # at least half pinned)
    pinned = "(MAX([m1, m2]) >= 380) * ((MIN([m1, m2]) >= 380) + (MIN([m1, m2]) < 4) * (AVG([m1, m2]) >= 190))"
    assert [q["Expression"] for q in alarm["Metrics"] if q.get("ReturnData")] == [
        f"IF(({pinned}) >= 1, 0, MAX([m1, m2]))"
    ]


def test_terminal_event_explains_the_deletion() -> None:
    decision = idle_decision(explain_event(load_event("training-job-stopped.json"), Policy(), now=NOW))
    assert decision["action"] == "delete-alarm"
    assert decision["alarm"] == {"AlarmNames": ["sagemaker-governance-idle-resnet50-imagenet-2025-11-21-10-00-00"]}


def test_sixteen_hosts_explain_children_and_composite() -> None:
    event = load_event("training-job-training.json")
    event["detail"]["ResourceConfig"] = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 16}
    alarm = idle_decision(explain_event(event, Policy(), now=NOW))["alarm"]
    assert len(alarm["PutMetricAlarm"]) == 2 and alarm["PutCompositeAlarm"]["AlarmRule"].count("ALARM(") == 2


def test_late_event_with_a_describe_of_an_ended_job_creates_nothing() -> None:
    event = load_event("training-job-training.json")
    describe = {**event["detail"], "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}
    decision = idle_decision(explain_event(event, Policy(), now=NOW, describe=describe))
    assert decision["action"] == "none" and decision["code"] == "idle.alarm.late-event"


def test_cli_prints_the_alarm_with_the_stack_topic(capsys: Any) -> None:
    assert main(["explain", str(EVENTS / "training-job-training.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    actions = idle_decision(out)["alarm"]["AlarmActions"]
    assert actions == ["arn:aws:sns:us-east-1:123456789012:sagemaker-governance-AlarmTopic"]


def test_explain_json_shows_the_exact_messages_a_decision_sends(capsys: Any) -> None:
    # Given an untagged job's Starting event under a policy that stops non-compliant jobs
    policy = str(EVENTS.parent / "examples" / "policy.yaml")
    assert (
        main(["explain", str(EVENTS / "training-job-starting-untagged.json"), "--policy", policy, "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    # Then the compliance stop's message is shown as the exact Publish request, each form opened up
    (message,) = out["notification"]
    assert (
        message["MessageStructure"] == "json"
        and message["MessageAttributes"]["kind"]["StringValue"] == "compliance"
    )
    assert message["Message"]["default"]["items"][0]["code"] == "compliance.stop.violation"
    assert message["Message"]["https"]["source"] == "custom"
    assert "How to fix:" in message["Message"]["email"]
    # and a decision that tells nobody shows no message
    assert main(["explain", str(EVENTS / "training-job-training.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notification"] == []
