"""The stall judge: a guard's alarm is a trigger, this is the judgement (issue 17).

Before a job is stopped for idleness (the idle guard) or for a lack of progress (the progress guard),
the stopper gathers the job's evidence over the guard's window (``service/stall_judge.py``) and this
module decides, purely, whether the signals agree that the job is stuck:

* **per host** ``GPUUtilization``, ``GPUMemoryUtilization``, ``CPUUtilization`` and ``MemoryUtilization``
  (``/aws/sagemaker/TrainingJobs``, dimension ``Host=<job>/algo-<n>``, one-minute Average);
* **every training metric the job defines** (``MetricDefinitions``, dimension ``TrainingJobName``;
  SampleCount: any datapoint is a log line that matched, i.e. progress);
* **log activity**: whether any of the job's own streams (``<job>/algo-<n>-<epoch>``) in
  ``/aws/sagemaker/TrainingJobs`` received a line in the window;
* **writes**, read last and only when every other signal agrees, within what a stop needs (the guard's
  window; a hang: its silence limit): objects that landed under the job's ``CheckpointConfig.S3Uri``, and
  each host's ``DiskUtilization`` moving by ``disk_change_percent`` or more. A long save of a large model
  or a download inside the script keeps the GPUs idle and the log silent, and on a large host its few
  busy cores stay far below ``cpu_busy_percent``: what it writes is its sign of life.

The rules (``judge``):

* an **idle** stall (GPUs below the alarm's threshold) is confirmed only when, for the whole window, no
  GPU came back, no host's CPUs were busy (mean below ``cpu_busy_percent`` per vCPU), no training metric
  was published and the logs were silent. A CPU phase (download, tokenization, CPU evaluation,
  checkpoint save), a job that still logs or still publishes its metrics is not idle: vetoed.
* a **hang** (no progress metric, GPUs possibly pinned busy) is confirmed only when no training metric
  the job defines was published and the logs were silent for the whole window. Pinned GPUs and busy CPUs
  do not veto a hang: a deadlocked collective spins both. GPUs that work between idle and pinned do; so do
  busy CPUs while the GPUs are idle on every host (a CPU phase that prints nothing, as the idle judgement
  also holds). In a cluster of several GPU counts a host is pinned or idle only under every count it may
  still have (``gpu_counts``); an ambiguous host counts as working, never as a hang's evidence.
* **insufficient evidence never stops**: a failed or throttled read, a required series with too few
  datapoints (each GPU host's GPUs for either kind: a host the judge cannot see may be computing; each
  host's CPUs wherever they can veto), no log stream of the job at all. The verdict names what was missing.

``GPUMemoryUtilization`` and ``MemoryUtilization`` are recorded, never decisive: allocated memory stays
allocated in a stalled job and in a healthy one alike (one calibration trace sat 25 minutes at 0 % GPU
with 22 GB allocated).

CPU is judged per vCPU (``CPUUtilization`` / the host's vCPUs: SageMaker publishes the sum over them,
0-100 x vCPUs): a stalled process leaves its host at a few percent per vCPU, a CPU phase that keeps many
cores busy (a parallel download, tokenization, a CPU evaluation) well above ``cpu_busy_percent``. A phase
of a few busy cores on a large host does not reach it (8 of 192 vCPUs is 4%): there the log, what it
writes (checkpoint objects, the disk), the job's declared tolerance or the window protect it, not the CPU. Where the vCPU
count is unknown, busy vCPUs (``CPUUtilization`` / 100) decide.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from statistics import fmean
from typing import Any, Final, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

GPU: Final = "GPUUtilization"
GPU_MEMORY: Final = "GPUMemoryUtilization"
CPU: Final = "CPUUtilization"
MEMORY: Final = "MemoryUtilization"
HOST_METRICS: Final = (GPU, GPU_MEMORY, CPU, MEMORY)
# Read last, only before a stop (``DiskWrites``): the percent of the host's disk space the job's container
# uses (SageMaker developer guide, "Amazon SageMaker AI metrics in Amazon CloudWatch", job metrics).
DISK: Final = "DiskUtilization"
# The shortest window a job may declare (domain/tolerance.py): the progress guard's own minimum window.
MIN_DECLARED_MINUTES: Final = 10
# The tags a job declares its own guard windows with (domain/tolerance.py reads them).
TAG_IDLE_MINUTES: Final = "smgov:idle-minutes"
TAG_PROGRESS_MINUTES: Final = "smgov:progress-minutes"


def tolerance_hint(tag: str) -> str:
    """What a stop message tells the owner of a job with long quiet phases by design: how to declare them."""
    return (
        f"If this job has long quiet phases by design, declare them on the job: tag it {tag} with their length in "
        f"minutes (a whole number from {MIN_DECLARED_MINUTES} to your team's judge.max_declared_minutes, 240 by "
        "default) and relaunch it from its checkpoint."
    )


class MetricRead(NamedTuple):
    """One series the judge reads: query ``id``, metric name, dimensions, statistic."""

    id: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    stat: str


class MetricReadResult(NamedTuple):
    values: dict[str, tuple[float, ...] | None]  # id -> values oldest first (None: not read)
    errors: tuple[str, ...]
    times: Mapping[str, tuple[datetime, ...]] = {}  # id -> the values' minutes (when the reader knows them)


class StallKind(StrEnum):
    """What a guard's alarm claims."""

    IDLE = "idle"  # the GPUs were idle for the window
    HANG = "hang"  # no progress metric for the window (the GPUs may be busy)


