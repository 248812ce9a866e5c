"""Preflight: evaluate a ``CreateTrainingJob`` request before it is sent, with the rules the Lambdas run.

Pure: the request (the same PascalCase parameters boto3, the SageMaker SDK and the API take), the
policy, ``now`` and the developer's user name in; the request to send (with policy tag defaults filled
in) and the compliance decisions out. The SDK hook (``smgov.sdk``) and ``smgov preflight``
are thin shells over ``preflight_request``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from sagemaker_governance.domain.clone import LATER_MARKS
from sagemaker_governance.domain.compliance import evaluate_compliance
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.job import TrainingJob, parse_tags
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.spot_health import FleetHealth, SpotSignal, spot_type

# A job that is about to start: what the State Change event says right after CreateTrainingJob.
PREFLIGHT_STATUS = "InProgress"
PREFLIGHT_SECONDARY_STATUS = "Starting"
# What SageMaker sets when a request leaves StoppingCondition.MaxRuntimeInSeconds out (both are optional in
# botocore's CreateTrainingJob model): "The default value is 1 day." (botocore's sagemaker service-2.json,
# StoppingCondition.MaxRuntimeInSeconds). DescribeTrainingJob then says 86400, and the service judges that.
DEFAULT_MAX_RUNTIME_SECONDS = 86_400


def lacks_max_runtime(request: Mapping[str, Any]) -> bool:
    """The request leaves ``StoppingCondition.MaxRuntimeInSeconds`` to SageMaker's default: the section left
    out, or a section that leaves the limit out. Left out, not null: an explicit null (``"StoppingCondition":
    null``, ``{"MaxRuntimeInSeconds": null}``) is the request's own value, which botocore's ``ParamValidator``
    refuses ("Invalid type for parameter ..."), so the request can never be sent; ``job_from_request`` rejects
    it (``explicit_nulls``), and it is never replaced by a job that was not requested."""
    if "StoppingCondition" not in request:
        return True
    stopping = request["StoppingCondition"]
    return isinstance(stopping, Mapping) and "MaxRuntimeInSeconds" not in stopping


def explicit_nulls(request: Mapping[str, Any]) -> list[tuple[str | int, ...]]:
    """Where ``request`` holds an explicit null: each member (at any depth: a section's member, a list's entry) whose
    value is ``None``. Present but null is not left out: botocore's ``ParamValidator`` refuses a null for every
    type of its model ("Invalid type for parameter ResourceConfig, value: None"; so for a string, an integer, a
    boolean, a list, a map), so a request holding one can never be sent. Walked without recursion, each container
    once (a request is user input, however deeply nested)."""
    found: list[tuple[str | int, ...]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), request)]
    seen: set[int] = set()
    while stack:
        loc, value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            items: list[tuple[str | int, Any]] = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            items = list(enumerate(value))
        else:
            continue
        for key, member in items:
            if member is None:
                found.append((*loc, key))
            else:
                stack.append(((*loc, key), member))
    return sorted(found, key=lambda loc: [str(part) for part in loc])


def _reject_explicit_nulls(request: Mapping[str, Any]) -> None:
    """Raise ``pydantic.ValidationError`` naming each explicit null of ``request`` (``explicit_nulls``). The job
    model cannot: built for state-change events, which write absent members as null, it takes a null for a member
    left out (``_nulls_unsaid``), so ``"ResourceConfig": null`` would be judged as a job of no known instance type
    (the instance rules inconclusive, the request not refused) and ``"Tags": null`` as an untagged job, for
    requests SageMaker never receives."""
    nulls = explicit_nulls(request)
    if not nulls:
        return
    error = PydanticCustomError(
        "explicit_null",
        "an explicit null, which botocore refuses to send (Invalid type for parameter): leave the member out",
    )
    raise ValidationError.from_exception_data(
        "CreateTrainingJobRequest",
        [InitErrorDetails(type=error, loc=loc, input=None) for loc in nulls],
    )


def job_from_request(request: Mapping[str, Any]) -> TrainingJob:
    """The job a ``CreateTrainingJob`` request would create. Raises ``pydantic.ValidationError`` when the
    request lacks what governance needs (e.g. ``TrainingJobName``).

    A request without ``Tags`` creates an untagged job: its tags are known to be empty (unlike an event
    that omits them), so the required-tags rule decides instead of reporting "not known". A request without
    ``StoppingCondition.MaxRuntimeInSeconds`` creates a job with SageMaker's default (``DEFAULT_MAX_RUNTIME_SECONDS``,
    1 day), as ``DescribeTrainingJob`` shows it to the service, so the max-runtime rule decides on it. Left
    out, not null: a member written as an explicit null, at any depth (``"ResourceConfig": null``, ``"Tags":
    null``, ``{"InstanceType": null}``), is rejected (``explicit_nulls``), as botocore refuses to send it.
    """
    _reject_explicit_nulls(request)  # a null member is rejected, never read as left out
    data = dict(request)
    if lacks_max_runtime(request):
        stopping = request.get("StoppingCondition")
        data["StoppingCondition"] = {
            **(stopping if isinstance(stopping, Mapping) else {}),
            "MaxRuntimeInSeconds": DEFAULT_MAX_RUNTIME_SECONDS,
        }
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


class SpotHealthReader(Protocol):
    """Read-only access to the fleet's Spot health ledger (``SpotHealthLedger.recent``)."""

    def recent(self, instance_type: str, since: datetime) -> list[SpotSignal]: ...


