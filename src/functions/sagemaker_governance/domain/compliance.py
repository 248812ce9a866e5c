"""Compliance: evaluate a job against its effective policy and plan what to do.

Pure: the job, the policy and ``now`` in; decisions and notes out. One decision per violated rule, one
per rule that could not decide (data missing, or a pattern that did not finish matching within the time budget
the service gives the evaluation), and a single ``none`` decision when the job passes every rule, so each
evaluation leaves at least one audit record; besides, a notice when the job's team tag names a team override
only as spelled otherwise (``compliance.notify.team-misspelled``: the value is read exactly, never guessed).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.rules import EvaluationContext

COMPLIANCE_RULE_ID = "compliance"
# Compliance tags a job it has evaluated (value: when); the reconciler evaluates a job in progress that
# lacks it (its Starting event was lost, or it started before governance was deployed), exactly once.
EVALUATED_TAG = "smgov:compliance-evaluated"


class ComplianceCode(StrEnum):
    """The decision codes of compliance (the rule that decided is the decision's ``rule``)."""

    STOP = "compliance.stop.violation"  # a rule with on_violation: stop is violated
    NOTIFY = "compliance.notify.violation"  # a rule with on_violation: notify is violated
    EXEMPTED = "compliance.skip.exempted"  # violated, but an exemption covers the job and rule
    INCONCLUSIVE = "compliance.skip.inconclusive"  # the rule could not decide (data missing)
    COMPLIANT = "compliance.pass.compliant"  # every rule passed
    # the job is marked evaluated (the reconciler, or another delivery, evaluated it): not evaluated again
    ALREADY_EVALUATED = "compliance.skip.already-evaluated"
    # the team tag's value names a team override only in another capitalization or with spaces: not applied, told
    TEAM_MISSPELLED = "compliance.notify.team-misspelled"


# The mark's value: when compliance evaluated the job (UTC, to the second; a valid SageMaker tag value)
MARK_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def marked_at(value: str) -> datetime | None:
    """A mark's value read as the time it was written (``MARK_TIME_FORMAT``); None when it is not one."""
    try:
        return datetime.strptime(value, MARK_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def is_own_mark(value: str | None, created: datetime | None) -> bool:
    """Whether a mark written after a job's creation (``value``: the time it was written) is governance's own
    on the job created at ``created``. Governance writes it with its clock after the job exists, so its value is
    at or after the job's ``CreationTime`` (truncated to the second, as the value is); a value that is older,
    or not a time, came with the job's request (a console Clone copies the source's tags, a developer pastes a
    previous job's ``ListTags`` output) and is not governance's. When ``created`` is not known the mark is
    taken as governance's, as before this check (a job is never evaluated twice for want of its creation
    time)."""
    if value is None:
        return False
    if created is None:
        return True
    at = marked_at(value)
    return at is not None and at >= created.astimezone(UTC).replace(microsecond=0)


def was_evaluated(tags: dict[str, str] | None, *, created: datetime | None) -> bool:
    """``tags`` (the job's current ones) carry compliance's own mark (``is_own_mark``): a copied one does
    not count, and the job is evaluated (and marked again)."""
    return is_own_mark((tags or {}).get(EVALUATED_TAG), created)


def copied_mark(tags: dict[str, str] | None, created: datetime | None) -> str | None:
    """The value of a mark on ``tags`` that is not governance's own (``is_own_mark``), None when there is none."""
    value = (tags or {}).get(EVALUATED_TAG)
    return value if value is not None and not is_own_mark(value, created) else None


def already_evaluated(job: TrainingJob, policy: Policy) -> Decision:
    """The one decision about a job its current tags show evaluated (``EVALUATED_TAG``): nothing recorded or
    told again, whatever its rules would say now."""
    marked_at = (job.tags or {}).get(EVALUATED_TAG)
    return Decision(
        rule=COMPLIANCE_RULE_ID,
        code=ComplianceCode.ALREADY_EVALUATED,
        action=Action.NONE,
        mode=policy.for_job(job).mode,
        reason=f"compliance already evaluated the job ({EVALUATED_TAG} {marked_at}): not evaluated again",
        evidence={"evaluated_at": marked_at},
    )


class ComplianceResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    decisions: tuple[Decision, ...]
    notes: tuple[str, ...] = ()
    notify_owner: bool = False
    # The violations the owner's message tells: enforce-mode ones, and audit-mode ones when the policy's
    # notify_in_audit_mode says so (a rule in audit mode during its rollout is not told beside an enforce one)
    told: tuple[Decision, ...] = ()

    @property
    def violations(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.action in (Action.STOP, Action.NOTIFY))

    @property
    def stops(self) -> bool:
        return any(d.action is Action.STOP and d.acts for d in self.decisions)

    @property
    def inconclusive(self) -> bool:
        """A rule could not decide from what the job's source says (e.g. an event that leaves a field out)."""
        return any(d.code == ComplianceCode.INCONCLUSIVE for d in self.decisions)

    @property
    def timed_out(self) -> tuple[Decision, ...]:
        """The inconclusive decisions of rules whose pattern did not finish matching in the time budget."""
        return tuple(d for d in self.decisions if PATTERN_TIMEOUT in d.evidence)


def evaluate_compliance(
    job: TrainingJob,
    policy: Policy,
    now: datetime,
    *,
    bounded: Callable[[Callable[[], bool]], bool] | None = None,
) -> ComplianceResult:
    """The decisions about ``job`` under ``policy`` (see the module docstring). ``bounded``: the time budget the
    policy's patterns run in on the job's values (``EvaluationContext.bounded``; None: unbounded): a rule whose
    pattern does not finish in it is inconclusive, and the other rules decide as usual."""
    effective = policy.for_job(job)
    ctx = EvaluationContext(now=now) if bounded is None else EvaluationContext(now=now, bounded=bounded)
    decisions: list[Decision] = []
    notes: list[str] = []
    evaluated = 0
    for rule in effective.rules:
        if not rule.enabled:
            continue
        evaluated += 1
        mode = effective.mode_for(rule.id, rule.mode)
        finding = rule.evaluate(job, ctx)
        if finding is None:
            continue
        if not finding.conclusive:
            decisions.append(
                Decision(
                    rule=rule.id,
                    code=ComplianceCode.INCONCLUSIVE,
                    action=Action.NONE,
                    mode=mode,
                    reason=f"not evaluated: {finding.message}",
                    # a pattern that did not finish matching (``Finding.unfinished_match``): which, on what
                    evidence={PATTERN_TIMEOUT: finding.unfinished} if finding.unfinished else {},
                )
            )
            continue
        planned = Action.STOP if rule.on_violation == "stop" else Action.NOTIFY
        evidence = {"observed": finding.observed, "expected": finding.expected}
        exemption, expired = effective.exemption_for(job, rule.id, now)
        notes.extend(f"expired exemption ignored for rule {rule.id}: {e.label()}" for e in expired)
        if exemption is not None:
            decisions.append(
                Decision(
                    rule=rule.id,
                    code=ComplianceCode.EXEMPTED,
                    action=Action.NONE,
                    mode=mode,
                    reason=f"exempt: {finding.message}",
                    exempted_by=exemption.label(),
                    evidence={**evidence, "would": planned.value},
                )
            )
            continue
        decisions.append(
            Decision(
                rule=rule.id,
                code=ComplianceCode.STOP if planned is Action.STOP else ComplianceCode.NOTIFY,
                action=planned,
                mode=mode,
                reason=finding.message,
                remedy=finding.remedy,
                evidence=evidence,
            )
        )
    if not decisions:
        decisions.append(
            Decision(
                rule=COMPLIANCE_RULE_ID,
                code=ComplianceCode.COMPLIANT,
                action=Action.NONE,
                mode=effective.mode,
                reason=f"compliant with {evaluated} rule(s)",
            )
        )
    misspelled = policy.team_misspelled(job)
    if misspelled:
        decisions.append(_team_misspelled(job, policy, effective.mode, misspelled))
    # The owner hears about violations in enforce mode; in audit mode only when the policy says so.
    told = tuple(
        d
        for d in decisions
        if d.action in (Action.STOP, Action.NOTIFY) and (d.mode is Mode.ENFORCE or effective.notify_in_audit_mode)
    )
    return ComplianceResult(decisions=tuple(decisions), notes=tuple(notes), notify_owner=bool(told), told=told)


def _team_misspelled(job: TrainingJob, policy: Policy, mode: Mode, overrides: tuple[str, ...]) -> Decision:
    """The notice of a team tag value that names an override only as spelled otherwise: the job is judged by the
    policy its value names (no override), never by a guess, and its owner learns why."""
    key, value = policy.team_tag, job.tag(policy.team_tag)
    named = " or ".join(f"{key}={team}" for team in overrides)
    return Decision(
        rule=COMPLIANCE_RULE_ID,
        code=ComplianceCode.TEAM_MISSPELLED,
        action=Action.NOTIFY,
        mode=mode,
        reason=f"tag {key}={value!r} names no team override as written, only "
        f"{' and '.join(f'teams.{team}' for team in overrides)} spelled otherwise (capitalization, spaces): the job "
        "is governed without a team override",
        remedy=f"Tag values are read exactly as written: tag the job {named} for the team's policy, or ask the "
        f"platform team for an override named {value!r}.",
        evidence={"tag": key, "value": value, "overrides": list(overrides)},
    )
