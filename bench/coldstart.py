"""Cold start: a fresh Lambda-runtime interpreter importing and initializing each handler from the built
artifacts, against a bare function that imports boto3 and creates the same clients, in the same run.

- **What is loaded**: the function directory and the layer's ``python/`` directory of an ``x86_64`` build
  of the same template (this machine cannot execute the arm64 layer's compiled modules: pydantic-core,
  PyYAML). The pure-Python files are identical; the x86_64 build is post-processed exactly like the
  arm64 one (byte-compiled when ``.aws-sam/build`` is, see ``bytecode``). boto3 and its dependencies
  (which the Lambda runtime provides) come from the dev virtualenv, copied and byte-compiled for the
  runtime's Python, as the runtime ships them.
- **What runs**: the handler module's imports plus what the first invocation builds in the composition
  root (settings, boto3 clients, adapters, services); the baseline imports boto3 and creates the
  clients the function's adapters declare (``IAM_ACTIONS`` service prefixes).
- **Like Lambda**: ``PYTHONDONTWRITEBYTECODE`` (the package is read-only there: nothing is cached between
  cold starts but what the zip ships), ``-s``, no user site; the literal environment variables of the
  template's Globals, read from the template (``deployed_environment``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from smgov.cfn_template import REPO_ROOT, load_template
from smgov.runtime_python import RuntimePythonNotFound, build_env, find_runtime_python

PROBE = Path(__file__).with_name("_probe.py")
SAM = Path(sys.executable).with_name("sam")
BYTECODE_ARGS = (
    "-m",
    "compileall",
    "-q",
    "-f",
    "--invalidation-mode",
    "unchecked-hash",
)  # -f: over any older .pyc
RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six.py")
# Clients a composition root builds beyond its adapters' IAM actions (none since the reconciler's notifier
# stopped building a DynamoDB client: the delivery ledger is used by the event-driven handlers only).
EXTRA_CLIENTS: dict[str, tuple[str, ...]] = {}
# What Lambda and the template's references give a function; the literal variables of the template's Globals
# come from the template itself (``deployed_environment``).
CHILD_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    "GOVERNANCE_MODE": "audit",
    "REQUIRED_TAGS": "team,cost-center",
    "POLICY_PARAMETER_NAME": "/sagemaker-governance/policy",
    "STACK_NAME": "sagemaker-governance",
    "NOTIFICATIONS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:notifications",
    "ALARM_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alarms",
    "IDEMPOTENCY_TABLE_NAME": "sagemaker-governance-idempotency",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
}


class BenchError(RuntimeError):
    pass


def runtime_python() -> str:
    try:
        return str(find_runtime_python())  # the template's runtime, python3.12
    except RuntimePythonNotFound as exc:
        raise BenchError(str(exc)) from exc


def functions() -> dict[str, str]:
    """Every serverless function of the template and its handler path."""
    resources = load_template()["Resources"]
    out = {
        name: str(r["Properties"]["Handler"])
        for name, r in resources.items()
        if r["Type"] == "AWS::Serverless::Function"
    }
    return out


def client_services(function: str) -> list[str]:
    """The boto3 clients a function needs: the service prefixes of its adapters' IAM actions."""
    from sagemaker_governance.composition.contract import FUNCTION_ADAPTERS

    prefixes = {
        a.split(":")[0]
        for adapter in FUNCTION_ADAPTERS[function]
        # built on first use, not at cold start; or no client at all (Lambda's queue poller)
        if not getattr(adapter, "LAZY_CLIENT", False) and getattr(adapter, "NEEDS_CLIENT", True)
        for a in adapter.IAM_ACTIONS  # type: ignore[attr-defined]
    }
    prefixes |= set(EXTRA_CLIENTS.get(function, ()))
    return sorted(prefixes - {"iam"})  # iam:PassRole is a permission, not a client


def has_bytecode(build: Path) -> bool:
    """Whether a build ships compiled bytecode for its own code (what ``make build`` adds)."""
    sources = list((build).glob("*Function/sagemaker_governance/**/*.py"))
    if not sources:
        raise BenchError(f"{build}: no built function (run `make build`)")
    return all(any((s.parent / "__pycache__").glob(f"{s.stem}.cpython-*.pyc")) for s in sources[:20])


def compile_bytecode(build: Path, python: str) -> None:
    subprocess.run([python, *BYTECODE_ARGS, str(build)], check=True, capture_output=True)


def sam_build(template: Path, build_dir: Path) -> None:
    completed = subprocess.run(
        [
            str(SAM),
            "build",
            "--template",
            str(template),
            "--build-dir",
            str(build_dir),
            "--base-dir",
            str(REPO_ROOT),
        ],
        capture_output=True,
        text=True,
        env={**build_env(), "SAM_CLI_TELEMETRY": "0"},
        cwd=template.parent,
        check=False,
    )
    if completed.returncode != 0:
        raise BenchError(f"sam build failed: {completed.stderr[-2000:]}")


