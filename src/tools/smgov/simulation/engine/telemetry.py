"""What a job's hosts and its training script publish: per-host, per-signal series, training metrics and
the log cadence.

Per host, in ``/aws/sagemaker/TrainingJobs`` with dimension ``Host=<job>/algo-<n>``, one datapoint a
minute, as SageMaker publishes them (SageMaker developer guide, "Amazon SageMaker AI metrics in Amazon
CloudWatch", training job metrics; AWS re:Post "CPU or GPU utilization greater than 100%"):

- ``GPUUtilization``: per-GPU percent x the host's GPUs (0-100 x GPUs); GPU hosts only;
- ``GPUMemoryUtilization``: per-GPU memory used x GPUs (0-100 x GPUs); GPU hosts only;
- ``CPUUtilization``: the sum over the host's vCPUs (0-100 x vCPUs);
- ``MemoryUtilization``: percent of the host's memory (0-100);
- ``DiskUtilization``: percent of the host's disk the job uses (0-100): the script's ``disk_percent``, plus
  what its writing phases (``disk_growth_percent``, linear over the phase) have added.

Levels come from the activity: the lifecycle phase's own levels while downloading or uploading, the
script's (its current phase, then the host's profile) while training, the stall levels while stalled;
nothing while starting, interrupted, stopping or ended. ``noise_percent`` adds seeded noise to every
non-zero level, drawn anew every ``noise_every_minutes``.

Training metrics (``MetricDefinitions`` whose regex matches): dimension ``TrainingJobName``, a datapoint
every ``every_minutes`` while the job trains, makes progress and is in one of the metric's phases.
The same activity sets each host's log cadence (``logs.py``).

Series are piecewise constant: the store keeps "from this minute on, this value" (see ``metrics.py``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from smgov.simulation.engine.jobs import Host, JobRun
from smgov.simulation.metrics import MetricStore, metric_key
from smgov.simulation.scenario import Phase, Script

if TYPE_CHECKING:
    from smgov.simulation.engine.logs import LogStreams

NAMESPACE, GPU_METRIC = "/aws/sagemaker/TrainingJobs", "GPUUtilization"


@dataclass(frozen=True)
class Signal:
    name: str  # the level's name in a scenario
    metric: str  # the CloudWatch metric
    per: str  # "gpu": x GPUs (GPU hosts only), "vcpu": x vCPUs, "host": as is


SIGNALS = (
    Signal("gpu", "GPUUtilization", "gpu"),
    Signal("gpu_memory", "GPUMemoryUtilization", "gpu"),
    Signal("cpu", "CPUUtilization", "vcpu"),
    Signal("memory", "MemoryUtilization", "host"),
    Signal("disk", "DiskUtilization", "host"),
)
Levels = dict[str, float]  # signal name -> percent (per GPU, per vCPU or of the host)

# The lifecycle phases' own levels (no script runs yet or any more: the platform copies data).
PHASE_LEVELS: dict[str, Levels] = {
    "downloading": {"gpu": 0.0, "gpu_memory": 0.0, "cpu": 20.0, "memory": 15.0},
    "uploading": {"gpu": 0.0, "gpu_memory": 0.0, "cpu": 10.0, "memory": 15.0},
}


@dataclass(frozen=True)
class Activity:
    """What a job is doing, as far as its hosts' signals and logs are concerned."""

    kind: str  # "off", "downloading", "uploading", "training", "stalled"
    phase: Phase | None = None  # the script's phase while training (None: the main loop)

    @property
    def phase_name(self) -> str:
        return self.phase.name if self.phase is not None else "training"


OFF = Activity("off")


def training_levels(script: Script, phase: Phase | None, host: Host) -> Levels:
    levels: Levels = {
        "gpu": script.gpu_percent,
        "gpu_memory": script.gpu_memory_percent,
        "cpu": script.cpu_percent,
        "memory": script.memory_percent,
    }
    if phase is not None:
        levels["gpu"] = phase.gpu_percent
        for name, value in (
            ("gpu_memory", phase.gpu_memory_percent),
            ("cpu", phase.cpu_percent),
            ("memory", phase.memory_percent),
        ):
            if value is not None:
                levels[name] = value
    for profile in script.hosts:
        if profile.applies(host.number, host.group):
            for name, value in (
                ("gpu", profile.gpu_percent),
                ("gpu_memory", profile.gpu_memory_percent),
                ("cpu", profile.cpu_percent),
                ("memory", profile.memory_percent),
            ):
                if value is not None:
                    levels[name] = value
    return levels


