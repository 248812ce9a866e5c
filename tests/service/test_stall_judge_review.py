"""The stall judge at the StopReview seam, with in-memory fakes of its readers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import CheckpointProgress
from sagemaker_governance.domain.guards.base import (
    WHY_SHORT_SPAN,
    WHY_VETOED,
    AlarmNaming,
    GuardVerdict,
    Notice,
    Verdict,
)
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode, IdleRole
from sagemaker_governance.domain.guards.progress import PROGRESS, ProgressCode, ProgressRole
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.stall_judge import (
    CPU,
    GPU,
    Evidence,
    HostEvidence,
    JudgeCode,
    LogEvidence,
    LogRhythm,
    MetricRead,
    MetricReadResult,
    StallKind,
)
from sagemaker_governance.service.stall_judge import StallJudge
from tests.builders import job

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")


class Metrics:
    """GetMetricData as a table: (metric, dimension value) -> one value a minute; or a failure."""

    def __init__(self, values: dict[tuple[str, str], float], *, error: str | None = None) -> None:
        self.values, self.error = values, error
        self.calls: list[tuple[Sequence[MetricRead], datetime, datetime]] = []

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        self.calls.append((queries, start, end))
        if self.error:
            return MetricReadResult({q.id: None for q in queries}, (self.error,))
        minutes = int((end - start).total_seconds() // 60)
        out: dict[str, tuple[float, ...] | None] = {}
        for q in queries:
            value = self.values.get((q.metric, q.dimensions[0][1]))
            out[q.id] = () if value is None else (value,) * minutes
        return MetricReadResult(out, ())


class Logs:
    """The job's log: the first line in a window (``evidence``, or found among ``lines``), and the times of
    its lines (``lines``: the rhythm; None: too few to have one)."""

    def __init__(
        self,
        evidence: LogEvidence | None = None,
        *,
        fails: bool = False,
        lines: Sequence[datetime] | None = None,
        rhythm_fails: bool = False,
    ) -> None:
        self.evidence = evidence or LogEvidence(streams=1)
        self.fails, self.rhythm_fails = fails, rhythm_fails
        self.lines = lines
        self.calls: list[tuple[str, datetime, datetime]] = []
        self.rhythm_calls: list[tuple[datetime, datetime]] = []

    def activity(self, job_name: str, start: datetime, end: datetime) -> LogEvidence:
        self.calls.append((job_name, start, end))
        if self.fails:
            raise AdapterError("the job's log streams could not be read (ThrottlingException)")
        if self.lines is not None:
            first = min((t for t in self.lines if start <= t < end), default=None)
            return LogEvidence(streams=1, line_at=first, line_stream="job-1/algo-1-1" if first else None)
        return self.evidence

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        self.rhythm_calls.append((start, end))
        if self.rhythm_fails:
            raise AdapterError("the job's log lines could not be read (ThrottlingException)")
        return LogRhythm.of(start, end, self.lines or (), complete=True)


class Checkpoints:
    """ListObjectsV2 on the job's checkpoint location: the objects' LastModified (``unread``: why not)."""

    def __init__(self, written: Sequence[datetime] = (), *, unread: str | None = None) -> None:
        self.written, self.unread = written, unread
        self.calls: list[tuple[str, datetime]] = []

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        self.calls.append((s3_uri, since))
        if self.unread:
            return CheckpointProgress.unknown(self.unread)
        new = tuple(sorted(t for t in self.written if t >= since))
        return CheckpointProgress(checked=True, written=len(new), total=len(self.written), written_at=new)


CHECKPOINTS = {"CheckpointConfig": {"S3Uri": "s3://ckpt/job-1/"}}


def training(started: datetime, **overrides: Any) -> Any:
    millis = str(int(started.timestamp() * 1000))
    return job(
        SecondaryStatus="Training",
        TrainingStartTime=millis,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": millis}],
        **overrides,
    )


IDLE_HOST = {("GPUUtilization", "job-1/algo-1"): 0.0, ("CPUUtilization", "job-1/algo-1"): 4.0}


def judging(mode: Mode) -> Policy:
    return Policy(mode=mode, judge={"enabled": True})


def review(
    guard: Any,
    role: str,
    metrics: Metrics,
    logs: Logs,
    *,
    j: Any = None,
    policy: Policy | None = None,
    alarm_minutes: int | None = None,
    checkpoints: Checkpoints | None = None,
) -> GuardVerdict:
    j = j or training(NOW - timedelta(hours=2))
    policy = policy or judging(Mode.ENFORCE)
    mode = policy.mode
    evidence: dict[str, Any] = {"threshold": 1.0}
    if alarm_minutes is not None:  # the window the notification repeats (a trigger when under the guard's)
        evidence.update(evaluation_periods=alarm_minutes, period_seconds=60)
    notice = Notice(job=j, mode=mode, now=NOW, naming=NAMING, alarm_changed_at=NOW, evidence=evidence)
    verdict = guard.judge(role, notice, guard.config(policy))
    assert verdict.stops
    return StallJudge(metrics, logs, checkpoints).review(guard, role, notice, verdict, policy)


def test_an_idle_stop_is_confirmed_with_the_evidence_when_every_signal_is_quiet() -> None:
    metrics, logs = Metrics(IDLE_HOST), Logs()
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, logs)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.STOP
    assert verdict.confirmed  # on evidence read now: the stopper does not ask the alarm's state again
    judged = verdict.decision.evidence["judge"]
    assert judged["hosts"]["job-1/algo-1"]["busy_vcpus"] == 0.04 and judged["window"]["minutes"] == 30
    # Then it read the 30-minute window: four series per host, the job's streams
    queries, start, end = metrics.calls[0]
    assert {q.metric for q in queries} == {
        "GPUUtilization",
        "GPUMemoryUtilization",
        "CPUUtilization",
        "MemoryUtilization",
    }
    assert (start, end) == (NOW - timedelta(minutes=30), NOW) and logs.calls == [("job-1", start, end)]


def test_a_cpu_phase_vetoes_the_idle_stop_and_resets_the_alarm() -> None:
    busy_cpu = {**IDLE_HOST, ("CPUUtilization", "job-1/algo-1"): 180.0}
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(busy_cpu), Logs())
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.CPU_BUSY
    assert verdict.decision.action is Action.NONE and verdict.reset == ("gov-idle-job-1",)
    assert verdict.decision.evidence["guard_verdict"] == IdleCode.STOP


def test_a_throttled_read_is_insufficient_evidence_never_a_stop_also_in_audit_mode() -> None:
    for mode in (Mode.ENFORCE, Mode.AUDIT):
        verdict = review(
            IDLE,
            IdleRole.NOTIFYING,
            Metrics(IDLE_HOST, error="GetMetricData failed (Throttling)"),
            Logs(),
            policy=judging(mode),
        )
        assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.INSUFFICIENT
        assert "GetMetricData failed (Throttling)" in verdict.decision.evidence["judge"]["missing"]
    failed_logs = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(fails=True))
    assert failed_logs.decision.code == JudgeCode.INSUFFICIENT


def test_audit_mode_records_what_enforce_would_do_with_the_evidence() -> None:
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), policy=judging(Mode.AUDIT))
    assert verdict.stops and not verdict.decision.acts and "judge" in verdict.decision.evidence


def progress_job() -> Any:
    return training(
        NOW - timedelta(hours=3),
        AlgorithmSpecification={
            "TrainingImage": "img:1",
            "TrainingInputMode": "File",
            "MetricDefinitions": [
                {"Name": "loss", "Regex": "loss=(\\S+)"},
                {"Name": "eval_acc", "Regex": "acc=(\\S+)"},
            ],
        },
    )


def test_a_hang_at_busy_gpus_is_confirmed_and_any_defined_metric_vetoes_it() -> None:
    pinned = {("GPUUtilization", "job-1/algo-1"): 100.0, ("CPUUtilization", "job-1/algo-1"): 300.0}
    confirmed = review(PROGRESS, ProgressRole.STALL, Metrics(pinned), Logs(), j=progress_job())
    assert confirmed.verdict is Verdict.STOP and confirmed.decision.code == ProgressCode.STOP
    evaluating = review(
        PROGRESS, ProgressRole.STALL, Metrics({**pinned, ("eval_acc", "job-1"): 1.0}), Logs(), j=progress_job()
    )
    assert evaluating.decision.code == JudgeCode.METRIC_PROGRESS
    assert evaluating.reset == ("gov-idle-job-1.progress",)
    line = LogEvidence(streams=1, line_at=NOW - timedelta(minutes=2), line_stream="job-1/algo-1-1")
    logging = review(PROGRESS, ProgressRole.STALL, Metrics(pinned), Logs(line), j=progress_job())
    assert logging.decision.code == JudgeCode.LOGS_ACTIVE


def test_files_a_long_save_writes_to_the_checkpoint_location_veto_the_idle_stop() -> None:
    # A sharded save on a large host: GPUs idle, a few busy cores (4 of 192 vCPUs), the log silent; the
    # shards it wrote in the last half hour are its sign of life
    saving = Checkpoints([NOW - timedelta(minutes=40), NOW - timedelta(minutes=6), NOW - timedelta(minutes=2)])
    j = training(NOW - timedelta(hours=2), **CHECKPOINTS)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), j=j, checkpoints=saving)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.CHECKPOINT_WRITES
    assert verdict.decision.action is Action.NONE and verdict.reset == ("gov-idle-job-1",)
    # listed once, since what a stop needs (the 30-minute window): the object of 40 minutes ago is not counted
    assert saving.calls == [("s3://ckpt/job-1/", NOW - timedelta(minutes=30))]
    recorded = verdict.decision.evidence["judge"]["checkpoints"]
    assert recorded["written"] == 2 and recorded["latest_written_at"] == (NOW - timedelta(minutes=2)).isoformat()
    assert "s3://ckpt/job-1/" in verdict.decision.reason


def test_a_save_that_ended_a_window_ago_is_no_sign_of_life_and_the_stall_is_stopped() -> None:
    saved = Checkpoints([NOW - timedelta(minutes=31)])
    j = training(NOW - timedelta(hours=2), **CHECKPOINTS)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), j=j, checkpoints=saved)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.STOP
    assert verdict.decision.evidence["judge"]["checkpoints"]["written"] == 0


def test_the_checkpoint_location_is_listed_only_when_every_other_signal_agrees() -> None:
    saving = Checkpoints([NOW - timedelta(minutes=2)])
    j = training(NOW - timedelta(hours=2), **CHECKPOINTS)
    busy_cpu = {**IDLE_HOST, ("CPUUtilization", "job-1/algo-1"): 180.0}
    vetoed = review(IDLE, IdleRole.NOTIFYING, Metrics(busy_cpu), Logs(), j=j, checkpoints=saving)
    assert vetoed.decision.code == JudgeCode.CPU_BUSY and saving.calls == []
    # a job without a checkpoint location: nothing to list, the stop stands
    plain = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), checkpoints=saving)
    assert plain.verdict is Verdict.STOP and saving.calls == []
    assert "checkpoints" not in plain.decision.evidence["judge"]


def test_an_unreadable_checkpoint_location_is_recorded_and_never_blocks_a_stop() -> None:
    denied = Checkpoints(unread="ListObjectsV2 on ckpt failed (AccessDenied)")
    j = training(NOW - timedelta(hours=2), **CHECKPOINTS)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), j=j, checkpoints=denied)
    assert verdict.verdict is Verdict.STOP
    assert (
        verdict.decision.evidence["judge"]["checkpoints"]["unread"]
        == "ListObjectsV2 on ckpt failed (AccessDenied)"
    )


def test_checkpoint_writes_veto_a_hang_too() -> None:
    pinned = {("GPUUtilization", "job-1/algo-1"): 100.0, ("CPUUtilization", "job-1/algo-1"): 300.0}
    j = progress_job().model_copy(update={"checkpoint_s3_uri": "s3://ckpt/job-1/"})
    saving = Checkpoints([NOW - timedelta(minutes=3)])
    verdict = review(PROGRESS, ProgressRole.STALL, Metrics(pinned), Logs(), j=j, checkpoints=saving)
    assert verdict.decision.code == JudgeCode.CHECKPOINT_WRITES and len(saving.calls) == 1


class FillingDisk(Metrics):
    """A job whose hosts' disk use grows by ``per_minute`` points a minute (DiskUtilization), or whose disk
    read fails (``disk_error``); every other series as in ``Metrics``."""

    def __init__(
        self,
        values: dict[tuple[str, str], float],
        per_minute: float = 0.0,
        disk_error: str | None = None,
        failing: tuple[str, ...] = (),
    ) -> None:
        super().__init__(values)
        self.per_minute, self.disk_error, self.failing = per_minute, disk_error, failing

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        if not queries or queries[0].metric != "DiskUtilization":
            return super().read(queries, start, end, period)
        self.calls.append((queries, start, end))
        if self.disk_error:
            return MetricReadResult({q.id: None for q in queries}, (self.disk_error,))
        minutes = int((end - start).total_seconds() // 60)
        failed = [q for q in queries if dict(q.dimensions)["Host"] in self.failing]
        return MetricReadResult(
            {
                q.id: None if q in failed else tuple(20 + self.per_minute * m for m in range(minutes))
                for q in queries
            },
            tuple(f"DiskUtilization {dict(q.dimensions)}: InternalError" for q in failed),
        )


def test_a_disk_that_fills_vetoes_the_idle_stop_a_silent_download_or_local_save() -> None:
    # A download to local disk (or a save to the local checkpoint path) on a large host: GPUs idle, a few
    # busy cores, the log silent; the disk grows by 0.05 points a minute (1.45 over the 30 minutes)
    metrics = FillingDisk(IDLE_HOST, per_minute=0.05)
    listing = Checkpoints()
    j = training(NOW - timedelta(hours=2), **CHECKPOINTS)
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), j=j, checkpoints=listing)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.DISK_WRITES
    assert "job-1/algo-1 (1.45 points)" in verdict.decision.reason and verdict.reset == ("gov-idle-job-1",)
    disk = verdict.decision.evidence["judge"]["disk"]
    assert (
        disk["largest_changes"] == {"job-1/algo-1": 1.45}
        and disk["since"] == (NOW - timedelta(minutes=30)).isoformat()
    )
    # read last, over what a stop needs; the disk already said it, so the checkpoint location is not listed
    (disk_read,) = [c for c in metrics.calls if c[0][0].metric == "DiskUtilization"]
    assert disk_read[1:] == (NOW - timedelta(minutes=30), NOW) and listing.calls == []


def test_a_disk_that_moves_less_than_the_threshold_is_no_sign_of_life() -> None:
    metrics = FillingDisk(IDLE_HOST, per_minute=0.01)  # 0.29 points over the window: under 0.5
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs())
    assert verdict.verdict is Verdict.STOP and verdict.decision.evidence["judge"]["disk"]["largest_changes"] == {
        "job-1/algo-1": 0.29
    }
    # and a team may count smaller writes as a sign of life
    lower = Policy(mode=Mode.ENFORCE, judge={"enabled": True, "disk_change_percent": 0.2})
    assert review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), policy=lower).decision.code == JudgeCode.DISK_WRITES


def test_a_failed_disk_read_is_recorded_and_never_blocks_a_stop() -> None:
    metrics = FillingDisk(IDLE_HOST, disk_error="GetMetricData failed (Throttling)")
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs())
    assert verdict.verdict is Verdict.STOP
    assert verdict.decision.evidence["judge"]["disk"]["unread"] == "GetMetricData failed (Throttling)"


IDLE_TWO_HOSTS = {**IDLE_HOST, ("GPUUtilization", "job-1/algo-2"): 0.0, ("CPUUtilization", "job-1/algo-2"): 4.0}


def test_a_disk_read_that_fails_for_some_hosts_still_counts_the_hosts_it_read() -> None:
    # Given a two-host job whose algo-1 disk fills while algo-2's read fails (one query not Complete, or a
    # throttled batch of a large cluster)
    metrics = FillingDisk(IDLE_TWO_HOSTS, per_minute=0.05, failing=("job-1/algo-2",))
    j = training(NOW - timedelta(hours=2), ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2})
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), j=j)
    # Then algo-1's move vetoes the stop, and the record keeps both what was read and what failed
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.DISK_WRITES
    disk = verdict.decision.evidence["judge"]["disk"]
    assert disk["largest_changes"] == {"job-1/algo-1": 1.45} and "algo-2" in disk["unread"]


def test_a_stop_names_only_the_disks_it_measured() -> None:
    # A quiet disk on algo-1, algo-2 unread: the stop says how many hosts' disks it measured, not all of them
    metrics = FillingDisk(IDLE_TWO_HOSTS, failing=("job-1/algo-2",))
    j = training(NOW - timedelta(hours=2), ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2})
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), j=j)
    assert verdict.verdict is Verdict.STOP
    assert (
        "no disk moved by 0.5 points on the 1 host(s) of 2 measured" in verdict.decision.evidence["judge_verdict"]
    )


def test_the_judge_can_be_switched_off_by_the_policy() -> None:
    metrics = Metrics(IDLE_HOST)
    verdict = review(
        IDLE, IdleRole.NOTIFYING, metrics, Logs(), policy=Policy(mode=Mode.ENFORCE, judge={"enabled": False})
    )
    assert verdict.verdict is Verdict.STOP and "judge" not in verdict.decision.evidence and metrics.calls == []
    assert not verdict.confirmed  # the notification alone: the stopper checks the alarm's state before it stops


class TimedMetrics(Metrics):
    """A reader that says when each value was: one a minute up to ``end``."""

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        result = super().read(queries, start, end, period)
        times = {
            qid: tuple(end - timedelta(minutes=len(values) - i) for i in range(len(values)))
            for qid, values in result.values.items()
            if values is not None
        }
        return MetricReadResult(result.values, result.errors, times)


def test_a_veto_widens_the_alarm_to_twice_the_quiet_stretch_so_it_is_not_judged_again_every_minute() -> None:
    # Given a job in Training for 50 minutes whose GPUs were idle all along while its CPUs download
    busy_cpu = {**IDLE_HOST, ("CPUUtilization", "job-1/algo-1"): 180.0}
    metrics = TimedMetrics(busy_cpu)
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), j=training(NOW - timedelta(minutes=50)))
    # Then the stop is vetoed and the alarm widened to 100 minutes (2 x 50) before it is reset
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.CPU_BUSY
    (widened,) = verdict.rewindow
    assert widened["AlarmName"] == "gov-idle-job-1" and "Tags" not in widened
    assert f"Widened to 100 minutes {WHY_VETOED};" in widened["AlarmDescription"]
    assert (widened["EvaluationPeriods"], widened["DatapointsToAlarm"], widened["ActionsEnabled"]) == (
        100,
        100,
        True,
    )
    assert verdict.reset == ("gov-idle-job-1",)
    assert verdict.decision.evidence["rejudge"] == {
        "quiet_minutes": 50,
        "window_minutes": 100,
        "widened": ["gov-idle-job-1"],
    }
    assert "widened to 100 minutes" in verdict.decision.reason
    # The quiet stretch was read as the GPU series since the job entered Training
    queries, start, _ = metrics.calls[-1]
    assert {q.metric for q in queries} == {"GPUUtilization"} and start == NOW - timedelta(minutes=50)


def test_a_veto_at_the_cap_leaves_the_alarm_in_alarm_instead_of_resetting_it_every_minute() -> None:
    busy_cpu = {**IDLE_HOST, ("CPUUtilization", "job-1/algo-1"): 180.0}
    verdict = review(
        IDLE, IdleRole.NOTIFYING, TimedMetrics(busy_cpu), Logs(), j=training(NOW - timedelta(hours=6))
    )
    assert verdict.verdict is Verdict.VETOED and verdict.reset == () and verdict.rewindow == ()
    assert verdict.decision.evidence["rejudge"]["window_minutes"] is None


def test_a_vetoed_hang_widens_the_armed_progress_alarm() -> None:
    pinned = {("GPUUtilization", "job-1/algo-1"): 100.0, ("CPUUtilization", "job-1/algo-1"): 300.0}
    line = LogEvidence(streams=1, line_at=NOW - timedelta(minutes=2), line_stream="job-1/algo-1-1")
    verdict = review(PROGRESS, ProgressRole.STALL, TimedMetrics(pinned), Logs(line), j=progress_job())
    assert verdict.decision.code == JudgeCode.LOGS_ACTIVE
    (widened,) = verdict.rewindow
    # No datapoint of its metrics in the 3 hours since it entered Training: 2 x 180, capped at 240
    assert widened["AlarmName"] == "gov-idle-job-1.progress" and widened["ActionsEnabled"] is True
    assert widened["EvaluationPeriods"] == 240


PINNED_HOST = {("GPUUtilization", "job-1/algo-1"): 100.0, ("CPUUtilization", "job-1/algo-1"): 400.0}


def test_an_idle_alarm_fired_by_pinned_gpus_is_judged_as_a_hang_and_confirmed_on_silence() -> None:
    # Given the idle alarm fired because the job's one GPU stayed pinned at 100% (its pinned trigger), and
    # the job defines no training metric and wrote no log line in the window
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), Logs())
    # Then the judge judges a hang (busy CPUs do not veto it) and the stop says so
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG
    assert verdict.decision.evidence["judge"]["trigger"] == "pinned"
    assert "pinned" in verdict.decision.reason or "95%" in verdict.decision.reason


def test_a_pinned_job_that_logs_is_vetoed_and_its_alarm_left_in_alarm() -> None:
    # Given the same pinned GPU, but a log line in the window (a healthy job computing at full GPU)
    logs = Logs(LogEvidence(streams=1, line_at=NOW - timedelta(minutes=3), line_stream="job-1/algo-1-1"))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs)
    # Then no stop; the alarm is neither reset (it would fire again at once, a judgement a minute) nor widened
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE
    assert verdict.reset == () and verdict.rewindow == ()
    assert "stays in ALARM" in verdict.decision.reason


def test_a_pinned_trigger_is_no_stop_while_the_gpus_work_between_idle_and_pinned() -> None:
    # Given a window whose GPU averaged 60% (pinned minutes and computing minutes): the job computes
    working = {**PINNED_HOST, ("GPUUtilization", "job-1/algo-1"): 60.0}
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(working), Logs())
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.GPU_WORKING
    assert verdict.reset == ()


# ---- the job's log rhythm (a hang is judged over the silence its own log makes unusual) ------------------


def every(minutes: float, *, start: datetime, until: datetime) -> list[datetime]:
    """A log line every ``minutes`` from ``start`` (included) to ``until`` (excluded)."""
    out, at = [], start
    while at < until:
        out.append(at)
        at += timedelta(minutes=minutes)
    return out


def test_a_pinned_job_that_logged_every_minute_is_judged_hung_after_20_silent_minutes() -> None:
    # Given a pinned job that logged a line a minute for its first 95 minutes, then nothing for 25
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=every(1, start=started, until=NOW - timedelta(minutes=25)))
    metrics = Metrics(PINNED_HOST)
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, logs)
    # Then the rhythm (longest gap 1 minute: 3 x 1, at least 20) judges the last 20 minutes, not the
    # alarm's 30: silent, so the hang is confirmed
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG
    judged = verdict.decision.evidence["judge"]
    assert judged["rhythm"]["silence_minutes"] == 20 and judged["rhythm"]["longest_gap_minutes"] == 1.0
    assert judged["window"]["minutes"] == 20
    # read since the job entered Training, the metrics again over the 20 minutes; the lines are not read
    # again (the rhythm's read holds them)
    assert logs.rhythm_calls == [(started, NOW)] and len(logs.calls) == 1
    # and, last, before the stop, the hosts' disk use over those 20 minutes
    assert [(start, end) for _, start, end in metrics.calls] == [
        (NOW - timedelta(minutes=30), NOW),
        (NOW - timedelta(minutes=20), NOW),
        (NOW - timedelta(minutes=20), NOW),
    ]
    assert {q.metric for q in metrics.calls[-1][0]} == {"DiskUtilization"}


def test_fifteen_silent_minutes_of_a_job_that_logs_every_minute_are_no_hang() -> None:
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=every(1, start=started, until=NOW - timedelta(minutes=15)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE
    assert verdict.decision.evidence["judge"]["window"]["minutes"] == 20


def test_a_job_whose_log_had_a_40_minute_gap_needs_120_silent_minutes() -> None:
    # Given a pinned job that logs every 5 minutes but once wrote nothing for 40 (a long save that ended),
    # and has now been silent for 50 minutes: longer than the alarm's 30-minute window
    started = NOW - timedelta(hours=4)
    lines = every(5, start=started, until=started + timedelta(minutes=61))
    lines += every(5, start=started + timedelta(minutes=100), until=NOW - timedelta(minutes=50))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), Logs(lines=lines), j=training(started))
    # Then its own rhythm says 120 silent minutes (3 x 40): its last line is in that window, no hang
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE
    judged = verdict.decision.evidence["judge"]
    assert judged["rhythm"]["longest_gap_minutes"] == 40.0 and judged["window"]["minutes"] == 120


def test_without_a_rhythm_the_hang_is_judged_over_the_alarms_window() -> None:
    # Given three lines only (too few to say how often the job logs), or a failed read of its lines
    started = NOW - timedelta(hours=2)
    few = Logs(lines=every(1, start=started, until=started + timedelta(minutes=3)))
    failed = Logs(rhythm_fails=True)
    for logs in (few, failed):
        verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs)
        # Then the judge uses the alarm's 30-minute window, as without the rhythm (here: silent, a hang)
        assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG
        judged = verdict.decision.evidence["judge"]
        assert judged["window"]["minutes"] == 30 and judged["rhythm"]["silence_minutes"] is None
    assert "ThrottlingException" in verdict.decision.evidence["judge"]["rhythm"]["unread"]


def test_a_job_in_training_for_less_than_its_silence_is_judged_since_it_entered_training() -> None:
    # Given a job back in Training 32 minutes ago whose lines came 2, 2 and 12 minutes apart (rhythm: 36
    # silent minutes), its last line 16 minutes ago
    started = NOW - timedelta(minutes=32)
    lines = [started, started + timedelta(minutes=2), started + timedelta(minutes=4), NOW - timedelta(minutes=16)]
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), Logs(lines=lines), j=training(started))
    # Then the window is cut at its entry into Training (32 minutes) and holds its last line: no hang
    judged = verdict.decision.evidence["judge"]
    assert judged["rhythm"]["silence_minutes"] == 36 and judged["window"]["minutes"] == 32
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE


# ---- the alarm's trigger: it fires before the window, the judge decides --------------------------------


def widened_to(verdict: GuardVerdict) -> list[int]:
    return [r["EvaluationPeriods"] for r in verdict.rewindow]


def test_an_idle_trigger_is_never_an_idle_stop_before_the_window_the_alarm_is_moved_to_it() -> None:
    # Given a job 25 minutes into Training whose idle alarm fired on its 20-minute trigger, every signal
    # agreeing over those 20 minutes
    metrics = Metrics(IDLE_HOST)
    j = training(NOW - timedelta(minutes=25))
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), j=j, alarm_minutes=20)
    # Then no stop: the alarm is widened to the 30-minute window and reset (judged again if still idle then)
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert verdict.decision.action is Action.NONE and not verdict.stops
    assert widened_to(verdict) == [30] and verdict.reset == ("gov-idle-job-1",)
    assert verdict.decision.evidence["rejudge"]["trigger_minutes"] == 20
    assert WHY_SHORT_SPAN in verdict.rewindow[0]["AlarmDescription"]
    # and it read the 20 minutes the trigger covers, then the window (cut at its entry into Training)
    assert [(start, end) for _, start, end in metrics.calls] == [
        (NOW - timedelta(minutes=20), NOW),
        (NOW - timedelta(minutes=25), NOW),
        (NOW - timedelta(minutes=25), NOW),  # last, the disk (what a wait needs too)
    ]


def test_idleness_the_evidence_shows_over_the_whole_window_is_stopped_at_the_trigger() -> None:
    # Given a trigger that fired late (after a lost notification): every signal idle over the whole window
    metrics = Metrics(IDLE_HOST)
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, Logs(), alarm_minutes=20)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.STOP
    assert verdict.decision.evidence["judge"]["window"]["minutes"] == 30
    # and the widened alarm's own notification (the 30-minute window) is judged as always
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(IDLE_HOST), Logs(), alarm_minutes=30)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.STOP


def test_a_sign_of_life_in_the_trigger_is_a_veto_and_the_alarm_gets_the_window_at_least() -> None:
    # Given the trigger fired while the job's CPUs were busy (a CPU phase)
    busy_cpu = {**IDLE_HOST, ("CPUUtilization", "job-1/algo-1"): 180.0}
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(busy_cpu), Logs(), alarm_minutes=20)
    # Then the usual veto, and the alarm is never left at the trigger's 20 minutes
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.CPU_BUSY
    assert widened_to(verdict) and min(widened_to(verdict)) >= 30


def test_a_pinned_trigger_stops_a_hang_at_the_jobs_silence_limit_before_the_window() -> None:
    # Given a job that logged every 5 minutes, silent for the 20 minutes its GPUs have been pinned
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, alarm_minutes=20)
    # Then the hang is stopped: 20 silent minutes are its rhythm's limit (3 x 5, at least 20)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG
    assert verdict.decision.evidence["judge"]["window"]["minutes"] == 20
    assert "20 minutes" in verdict.decision.reason


def test_a_pinned_trigger_without_a_rhythm_waits_for_the_window() -> None:
    # Given three lines only (no rhythm), the last 25 minutes ago: the window decides, as without a trigger
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=[started, started + timedelta(minutes=1), NOW - timedelta(minutes=25)])
    metrics = Metrics(PINNED_HOST)
    verdict = review(IDLE, IdleRole.NOTIFYING, metrics, logs, alarm_minutes=20)
    # Then no stop at 20 minutes: the alarm is widened to the 30-minute window
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert widened_to(verdict) == [30] and "30 silent minutes" in verdict.decision.reason
    # read over the trigger, then over the window the unknown rhythm needs
    assert [(start, end) for _, start, end in metrics.calls] == [
        (NOW - timedelta(minutes=20), NOW),
        (NOW - timedelta(minutes=30), NOW),
    ]


def test_a_pinned_trigger_waits_for_a_longer_rhythm_limit() -> None:
    # Given a job whose log once had a 12-minute gap (limit 36), silent for the last 25 minutes
    started = NOW - timedelta(hours=3)
    lines = every(5, start=started, until=started + timedelta(minutes=60))
    lines += every(5, start=started + timedelta(minutes=67), until=NOW - timedelta(minutes=25))
    j = training(started)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), Logs(lines=lines), j=j, alarm_minutes=20)
    # Then the alarm waits for the 36 minutes the job's own rhythm allows
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert widened_to(verdict) == [36]


class OlderPartUnreadable(Logs):
    """The job's log: its last hours read, the stint's older part (asked for second) throttled."""

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        if self.rhythm_calls:
            self.rhythm_calls.append((start, end))
            raise AdapterError("the job's log lines could not be read (ThrottlingException)")
        return super().rhythm(job_name, start, end)


def test_a_pinned_trigger_whose_older_log_cannot_be_read_stops_nothing() -> None:
    # Given a pinned job 8 hours in Training that logs every 5 minutes and ran a silent 40-minute evaluation
    # 5 h 40 min ago (its rhythm: 120 silent minutes), silent now for 35 minutes: past the 20 its last 4 hours
    # give, so the older part is read, and that read is throttled
    started = NOW - timedelta(hours=8)
    evaluation = NOW - timedelta(hours=5, minutes=40)
    lines = every(5, start=started, until=evaluation + timedelta(seconds=1))
    lines += every(5, start=evaluation + timedelta(minutes=40), until=NOW - timedelta(minutes=35))
    logs = OlderPartUnreadable(lines=lines)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=30)
    # Then the job is not stopped on the guard's window: the read that could have given it a longer limit is
    # missing, and missing data stops nothing
    assert len(logs.rhythm_calls) == 2
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.INSUFFICIENT
    assert any("log rhythm" in m for m in verdict.decision.evidence["judge"]["missing"])


def test_a_pinned_trigger_of_a_job_that_logs_is_left_in_alarm_as_before() -> None:
    # Given a pinned job with a line 3 minutes ago: computing, not hung
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=2)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, alarm_minutes=20)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE
    assert verdict.reset == () and verdict.rewindow == ()


def test_a_pinned_trigger_without_a_rhythm_stops_a_job_silent_for_the_window() -> None:
    # Given three lines in the job's first minutes and nothing since (two hours): silent for the window
    started = NOW - timedelta(hours=2)
    logs = Logs(lines=every(1, start=started, until=started + timedelta(minutes=3)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, alarm_minutes=20)
    # Then the hang is stopped, judged over the 30-minute window its unknown rhythm needs
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG
    assert verdict.decision.evidence["judge"]["window"]["minutes"] == 30


# ---- the progress guard's trigger: a hang with a GPU pinned is stopped at the job's silence limit ---------


def two_host_progress_job(started: datetime) -> Any:
    j = progress_job()
    return training(
        started,
        AlgorithmSpecification=j.algorithm.model_dump(by_alias=True),
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
    )


STUCK_RANK = {  # one host's GPUs spin in the collective, the other's rank is stuck at 0%
    ("GPUUtilization", "job-1/algo-1"): 800.0,
    ("GPUUtilization", "job-1/algo-2"): 0.0,
    ("CPUUtilization", "job-1/algo-1"): 900.0,
    ("CPUUtilization", "job-1/algo-2"): 90.0,
}


def test_a_progress_trigger_stops_a_stuck_rank_at_the_jobs_silence_limit() -> None:
    # Given a 2-host job that logged every 5 minutes, then nothing for 21 minutes; its loss stopped too
    started = NOW - timedelta(hours=3)
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    j = two_host_progress_job(started)
    verdict = review(PROGRESS, ProgressRole.STALL, Metrics(STUCK_RANK), logs, j=j, alarm_minutes=20)
    # Then the 20-minute trigger is enough: pinned on one host, idle on the other, silent for its limit
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == ProgressCode.STOP
    assert verdict.decision.evidence["judge"]["window"]["minutes"] == 20
    assert "for 20 minutes" in verdict.decision.reason


def test_a_progress_trigger_with_every_gpu_idle_waits_for_the_window() -> None:
    # Given the same silence with every GPU idle: idleness, which a trigger of the progress guard never judges
    started = NOW - timedelta(hours=3)
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    idle = {key: (0.0 if key[0] == "GPUUtilization" else 20.0) for key in STUCK_RANK}
    j = two_host_progress_job(started)
    verdict = review(PROGRESS, ProgressRole.STALL, Metrics(idle), logs, j=j, alarm_minutes=20)
    # Then no stop before the guard's 120-minute window: the stall alarm is widened to it and reset
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert widened_to(verdict) == [120] and verdict.reset == ("gov-idle-job-1.progress",)


def test_a_progress_trigger_without_a_rhythm_waits_for_the_window() -> None:
    # Given a stuck rank whose log has three lines only, the last 30 minutes ago (no rhythm)
    started = NOW - timedelta(hours=3)
    logs = Logs(lines=[started, started + timedelta(minutes=1), NOW - timedelta(minutes=30)])
    j = two_host_progress_job(started)
    verdict = review(PROGRESS, ProgressRole.STALL, Metrics(STUCK_RANK), logs, j=j, alarm_minutes=20)
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert widened_to(verdict) == [120]


def test_a_hang_on_hosts_that_published_no_gpu_data_is_never_stopped() -> None:
    # Given a silent job (no metric, no log line) whose one host published CPUUtilization but no
    # GPUUtilization in the window (GetMetricData complete, no datapoint): its GPUs may be computing
    unseen = review(
        PROGRESS, ProgressRole.STALL, Metrics({("CPUUtilization", "job-1/algo-1"): 40.0}), Logs(), j=progress_job()
    )
    # Then the stall alarm does not stop it: insufficient evidence, the missing series named
    assert unseen.verdict is Verdict.VETOED and unseen.decision.code == JudgeCode.INSUFFICIENT
    assert "GPUUtilization of job-1/algo-1: 0 of 120 minutes" in unseen.decision.evidence["judge"]["missing"]
    # Given a 2-host job that logged every 5 minutes, silent for 21, and no host metric published at all
    started = NOW - timedelta(hours=3)
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    j = two_host_progress_job(started)
    blind = review(PROGRESS, ProgressRole.STALL, Metrics({}), logs, j=j, alarm_minutes=120)
    # Then its stall alarm stops nothing either, though the job is silent past its rhythm's limit
    assert blind.verdict is not Verdict.STOP and blind.decision.code == JudgeCode.INSUFFICIENT


def test_a_pinned_trigger_with_a_host_that_published_nothing_is_not_a_stuck_host() -> None:
    # Given 2 x ml.p4d.24xlarge without a training metric, algo-1 pinned, algo-2 with busy CPUs and no GPU
    # datapoint in the window; the log had a 5-minute rhythm and has been silent for 21 minutes
    started = NOW - timedelta(hours=3)
    j = training(
        started, ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100}
    )
    seen = {**STUCK_RANK, ("CPUUtilization", "job-1/algo-2"): 900.0}
    del seen[("GPUUtilization", "job-1/algo-2")]
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    # When the idle alarm's pinned trigger fires
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(seen), logs, j=j, alarm_minutes=20)
    # Then the job is not stopped as hung: what algo-2's GPUs did is unknown
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.INSUFFICIENT
    assert any("GPUUtilization of job-1/algo-2" in m for m in verdict.decision.evidence["judge"]["missing"])


def test_a_cpu_only_jobs_hang_is_still_stopped_on_its_silence() -> None:
    # Given a job on CPU instances (no GPUUtilization ever) whose loss and log stopped for the window
    j = training(
        NOW - timedelta(hours=3),
        AlgorithmSpecification=progress_job().algorithm.model_dump(by_alias=True),
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
    )
    verdict = review(
        PROGRESS, ProgressRole.STALL, Metrics({("CPUUtilization", "job-1/algo-1"): 390.0}), Logs(), j=j
    )
    # Then the stall is stopped as before: a host without GPUs lacks no GPU series
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == ProgressCode.STOP


def test_a_mixed_clusters_large_host_at_half_load_is_not_read_as_pinned() -> None:
    # Given an ml.g5.48xlarge (8 GPUs) and an ml.g5.xlarge (1 GPU), without a training metric: the large host
    # computes at 50% per GPU (400), the small one at 100%; the log had a 5-minute rhythm, then an evaluation
    # that prints only at its end has kept it silent for 21 minutes
    started = NOW - timedelta(hours=3)
    groups = [
        {"InstanceGroupName": "learner", "InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "actor", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
    ]
    j = training(started, ResourceConfig={"InstanceGroups": groups, "VolumeSizeInGB": 50})
    load = {
        ("GPUUtilization", "job-1/algo-1"): 400.0,
        ("CPUUtilization", "job-1/algo-1"): 2000.0,
        ("GPUUtilization", "job-1/algo-2"): 100.0,
        ("CPUUtilization", "job-1/algo-2"): 200.0,
    }
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=21)))
    # When the idle alarm's pinned trigger (95 x the fewest GPUs) fires on it
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(load), logs, j=j, alarm_minutes=20)
    # Then the job is not stopped as hung: its GPUs work, as the same load on a one-type cluster would say
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.GPU_WORKING


def test_a_mixed_cluster_whose_every_host_spins_is_stopped_as_hung() -> None:
    # Given two ml.g5.48xlarge (8 GPUs) and four ml.g5.xlarge (1 GPU) in a collective that never completes:
    # the large hosts report 790, the small ones 99; no training metric, and the log silent for 40 minutes
    started = NOW - timedelta(hours=3)
    groups = [
        {"InstanceGroupName": "learner", "InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "actor", "InstanceType": "ml.g5.xlarge", "InstanceCount": 4},
    ]
    j = training(started, ResourceConfig={"InstanceGroups": groups, "VolumeSizeInGB": 50})
    load = {("GPUUtilization", f"job-1/algo-{n}"): 790.0 if n <= 2 else 99.0 for n in range(1, 7)}
    load |= {("CPUUtilization", f"job-1/algo-{n}"): 100.0 for n in range(1, 7)}
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=40)))
    # When the idle alarm's pinned trigger fires on it
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(load), logs, j=j, alarm_minutes=20)
    # Then the job's groups say which hosts have one GPU once the two 8-GPU hosts have shown themselves: every
    # host is pinned, and the hang is stopped (before, a host at 99 might have been eight GPUs at 12%: a veto)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG


class Hiccup(Metrics):
    """Pinned GPUs (99% on the one GPU) and busy CPUs, but 0% in the single minute ``at``: a 20-minute mean
    of 94% (working: a sign of life) within a 40-minute mean of 96.6% (pinned)."""

    def __init__(self, at: datetime) -> None:
        super().__init__({})
        self.at = at

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        self.calls.append((queries, start, end))
        minutes = [start + timedelta(minutes=m) for m in range(int((end - start).total_seconds() // 60))]
        levels = {"GPUUtilization": lambda t: 0.0 if t == self.at else 99.0, "CPUUtilization": lambda t: 400.0}
        out: dict[str, tuple[float, ...] | None] = {
            q.id: tuple(levels[q.metric](t) for t in minutes) if q.metric in levels else () for q in queries
        }
        times = {q.id: tuple(minutes) if q.metric in levels else () for q in queries}
        return MetricReadResult(out, (), times)


def test_a_sign_of_life_in_the_triggers_span_is_a_veto_even_when_the_longer_window_agrees() -> None:
    # Given a team's 60-minute idle window, a job 40 minutes in Training whose log has no line since (its
    # rhythm unknown: the window decides) and whose GPUs dipped once 10 minutes ago
    policy = Policy.model_validate(
        {"mode": "enforce", "judge": {"enabled": True}, "idle": {"evaluation_periods": 60}}
    )
    j = training(NOW - timedelta(minutes=40))
    verdict = review(IDLE, IdleRole.NOTIFYING, Hiccup(NOW - timedelta(minutes=10)), Logs(), j=j, policy=policy,
                     alarm_minutes=20)  # fmt: skip
    # When its pinned trigger fires after 20 minutes: over the 40 minutes in Training the GPUs look pinned
    # (a hang, but a stop needs 60 minutes), over the trigger's 20 they worked. Then it is a veto, never a stop
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.GPU_WORKING


def test_cpu_only_hosts_of_a_heterogeneous_cluster_do_not_make_an_idle_window_a_hang() -> None:
    # Given a heterogeneous cluster's evidence: two GPU hosts (8 GPUs, idle but for one busy minute) and a
    # CPU-only host, which publishes no GPUUtilization
    start = NOW - timedelta(minutes=20)
    gpu = [0.0] * 20
    gpu[7] = 400.0

    def host(name: str, values: tuple[float, ...]) -> HostEvidence:
        return HostEvidence(host=f"job-1/{name}", series={GPU: values, CPU: (20.0,) * 20})

    hosts = (host("algo-1", tuple(gpu)), host("algo-2", (0.0,) * 20), host("algo-3", ()))
    evidence = Evidence(start=start, end=NOW, hosts=hosts, gpu_hosts=2)
    # When the judge asks whether the idle alarm fired on pinned GPUs (760 = 95% x 8) rather than idle ones (8)
    claim = StallJudge.pinned_claim(StallKind.IDLE, evidence, idle_threshold=8.0, pinned_threshold=760.0)
    # Then it did not: 19 idle minutes and no pinned one on the GPU hosts (the CPU host counts for neither), so
    # the window is judged as idleness, where the busy minute is a sign of life, not as a hang
    assert claim is False
    # and the same window on the GPU hosts alone says the same
    alone = evidence.model_copy(update={"hosts": hosts[:2]})
    assert StallJudge.pinned_claim(StallKind.IDLE, alone, idle_threshold=8.0, pinned_threshold=760.0) is False


# ---- an instance type our table does not know: the GPU count EC2 gave ----------------------------------


def hang_on(instance_type: str, resolved: dict[str, InstanceFacts], metrics: Metrics) -> GuardVerdict:
    """The progress guard's stall alarm of a job on one ``instance_type`` host, judged with ``resolved`` (EC2's
    facts as the stopper read them)."""
    j = training(
        NOW - timedelta(hours=3),
        AlgorithmSpecification=progress_job().algorithm.model_dump(by_alias=True),
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": 1, "VolumeSizeInGB": 100},
    )
    policy = judging(Mode.ENFORCE)
    notice = Notice(
        job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=NOW, evidence={"threshold": 1.0},
        resolved=resolved,
    )  # fmt: skip
    verdict = PROGRESS.judge(ProgressRole.STALL, notice, PROGRESS.config(policy))
    assert verdict.stops
    return StallJudge(metrics, Logs()).review(PROGRESS, ProgressRole.STALL, notice, verdict, policy)


EIGHT_GPUS_AT_60 = {("GPUUtilization", "job-1/algo-1"): 480.0, ("CPUUtilization", "job-1/algo-1"): 2000.0}


def test_gpus_working_on_a_type_only_ec2_knows_veto_a_hang_as_on_a_type_our_table_knows() -> None:
    # Given a job on one 8-GPU host whose GPUs compute at 60% each, no progress metric in the window and a
    # silent log: on a type our table lists, and on one only EC2's DescribeInstanceTypes sizes (8 GPUs)
    known = hang_on("ml.p4d.24xlarge", {}, Metrics(EIGHT_GPUS_AT_60))
    p7 = InstanceFacts(instance_type="ml.p7.48xlarge", accelerator=Accelerator.NVIDIA_GPU, gpus=8, note="EC2")
    resolved = hang_on("ml.p7.48xlarge", {"ml.p7.48xlarge": p7}, Metrics(EIGHT_GPUS_AT_60))
    # Then the judge counts EC2's GPUs as it counts the table's: the GPUs work, no hang, no stop
    assert known.verdict is resolved.verdict is Verdict.VETOED
    assert known.decision.code == resolved.decision.code == JudgeCode.GPU_WORKING


def test_gpu_load_on_a_type_whose_gpu_count_nobody_gave_is_insufficient_evidence_never_no_gpus() -> None:
    # Given a job on a type neither our table nor EC2 sizes (EC2 throttled), whose host publishes GPUUtilization
    unknown = InstanceFacts(
        instance_type="ml.p7.48xlarge", accelerator=Accelerator.UNKNOWN, note="EC2 throttled", lookup_failed=True
    )
    pinned = hang_on("ml.p7.48xlarge", {"ml.p7.48xlarge": unknown}, Metrics(EIGHT_GPUS_AT_60))
    # Then how busy its GPUs are per GPU cannot be told: no stop, the missing count is named
    assert pinned.verdict is Verdict.VETOED and pinned.decision.code == JudgeCode.INSUFFICIENT
    assert any("ml.p7.48xlarge" in why for why in pinned.decision.evidence["judge"]["missing"])
    # and a host that publishes no GPUUtilization is judged as before: a CPU-only host, silent, stopped
    cpu_only = hang_on(
        "ml.p7.48xlarge", {"ml.p7.48xlarge": unknown}, Metrics({("CPUUtilization", "job-1/algo-1"): 5.0})
    )
    assert cpu_only.verdict is Verdict.STOP


# ---- a notification handled late: judged as of its alarm's state change ----------------------------------


class Lagging(Metrics):
    """GetMetricData as SageMaker publishes a job's instance metrics: one value a minute, with nothing after
    ``published_until`` yet (the metrics arrive late); ``gpu(t)`` the one host's GPU use at minute ``t``, its CPU
    idle."""

    def __init__(self, gpu: Any, published_until: datetime) -> None:
        super().__init__({})
        self.gpu, self.published_until = gpu, published_until

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        self.calls.append((queries, start, end))
        minutes = [start + timedelta(minutes=m) for m in range(int((end - start).total_seconds() // 60))]
        seen = tuple(t for t in minutes if t < self.published_until)
        levels = {"GPUUtilization": self.gpu, "CPUUtilization": lambda t: 4.0}
        out: dict[str, tuple[float, ...] | None] = {
            q.id: tuple(levels[q.metric](t) for t in seen) if q.metric in levels else () for q in queries
        }
        times = {q.id: seen if q.metric in levels else () for q in queries}
        return MetricReadResult(out, (), times)


def handled_late(metrics: Metrics, logs: Logs, *, changed_at: datetime, alarm_minutes: int) -> GuardVerdict:
    """The idle alarm's notification of a state change at ``changed_at`` handled at NOW (a retried delivery)."""
    j, policy = training(NOW - timedelta(hours=3)), judging(Mode.ENFORCE)
    notice = Notice(
        job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=changed_at,
        evidence={"threshold": 1.0, "evaluation_periods": alarm_minutes, "period_seconds": 60},
    )  # fmt: skip
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, IDLE.config(policy))
    assert verdict.stops
    return StallJudge(metrics, logs).review(IDLE, IdleRole.NOTIFYING, notice, verdict, policy)


