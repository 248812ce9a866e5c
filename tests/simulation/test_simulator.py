"""The fleet simulator: lifecycle and costs on the virtual clock, routing by template.yaml, the alarm path."""

from __future__ import annotations

import copy
import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SnsModel
from pydantic import ValidationError

from smgov.simulation.engine import Simulation
from smgov.simulation.report import simulate
from smgov.simulation.scenario import (
    DEFAULT_SET,
    builtin_names,
    builtin_scenario,
    parse_scenario,
)
from tests.builders import SCENARIO_TAGS, sim_job, sim_scenario
from tests.simulation.toy_guard import IDLE_MINUTES, with_toy_guard

TAGS = SCENARIO_TAGS


scenario = sim_scenario


def job(name: str, **fields: Any) -> dict[str, Any]:
    return sim_job(name, **{"instance_count": 2, **fields})


# ---- scenarios -----------------------------------------------------------------------------------


def test_every_builtin_scenario_is_valid_and_the_default_set_exists() -> None:
    assert set(DEFAULT_SET) <= set(builtin_names())
    for name in builtin_names():
        assert builtin_scenario(name).expand(seed=1)


def test_the_scenario_reference_in_the_docs_is_a_valid_scenario() -> None:
    # Given the scenario file reference docs/simulator.md shows a user (every field, with comments)
    text = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    (reference,) = [block for block in re.findall(r"```yaml\n(.*?)```", text, re.S) if "\njobs:" in block]
    # Then it loads as written, and its jobs expand
    assert parse_scenario(reference, "docs/simulator.md").expand(seed=1)


def test_fleet_is_a_few_hundred_jobs_drawn_reproducibly_from_the_seed() -> None:
    fleet = builtin_scenario("fleet")
    first, again, other = fleet.expand(seed=7), fleet.expand(seed=7), fleet.expand(seed=8)
    assert 200 <= len(first) <= 500
    assert first == again
    assert first != other
    kinds = {j.name.rsplit("-", 1)[0] for j in first}
    assert {"llm-pretrain-holiday", "untagged-experiment", "resnet-long-run", "bert-spot-storm"} <= kinds


def test_bad_scenarios_are_rejected_with_clear_errors() -> None:
    with pytest.raises(ValidationError, match="instance_type"):
        scenario({"name": "x", "script": {"train_hours": 1}})
    with pytest.raises(ValidationError, match="fail_after_hours"):
        scenario(job("x", script={"train_hours": 1, "fail_after_hours": 2}))
    with pytest.raises(ValidationError, match="extra"):
        parse_scenario("name: x\njobs: []\nwhatever: 1\n")
    # Late last lines of a failing host, with no host named to fail, would hold nothing
    with pytest.raises(ValidationError, match="failure_log_late_minutes needs a failure_host"):
        scenario(job("x", script={"train_hours": 2, "fail_after_hours": 1, "failure_log_late_minutes": 3}))
    # A name SageMaker's CreateTrainingJob would refuse (the service's own job-name rule)
    for bad in ("under_score", "-leading-dash", "x" * 64):
        with pytest.raises(ValidationError, match="name"):
            scenario(job(bad))


# ---- lifecycle and costs (no governance: no AWS at all) ------------------------------------------


def test_on_demand_cost_is_billable_minutes_times_the_cluster_price() -> None:
    # Given 2 instances at $10/h: Starting 4 min (not billed), Downloading 3, Training 180, Uploading 2
    result = Simulation(scenario(job("a")), governed=False).run()
    run = result.jobs["a"]
    assert (run.final_status, run.ended_at, run.billable) == ("Completed", 189, 185)
    assert run.cost == pytest.approx(185 * 20 / 60)


def test_spot_interruption_rolls_back_to_the_checkpoint_and_waits_unbilled() -> None:
    # Given a Spot job interrupted 60 minutes after creation, checkpointing every 30 training minutes:
    # billed 4..60 (56 min), waits 20, restarts (4 unbilled + 3), trains the remaining 90 min from
    # minute 30, uploads 2 -> ends at 179 with 56 + 95 billable minutes at 35% of the On-Demand price.
    spot = job("s", spot=True, script={"train_hours": 2, "interruptions_at_minutes": [60]})
    run = Simulation(scenario(spot), governed=False).run().jobs["s"]
    assert (run.final_status, run.interruptions, run.ended_at, run.billable) == ("Completed", 1, 179, 151)
    assert run.cost == pytest.approx(151 * 20 * 0.35 / 60)


def test_holiday_weekend_baseline_is_the_17280_dollar_story() -> None:
    run = Simulation(builtin_scenario("holiday-weekend"), governed=False).run().jobs["llm-pretrain-holiday"]
    assert (run.final_status, run.final_secondary) == ("Stopped", "MaxRuntimeExceeded")
    assert run.cost == pytest.approx(17_280)
    assert run.first_stall == 4 + 3 + 60


