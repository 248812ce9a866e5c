"""Imports go one way: handlers -> service -> domain; adapters -> domain; domain imports nothing of ours
but domain, and never boto3, Powertools or os. The service package (what Lambda runs) never imports the
tooling package ``smgov`` (CLI, simulator, reports, SDK preflight), which is not deployed."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "functions" / "sagemaker_governance"
TOOLS = SRC / "tools" / "smgov"
FORBIDDEN_IN_DOMAIN = (
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "os",
    "sagemaker_governance.adapters",
    "sagemaker_governance.service",
    "sagemaker_governance.handlers",
)
FORBIDDEN_IN_SERVICE = ("boto3", "sagemaker_governance.handlers")
FORBIDDEN_IN_HANDLERS_AND_SERVICE = (
    "sagemaker",
    "smgov.sdk",
    "moto",
    "smgov.simulation",
    "smgov.cli",
)


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in (PACKAGE / folder).rglob("*.py"):
        for name in imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(PACKAGE)} imports {name}")
    return bad


def test_domain_is_pure() -> None:
    assert offenders("domain", FORBIDDEN_IN_DOMAIN) == []


def test_service_never_calls_boto3() -> None:
    assert offenders("service", FORBIDDEN_IN_SERVICE) == []


def test_lambda_code_never_imports_developer_tooling() -> None:
    assert offenders("handlers", FORBIDDEN_IN_HANDLERS_AND_SERVICE) == []
    assert offenders("service", FORBIDDEN_IN_HANDLERS_AND_SERVICE) == []
    assert offenders("adapters", FORBIDDEN_IN_HANDLERS_AND_SERVICE) == []


def test_only_settings_reads_the_environment() -> None:
    readers = [
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if "os.environ" in path.read_text()
    ]
    assert readers == ["settings.py"]


def test_service_depends_on_ports_not_adapters() -> None:
    assert offenders("service", ("sagemaker_governance.adapters",)) == []


def test_service_package_never_imports_the_tooling() -> None:
    """What Lambda runs stands alone: no module of the service package imports ``smgov`` (or the
    SageMaker SDK, moto), so the deployed artifact (CodeUri ``src/functions/``) holds all it needs."""
    bad = []
    for path in PACKAGE.rglob("*.py"):
        for name in imports(path):
            if any(name == f or name.startswith(f + ".") for f in ("smgov", "sagemaker", "moto")):
                bad.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert bad == []


def test_the_service_package_holds_no_tooling() -> None:
    assert [p.name for p in PACKAGE.iterdir() if p.name in ("cli", "simulation", "report_html.py", "sdk.py")] == []
    assert (TOOLS / "cli" / "main.py").exists()
