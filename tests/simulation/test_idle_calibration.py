"""Replays real nvidia-smi traces of healthy jobs (../shared/gpu_traces, read in place, never copied
into the repository) through the idle alarm with the shipped defaults, the way `smgov calibrate` does:
converted to SageMaker's per-host one-minute GPUUtilization (`simulation/traces.py`), the alarm built by
the real planner, evaluated by the simulator's CloudWatch evaluator, and each ALARM decided by the real
stopper (grace period counted from the first sample, earlier than SageMaker's Training transition:
stricter). docs/calibration.md has the whole grid. Skipped when the traces are not present.
"""

from __future__ import annotations

import pytest

from sagemaker_governance.domain.guards.idle import IdlePolicy
from sagemaker_governance.settings import Settings
from smgov.cli.calibrate import find_traces
from smgov.simulation.calibration import CATALOGUE, LoadedTrace, load, replay
from smgov.simulation.traces import utc_seconds
from tests.conftest import REPO

TRACES, _ = find_traces(None, REPO)
pytestmark = pytest.mark.skipif(
    TRACES is None, reason="the shared GPU traces (../shared/gpu_traces) are not present"
)

DEFAULTS = IdlePolicy.model_validate(Settings().base_policy_document()["idle"])


@pytest.fixture(scope="module")
def traces() -> dict[str, LoadedTrace]:
    assert TRACES is not None
    return {loaded.spec.label: loaded for loaded in load(TRACES)}


@pytest.mark.parametrize("label", [spec.label for spec in CATALOGUE])
def test_defaults_never_stop_these_healthy_jobs(traces: dict[str, LoadedTrace], label: str) -> None:
    # aucurriculum: 134 min at a median of 29 %, a 22-minute scoring pass at 8-16 %; rectified-point-flow:
    # start-ups at 0 %; slurmmwe: a start-up at 0 % after an earlier run's 7 minutes at 0 %; openad: one of
    # two GPUs used; balance-budget (before its idle tail): vLLM evaluations and 25 minutes at 0 % after a
    # run (likely its merged save); ters-gen: a CPU-bound evaluation at 0-4 % for 2.5 h (slow, but progressing)
    loaded = traces[label]
    assert replay(loaded.healthy, DEFAULTS, loaded.spec.instance_type) is None


def test_defaults_catch_the_job_that_ended_while_its_gpu_sat_idle(traces: dict[str, LoadedTrace]) -> None:
    # From 02:33 the GPU sits at 0 % for 5.4 h: stopped within the window (30 min) and a minute or two
    loaded = traces["balance-budget"]
    assert loaded.spec.idle_tail_from is not None
    idle_from = utc_seconds(loaded.spec.idle_tail_from)
    stop = replay(loaded.full, DEFAULTS, loaded.spec.instance_type)
    assert stop is not None
    assert idle_from < stop.at <= idle_from + (DEFAULTS.window_minutes + 2) * 60


def test_a_short_window_would_have_stopped_a_healthy_job(traces: dict[str, LoadedTrace]) -> None:
    # Why the default window is 30 minutes: at 20 minutes the 25-minute 0 % stretch at the end of a
    # healthy fine-tuning run (likely its merged 16-bit save) would have been stopped.
    short = IdlePolicy(evaluation_periods=20, datapoints_to_alarm=20, grace_minutes=15)
    loaded = traces["balance-budget"]
    assert replay(loaded.healthy, short, loaded.spec.instance_type) is not None