def on_demand_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The same request On-Demand: no Managed Spot, no ``MaxWaitTimeInSeconds`` (valid with Spot only)."""
    stopping = {k: v for k, v in (request.get("StoppingCondition") or {}).items() if k != "MaxWaitTimeInSeconds"}
    return {**request, "EnableManagedSpotTraining": False, "StoppingCondition": stopping}


def spot_storm_check(
    request: Mapping[str, Any], job: TrainingJob, policy: Policy, now: datetime, reader: SpotHealthReader | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A Spot request of an instance type in a storm: warn, or switch it to On-Demand
    (``spot.storm.preflight``). The request to send, and what was found (None: not a Spot request, no
    reader, or the check is off)."""
    spot = policy.for_job(job).spot
    storm = spot.storm
    kind = spot_type(job)
    if reader is None or not job.spot or kind is None or not (spot.enabled and storm.enabled):
        return dict(request), None
    if storm.preflight == "off":
        return dict(request), None
    try:
        signals = reader.recent(kind, now - timedelta(hours=storm.window_hours))
    except AdapterError as exc:  # do no harm: launch as asked, and say why nothing was checked
        return dict(request), {
            "instance_type": kind,
            "action": "unchecked",
            "note": f"Spot health unreadable: {exc}",
        }
    health = FleetHealth.of(kind, signals, now, storm)
    found: dict[str, Any] = {**health.evidence(), "instance_type": kind, "action": "none"}
    if not health.storm:
        return dict(request), found
    window = (
        f"{health.interrupted_jobs} job(s) interrupted, {health.max_wait_jobs} out of Spot wait time in "
        f"{health.window_hours:g} h"
    )
    if storm.preflight == "on-demand":
        found.update(
            action="switched-to-on-demand", note=f"{kind} is in a Spot storm ({window}): launched On-Demand"
        )
        return on_demand_request(request), found
    found.update(
        action="warn",
        note=f"{kind} is in a Spot storm ({window}): expect interruptions and capacity waits, or launch On-Demand",
    )
    return dict(request), found


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
    spot_health: dict[str, Any] | None = None  # the instance type's fleet Spot health, when it was read
    # marks governance writes on a job after its creation (``LATER_MARKS``) that the request carries
    copied_marks: tuple[str, ...] = ()

    @property
    def marks_warning(self) -> str | None:
        """A warning, not a refusal: the service does not stop a job for carrying governance's marks (a copied
        evaluation mark is ignored), but they are not the job's own (a console Clone, a pasted ListTags), the
        statements of ``smgov iam-policy`` deny the request, and a copied ``smgov:resume-settled`` written before
        the mark named its job (a bare code) would keep the job's own deferred resume from being made."""
        if not self.copied_marks:
            return None
        return (
            f"the request carries {', '.join(self.copied_marks)}, which governance writes on a job after its "
            "creation (copied from another job's tags?): remove them (smgov iam-policy's statements deny it)"
        )

    @property
    def spot_storm_warning(self) -> str | None:
        health = self.spot_health or {}
        return str(health["note"]) if health.get("action") in ("warn", "switched-to-on-demand") else None

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
            "verdict": "refused"
            if self.refused
            else ("warnings" if self.warnings or self.spot_storm_warning or self.marks_warning else "ok"),
            "refuse_on": self.refuse_on,
            "policy_digest": self.policy_digest,
            "violations": [d.explain() for d in self.blocking],
            "warnings": [d.explain() for d in self.warnings],
            "filled_tags": self.filled_tags,
            "not_evaluated": [d.reason for d in self.decisions if d.reason.startswith("not evaluated")],
            "exempted": [d.explain() for d in self.decisions if d.exempted_by],
            "notes": list(self.notes),
            "spot_health": self.spot_health,
            "copied_marks": list(self.copied_marks),
        }

    def render_text(self) -> str:
        """What a developer reads: each violation with its fix."""
        if self.refused:
            head = f"training job {self.job_name!r} refused by governance preflight: {len(self.blocking)} violation(s)"
        elif self.warnings or self.spot_storm_warning or self.marks_warning:
            head = (
                f"training job {self.job_name!r} passes governance preflight with "
                f"{len(self.warnings) + bool(self.spot_storm_warning) + bool(self.marks_warning)} warning(s)"
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
        if self.marks_warning:
            lines.append(f"  warning [governance-marks]: {self.marks_warning}")
        if self.spot_storm_warning:
            lines.append(f"  warning [spot-health]: {self.spot_storm_warning}")
        elif self.spot_health and self.spot_health.get("action") == "unchecked":
            lines.append(f"  note [spot-health]: {self.spot_health['note']}")
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
    spot_health: SpotHealthReader | None = None,
) -> PreflightOutcome:
    """Fill policy tag defaults, then evaluate the request with the compliance rules the Lambdas run.

    ``strict`` refuses on any violation whatever the policy's ``preflight.refuse_on`` says.
    ``spot_health``: the fleet's Spot health ledger (read-only); a Spot request of a type in a storm is
    warned about or switched to On-Demand (``spot.storm.preflight``).
    """
    job_from_request(request)  # malformed input (e.g. Tags) fails here, as a ValidationError naming the field
    to_send, filled = fill_tag_defaults(request, policy, user) if fill_defaults else (dict(request), {})
    job = job_from_request(to_send)
    to_send, storm = spot_storm_check(to_send, job, policy, now, spot_health)
    result = evaluate_compliance(job, policy, now)
    effective = policy.for_job(job)
    # A declared window (smgov:idle-minutes, smgov:progress-minutes) the service would ignore: a warning
    # now rather than a surprise at the first idle phase (domain/tolerance.py).
    team = policy.for_team(job.tag(policy.team_tag))
    ignored = tuple(d.decision(team.mode) for d in team.declared_tolerance(job) if not d.applied)
    defaulted = (
        (
            "StoppingCondition.MaxRuntimeInSeconds not set: judged with SageMaker's default, "
            f"{DEFAULT_MAX_RUNTIME_SECONDS} s (1 day)",
        )
        if lacks_max_runtime(to_send)
        else ()
    )
    return PreflightOutcome(
        job_name=job.name,
        request=to_send,
        filled_tags=filled,
        decisions=(*result.decisions, *ignored),
        notes=(*defaulted, *result.notes),
        refuse_on="any" if strict else effective.preflight.refuse_on,
        policy_digest=policy.digest(),
        spot_health=storm,
        copied_marks=tuple(key for key in LATER_MARKS if key in (job.tags or {})),
    )
