"""What a first ``sam deploy`` is given is what the pinned SAM CLI and CloudFormation accept: samconfig.toml's
parameter overrides and the documents' ``sam deploy --parameter-overrides`` commands, parsed by the SAM CLI's
own option, each naming a template Parameter with a value its constraints allow."""

from __future__ import annotations

import re
import shlex
import tomllib
from typing import Any

import click
import pytest

from tests.cfn_parameters import parameter_problem, sam_parameter_overrides
from tests.conftest import REPO

DOCUMENTS = ("README.md", "docs/resilience.md", "SECURITY.md")
SAM_DEPLOY_OVERRIDES = re.compile(r"sam deploy[^`\n]*?(--parameter-overrides[^`\n]*)")


def samconfig_overrides() -> Any:
    config = tomllib.loads((REPO / "samconfig.toml").read_text())
    return config["default"]["deploy"]["parameters"]["parameter_overrides"]


def documented_commands() -> list[tuple[str, list[str]]]:
    """Each ``sam deploy ... --parameter-overrides ...`` of the documents: where, and the option with its values
    (up to the next option, as the SAM CLI's option takes them)."""
    found: list[tuple[str, list[str]]] = []
    for name in DOCUMENTS:
        for number, line in enumerate((REPO / name).read_text().splitlines(), start=1):
            for match in SAM_DEPLOY_OVERRIDES.finditer(line):
                words = shlex.split(match.group(1))
                end = next((i for i, w in enumerate(words[1:], start=1) if w.startswith("-")), len(words))
                found.append((f"{name}:{number}", words[:end]))
    return found


def assert_deployable(overrides: dict[str, str], template: dict[str, Any], where: str) -> None:
    parameters = template["Parameters"]
    for name, value in overrides.items():
        assert name in parameters, f"{where}: {name} is not a template Parameter"
        assert parameter_problem(parameters[name], value) is None, f"{where}: {name}"


def test_sam_deploy_parses_every_samconfig_override(template: dict[str, Any]) -> None:
    # Given the shipped samconfig.toml's [default.deploy.parameters] parameter_overrides
    items = samconfig_overrides()
    # When `sam deploy` reads them (the SAM CLI's own --parameter-overrides option): no item is refused
    parsed = sam_parameter_overrides(configured=items)
    # Then each item is one Parameter of the template, with a value CloudFormation accepts
    assert len(parsed) == len(items)
    assert_deployable(parsed, template, "samconfig.toml")
    assert parsed["GovernanceMode"] == "audit"


def test_sam_deploy_refuses_an_override_without_a_value() -> None:
    # The parser the tests above rely on is the SAM CLI's: it stops `sam deploy` on `Key=` (an empty value is
    # written Key="")
    with pytest.raises(click.BadParameter, match="is not a valid format"):
        sam_parameter_overrides(configured=["GovernanceMode=audit", "AllowedInstanceTypes="])
    assert sam_parameter_overrides(configured=['AllowedInstanceTypes=""']) == {"AllowedInstanceTypes": ""}


def test_the_documented_sam_deploy_overrides_are_accepted(template: dict[str, Any]) -> None:
    commands = documented_commands()
    assert commands, "the README shows how to override a Parameter on the command line"
    for where, argv in commands:
        assert_deployable(sam_parameter_overrides(argv), template, where)
