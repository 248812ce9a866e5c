"""Warm latency and per-invocation memory: the real handlers, AWS answered in-process.

``local_account`` (moto + the SageMaker and CloudWatch doubles) answers every call, so a latency here is
our code plus botocore request building/parsing plus the double's answer: no network. Wall time
(``p50_ms``/``p99_ms``) and the process's CPU time (``cpu_*``: what other processes on a shared machine
cannot inflate) are both reported. Each timed
invocation gets its own job (set up untimed) so every sample takes the same path (a repeated alarm on
an already stopped job would take the cheaper "already stopped" path), and the clock moves past the
policy cache between invocations so each one re-reads the policy as it does in production.

The alarm case is a stalled job's alarm: its hosts' metrics (``JobSignals``: GPUs idle, CPUs near 0, the
disk still) and its log stream (last line before the window) say what the stall judge confirms, and its
checkpoint location is listed (the deployment names its bucket), so the timed path is the judge's full
read and the stop, as in an account. (Before 2026-11-27 the CloudWatch double held no metrics there: the
judge's reads failed and the alarm was skipped for insufficient evidence, a cheaper path than a stop.)
"""

from __future__ import annotations

import contextlib
import gc
import io
import statistics
import time
import tracemalloc
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from smgov.simulation.harness import ACCOUNT, LocalAccount, local_account
from smgov.simulation.job_signals import JobSignals, log_stream

ENVIRONMENT = {
    "GOVERNANCE_MODE": "enforce",
    "REQUIRED_TAGS": "team,cost-center",
    "POLICY_PARAMETER_NAME": "/sagemaker-governance/policy",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "IDEMPOTENCY_TABLE_NAME": "bench-idempotency",  # as deployed: the Powertools Idempotency path runs
    "CHECKPOINT_BUCKET_PATTERN": "bench-checkpoints",  # the judge lists a stalled job's checkpoints
}
CHECKPOINT_BUCKET = ENVIRONMENT["CHECKPOINT_BUCKET_PATTERN"]
HOSTS = 2
GPU_INSTANCE = "ml.g5.12xlarge"


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 11, 21, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def _request(name: str, *, spot: bool = False) -> dict[str, Any]:
    stopping: dict[str, int] = {"MaxRuntimeInSeconds": 86_400}
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {"InstanceType": GPU_INSTANCE, "InstanceCount": HOSTS, "VolumeSizeInGB": 50},
        "StoppingCondition": stopping,
        "CheckpointConfig": {"S3Uri": f"s3://{CHECKPOINT_BUCKET}/checkpoints/{name}/"},
        "Tags": [{"Key": "team", "Value": "vision"}, {"Key": "cost-center", "Value": "cc-1"}],
    }
    if spot:
        request["EnableManagedSpotTraining"] = True
        stopping["MaxWaitTimeInSeconds"] = 172_800
    return request


Prepared = tuple[Callable[[Any, Any], Any], dict[str, Any]]


class Cases:
    """Each ``prepare_<kind>(i)`` sets up job i untimed and returns (handler, event) to time."""

    def __init__(self, account: LocalAccount, clock: Clock) -> None:
        from sagemaker_governance.handlers.idle_stopper import handler as stopper
        from sagemaker_governance.handlers.job_events import handler as job_events

        self.account, self.clock = account, clock
        self.job_events, self.stopper = job_events, stopper
        self.signals = JobSignals(clock).attach(account.cloudwatch)

    def starting(self, i: int) -> Prepared:
        name = f"bench-starting-{i}"
        self.account.sagemaker.launch(_request(name))
        return self.job_events, self.account.sagemaker.event(name)

    def training(self, i: int) -> Prepared:
        name = f"bench-training-{i}"
        self.account.sagemaker.launch(_request(name), secondary="Training")
        return self.job_events, self.account.sagemaker.event(name)

    def terminal(self, i: int) -> Prepared:
        name = f"bench-completed-{i}"
        sagemaker = self.account.sagemaker
        sagemaker.launch(_request(name), secondary="Training")
        self.account.invoke(self.job_events, sagemaker.event(name))  # its alarm exists
        sagemaker.transition(name, "InProgress", "Uploading")
        sagemaker.transition(name, "Completed", "Completed")
        return self.job_events, sagemaker.event(name)

    def interruption(self, i: int) -> Prepared:
        name = f"bench-interrupted-{i}"
        sagemaker = self.account.sagemaker
        sagemaker.launch(_request(name, spot=True), secondary="Training")
        sagemaker.transition(name, "InProgress", "Interrupted", message="Spot capacity reclaimed")
        return self.job_events, sagemaker.event(name)

    def alarm(self, i: int) -> Prepared:
        name = f"bench-idle-{i}"
        sagemaker = self.account.sagemaker
        sagemaker.launch(_request(name), secondary="Training")
        self.account.invoke(self.job_events, sagemaker.event(name))  # creates the alarm
        # A stalled job: it logged as it entered Training, then its hosts went quiet.
        log_stream(name, lines_at=(self.clock.now,))
        self.signals.idle(name, hosts=HOSTS)
        self.clock.advance(minutes=45)  # past the grace period and the judge's window: the stop path
        alarm = f"sagemaker-governance-idle-{name}"
        self.account.cloudwatch.set_state(alarm, "ALARM")
        event = self.account.cloudwatch.sns_event([self.account.cloudwatch.notification(alarm)])
        return self.stopper, event


