"""The idle-alarm planner: exact requests, checked against botocore's own parameter validation."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.idle import (
    AlarmNaming,
    AlarmPlan,
    IdlePolicy,
    NoAlarm,
    alarm_names,
    plan_idle_alarm,
)
from sagemaker_governance.domain.instances import GPU_COUNTS
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

TOPIC = "arn:aws:sns:us-east-1:123456789012:gov-AlarmTopic"
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn=TOPIC)
CLOUDWATCH = botocore.session.get_session().get_service_model("cloudwatch")


def assert_valid(operation: str, request: dict[str, Any]) -> None:
    report = ParamValidator().validate(request, CLOUDWATCH.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def assert_plan_valid(plan: AlarmPlan) -> None:
    for request in plan.metric_alarms:
        assert_valid("PutMetricAlarm", request)
        stats = [q for q in request.get("Metrics", []) if "MetricStat" in q]
        assert len(stats) <= 10
        assert request["TreatMissingData"] == "notBreaching"
    if plan.composite_alarm is not None:
        assert_valid("PutCompositeAlarm", plan.composite_alarm)


def hosts_watched(plan: AlarmPlan) -> list[str]:
    out = []
    for request in plan.metric_alarms:
        for dim in request.get("Dimensions", []):
            out.append(dim["Value"])
        for query in request.get("Metrics", []):
            if "MetricStat" in query:
                out += [d["Value"] for d in query["MetricStat"]["Metric"]["Dimensions"]]
    return out


def planned(**resource_config: Any) -> AlarmPlan:
    plan = plan_idle_alarm(job("train-1", ResourceConfig=resource_config), IdlePolicy(), NAMING)
    assert isinstance(plan, AlarmPlan), plan
    assert_plan_valid(plan)
    return plan


def test_one_gpu_job_gets_a_single_metric_alarm() -> None:
    plan = planned(InstanceType="ml.g5.2xlarge", InstanceCount=1)
    (request,) = plan.metric_alarms
    assert plan.composite_alarm is None
    assert request["AlarmName"] == "gov-idle-train-1"
    assert request["Namespace"] == "/aws/sagemaker/TrainingJobs"
    assert request["MetricName"] == "GPUUtilization"
    assert request["Dimensions"] == [{"Name": "Host", "Value": "train-1/algo-1"}]
    assert request["Threshold"] == 1.0
    assert request["ComparisonOperator"] == "LessThanThreshold"
    assert (request["EvaluationPeriods"], request["DatapointsToAlarm"], request["Period"]) == (30, 30, 60)
    assert request["AlarmActions"] == [TOPIC]
    assert {"Key": "smgov:training-job", "Value": "train-1"} in request["Tags"]
    assert plan.request() == request


def test_eight_gpu_host_threshold_is_scaled_by_eight() -> None:
    plan = planned(InstanceType="ml.p4d.24xlarge", InstanceCount=1)
    assert plan.metric_alarms[0]["Threshold"] == 8.0


def test_two_hosts_alarm_on_the_busiest_host_with_metric_math() -> None:
    plan = planned(InstanceType="ml.g5.12xlarge", InstanceCount=2)
    (request,) = plan.metric_alarms
    assert "MetricName" not in request
    assert hosts_watched(plan) == ["train-1/algo-1", "train-1/algo-2"]
    expression = [q for q in request["Metrics"] if q.get("ReturnData")]
    assert expression == [
        {
            "Id": "busiest",
            "Expression": "MAX([m1, m2])",
            "Label": "GPUUtilization of the busiest host (algo-1..algo-2)",
            "ReturnData": True,
        }
    ]
    assert request["Threshold"] == 4.0


def test_sixteen_hosts_use_child_alarms_and_one_composite() -> None:
    plan = planned(InstanceType="ml.p4d.24xlarge", InstanceCount=16)
    first, second = plan.metric_alarms
    assert first["AlarmName"] == "gov-idle-train-1.hosts-1-10"
    assert second["AlarmName"] == "gov-idle-train-1.hosts-11-16"
    assert hosts_watched(plan) == [f"train-1/algo-{n}" for n in range(1, 17)]
    assert first["AlarmActions"] == [] and second["AlarmActions"] == []
    assert first["Threshold"] == second["Threshold"] == 8.0
    composite = plan.composite_alarm
    assert composite is not None
    assert composite["AlarmName"] == "gov-idle-train-1"
    assert (
        composite["AlarmRule"] == 'ALARM("gov-idle-train-1.hosts-1-10") AND ALARM("gov-idle-train-1.hosts-11-16")'
    )
    assert composite["AlarmActions"] == [TOPIC]
    assert set(plan.request()) == {"PutMetricAlarm", "PutCompositeAlarm"}
    names = alarm_names("train-1", 16, NAMING)
    assert names.all[0] == "gov-idle-train-1"  # composite first when deleting


def test_heterogeneous_cluster_covers_every_host_and_scales_by_the_gpu_group() -> None:
    plan = planned(
        InstanceGroups=[
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4},
        ]
    )
    assert hosts_watched(plan) == [f"train-1/algo-{n}" for n in range(1, 7)]
    assert plan.metric_alarms[0]["Threshold"] == 8.0
    assert "scaling_note" in plan.evidence


def test_mixed_gpu_groups_scale_by_the_smallest_so_a_busy_small_host_never_looks_idle() -> None:
    plan = planned(
        InstanceGroups=[
            {"InstanceGroupName": "big", "InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
            {"InstanceGroupName": "small", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
        ]
    )
    # A fully busy 1-GPU host reads 100: with an 8x scaling a 20% team floor (160) would call it idle.
    assert plan.metric_alarms[0]["Threshold"] == 1.0


@pytest.mark.parametrize(
    ("instance_type", "why"),
    [
        ("ml.m5.xlarge", "CPU-only"),
        ("ml.trn1.32xlarge", "Trainium"),
        ("ml.inf2.24xlarge", "Inferentia"),
        ("ml.p9.48xlarge", "cannot size"),
    ],
)
def test_jobs_without_gpu_utilization_get_no_alarm_and_a_reason(instance_type: str, why: str) -> None:
    plan = plan_idle_alarm(
        job("train-1", ResourceConfig={"InstanceType": instance_type, "InstanceCount": 2}), IdlePolicy(), NAMING
    )
    assert isinstance(plan, NoAlarm)
    assert why in plan.reason


def test_unknown_group_in_a_heterogeneous_cluster_means_no_alarm() -> None:
    plan = plan_idle_alarm(
        job(
            "train-1",
            ResourceConfig={
                "InstanceGroups": [
                    {"InstanceGroupName": "a", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
                    {"InstanceGroupName": "b", "InstanceType": "ml.p7.48xlarge", "InstanceCount": 1},
                ]
            },
        ),
        IdlePolicy(),
        NAMING,
    )
    assert isinstance(plan, NoAlarm)


def test_team_override_requires_a_minimum_utilization() -> None:
    policy = Policy.model_validate(
        {"idle": {"threshold_percent": 1}, "teams": {"nlp": {"idle": {"threshold_percent": 60}}}}
    )
    nlp_job = job(
        "train-1", tags={"team": "nlp"}, ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}
    )
    plan = plan_idle_alarm(nlp_job, policy.for_job(nlp_job).idle, NAMING)
    assert isinstance(plan, AlarmPlan)
    assert plan.metric_alarms[0]["Threshold"] == 240.0
    other = job(
        "train-2", tags={"team": "cv"}, ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}
    )
    plan = plan_idle_alarm(other, policy.for_job(other).idle, NAMING)
    assert isinstance(plan, AlarmPlan) and plan.metric_alarms[0]["Threshold"] == 4.0


def test_window_and_grace_come_from_the_policy() -> None:
    idle = IdlePolicy(period_seconds=300, evaluation_periods=6, datapoints_to_alarm=5, grace_minutes=45)
    plan = plan_idle_alarm(job("train-1"), idle, NAMING)
    assert isinstance(plan, AlarmPlan)
    request = plan.metric_alarms[0]
    assert (request["Period"], request["EvaluationPeriods"], request["DatapointsToAlarm"]) == (300, 6, 5)
    assert plan.evidence["grace_minutes"] == 45


@pytest.mark.parametrize(
    "fields",
    [
        {"datapoints_to_alarm": 31, "evaluation_periods": 30},
        {"period_seconds": 90},
        {"period_seconds": 3600, "evaluation_periods": 25, "datapoints_to_alarm": 25},
        {"threshold_percent": 0},
        {"prices": {"ml.p5.48xlarge": -1}},
        {"unknown": 1},
    ],
)
def test_invalid_idle_policies_are_rejected(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        IdlePolicy.model_validate(fields)


def test_docstring_example_is_a_valid_policy() -> None:
    doc = IdlePolicy.__doc__ or ""
    example = yaml.safe_load(doc.split("Example:", 1)[1])
    assert Policy.model_validate(example).idle.prices == {"ml.p4d.24xlarge": 37.69}


_GPU_TYPES = [f"ml.{family}.{size}" for family, sizes in GPU_COUNTS.items() for size in sizes]


@settings(max_examples=60, deadline=None)
@given(
    instance_type=st.sampled_from(_GPU_TYPES),
    hosts=st.integers(min_value=1, max_value=120),
    threshold=st.floats(min_value=0.1, max_value=100),
    periods=st.integers(min_value=1, max_value=60),
    name=st.from_regex(r"[a-zA-Z0-9](-?[a-zA-Z0-9]){0,40}", fullmatch=True),
)
def test_every_planned_request_passes_botocore_validation(
    instance_type: str, hosts: int, threshold: float, periods: int, name: str
) -> None:
    idle = IdlePolicy(threshold_percent=threshold, evaluation_periods=periods, datapoints_to_alarm=periods)
    plan = plan_idle_alarm(
        job(name, ResourceConfig={"InstanceType": instance_type, "InstanceCount": hosts}), idle, NAMING
    )
    assert isinstance(plan, AlarmPlan)
    assert_plan_valid(plan)
    assert sorted(hosts_watched(plan), key=lambda h: int(h.rsplit("-", 1)[1])) == [
        f"{name}/algo-{n}" for n in range(1, hosts + 1)
    ]


def test_the_validation_helper_does_catch_a_bad_request() -> None:
    plan = planned(InstanceType="ml.g5.2xlarge", InstanceCount=1)
    bad = {**plan.metric_alarms[0], "EvaluationPeriods": "thirty", "AlarmName": "x" * 256}
    with pytest.raises(AssertionError):
        assert_valid("PutMetricAlarm", bad)
