"""Calibrate the idle guard's defaults on real GPU traces of healthy jobs (``smgov calibrate``).

Each trace (``../shared/gpu_traces``, read in place, never copied) is converted to what SageMaker
would publish (``traces.per_minute``: one ``GPUUtilization`` value per minute, summed over the host's
GPUs) and replayed, minute by minute, through the simulator's CloudWatch alarm evaluator
(``simulation/alarms/``) with the alarm the real planner builds (``domain/guards/idle.IdleGuard.plan``: the
per-GPU threshold scaled by the instance type's GPU count). Each ``ALARM`` notification goes to the
real stopper decision (``domain/guards/idle.IdleGuard.judge``): inside the grace period it resets the alarm
(``SetAlarmState OK``, as the idle stopper does) and the evaluator fires again a period later while the
job is still idle; after it, the job is stopped.

The job enters ``Training`` at the trace's first sample (stricter than SageMaker, whose ``Training``
starts after the download, when start-up is already under way). For every cell of a grid of thresholds
(percent per GPU) and windows (minutes, every minute of the window idle), the result counts the healthy
traces the alarm would have stopped (false stops) and the minutes it takes to stop the job whose GPU
sat idle for hours after its work ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import NAMESPACE, AlarmNaming, AlarmPlan, Notice, Verdict
from sagemaker_governance.domain.guards.idle import HOST_DIMENSION, IDLE, METRIC_NAME, IdlePolicy, IdleRole
from sagemaker_governance.domain.instances import instance_facts
from sagemaker_governance.domain.job import TrainingJob
from smgov.simulation.alarms import ALARM, OK, AlarmEvaluator, Transition
from smgov.simulation.metrics import MetricStore, metric_key
from smgov.simulation.traces import MinuteSeries, Trace, per_minute, read_trace, utc_seconds

THRESHOLDS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 20)  # percent per GPU
WINDOWS: tuple[int, ...] = (10, 15, 20, 25, 30, 45, 60)  # minutes, every one of them idle
GRACES: tuple[int, ...] = (0, 10, 20, 30, 60)  # minutes
JOB_NAME = "calibration"
NAMING = AlarmNaming(prefix="calibration-idle-", managed_by="smgov-calibrate")


@dataclass(frozen=True)
class Phase:
    starts: str  # wall clock of the trace (no zone, read as UTC)
    label: str


@dataclass(frozen=True)
class TraceSpec:
    """One trace of the shared set, what it shows and how it is replayed."""

    file: str
    label: str
    source: str  # repository @ commit (licence)
    instance_type: str  # the SageMaker instance the host is replayed as (its GPU count scales the threshold)
    shows: str
    phases: tuple[Phase, ...]
    idle_tail_from: str | None = None  # the job's work ended here; the rest is waste to catch

    @property
    def gpus(self) -> int:
        return instance_facts(self.instance_type).gpus


# The labelled traces (../shared/gpu_traces/SOURCES.md has the full provenance and the evidence for
# each label: ground truth from a log the job wrote, or inferred from the code or the series).
CATALOGUE: tuple[TraceSpec, ...] = (
    TraceSpec(
        file="aucurriculum__a40_cnn10_speechcommands__nvsmi_table_60s.log",
        label="aucurriculum",
        source="internationalJoke/aucurriculum @ dff390a9 (MIT)",
        instance_type="ml.g5.xlarge",
        shows="1x A40, table snapshot every 60 s, 134 min: completed job at a median of 29 %, isolated 0 % "
        "snapshots every 5-7 min",
        phases=(
            Phase("2026-01-24 21:52", "baseline training with a dev evaluation per epoch"),
            Phase("2026-01-24 22:33", "curriculum scoring pass at 8-16 %"),
            Phase("2026-01-24 22:55", "curriculum training"),
            Phase("2026-01-24 23:30", "anti-curriculum training"),
        ),
    ),
    TraceSpec(
        file="balance_budget__llama3-8b_sft_passk-vllm-eval__1gpu_nvsmi_15s.csv",
        label="balance-budget",
        source="shougangu/balance-budget @ affa9117 (no licence file)",
        instance_type="ml.p5.4xlarge",
        shows="1x 80 GB GPU, csv every 15 s, 410 min: Llama-3-8B SFT with vLLM pass@k evaluations, then the "
        "GPU idle for 5.4 h after the job ended",
        phases=(
            Phase("2026-02-02 01:07", "SFT bursts with 2-5 min vLLM evaluations at 0-9 %"),
            Phase(
                "2026-02-02 01:38",
                "25 min at 0 % with 22 GB allocated after the run ended, likely its merged 16-bit save (inferred)",
            ),
            Phase("2026-02-02 02:04", "memory freed, the next run loaded: training, then evaluation"),
            Phase("2026-02-02 02:33", "idle tail: the job ended, the logger kept running"),
        ),
        idle_tail_from="2026-02-02 02:33",
    ),
    TraceSpec(
        file="openad__2x_rtx-a6000_one-gpu-idle__nvsmi_1s.csv",
        label="openad",
        source="tkjunsei/OpenAD @ b1f769fd (no licence file)",
        instance_type="ml.g5.12xlarge",
        shows="2x RTX A6000, csv every 1 s, 8 min: a single-GPU job on a two-GPU host (the other GPU at 0 %); "
        "replayed as a 4-GPU host (no SageMaker type has 2 GPUs): the sum is the same, the threshold 4x",
        phases=(Phase("2024-11-23 12:23", "training on GPU 0 at 29-100 %, GPU 1 idle"),),
    ),
    TraceSpec(
        file="rectified_point_flow__24gb_gpu__nvsmi_60s__run_2025-11-12.csv",
        label="rectified-point-flow-1",
        source="RCKola/Rectified-Point-Flow @ e21ca9c7 (Apache-2.0)",
        instance_type="ml.g5.xlarge",
        shows="1x 24 GB GPU, csv every 60 s, 122 min: start-up at 0 % for 4 samples, then training at a "
        "median of 74 % with single-sample dips to 0-1 %",
        phases=(
            Phase("2025-11-11 23:33", "start-up: data and model initialisation at 0 %"),
            Phase("2025-11-11 23:37", "training"),
        ),
    ),
    TraceSpec(
        file="rectified_point_flow__24gb_gpu__nvsmi_60s__run_2025-11-26.csv",
        label="rectified-point-flow-2",
        source="RCKola/Rectified-Point-Flow @ 076d3d99 (Apache-2.0)",
        instance_type="ml.g5.xlarge",
        shows="1x 24 GB GPU, csv every 60 s, 89 min: start-up at 0 % for 3 samples, then training at 26-96 %",
        phases=(
            Phase("2025-11-26 20:31", "start-up at 0 %"),
            Phase("2025-11-26 20:34", "training"),
        ),
    ),
    TraceSpec(
        file="slurmmwe__l40s_bert-sst2_finetune__nvsmi_table_loop.log",
        label="slurmmwe",
        source="guanqun-yang/SlurmMWE @ 5c0f7291 (no licence file)",
        instance_type="ml.g6e.xlarge",
        shows="1x L40S, back-to-back tables (~1 Hz), 16 min: an earlier run (3 min busy, 7 min at 0 %) "
        "appended before a BERT SST-2 fine-tuning with eval/checkpoint dips",
        phases=(
            Phase("2024-10-29 19:00", "earlier run, then 7 min at 0 %"),
            Phase("2024-10-29 19:11", "BERT fine-tuning: 18 s at 0 %, then ~96 % with short dips"),
        ),
    ),
    TraceSpec(
        file="ters_gen__h200_cpu-bound_eval__nvsmi_2s.csv",
        label="ters-gen",
        source="SINGROUP/ters_gen @ 69fa15b1 (no licence file)",
        instance_type="ml.p5.4xlarge",
        shows="1x H200, csv every 2 s, 152 min: a CPU-bound evaluation, progressing, with the GPU at 0-4 % "
        "per minute (borderline: slow, but not stalled)",
        phases=(Phase("2026-01-25 09:17", "CPU-bound evaluation, progressing (its slurm log)"),),
    ),
)


# ---- one replay ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    minute: int  # minutes after the job entered Training
    at: float  # epoch seconds


def replay(
    series: MinuteSeries, idle: IdlePolicy, instance_type: str, *, ignore_before: float | None = None
) -> Stop | None:
    """When the idle guard would stop a job whose host published ``series`` (None: never).

    ``ignore_before`` (epoch seconds): an ``ALARM`` before that moment is reset like one in the grace
    period (used to measure how fast the idle tail is caught even where an earlier false stop exists).
    """
    started = datetime.fromtimestamp(series.start, UTC)
    job = TrainingJob.model_validate(
        {
            "TrainingJobName": JOB_NAME,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 1},
            "TrainingStartTime": started,
        }
    )
    plan = IDLE.plan(job, idle, NAMING)
    if not isinstance(plan, AlarmPlan):
        raise ValueError(f"{instance_type}: the planner creates no alarm ({plan.reason})")
    store = MetricStore()
    fired: list[Transition] = []
    evaluator = AlarmEvaluator(store, epoch=started, account="0", region="us-east-1", on_transition=fired.append)
    for request in plan.metric_requests:
        evaluator.upsert(request, 0)
    if plan.composite_request is not None:
        evaluator.upsert(plan.composite_request, 0)
    notifying = plan.name_of(IdleRole.NOTIFYING)
    key = metric_key(NAMESPACE, METRIC_NAME, [{"Name": HOST_DIMENSION, "Value": f"{JOB_NAME}/algo-1"}])
    for minute in range(len(series.values) + 1):  # the last evaluation sees the last minute
        store.publish(key, minute, series.values[minute] if minute < len(series.values) else None)
        evaluator.run_due(minute)
        notifications = [t for t in fired if t.alarm["AlarmName"] == notifying and t.new_state == ALARM]
        fired.clear()
        if not notifications:
            continue
        now = started + timedelta(minutes=minute)
        notice = Notice(job=job, mode=Mode.ENFORCE, now=now, naming=NAMING, alarm_changed_at=now)
        verdict = IDLE.judge(IdleRole.NOTIFYING, notice, idle).verdict
        moment = series.start + 60 * minute
        if verdict is Verdict.STOP and (ignore_before is None or moment >= ignore_before):
            return Stop(minute, moment)
        for name in plan.metric_alarm_names:  # what the stopper does: SetAlarmState OK
            evaluator.set_state(name, OK, minute)
    return None


# ---- the grid --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedTrace:
    spec: TraceSpec
    trace: Trace
    healthy: MinuteSeries  # up to the idle tail (all of it when there is none)
    full: MinuteSeries

    def phase_at(self, moment: float) -> str:
        current = self.spec.phases[0].label
        for phase in self.spec.phases:
            if utc_seconds(phase.starts) <= moment:
                current = phase.label
        return current


def load(directory: Path, specs: Iterable[TraceSpec] = CATALOGUE) -> list[LoadedTrace]:
    out = []
    for spec in specs:
        trace = read_trace(directory / spec.file)
        healthy = trace.until(utc_seconds(spec.idle_tail_from)) if spec.idle_tail_from else trace
        out.append(LoadedTrace(spec, trace, per_minute(healthy.samples), per_minute(trace.samples)))
    return out


@dataclass(frozen=True)
class FalseStop:
    trace: str
    minute: int
    phase: str


@dataclass(frozen=True)
class Cell:
    threshold: float
    window: int
    grace: int
    false_stops: tuple[FalseStop, ...]
    catch_minutes: tuple[float | None, ...]  # per idle tail: minutes from its start to the stop

    @property
    def safe(self) -> bool:
        return not self.false_stops

    @property
    def worst_catch(self) -> float | None:
        """The slowest catch over the idle tails (None when one is never caught)."""
        if not self.catch_minutes or any(c is None for c in self.catch_minutes):
            return None
        return max(c for c in self.catch_minutes if c is not None)


def policy(base: IdlePolicy, threshold: float, window: int, grace: int) -> IdlePolicy:
    return base.model_copy(
        update={
            "threshold_percent": threshold,
            "period_seconds": 60,
            "evaluation_periods": window,
            "datapoints_to_alarm": window,
            "grace_minutes": grace,
        }
    )


def evaluate_cell(traces: Sequence[LoadedTrace], idle: IdlePolicy) -> Cell:
    false_stops: list[FalseStop] = []
    catches: list[float | None] = []
    for loaded in traces:
        stop = replay(loaded.healthy, idle, loaded.spec.instance_type)
        if stop is not None:
            middle = stop.at - idle.window_minutes * 30  # the middle of the idle window that fired
            false_stops.append(FalseStop(loaded.spec.label, stop.minute, loaded.phase_at(middle)))
        if loaded.spec.idle_tail_from:
            tail = utc_seconds(loaded.spec.idle_tail_from)
            caught = replay(loaded.full, idle, loaded.spec.instance_type, ignore_before=tail)
            catches.append(None if caught is None else (caught.at - tail) / 60)
    return Cell(
        threshold=idle.threshold_percent,
        window=idle.evaluation_periods,
        grace=idle.grace_minutes,
        false_stops=tuple(false_stops),
        catch_minutes=tuple(catches),
    )


def longest_idle_run(series: MinuteSeries, threshold: float) -> int:
    """The most consecutive minutes below ``threshold`` (host value); a missing minute ends a run."""
    best = run = 0
    for value in series.values:
        run = run + 1 if value is not None and value < threshold else 0
        best = max(best, run)
    return best


@dataclass(frozen=True)
class GraceRow:
    grace: int
    cell: Cell
    idle_from_start: int | None  # minute a job idle from its first minute (synthetic, 0 %) is stopped


def idle_from_start_stop(idle: IdlePolicy, minutes: int = 240) -> int | None:
    """When a job whose GPUs never do anything (a synthetic host at 0 %) is stopped: the grace period's cost."""
    series = MinuteSeries(0.0, (0.0,) * minutes)
    stop = replay(series, idle, "ml.g5.xlarge")
    return None if stop is None else stop.minute