@contextmanager
def x86_artifacts(bytecode: bool, python: str, given: Path | None = None) -> Iterator[Path]:
    """An x86_64 build of the template (same code, same layer lock), post-processed like the arm64 one.

    ``given``: an x86_64 build made already from the same template (the tests on the built artifacts have
    one): it is byte-compiled in place when the arm64 build is, never built again."""
    if given is not None:
        if not bytecode and any(given.rglob("*.pyc")):
            raise BenchError(f"{given} holds compiled bytecode: it cannot stand for a plain `sam build`")
        if bytecode:
            compile_bytecode(given, python)
        yield given
        return
    with TemporaryDirectory(prefix="smgov-bench-") as tmp:
        work = Path(tmp)
        template = work / "template.yaml"
        template.write_text((REPO_ROOT / "template.yaml").read_text().replace("arm64", "x86_64"))
        build = work / "build"
        sam_build(template, build)
        if bytecode:
            compile_bytecode(build, python)
        yield build


@contextmanager
def runtime_packages(python: str) -> Iterator[Path]:
    """boto3 and its pure-Python dependencies, byte-compiled for the runtime's Python (as Lambda ships them)."""
    import boto3

    site = Path(boto3.__file__).resolve().parents[1]
    with TemporaryDirectory(prefix="smgov-bench-runtime-") as tmp:
        shim = Path(tmp)
        for name in RUNTIME_PACKAGES:
            source = site / name
            if source.is_dir():
                shutil.copytree(source, shim / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, shim / name)
        compile_bytecode(shim, python)
        yield shim


def deployed_environment() -> dict[str, str]:
    """The variables the template's Globals give every function as literals (the Powertools names,
    ``PYDANTIC_DISABLE_PLUGINS``): the probe's children get them from the template, so the probe measures
    what is deployed, and a variable that changes how a library starts is measured when the template sets it."""
    variables = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def child_environment(pythonpath: list[Path]) -> dict[str, str]:
    """A probe child's whole environment (the handler's and the baseline's alike)."""
    return {
        "PATH": os.environ["PATH"],
        **CHILD_ENV,
        **deployed_environment(),
        "PYTHONPATH": os.pathsep.join(map(str, pythonpath)),
    }


def _run(python: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    start = time.monotonic_ns()
    completed = subprocess.run(
        [python, "-s", str(PROBE), *args], capture_output=True, text=True, env=env, check=False, cwd="/"
    )
    if completed.returncode != 0:
        raise BenchError(f"cold-start probe {args} failed: {completed.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    out["spawn_to_ready_ms"] = (out.pop("ready_ns") - start) / 1e6
    return out


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def measure(
    runs: int, *, bytecode: bool | None = None, build_dir: Path | None = None, x86_build: Path | None = None
) -> dict[str, Any]:
    """Medians over ``runs`` alternating handler/baseline runs, per function (``x86_build``: an x86_64
    build of the template to load, else one is made)."""
    python = runtime_python()
    arm64 = build_dir or REPO_ROOT / ".aws-sam" / "build"
    if bytecode is None:
        bytecode = has_bytecode(arm64)
    handlers = functions()
    results: dict[str, Any] = {}
    with x86_artifacts(bytecode, python, x86_build) as build, runtime_packages(python) as shim:
        for function, handler_path in handlers.items():
            module = handler_path.rsplit(".", 1)[0]
            services = client_services(function)
            handler_env = child_environment([build / function, build / "DependenciesLayer" / "python", shim])
            baseline_env = child_environment([shim])
            handler_runs, baseline_runs = [], []
            _run(python, ["handler", module], handler_env)  # page cache, not measured
            for _ in range(runs):
                handler_runs.append(_run(python, ["handler", module], handler_env))
                baseline_runs.append(_run(python, ["baseline", ",".join(services)], baseline_env))
            if {r["clients"] for r in handler_runs} != {len(services)}:
                raise BenchError(
                    f"{function}: the handler created {handler_runs[0]['clients']} clients, the baseline "
                    f"{len(services)} ({services}): keep the function's builder and FUNCTION_ADAPTERS in step"
                )

            def med(key: str, runs: list[dict[str, Any]]) -> float:
                return _median([r[key] for r in runs])

            cpu, base_cpu = med("init_cpu_ms", handler_runs), med("init_cpu_ms", baseline_runs)
            proc, base_proc = med("process_cpu_ms", handler_runs), med("process_cpu_ms", baseline_runs)
            results[function] = {
                "handler": handler_path,
                "clients": services,
                "init_cpu_ms": cpu,
                "baseline_init_cpu_ms": base_cpu,
                "ratio": round(cpu / base_cpu, 2),
                "process_cpu_ms": proc,
                "baseline_process_cpu_ms": base_proc,
                "ratio_with_interpreter_start": round(proc / base_proc, 2),
                "init_wall_ms": med("init_ms", handler_runs),
                "baseline_init_wall_ms": med("init_ms", baseline_runs),
                "spawn_to_ready_wall_ms": med("spawn_to_ready_ms", handler_runs),
                "baseline_spawn_to_ready_wall_ms": med("spawn_to_ready_ms", baseline_runs),
                "init_cpu_ms_all": [round(r["init_cpu_ms"], 1) for r in handler_runs],
                "baseline_init_cpu_ms_all": [round(r["init_cpu_ms"], 1) for r in baseline_runs],
                "rss_after_init_mb": med("maxrss_mb", handler_runs),
                "baseline_rss_mb": med("maxrss_mb", baseline_runs),
                "python": handler_runs[0]["python"],
            }
    import boto3
    import botocore

    return {
        "runs": runs,
        "bytecode": bytecode,
        "artifacts": "x86_64 sam build of template.yaml (arm64 replaced), layer from layers/dependencies lock",
        "boto3": boto3.__version__,
        "botocore": botocore.__version__,
        "target_ratio": 1.3,
        "functions": results,
    }
