"""`smgov explain` on a composite alarm's notification (a job above 10 hosts): the stopper is wired as deployed.

A composite's notification names its triggering child but repeats neither the child's description nor its
terms; deployed, the stopper reads the child with DescribeAlarms. Offline, explain takes the child as its guard
plans it now for the described job: without that, explain showed a verdict the deployed stopper never reaches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smgov.cli.main import main
from tests.conftest import EVENTS

COMPOSITE = EVENTS / "idle-alarm-composite.json"
NOTIFIED_AT = "2025-11-21T10:40:12Z"


def describe_16_hosts(tmp_path: Path, instance_type: str) -> Path:
    """The notified job (llm-pretrain-16x-3): 16 hosts, in Training for five hours, tagged for a team."""
    start, training = 1763701200000, 1763702400000  # 05:00 and 05:20 on 2025-11-21, UTC
    describe = {
        "TrainingJobName": "llm-pretrain-16x-3",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/llm-pretrain-16x-3",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 16, "VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 432000},
        "CreationTime": str(start),
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": str(start), "EndTime": str(training)},
            {"Status": "Training", "StartTime": str(training)},
        ],
        "Tags": [{"Key": "team", "Value": "nlp"}, {"Key": "owner", "Value": "ana"}],
    }
    path = tmp_path / "describe.json"
    path.write_text(json.dumps(describe))
    return path


def explain(tmp_path: Path, describe: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: enforce\njudge:\n  enabled: false\n")  # no judge: the idle alarm alone decides
    args = ["explain", str(COMPOSITE), "--describe", str(describe), "--policy", str(policy), "--at", NOTIFIED_AT]
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_composite_is_judged_with_its_child_as_planned_as_the_deployed_stopper_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a 16-host job's idle composite in ALARM, under a policy whose alarms carry no pinned trigger
    describe = describe_16_hosts(tmp_path, "ml.p4d.24xlarge")
    # When explained
    result = explain(tmp_path, describe, capsys)
    # Then the verdict is the deployed stopper's (its child read as planned: plain idleness, no pinned trigger)
    (decision,) = result["decisions"]
    assert (decision["code"], decision["action"]) == ("idle.stop.idle", "stop")
    assert result["stopped"] == ["llm-pretrain-16x-3"]
    # and what explain assumed in the deployed stopper's reads is said
    assert "triggering child" in result["assumed"] and "DescribeAlarms" in result["assumed"]


def test_an_instance_type_the_table_lacks_is_said_to_be_unasked_not_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the same job on a GPU type the service's table does not know
    describe = describe_16_hosts(tmp_path, "ml.p9x.48xlarge")
    # When explained
    result = explain(tmp_path, describe, capsys)
    # Then the result says the type was not sized: EC2, which the deployed stopper asks, is not asked offline
    assert "ml.p9x.48xlarge" in result["assumed"] and "EC2" in result["assumed"]
