"""`smgov calibrate`: without the shared traces it says so, exits 0 and leaves the document alone; with
them, the committed docs/calibration.md is what the traces give."""

from __future__ import annotations

from pathlib import Path

import pytest

from smgov.cli.calibrate import find_traces
from smgov.cli.main import main
from tests.conftest import REPO


def test_without_traces_it_says_so_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a checkout without ../shared/gpu_traces and a committed document
    checkout = tmp_path / "a" / "b" / "repo"
    (checkout / "docs").mkdir(parents=True)
    document = checkout / "docs" / "calibration.md"
    document.write_text("committed table\n")
    monkeypatch.chdir(checkout)
    # When the command runs
    code = main(["calibrate"])
    # Then it succeeds, names where it looked, and the document is unchanged
    err = capsys.readouterr().err
    assert code == 0
    assert "GPU traces not found" in err and str(tmp_path / "a" / "b" / "shared" / "gpu_traces") in err
    assert "docs/calibration.md left unchanged" in err
    assert document.read_text() == "committed table\n"


def test_an_explicit_directory_without_sources_is_absent_too(tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("timestamp, utilization.gpu [%]\n")
    found, looked = find_traces(str(tmp_path))
    assert found is None and looked == [tmp_path]


def test_traces_next_to_the_checkout_are_found(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "gpu_traces"
    shared.mkdir(parents=True)
    (shared / "SOURCES.md").write_text("provenance\n")
    (tmp_path / "wt" / "repo").mkdir(parents=True)
    assert find_traces(None, tmp_path / "wt" / "repo")[0] == shared  # ../../shared (a worktree)
    assert find_traces(None, tmp_path / "repo")[0] == shared  # ../shared (a checkout)


def test_the_committed_table_is_what_the_traces_give(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, _ = find_traces(None, REPO)
    if traces is None:
        pytest.skip("the shared GPU traces are not present")
    monkeypatch.chdir(REPO)
    code = main(["calibrate", "--check", "--traces", str(traces)])
    assert code == 0, capsys.readouterr().err
