"""Scenario files: a fleet of simulated training jobs, as a platform team would describe its own.

A scenario is YAML (schema: the models below; documented in ``docs/simulator.md``). Each job has its
instances, tags, Spot setting and price, and a *script*: how much training work it has, its GPU
utilization while training and during recurring low-GPU phases (evaluation, checkpoint upload), and
what goes wrong (the loop stalls, the job fails, Spot capacity is reclaimed). A ``fleet`` section
draws many jobs from the built-in scenarios' jobs with a seeded random mix.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Self

import botocore.session
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from smgov.simulation import model_rules

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
INSTANCES_FILE = Path(__file__).resolve().parent / "data" / "instances.yaml"
DEFAULT_SET = (
    "holiday-weekend",
    "untagged",
    "hardware-failure",
    "spot-storm",
    "healthy",
    "nccl-hang",
    "large-cluster",
    "quiet-phases",
    "stuck-host",
    "spot-interruptions",
    "failures",
    "long-quiet-phases",
    "declared-tolerance",
    "silent-hang",
    "log-rhythm",
    "hardware-algorithm-error",
    "failure-classes",
    "efa-fault-large-cluster",
    "efficiency-nudges",
    "spot-storm-pending",
    "checkpoint-saves",
    "fleet",
)
TRANSIENT_FAILURE = "InternalServerError: We encountered an internal error. Please try again."


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Percent = Annotated[float, Field(ge=0, le=100)]
PhaseClock = Literal["training", "restart", "wall"]


class Phase(_Model):
    """A stretch of training at other utilization levels: evaluation on CPU, checkpoint upload, data loading.

    ``clock`` says what ``start_minute`` / ``every_minutes`` count: ``training`` minutes of progress (the
    default), minutes since the current Training stint began (``restart``: e.g. loading the checkpoint and
    compiling after every restart), or minutes since the job was created (``wall``).
    """

    name: str
    gpu_percent: Percent = Field(description="utilization per GPU during the phase")
    gpu_memory_percent: Percent | None = Field(None, description="GPU memory used, per GPU (None: as training)")
    cpu_percent: Percent | None = Field(None, description="average utilization per vCPU (None: as training)")
    memory_percent: Percent | None = Field(None, description="host memory used (None: as training)")
    duration_minutes: PositiveInt
    start_minute: NonNegativeInt = Field(0, description="minute of the first occurrence (see clock)")
    every_minutes: PositiveInt | None = Field(None, description="repeat every N minutes (None: once)")
    clock: PhaseClock = "training"
    log_every_minutes: NonNegativeInt | None = Field(
        None, description="a log line every N minutes during the phase (0: silent; None: as training)"
    )
    disk_growth_percent: float | None = Field(
        None,
        ge=0,
        le=100,
        description="DiskUtilization points the phase adds over its duration, linearly (a save to the local "
        "checkpoint path, a download to local disk); None: the disk stays as it is",
    )
    checkpoint_files_every_minutes: PositiveInt | None = Field(
        None,
        description="the phase writes a file to the job's checkpoint location every N minutes (a save of a "
        "sharded model; one object under CheckpointConfig.S3Uri each, as SageMaker uploads them); None: none",
    )

    @model_validator(mode="after")
    def _fits(self) -> Self:
        if self.every_minutes is not None and self.duration_minutes >= self.every_minutes:
            raise ValueError(f"phase {self.name}: duration_minutes must be shorter than every_minutes")
        return self


class PhaseTime(NamedTuple):
    """The three clocks a phase can follow: training progress, minutes into the stint, minutes since creation."""

    training: int
    restart: int
    wall: int

    def of(self, clock: PhaseClock) -> int:
        return self.training if clock == "training" else self.restart if clock == "restart" else self.wall


class HostProfile(_Model):
    """Levels of some of a job's hosts (an instance group, or hosts by number: ``algo-<n>``) that differ
    from the script's: a CPU data-loader group that works while the GPU workers wait, one stuck rank."""

    group: str | None = Field(None, description="the instance group's name")
    hosts: tuple[PositiveInt, ...] | None = Field(None, description="host numbers (algo-<n>)")
    gpu_percent: Percent | None = None
    gpu_memory_percent: Percent | None = None
    cpu_percent: Percent | None = None
    memory_percent: Percent | None = None
    stall_gpu_percent: Percent | None = Field(None, description="this host's GPU while the job is stalled")
    stall_cpu_percent: Percent | None = None
    log_every_minutes: NonNegativeInt | None = Field(None, description="this host's log cadence (0: silent)")

    @model_validator(mode="after")
    def _selects(self) -> Self:
        if (self.group is None) == (self.hosts is None):
            raise ValueError("a host profile names either an instance group or host numbers")
        return self

    def applies(self, number: int, group: str) -> bool:
        return (self.hosts is not None and number in self.hosts) or self.group == group


