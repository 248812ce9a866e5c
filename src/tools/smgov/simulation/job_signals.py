"""What a job's hosts, metrics and logs say to the stall judge, in a local account without the simulator.

``JobSignals`` answers the stopper's ``GetMetricData`` with flat one-minute series per (metric, host or
job); ``log_stream`` gives the job a log stream in moto's CloudWatch Logs (with lines where the caller
says). ``JobSignals`` sits as the CloudWatch double's ``GetMetricData``. The handler tests use both to put
the judge's reads in front of the real stopper; the warm-latency bench uses them so that its alarm takes
the stop path the judge confirms, as a stalled job's alarm does in an account, not the "insufficient
evidence" path of a double that holds no metrics. (The simulator has its own metric store and logs.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from smgov.simulation.metrics import kept_at

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class JobSignals:
    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self.values: dict[tuple[str, str], float] = {}
        self.reads = 0

    def attach(self, fake_cloudwatch: Any) -> JobSignals:
        """Answer the CloudWatch double's ``GetMetricData`` (it counts the calls)."""
        fake_cloudwatch._op_GetMetricData = self._answer
        return self

    def set(self, metric: str, dimension_value: str, value: float) -> None:
        self.values[(metric, dimension_value)] = value

    def idle(self, job: str, hosts: int = 1) -> None:
        """GPUs at 0, CPUs at 0.03 busy vCPUs and a disk that does not move on every host: a stalled
        job's telemetry."""
        for n in range(1, hosts + 1):
            host = f"{job}/algo-{n}"
            for metric, value in (
                ("GPUUtilization", 0.0),
                ("GPUMemoryUtilization", 30.0),
                ("CPUUtilization", 3.0),
                ("MemoryUtilization", 20.0),
                ("DiskUtilization", 40.0),
            ):
                self.set(metric, host, value)

    def _answer(self, params: dict[str, Any]) -> dict[str, Any]:
        """One datapoint a period over ``[StartTime, EndTime)`` per series set, none for one not set; none
        either for a period CloudWatch does not answer from that far back (``kept_at``: more than 15 days, a
        multiple of 300 s; more than 63 days, of 3600 s)."""
        self.reads += 1
        start, end = params["StartTime"], params["EndTime"]
        age_minutes = int((self.clock() - start).total_seconds() // 60)
        results = []
        for query in params["MetricDataQueries"]:
            metric = query["MetricStat"]["Metric"]
            value = self.values.get((metric["MetricName"], metric["Dimensions"][0]["Value"]))
            period = int(query["MetricStat"]["Period"])
            periods = int((end - start).total_seconds() // period) if kept_at(period, age_minutes) else 0
            stamps = [] if value is None else [start + timedelta(seconds=n * period) for n in range(periods)]
            results.append(
                {
                    "Id": query["Id"],
                    "Timestamps": stamps,
                    "Values": [value] * len(stamps),
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results, "Messages": []}


def log_stream(job: str, host: int = 1, lines_at: tuple[datetime, ...] = ()) -> None:
    """The job's stream in moto's CloudWatch Logs (created with the group if needed), with these lines."""
    import boto3

    logs = boto3.client("logs", region_name="us-east-1")
    if not logs.describe_log_groups(logGroupNamePrefix=LOG_GROUP)["logGroups"]:
        logs.create_log_group(logGroupName=LOG_GROUP)
    stream = f"{job}/algo-{host}-1763719200"
    if not logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=stream)["logStreams"]:
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    if lines_at:
        logs.put_log_events(
            logGroupName=LOG_GROUP,
            logStreamName=stream,
            logEvents=[{"timestamp": int(t.timestamp() * 1000), "message": "step"} for t in lines_at],
        )
