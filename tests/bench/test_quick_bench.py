"""`make bench` cannot rot: its quick run measures the arm64 build (no timing asserted).

Its own file, apart from the other tests of the builds (tests/infrastructure/test_built_artifacts.py): it is
the longest single test, and another worker can run those meanwhile; both read the builds the test session
shares (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import schema
from smgov.cfn_template import REPO_ROOT, load_template

pytestmark = pytest.mark.build


@pytest.mark.heavy(45)  # with its setup: waiting for the session's x86_64 build when it is not done yet
def test_quick_bench_run_writes_sane_results(arm64_build: Path, x86_build: Path, tmp_path: Path) -> None:
    # Given an arm64 build post-processed like `make build` (and the session's x86_64 build of the same
    # template, for the cold start: no third build), when `python -m bench --quick` runs on it,
    # then it writes results.json with every figure, sane values and the table.
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--runs",
            "1",
            "--invocations",
            "3",
            "--build-dir",
            str(arm64_build),
            "--x86-build-dir",
            str(x86_build),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(out.read_text())
    schema.check(
        results,
        functions={k for k, v in load_template()["Resources"].items() if v["Type"] == "AWS::Serverless::Function"},
    )
    assert results["mode"] == "quick"
    assert results["cold_start"]["bytecode"] is True
    assert all(a["pyc_files"] > 0 for a in results["size"]["artifacts"].values())
    assert "Warm latency" in completed.stdout and "Size" in completed.stdout
