"""Spot decisions on economics in a simulated Spot market: the built-in ``spot-market`` scenario runs the
same fleet four ways and the service must cost less than the count rule and than On-Demand, finish every
job, and move only the jobs Spot would not finish; the market itself is seeded and follows its periods."""

from __future__ import annotations

import random
from typing import Any

import pytest

from smgov.simulation.engine.simulation import Simulation
from smgov.simulation.report import STRATEGIES, simulate
from smgov.simulation.scenario import Scenario, SpotMarket, builtin_scenario
from tests.simulation.capabilities import require_spot_fallback


def test_the_market_draws_interruptions_at_the_rate_of_each_period() -> None:
    # Given a type calm for 10 hours, then stormy
    market = SpotMarket.model_validate(
        {"types": {"t": [{"interruptions_per_hour": 0.1}, {"from_hour": 10, "interruptions_per_hour": 6}]}}
    )
    rng = random.Random(7)
    # When many first interruptions are drawn from minute 0
    draws = [market.next_interruption("t", 0, rng.expovariate(1.0)) for _ in range(2000)]
    assert all(d is not None for d in draws)
    minutes = [d for d in draws if d is not None]
    # Then about 1 - exp(-1) of them fall in the calm 10 hours, and the rest within minutes of the storm
    calm = sum(m <= 600 for m in minutes) / len(minutes)
    assert 0.58 < calm < 0.68
    assert max(minutes) < 600 + 120
    assert market.next_interruption("other", 0, 1.0) is None
    assert market.period("t", 700) is not None and market.period("t", 700).interruptions_per_hour == 6  # type: ignore[union-attr]


def test_periods_must_start_at_hour_zero_in_order() -> None:
    with pytest.raises(ValueError, match="periods"):
        SpotMarket.model_validate({"types": {"t": [{"from_hour": 2, "interruptions_per_hour": 1}]}})


def test_the_same_seed_meets_the_same_market() -> None:
    scenario = builtin_scenario("spot-market")
    first = Simulation(scenario, seed=3, governed=False).run()
    second = Simulation(scenario, seed=3, governed=False).run()
    assert {n: j.interruptions for n, j in first.jobs.items()} == {
        n: j.interruptions for n, j in second.jobs.items()
    }
    assert sum(j.interruptions for j in first.jobs.values()) > 5  # the market does interrupt


def test_the_service_costs_less_than_the_count_rule_and_on_demand_and_moves_only_what_spot_would_not_finish(
    template: dict[str, Any],
) -> None:
    require_spot_fallback(template)
    # Given the spot-market scenario (four strategies in one run)
    report = simulate(builtin_scenario("spot-market"), template=template)
    strategies = report["totals"]["strategies"]
    assert set(strategies) == set(STRATEGIES)
    service, count = strategies["service"], strategies["count_fallback"]
    # Then the service costs less than the count rule and On-Demand, finishes every job, and on average no
    # later than Spot alone (it finishes later than the count rule: the storm jobs that finish on Spot
    # within their MaxWaitTimeInSeconds stay there, slower and cheaper; a team that minds sets
    # spot.max_delay_hours)
    assert service["cost_usd"] < count["cost_usd"]
    assert service["cost_usd"] < strategies["always_on_demand"]["cost_usd"]
    assert service["completion_hours"] <= strategies["always_spot"]["completion_hours"]
    assert service["incomplete"] == 0
    assert report["totals"]["unexpected_outcomes"] == 0 and report["counters"]["lambda_errors"] == 0
    assert report["invariants"]["duplicate_clones"] == 0
    # and the economics decided (not the count rule): jobs stayed on Spot past three interruptions
    assert any(j["interruptions"] > 3 and j["final_status"] == "Completed" for j in report["jobs"])
    # and the storm job Spot alone leaves unfinished (storm-llm-e ends at MaxWaitTimeExceeded) moved: its
    # team opted in, so on Spot on the calm alternative type; the two storm jobs that finish on Spot stayed
    clones = {j["resumed_from"]: j for j in report["jobs"] if j["resumed_from"]}
    assert set(clones) == {"storm-llm-e"}
    assert clones["storm-llm-e"]["instance_type"] == "ml.p4de.24xlarge" and clones["storm-llm-e"]["spot"] is True
    assert clones["storm-llm-e"]["final_status"] == "Completed"
    jobs = {j["name"]: j for j in report["jobs"]}
    for name in ("storm-llm-d", "storm-vision-f"):
        assert jobs[name]["final_status"] == "Completed" and jobs[name]["spot"] is True


def test_without_strategies_the_report_has_none() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "plain",
            "jobs": [
                {
                    "name": "j",
                    "instance_type": "ml.g5.12xlarge",
                    "tags": {"team": "t"},
                    "script": {"train_hours": 1},
                }
            ],
        }
    )
    report = simulate(scenario)
    assert "strategies" not in report["totals"]