def stalled_levels(script: Script, host: Host) -> Levels:
    levels = training_levels(script, None, host)
    levels["gpu"], levels["cpu"] = script.stall_gpu_percent, script.stall_cpu_percent
    for profile in script.hosts:
        if profile.applies(host.number, host.group):
            if profile.stall_gpu_percent is not None:
                levels["gpu"] = profile.stall_gpu_percent
            if profile.stall_cpu_percent is not None:
                levels["cpu"] = profile.stall_cpu_percent
    return levels


def host_levels(script: Script, activity: Activity, host: Host) -> Levels | None:
    if activity.kind in PHASE_LEVELS:
        return dict(PHASE_LEVELS[activity.kind])
    if activity.kind == "training":
        return training_levels(script, activity.phase, host)
    if activity.kind == "stalled":
        return stalled_levels(script, host)
    return None


def log_every(script: Script, activity: Activity, host: Host) -> int:
    """A host's log cadence in minutes (0: silent). Only the training script logs (see ``logs.py``)."""
    if activity.kind == "stalled":
        return script.stall_log_every_minutes
    if activity.kind != "training":
        return 0
    every = script.log_every_minutes
    if activity.phase is not None and activity.phase.log_every_minutes is not None:
        every = activity.phase.log_every_minutes
    for profile in script.hosts:
        if profile.applies(host.number, host.group) and profile.log_every_minutes is not None:
            every = profile.log_every_minutes
    return every


class Telemetry:
    def __init__(self, store: MetricStore, *, seed: int, logs: LogStreams | None = None) -> None:
        self.store = store
        self.seed = seed
        self.logs = logs

    def publish(self, job: JobRun, activity: Activity, now: int) -> None:
        """From ``now`` on, the job's hosts publish what ``activity`` implies."""
        self._training_metrics(job, activity, now)
        script = job.script
        busiest: float | None = None
        for host in job.hosts:
            levels = host_levels(script, activity, host)
            if levels is not None:  # what the job wrote stays on its disk, whatever it does now
                levels["disk"] = job.disk_level if job.disk_level is not None else script.disk_percent
            for signal in SIGNALS:
                if signal.per == "gpu" and host.gpus == 0:
                    continue
                value = None if levels is None else self._noisy(job, host, signal, levels[signal.name], now)
                if signal.name == "gpu":
                    _extend(job.host_series.setdefault(host.name, []), now, value)
                    if value is not None:
                        busiest = value if busiest is None else max(busiest, value)
                scale = host.gpus if signal.per == "gpu" else host.vcpus if signal.per == "vcpu" else 1
                key = metric_key(NAMESPACE, signal.metric, [{"Name": "Host", "Value": host.name}])
                self.store.publish(key, now, None if value is None else value * scale)
            if self.logs is not None:
                self.logs.cadence(host.name, log_every(script, activity, host), now)
        _extend(job.series, now, busiest)

    def next_noise(self, job: JobRun, activity: Activity, now: int) -> int | None:
        """The next minute the noise changes (None: no noise while the hosts publish this)."""
        if job.script.noise_percent <= 0 or activity.kind == "off":
            return None
        every = job.script.noise_every_minutes
        return (now // every + 1) * every

    def _noisy(self, job: JobRun, host: Host, signal: Signal, level: float, now: int) -> float:
        spread = job.script.noise_percent
        if spread <= 0 or level <= 0 or signal.name == "disk":  # an idle GPU reports 0; the disk only grows
            return level
        interval = now // job.script.noise_every_minutes
        draw = zlib.crc32(f"{self.seed}|{host.name}|{signal.name}|{interval}".encode()) / 0xFFFFFFFF
        return round(min(100.0, max(0.0, level + (2 * draw - 1) * spread)), 1)

    def _training_metrics(self, job: JobRun, activity: Activity, now: int) -> None:
        for spec in job.metrics:
            on = activity.kind == "training" and (spec.phases is None or activity.phase_name in spec.phases)
            key = metric_key(NAMESPACE, spec.name, [{"Name": "TrainingJobName", "Value": job.name}])
            was = job.published.get(spec.name, False)
            if on != was:
                job.published[spec.name] = on
                self.store.publish(key, now, 1.0 if on else None, every=spec.every_minutes)


def _extend(series: list[list[float | int | None]], now: int, value: float | None) -> None:
    """Append to a ``[start, end, value]`` segment list (end None while open)."""
    if series and series[-1][1] is None:
        if series[-1][2] == value:
            return
        series[-1][1] = now
        if series[-1][0] == now:
            series.pop()
    if value is not None:
        series.append([now, None, value])
