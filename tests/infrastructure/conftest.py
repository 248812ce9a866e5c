from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smgov.cfn_template import load_template


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def policy_statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    """Every inline statement; a conditional (Fn::If) statement counts with its granting branch."""
    out: list[dict[str, Any]] = []
    for policy in function["Properties"].get("Policies", []):
        assert isinstance(policy, dict) and "Statement" in policy, "only inline statements (no managed policies)"
        out.extend(s["Fn::If"][1] if "Fn::If" in s else s for s in policy["Statement"])
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


REGIONS = ["us-east-1", "eu-west-1"]  # the organization templates' regions, as `make org-package` is told


def cfn_lint(path: Path) -> subprocess.CompletedProcess[str]:
    """cfn-lint as `make validate` runs it, in its own process (its rule state stays out of other tests)."""
    command = [str(Path(sys.executable).parent / "cfn-lint"), "--regions", *REGIONS, "--", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