@dataclass(frozen=True)
class Calibration:
    traces: tuple[LoadedTrace, ...]
    base: IdlePolicy  # the shipped defaults the grid starts from
    grid: tuple[Cell, ...]  # thresholds x windows at the base grace period
    graces: tuple[GraceRow, ...]  # the chosen threshold and window with several grace periods
    chosen: IdlePolicy
    margin_minutes: int

    @property
    def thresholds(self) -> list[float]:
        return sorted({c.threshold for c in self.grid})

    @property
    def windows(self) -> list[int]:
        return sorted({c.window for c in self.grid})

    def cell(self, threshold: float, window: int) -> Cell:
        return next(c for c in self.grid if c.threshold == threshold and c.window == window)

    def longest_runs(self, threshold: float) -> list[tuple[str, int]]:
        """Per healthy trace, its longest run of minutes below ``threshold`` per GPU."""
        return [(t.spec.label, longest_idle_run(t.healthy, threshold * t.spec.gpus)) for t in self.traces]


MARGIN_MINUTES = 2  # SageMaker's minute buckets need not line up with the logger's: +-1 minute each end


def choose(
    grid: Sequence[Cell], base: IdlePolicy, longest_run: Callable[[float], int], margin: int = MARGIN_MINUTES
) -> tuple[float, int]:
    """The rule the defaults follow (docs/calibration.md states it):

    1. Do no harm: the cell stops none of the healthy traces, the next larger threshold of the grid
       stops none at the same window either (a small shift of the utilization level must not turn it
       into a false stop: the CPU-bound evaluation sits at 0-4 %), and the window is at least ``margin``
       minutes longer than the longest healthy run below the threshold.
    2. Catch the idle tail soonest: the shortest window.
    3. Among equal windows, the threshold closest to the current default (no change without a reason).
    """
    thresholds = sorted({c.threshold for c in grid})
    by_key = {(c.threshold, c.window): c for c in grid}

    def acceptable(cell: Cell) -> bool:
        index = thresholds.index(cell.threshold)
        larger = by_key.get((thresholds[index + 1], cell.window)) if index + 1 < len(thresholds) else None
        return (
            cell.safe
            and (larger is None or larger.safe)
            and cell.window >= longest_run(cell.threshold) + margin
            and cell.worst_catch is not None
        )

    candidates = [c for c in grid if acceptable(c)]
    if not candidates:
        raise ValueError("no cell of the grid is safe on these traces")
    best = min(candidates, key=lambda c: (c.window, abs(c.threshold - base.threshold_percent), c.threshold))
    return best.threshold, best.window