class JudgeCode(StrEnum):
    """The judge's decision codes when it does not confirm a stop (a confirmed stop keeps the guard's
    own stop code, with the judge's evidence added)."""

    GPU_BUSY = "judge.veto.gpu-busy"
    CPU_BUSY = "judge.veto.cpu-busy"
    LOGS_ACTIVE = "judge.veto.logs-active"
    GPU_WORKING = "judge.veto.gpu-working"
    METRIC_PROGRESS = "judge.veto.metric-progress"
    CHECKPOINT_WRITES = "judge.veto.checkpoint-writes"
    DISK_WRITES = "judge.veto.disk-writes"
    WAIT = "judge.wait.window"  # the signals agree over the trigger's span; a stop needs longer: widened
    INSUFFICIENT = "judge.skip.insufficient-evidence"


class JudgePolicy(BaseModel):
    """The stall judge: before a stop for idleness or lack of progress, read the job's metrics and logs
    over the guard's window and stop only when every signal agrees that the job is stuck.

    ``cpu_busy_percent``: a host whose CPUs averaged at least this percent per vCPU over the window
    (``CPUUtilization`` / the host's vCPUs) is working on the CPU (download, tokenization, evaluation,
    checkpoint save); a stalled process leaves its host at a few percent. Where the vCPU count is unknown,
    ``cpu_busy_vcpus`` busy vCPUs (``CPUUtilization`` / 100) count as busy.
    ``min_coverage``: the share of the window's minutes a required series must have a datapoint for;
    less is insufficient evidence (never a stop). ``progress_metric_names``: the training metrics that
    count as progress (default: every metric the job defines; names compare as in the progress guard).

    ``gpu_working_percent`` (low, high): a hang is not confirmed while a GPU host's utilization averaged
    between these percents per GPU over the window. A hung job's GPUs are pinned (a kernel that spins in a
    collective that never completes: 100 %) or idle (nothing is launched any more: 0 %); a level in
    between means kernels start and finish, i.e. the job computes, it only logs its metric rarely.

    **Re-judging after a veto** (``rejudge_factor``, ``max_rejudge_minutes``): a vetoed alarm is not
    reset to fire again a minute later for as long as the quiet phase lasts. Its window is widened to
    ``rejudge_factor`` x the quiet stretch seen so far (the minutes since the GPUs were last busy, or since
    the progress metric was last published), at least the guard's window, at most
    ``max_rejudge_minutes``, and then it is reset: it fires again only if the job stays quiet that long
    (a 45-minute CPU evaluation vetoed at minute 30 is judged again at minute 60, i.e. never). The job's
    own rhythm so widens its window; it comes back to the guard's window when the job (re)enters
    ``Training``. Once the cap is reached the alarm is left in ``ALARM`` (no reset): it is judged again
    when the job's GPUs or metric come back and go quiet once more, or within ``rearm_minutes``: the
    scheduled reconciler resets a judged guard alarm (with its actions on) that would sit in ``ALARM`` that
    long by its next run while the job trains, so it fires again and the job is judged again (a vetoed
    pinned trigger is left in ``ALARM`` too: a job that stays pinned is judged at every reconciler run with
    the default of 10 minutes, not once a minute).

    **The job's log rhythm** (``log_rhythm_factor``, ``min_silence_minutes``): a hang (no progress metric,
    the GPUs pinned or idle) is judged over the silence the job's own logs make unusual, not over the
    guard's window: ``log_rhythm_factor`` x the longest gap between its log lines since it (re)entered
    Training (more than ``max_rejudge_minutes`` back too, its start-up's quiet then excepted), at least
    ``min_silence_minutes``, at most ``max_rejudge_minutes``. A job that logs every minute is judged hung after 20 silent minutes; one whose
    log has had a 40-minute gap (a long checkpoint save, an evaluation that prints nothing) only after 120.
    Where the rhythm cannot be read (too few lines, the read failed or was cut short) the guard's window
    is used, as without it.

    **Declared tolerance** (``max_declared_minutes``, ``domain/tolerance.py``): a job tagged
    ``smgov:idle-minutes`` or ``smgov:progress-minutes`` gets that guard window (and so that evidence
    window) when the value is a whole number of minutes from 10 to ``max_declared_minutes``; anything else
    is ignored and the owner told. 0: this team accepts no declaration.

    Example:
        judge:
          enabled: true
          cpu_busy_percent: 10
          min_coverage: 0.5
          rejudge_factor: 2
          max_rejudge_minutes: 240
          rearm_minutes: 10
          max_declared_minutes: 240
          log_rhythm_factor: 3
          min_silence_minutes: 20
          disk_change_percent: 0.5

    ``disk_change_percent``: a host whose ``DiskUtilization`` moved by at least this many points (of 100)
    within what a stop needs is writing to its disk (a save to the checkpoint path, a download) or
    clearing it: a veto. A stalled process writes nothing; 0.5 points are 150 MB of a 30 GB volume and
    40 GB of the 8 TB of instance storage an ``ml.p4d.24xlarge`` has.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    cpu_busy_percent: float = Field(default=10.0, gt=0, le=100)
    cpu_busy_vcpus: float = Field(default=1.0, gt=0, le=1000)
    min_coverage: float = Field(default=0.5, gt=0, le=1)
    progress_metric_names: tuple[str, ...] | None = None
    gpu_working_percent: tuple[float, float] = (5.0, 95.0)
    rejudge_factor: float = Field(default=2.0, ge=1.0, le=10.0)
    max_rejudge_minutes: int = Field(default=240, ge=10, le=1440)
    rearm_minutes: int = Field(default=10, ge=10, le=1440)
    max_declared_minutes: int = Field(default=240, ge=0, le=1440)
    log_rhythm_factor: float = Field(default=3.0, ge=1.0, le=20.0)
    min_silence_minutes: int = Field(default=20, ge=5, le=1440)
    disk_change_percent: float = Field(default=0.5, gt=0, le=100)

    @field_validator("gpu_working_percent")
    @classmethod
    def _working_range(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not 0 <= low < high <= 100:
            raise ValueError("gpu_working_percent: give (low, high) with 0 <= low < high <= 100")
        return value

    @field_validator("max_declared_minutes")
    @classmethod
    def _declared_cap(cls, value: int) -> int:
        if 0 < value < MIN_DECLARED_MINUTES:
            raise ValueError(
                f"max_declared_minutes: 0 (no declared tolerance) or at least {MIN_DECLARED_MINUTES} minutes"
            )
        return value


class HostEvidence(BaseModel):
    """One host's series over the window, oldest first (None: the read failed)."""

    model_config = ConfigDict(frozen=True)

    host: str
    series: dict[str, tuple[float, ...] | None]
    vcpus: int | None = None
    gpus: tuple[int, int] | None = None  # (fewest, most) GPUs this host may have (None: unknown or none)

    def values(self, metric: str) -> tuple[float, ...] | None:
        return self.series.get(metric)


