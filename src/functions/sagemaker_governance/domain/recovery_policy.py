"""The policy sections of auto-resume and Spot fallback (``resume``, ``spot``): their schema only.

Every function validates the whole policy (a broken section is rejected wherever it is read), so every
function builds these models; the decisions that read them are in ``domain/resume.py`` (with
``failures.py``, ``spot_economics.py``, ``spot_health.py``, ``spot_alternatives.py``), which only the
functions that resume or fall back import: the guard stopper never does (cold start, BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.failure_signatures import Signature, Verdict

if TYPE_CHECKING:  # read by the resume decisions only (domain/resume.py), which import it anyway
    from sagemaker_governance.domain.failures import Taxonomy

# The transient patterns built in before the failure taxonomy (now its signatures), and the class a team's
# own legacy pattern is read as (one whose verdict is resume, as the pattern's was).
LEGACY_DEFAULTS: Final = frozenset(
    {"instance-health", "internal-server-error", "capacity-error", "insufficient-capacity"}
)
LEGACY_CLASS: Final = "sagemaker-internal"
MAX_BACKOFF_MINUTES: Final = 1440  # a day: the reconciler looks back this far at most for deferred resumes
# resume.logs_settle_minutes' ceiling: how long after a failure a decision whose logs gave no cause may wait for
# the failed process's last lines to reach CloudWatch Logs (a log agent batches them; AWS promises no bound)
MAX_LOGS_SETTLE_MINUTES: Final = 60
# A recovery decided this long after the job ended (a dead letter redriven days later, an event replayed) clones
# nothing (``late_after_hours``): the owner has most likely relaunched the job by hand meanwhile. The bound
# stays at least DELIVERY_SLACK_HOURS above the longest backoff (an event's own retries: EventBridge's up
# to an hour, then up to five receives of the job-events queue, each up to its 30-minute visibility
# timeout, and the reconciler's runs) and within the dead-letter queue's 14 days (beyond, it bounds nothing).
DEFAULT_LATE_AFTER_HOURS: Final = 48.0
DELIVERY_SLACK_HOURS: Final = 4.0
MAX_LATE_AFTER_HOURS: Final = 336.0
# resume.log_hosts' ceiling, and how many hosts a diagnosis reads at most when the first ones read show only a
# peer's failure (service/resume.py): 64 GetLogEvents (a few pages each at most) inside one delivery
MAX_LOG_HOSTS: Final = 64
# The fewest last lines read of each host in that second read, whatever the budget it shares
# (resume.log_hosts x resume.log_lines lines in all): a failed process's root-cause line sits within its last
# hundred lines or so (its exception line, PyTorch's 3-line CUDA postscript, torchrun's ChildFailedError
# traceback and report, the toolkit's report of the failure); 64 x 100 = 6,400 lines when it binds
EVERY_HOST_MIN_LINES: Final = 100
MAX_ALTERNATIVES: Final = 5  # spot.fallbacks: each one is a ledger Query at an interruption of an opted-in job


# The checks of a team's failure signatures and class verdicts against the built-in taxonomy: read (with
# PyYAML) only when a policy names some, never by a function's imports (cold start, BENCHMARKS.md).
def check_team_signatures(signatures: Sequence[Signature]) -> Sequence[Signature]:
    """A team's signatures may not reuse a built-in id and must name a known class."""
    if not signatures:  # nothing to check: the taxonomy is not read (a policy re-validated from its dump)
        return signatures
    from sagemaker_governance.domain.failures import builtin_taxonomy

    builtin = builtin_taxonomy()
    ids = {s.id for s in builtin.signatures}
    seen: set[str] = set()
    for signature in signatures:
        if signature.id in ids:
            raise ValueError(f"signature id {signature.id!r} is built in (built-in signatures cannot be replaced)")
        if signature.id in seen:
            raise ValueError(f"duplicate signature id {signature.id!r}")
        seen.add(signature.id)
        if signature.failure_class not in builtin.classes:
            raise ValueError(
                f"signature {signature.id!r}: unknown class {signature.failure_class!r} "
                f"(one of {', '.join(builtin.precedence)})"
            )
    return signatures