def test_a_trigger_handled_late_is_judged_as_of_its_state_change_not_of_its_handling() -> None:
    # Given a job idle from 30 minutes ago that resumed 4 minutes ago (not published yet), whose 20-minute
    # trigger changed state 10 minutes ago and whose notification is handled only now (a retried delivery)
    idle_from, resumed = NOW - timedelta(minutes=30), NOW - timedelta(minutes=4)
    metrics = Lagging(lambda t: 0.0 if idle_from <= t < resumed else 90.0, published_until=resumed)
    verdict = handled_late(metrics, Logs(), changed_at=NOW - timedelta(minutes=10), alarm_minutes=20)
    # Then it is judged over the 20 minutes up to the state change: idle 20 minutes then, not the 26 idle minutes
    # up to now, so no stop before the whole window; the alarm waits for the window
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    judged = verdict.decision.evidence["judge"]["window"]
    assert (judged["start"], judged["end"]) == (idle_from.isoformat(), (NOW - timedelta(minutes=10)).isoformat())
    assert widened_to(verdict) == [30]


def test_a_sign_of_life_after_the_state_change_of_a_late_notification_vetoes_the_stop() -> None:
    # Given a job idle for the whole 30-minute window up to its alarm's state change 10 minutes ago, whose GPUs
    # came back 6 minutes ago (published) before its notification is handled now
    back = NOW - timedelta(minutes=6)
    metrics = Lagging(lambda t: 90.0 if t >= back or t < NOW - timedelta(minutes=60) else 0.0, NOW)
    verdict = handled_late(metrics, Logs(), changed_at=NOW - timedelta(minutes=10), alarm_minutes=30)
    # Then the job recovered: a veto with the sign's code, never a stop; the record keeps both readings
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.GPU_BUSY
    judged = verdict.decision.evidence["judge"]
    assert judged["window"]["end"] == (NOW - timedelta(minutes=10)).isoformat()
    assert judged["since_state_change"]["window"]["end"] == NOW.isoformat()
    # and so does a log line since then
    line = Logs(lines=[NOW - timedelta(minutes=3)])
    idle = Lagging(lambda t: 0.0, NOW - timedelta(minutes=4))
    verdict = handled_late(idle, line, changed_at=NOW - timedelta(minutes=10), alarm_minutes=30)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.LOGS_ACTIVE


