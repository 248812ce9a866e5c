"""The artifacts `sam build` produces: what Lambda would really load.

- the arm64 layer holds aarch64 binaries only (and every compiled module is for the runtime's Python);
- the functions import and handle a sample event from the built artifacts on the runtime's Python
  (an x86_64 build of the same template, since this machine cannot execute aarch64 code).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from smgov.cfn_template import REPO_ROOT, load_template
from smgov.runtime_python import RuntimePythonNotFound, find_runtime_python

pytestmark = pytest.mark.build  # (the builds are shared by the test session's workers: tests/conftest.py)

ELF_MACHINE = {0xB7: "aarch64", 0x3E: "x86_64"}
PURE_PYTHON_RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
# (the Lambda Python runtime ships boto3 and these; the layer ships its own boto3/botocore, which come
# first on sys.path as in Lambda: the shim stands for /var/runtime behind them)


def runtime_python() -> str:
    try:
        return str(find_runtime_python())  # the template's runtime, e.g. python3.12
    except RuntimePythonNotFound as exc:
        pytest.fail(str(exc))


def elf_machine(path: Path) -> str:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{path} is not an ELF file"
    return ELF_MACHINE.get(int.from_bytes(header[18:20], "little"), "other")


def test_arm64_layer_holds_only_aarch64_binaries_for_the_runtime(arm64_build: Path) -> None:
    runtime = str(load_template()["Globals"]["Function"]["Runtime"]).removeprefix("python").replace(".", "")
    shared_objects = list((arm64_build / "DependenciesLayer").rglob("*.so"))
    assert shared_objects, "the layer should contain compiled modules (pydantic-core, PyYAML)"
    machines = {path.name: elf_machine(path) for path in shared_objects}
    assert set(machines.values()) == {"aarch64"}, machines
    for path in shared_objects:
        if ".cpython-" in path.name:
            assert f"cpython-{runtime}-" in path.name, path.name


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.split()[0].rstrip("\\").strip()
    return pins


def test_layer_ships_the_botocore_the_tests_use(arm64_build: Path) -> None:
    # The runtime's botocore is older than ours and drops the response members its model lacks: the layer
    # ships boto3/botocore, the same versions the tests (and the planner's model checks) run against.
    layer = arm64_build / "DependenciesLayer" / "python"
    lock, dev = _pins(REPO_ROOT / "layers/dependencies/requirements.txt"), _pins(REPO_ROOT / "constraints-dev.txt")
    for package in ("boto3", "botocore"):
        assert lock[package] == dev[package], package
        (dist,) = layer.glob(f"{package}-*.dist-info")
        assert dist.name == f"{package}-{lock[package]}.dist-info"
    import botocore

    assert botocore.__version__ == lock["botocore"]


def test_layer_ships_no_pydantic_plugin(arm64_build: Path) -> None:
    # The template turns pydantic's plugin scan off (PYDANTIC_DISABLE_PLUGINS, a cold-start cost): that
    # changes nothing only while no distribution of the layer declares a plugin (entry point group "pydantic").
    import configparser

    distributions = list((arm64_build / "DependenciesLayer" / "python").glob("*.dist-info"))
    assert any(d.name.startswith("pydantic-") for d in distributions), "is this the layer?"
    plugins = set()
    for distribution in distributions:
        entry_points = distribution / "entry_points.txt"
        if entry_points.is_file():
            groups = configparser.ConfigParser(delimiters=("=",))
            groups.read_string(entry_points.read_text())
            plugins |= {distribution.name} if groups.has_section("pydantic") else set()
    assert plugins == set()


def runtime_shim(tmp_path: Path) -> Path:
    """boto3 and its pure-Python dependencies, as the Lambda runtime provides them."""
    shim = tmp_path / "runtime"
    shim.mkdir()
    site = Path(boto3.__file__).resolve().parents[1]
    for name in PURE_PYTHON_RUNTIME_PACKAGES:
        source = site / name if (site / name).exists() else site / f"{name}.py"
        (shim / source.name).symlink_to(source)
    return shim


HANDLE_SCRIPT = """
import importlib, json, sys
from dataclasses import dataclass

@dataclass
class Context:
    function_name: str = "built"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:built"
    aws_request_id: str = "built-0"

    def get_remaining_time_in_millis(self) -> int:
        return 0  # no time left: the reconciler must return before any AWS call

