"""The Pending phase (SageMaker's "waiting for compute capacity")."""

from __future__ import annotations

from typing import Any

from smgov.simulation.engine.simulation import Simulation
from smgov.simulation.scenario import Scenario

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
