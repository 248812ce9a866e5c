"""A template Parameter's value as the deploy tools judge it: ``sam deploy``'s own parsing of
``--parameter-overrides`` (the pinned SAM CLI, constraints-dev.txt) and CloudFormation's Parameter
constraints (``AllowedValues``, ``AllowedPattern``, ``MinValue``/``MaxValue``, ``MinLength``/``MaxLength``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import click
from samcli.commands._utils.options import parameter_override_click_option


def sam_parameter_overrides(argv: Sequence[str] = (), *, configured: Any = None) -> dict[str, str]:
    """``--parameter-overrides`` as ``sam deploy`` parses it, with the SAM CLI's own click option (its
    ``OptionNargs`` and ``CfnParameterOverridesType``): from the command line (``argv``, the option and its
    values) or from ``samconfig.toml`` (``configured``: the configuration file's value reaches the option
    through click's default map, as SAM's configuration callback puts it there). Raises
    ``click.BadParameter`` where ``sam deploy`` stops with "is not a valid format"."""
    command = parameter_override_click_option()(click.Command("deploy"))
    defaults = None if configured is None else {"parameter_overrides": configured}
    context = command.make_context("deploy", list(argv), default_map=defaults)
    return dict(context.params["parameter_overrides"])


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def parameter_problem(spec: Mapping[str, Any], value: str) -> str | None:
    """Why CloudFormation refuses ``value`` for a Parameter declared as ``spec``; None when it accepts it."""
    if spec.get("Type") == "Number":
        number = _number(value)
        if number is None:
            return f"{value!r} is not a number"
        if "AllowedValues" in spec and number not in [float(a) for a in spec["AllowedValues"]]:
            return f"{value} is not one of {spec['AllowedValues']}"
        if number < float(spec.get("MinValue", -math.inf)) or number > float(spec.get("MaxValue", math.inf)):
            return f"{value} is outside {spec.get('MinValue')}..{spec.get('MaxValue')}"
        return None
    if "AllowedValues" in spec and value not in [str(a) for a in spec["AllowedValues"]]:
        return f"{value!r} is not one of {spec['AllowedValues']}"
    if "AllowedPattern" in spec and re.fullmatch(spec["AllowedPattern"], value) is None:
        return f"{value!r} does not match {spec['AllowedPattern']}"
    if not int(spec.get("MinLength", 0)) <= len(value) <= int(spec.get("MaxLength", 4096)):
        return f"{value!r} has {len(value)} characters"
    return None