class Faults(_Model):
    """What goes wrong. A job resumed by the service runs without faults unless ``after_resume`` says so."""

    stall_after_minutes: NonNegativeInt | None = Field(
        None, description="training minute at which the training loop hangs (GPU drops, no progress)"
    )
    stall_gpu_percent: Percent = 0.0
    stall_cpu_percent: Percent = Field(3.0, description="average utilization per vCPU while stalled")
    stall_log_every_minutes: NonNegativeInt = Field(0, description="log lines while stalled (0: silent)")
    stall_recovers_after_minutes: PositiveInt | None = Field(
        None, description="the stall ends by itself after N minutes and training goes on (None: it never does)"
    )
    fail_after_hours: PositiveFloat | None = Field(None, description="training hours after which the job fails")
    fail_during: Literal["starting", "downloading"] | None = Field(
        None, description="the job fails at the end of this phase, before Training (capacity, a failed download)"
    )
    failure_reason: str = TRANSIENT_FAILURE
    failure_log: tuple[str, ...] | None = Field(
        None, description="the log tail the failing process writes (None: a traceback ending in failure_reason)"
    )
    failure_host: PositiveInt | None = Field(
        None,
        description="the host (algo-<n>) whose process fails and writes failure_log (None: algo-1, and no other "
        "host writes anything)",
    )
    failure_host_silent_minutes: NonNegativeInt = Field(
        0,
        description="failure_host's process dies this many minutes before the job fails: it writes failure_log "
        "then and its log ends there, while the other hosts go on until the job fails",
    )
    peer_failure_log: tuple[str, ...] = Field(
        (), description="what every host but failure_host writes when the job fails (its peer's exit, say)"
    )
    failure_log_late_minutes: NonNegativeInt = Field(
        0,
        description="failure_host's last lines (those of its last minutes, from its process's death when it died "
        "earlier: failure_log among them) reach CloudWatch Logs this many minutes after the job's Failed event, "
        "while the other hosts' lines are on time: one host's log agent that had not sent its last batch (0: on "
        "time; the late-logs fault holds every host alike)",
    )
    pending_minutes: NonNegativeInt = Field(
        0,
        description="minutes in Pending (waiting for compute capacity, unbilled) after each Starting; "
        "0: no Pending phase",
    )
    interruptions_at_minutes: tuple[PositiveInt, ...] = Field(
        (), description="Spot interruptions, in minutes since the job was created"
    )
    interruptions_every_minutes: PositiveInt | None = Field(
        None, description="Spot capacity is reclaimed every N minutes since the job was created"
    )

    def interruption_due(self, since_creation: int) -> int | None:
        """The first interruption at or after ``since_creation`` minutes (None: none)."""
        candidates = [m for m in self.interruptions_at_minutes if m >= since_creation]
        if self.interruptions_every_minutes:
            every = self.interruptions_every_minutes
            candidates.append(max(every, -(-since_creation // every) * every))
        return min(candidates) if candidates else None


class Script(Faults):
    """How the job behaves, minute by minute."""

    train_hours: PositiveFloat = Field(description="training work to complete (hours of progress)")
    gpu_percent: Percent = Field(90.0, description="utilization per GPU while training")
    gpu_memory_percent: Percent = Field(70.0, description="GPU memory used per GPU while training")
    cpu_percent: Percent = Field(30.0, description="average utilization per vCPU while training")
    memory_percent: Percent = Field(45.0, description="host memory used while training")
    disk_percent: Percent = Field(10.0, description="DiskUtilization when the job starts (phases add to it)")
    phases: tuple[Phase, ...] = ()
    hosts: tuple[HostProfile, ...] = Field((), description="levels of some hosts (by instance group or number)")
    noise_percent: float = Field(0.0, ge=0, le=50, description="seeded +/- noise on every level (0: none)")
    noise_every_minutes: PositiveInt = Field(5, description="the noise is drawn anew every N minutes")
    log_every_minutes: PositiveInt = Field(1, description="a log line every N minutes while training")
    repeat: bool = Field(False, description="the faults recur in a clone the service starts (and after retries)")
    starting_minutes: PositiveInt = 4
    downloading_minutes: NonNegativeInt = 3
    uploading_minutes: NonNegativeInt = 2
    checkpoint_every_minutes: PositiveInt = Field(30, description="progress saved every N training minutes")
    spot_capacity_wait_minutes: PositiveInt = Field(20, description="wait for Spot capacity after an interruption")
    after_resume: Faults = Field(default_factory=Faults, description="faults of a clone the service starts")

    @property
    def train_minutes(self) -> int:
        return max(1, round(self.train_hours * 60))

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.fail_after_hours is not None and self.fail_after_hours >= self.train_hours:
            raise ValueError("fail_after_hours must be less than train_hours")
        if self.fail_during is not None and self.fail_after_hours is not None:
            raise ValueError("give either fail_during or fail_after_hours")
        if self.failure_host_silent_minutes and (
            self.failure_host is None
            or self.fail_after_hours is None
            or self.failure_host_silent_minutes >= round(self.fail_after_hours * 60)
        ):
            raise ValueError("failure_host_silent_minutes needs a failure_host and a later fail_after_hours")
        if self.failure_log_late_minutes and self.failure_host is None:
            raise ValueError("failure_log_late_minutes needs a failure_host (the host whose last lines are late)")
        return self

    def resumed(self) -> Script:
        """The script a clone of this job (or a retry inside it) follows: same work and profile, the
        ``after_resume`` faults, or the same faults again with ``repeat``."""
        if self.repeat:
            return self
        return self.model_copy(update={**self.after_resume.model_dump(), "after_resume": Faults()})

    def phase_at(self, at: PhaseTime) -> Phase | None:
        """The phase the script is in at this moment (None: the main training loop)."""
        for phase in self.phases:
            offset = at.of(phase.clock) - phase.start_minute
            if offset < 0:
                continue
            if phase.every_minutes is not None:
                offset %= phase.every_minutes
            if offset < phase.duration_minutes:
                return phase
        return None

    def gpu_at(self, progress: int) -> tuple[float, str]:
        """Utilization per GPU at a training minute, and the phase name (training-clock phases only)."""
        phase = self.phase_at(PhaseTime(progress, progress, progress))
        return (phase.gpu_percent, phase.name) if phase else (self.gpu_percent, "training")

    def next_boundary(self, at: PhaseTime | int) -> int | None:
        """Minutes from ``at`` (all clocks running) to the next moment the phase may change (None: never)."""
        if isinstance(at, int):
            at = PhaseTime(at, at, at)
        candidates: list[int] = []
        for phase in self.phases:
            now = at.of(phase.clock)
            start, every, length = phase.start_minute, phase.every_minutes, phase.duration_minutes
            if now < start:
                candidates.append(start - now)
                continue
            if every is None:
                if now < start + length:
                    candidates.append(start + length - now)
                continue
            begin = start + (now - start) // every * every
            candidates.append((begin + length if now < begin + length else begin + every) - now)
        later = [c for c in candidates if c > 0]
        return min(later) if later else None

    def failure_tail(self) -> tuple[str, ...]:
        """The last lines the failing process writes to its log."""
        if self.failure_log is not None:
            return self.failure_log
        return (
            "Traceback (most recent call last):",
            '  File "/opt/ml/code/train.py", line 212, in <module>',
            "    main()",
            self.failure_reason,
        )


class InstanceGroup(_Model):
    name: str
    instance_type: str
    instance_count: PositiveInt = 1


class MetricSpec(_Model):
    """A training metric the job defines (``AlgorithmSpecification.MetricDefinitions``)."""

    name: str = Field(min_length=1, max_length=255)
    regex: str = Field("loss=([0-9.]+)", min_length=1, max_length=500)
    publishes: bool = Field(
        True,
        description="the regex matches the job's log, so SageMaker publishes the metric each training minute "
        "until the job stalls (false: a regex that never matches; nothing is ever published)",
    )
    every_minutes: PositiveInt = Field(1, description="a matching log line every N minutes (per epoch: 60)")
    phases: tuple[str, ...] | None = Field(
        None,
        description="only in these phases of Training (phase names; `training` is the main loop); None: all",
    )


class KnownGap(_Model):
    """The service of today decides this job wrong, and the issue that is to fix it.

    The scenario keeps the right outcome (``Expect``); the report shows the difference as a known gap
    (``known_gaps``) instead of an unexpected outcome, and ``--check`` passes on it. When the service gets
    the job right, the report says the gap is closed (``known_gaps_closed``) and a test fails until the
    marker is removed, so a fix shows as the scenario's expectation being met."""

    issue: PositiveInt = Field(description="the issue whose work makes the service get this job right")
    today: str = Field(description="what the service of today does instead")


class Expect(_Model):
    """The right outcome for a job, written into the scenario; the report checks it."""

    stop: bool | None = Field(None, description="governance should stop it (true) or must not (false)")
    stop_within_minutes: PositiveInt | None = Field(
        None, description="stopped at most this long after its stall began"
    )
    resume: bool | None = Field(None, description="the service should (true) or must not (false) clone it")
    complete: bool | None = Field(None, description="its work should end Completed (itself or a clone)")
    clones: NonNegativeInt | None = Field(
        None, description="exactly this many clones in its lineage (the service's resumes, all generations)"
    )
    notices_min: NonNegativeInt | None = Field(
        None, description="at least this many minimum-utilization notices to its owner (efficiency guard)"
    )
    notices_max: NonNegativeInt | None = Field(None, description="at most this many of them")
    billed_max_minutes: NonNegativeInt | None = Field(
        None, description="the job itself billed at most this many minutes (0: moved or stopped before it bills)"
    )
    note: str = Field("", description="why this is the right outcome")
    known_gap: KnownGap | None = Field(None, description="the service of today gets this job wrong (see KnownGap)")


@cache
def training_job_name_shape() -> Any:
    """SageMaker's rule for a training job's name, from AWS's own reference: botocore's service model of
    ``CreateTrainingJob`` (shape ``TrainingJobName``), checked as every request is (``model_rules``). The
    simulator models AWS, so it does not borrow the service's belief about the rule (``domain/job.py``),
    which a test holds to the same model."""
    return botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingJobName")


class JobSpec(_Model):
    """One training job of the scenario."""

    name: str = Field(description="a name CreateTrainingJob accepts (SageMaker's rule, from botocore's model)")
    start_minute: NonNegativeInt = Field(0, description="minute (from the scenario start) the job is created")
    instance_type: str | None = None
    instance_count: PositiveInt = 1
    instance_groups: tuple[InstanceGroup, ...] | None = Field(None, description="a heterogeneous cluster")
    tags: dict[str, str] = Field(default_factory=dict)
    spot: bool = False
    checkpoint: bool = Field(True, description="the job has a CheckpointConfig (resumes from it)")
    checkpoint_objects_before: NonNegativeInt = Field(
        0,
        le=100_000,
        description="objects already under the job's CheckpointConfig.S3Uri when it is created, written the day "
        "before (an earlier run's sharded checkpoints): more than a listing reads, so what the job writes now "
        "may lie beyond the cut",
    )
    max_runtime_hours: PositiveFloat = 72
    max_wait_hours: PositiveFloat | None = Field(None, description="Spot only; default max_runtime_hours + 24")
    price_per_hour: PositiveFloat | None = Field(None, description="On-Demand $ per instance-hour (overrides)")
    expect_stop: bool = Field(
        False, description="the scenario means governance to stop this job (it violates policy): not a false stop"
    )
    metric_definitions: tuple[MetricSpec, ...] = Field((), description="the job's training metrics")
    retry_attempts: int | None = Field(
        None, ge=1, le=30, description="RetryStrategy.MaximumRetryAttempts: SageMaker retries InternalServerError"
    )
    expect: Expect = Field(default_factory=Expect, description="the right outcome (checked by the report)")
    script: Script

    @field_validator("name")
    @classmethod
    def _sagemaker_name(cls, name: str) -> str:
        broken = list(model_rules.violations(training_job_name_shape(), name, "name"))
        if broken:
            raise ValueError(f"CreateTrainingJob refuses this name: {'; '.join(broken)}")
        return name

    @model_validator(mode="after")
    def _instances(self) -> Self:
        if (self.instance_type is None) == (self.instance_groups is None):
            raise ValueError("give either instance_type (with instance_count) or instance_groups")
        if self.max_wait_hours is not None and not self.spot:
            raise ValueError("max_wait_hours applies to Spot jobs only")
        if self.max_wait_hours is not None and self.max_wait_hours < self.max_runtime_hours:
            raise ValueError("max_wait_hours must be at least max_runtime_hours")
        return self

    @property
    def groups(self) -> tuple[InstanceGroup, ...]:
        if self.instance_groups is not None:
            return self.instance_groups
        assert self.instance_type is not None
        return (InstanceGroup(name="main", instance_type=self.instance_type, instance_count=self.instance_count),)


class Variation(_Model):
    """How a fleet varies the jobs it draws (each field optional)."""

    instance_types: tuple[str, ...] | None = None
    instance_counts: tuple[PositiveInt, ...] | None = None
    train_hours: tuple[PositiveFloat, PositiveFloat] | None = None
    stall_after_minutes: tuple[NonNegativeInt, NonNegativeInt] | None = None


class MixEntry(_Model):
    weight: PositiveFloat
    scenario: str = Field(description="a built-in scenario whose jobs serve as templates")
    job: str | None = Field(None, description="one job of that scenario (default: any of them)")
    vary: Variation = Field(default_factory=Variation)


class Fleet(_Model):
    size: PositiveInt
    arrival_hours: NonNegativeFloat = Field(24, description="jobs are created uniformly over this many hours")
    mix: tuple[MixEntry, ...] = Field(min_length=1)


AccountId = Annotated[str, Field(pattern=r"^[0-9]{12}$")]


class OrgMember(_Model):
    """One member account of an ``org`` scenario: the jobs it runs and its own parameter overrides."""

    account: AccountId
    jobs: tuple[str, ...] = Field(min_length=1, description="names of the scenario's jobs run in this account")
    parameters: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="this member's template Parameter overrides (over the scenario's)"
    )


class OrgSpec(_Model):
    """An organization (issue 21): every member deploys the stack forwarding its audit records to the
    audit account's central bus (org/audit-account.yaml's bus, rule and log group)."""

    audit_account: AccountId
    bus_name: str = "sagemaker-governance-audit"
    members: tuple[OrgMember, ...] = Field(min_length=1)

    @property
    def bus_arn(self) -> str:
        return f"arn:aws:events:us-east-1:{self.audit_account}:event-bus/{self.bus_name}"

    @property
    def log_group(self) -> str:
        return f"/aws/events/{self.bus_name}"


class MarketPeriod(_Model):
    """From ``from_hour`` (scenario hours) on: how often Spot reclaims this type, and the wait for it back."""

    from_hour: NonNegativeFloat = 0
    interruptions_per_hour: NonNegativeFloat = Field(description="per running hour of a job on this type")
    capacity_wait_minutes: PositiveInt = Field(20, description="unbilled wait for capacity after an interruption")


class SpotMarket(_Model):
    """Spot capacity per instance type, varying over time: interruptions are a Poisson process whose rate
    follows the type's periods (drawn per job and restart, seeded), and each interruption's capacity wait is
    the period's. A Spot job whose (first) type is listed here is interrupted by the market (its script's own
    ``interruptions_*`` still apply too)."""

    types: dict[str, tuple[MarketPeriod, ...]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        for name, periods in self.types.items():
            hours = [p.from_hour for p in periods]
            if not periods or hours != sorted(hours) or hours[0] != 0:
                raise ValueError(f"spot_market.types.{name}: periods from hour 0, in order")
        return self

    def period(self, instance_type: str, minute: int) -> MarketPeriod | None:
        periods = self.types.get(instance_type)
        if not periods:
            return None
        return [p for p in periods if p.from_hour * 60 <= minute][-1]

    def next_interruption(self, instance_type: str, minute: int, draw: float) -> int | None:
        """The first interruption after ``minute`` for a unit-exponential ``draw`` (None: never)."""
        periods = self.types.get(instance_type)
        if not periods:
            return None
        need, at = draw, float(minute)
        for index, period in enumerate(periods):
            end = periods[index + 1].from_hour * 60 if index + 1 < len(periods) else float("inf")
            if end <= at:
                continue
            rate = period.interruptions_per_hour / 60  # per minute
            if rate > 0 and (end - at) * rate >= need:
                return max(minute + 1, int(at + need / rate) + 1)
            need -= (end - at) * rate if end != float("inf") else 0.0
            at = end
        return None


class Scenario(_Model):
    name: str
    description: str = ""
    start: datetime = Field(datetime(2026, 12, 24, 17, 0, tzinfo=UTC), description="virtual minute 0 (UTC)")
    parameters: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="template Parameter overrides (the deployment)"
    )
    policy: str | dict[str, Any] | None = Field(None, description="the SSM policy document (YAML text or mapping)")
    prices: dict[str, PositiveFloat] = Field(default_factory=dict, description="On-Demand $ per instance-hour")
    spot_price_factor: float = Field(0.35, gt=0, le=1, description="Spot price as a fraction of On-Demand")
    horizon_hours: PositiveFloat | None = Field(None, description="stop the clock here (default: all jobs ended)")
    metric_delay_minutes: tuple[NonNegativeInt, NonNegativeInt] = Field(
        (1, 2), description="a datapoint is visible to CloudWatch readers this many minutes late (min, max)"
    )
    detection_minutes: NonNegativeInt = Field(
        10, description="a perfect governor's detection delay, for recoverable waste"
    )
    log_last_event_lag_minutes: NonNegativeInt | None = Field(
        None,
        description="DescribeLogStreams answers each stream's lastEventTimestamp as of this many minutes ago, "
        "none when it had no event by then (CloudWatch Logs updates it eventually); None: exact, as moto does",
    )
    jobs: tuple[JobSpec, ...] = ()
    fleet: Fleet | None = None
    spot_market: SpotMarket | None = Field(None, description="Spot interruptions and capacity waits per type")
    compare_strategies: bool = Field(
        False,
        description="also run always_spot, always_on_demand and count_fallback; the report's totals.strategies",
    )
    org: OrgSpec | None = Field(None, description="member accounts and an audit account (one audit view)")

    @model_validator(mode="after")
    def _org_covers_every_job(self) -> Self:
        if self.org is None:
            return self
        if self.fleet is not None:
            raise ValueError("org: name each member's jobs; a fleet is not supported")
        placed = [name for member in self.org.members for name in member.jobs]
        accounts = [m.account for m in self.org.members]
        if len(set(accounts)) != len(accounts) or self.org.audit_account in accounts:
            raise ValueError("org: member accounts must be distinct and differ from the audit account")
        if sorted(placed) != sorted(j.name for j in self.jobs):
            raise ValueError("org: every job must run in exactly one member account")
        return self

    def member(self, account: str) -> Scenario:
        """The scenario one member account runs: its jobs, its parameters, forwarding to the central bus."""
        assert self.org is not None
        (member,) = [m for m in self.org.members if m.account == account]
        return self.model_copy(
            update={
                "jobs": tuple(j for j in self.jobs if j.name in member.jobs),
                "parameters": {**self.parameters, **member.parameters, "CentralAuditBusArn": self.org.bus_arn},
                "org": None,
            }
        )

    @model_validator(mode="after")
    def _has_jobs(self) -> Self:
        low, high = self.metric_delay_minutes
        if low > high:
            raise ValueError("metric_delay_minutes: give (min, max)")
        if not self.jobs and self.fleet is None:
            raise ValueError("a scenario needs jobs or a fleet")
        names = [j.name for j in self.jobs]
        if len(names) != len(set(names)):
            raise ValueError("job names must be unique")
        return self

    def expand(self, seed: int) -> list[JobSpec]:
        """Every job of the scenario; a fleet is drawn with ``random.Random(seed)``."""
        jobs = list(self.jobs)
        if self.fleet is not None:
            jobs += _draw_fleet(self.fleet, seed, taken={j.name for j in jobs})
        return sorted(jobs, key=lambda j: (j.start_minute, j.name))


def _draw_fleet(fleet: Fleet, seed: int, taken: set[str]) -> list[JobSpec]:
    rng = random.Random(seed)
    weights = [entry.weight for entry in fleet.mix]
    out: list[JobSpec] = []
    for index in range(fleet.size):
        entry = rng.choices(fleet.mix, weights=weights)[0]
        source = builtin_scenario(entry.scenario)
        candidates = [j for j in source.jobs if entry.job in (None, j.name)]
        if not candidates:
            raise ValueError(f"fleet mix: scenario {entry.scenario} has no job {entry.job}")
        template = rng.choice(candidates)
        start = rng.randint(0, round(fleet.arrival_hours * 60))
        out.append(_vary(template, entry.vary, rng, index=index, taken=taken, start=start))
    return out


def _vary(
    template: JobSpec, vary: Variation, rng: random.Random, *, index: int, taken: set[str], start: int
) -> JobSpec:
    name = f"{template.name[:52].rstrip('-')}-{index:04d}"
    while name in taken:
        name += "x"
    taken.add(name)
    script = template.script
    updates: dict[str, Any] = {}
    if vary.train_hours is not None:
        hours = round(rng.uniform(*vary.train_hours), 1)
        script_update: dict[str, Any] = {"train_hours": hours}
        if script.fail_after_hours is not None:  # fail at the same fraction of the work
            script_update["fail_after_hours"] = round(script.fail_after_hours * hours / script.train_hours, 2)
        script = script.model_copy(update=script_update)
        updates["max_runtime_hours"] = max(template.max_runtime_hours, hours + 1)
        if template.max_wait_hours is not None:
            updates["max_wait_hours"] = max(template.max_wait_hours, updates["max_runtime_hours"])
    if vary.stall_after_minutes is not None:
        script = script.model_copy(update={"stall_after_minutes": rng.randint(*vary.stall_after_minutes)})
    if template.instance_type is not None:
        if vary.instance_types:
            updates["instance_type"] = rng.choice(vary.instance_types)
        if vary.instance_counts:
            updates["instance_count"] = rng.choice(vary.instance_counts)
    return JobSpec.model_validate(
        {
            **template.model_dump(),
            **updates,
            "name": name,
            "start_minute": start,
            "price_per_hour": template.price_per_hour if "instance_type" not in updates else None,
            "script": script.model_dump(),
        }
    )


def load_scenario(name_or_file: str) -> Scenario:
    """A built-in scenario by name, or a YAML file (a directory of that name, e.g. the repository's org/,
    is not a scenario file)."""
    path = Path(name_or_file)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_file():
        return parse_scenario(path.read_text(), source=str(path))
    return builtin_scenario(name_or_file)


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a scenario is a YAML mapping")
    return Scenario.model_validate(data)


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


@cache
def builtin_scenario(name: str) -> Scenario:
    path = SCENARIO_DIR / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"no built-in scenario {name!r}; built in: {', '.join(builtin_names())}")
    return parse_scenario(path.read_text(), source=str(path))


class InstanceInfo(_Model):
    gpus: NonNegativeInt = 0
    vcpus: PositiveInt = 4
    price_per_hour: float | None = None


@cache
def instance_table() -> dict[str, InstanceInfo]:
    raw = yaml.safe_load(INSTANCES_FILE.read_text())
    return {name: InstanceInfo.model_validate(info) for name, info in raw.items()}


def gpus_of(instance_type: str) -> int:
    info = instance_table().get(instance_type)
    return info.gpus if info else 0


def vcpus_of(instance_type: str) -> int:
    info = instance_table().get(instance_type)
    return info.vcpus if info else 4


def on_demand_price(instance_type: str, scenario: Scenario, job: JobSpec | None = None) -> float:
    if job is not None and job.price_per_hour is not None:
        return job.price_per_hour
    if instance_type in scenario.prices:
        return scenario.prices[instance_type]
    info = instance_table().get(instance_type)
    if info is None or info.price_per_hour is None:
        raise ValueError(f"no price for {instance_type}: add it to the scenario's prices")
    return info.price_per_hour