def test_spot_storm_baseline_ends_unfinished_at_max_wait() -> None:
    run = Simulation(builtin_scenario("spot-storm"), governed=False).run().jobs["bert-spot-storm"]
    assert (run.final_status, run.final_secondary) == ("Stopped", "MaxWaitTimeExceeded")
    assert run.ended_at == 16 * 60 + 1  # one minute Stopping after the limit
    assert run.interruptions >= 5


def status_changes(sim: Simulation, name: str) -> list[tuple[int, str, str]]:
    """Every (minute, status, secondary status) job ``name`` emitted a state-change event in, in order."""
    seen: list[tuple[int, str, str]] = []
    emit = sim.lifecycle.emit

    def recording(job: str) -> None:
        if job == name:
            described = sim.fake.jobs[job]
            seen.append((sim.now, described["TrainingJobStatus"], described["SecondaryStatus"]))
        emit(job)

    sim.lifecycle.emit = recording
    return seen


@pytest.mark.parametrize(
    ("scenario_name", "job_name", "limit", "secondary"),
    [
        ("holiday-weekend", "llm-pretrain-holiday", None, "MaxRuntimeExceeded"),
        ("spot-storm", "bert-spot-storm", 16 * 60, "MaxWaitTimeExceeded"),
    ],
)
def test_a_job_at_its_time_limit_passes_through_stopping_then_ends_stopped_with_the_limit(
    scenario_name: str, job_name: str, limit: int | None, secondary: str
) -> None:
    # Given a job that runs into its MaxRuntimeInSeconds (held 72 h of billing by a stall) or, on Spot, its
    # MaxWaitTimeInSeconds (16 h of interruptions), without governance
    sim = Simulation(builtin_scenario(scenario_name), governed=False)
    changes = status_changes(sim, job_name)
    run = sim.run().jobs[job_name]
    # Then, as SageMaker does, its last two state changes are Stopping (secondary status Stopping) at the
    # limit and, a minute later, Stopped with the limit's secondary status
    (stopping_at, *stopping), (stopped_at, *stopped) = changes[-2:]
    assert stopping == ["Stopping", "Stopping"]
    assert stopped == ["Stopped", secondary]
    assert stopped_at == stopping_at + 1 == run.ended_at
    if limit is not None:
        assert stopping_at == limit
    # and the Stopping minute is not billed: the runtime limit bills exactly MaxRuntimeInSeconds
    if secondary == "MaxRuntimeExceeded":
        assert run.billable == run.max_runtime


def test_the_series_records_what_the_hosts_published() -> None:
    scripted = job("p", script={"train_hours": 1, "gpu_percent": 80, "phases": [
        {"name": "eval", "gpu_percent": 5, "duration_minutes": 10, "start_minute": 20}
    ]})  # fmt: skip
    run = Simulation(scenario(scripted), governed=False).run().jobs["p"]
    assert run.series == [[4, 7, 0.0], [7, 27, 80.0], [27, 37, 5.0], [37, 67, 80.0], [67, 69, 0.0]]


# ---- the compliance route alone (exact counters; the full template is in test_outcomes.py) ------------


def test_untagged_job_is_stopped_by_compliance_as_it_starts(compliance_template: dict[str, Any]) -> None:
    report = simulate(builtin_scenario("untagged"), template=compliance_template)
    jobs = {j["name"]: j for j in report["jobs"]}
    untagged, tagged = jobs["untagged-experiment"], jobs["tagged-experiment"]
    assert untagged["final_status"] == "Stopped"
    assert untagged["stopped_at_minute"] == 0
    assert {"minute": 0, "action": "stop", "rule": "required-tags", "outcome": "done"} in untagged["actions"]
    assert untagged["cost_usd"] == 0  # stopped before its instances were billed
    assert untagged["saved_usd"] == untagged["baseline_cost_usd"] > 0
    assert tagged["final_status"] == "Completed"
    assert tagged["actions"] == []
    assert tagged["cost_usd"] == tagged["baseline_cost_usd"]
    assert report["totals"]["false_stops"] == 0
    counters = report["counters"]
    assert counters["lambda_invocations"] == {"JobEventsFunction": 2}  # only the two Starting events
    assert counters["aws_calls"]["sagemaker:StopTrainingJob"] == 1
    assert counters["aws_calls"]["sns:Publish"] == 1
    assert counters["lambda_errors"] == 0


def test_healthy_jobs_are_never_stopped(compliance_template: dict[str, Any]) -> None:
    report = simulate(builtin_scenario("healthy"), template=compliance_template)
    assert report["totals"]["false_stops"] == 0
    assert report["totals"]["saved_usd"] == 0
    assert all(j["final_status"] == "Completed" and j["stopped_at_minute"] is None for j in report["jobs"])
    assert report["counters"]["lambda_errors"] == 0


