"""Preflight: evaluate a ``CreateTrainingJob`` request before it is sent, with the rules the Lambdas run.

Pure: the request (the same PascalCase parameters boto3, the SageMaker SDK and the API take), the
policy, ``now`` and the developer's user name in; the request to send (with policy tag defaults filled
in) and the compliance decisions out. The SDK hook (``smgov.sdk``) and ``smgov preflight``
are thin shells over ``preflight_request``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.compliance import evaluate_compliance
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.job import TrainingJob, parse_tags
from sagemaker_governance.domain.policy import Policy

# A job that is about to start: what the State Change event says right after CreateTrainingJob.
PREFLIGHT_STATUS = "InProgress"
PREFLIGHT_SECONDARY_STATUS = "Starting"


def job_from_request(request: Mapping[str, Any]) -> TrainingJob:
    """The job a ``CreateTrainingJob`` request would create. Raises ``pydantic.ValidationError`` when the
    request lacks what governance needs (e.g. ``TrainingJobName``).

    A request without ``Tags`` creates an untagged job: its tags are known to be empty (unlike an event
    that omits them), so the required-tags rule decides instead of reporting "not known".
    """
    data = dict(request)
    data["TrainingJobStatus"] = PREFLIGHT_STATUS
    data["SecondaryStatus"] = PREFLIGHT_SECONDARY_STATUS
    data["Tags"] = request.get("Tags") or []
    return TrainingJob.model_validate(data)


def fill_tag_defaults(
    request: Mapping[str, Any], policy: Policy, user: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The request with the policy's ``preflight.tag_defaults`` added where a tag is missing or empty,
    and the tags that were filled. Never overwrites a value the developer set; keeps the request's
    Key/Value list shape (SageMaker rejects duplicate keys, so an empty tag is replaced in place)."""
    current = parse_tags(request.get("Tags") or []) or {}
    effective = policy.for_team(current.get(policy.team_tag) or None).preflight
    filled: dict[str, str] = {}
    for key in effective.tag_defaults:
        if current.get(key, "").strip():
            continue
        value = effective.render_default(key, user)
        if value is not None:
            filled[key] = value
    if not filled:
        return dict(request), {}
    tags: list[dict[str, str]] = [{"Key": key, "Value": filled.get(key, value)} for key, value in current.items()]
    present = {t["Key"] for t in tags}
    tags.extend({"Key": key, "Value": value} for key, value in filled.items() if key not in present)
    return {**request, "Tags": tags}, filled


class PreflightOutcome(BaseModel):
    """The verdict on one request: what to send, what the rules decided, and whether to refuse."""

    model_config = ConfigDict(frozen=True)

    job_name: str
    request: dict[str, Any]
    filled_tags: dict[str, str]
    decisions: tuple[Decision, ...]
    notes: tuple[str, ...] = ()
    refuse_on: Literal["enforced", "any"]
    policy_digest: str

    @property
    def violations(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.action in (Action.STOP, Action.NOTIFY))

    @property
    def blocking(self) -> tuple[Decision, ...]:
        """The violations that refuse the launch (see ``PreflightPolicy.refuse_on``)."""
        if self.refuse_on == "any":
            return self.violations
        return tuple(d for d in self.violations if d.action is Action.STOP and d.mode is Mode.ENFORCE)

    @property
    def warnings(self) -> tuple[Decision, ...]:
        blocking = set(map(id, self.blocking))
        return tuple(d for d in self.violations if id(d) not in blocking)

    @property
    def refused(self) -> bool:
        return bool(self.blocking)

    def report(self) -> dict[str, Any]:
        """The stable shape ``smgov preflight --json`` prints."""
        return {
            "job": self.job_name,
            "verdict": "refused" if self.refused else ("warnings" if self.warnings else "ok"),
            "refuse_on": self.refuse_on,
            "policy_digest": self.policy_digest,
            "violations": [d.explain() for d in self.blocking],
            "warnings": [d.explain() for d in self.warnings],
            "filled_tags": self.filled_tags,
            "not_evaluated": [d.reason for d in self.decisions if d.reason.startswith("not evaluated")],
            "exempted": [d.explain() for d in self.decisions if d.exempted_by],
            "notes": list(self.notes),
        }

    def render_text(self) -> str:
        """What a developer reads: each violation with its fix."""
        if self.refused:
            head = f"training job {self.job_name!r} refused by governance preflight: {len(self.blocking)} violation(s)"
        elif self.warnings:
            head = (
                f"training job {self.job_name!r} passes governance preflight with {len(self.warnings)} warning(s)"
            )
        else:
            head = f"training job {self.job_name!r} passes governance preflight"
        lines = [head]
        for label, decisions in (("violation", self.blocking), ("warning", self.warnings)):
            for d in decisions:
                lines.append(f"  {label} [{d.rule}] ({d.mode.value}, {d.action.value}): {d.reason}")
                if d.remedy:
                    lines.append(f"      fix: {d.remedy}")
        for d in self.decisions:
            if d.exempted_by:
                reason = d.reason.removeprefix("exempt: ")
                lines.append(f"  exempt [{d.rule}]: {reason} -- {d.exempted_by}")
            elif d.action is Action.NONE and d.reason.startswith("not evaluated"):
                lines.append(f"  note [{d.rule}]: {d.reason}")
        lines.extend(f"  filled tag {key}={value!r} (policy default)" for key, value in self.filled_tags.items())
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)


class GovernanceViolation(Exception):
    """Raised to refuse a ``CreateTrainingJob`` call; the message lists each violation and its fix."""

    def __init__(self, outcome: PreflightOutcome) -> None:
        super().__init__(outcome.render_text())
        self.outcome = outcome

    @property
    def violations(self) -> tuple[Decision, ...]:
        return self.outcome.blocking


def preflight_request(
    request: Mapping[str, Any],
    policy: Policy,
    now: datetime,
    *,
    user: str | None = None,
    fill_defaults: bool = True,
    strict: bool = False,
) -> PreflightOutcome:
    """Fill policy tag defaults, then evaluate the request with the compliance rules the Lambdas run.

    ``strict`` refuses on any violation whatever the policy's ``preflight.refuse_on`` says.
    """
    job_from_request(request)  # malformed input (e.g. Tags) fails here, as a ValidationError naming the field
    to_send, filled = fill_tag_defaults(request, policy, user) if fill_defaults else (dict(request), {})
    job = job_from_request(to_send)
    result = evaluate_compliance(job, policy, now)
    effective = policy.for_job(job)
    # A declared window (smgov:idle-minutes, smgov:progress-minutes) the service would ignore: a warning
    # now rather than a surprise at the first idle phase (domain/tolerance.py).
    team = policy.for_team(job.tag(policy.team_tag))
    ignored = tuple(d.decision(team.mode) for d in team.declared_tolerance(job) if not d.applied)
    return PreflightOutcome(
        job_name=job.name,
        request=to_send,
        filled_tags=filled,
        decisions=(*result.decisions, *ignored),
        notes=result.notes,
        refuse_on="any" if strict else effective.preflight.refuse_on,
        policy_digest=policy.digest(),
    )