def test_minutes_not_yet_published_after_a_late_state_change_are_no_sign_either_way() -> None:
    # Given a job idle for the whole window up to its alarm's state change 10 minutes ago, still idle, its
    # metrics published only up to 4 minutes ago
    idle = Lagging(lambda t: 0.0, NOW - timedelta(minutes=4))
    verdict = handled_late(idle, Logs(), changed_at=NOW - timedelta(minutes=10), alarm_minutes=30)
    # Then the stop stands as it would have at the state change (the unpublished minutes veto nothing)
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.STOP
    assert verdict.decision.evidence["judge"]["window"]["end"] == (NOW - timedelta(minutes=10)).isoformat()


class ThrottledSince(Lagging):
    """``Lagging``, but a read that starts at ``fails_from`` (the alarm's state change) is throttled."""

    def __init__(self, gpu: Any, fails_from: datetime) -> None:
        super().__init__(gpu, NOW)
        self.fails_from = fails_from

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        if start == self.fails_from:
            self.calls.append((queries, start, end))
            return MetricReadResult({q.id: None for q in queries}, ("GetMetricData failed (Throttling)",))
        return super().read(queries, start, end, period)


def test_a_late_notification_whose_read_since_its_state_change_fails_is_never_a_stop() -> None:
    # Given a job idle for the whole 30-minute window up to its alarm's state change 10 minutes ago, whose GPUs
    # came back 8 minutes ago (published), and whose notification is handled only now
    changed, back = NOW - timedelta(minutes=10), NOW - timedelta(minutes=8)
    gpu = lambda t: 90.0 if t >= back else 0.0  # noqa: E731
    # When the read of the minutes since the state change is throttled (as the delivery that came late was)
    verdict = handled_late(ThrottledSince(gpu, changed), Logs(), changed_at=changed, alarm_minutes=30)
    # Then the job is not stopped on the judgement as of then: insufficient evidence, the failed read recorded,
    # and no stop confirmed (before, an idle stop the stopper did not check against the alarm's state)
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.INSUFFICIENT
    assert not verdict.confirmed
    since = verdict.decision.evidence["judge"]["since_state_change"]
    assert any("Throttling" in why for why in since["missing"])
    # and the same minutes read fine are the sign of life they are
    read = handled_late(Lagging(gpu, NOW), Logs(), changed_at=changed, alarm_minutes=30)
    assert read.verdict is Verdict.VETOED and read.decision.code == JudgeCode.GPU_BUSY


