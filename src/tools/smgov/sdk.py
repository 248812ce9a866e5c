"""Developer preflight: refuse a non-compliant ``CreateTrainingJob`` before it is sent.

Works wherever boto3 sends the request: raw boto3, the SageMaker Python SDK v3 (``ModelTrainer.train()``
calls ``TrainingJob.create`` in sagemaker-core) and v2 (``Estimator.fit()``), because all of them call
the botocore client. The hook is a botocore event handler on
``before-parameter-build.sagemaker.CreateTrainingJob``: it receives the caller's parameters (the
PascalCase request, before botocore validates and serializes it), so it can both evaluate the request
and fill in policy tag defaults that botocore then validates like any other tag. (``before-call``
comes later and sees only the serialized body: filling a tag there would mean re-serializing it and
skipping validation.)

    import boto3
    from smgov.sdk import governed_sagemaker_session, install_preflight

    session = boto3.Session()
    install_preflight(session, "policy.yaml", stack="sagemaker-governance")  # before clients are created
    session.client("sagemaker").create_training_job(...)  # raises GovernanceViolation when refused

    trainer = ModelTrainer(..., sagemaker_session=governed_sagemaker_session("policy.yaml", stack="sagemaker-governance"))
    trainer.train()                                        # same check, same exception

The policy document is merged over the base policy the deployed functions build from their stack's
parameters: ``stack=`` reads them (CloudFormation ``DescribeStacks``), ``settings=`` takes them as a
``Settings``; with neither, the template's Parameter defaults are used and stderr says which (a stack
deployed with other parameters judges otherwise). With ``stack=`` and no document path the stack's own
document judges (the SSM parameter its ``PolicyParameterName`` names, as its functions read it: stderr
says which version; ``StackPolicyUnreadable`` when it cannot be read).

With ``spot_health=spot_health_reader(session)`` the hook also reads the fleet's Spot health ledger (the
one ``smgov spot-health`` shows; read-only, one ``Query`` of the request's instance type) before a Managed
Spot launch: a type in a storm is warned about (``GovernanceWarning``) or, when the policy says
``spot.storm.preflight: on-demand``, the request is switched to On-Demand before it is sent.

The SDK itself is the optional extra ``sagemaker-governance[sdk]``; only ``governed_sagemaker_session``
needs it. This module never runs in a Lambda function.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.settings import Settings
from smgov.local_policy import (
    StackPolicyUnreadable,
    base_notes,
    current_user,
    defaults_note,
    deployed_settings,
    load_policy,
    reading_notes,
    stack_policy,
)
from smgov.preflight import GovernanceViolation, PreflightOutcome, SpotHealthReader, preflight_request

EVENT = "before-parameter-build.sagemaker.CreateTrainingJob"
UNIQUE_ID = "sagemaker-governance-preflight"

__all__ = [
    "EVENT",
    "GovernanceViolation",
    "GovernanceWarning",
    "PreflightHook",
    "StackPolicyUnreadable",
    "governed_sagemaker_session",
    "install_preflight",
    "spot_health_reader",
    "uninstall_preflight",
]


class GovernanceWarning(UserWarning):
    """A violation the policy does not refuse at launch (audit mode, or a notify-only rule)."""


def _resolve_policy(
    policy: Policy | str | Path | None,
    *,
    stack: str | None = None,
    settings: Settings | None = None,
    target: Any = None,
) -> Policy:
    """``policy`` as the deployed functions would build it: merged over the base policy of ``stack``'s
    parameters (read in ``target``'s region), of ``settings``, or (neither) of the template's defaults,
    said on stderr. With ``stack`` and no ``policy``, the stack's own document (its SSM parameter, read
    through ``target``), which version said on stderr; ``StackPolicyUnreadable`` when it cannot be read."""
    if isinstance(policy, Policy):
        if stack is not None or settings is not None:
            raise ValueError(
                "stack= and settings= are the base a policy document is merged over: give the document's path, "
                "not a Policy"
            )
        return policy
    if stack is not None and settings is not None:
        raise ValueError("give stack= or settings=, not both")
    if settings is None:
        settings = deployed_settings(stack, stacks=_stacks_of(target) if stack else None)
        if stack is None:
            print(f"governance preflight: {defaults_note(settings, 'stack=NAME')}", file=sys.stderr)
    for note in base_notes(settings):
        print(f"governance preflight: {note}", file=sys.stderr)
    if stack is not None and policy is None:
        reading = stack_policy(stack, settings, _client_of(target, "ssm"))
        for _, text in reading_notes(reading):
            print(f"governance preflight: {text}", file=sys.stderr)
        return reading.policy
    return load_policy(None if policy is None else str(policy), settings)


def _stacks_of(target: Any) -> Any:
    """CloudFormation through ``target``, to read the stack's parameters."""
    from smgov.adapters.cloudformation import StackOutputs

    return StackOutputs(_client_of(target, "cloudformation"))


