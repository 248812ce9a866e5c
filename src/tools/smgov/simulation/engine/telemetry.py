"""What a job's hosts and its training script publish to CloudWatch (the simulator's metric store).

- ``GPUUtilization`` per GPU host, dimension ``Host=<job>/algo-<n>``, value = per-GPU percent x GPUs
  (SageMaker's convention), every minute while the phase publishes (``phases.Publication``);
- each training metric whose regex matches (``MetricDefinitions``), dimension ``TrainingJobName``: one
  datapoint a minute while the job trains and makes progress.

Series are piecewise constant: the store keeps "from this minute on, this value" (see ``metrics.py``).
"""

from __future__ import annotations

from smgov.simulation.engine.jobs import JobRun
from smgov.simulation.metrics import MetricStore, metric_key

NAMESPACE, GPU_METRIC = "/aws/sagemaker/TrainingJobs", "GPUUtilization"


class Telemetry:
    def __init__(self, store: MetricStore) -> None:
        self.store = store

    def publish(self, job: JobRun, percent: float | None, now: int) -> None:
        """From ``now`` on the job's GPU hosts publish ``percent`` per GPU (None: nothing)."""
        # The job's training metric: one log line a minute while it trains and makes progress.
        metrics_on = job.phase == "training" and job.stalled_at is None and percent is not None
        if metrics_on != job.metrics_on:
            job.metrics_on = metrics_on
            for name in job.metrics:
                key = metric_key(NAMESPACE, name, [{"Name": "TrainingJobName", "Value": job.name}])
                self.store.publish(key, now, 1.0 if metrics_on else None)
        if percent == job.gpu_percent:
            return
        job.gpu_percent = percent
        if job.series and job.series[-1][1] is None:
            job.series[-1][1] = now
            if job.series[-1][0] == now:
                job.series.pop()
        if percent is not None:
            job.series.append([now, None, percent])
        for host, gpus in job.gpu_hosts:
            key = metric_key(NAMESPACE, GPU_METRIC, [{"Name": "Host", "Value": host}])
            self.store.publish(key, now, None if percent is None else percent * gpus)