class LogEvidence(BaseModel):
    """The job's log streams as read: how many exist, and the first line found in the window."""

    model_config = ConfigDict(frozen=True)

    streams: int
    line_at: datetime | None = None
    line_stream: str | None = None
    truncated: bool = False  # the search stopped before it could say "no line"


class CheckpointWrites(BaseModel):
    """The job's checkpoint location (``CheckpointConfig.S3Uri``) as listed before a stop: how many objects
    were written there since ``since``, the latest of them, or why the listing could not say (``unread``:
    a bucket outside ``CheckpointBucketPattern``, a denied or throttled read, a listing cut short)."""

    model_config = ConfigDict(frozen=True)

    location: str
    since: datetime
    written: int = 0
    latest_at: datetime | None = None
    unread: str | None = None

    def summary(self) -> dict[str, Any]:
        if self.unread is not None:
            return {"location": self.location, "since": self.since.isoformat(), "unread": self.unread}
        return {
            "location": self.location,
            "since": self.since.isoformat(),
            "written": self.written,
            "latest_written_at": self.latest_at.isoformat() if self.latest_at else None,
        }


class DiskWrites(BaseModel):
    """Each host's ``DiskUtilization`` since ``since`` as read before a stop, oldest first (a host's None:
    not read; ``unread``: what failed, with why; the hosts that were read still count)."""

    model_config = ConfigDict(frozen=True)

    since: datetime
    hosts: dict[str, tuple[float, ...] | None] = Field(default_factory=dict)
    unread: str | None = None

    def changes(self) -> dict[str, float]:
        """How far each host's disk use moved (highest minus lowest value), for hosts with two values."""
        return {h: round(max(v) - min(v), 3) for h, v in self.hosts.items() if v is not None and len(v) >= 2}

    def moved(self, points: float) -> dict[str, float]:
        """The hosts whose disk use moved by ``points`` or more, and by how much."""
        return {h: c for h, c in self.changes().items() if c >= points}

    def ruled_out(self, points: float) -> str | None:
        """What this read rules out when nothing moved, in words: every host measured, or how many of them
        (None: no host had two values, so nothing is ruled out)."""
        measured = len(self.changes())
        if not measured:
            return None
        if measured == len(self.hosts) and self.unread is None:
            return f"no host's disk moved by {points:g} points"
        return f"no disk moved by {points:g} points on the {measured} host(s) of {len(self.hosts)} measured"

    def summary(self) -> dict[str, Any]:
        moved = sorted(self.changes().items(), key=lambda item: (-item[1], item[0]))
        out: dict[str, Any] = {
            "since": self.since.isoformat(),
            "hosts_read": sum(1 for v in self.hosts.values() if v),
            # the hosts whose disk moved most (at most MAX_HOSTS_RECORDED): points of 100
            "largest_changes": dict(moved[:MAX_HOSTS_RECORDED]),
        }
        if self.unread is not None:
            out["unread"] = self.unread
        return out