def _client_of(target: Any, service: str) -> Any:
    """A ``service`` client through ``target`` (a boto3 Session, a botocore session or a client: its
    credentials and region)."""
    from smgov.adapters.cloudformation import CLIENT_CONFIG

    if hasattr(target, "client") and hasattr(target, "_session"):  # boto3.Session
        return target.client(service, config=CLIENT_CONFIG)
    if hasattr(target, "create_client"):  # botocore Session
        return target.create_client(service, config=CLIENT_CONFIG)
    import boto3

    meta = getattr(target, "meta", None)
    region: str | None = getattr(meta, "region_name", None)
    return boto3.client(service, region_name=region, config=CLIENT_CONFIG)  # type: ignore[call-overload]


class PreflightHook:
    """The botocore handler. Keeps the last outcome (``last_outcome``) for callers who want to show it."""

    def __init__(
        self,
        policy: Policy,
        *,
        user: str | None = None,
        strict: bool = False,
        fill_defaults: bool = True,
        clock: Callable[[], datetime] | None = None,
        spot_health: SpotHealthReader | None = None,
    ) -> None:
        self.policy = policy
        self.user = user if user is not None else current_user()
        self.strict = strict
        self.fill_defaults = fill_defaults
        self.clock = clock or (lambda: datetime.now(UTC))
        self.spot_health = spot_health
        self.last_outcome: PreflightOutcome | None = None

    def __call__(self, params: dict[str, Any], model: Any = None, **_: Any) -> None:
        try:
            outcome = preflight_request(
                params,
                self.policy,
                self.clock(),
                user=self.user,
                fill_defaults=self.fill_defaults,
                strict=self.strict,
                spot_health=self.spot_health,
            )
        except (ValidationError, ValueError) as exc:
            # A request governance cannot read: let botocore's own validation report it (it runs right
            # after this handler). If botocore accepts it, don't block the developer on our gap; the
            # deployed service still governs the job after launch.
            _validate_with_botocore(params, model)
            warnings.warn(
                f"governance preflight could not evaluate this request ({exc}); the job will be checked after launch",
                GovernanceWarning,
                stacklevel=2,
            )
            return
        self.last_outcome = outcome
        if outcome.refused:
            raise GovernanceViolation(outcome)
        if "Tags" in outcome.request and outcome.filled_tags:
            params["Tags"] = outcome.request["Tags"]
        if (outcome.spot_health or {}).get("action") == "switched-to-on-demand":
            params["EnableManagedSpotTraining"] = False
            params["StoppingCondition"] = outcome.request["StoppingCondition"]
        if outcome.warnings or outcome.spot_storm_warning or outcome.marks_warning:
            warnings.warn(outcome.render_text(), GovernanceWarning, stacklevel=2)


def _validate_with_botocore(params: dict[str, Any], model: Any) -> None:
    if model is None:
        return
    from botocore.validate import validate_parameters

    validate_parameters(params, model.input_shape)


def _event_emitter(target: Any) -> Any:
    """The event system of a boto3 Session, a botocore Session or a client."""
    meta = getattr(target, "meta", None)
    if meta is not None and hasattr(meta, "events"):  # a client
        return meta.events
    if hasattr(target, "_session") and hasattr(target._session, "get_component"):  # boto3.Session
        return target._session.get_component("event_emitter")
    if hasattr(target, "get_component"):  # botocore Session
        return target.get_component("event_emitter")
    raise TypeError(f"expected a boto3 Session, a botocore Session or a client, got {type(target).__name__}")