def choose_grace(rows: Sequence[GraceRow], current: int) -> int:
    """Keep the current grace period when it stops no healthy trace and costs nothing (a job idle from
    its start is stopped as early as with no grace at all); else the shortest grace that stops none."""
    free = next((r.idle_from_start for r in rows if r.grace == 0), None)
    for row in rows:
        if row.grace == current and row.cell.safe and row.idle_from_start == free:
            return current
    safe = [r.grace for r in rows if r.cell.safe]
    if not safe:
        raise ValueError("no grace period of the grid is safe on these traces")
    return min(safe)


def calibrate(
    directory: Path,
    base: IdlePolicy,
    *,
    thresholds: Sequence[float] = THRESHOLDS,
    windows: Sequence[int] = WINDOWS,
    graces: Sequence[int] = GRACES,
    specs: Iterable[TraceSpec] = CATALOGUE,
) -> Calibration:
    traces = load(directory, specs)
    grid = tuple(
        evaluate_cell(traces, policy(base, t, w, base.grace_minutes)) for t in thresholds for w in windows
    )

    def longest(threshold: float) -> int:
        return max((longest_idle_run(t.healthy, threshold * t.spec.gpus) for t in traces), default=0)

    threshold, window = choose(grid, base, longest)
    rows = []
    for grace in sorted({*graces, base.grace_minutes}):
        idle = policy(base, threshold, window, grace)
        rows.append(GraceRow(grace, evaluate_cell(traces, idle), idle_from_start_stop(idle)))
    grace = choose_grace(rows, base.grace_minutes)
    return Calibration(
        traces=tuple(traces),
        base=base,
        grid=grid,
        graces=tuple(rows),
        chosen=policy(base, threshold, window, grace),
        margin_minutes=MARGIN_MINUTES,
    )