# The fewest lines whose gaps say anything about a job's rhythm (three gaps).
MIN_RHYTHM_LINES: Final = 4


class LogRhythm(BaseModel):
    """The job's log lines over ``[start, end)`` as read: how many, the longest gap between two of them
    (from ``start`` to the first line too: a quiet start that ended is a healthy gap), the last one."""

    model_config = ConfigDict(frozen=True)

    start: datetime
    end: datetime
    lines: int
    longest_gap_seconds: float = 0.0
    last_line_at: datetime | None = None
    complete: bool = True  # False: the read stopped before it covered the window
    times: tuple[datetime, ...] = Field(default=(), repr=False)  # the lines' times, oldest first

    @classmethod
    def of(cls, start: datetime, end: datetime, times: Sequence[datetime], *, complete: bool) -> LogRhythm:
        ordered = tuple(sorted(t for t in times if start <= t < end))
        gaps = [(b - a).total_seconds() for a, b in zip([start, *ordered], ordered, strict=False)]
        return cls(
            start=start,
            end=end,
            lines=len(ordered),
            longest_gap_seconds=max(gaps, default=0.0),
            last_line_at=ordered[-1] if ordered else None,
            complete=complete,
            times=ordered,
        )

    def activity(self, start: datetime, streams: int) -> LogEvidence:
        """The log evidence over ``[start, end)`` from the lines read (a complete read: nothing to read again)."""
        index = bisect_left(self.times, start)
        return LogEvidence(streams=streams, line_at=self.times[index] if index < len(self.times) else None)

    def silence_minutes(self, policy: JudgePolicy) -> int | None:
        """How long the job must be silent to be judged hung (``None``: the rhythm is unknown)."""
        if not self.complete or self.lines < MIN_RHYTHM_LINES:
            return None
        wanted = math.ceil(policy.log_rhythm_factor * self.longest_gap_seconds / 60)
        return int(min(policy.max_rejudge_minutes, max(policy.min_silence_minutes, wanted)))

    def summary(self, policy: JudgePolicy) -> dict[str, Any]:
        return {
            "read_from": self.start.isoformat(),
            "lines": self.lines,
            "complete": self.complete,
            "longest_gap_minutes": round(self.longest_gap_seconds / 60, 1),
            "last_line_at": self.last_line_at.isoformat() if self.last_line_at else None,
            "silence_minutes": self.silence_minutes(policy),
        }


