"""The shape of ``bench/results.json`` and the sanity of its numbers (never a timing target).

``check`` raises ``ValueError`` naming the first problem; the smoke test runs it on a ``--quick`` run and
on the committed results, so neither the bench nor BENCHMARKS.md's source can rot silently.
"""

from __future__ import annotations

from typing import Any

from bench import SCHEMA

LIFECYCLES = ("healthy", "stalled-and-stopped", "failed-and-resumed", "spot-fallback")
EVENT_TYPES = ("starting", "training", "terminal", "interruption", "alarm")
COST_LINES = ("lambda_requests", "lambda_duration", "alarm_metric_hours", "cloudwatch_api_calls")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _positive(value: Any, where: str) -> None:
    _require(isinstance(value, int | float) and value > 0, f"{where}: expected a positive number, got {value!r}")


def check(results: dict[str, Any], functions: set[str] | None = None) -> None:
    _require(results.get("schema") == SCHEMA, f"schema: {results.get('schema')!r}")
    for key in (
        "generated",
        "mode",
        "machine",
        "size",
        "cold_start",
        "warm",
        "memory",
        "lifecycles",
        "cost",
        "burst",
    ):
        _require(key in results, f"missing figure {key}")
    _check_cold_start(results["cold_start"], functions)
    _check_warm_and_memory(results)
    _check_lifecycles(results["lifecycles"])
    _check_cost_and_burst(results["cost"], results["burst"])
    simulator = results.get("simulator")  # results of older runs lack it
    if simulator is not None:
        _positive(simulator["demo_seconds"], "simulator.demo_seconds")
        _positive(simulator["fleet_seconds"], "simulator.fleet_seconds")
        _require(simulator["fleet_jobs_run"] >= simulator["fleet_jobs"], "simulator: fewer jobs run than drawn")
    for name, a in results["size"]["artifacts"].items():
        _require(0 < a["zipped_mb"] <= a["unzipped_mb"], f"size.{name}: zipped vs unzipped")


def _check_cold_start(cold: dict[str, Any], functions: set[str] | None) -> None:
    _require(cold["runs"] >= 1 and isinstance(cold["bytecode"], bool), "cold_start: runs/bytecode")
    if functions is not None:
        _require(set(cold["functions"]) == functions, f"cold_start covers {sorted(cold['functions'])}")
    for name, f in cold["functions"].items():
        for key in ("init_cpu_ms", "baseline_init_cpu_ms", "process_cpu_ms", "rss_after_init_mb"):
            _positive(f[key], f"cold_start.{name}.{key}")
        _require(len(f["init_cpu_ms_all"]) == cold["runs"], f"cold_start.{name}: one sample per run")
        _require(abs(f["ratio"] - f["init_cpu_ms"] / f["baseline_init_cpu_ms"]) < 0.01, f"{name}: ratio")
        _require(f["clients"] and f["python"].startswith("3."), f"cold_start.{name}: clients/python")


def _check_warm_and_memory(results: dict[str, Any]) -> None:
    for kind in EVENT_TYPES:
        w = results["warm"]["event_types"][kind]
        _positive(w["p50_ms"], f"warm.{kind}.p50_ms")
        _require(w["p99_ms"] >= w["p50_ms"], f"warm.{kind}: p99 < p50")
        _require(w["cpu_p99_ms"] >= w["cpu_p50_ms"] > 0, f"warm.{kind}: cpu percentiles")
        _require(bool(w["aws_calls"]), f"warm.{kind}: no AWS call counted")
    # The alarm case times a stalled job's stop: the judge read its evidence and the job was stopped (a
    # double without the judge's signals would time the cheaper "insufficient evidence" skip instead).
    alarm = results["warm"]["event_types"]["alarm"]["aws_calls"]
    _require(
        alarm.get("sagemaker:StopTrainingJob") == 1 and alarm.get("cloudwatch:GetMetricData", 0) >= 1,
        "warm.alarm: the timed alarm did not read the judge's evidence and stop its job",
    )

    for name, m in results["memory"].items():
        _positive(m["memory_size_mb"], f"memory.{name}.memory_size_mb")
        if m["estimated_peak_mb"] is not None:
            _require(m["estimated_peak_mb"] >= m["rss_after_init_mb"], f"memory.{name}: peak < RSS after init")


def _check_lifecycles(lifecycles: dict[str, Any]) -> None:
    for label in LIFECYCLES:
        life = lifecycles[label]
        _require(life["invocations_total"] == sum(life["invocations"].values()) > 0, f"lifecycles.{label}")
        _require(life["aws_calls_total"] == sum(life["aws_calls"].values()), f"lifecycles.{label}: calls")
        _require(
            life["job_invocations"] + sum(life["scheduled_invocations"].values()) == life["invocations_total"],
            f"lifecycles.{label}: job + scheduled invocations",
        )
        _require(life["alarms_left"] == 0, f"lifecycles.{label}: {life['alarms_left']} alarm(s) never deleted")
        _require(life["lambda_errors"] == 0, f"lifecycles.{label}: function errors")
    healthy = lifecycles["healthy"]["target"]
    _require(
        healthy.get("aws_calls_ok", True),
        f"a healthy job makes more than {healthy.get('max_aws_calls')} AWS calls",
    )
    for key in ("calls_justified", "scheduled_calls_justified"):
        _require("NOT JUSTIFIED" not in healthy[key].values(), f"unjustified calls ({key}): {healthy[key]}")


def _check_cost_and_burst(cost: dict[str, Any], burst: dict[str, Any]) -> None:
    for line in COST_LINES:
        _require(cost["per_1000_jobs_usd"][line] >= 0, f"cost.{line}")
    _positive(cost["spent_per_1000_jobs_usd"], "cost.spent_per_1000_jobs_usd")
    _require(
        abs(sum(cost["per_1000_jobs_usd"].values()) - cost["spent_per_1000_jobs_usd"]) < 0.01, "cost: lines add up"
    )
    _require(cost["usage"]["alarms_left"] == 0 and cost["usage"]["lambda_errors"] == 0, "cost: fleet run clean")
    if burst["result"] is None:
        _require(bool(burst.get("reason")), "burst: null without a reason")
    else:
        for size, r in burst["result"].items():
            _require(isinstance(r["lost"], int) and r["lost"] >= 0, f"burst.{size}.lost")
            _require(r["alarms"] + r["lost"] >= r["jobs"], f"burst.{size}: alarms + lost < jobs")
            _positive(r["minutes_until_all_alarms"], f"burst.{size}.minutes_until_all_alarms")
