"""Imports go one way: handlers -> composition -> service -> domain; adapters -> domain; domain imports
nothing of ours but domain, and never boto3, Powertools or os. The service package (what Lambda runs)
never imports the tooling package ``smgov`` (CLI, simulator, reports, SDK preflight), which is not
deployed. No module imports itself through others (no import cycle), in either package."""

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
    "sagemaker_governance.composition",
)
FORBIDDEN_IN_SERVICE = ("boto3", "sagemaker_governance.handlers", "sagemaker_governance.composition")
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


# ---- no import cycles ----------------------------------------------------------------------------


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every module of both packages -> the modules of both packages it imports (at module level or in a
    function: a deferred import still closes a cycle). ``from package import module`` counts as an import
    of the module."""
    modules = {
        module_name(path, root): path for root in (SRC / "functions", SRC / "tools") for path in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# ---- tests share helpers and fixtures, never each other ------------------------------------------

TESTS = Path(__file__).resolve().parents[1]


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (``test_*``) a file of the test tree imports: shared code belongs in a helper
    module (``builders.py``, ``evidence.py`` ...) or a ``conftest.py``, never in another test module
    (importing one runs its tests' module code twice and ties two suites together)."""
    return sorted(
        name
        for name in imports(path) | {f"{n.module}.{a.name}" for n in _from_imports(path) for a in n.names}
        if any(part.startswith("test_") for part in name.split("."))
    )


def _from_imports(path: Path) -> list[ast.ImportFrom]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.module]


def test_no_test_module_imports_another_test_module() -> None:
    offending = {
        str(path.relative_to(TESTS)): found
        for path in TESTS.rglob("*.py")
        if (found := imported_test_modules(path))
    }
    assert offending == {}


def test_the_test_import_check_sees_an_imported_test_module(tmp_path: Path) -> None:
    helper = tmp_path / "test_b.py"
    helper.write_text(
        "from tests.unit.test_policy import NOW\nfrom tests import builders\nimport tests.unit.test_x\n"
    )
    assert imported_test_modules(helper) == [
        "tests.unit.test_policy",
        "tests.unit.test_policy.NOW",
        "tests.unit.test_x",
    ]