class Cluster(Metrics):
    """GetMetricData for a cluster: ``level(metric, host, t)`` a minute (None: no datapoint), each host's published
    up to ``published(host)``."""

    def __init__(self, level: Any, published: Any = lambda host: NOW) -> None:
        super().__init__({})
        self.level, self.published = level, published

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        self.calls.append((queries, start, end))
        minutes = [start + timedelta(minutes=m) for m in range(int((end - start).total_seconds() // 60))]
        out: dict[str, tuple[float, ...] | None] = {}
        times: dict[str, tuple[datetime, ...]] = {}
        for q in queries:
            host = q.dimensions[0][1]
            seen = [(t, self.level(q.metric, host, t)) for t in minutes if t < self.published(host)]
            read = [(t, v) for t, v in seen if v is not None]
            out[q.id], times[q.id] = tuple(v for _, v in read), tuple(t for t, _ in read)
        return MetricReadResult(out, (), times)


MIXED_GROUPS = [
    {"InstanceGroupName": "learner", "InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
    {"InstanceGroupName": "actor", "InstanceType": "ml.g5.xlarge", "InstanceCount": 4},
]


def spinning_cluster(metric: str, host: str, t: datetime) -> float | None:
    """Two 8-GPU hosts at 790 and four 1-GPU hosts at 99: a collective spinning everywhere; CPUs busy."""
    if metric == "GPUUtilization":
        return 790.0 if host in ("job-1/algo-1", "job-1/algo-2") else 99.0
    return 100.0 if metric == "CPUUtilization" else None


def late_on_the_cluster(guard: Any, role: str, metrics: Metrics, *, changed_at: datetime, minutes: int) -> Any:
    """``guard``'s alarm of a silent job on MIXED_GROUPS (a line every 5 minutes until 45 minutes ago), its state
    change at ``changed_at`` handled at NOW."""
    started = NOW - timedelta(hours=3)
    spec = progress_job().algorithm.model_dump(by_alias=True) if guard is PROGRESS else None
    j = training(
        started,
        ResourceConfig={"InstanceGroups": MIXED_GROUPS, "VolumeSizeInGB": 50},
        **({"AlgorithmSpecification": spec} if spec else {}),
    )
    logs = Logs(lines=every(5, start=started, until=NOW - timedelta(minutes=45)))
    policy = judging(Mode.ENFORCE)
    notice = Notice(
        job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=changed_at,
        evidence={"threshold": 1.0, "evaluation_periods": minutes, "period_seconds": 60},
    )  # fmt: skip
    verdict = guard.judge(role, notice, guard.config(policy))
    assert verdict.stops
    return StallJudge(metrics, logs).review(guard, role, notice, verdict, policy)


def test_a_late_notification_keeps_the_gpu_counts_its_window_showed_when_a_host_has_not_published_since() -> None:
    # Given a mixed cluster spinning everywhere, log silent, whose alarms changed state 3 minutes ago; one 8-GPU
    # host (algo-2) has published no minute since, the others have
    changed = NOW - timedelta(minutes=3)
    lagging = Cluster(spinning_cluster, published=lambda host: changed if host == "job-1/algo-2" else NOW)
    # When the idle alarm's pinned trigger and the progress guard's stall alarm are handled now
    pinned = late_on_the_cluster(IDLE, IdleRole.NOTIFYING, lagging, changed_at=changed, minutes=20)
    stalled = late_on_the_cluster(PROGRESS, ProgressRole.STALL, lagging, changed_at=changed, minutes=30)
    # Then the 1-GPU hosts the window showed to be pinned stay pinned in the minutes since (before, with one
    # 8-GPU host unseen there, they were again 1 GPU at 99 or 8 at 12%: "GPUs working", a veto of the hang)
    assert pinned.verdict is Verdict.STOP and pinned.decision.code == IdleCode.HUNG
    assert stalled.verdict is Verdict.STOP and stalled.decision.code == ProgressCode.STOP


def test_a_level_since_the_state_change_that_contradicts_the_windows_gpu_counts_narrows_nothing() -> None:
    # Given the same cluster and late notification, but a host the window showed to have 1 GPU (algo-3) reports
    # 400 since the state change: more than one GPU can give
    changed = NOW - timedelta(minutes=3)

    def level(metric: str, host: str, t: datetime) -> float | None:
        if metric == "GPUUtilization" and host == "job-1/algo-3" and t >= changed:
            return 400.0
        return spinning_cluster(metric, host, t)

    # When the idle alarm's pinned trigger is handled now
    verdict = late_on_the_cluster(IDLE, IdleRole.NOTIFYING, Cluster(level), changed_at=changed, minutes=20)
    # Then the window's counts are not imposed on what was read since (400 on one GPU would read as pinned):
    # the host may have 8 GPUs at 50%, working, and the job is not stopped
    assert verdict.verdict is Verdict.VETOED and verdict.decision.code == JudgeCode.GPU_WORKING


# ---- the job's log rhythm over its whole stint in Training -----------------------------------------------


def with_a_silent_phase(started: datetime, every_minutes: float, phase_from: datetime) -> list[datetime]:
    """A line every ``every_minutes`` since ``started``, none for the 40 minutes from ``phase_from`` (an
    evaluation that prints nothing) and none in the last 21 minutes."""
    lines = every(every_minutes, start=started, until=phase_from + timedelta(seconds=1))
    return lines + every(
        every_minutes, start=phase_from + timedelta(minutes=40), until=NOW - timedelta(minutes=21)
    )


class PagedLogs(Logs):
    """The job's lines read as the adapter reads them: at most ``cap`` a read (its page cap), oldest first; a
    read that holds more is cut short."""

    def __init__(self, lines: Sequence[datetime], cap: int) -> None:
        super().__init__(lines=lines)
        self.cap = cap

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        self.rhythm_calls.append((start, end))
        inside = sorted(t for t in self.lines or () if start <= t < end)
        return LogRhythm.of(start, end, inside[: self.cap], complete=len(inside) <= self.cap)


def test_a_silent_phase_hours_back_in_the_stint_still_sets_the_jobs_silence_limit() -> None:
    # Given a pinned job 8 hours in Training that logs every 5 minutes, went 40 minutes without a line 5 hours
    # ago (more than judge.max_rejudge_minutes back), and has now been silent for 21 minutes
    started = NOW - timedelta(hours=8)
    logs = Logs(lines=with_a_silent_phase(started, 5, NOW - timedelta(hours=5, minutes=40)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=20)
    # Then, silent past the 20 minutes its last 240 give, its rhythm is read back to its entry into Training:
    # 120 silent minutes (3 x 40), so no hang yet; the alarm waits for them
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    assert verdict.decision.evidence["judge"]["rhythm"]["silence_minutes"] == 120
    recent_from = NOW - timedelta(minutes=240)
    assert logs.rhythm_calls == [(recent_from, NOW), (started, recent_from)] and widened_to(verdict) == [120]


def test_a_stint_too_long_to_read_whole_joins_its_head_with_its_last_hours() -> None:
    # Given a pinned job 10 hours in Training that logs every minute, went 40 minutes without a line in its
    # second hour and has now been silent for 21 minutes; a read holds 300 lines, fewer than the stint's
    started = NOW - timedelta(hours=10)
    lines = with_a_silent_phase(started, 1, started + timedelta(minutes=60))
    logs = PagedLogs(lines, cap=300)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=20)
    # Then a whole read of its last 240 minutes is joined with the read from its entry into Training up to
    # them, cut short: the 40-minute phase still counts (120 silent minutes), the stretch between is unread
    assert logs.rhythm_calls == [(NOW - timedelta(minutes=240), NOW), (started, NOW - timedelta(minutes=240))]
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == JudgeCode.WAIT
    rhythm = verdict.decision.evidence["judge"]["rhythm"]
    assert (
        rhythm["silence_minutes"] == 120 and rhythm["unread"]["to"] == (NOW - timedelta(minutes=240)).isoformat()
    )
    # and when the last 240 minutes do not fit in a read either, the rhythm is unknown: the 30-minute window,
    # as before
    capped = PagedLogs(lines, cap=100)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), capped, j=training(started), alarm_minutes=20)
    assert verdict.decision.evidence["judge"]["rhythm"]["silence_minutes"] is None
    assert verdict.verdict is Verdict.TOO_EARLY and widened_to(verdict) == [30]


def test_the_quiet_before_the_first_line_of_a_long_stint_counts_only_from_240_minutes_back() -> None:
    # Given a pinned job 8 hours in Training whose earliest lines are gone (its log group's retention, or a long
    # silent start-up): its first line 6 hours ago, then one a minute until 21 minutes ago
    started = NOW - timedelta(hours=8)
    logs = Logs(lines=every(1, start=NOW - timedelta(hours=6), until=NOW - timedelta(minutes=21)))
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=20)
    # Then the two hours before that line are no gap of its rhythm (1 minute: a 20-minute limit), and the hang
    # is stopped at its silence limit
    assert verdict.decision.evidence["judge"]["rhythm"]["silence_minutes"] == 20
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG


def test_a_silent_start_up_early_in_a_long_stint_does_not_set_the_limit_of_its_later_hangs() -> None:
    # Given a pinned job 8 hours in Training that printed one banner line, prepared its data for 60 silent
    # minutes, then logged a line a minute until it hung 25 minutes ago
    started = NOW - timedelta(hours=8)
    lines = [
        started + timedelta(minutes=1),
        *every(1, start=started + timedelta(minutes=61), until=NOW - timedelta(minutes=25)),
    ]
    logs = Logs(lines=lines)
    # When its pinned trigger is judged
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=20)
    # Then the start-up's silence is no gap of its rhythm (a line a minute: a 20-minute limit), and the hang is
    # stopped at 25 silent minutes, not made to wait for 180
    assert verdict.decision.evidence["judge"]["rhythm"]["silence_minutes"] == 20
    assert verdict.verdict is Verdict.STOP and verdict.decision.code == IdleCode.HUNG


def test_a_job_silent_within_its_recent_limit_is_not_read_further_back() -> None:
    # Given a pinned job 8 hours in Training that logs every 5 minutes, went 40 minutes without a line 5 hours
    # ago, and has now been silent for 12 minutes (its pinned trigger fired on a 10-minute alarm)
    started = NOW - timedelta(hours=8)
    phase = NOW - timedelta(hours=5, minutes=40)
    lines = every(5, start=started, until=phase + timedelta(seconds=1))
    lines += every(5, start=phase + timedelta(minutes=40), until=NOW - timedelta(minutes=12))
    logs = Logs(lines=lines)
    verdict = review(IDLE, IdleRole.NOTIFYING, Metrics(PINNED_HOST), logs, j=training(started), alarm_minutes=10)
    # Then only its last 240 minutes are read: 12 silent minutes are under the 20 they give, and the older gaps
    # could only lengthen that limit; the alarm waits for it (and the older part is read when it is reached)
    assert logs.rhythm_calls == [(NOW - timedelta(minutes=240), NOW)]
    assert verdict.verdict is Verdict.TOO_EARLY and widened_to(verdict) == [20]
