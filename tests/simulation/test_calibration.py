"""The calibration grid on synthetic traces: the replay (real planner, simulator's alarm evaluator, real
stopper decision), the false stops and catch times per cell, the rule that chooses the defaults, and the
document it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagemaker_governance.domain.guards.idle import IdlePolicy
from smgov.simulation.calibration import (
    Calibration,
    Cell,
    FalseStop,
    Phase,
    TraceSpec,
    calibrate,
    choose,
    idle_from_start_stop,
    replay,
)
from smgov.simulation.calibration_report import chosen_defaults, render_markdown
from smgov.simulation.traces import MinuteSeries, utc_seconds

START = "2026-01-01 00:00"


def minutes_csv(path: Path, values: list[float]) -> None:
    """A query CSV with one sample per minute, on the minute, from START."""
    lines = ["timestamp, name, utilization.gpu [%]"]
    for minute, value in enumerate(values):
        lines.append(f"2026/01/01 {minute // 60:02d}:{minute % 60:02d}:00.000, NVIDIA A10G, {value:g} %")
    path.write_text("\n".join(lines) + "\n")


def spec(file: str, label: str, tail: str | None = None) -> TraceSpec:
    return TraceSpec(
        file=file,
        label=label,
        source="synthetic",
        instance_type="ml.g5.xlarge",
        shows=label,
        phases=(Phase(START, f"{label} phase"),),
        idle_tail_from=tail,
    )


@pytest.fixture
def traces(tmp_path: Path) -> tuple[Path, list[TraceSpec]]:
    # A healthy job with a 12-minute pause at 0 %, a CPU-bound evaluation at 3 % for an hour, and a job
    # that ends at minute 40 while its GPU then sits at 0 % for 90 minutes.
    minutes_csv(tmp_path / "pause.csv", [80.0] * 30 + [0.0] * 12 + [80.0] * 30)
    minutes_csv(tmp_path / "cpu.csv", [3.0] * 60)
    minutes_csv(tmp_path / "tail.csv", [60.0] * 40 + [0.0] * 90)
    specs = [
        spec("pause.csv", "pause"),
        spec("cpu.csv", "cpu-eval"),
        spec("tail.csv", "ended", "2026-01-01 00:40"),
    ]
    return tmp_path, specs


def run(traces: tuple[Path, list[TraceSpec]]) -> Calibration:
    directory, specs = traces
    return calibrate(
        directory, IdlePolicy(), thresholds=(0.5, 1, 2, 5), windows=(10, 15, 20), graces=(0, 20), specs=specs
    )


def stopped(cell: Cell) -> list[str]:
    return [s.trace for s in cell.false_stops]


def test_each_cell_counts_the_healthy_traces_it_would_stop(traces: tuple[Path, list[TraceSpec]]) -> None:
    cal = run(traces)
    # The 12-minute pause is stopped by a 10-minute window (after the 20-minute grace: minute 40)
    assert cal.cell(1, 10).false_stops == (FalseStop("pause", 40, "pause phase"),)
    assert stopped(cal.cell(1, 15)) == [] and stopped(cal.cell(1, 20)) == []
    # The evaluation at 3 % is stopped by 5 % per GPU whatever the window, as soon as the grace is over
    assert [s.minute for s in cal.cell(5, 15).false_stops if s.trace == "cpu-eval"] == [20]
    assert stopped(cal.cell(5, 20)) == ["cpu-eval"]
    assert stopped(cal.cell(2, 20)) == []


def test_the_idle_tail_is_caught_one_window_after_it_began(traces: tuple[Path, list[TraceSpec]]) -> None:
    cal = run(traces)
    for window in (10, 15, 20):
        assert cal.cell(1, window).catch_minutes == (float(window),)
    # the catch is measured even in a cell that stops a healthy trace first
    assert cal.cell(5, 10).catch_minutes == (10.0,)


def test_the_rule_picks_the_shortest_window_with_margin_on_both_axes(traces: tuple[Path, list[TraceSpec]]) -> None:
    cal = run(traces)
    # 10 min stops the pause; 15 min is 3 minutes longer than the 12-minute pause (margin 2). At 15 min
    # 2 % is safe but the next threshold (5 %) is not, so 2 % has no margin; 1 % and 0.5 % do, and 1 % is
    # the current default.
    assert (cal.chosen.threshold_percent, cal.chosen.evaluation_periods) == (1, 15)
    assert cal.chosen.datapoints_to_alarm == 15 and cal.chosen.period_seconds == 60
    # A 20-minute grace now delays a job idle from its start (stopped at 20 instead of 15), and no trace
    # needs a grace period: the shortest safe one is chosen.
    assert [(r.grace, r.idle_from_start) for r in cal.graces] == [(0, 15), (20, 20)]
    assert cal.chosen.grace_minutes == 0


def test_the_rule_wants_margin_on_the_window(tmp_path: Path) -> None:
    # Given a 14-minute pause: a 15-minute window stops none, but by one minute only
    minutes_csv(tmp_path / "pause.csv", [80.0] * 30 + [0.0] * 14 + [80.0] * 30)
    minutes_csv(tmp_path / "tail.csv", [60.0] * 40 + [0.0] * 90)
    specs = [spec("pause.csv", "pause"), spec("tail.csv", "ended", "2026-01-01 00:40")]
    cal = calibrate(tmp_path, IdlePolicy(), thresholds=(1, 2), windows=(10, 15, 20), graces=(20,), specs=specs)
    assert cal.cell(1, 15).safe
    assert cal.chosen.evaluation_periods == 20


def test_no_safe_cell_is_an_error_not_a_guess() -> None:
    unsafe = Cell(1, 30, 20, (FalseStop("x", 40, "p"),), (31.0,))
    with pytest.raises(ValueError, match="no cell"):
        choose([unsafe], IdlePolicy(), lambda _: 0)


def test_the_grace_period_resets_the_alarm_until_it_is_over() -> None:
    # A host idle from its first minute: with a 10-minute window the alarm fires at minute 10, the stopper
    # resets it during the grace period, and it fires again each minute until the grace is over.
    series = MinuteSeries(utc_seconds(START), (0.0,) * 60)
    policy = IdlePolicy(evaluation_periods=10, datapoints_to_alarm=10, grace_minutes=20)
    stop = replay(series, policy, "ml.g5.xlarge")
    assert stop is not None and stop.minute == 20
    assert idle_from_start_stop(policy.model_copy(update={"grace_minutes": 0})) == 10


def test_missing_minutes_never_stop_a_job() -> None:
    series = MinuteSeries(utc_seconds(START), (0.0,) * 5 + (None,) * 60)
    assert (
        replay(series, IdlePolicy(evaluation_periods=10, datapoints_to_alarm=10, grace_minutes=0), "ml.g5.xlarge")
        is None
    )


def test_the_threshold_is_scaled_by_the_replayed_instance_types_gpu_count() -> None:
    # One GPU busy at 50 % on a four-GPU host: 10 % per GPU -> threshold 40, busy; 15 % -> 60, idle
    series = MinuteSeries(utc_seconds(START), (50.0,) * 60)
    policy = IdlePolicy(evaluation_periods=10, datapoints_to_alarm=10, grace_minutes=0)
    assert replay(series, policy.model_copy(update={"threshold_percent": 10}), "ml.g5.12xlarge") is None
    stop = replay(series, policy.model_copy(update={"threshold_percent": 15}), "ml.g5.12xlarge")
    assert stop is not None and stop.minute == 10


def test_the_document_states_the_chosen_defaults_and_no_trace_data(traces: tuple[Path, list[TraceSpec]]) -> None:
    cal = run(traces)
    text = render_markdown(cal)
    assert chosen_defaults(text) == {
        "threshold_percent": 1,
        "period_seconds": 60,
        "evaluation_periods": 15,
        "datapoints_to_alarm": 15,
        "grace_minutes": 0,
    }
    assert "`pause.csv`" in text and "| 1 | 10 | 1 | pause at min 40 [pause phase] | 10 |" in text
    assert "2026/01/01 00:00:00" not in text  # derived numbers only, never the samples