EVENT_TYPES = ("starting", "training", "terminal", "interruption", "alarm")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _calls_counter(counter: Counter[str]) -> Callable[..., None]:
    def count(model: Any, **_: Any) -> None:
        counter[f"{model.service_model.service_id.hyphenize()}:{model.name}"] += 1

    return count


def measure(invocations: int, memory_samples: int) -> dict[str, Any]:
    # EMF metric lines and log lines are still formatted and written (part of the cost), to a buffer.
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Powertools: "no application metrics"
        return _measure(invocations, memory_samples)


def _measure(invocations: int, memory_samples: int) -> dict[str, Any]:
    import logging

    clock = Clock()
    results: dict[str, Any] = {}
    with local_account(clock, ENVIRONMENT, log_audit=False) as account:
        import boto3

        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName=ENVIRONMENT["IDEMPOTENCY_TABLE_NAME"],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        logging.getLogger("sagemaker-governance").setLevel(logging.WARNING)
        calls: Counter[str] = Counter()
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=CHECKPOINT_BUCKET)
        for service in ("sagemaker", "cloudwatch", "sns", "ssm", "dynamodb", "logs", "s3"):
            account.root.client(service).meta.events.register("before-parameter-build", _calls_counter(calls))
        cases = Cases(account, clock)
        for kind in EVENT_TYPES:
            prepare = getattr(cases, kind)
            handler, event = prepare(-1)
            account.invoke(handler, event)  # warm: clients, policy, models built
            samples: list[float] = []
            cpu: list[float] = []
            per_call: dict[str, int] = {}
            calls.clear()
            for i in range(invocations):
                handler, event = prepare(i)
                clock.advance(seconds=61)  # past the policy cache: re-read as in production
                before = dict(calls)
                start, start_cpu = time.perf_counter(), time.process_time()
                account.invoke(handler, event)
                cpu.append((time.process_time() - start_cpu) * 1000)
                samples.append((time.perf_counter() - start) * 1000)
                if i == 0:
                    per_call = {k: v - before.get(k, 0) for k, v in calls.items() if v - before.get(k, 0)}
            peaks: list[int] = []
            gc.collect()
            tracemalloc.start()
            for i in range(memory_samples):
                handler, event = prepare(invocations + i)
                clock.advance(seconds=61)
                gc.collect()
                tracemalloc.reset_peak()
                base, _ = tracemalloc.get_traced_memory()
                account.invoke(handler, event)
                peaks.append(tracemalloc.get_traced_memory()[1] - base)
            tracemalloc.stop()
            results[kind] = {
                "function": "IdleStopperFunction" if kind == "alarm" else "JobEventsFunction",
                "invocations": invocations,
                "p50_ms": round(statistics.median(samples), 2),
                "p99_ms": round(_percentile(samples, 0.99), 2),
                "mean_ms": round(statistics.fmean(samples), 2),
                "cpu_p50_ms": round(statistics.median(cpu), 2),
                "cpu_p99_ms": round(_percentile(cpu, 0.99), 2),
                "aws_calls": dict(sorted(per_call.items())),
                "peak_alloc_kb": round(max(peaks) / 1024, 1) if peaks else None,
            }
    import platform

    return {"python": platform.python_version(), "event_types": results}