def spot_health_reader(
    session: Any, *, table: str | None = None, stack: str = "sagemaker-governance"
) -> SpotHealthReader:
    """The fleet's Spot health ledger, read-only, through ``session`` (a boto3 Session): ``table``, or the
    ``SpotHealthTableName`` output of ``stack`` (as ``smgov spot-health`` finds it). The developer's
    credentials need ``dynamodb:Query`` on the table (and ``cloudformation:DescribeStacks`` without
    ``table``)."""
    from sagemaker_governance.adapters.spot_health import SpotHealthLedger

    if table is None:
        outputs = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        table = next((str(o["OutputValue"]) for o in outputs if o.get("OutputKey") == "SpotHealthTableName"), None)
        if table is None:
            raise ValueError(f"stack {stack} has no SpotHealthTableName output")
    return SpotHealthLedger(session.client("dynamodb"), table)


def install_preflight(
    target: Any,
    policy: Policy | str | Path | None = None,
    *,
    stack: str | None = None,
    settings: Settings | None = None,
    user: str | None = None,
    strict: bool = False,
    fill_defaults: bool = True,
    clock: Callable[[], datetime] | None = None,
    spot_health: SpotHealthReader | None = None,
) -> PreflightHook:
    """Check every ``CreateTrainingJob`` sent through ``target`` against ``policy``.

    ``target``: a boto3 ``Session`` or botocore session (clients created from it *afterwards* get the
    hook; botocore copies the event system into each client) or a client. ``policy``: a ``Policy``, a
    policy document path (merged over the base policy, as ``smgov policy show`` does), or None: with
    ``stack``, the stack's own document (the SSM parameter its ``PolicyParameterName`` names, read as its
    functions read it; ``StackPolicyUnreadable`` when it cannot be read), else the base policy alone. The
    base policy is what the deployed functions build from their stack's parameters: ``stack`` (a stack
    name: CloudFormation ``DescribeStacks`` with the caller's credentials) or ``settings``; with neither,
    the template's Parameter defaults, and stderr says which values those are. Installing twice on the same target replaces the first hook. ``spot_health``: the fleet's Spot
    health ledger (``spot_health_reader``), read before a Managed Spot launch (None: not read).
    """
    hook = PreflightHook(
        _resolve_policy(policy, stack=stack, settings=settings, target=target),
        user=user,
        strict=strict,
        fill_defaults=fill_defaults,
        clock=clock,
        spot_health=spot_health,
    )
    events = _event_emitter(target)
    events.unregister(EVENT, unique_id=UNIQUE_ID)
    events.register(EVENT, hook, unique_id=UNIQUE_ID)
    return hook


def uninstall_preflight(target: Any) -> None:
    _event_emitter(target).unregister(EVENT, unique_id=UNIQUE_ID)


def governed_sagemaker_session(
    policy: Policy | str | Path | None = None,
    *,
    stack: str | None = None,
    settings: Settings | None = None,
    boto_session: Any | None = None,
    user: str | None = None,
    strict: bool = False,
    fill_defaults: bool = True,
    clock: Callable[[], datetime] | None = None,
    spot_health: SpotHealthReader | None = None,
    **session_kwargs: Any,
) -> Any:
    """A SageMaker SDK v3 ``Session`` whose boto3 session carries the preflight hook.

    Pass it as ``ModelTrainer(..., sagemaker_session=...)``. Needs ``sagemaker-governance[sdk]``.
    ``policy``, ``stack`` and ``settings`` as for ``install_preflight``.
    """
    import boto3

    try:
        from sagemaker.core.helper.session_helper import Session
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "the SageMaker Python SDK v3 is not installed: pip install 'sagemaker-governance[sdk]'"
        ) from exc

    boto_session = boto_session or boto3.Session()
    install_preflight(
        boto_session,
        policy,
        stack=stack,
        settings=settings,
        user=user,
        strict=strict,
        fill_defaults=fill_defaults,
        clock=clock,
        spot_health=spot_health,
    )
    return Session(boto_session=boto_session, **session_kwargs)
