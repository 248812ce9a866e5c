"""The policy and the user as the developer tools see them (the CLI, the SDK preflight hook).

The base policy comes from the deploy-time settings the functions would get: the template's Parameter
defaults (``template.yaml``'s ``Globals`` environment, resolved), or a deployed stack's parameter values
(``--stack NAME``: CloudFormation ``DescribeStacks``), with any of those variables set in the caller's
environment on top. Without this an untagged job looked compliant in the CLI (the code's own defaults
have no required tags) and was not once deployed (the template requires ``team`` and ``cost-center``).

With a stack named and no document path, the document is the stack's own: the SSM parameter its
``PolicyParameterName`` names, read as a new container of its functions reads it (``stack_policy``).
Without it an SCP made with ``--stack`` denied, across an organization, jobs the deployed service lets run
(a team's wider instance types, an exemption).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy, parse_document
from sagemaker_governance.settings import Settings

if TYPE_CHECKING:
    from sagemaker_governance.adapters.policy_store import PolicyReading
    from smgov.adapters.cloudformation import StackOutputs

DEFAULT_STACK = "sagemaker-governance"
# The settings the base policy's mode, team and compliance rules are built from
# (``Settings.base_policy_document``): what a developer is told was assumed when no stack was named.
RULE_SETTINGS = (
    "mode",
    "team_tag",
    "required_tags",
    "allowed_instance_types",
    "max_instance_count",
    "max_runtime_hours",
    "max_spot_wait_hours",
    "spot_checkpoint_action",
)


def template_environment(
    parameters: Mapping[str, str] | None = None,
    template: Mapping[str, Any] | None = None,
    stack_name: str = DEFAULT_STACK,
) -> dict[str, str]:
    """The functions' ``Globals`` environment with the template's Parameter defaults (``parameters`` over
    them). Variables that name resources (topics, the account) are left out: only a deployment knows them."""
    if template is None:
        from smgov.cfn_template import TEMPLATE_PATH, load_template

        if not TEMPLATE_PATH.exists():  # installed without the repository: the code's defaults
            return {}
        template = load_template()
    values = {name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()}
    values.update({k: str(v) for k, v in (parameters or {}).items() if k in values})
    pseudo = {"AWS::StackName": stack_name}
    out: dict[str, str] = {}
    variables = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    for key, node in variables.items():
        if isinstance(node, Mapping) and "Ref" in node and (node["Ref"] in values or node["Ref"] in pseudo):
            out[key] = values[node["Ref"]] if node["Ref"] in values else pseudo[node["Ref"]]
        elif (
            isinstance(node, Mapping)
            and isinstance(node.get("Fn::Sub"), str)
            and "${AWS::StackName}" in node["Fn::Sub"]
        ):
            text = node["Fn::Sub"].replace("${AWS::StackName}", stack_name)
            if "${" not in text:
                out[key] = text
        elif isinstance(node, str | int | float | bool):
            out[key] = str(node)
    return out


def deployed_settings(
    stack: str | None = None, environ: Mapping[str, str] | None = None, *, stacks: StackOutputs | None = None
) -> Settings:
    """What the functions read: the template's defaults, or ``stack``'s parameters (read through
    ``stacks``, or CloudFormation in the caller's AWS configuration); then the environment."""
    parameters: dict[str, str] = {}
    if stack:
        from smgov.adapters.cloudformation import StackOutputs

        parameters = (stacks or StackOutputs.connect()).parameters(stack)
    env = template_environment(parameters, stack_name=stack or DEFAULT_STACK)
    env.update(os.environ if environ is None else environ)
    return Settings.from_env(env)


def base_parameters(settings: Settings, template: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The template Parameters the base policy's rules come from, with the values ``settings`` holds
    (``{"RequiredTags": "team,cost-center", ...}``). A variable the template does not pass from a
    Parameter (or no template: an installed package) is named by its environment variable."""
    if template is None:
        from smgov.cfn_template import TEMPLATE_PATH, load_template

        template = load_template() if TEMPLATE_PATH.exists() else {}
    variables = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    parameter_of = {
        key: node["Ref"] for key, node in variables.items() if isinstance(node, Mapping) and "Ref" in node
    }
    out: dict[str, str] = {}
    for name in RULE_SETTINGS:
        variable = Settings.model_fields[name].alias or name
        value = getattr(settings, name)
        if isinstance(value, tuple):
            text = ",".join(value)
        elif isinstance(value, float):
            text = f"{value:g}"
        else:
            text = str(value)
        out[parameter_of.get(variable, variable)] = text
    return out


def defaults_note(settings: Settings, how: str) -> str:
    """What to tell a developer whose tool judged with the template's defaults, not a deployed stack's
    parameters (``how``: the way to name one, ``--stack NAME`` or ``stack=``)."""
    values = ", ".join(f"{key}={value}" for key, value in base_parameters(settings).items())
    return (
        f"no stack named: the base policy is built from the template's Parameter defaults ({values}); "
        f"a deployed stack's parameters may differ ({how})"
    )


def load_policy(path: str | None, settings: Settings | None = None) -> Policy:
    """The deploy-time defaults (``deployed_settings``) plus an optional document, as the functions build
    them: a part of the defaults that fails validation replaced by the schema's defaults (``base_notes``)."""
    base = (settings or deployed_settings()).base_policy()
    if path is None:
        return base.policy
    return build_policy(base.document, parse_document(Path(path).read_text()))


def base_notes(settings: Settings) -> list[str]:
    """What to tell the user when the deploy-time parameters fail the policy's validation: for each part the
    functions replace by the schema's defaults, the Parameters behind it, why, and what governs instead (the
    functions log the same, and count it in ``PolicyLoadErrors``)."""
    notes = []
    for fallback in settings.base_policy().fallbacks:
        named = ", ".join(fallback.parameters) or "no Parameter known"
        if fallback.applied is None:
            instead = f"without {fallback.part}"
        elif isinstance(fallback.applied, Mapping):
            values = ", ".join(
                f"{key} {value}" for key, value in fallback.applied.items() if not isinstance(value, dict)
            )
            instead = f"the defaults of {fallback.part} ({values})"
        else:
            instead = f"the default {fallback.part}: {fallback.applied}"
        notes.append(
            f"WARNING: the service rejects the stack's parameters for {fallback.part} ({named}): "
            f"{'; '.join(fallback.errors)}; its functions govern with {instead} until they are corrected"
        )
    return notes


class StackPolicyUnreadable(Exception):
    """The stack's policy document (or, when it is rejected, its history) cannot be read: nothing may be
    judged on a guess at it. ``rejected``: why the current version is rejected, when that much was read."""

    def __init__(self, message: str, rejected: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.rejected = rejected


def stack_policy(stack: str, settings: Settings, ssm: Any) -> PolicyReading:
    """What the functions of ``stack`` (deployed with ``settings``) govern with: the SSM document their
    ``PolicyParameterName`` names over the stack's parameters, as a new container reads it
    (``PolicyStore.read``: a missing parameter means the parameters alone; a rejected document, the
    newest valid version of its history). ``StackPolicyUnreadable`` when it cannot be read."""
    from sagemaker_governance.adapters.policy_store import PolicyHistoryUnreadable, PolicyStore
    from sagemaker_governance.domain.errors import AdapterError

    name = settings.policy_parameter_name
    if not name:  # the template names one always (its AllowedPattern): here it could not be resolved
        raise StackPolicyUnreadable(
            f"stack {stack}: the name of its policy document (PolicyParameterName) is not known"
        )
    try:
        return PolicyStore(settings.base_policy(), name, ssm).read()
    except PolicyHistoryUnreadable as exc:
        raise StackPolicyUnreadable(
            f"stack {stack}: its policy document (SSM parameter {name}, version {exc.version}) is rejected "
            f"({'; '.join(exc.rejected)}) and the parameter's history, where the version its functions fall back "
            f"to is, cannot be read (ssm:GetParameterHistory): {exc}",
            exc.rejected,
        ) from exc
    except AdapterError as exc:
        raise StackPolicyUnreadable(
            f"stack {stack}: its policy document (SSM parameter {name}) cannot be read (ssm:GetParameter): {exc}"
        ) from exc


def reading_notes(reading: PolicyReading) -> list[tuple[bool, str]]:
    """What to tell the user about the document that judged: ``(loud, text)`` lines (loud: the document
    the service would apply is not the parameter's current value)."""
    name = reading.parameter
    if reading.current_version is None:
        return [
            (
                False,
                f"policy document: SSM parameter {name} does not exist: the stack's parameters alone judge, as "
                "its functions do",
            )
        ]
    if not reading.rejected:
        return [
            (
                False,
                f"policy document: SSM parameter {name}, version {reading.version}, over the stack's parameters",
            )
        ]
    why = "; ".join(reading.rejected)
    if reading.version is None:
        kept = (
            "no earlier version of it validates: the stack's parameters alone judge, as its functions do (a new "
            "container) until the document is mended"
        )
    else:
        kept = (
            f"version {reading.version} (the newest valid one of its history) judges, as its functions do (a new "
            "container) until the document is mended"
        )
    return [
        (
            True,
            f"WARNING: the policy document in SSM parameter {name} (version {reading.current_version}) is "
            f"rejected by the service: {why}",
        ),
        (True, f"WARNING: {kept}"),
    ]


def connect_ssm(region: str | None = None) -> Any:
    """SSM in the caller's AWS configuration (the CLI), with the retries the stack lookup uses."""
    import boto3

    from smgov.adapters.cloudformation import CLIENT_CONFIG

    return boto3.client("ssm", region_name=region, config=CLIENT_CONFIG)


def current_user() -> str | None:
    """The login name (fills a ``${user}`` tag default), if the environment has one."""
    try:
        return getpass.getuser()
    except Exception:  # no login name (some containers): a ${user} default is then not filled
        return None
