"""The reconciler deployed by the real template in the simulator: idle when nothing is lost, and the
safety net that still stops a stalled job when the rule delivering its Training event is gone."""

from __future__ import annotations

import copy
from typing import Any

from smgov.simulation.engine import Simulation
from smgov.simulation.scenario import builtin_scenario


def test_the_reconciler_runs_on_schedule_and_repairs_nothing_when_no_event_is_lost(
    template: dict[str, Any],
) -> None:
    result = Simulation(builtin_scenario("holiday-weekend"), template=template).run()
    assert result.invocations["ReconcilerFunction"] >= 6  # every 10 minutes while the job runs
    assert result.errors == []
    assert [r for r in result.audit if r.trigger == "reconciler"] == []


def test_a_stalled_job_whose_training_events_are_all_lost_is_still_stopped(template: dict[str, Any]) -> None:
    # Given a deployment whose Training-event rule delivers nothing (every such event lost)
    lossy = copy.deepcopy(template)
    lossy["Resources"].pop("TrainingStartedRule")
    # When the holiday-weekend job stalls
    result = Simulation(builtin_scenario("holiday-weekend"), template=lossy).run()
    # Then the reconciler created its alarm and the idle guard stopped it
    created = [r for r in result.audit if r.trigger == "reconciler" and r.action == "create-alarm"]
    assert [(r.rule, r.outcome.value) for r in created] == [("idle-guard", "done")]
    (job,) = result.jobs.values()
    assert job.stopped_by_service_at is not None
    assert result.errors == []


def test_in_audit_mode_a_stalled_job_is_reported_once_not_at_every_reconciler_run(
    template: dict[str, Any],
) -> None:
    # Given the holiday-weekend job (idle an hour in, for the rest of its run) in an audit-mode deployment
    # that tells owners, cut to four hours on two hosts
    scenario = builtin_scenario("holiday-weekend")
    data = scenario.model_dump(by_alias=True, exclude_unset=True)
    data["parameters"] = {"GovernanceMode": "audit", "NotifyInAuditMode": "true"}
    data["jobs"][0].update(max_runtime_hours=4, instance_count=2)
    data["jobs"][0]["script"]["train_hours"] = 4
    # When it runs to its end, the reconciler running every 10 minutes
    result = Simulation(type(scenario).model_validate(data), template=template).run()
    # Then the stop governance would make is recorded once (its savings counted once), and no reconciler run
    # reset the alarm to have the same stretch judged again
    stops = [r for r in result.audit if r.action == "stop"]
    assert [(r.code, r.outcome.value) for r in stops] == [("idle.stop.idle", "audit-only")]
    assert [r for r in result.audit if r.code == "reconciler.rearm.stale-alarm"] == []
    (job,) = result.jobs.values()
    assert job.stopped_by_service_at is None
    assert result.errors == []