def check_class_names(verdicts: Mapping[str, Verdict]) -> Mapping[str, Verdict]:
    if not verdicts:  # nothing to check: the taxonomy is not read (a policy re-validated from its dump)
        return verdicts
    from sagemaker_governance.domain.failures import builtin_taxonomy

    known = builtin_taxonomy().classes
    unknown = [name for name in verdicts if name not in known]
    if unknown:
        raise ValueError(f"unknown class(es) {', '.join(unknown)} (one of {', '.join(known)})")
    return verdicts


class StormPolicy(BaseModel):
    """When an instance type is in a Spot storm (``spot.storm``), and what follows.

    Example:
        spot:
          storm:
            window_hours: 1
            interrupted_jobs: 3          # 3 jobs of the type interrupted within the hour ...
            max_wait_jobs: 2             # ... or 2 that ran out of Spot wait time
            count_rule_interruptions: 1  # in a storm, without the economics: On-Demand at the 1st (default: unset)
            move_new_jobs: true          # opt-in: new Spot jobs of the type start On-Demand instead
            preflight: warn              # the SDK preflight before launch: warn, on-demand (switch) or off
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Record and read the fleet's Spot health.")
    window_hours: float = Field(default=1.0, gt=0, le=168, description="The sliding window.")
    interrupted_jobs: int = Field(
        default=3, ge=1, le=10_000, description="Distinct jobs interrupted in the window."
    )
    max_wait_jobs: int = Field(default=2, ge=1, le=10_000, description="Jobs that hit MaxWaitTimeExceeded.")
    count_rule_interruptions: int | None = Field(
        default=None, ge=1, le=100, description="In a storm, without numbers: fall back here (None: as usual)."
    )
    move_new_jobs: bool = Field(
        default=False, description="Move a new Spot job of a stormy type to On-Demand while it starts (opt-in)."
    )
    preflight: Literal["warn", "on-demand", "off"] = Field(
        default="warn",
        description="The SDK preflight, for a Spot job of a stormy type: warn, switch it to On-Demand, or off.",
    )


class SpotAlternative(BaseModel):
    """One instance type to try on Spot before On-Demand (``spot.fallbacks`` entry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str = Field(pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9-]+$")
    relative_speed: float = Field(
        default=1.0, gt=0, le=10, description="The job's pace on this type against its own type (1: the same)."
    )


class ResumePolicy(BaseModel):
    """Auto-resume of failed jobs (``resume`` section of the policy; teams may override any field).

    Example:
        resume:
          enabled: true
          mode: enforce              # omitted: the policy's mode
          min_training_hours: 2
          max_attempts: 3            # clones per lineage
          backoff_minutes: [0, 15, 60]   # wait before the 1st, 2nd, 3rd (and later) clone, from the failure
          require_checkpoint: true
          require_checkpoint_progress: true   # false: resume even when the failed attempt wrote nothing
          late_after_hours: 48       # not resumed when decided longer after the failure (a late redrive)
          logs_settle_minutes: 5     # a recent failure whose logs gave no cause is decided this long after it (0: at once)
          classes:                   # verdict per failure class, over the taxonomy's defaults
            capacity: skip
          signatures:                # added to the built-in taxonomy (never replacing it)
            - id: my-plugin-transport
              class: interconnect
              pattern: "MYPLUGIN: transport to rank [0-9]+ lost"
              where: log
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy's mode for auto-resume.")
    min_training_hours: float = Field(default=1.0, ge=0, le=672)
    max_attempts: int = Field(default=2, ge=0, le=20, description="Most clones per lineage (0: never).")
    backoff_minutes: tuple[int, ...] = Field(
        default=(0, 15, 60),
        min_length=1,
        max_length=20,
        description="Minutes from the failure before clone 1, 2, ... (the last entry for later ones).",
    )
    require_checkpoint: bool = True
    require_checkpoint_progress: bool = Field(
        default=True,
        description="Skip a job whose failed attempt wrote no checkpoint (false: resume it anyway and say so).",
    )
    classes: dict[str, Verdict] = Field(default_factory=dict, description="Verdict per failure class.")
    signatures: tuple[Signature, ...] = Field(default=(), description="A team's failure signatures.")
    log_lines: int = Field(default=200, ge=10, le=10_000, description="Last lines read per host at failure.")
    log_hosts: int = Field(
        default=8,
        ge=1,
        le=MAX_LOG_HOSTS,
        description="Most hosts whose log tails are read first (all, up to 64, when those show only a peer's failure).",
    )
    late_after_hours: float = Field(
        default=DEFAULT_LATE_AFTER_HOURS,
        ge=DELIVERY_SLACK_HOURS,
        le=MAX_LATE_AFTER_HOURS,
        description="Not resumed when decided longer than this after the failure (a dead letter redriven late).",
    )
    logs_settle_minutes: int = Field(
        default=5,
        ge=0,
        le=MAX_LOGS_SETTLE_MINUTES,
        description=(
            "A failure whose logs gave no cause is decided this long after it, once its last lines may have "
            "reached CloudWatch Logs (0: at once, on what the logs hold then)."
        ),
    )

    _classes = field_validator("classes")(check_class_names)
    _signatures = field_validator("signatures")(check_team_signatures)

    @field_validator("backoff_minutes")
    @classmethod
    def _backoff(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(minutes < 0 or minutes > MAX_BACKOFF_MINUTES for minutes in value):
            raise ValueError(f"each backoff is 0 to {MAX_BACKOFF_MINUTES} minutes")
        return value

    @model_validator(mode="after")
    def _late_after_backoff(self) -> ResumePolicy:
        """A deferred resume is made after its backoff, and its own delivery may retry for hours: a bound
        below that would skip resumes that are on time."""
        floor = self.longest_wait() / 60 + DELIVERY_SLACK_HOURS
        if self.late_after_hours < floor:
            raise ValueError(
                f"late_after_hours ({self.late_after_hours:g}) must be at least the longest backoff (or "
                f"logs_settle_minutes) plus "
                f"{DELIVERY_SLACK_HOURS:g} h of delivery retries ({floor:g} h)"
            )
        return self

    def longest_wait(self) -> int:
        """The longest a resume may be deferred after its failure, in minutes: the longest backoff, or the
        settle period of a failure whose logs gave no cause (``logs_settle_minutes``), whichever is longer."""
        return max(*self.backoff_minutes, self.logs_settle_minutes)

    def backoff_for(self, attempt: int) -> int:
        """Minutes to wait from the failure before clone ``attempt`` (1, 2, ...)."""
        return self.backoff_minutes[min(max(attempt, 1), len(self.backoff_minutes)) - 1]

    @model_validator(mode="before")
    @classmethod
    def _legacy_transient_patterns(cls, data: Any) -> Any:
        """``transient_patterns`` (before the taxonomy) still loads, so an upgrade never rejects a deployed
        document: the former defaults are built in now (a ``null`` cannot switch them off any more; use
        ``classes``), and each custom pattern becomes a *generic* ``FailureReason`` signature of a resumed
        class, so a specific cause seen in the logs (an out-of-memory error, a shape error) still wins."""
        if not isinstance(data, Mapping) or "transient_patterns" not in data:
            return data
        data = dict(data)
        legacy = data.pop("transient_patterns") or {}
        if not isinstance(legacy, Mapping):
            raise ValueError("transient_patterns must be a map of name -> regular expression")
        added = [
            {
                "id": f"legacy-{name}",
                "class": LEGACY_CLASS,
                "pattern": regex,
                "role": "generic",
                "where": "reason",
                "source": f"the team's resume.transient_patterns entry {name!r} (before the failure taxonomy)",
            }
            for name, regex in legacy.items()
            if regex is not None and name not in LEGACY_DEFAULTS
        ]
        if added:
            data["signatures"] = [*added, *(data.get("signatures") or ())]
        return data

    def taxonomy(self) -> Taxonomy:
        """The built-in failure taxonomy with this policy's signatures and class verdicts."""
        from sagemaker_governance.domain.failures import builtin_taxonomy

        return builtin_taxonomy().with_team(self.signatures, self.classes)


class SpotPolicy(BaseModel):
    """Spot to On-Demand fallback (``spot`` section of the policy; teams may override any field).

    Example:
        spot:
          enabled: true
          mode: audit
          economics: true              # decide on cost and time to finish (false: the count rule alone)
          price_factor: 0.35           # Spot price / On-Demand price (from your bill's Spot savings)
          max_delay_hours: 12          # fall back once Spot would finish 12 h later than On-Demand
          max_interruptions: 8         # hard cap: On-Demand at the 8th interruption whatever the numbers
          count_rule_interruptions: 3  # without numbers (missing data): On-Demand at the 3rd
          storm:                       # the fleet's Spot health per instance type
            window_hours: 1
            interrupted_jobs: 3        # 3 jobs of a type interrupted within the hour: a storm
            count_rule_interruptions: 1  # in a storm, without numbers: On-Demand at the 1st (default: unset)
            move_new_jobs: false       # opt-in: a new Spot job of a stormy type starts On-Demand
          fallback_on_max_wait: true   # resume On-Demand after MaxWaitTimeExceeded
          fallbacks:                   # opt-in: on Spot on these types, in order, before On-Demand
            - instance_type: ml.p4de.24xlarge
              relative_speed: 1.0      # the job's pace there against its own type
          fallback_job_tag: spot-fallbacks   # ... for jobs tagged spot-fallbacks=allow (null: every job)
          max_attempts: 2
          require_checkpoint: true
          late_after_hours: 48         # a MaxWaitTimeExceeded end decided later than this is not resumed
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy's mode for Spot fallback.")
    economics: bool = Field(default=True, description="Decide on cost and time to finish (false: count rule).")
    price_factor: float = Field(
        default=0.35, gt=0, le=1, description="Spot price as a fraction of On-Demand (0.35: 65% saved)."
    )
    max_delay_hours: float | None = Field(
        default=None, ge=0, le=8760, description="Deadline slack against an uninterrupted run (None: no deadline)."
    )
    max_interruptions: int = Field(default=8, ge=1, le=100, description="Hard cap on interruptions.")
    count_rule_interruptions: int = Field(
        default=3, ge=1, le=100, description="Interruptions before falling back when the economics lack data."
    )
    storm: StormPolicy = Field(default_factory=StormPolicy, description="The fleet's Spot health.")
    fallback_on_max_wait: bool = True
    fallbacks: tuple[SpotAlternative, ...] = Field(
        default=(),
        max_length=MAX_ALTERNATIVES,
        description="Instance types to try on Spot, in order, before On-Demand (empty: straight On-Demand).",
    )
    fallback_job_tag: str | None = Field(
        default="spot-fallbacks",
        min_length=1,
        max_length=128,
        description="The tag a job carries (value allow) to move to another type (None: every job may).",
    )
    max_attempts: int = Field(default=2, ge=0, le=20, description="Most clones per lineage (0: never).")
    require_checkpoint: bool = True
    late_after_hours: float = Field(
        default=DEFAULT_LATE_AFTER_HOURS,
        ge=DELIVERY_SLACK_HOURS,
        le=MAX_LATE_AFTER_HOURS,
        description="A job that ended at MaxWaitTimeExceeded longer ago than this is not resumed On-Demand.",
    )
