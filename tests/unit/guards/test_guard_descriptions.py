"""Every registered guard describes each alarm it plans as this stack's (``AlarmNaming.managed_note``): the
reconciler and the drift check count an alarm under the stack's prefix as the stack's only then (another
stack's prefix may start with ours), so an alarm without it would never be deleted when its job ends."""

from __future__ import annotations

from typing import Any

import pytest

from sagemaker_governance.domain.guards.base import (
    PINNED_TRIGGER_MARK,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Guard,
)
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.progress import MAX_METRICS
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

# PutMetricAlarm's and PutCompositeAlarm's AlarmDescription: at most 1,024 characters (botocore's model)
DESCRIPTION_LIMIT = 1024
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:alarms")
POLICY = Policy.model_validate({"efficiency": {"enabled": True, "stop_after_notices": 1}})
LOSS = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
}


@pytest.mark.parametrize("hosts", [1, 12], ids=["one-host", "composite"])
@pytest.mark.parametrize("guard", GUARDS, ids=[g.name for g in GUARDS])
def test_every_planned_alarm_is_described_as_this_stacks(guard: Guard[Any], hosts: int) -> None:
    # Given a GPU job every guard watches (a progress metric, the minimum-utilization guard on)
    watched = job(
        "job-1",
        SecondaryStatus="Training",
        AlgorithmSpecification=LOSS,
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 50},
    )
    # When the guard plans its alarms, then each request says the stack made it, and no other stack did
    plan = guard.plan(watched, guard.config(POLICY), NAMING)
    assert isinstance(plan, AlarmPlan)
    other = AlarmNaming(prefix="gov-idle-b-idle-", managed_by="gov-idle-b")
    for alarm in plan.alarms:
        description = alarm.request.get("AlarmDescription")
        assert NAMING.describes_ours(description), alarm.name
        assert not other.describes_ours(description)


# The longest description each guard can write: a stack name as long as ``AlarmNaming`` admits, a job name
# of SageMaker's 63 characters, and as many progress metrics as one alarm watches, each named with
# SageMaker's 255 characters (``MetricDefinitions[].Name``).
LONGEST_NAMING = AlarmNaming(prefix="p" * 160, managed_by="s" * 256, alarm_topic_arn="arn:aws:sns:us-east-1:1:a")
LONG_METRICS = [f"{i:02d}:" + "m" * 252 for i in range(MAX_METRICS)]
LONGEST_POLICY = Policy.model_validate(
    {"efficiency": {"enabled": True, "stop_after_notices": 1}, "progress": {"metric_names": LONG_METRICS}}
)


@pytest.mark.parametrize("hosts", [1, 12], ids=["one-host", "composite"])
@pytest.mark.parametrize("guard", GUARDS, ids=[g.name for g in GUARDS])
def test_the_longest_description_keeps_the_managed_note(guard: Guard[Any], hosts: int) -> None:
    # Given the longest names a job and a stack can have, and ten progress metrics of 255 characters
    watched = job(
        "j" * 63,
        SecondaryStatus="Training",
        AlgorithmSpecification={
            "TrainingImage": "img:1",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": n, "Regex": "x=([0-9.]+)"} for n in LONG_METRICS],
        },
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 50},
    )
    # When the guard plans its alarms
    plan = guard.plan(watched, guard.config(LONGEST_POLICY), LONGEST_NAMING)
    assert isinstance(plan, AlarmPlan)
    # Then every description fits CloudWatch's 1,024 characters and still ends with the stack's note
    for alarm in plan.alarms:
        description = alarm.request["AlarmDescription"]
        assert len(description) <= DESCRIPTION_LIMIT, alarm.name
        assert description.endswith(LONGEST_NAMING.managed_note), alarm.name
        assert LONGEST_NAMING.describes_ours(description), alarm.name


def test_the_idle_guards_hang_trigger_mark_is_never_cut() -> None:
    # Given the longest stack and job names, the idle guard's pinned (hang) trigger on (the default)
    watched = job(
        "j" * 63,
        SecondaryStatus="Training",
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 12, "VolumeSizeInGB": 50},
    )
    # When it plans its alarms
    plan = IDLE.plan(watched, IDLE.config(LONGEST_POLICY), LONGEST_NAMING)
    assert isinstance(plan, AlarmPlan)
    # Then the mark the stopper looks for in a notification's description survives whole
    (top,) = [a for a in plan.alarms if a.kind is AlarmKind.COMPOSITE]
    assert f"{PINNED_TRIGGER_MARK}. {LONGEST_NAMING.managed_note}" in top.request["AlarmDescription"]


def test_describe_cuts_the_body_and_keeps_the_note() -> None:
    # Given a body longer than a description can hold
    naming = AlarmNaming(prefix="gov-idle-", managed_by="gov")
    # When it is made into a description, then the body's end gives way (marked), never the note
    described = naming.describe("x" * 2000)
    assert len(described) == DESCRIPTION_LIMIT
    assert described.endswith(f"x... {naming.managed_note}")
    # and a body that fits is kept whole
    assert naming.describe("short") == f"short. {naming.managed_note}"
