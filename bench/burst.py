"""Burst: 300 and 1,000 jobs starting in one minute with ``PutMetricAlarm`` throttled at 3 per second.

The simulator's CloudWatch quota model (``Simulation(..., cloudwatch_tps=3.0)``: a token bucket per API
on the virtual clock, answered with ``ThrottlingException``, retried by botocore's own standard-mode
retry handler whose sleeps move the service's clock on) and ``burst_scenario(n)`` (n healthy single-GPU
jobs created in the same minute). Measured: the virtual time of the last successful ``PutMetricAlarm``
(when every alarm exists, counted from the minute the jobs' Training events arrived), throttles, retry
sleeps, and jobs that never got their alarm (lost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from smgov.simulation.burst import burst_scenario
from smgov.simulation.deploy import DeployedFunction
from smgov.simulation.engine import Simulation

SIZES = (300, 1000)
TPS = 3.0


class BurstSimulation(Simulation):
    """Records when each ``PutMetricAlarm`` succeeded, on the service's (backoff-aware) clock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alarm_writes: list[float] = []
        self._hooked = False
        self.on_invocation(self._hook_client)

    @contextmanager
    def _hook_client(self, function: DeployedFunction, event: Any, trigger: str) -> Iterator[None]:
        if not self._hooked:
            self.account.root.client("cloudwatch").meta.events.register(
                "after-call.cloudwatch.PutMetricAlarm", self._written
            )
            self._hooked = True
        yield

    def _written(self, http_response: Any, **_: Any) -> None:
        if http_response is not None and http_response.status_code < 300:
            self.alarm_writes.append(self.api_seconds())


def run_burst(jobs: int, tps: float = TPS) -> dict[str, Any]:
    simulation = BurstSimulation(burst_scenario(jobs), cloudwatch_tps=tps)
    result = simulation.run()
    outcomes = Counter((r.job_name, r.action, r.outcome.value) for r in result.audit)
    lost = [name for name in result.jobs if outcomes[(name, "create-alarm", "done")] != 1]
    writes = sorted(simulation.alarm_writes)
    training_minute = int(writes[0] // 60) if writes else 0
    throttling = result.throttling
    return {
        "jobs": jobs,
        "alarms": len(writes),
        "lost": len(lost),
        # The jobs are created at minute 0 and enter Training together a few minutes later (Starting,
        # Downloading): their Training events are the burst the alarm writes answer.
        "training_events_at_minute": training_minute,
        "minutes_until_all_alarms": round((writes[-1] - training_minute * 60) / 60, 2) if writes else None,
        "minutes_from_creation": round(writes[-1] / 60, 2) if writes else None,
        "put_metric_alarm": throttling.get("requests", {}).get("PutMetricAlarm"),
        "delete_alarms": throttling.get("requests", {}).get("DeleteAlarms"),
        "retry_sleeps": throttling.get("retry_sleeps"),
        "max_lag_seconds": throttling.get("max_lag_seconds"),
        "lambda_errors": len(result.errors),
        "dead_letters": result.notifications.get("dead-letter-queue", 0),
        "invocations": sum(result.invocations.values()),
        "all_completed": all(job.final_status == "Completed" for job in result.jobs.values()),
    }


def measure(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    return {
        "sizes": list(sizes),
        "put_metric_alarm_rate_per_second": TPS,
        # n writes at TPS per second, the bucket holding one second's worth: the least time it can take
        "lower_bound_minutes": {str(n): round((n - TPS) / TPS / 60, 2) for n in sizes},
        "result": {str(n): run_burst(n) for n in sizes},
        "reason": None,
    }
