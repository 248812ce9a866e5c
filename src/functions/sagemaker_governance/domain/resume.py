"""Auto-resume of failed long-running jobs, and Spot to On-Demand fallback: policy and decisions.

Pure: the (freshly re-read) job, its description and tags, the effective policy and a ``CloneContext``
in; a ``CloneDecision`` out: the decisions to audit, the planned clone, and whether to stop the source.

When a job is resumed (``decide_resume``, on ``Failed``), all of these hold:

- it failed for a reason classified as transient: ``resume.transient_patterns`` is a map of name ->
  regular expression (searched case-insensitively in ``FailureReason``; the first match is recorded).
  The defaults cover SageMaker's own internal errors, capacity errors and instance-health failures,
  anchored on the error class SageMaker puts first so a user's traceback that merely *mentions* one
  of them does not match. ``AlgorithmError`` (the user's code) and other ``ClientError`` reasons are
  not resumable unless a team opts in (add e.g. ``algorithm-error: "^AlgorithmError"``); set a
  pattern to ``null`` to switch a default off;
- it trained long enough: time in the ``Training`` secondary status from SageMaker's own transition
  timestamps (days included). A clone made by governance inherits its lineage's qualification, so a
  clone that fails again while starting (e.g. on capacity) is still resumed within the budget;
- no orchestrator owns the job (a tuning, AutoML or labeling job, a Pipelines step, an AWS Batch service
  job: ``domain/orchestrators.py`` says how each is recognised); it retries the job itself;
- the lineage's retry budget is not spent (attempt number from the lineage tags, plus the retries
  SageMaker already made inside the job under its ``RetryStrategy``);
- it has a ``CheckpointConfig`` (``require_checkpoint``, default true): otherwise the clone would start
  from scratch.

Spot fallback (``decide_spot``): a Managed Spot job whose ``SecondaryStatusTransitions`` hold
``spot.max_interruptions`` ``Interrupted`` entries is stopped and resumed On-Demand; a Spot job that
ended with ``MaxWaitTimeExceeded`` is resumed On-Demand when ``spot.fallback_on_max_wait`` allows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemaker_governance.domain.clone import (
    ClonePlan,
    ClonePlanError,
    Lineage,
    LineageError,
    RequestShape,
    ResumeReason,
    plan_clone,
    role_allowed,
)
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.orchestrators import orchestrator_of, sagemaker_retries

RESUME_RULE_ID: Final = "auto-resume"
SPOT_RULE_ID: Final = "spot-fallback"
MAX_WAIT_EXCEEDED: Final = "MaxWaitTimeExceeded"
INTERRUPTED: Final = "Interrupted"
_REASON_CHARS: Final = 300

# name -> regex, searched case-insensitively in FailureReason (see the module docstring).
DEFAULT_TRANSIENT_PATTERNS: Final[dict[str, str | None]] = {
    "instance-health": r"^(InternalServerError|ClientError)\b.*\b(hardware (failure|fault|issue|error)|health ?checks?|unhealthy instances?)\b",
    "internal-server-error": r"^InternalServerError\b",
    "capacity-error": r"^(CapacityError|InsufficientCapacityError)\b",
    "insufficient-capacity": r"^ClientError\b.*\binsufficient capacity\b",
}


def _compiled(patterns: Mapping[str, str | None]) -> Mapping[str, str | None]:
    for name, regex in patterns.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise ValueError(f"pattern name {name!r} must be kebab-case (a-z, 0-9, -)")
        if regex is None:
            continue
        if not regex.strip():
            raise ValueError(f"pattern {name!r} is empty (use null to switch it off)")
        try:
            re.compile(regex)
        except (re.error, RecursionError, OverflowError) as exc:  # too deep or too large: not usable
            raise ValueError(f"pattern {name!r} is not a regular expression: {exc}") from exc
    return patterns


class ResumeCode(StrEnum):
    """Auto-resume's decision codes."""

    CLONE = "resume.clone.transient"  # failed for a transient reason after long enough: clone
    DISABLED = "resume.skip.disabled"
    NOT_FAILED = "resume.skip.not-failed"
    NOT_TRANSIENT = "resume.skip.not-transient"  # the failure reason matches no transient pattern
    TOO_SHORT = "resume.skip.too-short"  # trained less than min_training_hours (first attempt)
    BAD_LINEAGE = "resume.skip.bad-lineage"  # the lineage tags cannot be trusted
    ORCHESTRATED = "resume.skip.orchestrated"  # a tuning/AutoML/labeling job, Pipelines step or Batch job owns it
    BUDGET_SPENT = "resume.skip.budget-spent"  # max_attempts reached for the lineage
    NO_CHECKPOINT = "resume.skip.no-checkpoint"
    NOT_CLONABLE = "resume.skip.not-clonable"  # the job's description cannot be turned into a request
    ROLE_NOT_ALLOWED = "resume.skip.role-not-allowed"  # governance may not pass the job's role
    JOB_GONE = "resume.skip.job-gone"  # the job no longer exists when re-read


