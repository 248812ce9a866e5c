"""How fast the simulator is: ``make demo`` (the default set, as ``smgov simulate`` runs it) and a
1,000-job fleet, in wall-clock seconds on this machine (issue 15's goals: under 2 and 5 minutes).

Each scenario runs twice, governed and baseline, as the report needs. Measured, never asserted: the
machine is shared and the figures move with its load (``machine`` in the results says what it was).
"""

from __future__ import annotations

import time
from typing import Any

from smgov.simulation.report import simulate
from smgov.simulation.scenario import DEFAULT_SET, Scenario, builtin_scenario

DEMO_TARGET_SECONDS = 120
FLEET_TARGET_SECONDS = 300
FLEET_JOBS = 1000


def _timed(scenario: Scenario) -> tuple[float, float, dict[str, Any]]:
    """Wall-clock and CPU seconds of one governed + baseline run, and its report."""
    started, cpu = time.perf_counter(), time.process_time()
    report = simulate(scenario)
    return time.perf_counter() - started, time.process_time() - cpu, report


def sized_fleet(jobs: int) -> Scenario:
    fleet = builtin_scenario("fleet")
    assert fleet.fleet is not None
    return fleet.model_copy(update={"fleet": fleet.fleet.model_copy(update={"size": jobs})})


def measure(*, quick: bool = False) -> dict[str, Any]:
    names = ("holiday-weekend",) if quick else DEFAULT_SET
    per_scenario: dict[str, float] = {}
    demo_cpu = 0.0
    for name in names:
        seconds, cpu, _ = _timed(builtin_scenario(name))
        per_scenario[name] = round(seconds, 1)
        demo_cpu += cpu
    jobs = 20 if quick else FLEET_JOBS
    fleet_seconds, fleet_cpu, report = _timed(sized_fleet(jobs))
    return {
        "demo_scenarios": list(names),
        "demo_seconds": round(sum(per_scenario.values()), 1),
        "demo_cpu_seconds": round(demo_cpu, 1),  # what the wall clock would be on an otherwise idle core
        "per_scenario_seconds": per_scenario,
        "demo_target_seconds": DEMO_TARGET_SECONDS,
        "fleet_jobs": jobs,
        "fleet_jobs_run": report["totals"]["jobs"],  # clones included
        "fleet_seconds": round(fleet_seconds, 1),
        "fleet_cpu_seconds": round(fleet_cpu, 1),
        "fleet_target_seconds": FLEET_TARGET_SECONDS,
        "fleet_lambda_invocations": sum(report["counters"]["lambda_invocations"].values()),
        "fleet_aws_calls": sum(report["counters"]["aws_calls"].values()),
    }