module_name, function_name = sys.argv[1].rsplit(".", 1)
handler = getattr(importlib.import_module(module_name), function_name)
result = handler(json.load(open(sys.argv[2])), Context())
import botocore
print(json.dumps({"python": sys.version_info[:2], "result": result, "botocore": botocore.__file__}))
"""


def run_built_handler(build: Path, function: str, event_file: Path, shim: Path) -> dict[str, Any]:
    template = yaml.safe_load((build / "template.yaml").read_text())
    handler_path = template["Resources"][function]["Properties"]["Handler"]
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join(
            [str(build / function), str(build / "DependenciesLayer" / "python"), str(shim)]
        ),
        "PYTHONNOUSERSITE": "1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "REQUIRED_TAGS": "team,cost-center",
        "GOVERNANCE_MODE": "enforce",
        "POWERTOOLS_LOG_LEVEL": "ERROR",
    }
    completed = subprocess.run(
        [runtime_python(), "-s", "-c", HANDLE_SCRIPT, handler_path, str(event_file)],
        capture_output=True,
        text=True,
        env=env,
        cwd=build,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    last = completed.stdout.strip().splitlines()[-1]
    result: dict[str, Any] = json.loads(last)
    return result


@pytest.mark.heavy(13)  # the first of its file to need the x86_64 build
def test_job_events_handles_a_sample_from_the_built_artifacts(x86_build: Path, tmp_path: Path) -> None:
    out = run_built_handler(
        x86_build, "JobEventsFunction", REPO_ROOT / "events" / "training-job-starting.json", runtime_shim(tmp_path)
    )
    runtime = str(load_template()["Globals"]["Function"]["Runtime"]).removeprefix("python")
    assert ".".join(map(str, out["python"])) == runtime
    assert out["result"]["job"] == "resnet50-imagenet-2025-11-21-10-00-00"
    assert "DependenciesLayer" in out["botocore"]  # the layer's botocore, not the runtime's
    # (the compliance mark, AddTags, cannot reach AWS here: best effort, it is logged and skipped)
    assert [d["action"] for d in out["result"]["decisions"]] == ["none"]


def test_built_artifacts_reject_a_malformed_event(x86_build: Path, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="ValidationError"):
        run_built_handler(
            x86_build,
            "JobEventsFunction",
            REPO_ROOT / "events" / "malformed-missing-job-name.json",
            runtime_shim(tmp_path),
        )


def test_idle_stopper_handles_a_sample_from_the_built_artifacts(x86_build: Path, tmp_path: Path) -> None:
    # An OK transition is recorded and ignored without any AWS call.
    out = run_built_handler(
        x86_build, "IdleStopperFunction", REPO_ROOT / "events" / "idle-alarm-ok.json", runtime_shim(tmp_path)
    )
    assert [r["outcome"] for r in out["result"]["results"]] == ["ignored"]


def test_reconciler_handles_its_scheduled_event_from_the_built_artifacts(x86_build: Path, tmp_path: Path) -> None:
    # With no time left the run stops before its first AWS call, and says so.
    out = run_built_handler(
        x86_build, "ReconcilerFunction", REPO_ROOT / "events" / "scheduled-reconcile.json", runtime_shim(tmp_path)
    )
    assert out["result"]["stopped_early"] is True
    assert out["result"]["visited"] == 0


def test_every_function_in_the_build_is_covered() -> None:
    functions = {k for k, v in load_template()["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}
    # Each function needs a sample event it can handle without AWS calls; extend as functions are added.
    assert functions == {"JobEventsFunction", "IdleStopperFunction", "ReconcilerFunction"}, (
        "add a built-artifact test for the new function"
    )


def test_layer_lock_is_hash_pinned() -> None:
    lines = (REPO_ROOT / "layers" / "dependencies" / "requirements.txt").read_text().splitlines()
    requirements = [line for line in lines if line and not line.startswith((" ", "#"))]
    assert requirements
    for line in requirements:
        assert "==" in line and line.endswith("\\"), f"not pinned with hashes: {line}"
    assert sum("--hash=sha256:" in line for line in lines) >= len(requirements)
    assert json.dumps(requirements)  # readable in failure output