class SpotCode(StrEnum):
    """Spot fallback's decision codes."""

    CLONE_INTERRUPTED = "spot.clone.max-interruptions"  # interrupted max_interruptions times: clone On-Demand
    STOP_INTERRUPTED = "spot.stop.max-interruptions"  # ... and stop the Spot job
    CLONE_MAX_WAIT = "spot.clone.max-wait"  # ended with MaxWaitTimeExceeded: clone On-Demand
    DISABLED = "spot.skip.disabled"
    NOT_SPOT = "spot.skip.not-spot"
    NO_FALLBACK_ON_MAX_WAIT = "spot.skip.no-fallback-on-max-wait"
    NOT_IN_PROGRESS = "spot.skip.not-in-progress"
    BELOW_THRESHOLD = "spot.skip.below-threshold"  # fewer interruptions than max_interruptions
    BAD_LINEAGE = "spot.skip.bad-lineage"
    ORCHESTRATED = "spot.skip.orchestrated"  # its orchestrator retries it
    BUDGET_SPENT = "spot.skip.budget-spent"
    NO_CHECKPOINT = "spot.skip.no-checkpoint"
    NOT_CLONABLE = "spot.skip.not-clonable"
    ROLE_NOT_ALLOWED = "spot.skip.role-not-allowed"
    JOB_GONE = "spot.skip.job-gone"


Codes = type[ResumeCode] | type[SpotCode]


class ResumePolicy(BaseModel):
    """Auto-resume of failed jobs (``resume`` section of the policy; teams may override any field).

    Example:
        resume:
          enabled: true
          mode: enforce              # omitted: the policy's mode
          min_training_hours: 2
          max_attempts: 3            # clones per lineage
          require_checkpoint: true
          transient_patterns:        # merged by name over the defaults; null switches one off
            algorithm-error: "^AlgorithmError: .*NCCL"
            capacity-error: null
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy's mode for auto-resume.")
    min_training_hours: float = Field(default=1.0, ge=0, le=672)
    max_attempts: int = Field(default=2, ge=0, le=20, description="Most clones per lineage (0: never).")
    require_checkpoint: bool = True
    transient_patterns: dict[str, str | None] = Field(default_factory=lambda: dict(DEFAULT_TRANSIENT_PATTERNS))

    _patterns = field_validator("transient_patterns")(_compiled)

    def match(self, failure_reason: str | None) -> str | None:
        """The name of the first transient pattern ``failure_reason`` matches, if any."""
        text = (failure_reason or "").strip()
        if not text:
            return None
        for name, regex in self.transient_patterns.items():
            if regex is not None and re.search(regex, text, flags=re.IGNORECASE | re.DOTALL):
                return name
        return None


class SpotPolicy(BaseModel):
    """Spot to On-Demand fallback (``spot`` section of the policy; teams may override any field).

    Example:
        spot:
          enabled: true
          mode: audit
          max_interruptions: 3         # stop and resume On-Demand at the 3rd interruption
          fallback_on_max_wait: true   # resume On-Demand after MaxWaitTimeExceeded
          max_attempts: 2
          require_checkpoint: true
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    mode: Mode | None = Field(default=None, description="Overrides the policy's mode for Spot fallback.")
    max_interruptions: int = Field(default=3, ge=1, le=100)
    fallback_on_max_wait: bool = True
    max_attempts: int = Field(default=2, ge=0, le=20, description="Most clones per lineage (0: never).")
    require_checkpoint: bool = True


@dataclass(frozen=True)
class CloneContext:
    now: datetime
    shape: RequestShape
    role_patterns: tuple[str, ...]  # role names governance may pass (mirrors the template's grant)


@dataclass(frozen=True)
class CloneDecision:
    """What to do about one job: ``decisions`` to audit (a ``clone``, maybe a ``stop``, or one ``none``)."""

    decisions: tuple[Decision, ...]
    plan: ClonePlan | None = None
    stop_source: bool = False

    @property
    def clone(self) -> Decision | None:
        return next((d for d in self.decisions if d.action is Action.CLONE), None)

    @property
    def stop(self) -> Decision | None:
        return next((d for d in self.decisions if d.action is Action.STOP), None)


def _short(text: str | None) -> str:
    text = " ".join((text or "").split())  # one line
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _none(rule: str, code: str, mode: Mode, reason: str, evidence: dict[str, Any]) -> CloneDecision:
    return CloneDecision(
        decisions=(
            Decision(rule=rule, code=code, action=Action.NONE, mode=mode, reason=reason, evidence=evidence),
        )
    )


