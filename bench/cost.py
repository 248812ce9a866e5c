"""Cost per 1,000 jobs of running the service, and the ratio of saved to spent, on the ``fleet`` scenario.

Usage comes from one governed run of the fleet (``bench/simulated.py``): invocations, CPU time per
invocation, AWS calls by operation, alarm lifetimes with their metric counts, SNS messages and audit
bytes. Prices come from ``bench/prices.json`` (public us-east-1 list prices, each with its source).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.simulated import alarm_hours, fleet_run
from smgov.cfn_template import load_template
from smgov.simulation.report import build_report

PRICES = Path(__file__).with_name("prices.json")


def load_prices() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PRICES.read_text())
    return data


def memory_mb(function: str) -> int:
    template = load_template()
    own = template["Resources"][function]["Properties"].get("MemorySize")
    return int(own if own is not None else template["Globals"]["Function"]["MemorySize"])


def architecture() -> str:
    return str(load_template()["Globals"]["Function"]["Architectures"][0])


def measure(scenario: str = "fleet", seed: int = 0, size: int | None = None) -> dict[str, Any]:
    prices = load_prices()
    price = {k: v["usd"] for k, v in prices["items"].items()}
    assume = prices["assumptions"]
    governed, baseline = fleet_run(scenario, seed, size)
    result = governed.result
    jobs = governed.jobs
    per = 1000 / jobs

    invocations = sum(result.invocations.values())
    calls = dict(result.aws_calls)
    total_calls = sum(calls.values())
    cpu_ms = {f: sum(v) for f, v in governed.cpu_ms.items()}
    # Billed duration: CPU time measured here + every AWS call at the assumed round trip. The calls are
    # not split by function; they are charged at the largest MemorySize (an upper bound).
    largest_gb = max(memory_mb(f) for f in result.invocations) / 1024
    gb_seconds = sum(cpu_ms[f] / 1000 * memory_mb(f) / 1024 for f in cpu_ms)
    gb_seconds += total_calls * assume["aws_call_round_trip_ms"] / 1000 * largest_gb
    hours = alarm_hours(governed)
    # GetMetricData is billed per metric requested, not per request (CloudWatch pricing): apart
    cloudwatch_calls = sum(
        v for k, v in calls.items() if k.startswith("cloudwatch:") and k != "cloudwatch:GetMetricData"
    )
    sns_messages = sum(v for k, v in result.notifications.items() if k != "dead-letter-queue")
    dynamodb_writes = sum(
        v for k, v in calls.items() if k in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
    )
    dynamodb_reads = calls.get("dynamodb:GetItem", 0)
    log_bytes = governed.audit_bytes + len(result.audit) * assume["log_line_overhead_bytes"]
    arch = architecture()

    lines = {
        "lambda_requests": invocations * price["lambda_request"],
        "lambda_duration": gb_seconds * price[f"lambda_gb_second_{arch}"],
        "alarm_metric_hours": hours["alarm_metric_hours"]
        / assume["hours_per_month"]
        * price["cloudwatch_alarm_metric_month"],
        "composite_alarm_hours": hours["composite_alarm_hours"]
        / assume["hours_per_month"]
        * price["cloudwatch_composite_alarm_month"],
        "cloudwatch_api_calls": cloudwatch_calls * price["cloudwatch_api_request"],
        "metric_data_reads": governed.metrics_requested * price["cloudwatch_get_metric_data_metric"],
        "sns_publishes": sns_messages * price["sns_publish"],
        "audit_log_ingestion": log_bytes / 1e9 * price["cloudwatch_logs_ingestion_gb"],
        "dynamodb_idempotency": dynamodb_writes * price["dynamodb_write_request_unit"]
        + dynamodb_reads * price["dynamodb_read_request_unit"],
        "other_api_calls": 0.0,  # SSM standard parameters, SageMaker control plane: no charge
    }
    spent = sum(lines.values())
    report = build_report(result, baseline)
    saved = float(report["totals"]["saved_usd"])
    return {
        "scenario": scenario,
        "seed": seed,
        "jobs": jobs,
        "architecture": arch,
        "usage": {
            "invocations": invocations,
            "invocations_per_job": round(invocations / jobs, 2),
            "scheduled_invocations": dict(sorted(governed.scheduled.items())),
            "aws_calls": dict(sorted(calls.items())),
            "aws_calls_per_job": round(total_calls / jobs, 2),
            "lambda_cpu_ms": {f: round(v, 1) for f, v in sorted(cpu_ms.items())},
            "gb_seconds": round(gb_seconds, 3),
            **hours,
            "metrics_requested": governed.metrics_requested,
            "metric_data_requests": calls.get("cloudwatch:GetMetricData", 0),
            "alarms_created": len(governed.alarms),
            "alarms_left": sum(1 for a in governed.alarms if a.deleted is None),
            "sns_messages": sns_messages,
            "audit_records": len(result.audit),
            "audit_log_bytes": log_bytes,
            "lambda_errors": len(result.errors),
        },
        "per_1000_jobs_usd": {k: round(v * per, 4) for k, v in lines.items()},
        "spent_per_1000_jobs_usd": round(spent * per, 4),
        "fleet_spent_usd": round(spent, 4),
        "fleet_saved_usd": round(saved, 2),
        "saved_per_1000_jobs_usd": round(saved * per, 2),
        "fleet_cost_with_service_usd": report["totals"]["cost_usd"],
        "fleet_cost_without_service_usd": report["totals"]["baseline_cost_usd"],
        "saved_to_spent": round(saved / spent) if spent else None,
        "false_stops": report["totals"]["false_stops"],
        "missed_stalls": report["totals"]["missed_stalls"],
        "fixed_monthly_usd": {k: v["usd"] for k, v in prices["fixed_monthly"].items()},
        "prices": f"bench/prices.json ({prices['region']}, checked {prices['checked']})",
    }
