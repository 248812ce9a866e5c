"""The Pending phase (SageMaker's "waiting for compute capacity") and the Spot storm move it makes visible:
a new Spot job of an opted-in team (``spot.storm.move_new_jobs``) is moved On-Demand from its Pending
event before it bills; a job of a team that has not opted in is left alone."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

from smgov.simulation.deploy import DeployedFunction
from smgov.simulation.engine.simulation import Simulation
from smgov.simulation.scenario import Scenario, builtin_scenario
from tests.simulation.capabilities import require_spot_fallback

TAGS = {"team": "t", "cost-center": "c", "owner": "o"}


def one_job(**script: Any) -> Scenario:
    job = {"name": "j", "instance_type": "ml.g5.12xlarge", "spot": True, "tags": TAGS, "script": script}
    return Scenario.model_validate({"name": "test", "jobs": [job]})


def statuses(simulation: Simulation, name: str) -> list[str]:
    return [t["Status"] for t in simulation.fake.jobs[name]["SecondaryStatusTransitions"]]


def test_a_script_with_pending_minutes_waits_unbilled_in_pending_between_starting_and_downloading() -> None:
    # Given a job that waits 30 minutes for capacity after Starting (not governed)
    simulation = Simulation(one_job(train_hours=1, pending_minutes=30), governed=False)
    run = simulation.run().jobs["j"]
    # Then SageMaker reports Pending between Starting and Downloading, for 30 minutes
    assert statuses(simulation, "j") == [
        "Starting",
        "Pending",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    pending = simulation.fake.jobs["j"]["SecondaryStatusTransitions"][1]
    assert pending["EndTime"] - pending["StartTime"] == simulation.clock.at(30) - simulation.clock.at(0)
    # and it is not billed: Downloading 3 + Training 60 + Uploading 2
    assert run.final_status == "Completed" and run.billable == 65


def test_a_script_without_pending_minutes_has_no_pending_phase() -> None:
    simulation = Simulation(one_job(train_hours=1), governed=False)
    simulation.run()
    assert statuses(simulation, "j") == ["Starting", "Downloading", "Training", "Uploading", "Completed"]


def test_a_storm_moves_the_opted_in_new_job_from_its_pending_event_and_leaves_the_other_alone(
    template: dict[str, Any],
) -> None:
    require_spot_fallback(template)
    # Given three jobs of a type interrupted within the hour, then two new Spot jobs of the type waiting in
    # Pending: one of a team that opted in to spot.storm.move_new_jobs, one of a team that has not
    simulation = Simulation(builtin_scenario("spot-storm-pending"), template=template)
    routes: dict[str, set[str]] = {}

    @contextmanager
    def pending_routes(function: DeployedFunction, event: Mapping[str, Any], trigger: str) -> Iterator[None]:
        detail = event.get("detail", {}) if isinstance(event, Mapping) else {}
        if detail.get("SecondaryStatus") == "Pending":
            routes.setdefault(detail["TrainingJobName"], set()).add(trigger)
        yield

    simulation.on_invocation(pending_routes)
    result = simulation.run()
    assert result.errors == []
    # Then both jobs' Pending events were emitted and routed by the Spot Pending rule
    assert routes == {name: {"rule:JobPendingSpotRule"} for name in ("new-spot-opted-in", "new-spot-not-opted-in")}
    codes = {
        name: [(r.code, r.evidence.get("secondary_status")) for r in result.audit if r.job_name == name][:4]
        for name in ("new-spot-opted-in", "new-spot-not-opted-in")
    }
    # The opted-in job: no storm yet at its Starting event, a storm at its Pending event: cloned On-Demand,
    # then stopped while still Pending
    assert codes["new-spot-opted-in"] == [
        ("compliance.pass.compliant", None),
        ("spot.skip.no-storm", "Starting"),
        ("spot.clone.storm", "Pending"),
        ("spot.stop.storm", "Pending"),
    ]
    moved, clone = result.jobs["new-spot-opted-in"], result.jobs["new-spot-opted-in-r1"]
    assert (moved.final_status, moved.billable) == ("Stopped", 0)  # never billed
    assert statuses(simulation, "new-spot-opted-in") == ["Starting", "Pending", "Stopping", "Stopped"]
    assert clone.source == "new-spot-opted-in" and not clone.spot and clone.final_status == "Completed"
    # The other team's job: its Pending event leaves one router.skip.no-reaction record, and it stays on Spot
    assert codes["new-spot-not-opted-in"][:2] == [
        ("compliance.pass.compliant", None),
        ("router.skip.no-reaction", None),
    ]
    kept = result.jobs["new-spot-not-opted-in"]
    assert kept.spot and kept.final_status == "Completed" and kept.stopped_by_service_at is None
    assert "new-spot-not-opted-in-r1" not in result.jobs


def test_a_job_starting_again_after_an_interruption_is_not_new_and_the_storm_does_not_move_it(
    template: dict[str, Any],
) -> None:
    require_spot_fallback(template)
    # Given the storm scenario and one more job of the opted-in team: it started (through Pending) before the
    # storm, trained, and is interrupted once the storm is there, so it waits in Pending again
    scenario = builtin_scenario("spot-storm-pending")
    trained = {
        "name": "nlp-trained-then-interrupted",
        "instance_type": "ml.p4d.24xlarge",
        "spot": True,
        "max_runtime_hours": 8,
        "max_wait_hours": 16,
        "tags": {"team": "nlp", "cost-center": "cc-4100", "owner": "fay"},
        "script": {
            "train_hours": 3,
            "gpu_percent": 90,
            "pending_minutes": 5,
            "interruptions_at_minutes": [75],
            "spot_capacity_wait_minutes": 10,
        },
    }
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["jobs"] = [*data["jobs"], trained]
    simulation = Simulation(Scenario.model_validate(data), template=template)
    result = simulation.run()
    assert result.errors == []
    # Then the storm never moved it, neither at its Starting nor at its Pending after the interruption: its
    # past training and interruption make it not new
    codes = [r.code for r in result.audit if r.job_name == "nlp-trained-then-interrupted"]
    assert "spot.clone.storm" not in codes and "spot.stop.storm" not in codes
    # and it did start again through Pending (the case under test happened)
    seen = statuses(simulation, "nlp-trained-then-interrupted")
    interrupted = seen.index("Interrupted")
    assert "Pending" in seen[:interrupted] and "Pending" in seen[interrupted:]
    # while the same run still moves the new job of the team (the storm was there)
    assert "spot.clone.storm" in [r.code for r in result.audit if r.job_name == "new-spot-opted-in"]


def test_events_that_do_not_say_spot_still_move_the_opted_in_job(template: dict[str, Any]) -> None:
    require_spot_fallback(template)
    # Given SageMaker events without EnableManagedSpotTraining (no AWS sample or schema of the event shows the
    # field: the documented sample predates Managed Spot), in the storm scenario
    from smgov.simulation.messages import training_job_state_change as state_change

    def unsaid(description: Mapping[str, Any], tags: Mapping[str, str], **kw: Any) -> dict[str, Any]:
        event = state_change(description, tags, **kw)
        event["detail"].pop("EnableManagedSpotTraining", None)
        return event

    with mock.patch("smgov.simulation.fake_sagemaker.training_job_state_change", unsaid):
        result = Simulation(builtin_scenario("spot-storm-pending"), template=template).run()
    assert result.errors == []
    # Then the Pending events are routed all the same, DescribeTrainingJob says Spot, and the opted-in job is
    # moved before it bills while the other team's stays on Spot
    moved = result.jobs["new-spot-opted-in"]
    assert (moved.final_status, moved.billable) == ("Stopped", 0)
    assert result.jobs["new-spot-opted-in-r1"].source == "new-spot-opted-in"
    assert "new-spot-not-opted-in-r1" not in result.jobs and result.jobs["new-spot-not-opted-in"].spot


def transitions(simulation: Simulation, name: str) -> list[tuple[str, int, int | None, str | None]]:
    """Each secondary status with the minute it began, its length in minutes (None: still on) and message."""
    start = simulation.clock.at(0)
    out = []
    for t in simulation.fake.jobs[name]["SecondaryStatusTransitions"]:
        began = int((t["StartTime"] - start).total_seconds() // 60)
        length = int((t["EndTime"] - t["StartTime"]).total_seconds() // 60) if "EndTime" in t else None
        out.append((t["Status"], began, length, t.get("StatusMessage")))
    return out


def test_a_spot_interruption_is_interrupted_for_a_minute_then_waits_for_capacity_in_starting() -> None:
    # Given a Spot job interrupted at its 60th minute, whose capacity comes back 10 minutes later (not governed)
    simulation = Simulation(
        one_job(train_hours=2, interruptions_at_minutes=[60], spot_capacity_wait_minutes=10), governed=False
    )
    run = simulation.run().jobs["j"]
    seen = transitions(simulation, "j")
    assert [status for status, *_ in seen] == [
        "Starting",
        "Downloading",
        "Training",
        "Interrupted",
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    # Then, as AWS's Managed Spot lifecycle goes (Interrupted -> Starting -> Downloading), the job says
    # Interrupted for a minute and waits for capacity in Starting, with the message SageMaker writes when EC2
    # has none, for the rest of the wait and its launch (9 + 4 minutes)
    _, interrupted_at, interrupted_for, _ = seen[3]
    _, waiting_at, waiting_for, message = seen[4]
    assert (interrupted_at, interrupted_for) == (60, 1)
    assert (waiting_at, waiting_for) == (61, 13)
    assert message == "Insufficient capacity error from EC2 while launching instances, retrying!"
    # and none of the wait is billed: Downloading twice (3 + 3), the first stint's Training (60 - 4 - 3 = 53),
    # the rest after the restart from its last checkpoint, and Uploading (2)
    assert run.final_status == "Completed"
    assert run.billable == 3 + 3 + 2 + (seen[7][1] - seen[6][1]) + (60 - seen[2][1])


def test_an_interruption_decided_in_its_capacity_wait_still_moves_the_job_that_makes_no_progress(
    template: dict[str, Any],
) -> None:
    require_spot_fallback(template)
    # Given the Spot scenario with every event held back 1 to 3 minutes (reorder), so that each Interrupted
    # event is decided once the job has gone on to wait for capacity in Starting
    from smgov.simulation.faults import FaultSpec

    result = Simulation(
        builtin_scenario("spot-interruptions"), template=template, faults=FaultSpec(rates={"reorder": 1.0})
    ).run()
    assert result.errors == []
    decided = [
        (r.job_name, r.code, r.evidence.get("secondary_status")) for r in result.audit if r.rule == "spot-fallback"
    ]
    # Then every Spot decision read the job waiting in Starting (the case under test happened)
    assert decided and {status for *_, status in decided} == {"Starting"}
    # and the job interrupted every 25 minutes is still moved On-Demand, the other still finishes on Spot
    assert ("spot-rapid-interruptions", "spot.clone.count-rule", "Starting") in decided
    assert result.jobs["spot-rapid-interruptions-r1"].final_status == "Completed"
    assert result.jobs["spot-slow-interruptions"].final_status == "Completed"
