"""Fleet Spot health: what the Spot events of every job say about an instance type right now.

Pure. The job-events function writes one ``SpotSignal`` per Spot event (an interruption, a capacity wait
that ended, a ``MaxWaitTimeExceeded``) to a ledger keyed by instance type (``adapters/spot_health.py``);
``FleetHealth.of`` aggregates the signals of a sliding window into the type's health: how many jobs were
interrupted, the fleet's interruption rate, the mean capacity wait, how many jobs ran out of Spot wait
time, and whether that is a **storm** by the policy's thresholds (``spot.storm``).

The fleet's rate pools the jobs' totals: the interruptions of every job with at least
``MIN_RUNNING_HOURS`` on record divided by their running hours (each job's latest interruption carries its
counts so far), so its exposure (``exposure_hours``) says how much it weighs. A mean of per-job rates let one
job interrupted minutes after it started (one interruption in 0.03 h: 30 an hour) outweigh days of the
others'. Items written before the counts were (a rate only) still count for storms, not for the rate.

A signal's key is the transition it comes from (its start time and the job), so a duplicate or late event
writes the same item again: the ledger counts each interruption once.

SageMaker's ``DescribeTrainingJob`` does not say in which Availability Zone a job ran, so signals are per
instance type; ``az`` is carried when a caller knows it (none does today).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.recovery_policy import StormPolicy
from sagemaker_governance.domain.spot_economics import MIN_RUNNING_HOURS, RUNNING, WAITING, Unknown, stints

INTERRUPTED: Final = "Interrupted"
MAX_WAIT_EXCEEDED: Final = "MaxWaitTimeExceeded"
BILLED: Final = frozenset({"Downloading", "Training", "Uploading"})  # an interruption is over once one follows it
CAPACITY_WAIT: Final = frozenset({"Starting", "Pending"})  # after an Interrupted: waiting for capacity


def in_interruption(job: TrainingJob) -> bool:
    """Whether the job is still in its latest interruption: ``InProgress`` and ``Interrupted`` now, or
    waiting for capacity after it (``Starting``/``Pending`` with no billed status since its last
    ``Interrupted`` transition). AWS's Managed Spot lifecycle is ``Interrupted`` -> ``Starting`` ->
    ``Downloading`` -> ``Training``, and the wait for capacity after an interruption happens in
    ``Starting``/``Pending`` (botocore's ``SecondaryStatus``: Pending is "waiting for compute capacity";
    Starting's ``StatusMessage`` "Insufficient capacity error from EC2 while launching instances,
    retrying!"): the interruption lasts until a billed status (``BILLED``) or a newer ``Interrupted``
    follows it. A waiting job whose transitions do not name an interruption is not taken for one."""
    if job.status != "InProgress":
        return False
    if job.secondary_status == INTERRUPTED:
        return True
    if job.secondary_status not in CAPACITY_WAIT:
        return False
    for transition in reversed(job.transitions):
        if transition.status == INTERRUPTED:
            return True
        if transition.status in BILLED:
            return False
    return False


class SignalKind(StrEnum):
    INTERRUPTION = "interruption"
    CAPACITY_WAIT = "capacity-wait"
    MAX_WAIT_EXCEEDED = "max-wait-exceeded"


@dataclass(frozen=True)
class SpotSignal:
    """One Spot event of one job on one instance type."""

    instance_type: str
    kind: SignalKind
    at: datetime  # the transition's start (its identity, with the job)
    job: str
    rate_per_hour: float | None = None  # the job's interruptions per running hour so far (interruptions)
    wait_minutes: float | None = None  # how long the wait lasted (capacity waits)
    az: str | None = None
    interruptions: int | None = None  # the job's interruptions so far, this one included (interruptions)
    running_hours: float | None = None  # the job's running hours so far: its exposure (interruptions)

    @property
    def key(self) -> str:
        """Unique per transition: a duplicate event rewrites the same item."""
        return f"{self.at.isoformat()}#{self.kind.value}#{self.job}"


@dataclass(frozen=True)
class FleetHealth:
    """One instance type over the window."""

    instance_type: str
    window_hours: float
    interruptions: int
    interrupted_jobs: int
    max_wait_jobs: int
    capacity_waits: int
    mean_wait_minutes: float | None
    fleet_rate_per_hour: float | None  # pooled: interruptions / running hours of the rated jobs
    storm: bool
    rated_jobs: int = 0  # the jobs whose counts make the rate (MIN_RUNNING_HOURS or more on record)
    exposure_hours: float = 0.0  # their running hours: what the rate rests on

    @classmethod
    def of(
        cls,
        instance_type: str,
        signals: Iterable[SpotSignal],
        now: datetime,
        policy: StormPolicy,
        *,
        exclude_job: str | None = None,
    ) -> FleetHealth:
        """The type's health over the window ending ``now``; ``exclude_job``: the job deciding (its own
        interruptions are already in its own rate: the fleet is the *other* jobs)."""
        since = now - timedelta(hours=policy.window_hours)
        recent = [
            s
            for s in signals
            if s.instance_type == instance_type and since <= s.at <= now and s.job != exclude_job
        ]
        interruptions = [s for s in recent if s.kind is SignalKind.INTERRUPTION]
        waits = [
            s.wait_minutes for s in recent if s.kind is SignalKind.CAPACITY_WAIT and s.wait_minutes is not None
        ]
        max_waits = {s.job for s in recent if s.kind is SignalKind.MAX_WAIT_EXCEEDED}
        latest: dict[str, SpotSignal] = {}  # each job's latest counts (cumulative: the latest holds them all)
        for signal in sorted(interruptions, key=lambda s: s.at):
            if signal.interruptions is not None and signal.running_hours is not None:
                latest[signal.job] = signal
        rated = [
            s for s in latest.values() if s.running_hours is not None and s.running_hours >= MIN_RUNNING_HOURS
        ]
        exposure = sum(s.running_hours or 0.0 for s in rated)
        interrupted = sum(s.interruptions or 0 for s in rated)
        jobs = {s.job for s in interruptions}
        return cls(
            instance_type=instance_type,
            window_hours=policy.window_hours,
            interruptions=len(interruptions),
            interrupted_jobs=len(jobs),
            max_wait_jobs=len(max_waits),
            capacity_waits=len(waits),
            mean_wait_minutes=sum(waits) / len(waits) if waits else None,
            fleet_rate_per_hour=interrupted / exposure if exposure > 0 else None,
            storm=len(jobs) >= policy.interrupted_jobs or len(max_waits) >= policy.max_wait_jobs,
            rated_jobs=len(rated),
            exposure_hours=exposure,
        )

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "fleet_instance_type": self.instance_type,
            "fleet_window_hours": self.window_hours,
            "fleet_interruptions": self.interruptions,
            "fleet_interrupted_jobs": self.interrupted_jobs,
            "fleet_max_wait_jobs": self.max_wait_jobs,
            "fleet_storm": self.storm,
        }
        if self.mean_wait_minutes is not None:
            out["fleet_mean_capacity_wait_minutes"] = round(self.mean_wait_minutes, 1)
        if self.fleet_rate_per_hour is not None:
            out["fleet_interruption_rate_per_hour"] = round(self.fleet_rate_per_hour, 3)
            out["fleet_rated_jobs"] = self.rated_jobs
            out["fleet_running_hours"] = round(self.exposure_hours, 3)
        return out


def spot_type(job: TrainingJob) -> str | None:
    """The instance type whose Spot market the job depends on (its first instance group's)."""
    groups = job.instance_groups
    return groups[0].instance_type if groups else None


def signals_of(job: TrainingJob, now: datetime) -> list[SpotSignal] | Unknown:
    """The ledger entries of this Spot event: the latest interruption (with the job's rate so far), the
    latest capacity wait that has ended (an ``Interrupted`` and the waiting after it, up to running again)
    and a ``MaxWaitTimeExceeded`` end. At most three writes, each idempotent. The wait runs through every
    unbilled waiting status (``WAITING``: ``Starting``, and ``Pending``, "waiting for compute capacity")."""
    instance_type = spot_type(job)
    if instance_type is None:
        return Unknown("the job's instance type is unknown")
    parts = stints(job.transitions, now)
    if isinstance(parts, Unknown):
        return parts
    out: list[SpotSignal] = []
    running = 0.0
    interruptions = 0
    latest: SpotSignal | None = None
    wait_start: datetime | None = None
    wait: SpotSignal | None = None
    for stint in parts:
        if stint.status in RUNNING:
            if wait_start is not None:  # capacity came back
                minutes = (stint.start - wait_start).total_seconds() / 60
                wait = SpotSignal(
                    instance_type, SignalKind.CAPACITY_WAIT, wait_start, job.name, wait_minutes=minutes
                )
                wait_start = None
            running += (stint.end - stint.start).total_seconds() / 3600
        elif stint.status == INTERRUPTED:
            interruptions += 1
            rate = interruptions / running if running > 0 else None
            latest = SpotSignal(
                instance_type,
                SignalKind.INTERRUPTION,
                stint.start,
                job.name,
                rate,
                interruptions=interruptions,
                running_hours=running,
            )
            wait_start = stint.start
        elif stint.status not in WAITING:
            wait_start = None
    if latest is not None and in_interruption(job):  # its capacity wait included: the same interruption
        out.append(latest)
    if wait is not None:
        out.append(wait)
    if job.secondary_status == MAX_WAIT_EXCEEDED and parts:
        out.append(SpotSignal(instance_type, SignalKind.MAX_WAIT_EXCEEDED, parts[-1].start, job.name))
    return out