def _plan(
    rule: str,
    codes: Codes,
    mode: Mode,
    *,
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    ctx: CloneContext,
    max_attempts: int,
    require_checkpoint: bool,
    reason: ResumeReason,
    on_demand: bool,
    evidence: dict[str, Any],
) -> ClonePlan | CloneDecision:
    """The checks both capabilities share, then the plan; a ``none`` decision says which check failed."""
    owner = orchestrator_of(description, tags)
    if owner is not None:
        evidence.update(owner.evidence())
        return _none(
            rule,
            codes.ORCHESTRATED,
            mode,
            f"not resumed: the job belongs to a {owner.kind} ({owner.identity}), which retries it itself",
            evidence,
        )
    try:
        lineage = Lineage.of(job.name, tags)
    except LineageError as exc:
        return _none(rule, codes.BAD_LINEAGE, mode, f"not resumed: {exc}", evidence)
    retries = sagemaker_retries(job, description)
    evidence.update({"root_job": lineage.root, "attempt": lineage.next_attempt, "max_attempts": max_attempts})
    evidence.update(retries.evidence())
    if lineage.next_attempt + retries.count > max_attempts:
        inside = (
            f" and {retries.count} retr{'y' if retries.count == 1 else 'ies'} inside SageMaker"
            if retries.count
            else ""
        )
        return _none(
            rule,
            codes.BUDGET_SPENT,
            mode,
            f"not resumed: the retry budget of lineage {lineage.root} is spent "
            f"({lineage.attempt} of {max_attempts} attempt(s) made{inside})",
            evidence,
        )
    if require_checkpoint and not job.checkpoint_s3_uri:
        return _none(
            rule,
            codes.NO_CHECKPOINT,
            mode,
            "not resumed: the job has no CheckpointConfig, so a clone would start from scratch",
            evidence,
        )
    try:
        plan = plan_clone(description, tags, ctx.shape, reason=reason, on_demand=on_demand)
    except ClonePlanError as exc:
        return _none(rule, codes.NOT_CLONABLE, mode, f"not resumed: {exc}", evidence)
    evidence.update(plan.evidence())
    if not role_allowed(job.role_arn, ctx.role_patterns):
        return _none(
            rule,
            codes.ROLE_NOT_ALLOWED,
            mode,
            f"not resumed: governance may not pass role {job.role_arn} to SageMaker "
            f"(allowed: {', '.join(ctx.role_patterns) or 'none'})",
            evidence,
        )
    return plan


def decide_resume(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    resume: ResumePolicy,
    default_mode: Mode,
    ctx: CloneContext,
) -> CloneDecision:
    """Resume a ``Failed`` job when the policy says it is worth it (see the module docstring)."""
    mode = resume.mode or default_mode
    hours = round(job.training_seconds(ctx.now) / 3600, 2)
    evidence: dict[str, Any] = {"failure_reason": _short(job.failure_reason), "training_hours": hours}
    if not resume.enabled:
        return _none(RESUME_RULE_ID, ResumeCode.DISABLED, mode, "auto-resume is disabled by policy", evidence)
    if job.status != "Failed":
        return _none(
            RESUME_RULE_ID,
            ResumeCode.NOT_FAILED,
            mode,
            f"not resumed: the job is {job.status}, not Failed",
            evidence,
        )
    pattern = resume.match(job.failure_reason)
    evidence["matched_pattern"] = pattern
    if pattern is None:
        return _none(
            RESUME_RULE_ID,
            ResumeCode.NOT_TRANSIENT,
            mode,
            "not resumed: the failure reason is not classified as transient "
            f"({_short(job.failure_reason) or 'no FailureReason'})",
            evidence,
        )
    try:
        first_attempt = Lineage.of(job.name, tags).attempt == 0
    except LineageError:
        first_attempt = True  # _plan reports the broken lineage
    if first_attempt and hours < resume.min_training_hours:
        return _none(
            RESUME_RULE_ID,
            ResumeCode.TOO_SHORT,
            mode,
            f"not resumed: it trained {hours:g} h, less than the {resume.min_training_hours:g} h worth resuming",
            evidence,
        )
    planned = _plan(
        RESUME_RULE_ID,
        ResumeCode,
        mode,
        job=job,
        description=description,
        tags=tags,
        ctx=ctx,
        max_attempts=resume.max_attempts,
        require_checkpoint=resume.require_checkpoint,
        reason=ResumeReason.FAILED,
        on_demand=False,
        evidence=evidence,
    )
    if isinstance(planned, CloneDecision):
        return planned
    decision = Decision(
        rule=RESUME_RULE_ID,
        code=ResumeCode.CLONE,
        action=Action.CLONE,
        mode=mode,
        reason=(
            f"failed with a transient error ({pattern}) after {hours:g} h of training: resume as "
            f"{planned.name} (attempt {planned.attempt} of {resume.max_attempts})"
            + (f" from checkpoint {planned.checkpoint_s3_uri}" if planned.checkpoint_s3_uri else " from scratch")
        ),
        evidence=evidence,
        request=planned.request,
    )
    return CloneDecision(decisions=(decision,), plan=planned)