class Evidence(BaseModel):
    """What the stopper read about a job over ``[start, end)``."""

    model_config = ConfigDict(frozen=True)

    start: datetime
    end: datetime
    hosts: tuple[HostEvidence, ...]
    gpu_hosts: int = Field(description="How many of the hosts have GPUs (publish GPUUtilization).")
    gpu_groups: tuple[tuple[int, int], ...] = Field(
        default=(),
        description="The job's GPU hosts by GPU count: (GPUs per host, hosts) per count, from its instance "
        "groups (empty: not known). SageMaker does not say which host belongs to which group; the counts "
        "narrow what each host may have (``cluster_gpu_counts``).",
    )
    metrics: dict[str, int | None] = Field(default_factory=dict, description="Training metric -> datapoints.")
    logs: LogEvidence | None = None
    # The checkpoint location, listed only when every other signal agrees (None: not listed, or no location)
    checkpoints: CheckpointWrites | None = None
    disk: DiskWrites | None = None  # read like the checkpoint location: last, before a stop
    missing: tuple[str, ...] = ()  # reads that failed, with why

    @property
    def minutes(self) -> int:
        return max(1, int((self.end - self.start).total_seconds() // 60))


class Finding(BaseModel):
    """The judge's answer: confirm the stop, or not (``code``), with the evidence summary."""

    model_config = ConfigDict(frozen=True)

    confirmed: bool
    code: JudgeCode | None
    reason: str
    evidence: dict[str, Any]


def _summary(values: Sequence[float] | None) -> dict[str, Any] | None:
    if values is None:
        return None
    if not values:
        return {"datapoints": 0}
    return {"datapoints": len(values), "mean": round(fmean(values), 2), "max": round(max(values), 2)}


# Hosts whose evidence one audit record holds in full (about 370 bytes each). Above it the record keeps the
# busiest and sums up the rest, so that it stays far below the 256 KB of an EventBridge PutEvents entry (the
# audit forwarder's), an SQS message (its dead-letter fallback) and a CloudWatch Logs event, whatever the
# cluster's size (a 128-host stop record was 48 KB with every host).
MAX_HOSTS_RECORDED: Final = 64


def summarize(evidence: Evidence) -> dict[str, Any]:
    """The evidence as recorded in the audit record (per host mean/max per signal; logs; metrics)."""
    hosts = _host_summaries(evidence.hosts)
    out: dict[str, Any] = {
        "window": {
            "start": evidence.start.isoformat(),
            "end": evidence.end.isoformat(),
            "minutes": evidence.minutes,
        },
        "hosts": hosts,
        "training_metrics": dict(evidence.metrics),
    }
    if len(evidence.hosts) > MAX_HOSTS_RECORDED:
        out["hosts"], out["hosts_omitted"] = _busiest(evidence.hosts, hosts)
    if evidence.logs is not None:
        logs = evidence.logs
        out["logs"] = {
            "streams": logs.streams,
            "line_in_window_at": logs.line_at.isoformat() if logs.line_at else None,
            "line_stream": logs.line_stream,
        }
    if evidence.checkpoints is not None:
        out["checkpoints"] = evidence.checkpoints.summary()
    if evidence.disk is not None:
        out["disk"] = evidence.disk.summary()
    if evidence.missing:
        out["missing"] = list(evidence.missing)
    return out


def _busiest(all_hosts: Sequence[HostEvidence], hosts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``MAX_HOSTS_RECORDED`` hosts closest to a veto (busiest GPUs, then CPUs, then by name) in full, and
    what the others had: how many, and per signal the lowest and highest of their means and their maximum."""

    def busy(host: HostEvidence) -> tuple[float, float, str]:
        gpu, cpu = host.values(GPU), host.values(CPU)
        return (-(fmean(gpu) if gpu else -1.0), -(fmean(cpu) if cpu else -1.0), host.host)

    ranked = sorted(all_hosts, key=busy)
    kept = {h.host: hosts[h.host] for h in ranked[:MAX_HOSTS_RECORDED]}
    rest = [hosts[h.host] for h in ranked[MAX_HOSTS_RECORDED:]]
    signals: dict[str, Any] = {}
    for metric in HOST_METRICS:
        read = [s[metric] for s in rest if s.get(metric) and s[metric].get("datapoints")]
        if read:
            signals[metric] = {
                "lowest_mean": min(r["mean"] for r in read),
                "highest_mean": max(r["mean"] for r in read),
                "max": max(r["max"] for r in read),
            }
    omitted = {"count": len(rest), "kept": f"the {MAX_HOSTS_RECORDED} busiest (GPU, then CPU)", "signals": signals}
    return kept, omitted


def _host_summaries(all_hosts: Sequence[HostEvidence]) -> dict[str, Any]:
    hosts: dict[str, Any] = {}
    for host in all_hosts:
        signals: dict[str, Any] = {metric: _summary(host.values(metric)) for metric in HOST_METRICS}
        cpu = host.values(CPU)
        if cpu:
            busy = fmean(cpu) / 100
            signals["busy_vcpus"] = round(busy, 2)
            if host.vcpus:
                signals["cpu_percent_per_vcpu"] = round(busy * 100 / host.vcpus, 2)
        hosts[host.host] = signals
    return hosts


def judge(kind: StallKind, evidence: Evidence, policy: JudgePolicy, *, gpu_threshold: float | None) -> Finding:
    """Whether the signals agree that the job is stuck. ``gpu_threshold``: the idle alarm's threshold
    (per host, summed over its GPUs); a GPU value at or above it in the window means the GPUs came back."""
    summary = summarize(evidence)
    summary["kind"] = kind.value
    missing = list(evidence.missing)
    need = max(1, int(evidence.minutes * policy.min_coverage))

    def thin(metric: str) -> list[str]:
        out = []
        for host in evidence.hosts:
            values = host.values(metric)
            if values is not None and len(values) < need:
                out.append(f"{metric} of {host.host}: {len(values)} of {evidence.minutes} minutes")
        return out

    # What must have been read (a failed read is already in ``missing``): for either kind each GPU host's
    # GPUs (a hang's GPUs that work between idle and pinned are its veto: a host the judge cannot see may be
    # computing), and each host's CPUs wherever they can veto: always for idleness, for a hang while the
    # GPUs are idle on every GPU host (busy CPUs are then a CPU phase, below).
    gpu_thin = thin(GPU)
    # Hosts without GPUs publish no GPUUtilization: as many hosts may lack it as the job has non-GPU hosts.
    if len(gpu_thin) > len(evidence.hosts) - evidence.gpu_hosts:
        missing += gpu_thin
    if kind is StallKind.IDLE or _cpus_decide_hang(evidence, policy):
        missing += thin(CPU)
    if evidence.logs is None:
        pass  # the failed read is in ``missing``
    elif evidence.logs.streams == 0:
        missing.append("no log stream of the job in /aws/sagemaker/TrainingJobs")
    elif evidence.logs.truncated and evidence.logs.line_at is None:
        missing.append("the log search ended before it covered the window")

    # Positive signs of life veto even when other evidence is missing: they are facts.
    published = {name: n for name, n in evidence.metrics.items() if n}
    if published:
        named = ", ".join(f"{name} ({n})" for name, n in sorted(published.items()))
        return Finding(
            confirmed=False,
            code=JudgeCode.METRIC_PROGRESS,
            reason=f"the job published training metrics in the window: {named}; it is making progress",
            evidence=summary,
        )
    logs = evidence.logs
    if logs is not None and logs.line_at is not None:
        return Finding(
            confirmed=False,
            code=JudgeCode.LOGS_ACTIVE,
            reason=f"the job wrote a log line at {logs.line_at.isoformat()}"
            + (f" ({logs.line_stream})" if logs.line_stream else "")
            + f", within the {evidence.minutes}-minute window: it is not silent",
            evidence=summary,
        )
    if (writing := _writes_veto(evidence, policy, summary)) is not None:
        return writing
    if kind is StallKind.IDLE:
        if gpu_threshold is not None:
            busy = [h.host for h in evidence.hosts if any(v >= gpu_threshold for v in (h.values(GPU) or ()))]
            if busy:
                return Finding(
                    confirmed=False,
                    code=JudgeCode.GPU_BUSY,
                    reason=f"GPU utilization came back to {gpu_threshold:g} or more on {', '.join(busy)} in the "
                    "window",
                    evidence=summary,
                )
        cpu_phase = _cpu_phase(
            evidence,
            policy,
            summary,
            "the CPUs were busy while the GPUs were idle: {busy} on average over the window (a download, "
            "tokenization, CPU evaluation or checkpoint save is not a stall)",
        )
        if cpu_phase is not None:
            return cpu_phase
    if kind is StallKind.HANG and (vetoed := _hang_veto(evidence, policy, summary)) is not None:
        return vetoed
    if missing:
        summary["missing"] = missing
        return Finding(
            confirmed=False,
            code=JudgeCode.INSUFFICIENT,
            reason="insufficient evidence to confirm the stall (never a stop): " + "; ".join(missing),
            evidence=summary,
        )
    if kind is StallKind.IDLE:
        reason = (
            f"every signal agrees over the {evidence.minutes}-minute window: GPUs idle, CPUs idle (below "
            f"{policy.cpu_busy_percent:g}% per vCPU on every host), no training metric published, no log line"
        )
    else:
        reason = (
            f"every signal agrees over the {evidence.minutes}-minute window: no training metric published and "
            "no log line, whatever the GPUs do"
        )
    if evidence.disk is not None and (ruled_out := evidence.disk.ruled_out(policy.disk_change_percent)):
        reason += f"; {ruled_out}"
    if evidence.checkpoints is not None and evidence.checkpoints.unread is None:
        reason += "; nothing new in its checkpoint location"
    return Finding(confirmed=True, code=None, reason=reason, evidence=summary)


def _writes_veto(evidence: Evidence, policy: JudgePolicy, summary: dict[str, Any]) -> Finding | None:
    """What the job wrote, read last (``judge.veto.checkpoint-writes``, ``judge.veto.disk-writes``): objects
    under its checkpoint location, or a host's disk use moving by ``disk_change_percent`` or more."""
    saved = evidence.checkpoints
    if saved is not None and saved.written:
        latest = f" (the latest at {saved.latest_at.isoformat()})" if saved.latest_at else ""
        return Finding(
            confirmed=False,
            code=JudgeCode.CHECKPOINT_WRITES,
            reason=f"the job wrote {saved.written} object(s) to its checkpoint location {saved.location} since "
            f"{saved.since.isoformat()}{latest}: it is saving its state (a long save of a large model keeps GPUs "
            "idle and the log silent), not stalled",
            evidence=summary,
        )
    disk = evidence.disk
    moved = disk.moved(policy.disk_change_percent) if disk else {}
    if disk is None or not moved:
        return None
    named = ", ".join(f"{host} ({change:g} points)" for host, change in sorted(moved.items())[:5])
    more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
    return Finding(
        confirmed=False,
        code=JudgeCode.DISK_WRITES,
        reason=f"the job's disk use moved by {policy.disk_change_percent:g} points or more since "
        f"{disk.since.isoformat()} on {named}{more}: it is writing to its disk (a save to its checkpoint path, "
        "a download) or clearing it, not stalled",
        evidence=summary,
    )


def _hang_veto(evidence: Evidence, policy: JudgePolicy, summary: dict[str, Any]) -> Finding | None:
    """What rules a hang out whatever the metric and the log say: GPUs that worked (neither pinned nor
    idle), or GPUs idle on every GPU host while CPUs were busy (a CPU phase: tokenization, an evaluation
    or rollouts on CPU, a download; the idle judgement vetoes it the same way)."""
    low, high = policy.gpu_working_percent
    counts = cluster_gpu_counts(evidence)
    working = {
        h.host: load.level
        for h in evidence.hosts
        if (load := _gpu_load(h, policy, counts[h.host])) and load.state is GpuState.WORKING
    }
    if working:
        named = ", ".join(f"{host} ({level})" for host, level in working.items())
        return Finding(
            confirmed=False,
            code=JudgeCode.GPU_WORKING,
            reason=f"the GPUs worked between {low:g}% and {high:g}% per GPU on average over the window: "
            f"{named}; a hung job's GPUs are pinned (a collective spinning) or idle, so this job computes "
            "and only logs its metric rarely",
            evidence=summary,
        )
    if not _cpus_decide_hang(evidence, policy):
        return None  # pinned (or unknown): busy CPUs are a spinning collective's, no veto
    return _cpu_phase(
        evidence,
        policy,
        summary,
        f"the GPUs were idle (below {low:g}% per GPU) and the CPUs busy: {{busy}} on average over the window; "
        "a job working on its CPUs (tokenization, an evaluation or rollouts on CPU, a download) is not hung",
    )


def _cpus_decide_hang(evidence: Evidence, policy: JudgePolicy) -> bool:
    """Whether busy CPUs veto a hang: the GPUs were idle (below ``gpu_working_percent``'s low bound per GPU,
    whatever GPU count the host may have) on every host whose GPUs were read and counted, and there was at
    least one such host. A job without GPUs (or of unknown GPU count) has no idle GPUs to tell a CPU phase
    by: its CPUs decide nothing."""
    counts = cluster_gpu_counts(evidence)
    loads = [load for h in evidence.hosts if (load := _gpu_load(h, policy, counts[h.host])) is not None]
    return bool(loads) and all(load.state is GpuState.IDLE for load in loads)


def gpus_idle(evidence: Evidence, policy: JudgePolicy) -> bool:
    """Whether every host's GPUs averaged below ``gpu_working_percent``'s low bound per GPU over the window
    whatever GPU count the host may have (or no GPU series at all): no GPU is pinned, so no collective spins."""
    counts = cluster_gpu_counts(evidence)
    return all(
        load.state is GpuState.IDLE
        for h in evidence.hosts
        if (load := _gpu_load(h, policy, counts[h.host])) is not None
    )


def _cpu_phase(evidence: Evidence, policy: JudgePolicy, summary: dict[str, Any], reason: str) -> Finding | None:
    """The ``judge.veto.cpu-busy`` finding when some host's CPUs were busy (``reason`` names them at
    ``{busy}``); None when every host's were idle."""
    cpu_busy = {h.host: load for h in evidence.hosts if (load := _cpu_busy(h, policy)) is not None}
    if not cpu_busy:
        return None
    named = ", ".join(f"{host} ({load})" for host, load in cpu_busy.items())
    return Finding(confirmed=False, code=JudgeCode.CPU_BUSY, reason=reason.format(busy=named), evidence=summary)


class GpuState(StrEnum):
    """What a host's GPUs did over the window, per GPU, whatever GPU count the host may have."""

    IDLE = "idle"  # below gpu_working_percent's low bound
    PINNED = "pinned"  # at or above its high bound
    WORKING = "working"  # anything else, including a level that is idle or pinned only under some GPU counts


class GpuLoad(NamedTuple):
    state: GpuState
    level: str  # the mean per GPU, as a range when the host's GPU count is not known to one


def gpu_counts(host: HostEvidence) -> tuple[int, int] | None:
    """The fewest and most GPUs ``host`` may have, narrowed by what it reported: its GPUUtilization is the
    sum over its GPUs (at most 100 each), so a value above 100 x k rules out k GPUs or fewer (an 8-GPU host
    of a cluster that also has 1-GPU hosts shows itself once it reports more than 100). None: unknown."""
    if host.gpus is None:
        return None
    fewest, most = host.gpus
    values = host.values(GPU)
    if values:
        fewest = min(most, max(fewest, math.ceil(max(values) / 100 - 1e-9)))
    return fewest, most


def cluster_gpu_counts(evidence: Evidence) -> dict[str, tuple[int, int] | None]:
    """Each host's fewest and most GPUs (``gpu_counts``), narrowed further by the job's GPU groups: a count
    no group has is ruled out (a host shown to have more than one GPU, in a cluster of 1- and 8-GPU hosts,
    has 8), and once as many hosts have shown at least ``c`` GPUs as the groups of ``c`` or more hold, every
    other host has fewer (two 8-GPU hosts reporting 800 beside four hosts at 100: those four have 1 GPU, so
    they are pinned, not 8 GPUs at 12.5%). Without the groups, each host as ``gpu_counts`` says."""
    own = {h.host: gpu_counts(h) for h in evidence.hosts}
    sizes = sorted({gpus for gpus, hosts in evidence.gpu_groups if gpus > 0 and hosts > 0})
    if not sizes:
        return own

    def snapped(fewest: int, most: int) -> tuple[int, int] | None:
        inside = [c for c in sizes if fewest <= c <= most]
        return (inside[0], inside[-1]) if inside else None

    counts = {h: snapped(*r) if r is not None else None for h, r in own.items()}
    if any(r is None for h, r in counts.items() if own[h] is not None):
        return own  # a host outside every group's count: the groups are not what was read, narrow nothing
    changed = True
    while changed:
        changed = False
        for i, size in enumerate(sizes[1:], start=1):
            room = sum(hosts for gpus, hosts in evidence.gpu_groups if gpus >= size)
            shown = sum(1 for r in counts.values() if r is not None and r[0] >= size)
            if shown > room:
                return own  # more hosts showed that many GPUs than the groups hold: trust neither
            if shown < room:
                continue
            for host, r in counts.items():
                if r is not None and r[0] < size <= r[1]:
                    counts[host] = (r[0], sizes[i - 1])
                    changed = True
    return counts


def _gpu_load(host: HostEvidence, policy: JudgePolicy, counts: tuple[int, int] | None) -> GpuLoad | None:
    """The host's GPUs over the window: idle or pinned only if so under every GPU count it may still have
    (``counts``: ``cluster_gpu_counts``), else working. A host that is one or the other only under some count
    is ambiguous, and an ambiguous host is never a hang's evidence: at 100 a host with 1 or 8 GPUs is pinned
    or at 12.5%."""
    values = host.values(GPU)
    if not values or counts is None:
        return None
    fewest, most = counts
    mean = fmean(values)
    low, high = policy.gpu_working_percent
    level = f"{mean / most:.0f}% per GPU" if fewest == most else f"{mean / most:.0f}-{mean / fewest:.0f}% per GPU"
    if mean / fewest < low:
        return GpuLoad(GpuState.IDLE, level)
    if mean / most >= high:
        return GpuLoad(GpuState.PINNED, level)
    return GpuLoad(GpuState.WORKING, level)


def _cpu_busy(host: HostEvidence, policy: JudgePolicy) -> str | None:
    """How busy the host's CPUs were, if busy: per vCPU when its vCPUs are known, else in busy vCPUs."""
    values = host.values(CPU)
    if not values:
        return None
    mean = fmean(values)
    if host.vcpus:
        per_vcpu = mean / host.vcpus
        return f"{per_vcpu:.0f}% per vCPU of {host.vcpus}" if per_vcpu >= policy.cpu_busy_percent else None
    return f"{mean / 100:.1f} busy vCPUs" if mean / 100 >= policy.cpu_busy_vcpus else None


def progress_metrics(defined: Sequence[str], names: Sequence[str] | None, normalize: Any) -> tuple[str, ...]:
    """The job's metrics that count as progress: all it defines, or those ``names`` lists."""
    if names is None:
        return tuple(dict.fromkeys(defined))
    wanted = {normalize(n) for n in names}
    return tuple(dict.fromkeys(d for d in defined if normalize(d) in wanted))


def window_start(now: datetime, window: timedelta, started: datetime | None) -> datetime:
    """The evidence window ``[now - window, now)``, never before the job (re)entered Training."""
    start = now - window
    return max(start, started) if started is not None else start


def host_names(job_name: str, hosts: int) -> tuple[str, ...]:
    return tuple(f"{job_name}/algo-{n}" for n in range(1, hosts + 1))


def metric_counts(raw: Mapping[str, Sequence[float] | None]) -> dict[str, int | None]:
    """SampleCount series -> datapoints (``None``: the read failed)."""
    return {name: (None if values is None else int(sum(values))) for name, values in raw.items()}


def quiet_minutes(
    now: datetime,
    since: datetime,
    active: Sequence[tuple[datetime, ...]],
    *,
    period: timedelta = timedelta(minutes=1),
) -> int:
    """How long the job has been quiet at ``now``: the minutes since the end of the last active period
    among ``active`` (the times of busy GPU minutes, or of published metric datapoints, per series), or
    since ``since`` (the start of what was read) when none was active."""
    last = max((t for times in active for t in times), default=None)
    quiet_from = max(since, last + period) if last is not None else since
    return max(0, int((now - quiet_from).total_seconds() // 60))


def rejudge_minutes(base: float, quiet: int, policy: JudgePolicy) -> int | None:
    """The window a vetoed alarm gets before it is reset (``None``: the cap is reached, leave it in ALARM):
    ``rejudge_factor`` x the quiet stretch so far, at least the guard's window ``base``, at most
    ``max_rejudge_minutes``."""
    if quiet >= policy.max_rejudge_minutes:
        return None
    wanted = math.ceil(policy.rejudge_factor * quiet)
    return int(min(policy.max_rejudge_minutes, max(math.ceil(base), wanted)))
