"""The SageMaker SDK is an optional, exactly pinned extra: never in the Lambda layer or the base install,
always in `make test`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[=<>!~ ;\[]", requirement.strip())[0]).lower()


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_name(name)] = version
    return pins


def test_the_sdk_extra_is_pinned_exactly_and_matches_its_constraints() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["sdk"]
    constraints = _pins(REPO / "constraints-sdk.txt")
    assert extra, "the sdk extra installs the SageMaker SDK"
    for requirement in extra:
        name, _, version = requirement.partition("==")
        assert version, f"{requirement}: pin the SDK exactly (the preflight hook is tested against it)"
        assert constraints[_name(name)] == version


def test_the_sdk_never_reaches_the_lambda_layer_or_the_base_install() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    layer = (REPO / "layers" / "dependencies" / "requirements.txt").read_text().splitlines()
    for requirement in [*project["dependencies"], *layer]:
        assert not _name(requirement).startswith("sagemaker"), requirement


def test_the_sdk_and_dev_constraints_do_not_overlap() -> None:
    dev, sdk = _pins(REPO / "constraints-dev.txt"), _pins(REPO / "constraints-sdk.txt")
    assert set(dev).isdisjoint(sdk), "one pin per package: regenerate constraints-sdk.txt"


def test_make_test_installs_the_sdk_with_both_constraint_files() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "-c constraints-dev.txt -c constraints-sdk.txt -e '.[dev,sdk]'" in makefile