def test_a_wrong_content_filter_is_a_wrong_simulation_result(compliance_template: dict[str, Any]) -> None:
    # Given the compliance rule filtering on Downloading instead of Starting
    broken = copy.deepcopy(compliance_template)
    pattern = broken["Resources"]["JobStartingRule"]["Properties"]["EventPattern"]
    pattern["detail"]["SecondaryStatus"] = ["Downloading"]
    report = simulate(builtin_scenario("untagged"), template=broken)
    untagged = next(j for j in report["jobs"] if j["name"] == "untagged-experiment")
    # Then the function sees only Downloading events, where compliance does not apply: the job runs
    assert untagged["final_status"] == "Completed"
    assert untagged["stopped_at_minute"] is None
    assert report["counters"]["aws_calls"].get("sagemaker:StopTrainingJob", 0) == 0
    assert report["counters"]["lambda_invocations"] == {"JobEventsFunction": 2}


def test_a_filter_that_matches_nothing_invokes_nothing(compliance_template: dict[str, Any]) -> None:
    broken = copy.deepcopy(compliance_template)
    rule = broken["Resources"]["JobStartingRule"]["Properties"]
    rule["EventPattern"]["detail-type"] = ["SageMaker Processing Job State Change"]
    report = simulate(builtin_scenario("untagged"), template=broken)
    assert report["counters"]["lambda_invocations"] == {}
    assert report["totals"]["saved_usd"] == 0


def test_same_seed_same_report(compliance_template: dict[str, Any]) -> None:
    small = builtin_scenario("fleet").model_copy(
        update={"fleet": builtin_scenario("fleet").fleet.model_copy(update={"size": 12})}  # type: ignore[union-attr]
    )
    assert simulate(small, seed=3, template=compliance_template) == simulate(
        small, seed=3, template=compliance_template
    )


# ---- the alarm path, end to end, with a toy guard deployed by the template ------------------------


def test_an_alarm_created_by_a_function_fires_and_its_sns_subscriber_stops_the_stalled_job(
    compliance_template: dict[str, Any],
) -> None:
    # Given datapoints that arrive at once (the default 1-2 minute delay would shift every minute below)
    holiday = builtin_scenario("holiday-weekend").model_copy(update={"metric_delay_minutes": (0, 0)})
    report = simulate(holiday, template=with_toy_guard(compliance_template), include_series=True)
    held = report["jobs"][0]
    # The toy alarm: 20 one-minute periods below the threshold; the stall starts at minute 67
    assert held["stalled_at_minute"] == 67
    assert held["stopped_at_minute"] == 67 + IDLE_MINUTES
    assert held["final_status"] == "Stopped"
    assert held["cost_usd"] == pytest.approx(8 * 30 * (67 + IDLE_MINUTES + 1 - 4) / 60)
    assert held["saved_usd"] == pytest.approx(17_280 - held["cost_usd"])
    assert report["totals"] == {
        "jobs": 1,
        "cost_usd": held["cost_usd"],
        "baseline_cost_usd": 17_280.0,
        "saved_usd": held["saved_usd"],
        "false_stops": 0,
        "missed_stalls": 0,
        "recoverable_waste_usd": pytest.approx(8 * 30 * (72 * 60 - 3 - 60 - 10) / 60),
        "recovered_usd": held["saved_usd"],
        "recovered_fraction": pytest.approx(held["saved_usd"] / (8 * 30 * (72 * 60 - 3 - 60 - 10) / 60), abs=1e-3),
        "unexpected_outcomes": 0,
        "known_gaps": 0,
        "known_gaps_closed": 0,
        "stall_to_stop_minutes": {"idle": {"median": IDLE_MINUTES, "max": IDLE_MINUTES, "jobs": 1}},
    }
    counters = report["counters"]
    assert counters["lambda_invocations"] == {
        "JobEventsFunction": 1,
        "ToyGuardFunction": 2,
        "ToyStopperFunction": 1,
    }
    assert counters["aws_calls"]["cloudwatch:PutMetricAlarm"] == 1
    assert counters["aws_calls"]["cloudwatch:DeleteAlarms"] == 1  # on the Stopped event
    assert counters["aws_calls"]["sagemaker:StopTrainingJob"] == 1
    assert "cloudwatch:DescribeAlarms" not in counters["aws_calls"]  # the simulator's own calls are not counted
    series = held["series"]
    assert series["gpus_per_host"] == {f"algo-{i}": 8 for i in range(1, 9)}
    assert series["segments"][1] == [7, 67, 93.0]
    assert series["alarms"][0]["evaluation_periods"] == IDLE_MINUTES


