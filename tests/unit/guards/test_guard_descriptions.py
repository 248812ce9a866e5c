"""Every registered guard describes each alarm it plans as this stack's (``AlarmNaming.managed_note``): the
reconciler and the drift check count an alarm under the stack's prefix as the stack's only then (another
stack's prefix may start with ours), so an alarm without it would never be deleted when its job ends."""

from __future__ import annotations

from typing import Any

import pytest

from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, Guard
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

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
