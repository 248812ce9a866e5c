"""CloudWatch alarm adapters: request order, idempotent deletion, error translation, IAM actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sagemaker_governance.adapters.cloudwatch import CloudWatchAlarmLifecycle, CloudWatchAlarmOwnership
from sagemaker_governance.domain.errors import AdapterError, Throttled
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, AlarmState
from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
from tests.builders import job

NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:123456789012:t")


def arn(name: str) -> str:
    return f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{name}"


def plan_for(hosts: int, instance_type: str = "ml.p4d.24xlarge") -> AlarmPlan:
    plan = IDLE.plan(
        job("train-1", ResourceConfig={"InstanceType": instance_type, "InstanceCount": hosts}),
        IdlePolicy(),
        NAMING,
    )
    assert isinstance(plan, AlarmPlan)
    return plan


class IamRecorder:
    """The IAM action of every call (CloudWatch signs as `monitoring`, its IAM prefix is `cloudwatch`)."""

    def __init__(self, client: Any) -> None:
        self.actions: set[str] = set()
        client.meta.events.register(
            "before-call.*.*", lambda model, **_: self.actions.add(f"cloudwatch:{model.name}")
        )


def client() -> Any:
    return boto3.client("cloudwatch", region_name="us-east-1")


def test_moto_stores_the_metric_math_alarm_exactly(aws: None) -> None:
    # moto (which has no composite alarms) keeps metric alarms with their Metrics and tags
    cw = client()
    recorder = IamRecorder(cw)
    plan = plan_for(2, "ml.g5.12xlarge")
    CloudWatchAlarmLifecycle(cw).put(plan)
    (stored,) = cw.describe_alarms(AlarmNames=["gov-idle-train-1"])["MetricAlarms"]
    assert stored["Metrics"] == plan.metric_requests[0]["Metrics"]
    assert stored["Threshold"] == 4.0 and stored["TreatMissingData"] == "notBreaching"
    assert CloudWatchAlarmOwnership(cw, arn).tags("gov-idle-train-1") == {
        "smgov:training-job": "train-1",
        "smgov:managed-by": "gov",
    }
    CloudWatchAlarmLifecycle(cw).reset(["gov-idle-train-1"], "re-armed")
    assert cw.describe_alarms(AlarmNames=["gov-idle-train-1"])["MetricAlarms"][0]["StateValue"] == "OK"
    assert CloudWatchAlarmLifecycle(cw).delete(["gov-idle-train-1"]) == ["gov-idle-train-1"]
    used = recorder.actions - {"cloudwatch:DescribeAlarms"}  # DescribeAlarms: the test's own reads
    # TagResource is not a call of its own: PutMetricAlarm with Tags needs that permission too.
    assert used <= CloudWatchAlarmLifecycle.IAM_ACTIONS | CloudWatchAlarmOwnership.IAM_ACTIONS


def test_children_are_created_before_their_composite() -> None:
    cw = client()
    plan = plan_for(16)
    with Stubber(cw) as stub:
        for request in plan.metric_requests:
            stub.add_response("put_metric_alarm", {}, request)
        assert plan.composite_request is not None
        stub.add_response("put_composite_alarm", {}, plan.composite_request)
        CloudWatchAlarmLifecycle(cw).put(plan)
        stub.assert_no_pending_responses()


def test_lifecycle_adapter_declares_exactly_what_it_calls() -> None:
    cw = client()
    recorder = IamRecorder(cw)
    plan = plan_for(16)
    with Stubber(cw) as stub:
        for _ in plan.metric_requests:
            stub.add_response("put_metric_alarm", {})
        stub.add_response("put_composite_alarm", {})
        stub.add_response("set_alarm_state", {})
        stub.add_response("delete_alarms", {})
        stub.add_response("describe_alarms", {"MetricAlarms": []})
        adapter = CloudWatchAlarmLifecycle(cw)
        adapter.put(plan)
        adapter.reset(["gov-idle-train-1.hosts-1-10"], "x")
        adapter.delete(["gov-idle-train-1"])
        adapter.metric_alarm("gov-idle-train-1.hosts-1-10")
    assert recorder.actions | {"cloudwatch:TagResource"} == CloudWatchAlarmLifecycle.IAM_ACTIONS


def test_delete_falls_back_to_one_by_one_when_an_alarm_is_missing() -> None:
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("delete_alarms", "ResourceNotFound", http_status_code=404)
        stub.add_client_error("delete_alarms", "ResourceNotFound", http_status_code=404)  # composite: gone
        stub.add_response("delete_alarms", {}, {"AlarmNames": ["c1"]})
        deleted = CloudWatchAlarmLifecycle(cw).delete(["composite", "c1"])
    assert deleted == ["c1"]


def test_delete_failure_other_than_not_found_is_raised() -> None:
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("delete_alarms", "InvalidParameterValue", "AlarmNames is invalid")
        with pytest.raises(AdapterError):
            CloudWatchAlarmLifecycle(cw).delete(["child"])


DEPENDED_ON = "Cannot delete gov-idle-train-1.hosts-1-10 as there are composite alarm(s) depending on it"


def test_a_batch_refused_for_its_composites_children_is_deleted_in_order_one_by_one() -> None:
    # Given CloudWatch refuses a composite and its children in one request, as it refuses a child whose
    # composite still exists (the DeleteAlarms reference does not say which it does)
    cw = client()
    names = ["gov-idle-train-1", "gov-idle-train-1.hosts-1-10", "gov-idle-train-1.hosts-11-20"]
    with Stubber(cw) as stub:
        stub.add_client_error(
            "delete_alarms", "ValidationError", DEPENDED_ON, expected_params={"AlarmNames": names}
        )
        for name in names:  # Then the composite goes alone first, then each child
            stub.add_response("delete_alarms", {}, {"AlarmNames": [name]})
        deleted = CloudWatchAlarmLifecycle(cw).delete(names)
        stub.assert_no_pending_responses()
    assert deleted == names


def test_a_child_whose_composite_still_exists_is_refused_loudly() -> None:
    # Given the composite is not among the names (it still depends on the child)
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("delete_alarms", "ValidationError", DEPENDED_ON)
        stub.add_client_error("delete_alarms", "ValidationError", DEPENDED_ON)
        # Then the one-by-one retry is refused too, and the failure is raised, not taken for success
        with pytest.raises(AdapterError):
            CloudWatchAlarmLifecycle(cw).delete(["gov-idle-train-1.hosts-1-10"])


def test_a_delete_still_throttled_after_the_clients_retries_is_reported_as_throttled() -> None:
    # Given CloudWatch answers DeleteAlarms over its rate quota (a Stubber answers past the retry loop)
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("delete_alarms", "ThrottlingException", "Rate exceeded", http_status_code=400)
        # Then the caller can tell it from a failure it cannot defer
        with pytest.raises(Throttled):
            CloudWatchAlarmLifecycle(cw).delete(["a"])


def test_tags_of_a_missing_alarm_is_none_and_other_errors_raise() -> None:
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("list_tags_for_resource", "ResourceNotFoundException", http_status_code=404)
        stub.add_client_error("list_tags_for_resource", "AccessDenied", http_status_code=403)
        ownership = CloudWatchAlarmOwnership(cw, arn)
        assert ownership.tags("gov-idle-x") is None
        with pytest.raises(AdapterError):
            ownership.tags("gov-idle-x")


def test_reset_of_a_missing_alarm_is_fine() -> None:
    cw = client()
    with Stubber(cw) as stub:
        stub.add_client_error("set_alarm_state", "ResourceNotFound", http_status_code=404)
        CloudWatchAlarmOwnership(cw, arn).reset(["gone"], "x")


def test_current_state_reads_the_state_value_and_its_transition_time_of_either_alarm_type() -> None:
    # Stubber checks every request and answer against botocore's cloudwatch model: StateTransitionedTimestamp
    # is a member of both MetricAlarm and CompositeAlarm
    cw = client()
    moved = datetime(2026, 11, 21, 12, 0, 3, 250000, tzinfo=UTC)
    updated = moved + timedelta(minutes=7)  # a composite's StateUpdatedTimestamp moves without a state change
    wanted = {"AlarmNames": ["gov-idle-x"], "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
    composite = {
        "AlarmName": "gov-idle-x",
        "StateValue": "ALARM",
        "StateTransitionedTimestamp": moved,
        "StateUpdatedTimestamp": updated,
    }
    with Stubber(cw) as stub:
        stub.add_response("describe_alarms", {"CompositeAlarms": [composite], "MetricAlarms": []}, wanted)
        stub.add_response(
            "describe_alarms", {"MetricAlarms": [{"AlarmName": "gov-idle-x", "StateValue": "OK"}]}, wanted
        )
        stub.add_response("describe_alarms", {"MetricAlarms": [], "CompositeAlarms": []}, wanted)
        stub.add_client_error("describe_alarms", "Throttling", "Rate exceeded", http_status_code=400)
        ownership = CloudWatchAlarmOwnership(cw, arn)
        assert ownership.current_state("gov-idle-x") == AlarmState("ALARM", moved)
        assert ownership.current_state("gov-idle-x") is None  # no StateTransitionedTimestamp: not guessed
        assert ownership.current_state("gov-idle-x") is None  # no such alarm
        with pytest.raises(AdapterError):
            ownership.current_state("gov-idle-x")


def test_definition_reads_what_an_alarm_of_either_type_was_planned_to_watch_and_its_terms() -> None:
    # A composite's child's description tells the stopper whether it fires on pinned GPUs too (the judge off), its
    # terms whether it fires on stricter terms than the guard plans now: its parent's notification repeats neither
    cw = client()
    wanted = {"AlarmNames": ["gov-idle-x.hosts-1-10"], "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
    query = {
        "Id": "m1",
        "MetricStat": {"Metric": {"MetricName": "GPUUtilization"}, "Period": 60, "Stat": "Average"},
    }
    child = {
        "AlarmName": "gov-idle-x.hosts-1-10",
        "AlarmDescription": "idle guard ...: a hang trigger",
        "Threshold": 80.0,
        "ComparisonOperator": "LessThanThreshold",
        "EvaluationPeriods": 30,
        "DatapointsToAlarm": 30,
        "Metrics": [query, {"Id": "busiest", "Expression": "MAX([m1])", "ReturnData": True}],
    }
    with Stubber(cw) as stub:
        stub.add_response("describe_alarms", {"MetricAlarms": [child], "CompositeAlarms": []}, wanted)
        stub.add_response("describe_alarms", {"MetricAlarms": [{"AlarmName": child["AlarmName"]}]}, wanted)
        stub.add_response("describe_alarms", {"MetricAlarms": [], "CompositeAlarms": []}, wanted)
        stub.add_client_error("describe_alarms", "Throttling", "Rate exceeded", http_status_code=400)
        ownership = CloudWatchAlarmOwnership(cw, arn)
        name = "gov-idle-x.hosts-1-10"
        read = ownership.definition(name)
        assert read is not None and read.description == child["AlarmDescription"]
        assert read.terms == {
            "threshold": 80.0,
            "comparison": "LessThanThreshold",
            "period_seconds": 60,
            "evaluation_periods": 30,
            "datapoints_to_alarm": 30,
        }
        bare = ownership.definition(name)
        assert bare is not None and (bare.description, bare.terms) == (None, {})  # no description, no terms
        assert ownership.definition(name) is None  # no such alarm
        with pytest.raises(AdapterError):
            ownership.definition(name)


def test_metric_alarm_reads_one_named_metric_alarm() -> None:
    # The lifecycle asks for metric alarms only, by name: the grant it needs can be scoped to alarm ARNs
    cw = client()
    wanted = {"AlarmNames": ["gov-idle-x.progress"], "AlarmTypes": ["MetricAlarm"]}
    with Stubber(cw) as stub:
        for enabled in (True, False):
            answer = {"MetricAlarms": [{"AlarmName": "gov-idle-x.progress", "ActionsEnabled": enabled}]}
            stub.add_response("describe_alarms", answer, wanted)
        stub.add_response("describe_alarms", {"MetricAlarms": [], "CompositeAlarms": []}, wanted)
        stub.add_client_error("describe_alarms", "AccessDenied", "not authorized", http_status_code=403)
        lifecycle = CloudWatchAlarmLifecycle(cw)
        for enabled in (True, False):
            alarm = lifecycle.metric_alarm("gov-idle-x.progress")
            assert alarm is not None and alarm["ActionsEnabled"] is enabled
        assert lifecycle.metric_alarm("gov-idle-x.progress") is None  # no such alarm
        with pytest.raises(AdapterError):
            lifecycle.metric_alarm("gov-idle-x.progress")


def test_metric_alarm_follows_what_was_put_and_switched(aws: None) -> None:
    cw = client()
    recorder = IamRecorder(cw)
    lifecycle = CloudWatchAlarmLifecycle(cw)
    lifecycle.put(plan_for(2, "ml.g5.12xlarge"))
    alarm = lifecycle.metric_alarm("gov-idle-train-1")
    assert alarm is not None and alarm["ActionsEnabled"] is True and alarm["Metrics"]  # its queries too
    cw.disable_alarm_actions(AlarmNames=["gov-idle-train-1"])
    alarm = lifecycle.metric_alarm("gov-idle-train-1")
    assert alarm is not None and alarm["ActionsEnabled"] is False
    assert lifecycle.metric_alarm("gov-idle-nothing") is None
    assert recorder.actions - {"cloudwatch:DisableAlarmActions"} <= CloudWatchAlarmLifecycle.IAM_ACTIONS