def test_healthy_low_gpu_phases_do_not_trip_a_longer_idle_window(compliance_template: dict[str, Any]) -> None:
    report = simulate(builtin_scenario("healthy"), template=with_toy_guard(compliance_template))
    assert report["totals"]["false_stops"] == 0
    assert report["counters"]["notifications"] == {}  # no alarm ever fired


def test_a_clone_created_by_the_service_runs_from_its_source_checkpoint(
    compliance_template: dict[str, Any],
) -> None:
    report = simulate(
        builtin_scenario("hardware-failure"), template=with_toy_guard(compliance_template, resume=True)
    )
    jobs = {j["name"]: j for j in report["jobs"]}
    original, clone = jobs["resnet-long-run"], jobs["resnet-long-run-r1"]
    assert original["final_status"] == "Failed"
    assert clone["resumed_from"] == "resnet-long-run"
    assert clone["final_status"] == "Completed"
    assert clone["baseline_cost_usd"] == 0
    # Failed after 26 h of training (checkpoint at 26:00): the clone trains the remaining 14 h
    price_per_minute = 2 * 37.688 / 60
    assert clone["cost_usd"] == pytest.approx((3 + 14 * 60 + 2) * price_per_minute, abs=0.01)


def test_sns_deliveries_have_the_lambda_sns_event_shape() -> None:
    simulation = Simulation(builtin_scenario("untagged"))
    message = json.dumps({"AlarmName": "a", "NewStateValue": "ALARM"})
    event = simulation.delivery.sns_event("arn:aws:sns:us-east-1:123456789012:t", 'ALARM: "a"', message, {})
    parsed = SnsModel.model_validate(event)
    assert json.loads(str(parsed.Records[0].Sns.Message))["NewStateValue"] == "ALARM"


# ---- the command ---------------------------------------------------------------------------------


def test_smgov_simulate_json_has_the_documented_fields() -> None:
    from smgov.cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["simulate", "--scenario", "untagged", "--json", "--seed", "2"]) == 0
    report = json.loads(out.getvalue())
    assert report["scenario"] == "untagged"
    assert set(report["totals"]) >= {"cost_usd", "baseline_cost_usd", "saved_usd", "false_stops", "missed_stalls"}
    assert set(report["counters"]) >= {"lambda_invocations", "aws_calls"}
    for entry in report["jobs"]:
        assert set(entry) >= {
            "name", "final_status", "actions", "cost_usd", "baseline_cost_usd", "saved_usd",
            "stalled_at_minute", "stopped_at_minute",
        }  # fmt: skip
        assert all(set(a) >= {"minute", "action", "rule"} for a in entry["actions"])


def test_smgov_simulate_rejects_an_unknown_scenario() -> None:
    from smgov.cli.main import main

    with redirect_stdout(io.StringIO()):
        assert main(["simulate", "--scenario", "no-such-scenario"]) == 2


def test_subscriptions_with_filter_policies_and_schedules_follow_the_template(
    compliance_template: dict[str, Any],
) -> None:
    from tests.simulation import toy_guard

    # Given a recorder subscribed to the notifications topic for compliance messages only, and one on a schedule
    extended = copy.deepcopy(compliance_template)
    extended["Resources"]["ComplianceWatcher"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "Handler": "tests.simulation.toy_guard.record",
            "Events": {
                "Notes": {
                    "Type": "SNS",
                    "Properties": {
                        "Topic": {"Ref": "NotificationsTopic"},
                        "FilterPolicy": {"kind": ["compliance"]},
                    },
                }
            },
        },
    }
    extended["Resources"]["OtherWatcher"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "Handler": "tests.simulation.toy_guard.record",
            "Events": {
                "Notes": {
                    "Type": "SNS",
                    "Properties": {"Topic": {"Ref": "NotificationsTopic"}, "FilterPolicy": {"kind": ["other"]}},
                },
                "Tick": {"Type": "Schedule", "Properties": {"Schedule": "rate(2 hours)"}},
            },
        },
    }
    toy_guard.CALLS.clear()
    report = simulate(builtin_scenario("untagged"), template=extended)
    invocations = report["counters"]["lambda_invocations"]
    # Then the compliance notification reaches only the matching subscriber, in the SNS event shape
    assert invocations["ComplianceWatcher"] == 1
    notes = [e for e in toy_guard.CALLS if "Records" in e]
    assert len(notes) == 1
    assert json.loads(str(SnsModel.model_validate(notes[0]).Records[0].Sns.Message))["kind"] == "compliance"
    # and the schedule fires every two virtual hours while jobs run (the tagged job runs ~8 h: 4 runs),
    # then twice more in the settle period after the last job ended (a reconciler's last chances)
    ticks = [e for e in toy_guard.CALLS if e.get("detail-type") == "Scheduled Event"]
    assert invocations["OtherWatcher"] == len(ticks) == 4 + 2