def is_spot_interruption(job: TrainingJob) -> bool:
    return job.status == "InProgress" and job.secondary_status == INTERRUPTED


def is_spot_max_wait(job: TrainingJob) -> bool:
    return job.is_terminal and job.secondary_status == MAX_WAIT_EXCEEDED


def is_resume_trigger(job: TrainingJob) -> bool:
    """The states auto-resume looks at (the template routes them with the JobEnded rule)."""
    return job.status == "Failed" and not is_spot_max_wait(job)


def is_spot_trigger(job: TrainingJob) -> bool:
    """The states Spot fallback looks at (routed by the JobInterrupted and JobEnded rules)."""
    return is_spot_interruption(job) or is_spot_max_wait(job)


def decide_spot(
    job: TrainingJob,
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    *,
    spot: SpotPolicy,
    default_mode: Mode,
    ctx: CloneContext,
) -> CloneDecision:
    """Fall back to On-Demand: after ``max_interruptions`` interruptions (stop + clone), or after
    ``MaxWaitTimeExceeded`` (clone)."""
    mode = spot.mode or default_mode
    interruptions = job.count_transitions(INTERRUPTED)
    evidence: dict[str, Any] = {
        "interruptions": interruptions,
        "max_interruptions": spot.max_interruptions,
        "secondary_status": job.secondary_status,
    }
    if not spot.enabled:
        return _none(SPOT_RULE_ID, SpotCode.DISABLED, mode, "Spot fallback is disabled by policy", evidence)
    if not job.spot:
        return _none(SPOT_RULE_ID, SpotCode.NOT_SPOT, mode, "not a Managed Spot job: no fallback", evidence)
    ended = is_spot_max_wait(job)
    if ended:
        if not spot.fallback_on_max_wait:
            return _none(
                SPOT_RULE_ID,
                SpotCode.NO_FALLBACK_ON_MAX_WAIT,
                mode,
                "MaxWaitTimeExceeded: the policy does not fall back to On-Demand",
                evidence,
            )
        reason, why = ResumeReason.SPOT_MAX_WAIT, "ran out of Spot wait time (MaxWaitTimeExceeded)"
    elif job.status != "InProgress":
        return _none(
            SPOT_RULE_ID,
            SpotCode.NOT_IN_PROGRESS,
            mode,
            f"the job is {job.status}/{job.secondary_status} now: nothing to fall back from",
            evidence,
        )
    elif interruptions < spot.max_interruptions:
        return _none(
            SPOT_RULE_ID,
            SpotCode.BELOW_THRESHOLD,
            mode,
            f"interrupted {interruptions} time(s); falls back to On-Demand at {spot.max_interruptions}",
            evidence,
        )
    else:
        reason, why = ResumeReason.SPOT_INTERRUPTED, f"was interrupted {interruptions} time(s)"
    planned = _plan(
        SPOT_RULE_ID,
        SpotCode,
        mode,
        job=job,
        description=description,
        tags=tags,
        ctx=ctx,
        max_attempts=spot.max_attempts,
        require_checkpoint=spot.require_checkpoint,
        reason=reason,
        on_demand=True,
        evidence=evidence,
    )
    if isinstance(planned, CloneDecision):
        return planned
    where = f" from checkpoint {planned.checkpoint_s3_uri}" if planned.checkpoint_s3_uri else " from scratch"
    clone = Decision(
        rule=SPOT_RULE_ID,
        code=SpotCode.CLONE_MAX_WAIT if ended else SpotCode.CLONE_INTERRUPTED,
        action=Action.CLONE,
        mode=mode,
        reason=f"Spot job {why}: resume On-Demand as {planned.name}{where}",
        evidence=evidence,
        request=planned.request,
    )
    if ended:
        return CloneDecision(decisions=(clone,), plan=planned)
    stop = Decision(
        rule=SPOT_RULE_ID,
        code=SpotCode.STOP_INTERRUPTED,
        action=Action.STOP,
        mode=mode,
        reason=f"Spot job {why}: stop it, its On-Demand clone {planned.name} takes over",
        evidence=dict(evidence),
    )
    return CloneDecision(decisions=(clone, stop), plan=planned, stop_source=True)
