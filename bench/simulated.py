"""Figures from the fleet simulator: invocations and AWS calls per job lifecycle, and what a fleet uses.

``MeasuredSimulation`` is the simulator (``simulation/engine/``) plus three counters it does not keep:
the CPU time of each invocation, the lifetime of each alarm the service created (with its number of
metrics, what CloudWatch bills) and the bytes of audit records written.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from smgov.simulation.deploy import DeployedFunction
from smgov.simulation.engine import RunResult, Simulation
from smgov.simulation.scenario import Scenario, builtin_scenario

# (scenario, job) pairs: one job each, the lifecycles the issue names.
LIFECYCLES = {
    "healthy": ("healthy", "llm-finetune-with-eval"),
    "stalled-and-stopped": ("holiday-weekend", "llm-pretrain-holiday"),
    "failed-and-resumed": ("hardware-failure", "resnet-long-run"),
    "spot-fallback": ("spot-storm", "bert-spot-storm"),
}
# Why each call of a healthy job's lifecycle is needed (checked against the measured calls).
HEALTHY_CALLS_JUSTIFIED = {
    "ssm:GetParameter": "the policy document (no-redeploy changes): one read per invocation, cached "
    "PolicyCacheSeconds (60 s) within a container; the invocations of one job are minutes apart",
    "sagemaker:DescribeTrainingJob": "on Training, re-read the job: a late or duplicate event must not "
    "create an alarm for a job that already ended (do no harm); its tags (the team policy) come from the "
    "event, so no ListTags",
    "cloudwatch:PutMetricAlarm": "create the job's idle alarm (the purpose)",
    "cloudwatch:DeleteAlarms": "delete the alarm when the job ends (the purpose)",
    "dynamodb:UpdateItem": "the delivery ledger (docs/resilience.md): one conditional write claims each "
    "delivered state change, so a duplicate (SageMaker's repeated events, at-least-once delivery) is not "
    "processed, recorded or notified again; a failed attempt's release (error path only) lets its retry "
    "skip the audit records and notifications already done",
    "sagemaker:AddTags": "mark the job smgov:compliance-evaluated once compliance evaluated it (issue 6), "
    "so the scheduled reconciler can find jobs whose Starting event was missed; once per job",
    "cloudwatch:GetMetricData": "the efficiency record when the job ends (issue 20): its hosts' GPU and GPU "
    "memory series over its life in one request (2 metrics per host; none for a CPU job)",
}


# Issue 22: a healthy job's lifecycle makes at most this many AWS calls (its own, not the reconciler's).
MAX_HEALTHY_AWS_CALLS = 10


# What the scheduled reconciler (issue 6) reads every ReconcileIntervalMinutes, whatever the fleet.
SCHEDULED_CALLS_JUSTIFIED = {
    "sagemaker:ListTrainingJobs": "the reconciler's inventory of running jobs (level-triggered repair of "
    "missed events): one page per run for a small fleet",
    "cloudwatch:DescribeAlarms": "the reconciler's inventory of the stack's alarms (by name prefix): "
    "orphans to delete, missing ones to create",
    "ssm:GetParameter": "the policy, once per run",
    "sagemaker:DescribeTrainingJob": "re-read a running job the inventory shows before repairing it",
    "sagemaker:ListTags": "its tags (team policy; whether compliance evaluated it)",
    "sagemaker:AddTags": "mark a job compliance has now evaluated",
    "cloudwatch:PutMetricAlarm": "create a missing alarm (repair)",
    "cloudwatch:SetAlarmState": "re-arm a repaired alarm",
    "cloudwatch:DeleteAlarms": "delete an orphan alarm (repair)",
}
ALARM_WRITES = {
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:PutCompositeAlarm",
    "cloudwatch:DeleteAlarms",
    "cloudwatch:SetAlarmState",
    "cloudwatch:EnableAlarmActions",
    "cloudwatch:DisableAlarmActions",
}


@dataclass
class AlarmLife:
    name: str
    kind: str  # metric | composite
    metrics: int
    created: int
    deleted: int | None = None


@dataclass
class Measured:
    result: RunResult
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    alarms: list[AlarmLife] = field(default_factory=list)
    audit_bytes: int = 0
    scheduled: dict[str, int] = field(default_factory=dict)
    scheduled_calls: dict[str, int] = field(default_factory=dict)
    metrics_requested: int = 0  # GetMetricData queries over all requests (CloudWatch bills each)

    @property
    def jobs(self) -> int:
        return len(self.result.scenario.expand(self.result.seed))


class MeasuredSimulation(Simulation):
    def __init__(self, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(scenario, **kwargs)
        self.cpu_ms: dict[str, list[float]] = defaultdict(list)
        self.scheduled: Counter[str] = Counter()  # invocations by a schedule (not caused by a job)
        self.scheduled_calls: Counter[str] = Counter()  # the AWS calls those made
        self.alarm_lives: dict[str, AlarmLife] = {}
        self.closed: list[AlarmLife] = []
        self.metrics_requested = 0
        self.on_invocation(self._measured)
        self.on_call(self._alarm_call)

    @contextmanager
    def _measured(self, function: DeployedFunction, event: Any, trigger: str) -> Iterator[None]:
        scheduled = trigger.startswith("schedule:")
        before = Counter(self.aws_calls) if scheduled else None
        start = time.process_time()
        yield
        self.cpu_ms[function.logical_id].append((time.process_time() - start) * 1000)
        if before is not None:
            self.scheduled[function.logical_id] += 1
            self.scheduled_calls.update(self.aws_calls - before)

    def _alarm_call(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        if service != "cloudwatch":
            return
        if operation == "GetMetricData":
            self.metrics_requested += len(params.get("MetricDataQueries") or [])
            return
        if operation in ("PutMetricAlarm", "PutCompositeAlarm"):
            name = params["AlarmName"]
            if operation == "PutCompositeAlarm":
                kind, metrics = "composite", 0
            else:
                queries = params.get("Metrics") or []
                kind, metrics = "metric", sum(1 for q in queries if "MetricStat" in q) or 1
            life = self.alarm_lives.get(name)
            if life is None:
                self.alarm_lives[name] = AlarmLife(name, kind, metrics, created=self.now)
            else:
                life.metrics = metrics
        elif operation == "DeleteAlarms":
            for name in params.get("AlarmNames", []):
                life = self.alarm_lives.pop(name, None)
                if life is not None:
                    life.deleted = self.now
                    self.closed.append(life)

    def measure(self) -> Measured:
        result = self.run()
        open_alarms = list(self.alarm_lives.values())  # never deleted: counted to the end of the run
        audit_bytes = sum(len(json.dumps(r.model_dump(mode="json"))) for r in result.audit)
        return Measured(
            result,
            dict(self.cpu_ms),
            [*self.closed, *open_alarms],
            audit_bytes,
            dict(self.scheduled),
            dict(self.scheduled_calls),
            self.metrics_requested,
        )


def single_job(scenario: str, job: str) -> Scenario:
    source = builtin_scenario(scenario)
    jobs = tuple(j for j in source.jobs if j.name == job)
    if not jobs:
        raise ValueError(f"scenario {scenario} has no job {job}")
    return source.model_copy(update={"jobs": jobs, "fleet": None})


def alarm_hours(measured: Measured) -> dict[str, float]:
    end = measured.result.minutes
    metric_hours = composite_hours = 0.0
    for life in measured.alarms:
        hours = ((life.deleted if life.deleted is not None else end) - life.created) / 60
        if life.kind == "composite":
            composite_hours += hours
        else:
            metric_hours += hours * life.metrics
    return {"alarm_metric_hours": round(metric_hours, 2), "composite_alarm_hours": round(composite_hours, 2)}


def lifecycle_figures() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, (scenario, job) in LIFECYCLES.items():
        measured = MeasuredSimulation(single_job(scenario, job)).measure()
        result = measured.result
        out[label] = {
            "scenario": scenario,
            "job": job,
            "jobs_run": sorted(result.jobs),
            "final_status": {name: run.final_status for name, run in sorted(result.jobs.items())},
            "invocations": dict(sorted(result.invocations.items())),
            "invocations_total": sum(result.invocations.values()),
            # The job's own invocations (its events and alarms); scheduled runs (the reconciler) happen
            # whether or not jobs run, on the clock, and are counted apart.
            "job_invocations": sum(result.invocations.values()) - sum(measured.scheduled.values()),
            "scheduled_invocations": dict(sorted(measured.scheduled.items())),
            "virtual_minutes": result.minutes,
            "aws_calls": dict(sorted(result.aws_calls.items())),
            "aws_calls_total": sum(result.aws_calls.values()),
            "job_aws_calls": dict(sorted((Counter(result.aws_calls) - Counter(measured.scheduled_calls)).items())),
            "scheduled_aws_calls": dict(sorted(measured.scheduled_calls.items())),
            "alarms_created": len(measured.alarms),
            "alarms_left": sum(1 for a in measured.alarms if a.deleted is None),
            "metrics_requested": measured.metrics_requested,
            **alarm_hours(measured),
            "lambda_errors": len(result.errors),
        }
    healthy = out["healthy"]
    mutations = {k: v for k, v in healthy["job_aws_calls"].items() if k in ALARM_WRITES}
    out["healthy"]["target"] = {
        "max_invocations": 3,
        "invocations_ok": healthy["job_invocations"] <= 3,
        "max_aws_calls": MAX_HEALTHY_AWS_CALLS,
        "aws_calls_ok": sum(healthy["job_aws_calls"].values()) <= MAX_HEALTHY_AWS_CALLS,
        "alarm_calls": mutations,
        "only_create_and_delete_of_its_alarm": mutations
        == {"cloudwatch:PutMetricAlarm": 1, "cloudwatch:DeleteAlarms": 1},
        "calls_justified": {k: HEALTHY_CALLS_JUSTIFIED.get(k, "NOT JUSTIFIED") for k in healthy["job_aws_calls"]},
        "scheduled_calls_justified": {
            k: SCHEDULED_CALLS_JUSTIFIED.get(k, "NOT JUSTIFIED") for k in healthy["scheduled_aws_calls"]
        },
    }
    return out


def fleet_run(scenario: str = "fleet", seed: int = 0, size: int | None = None) -> tuple[Measured, RunResult]:
    """The governed fleet (measured) and its ungoverned baseline, as ``smgov simulate`` runs them."""
    source = builtin_scenario(scenario)
    if size is not None and source.fleet is not None:
        source = source.model_copy(update={"fleet": source.fleet.model_copy(update={"size": size})})
    governed = MeasuredSimulation(source, seed=seed).measure()
    baseline = Simulation(source, seed=seed, governed=False).run()
    return governed, baseline
