"""The issue's "done when" outcomes, run against whatever template.yaml deploys.

Each capability test first checks that the template deploys the capability (generically: a function
receives a real-shaped event of the relevant state, or is subscribed to an SNS topic) and is skipped
with the reason otherwise, so these tests start running by themselves once the idle guard and
auto-resume / Spot fallback are merged into the template.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.events.models import EventPattern

from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.report import simulate
from smgov.simulation.scenario import Scenario, builtin_scenario
from smgov.simulation.template import eventbridge_patterns

HOLIDAY_AT_STAKE = 17_280.0


def _probe(status: str, secondary: str, **extra: Any) -> dict[str, Any]:
    fake = FakeSageMaker(lambda: datetime(2026, 12, 24, 17, 0, tzinfo=UTC))
    fake.launch(
        {
            "TrainingJobName": "probe",
            "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
            "RoleArn": "arn:aws:iam::123456789012:role/r",
            "OutputDataConfig": {"S3OutputPath": "s3://b/"},
            "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800},
            "EnableManagedSpotTraining": True,
            "CheckpointConfig": {"S3Uri": "s3://b/checkpoints/"},
            "Tags": [{"Key": "team", "Value": "t"}, {"Key": "cost-center", "Value": "c"}],
        }
    )
    fake.transition("probe", "InProgress", "Downloading")
    fake.transition("probe", "InProgress", "Training")
    if (status, secondary) != ("InProgress", "Training"):
        fake.transition("probe", status, secondary, **extra)
    return fake.event("probe")


def routed(template: dict[str, Any], event: dict[str, Any]) -> set[str]:
    """The functions the template's rules deliver this event to."""
    return {
        function
        for (function, _), pattern in eventbridge_patterns(template).items()
        if EventPattern.load(json.dumps(pattern)).matches_event(event)
    }


def granted(template: dict[str, Any], function: str) -> set[str]:
    """The IAM actions of a function's inline policy statements."""
    actions: set[str] = set()
    for policy in template["Resources"][function]["Properties"].get("Policies", []):
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            action = statement.get("Action", [])
            actions.update([action] if isinstance(action, str) else action)
    return actions


def sns_subscribers(template: dict[str, Any]) -> set[str]:
    out = set()
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            if any(e.get("Type") == "SNS" for e in resource["Properties"].get("Events", {}).values()):
                out.add(name)
        elif resource["Type"] == "AWS::SNS::Subscription" and resource["Properties"].get("Protocol") == "lambda":
            endpoint = resource["Properties"].get("Endpoint")
            if isinstance(endpoint, dict) and "Fn::GetAtt" in endpoint:
                out.add(endpoint["Fn::GetAtt"][0])
    return out


def _able(template: dict[str, Any], functions: set[str], action: str) -> bool:
    return any(action in granted(template, f) for f in functions)


def require_idle_guard(template: dict[str, Any]) -> None:
    if not _able(template, routed(template, _probe("InProgress", "Training")), "cloudwatch:PutMetricAlarm"):
        pytest.skip("no function receives Training events and may create alarms: no idle guard deployed")
    if not _able(template, sns_subscribers(template), "sagemaker:StopTrainingJob"):
        pytest.skip("no SNS-subscribed function may stop training jobs: no alarm stopper deployed")


def require_auto_resume(template: dict[str, Any]) -> None:
    failed = _probe("Failed", "Failed", failure_reason="InternalServerError: We encountered an internal error.")
    if not _able(template, routed(template, failed), "sagemaker:CreateTrainingJob"):
        pytest.skip("no function receives Failed events and may create training jobs: no auto-resume deployed")


def require_spot_fallback(template: dict[str, Any]) -> None:
    receivers = routed(template, _probe("InProgress", "Interrupted"))
    receivers |= routed(template, _probe("Stopped", "MaxWaitTimeExceeded"))
    if not _able(template, receivers, "sagemaker:CreateTrainingJob"):
        pytest.skip(
            "no function receives Interrupted / MaxWaitTimeExceeded events and may create training jobs: "
            "no Spot fallback deployed"
        )


def small_fleet(size: int) -> Scenario:
    fleet = builtin_scenario("fleet")
    assert fleet.fleet is not None
    return fleet.model_copy(update={"fleet": fleet.fleet.model_copy(update={"size": size})})


# ---- true today -----------------------------------------------------------------------------------


def test_fleet_has_no_false_stops_and_no_function_errors(template: dict[str, Any]) -> None:
    report = simulate(small_fleet(40), seed=1, template=template)
    assert report["totals"]["false_stops"] == 0
    assert report["counters"]["lambda_errors"] == 0, report["errors"]


# ---- once the capabilities are deployed ------------------------------------------------------------


