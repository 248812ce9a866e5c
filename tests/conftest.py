"""Shared fixtures: no test can reach a real AWS account (dummy credentials, fixed region)."""

from __future__ import annotations

import gc
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis: deterministic in CI (same examples every run, no example database), no per-example
# deadline (2 shared cores make timings noisy). Each property test sets its own max_examples.
# `HYPOTHESIS_PROFILE=fuzz-deep` runs the parser fuzz tests (tests/unit/test_fuzz_parsers.py) with
# many more, random examples, for a local hunt.
settings.register_profile(
    "smgov",
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("fuzz-deep", parent=settings.get_profile("smgov"), derandomize=False, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "smgov"))

REPO = Path(__file__).resolve().parents[1]

# The collector's thresholds for the test processes (each xdist worker and a plain pytest run).
# A moto-backed test allocates hundreds of thousands of container objects (botocore clients and their
# service models, moto's backends) that live until its end; with CPython's defaults (700, 10, 10) they are
# promoted to the oldest generation and then walked by full collections, about one every three tests, each
# walking everything the worker still holds. That was a third of the CPU of the handler, doctor, adapter
# and service tests (25 of 77 s in one process). A young generation of 50,000 objects and ten times fewer
# promotions leave a test's garbage to the young collections and make full ones rare (one in that run):
# 10 s of collection instead of 25, at about 350 MB more peak memory per worker. What the tests check is
# untouched: the collector still frees every cycle, later.
GC_THRESHOLDS = (50_000, 20, 10)


def pytest_configure(config: pytest.Config) -> None:
    """Every test process (each xdist worker and a plain run) sets the collector's thresholds and shares
    botocore's service models between sessions from its start.

    moto's ``mock_aws`` gives boto3 a new default session each time it starts, and a new session parses
    the service models again (SageMaker's alone is megabytes of JSON): a test that builds its clients with
    ``boto3.client`` under ``mock_aws`` paid for that. ``share_models`` (what the local account and the
    simulator call) keeps one loader per process; the models are data botocore only reads. Before, a
    process shared them only from its first local account or simulation on, so what a test cost depended
    on what its worker had run before it."""
    from smgov.simulation.botocore_models import share_models

    gc.set_threshold(*GC_THRESHOLDS)
    share_models()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests (``@pytest.mark.heavy(seconds)``: a whole fleet simulated, the quick bench) run
    first, longest first, so that the parallel workers end together.

    ``--dist worksteal`` hands each worker a contiguous share of this order and lets an idle worker take
    the tail of a busy one's queue: short tests are what is left to share at the end. In collection order
    the fleets under faults came last, and a worker ran the last of them alone for a minute or more.
    Every worker computes the same order (xdist requires it): the sort is stable and depends only on the
    markers."""

    def cost(item: pytest.Item) -> float:
        marker = item.get_closest_marker("heavy")
        return float(marker.args[0]) if marker is not None else 0.0

    items.sort(key=cost, reverse=True)


EVENTS = REPO / "events"


@pytest.fixture(autouse=True)
def _aws_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "SageMakerGovernance",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the Powertools logger writes during the test (its handler holds the real stdout)."""
    from sagemaker_governance.observability import logger

    buffer = io.StringIO()
    handler = logger.registered_handler
    previous = handler.setStream(buffer)  # type: ignore[attr-defined]
    try:
        yield buffer
    finally:
        handler.setStream(previous)  # type: ignore[attr-defined]


def load_event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return data


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


# ---- the built artifacts: one `sam build` of each architecture per test session ----------------------
# Under pytest-xdist (`make unit`: -n auto --dist worksteal) the tests that need a build run on any worker
# (tests/infrastructure/test_built_artifacts.py, tests/bench/test_quick_bench.py): the first worker to need
# a build makes it, under a lock in the directory the workers share, and the others wait for it and read
# the same one (none writes to it, except the quick bench's bytecode, compiled in place as `make build`
# compiles the arm64 build).


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(build_dir)`` once per test session, whichever worker asks first; its output for every worker."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # xdist: the session's directory
    build = root / f"shared-{name}" / "build"
    build.parent.mkdir(exist_ok=True)
    done = build.parent / "done"
    with (build.parent / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if `make` fails
        if not done.exists():
            if build.exists():  # a worker that failed half-way: start again
                shutil.rmtree(build)
            make(build)
            done.touch()
    return build


# `make test` runs `make build` just before pytest and names its output in SMGOV_ARM64_BUILD: the tests
# inspect that build instead of making the same one again (a `sam build` of the layer takes a minute or
# more). Run alone, pytest builds its own.
ARM64_BUILD_VARIABLE = "SMGOV_ARM64_BUILD"


@pytest.fixture(scope="session")
def arm64_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An arm64 `sam build` of template.yaml post-processed like `make build` (compiled bytecode): what the
    tests on the built artifacts inspect and what the quick `make bench` run measures."""
    from bench.coldstart import has_bytecode

    given = os.environ.get(ARM64_BUILD_VARIABLE)
    if given:
        build = Path(given)
        assert (build / "template.yaml").is_file() and has_bytecode(build), (
            f"{ARM64_BUILD_VARIABLE}={given} is not a `make build` output"
        )
        return build

    return shared_build(tmp_path_factory, "arm64", _make_arm64)


@pytest.fixture(scope="session")
def x86_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An x86_64 `sam build` of the same template: this machine can run its compiled modules (the built
    handlers' tests, the quick bench's cold start)."""
    return shared_build(tmp_path_factory, "x86_64", _make_x86)


def _make_arm64(build: Path) -> None:
    from bench.coldstart import compile_bytecode, runtime_python, sam_build

    sam_build(REPO / "template.yaml", build)
    compile_bytecode(build, runtime_python())


def _make_x86(build: Path) -> None:
    from bench.coldstart import sam_build

    template = build.parent / "template.yaml"
    template.write_text((REPO / "template.yaml").read_text().replace("arm64", "x86_64"))
    sam_build(template, build)


@pytest.fixture(scope="session", autouse=True)
def _builds_in_background(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The session's builds that the selected tests need start with the session, each in a thread, instead
    of when the first test that needs one is set up.

    A `sam build` spends about half its wall clock waiting for pip's downloads and the builder's
    subprocesses: a worker that made it in a test's set-up sat idle that long (about 25 s of the x86_64
    build's 50). Begun here it overlaps the tests the worker runs meanwhile; the fixtures above still
    return only once it is done (``shared_build``'s lock, held by the thread while it builds), and one that
    failed is made again, and fails, in the set-up of the test that needs it, as before. Every worker
    starts its thread; the first to take the lock builds and the others find the build done. The session
    ends only after the threads (no build is left half-made by the interpreter's exit)."""
    import threading

    needed = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    builds = {"x86_64": _make_x86} if "x86_build" in needed else {}
    if "arm64_build" in needed and not os.environ.get(ARM64_BUILD_VARIABLE):
        builds["arm64"] = _make_arm64

    def build(name: str, make: Callable[[Path], None]) -> None:
        try:
            shared_build(tmp_path_factory, name, make)
        except Exception:  # reported by the set-up of the test that needs the build
            return

    tmp_path_factory.getbasetemp()  # made here, not raced for by the threads
    threads = [threading.Thread(target=build, args=item, name=f"build-{item[0]}") for item in builds.items()]
    for thread in threads:
        thread.start()
    yield
    for thread in threads:
        thread.join()