def test_holiday_weekend_stall_is_stopped_within_the_idle_window_and_saves_the_weekend(
    template: dict[str, Any],
) -> None:
    require_idle_guard(template)
    report = simulate(builtin_scenario("holiday-weekend"), template=template, include_series=True)
    held = next(j for j in report["jobs"] if j["name"] == "llm-pretrain-holiday")
    assert report["counters"]["lambda_errors"] == 0, report["errors"]
    assert held["stopped_at_minute"] is not None, "the stalled job was never stopped"
    alarms = held["series"]["alarms"]
    assert alarms, "no alarm watches the job's hosts"
    period = min(a["period_seconds"] for a in alarms) // 60
    window = min(a["period_seconds"] * a["evaluation_periods"] for a in alarms) // 60
    stall = held["stalled_at_minute"]
    first_full_period = -(-stall // period) * period  # a stall mid-period shows from the next period on
    assert held["stopped_at_minute"] <= first_full_period + window + 2, (stall, held["stopped_at_minute"], window)
    assert held["baseline_cost_usd"] == HOLIDAY_AT_STAKE
    assert held["saved_usd"] >= 0.9 * HOLIDAY_AT_STAKE
    assert report["totals"]["false_stops"] == 0


def test_hardware_failure_is_resumed_from_its_checkpoint(template: dict[str, Any]) -> None:
    require_auto_resume(template)
    report = simulate(builtin_scenario("hardware-failure"), template=template)
    jobs = {j["name"]: j for j in report["jobs"]}
    original = jobs["resnet-long-run"]
    clones = [j for j in report["jobs"] if j["resumed_from"] == "resnet-long-run"]
    assert report["counters"]["lambda_errors"] == 0, report["errors"]
    assert original["final_status"] == "Failed"
    assert len(clones) == 1, "exactly one clone, even with duplicate events"
    clone = clones[0]
    assert clone["final_status"] == "Completed"
    # It resumed from the checkpoint: the remaining 14 of 40 hours, not the whole run again
    assert clone["cost_usd"] < 0.6 * original["cost_usd"]
    assert report["totals"]["false_stops"] == 0


def test_spot_storm_falls_back_to_on_demand_and_completes(template: dict[str, Any]) -> None:
    require_spot_fallback(template)
    report = simulate(builtin_scenario("spot-storm"), template=template)
    clones = [j for j in report["jobs"] if j["resumed_from"] == "bert-spot-storm"]
    assert report["counters"]["lambda_errors"] == 0, report["errors"]
    assert len(clones) == 1
    clone = clones[0]
    assert clone["spot"] is False
    assert clone["final_status"] == "Completed"
    original = next(j for j in report["jobs"] if j["name"] == "bert-spot-storm")
    assert original["final_status"] == "Stopped"
    assert original["baseline_final_status"] == "MaxWaitTimeExceeded"  # unfinished without governance
    assert report["totals"]["false_stops"] == 0


def test_fleet_has_no_false_stops_and_no_missed_stalls(template: dict[str, Any]) -> None:
    require_idle_guard(template)
    report = simulate(small_fleet(60), seed=5, template=template)
    assert report["counters"]["lambda_errors"] == 0, report["errors"]
    stalled = [j for j in report["jobs"] if j["stalled_at_minute"] is not None]
    assert stalled, "the fleet sample has stalled jobs"
    assert report["totals"]["false_stops"] == 0
    assert report["totals"]["missed_stalls"] == 0


def require_progress_guard(template: dict[str, Any]) -> None:
    require_idle_guard(template)
    if not _able(template, sns_subscribers(template), "cloudwatch:EnableAlarmActions"):
        pytest.skip("no SNS-subscribed function may arm alarms: no progress guard deployed")


def test_a_hang_at_full_gpu_utilization_is_stopped_by_the_progress_guard_only(template: dict[str, Any]) -> None:
    require_progress_guard(template)
    report = simulate(builtin_scenario("nccl-hang"), template=template)
    assert report["counters"]["lambda_errors"] == 0, report["errors"]
    jobs = {j["name"]: j for j in report["jobs"]}
    hung = jobs["llm-nccl-hang"]
    # Given a hang at 100% GPU utilization: the idle guard never fires, the progress guard stops it
    window = 120  # ProgressWindowMinutes' default
    assert hung["stalled_at_minute"] is not None
    assert hung["stopped_at_minute"] is not None, "the hung job was never stopped"
    assert hung["stopped_at_minute"] <= hung["stalled_at_minute"] + window + 2
    stops = [a for a in hung["actions"] if a["action"] == "stop"]
    assert [a["rule"] for a in stops] == ["progress-guard"]
    # A regex that never matches publishes nothing: never armed, never stopped
    never = jobs["regex-never-matches"]
    assert never["final_status"] == "Completed" and never["stopped_at_minute"] is None
    assert not [a for a in never["actions"] if a["action"] == "arm-alarm"]
    # No metric definitions: no progress alarm at all
    plain = jobs["no-metric-definitions"]
    assert not [a for a in plain["actions"] if a["rule"] == "progress-guard"]
    assert report["totals"]["false_stops"] == 0
    assert report["totals"]["missed_stalls"] == 0
