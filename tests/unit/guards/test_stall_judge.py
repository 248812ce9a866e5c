"""The stall judge over evidence (pure): stop only when every signal agrees; missing data never stops."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from sagemaker_governance.domain.stall_judge import (
    CPU,
    GPU,
    GPU_MEMORY,
    MAX_HOSTS_RECORDED,
    MEMORY,
    CheckpointWrites,
    DiskWrites,
    Evidence,
    HostEvidence,
    JudgeCode,
    JudgePolicy,
    LogEvidence,
    LogRhythm,
    StallKind,
    gpus_idle,
    judge,
    quiet_minutes,
    rejudge_minutes,
    window_start,
)

END = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
START = END - timedelta(minutes=30)
POLICY = JudgePolicy()
THRESHOLD = 8.0  # 1 % per GPU x 8 GPUs


def host(
    n: int = 1,
    *,
    gpu: float = 0.0,
    cpu: float = 5.0,
    minutes: int = 30,
    series: dict[str, tuple[float, ...] | None] | None = None,
) -> HostEvidence:
    values: dict[str, tuple[float, ...] | None] = {
        GPU: (gpu,) * minutes,
        GPU_MEMORY: (40.0,) * minutes,
        CPU: (cpu,) * minutes,
        MEMORY: (30.0,) * minutes,
    }
    values.update(series or {})
    return HostEvidence(host=f"job-1/algo-{n}", series=values)


def evidence(*hosts: HostEvidence, logs: LogEvidence | None = None, **kw: object) -> Evidence:
    return Evidence(
        start=START,
        end=END,
        hosts=hosts or (host(),),
        gpu_hosts=len(hosts or (1,)),
        logs=logs if logs is not None else LogEvidence(streams=2),
        **kw,
    )


def test_idle_is_confirmed_when_gpus_cpus_logs_and_metrics_are_all_quiet() -> None:
    # Given GPUs at 0, CPUs at 0.05 busy vCPUs, no log line, no metric datapoint for 30 minutes
    found = judge(StallKind.IDLE, evidence(metrics={"loss": 0}), POLICY, gpu_threshold=THRESHOLD)
    # Then the stop is confirmed, with the evidence
    assert found.confirmed and found.code is None
    assert found.evidence["hosts"]["job-1/algo-1"]["busy_vcpus"] == 0.05
    assert found.evidence["logs"]["streams"] == 2


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"cpu": 150.0}, JudgeCode.CPU_BUSY),  # a CPU phase: 1.5 busy vCPUs (download, tokenization, eval)
        (
            {"logs": LogEvidence(streams=1, line_at=END - timedelta(minutes=3), line_stream="job-1/algo-1-1")},
            JudgeCode.LOGS_ACTIVE,
        ),
        ({"metrics": {"eval_loss": 1}}, JudgeCode.METRIC_PROGRESS),
        ({"gpu": 80.0}, JudgeCode.GPU_BUSY),
    ],
)
def test_any_sign_of_life_vetoes_an_idle_stop(change: dict[str, object], code: JudgeCode) -> None:
    hosts = (host(1), host(2, gpu=float(change.get("gpu", 0.0)), cpu=float(change.get("cpu", 5.0))))  # type: ignore[arg-type]
    found = judge(
        StallKind.IDLE,
        Evidence(
            start=START,
            end=END,
            hosts=hosts,
            gpu_hosts=2,
            logs=change.get("logs", LogEvidence(streams=2)),
            metrics=change.get("metrics", {}),
        ),
        POLICY,
        gpu_threshold=THRESHOLD,
    )
    assert not found.confirmed and found.code is code


def test_a_hang_at_busy_gpus_is_confirmed_when_metrics_and_logs_are_silent() -> None:
    # Given GPUs pinned at 100 % and CPUs spinning (a deadlocked collective), no metric, no log line
    found = judge(
        StallKind.HANG, evidence(host(gpu=800.0, cpu=400.0), metrics={"loss": 0}), POLICY, gpu_threshold=None
    )
    assert found.confirmed


def test_a_hang_is_vetoed_by_any_metric_the_job_defines_or_a_log_line() -> None:
    by_metric = judge(StallKind.HANG, evidence(metrics={"loss": 0, "eval_acc": 2}), POLICY, gpu_threshold=None)
    assert by_metric.code is JudgeCode.METRIC_PROGRESS
    line = LogEvidence(streams=1, line_at=START + timedelta(minutes=1), line_stream="job-1/algo-1-1")
    assert judge(StallKind.HANG, evidence(logs=line), POLICY, gpu_threshold=None).code is JudgeCode.LOGS_ACTIVE


@pytest.mark.parametrize(
    ("kind", "build", "what"),
    [
        (
            StallKind.IDLE,
            lambda: evidence(missing=("GetMetricData failed (Throttling) for 4 series",)),
            "Throttling",
        ),
        (
            StallKind.HANG,
            lambda: evidence(logs=None, missing=("logs unreadable (AccessDeniedException)",)),
            "Access",
        ),
        (StallKind.HANG, lambda: evidence(logs=LogEvidence(streams=0)), "no log stream"),
        (StallKind.HANG, lambda: evidence(logs=LogEvidence(streams=3, truncated=True)), "log search"),
        (StallKind.IDLE, lambda: evidence(host(cpu=0.0, minutes=3)), "CPUUtilization of job-1/algo-1: 3 of 30"),
        (StallKind.IDLE, lambda: evidence(host(series={CPU: None})), "GetMetricData"),
    ],
)
def test_missing_or_bad_evidence_never_stops_and_says_what_was_missing(kind, build, what) -> None:  # type: ignore[no-untyped-def]
    ev = build()
    if ev.hosts[0].values(CPU) is None:  # an unread series comes with the read's error
        ev = ev.model_copy(update={"missing": ("GetMetricData failed (InternalError) for 4 series",)})
    found = judge(kind, ev, POLICY, gpu_threshold=THRESHOLD)
    assert not found.confirmed and found.code is JudgeCode.INSUFFICIENT
    assert any(what in m for m in found.evidence["missing"])


def test_a_host_without_gpus_may_lack_gpu_data_in_a_heterogeneous_cluster() -> None:
    cpu_host = host(2, series={GPU: (), GPU_MEMORY: ()})
    ev = Evidence(start=START, end=END, hosts=(host(1), cpu_host), gpu_hosts=1, logs=LogEvidence(streams=2))
    assert judge(StallKind.IDLE, ev, POLICY, gpu_threshold=THRESHOLD).confirmed
    homogeneous = ev.model_copy(update={"gpu_hosts": 2})
    assert judge(StallKind.IDLE, homogeneous, POLICY, gpu_threshold=THRESHOLD).code is JudgeCode.INSUFFICIENT


def test_memory_series_are_recorded_never_decisive() -> None:
    busy_memory = host(series={GPU_MEMORY: (95.0,) * 30, MEMORY: (90.0,) * 30})
    found = judge(StallKind.IDLE, evidence(busy_memory), POLICY, gpu_threshold=THRESHOLD)
    assert found.confirmed
    assert found.evidence["hosts"]["job-1/algo-1"][GPU_MEMORY] == {"datapoints": 30, "mean": 95.0, "max": 95.0}


def test_the_window_never_starts_before_training() -> None:
    started = END - timedelta(minutes=10)
    assert window_start(END, timedelta(minutes=30), started) == started
    assert window_start(END, timedelta(minutes=30), None) == START


def test_cpus_are_judged_per_vcpu_when_the_host_size_is_known() -> None:
    # Given a 96-vCPU host: a stalled process leaves 3% per vCPU (2.9 busy vCPUs), a CPU phase 20%
    stalled = host(cpu=288.0).model_copy(update={"vcpus": 96})
    working = host(cpu=1920.0).model_copy(update={"vcpus": 96})
    assert judge(StallKind.IDLE, evidence(stalled), POLICY, gpu_threshold=THRESHOLD).confirmed
    busy = judge(StallKind.IDLE, evidence(working), POLICY, gpu_threshold=THRESHOLD)
    assert busy.code is JudgeCode.CPU_BUSY
    assert busy.evidence["hosts"]["job-1/algo-1"]["cpu_percent_per_vcpu"] == 20.0


def test_vcpus_follow_the_instance_size() -> None:
    from sagemaker_governance.domain.instances import vcpus

    sizes = {
        "ml.g5.xlarge": 4,
        "ml.g5.12xlarge": 48,
        "ml.p4d.24xlarge": 96,
        "ml.p5.48xlarge": 192,
        "ml.m5.large": 2,
    }
    assert {t: vcpus(t) for t in sizes} == sizes
    assert vcpus("ml.t3.medium") is None and vcpus("nonsense") is None


# ---- re-judging after a veto: the window grows with the quiet stretch ---------------------------------


def test_the_quiet_stretch_runs_from_the_last_active_minute_or_from_what_was_read() -> None:
    since = END - timedelta(hours=4)
    busy = (END - timedelta(minutes=50), END - timedelta(minutes=41))
    # Given the GPUs of one host last busy in the minute from 41 minutes ago, another never
    assert quiet_minutes(END, since, [busy, ()]) == 40
    # Nothing active in what was read: quiet since its start (4 hours, or since Training began)
    assert quiet_minutes(END, since, [(), ()]) == 240


def test_a_vetoed_alarm_is_widened_to_a_multiple_of_the_quiet_stretch_between_the_window_and_the_cap() -> None:
    policy = JudgePolicy(rejudge_factor=2, max_rejudge_minutes=240)
    assert rejudge_minutes(30, 31, policy) == 62  # a 45-minute CPU phase vetoed at 31: judged again at 62
    assert rejudge_minutes(30, 10, policy) == 30  # never below the guard's window
    assert rejudge_minutes(30, 200, policy) == 240  # never above the cap
    assert rejudge_minutes(30, 240, policy) is None  # at the cap: left in ALARM, no reset every minute


def test_a_hang_is_not_confirmed_while_the_gpus_work_between_idle_and_pinned() -> None:
    def gpu_host(n: int, per_gpu: float) -> HostEvidence:
        return host(n, gpu=per_gpu * 8, cpu=2400.0).model_copy(update={"gpus": (8, 8)})

    # Given a job that logs its loss once per long epoch: 88% per GPU, nothing published, logs silent
    computing = judge(StallKind.HANG, evidence(gpu_host(1, 88)), POLICY, gpu_threshold=None)
    assert not computing.confirmed and computing.code is JudgeCode.GPU_WORKING
    assert "88% per GPU" in computing.reason
    # A hung collective pins the GPUs (and a stuck rank leaves its own idle): confirmed
    pinned = judge(StallKind.HANG, evidence(gpu_host(1, 100), gpu_host(2, 0)), POLICY, gpu_threshold=None)
    assert pinned.confirmed
    # Unknown GPU count: no claim either way (the other signals decide)
    unknown = judge(StallKind.HANG, evidence(host(1, gpu=704.0)), POLICY, gpu_threshold=None)
    assert unknown.confirmed


def test_a_hang_claim_at_idle_gpus_is_vetoed_by_busy_cpus_but_not_at_pinned_ones() -> None:
    def gpu_host(n: int, per_gpu: float, cpu: float) -> HostEvidence:
        return host(n, gpu=per_gpu * 8, cpu=cpu).model_copy(update={"gpus": (8, 8), "vcpus": 96})

    # Given no metric and a silent log for the window, the GPUs idle on both hosts and 24 of 96 vCPUs busy
    # (tokenization, an evaluation on CPU that prints nothing): a CPU phase, not a hang
    phase = judge(
        StallKind.HANG, evidence(gpu_host(1, 0, 2400.0), gpu_host(2, 1, 2400.0)), POLICY, gpu_threshold=None
    )
    assert not phase.confirmed and phase.code is JudgeCode.CPU_BUSY and "idle" in phase.reason
    # The same silence with the CPUs idle too (a stuck data loader): a hang
    stuck = judge(
        StallKind.HANG, evidence(gpu_host(1, 0, 200.0), gpu_host(2, 0, 200.0)), POLICY, gpu_threshold=None
    )
    assert stuck.confirmed
    # Pinned GPUs with busy CPUs (a collective spinning both): still a hang
    spinning = judge(StallKind.HANG, evidence(gpu_host(1, 100, 9600.0)), POLICY, gpu_threshold=None)
    assert spinning.confirmed


def test_a_hang_is_never_confirmed_on_gpus_or_cpus_the_judge_could_not_see() -> None:
    def gpu_host(n: int, per_gpu: float, cpu: float = 200.0, minutes: int = 30) -> HostEvidence:
        series: dict[str, tuple[float, ...] | None] = {GPU: (per_gpu * 8,) * minutes}
        return host(n, cpu=cpu, series=series).model_copy(update={"gpus": (8, 8), "vcpus": 96})

    # Given a silent job (no metric, no log line) whose second host published no GPUUtilization in the window
    # (its agent stopped, or the metric is late): the host may be computing at 60% per GPU
    unseen = judge(
        StallKind.HANG, evidence(gpu_host(1, 100), gpu_host(2, 0, minutes=0)), POLICY, gpu_threshold=None
    )
    # Then the hang is not confirmed, and the record names the missing series
    assert not unseen.confirmed and unseen.code is JudgeCode.INSUFFICIENT
    assert "GPUUtilization of job-1/algo-2: 0 of 30 minutes" in unseen.evidence["missing"]
    # Given too few GPU datapoints on the only host (10 of 30 minutes, below min_coverage): the same
    sparse = judge(StallKind.HANG, evidence(gpu_host(1, 100, minutes=10)), POLICY, gpu_threshold=None)
    assert sparse.code is JudgeCode.INSUFFICIENT
    # Given every GPU idle and one host's CPUs unread: busy CPUs would be a CPU phase, so they are required
    idle_cpus_unseen = evidence(
        gpu_host(1, 0), gpu_host(2, 0).model_copy(update={"series": {GPU: (0.0,) * 30, CPU: ()}})
    )
    found = judge(StallKind.HANG, idle_cpus_unseen, POLICY, gpu_threshold=None)
    assert found.code is JudgeCode.INSUFFICIENT
    assert "CPUUtilization of job-1/algo-2: 0 of 30 minutes" in found.evidence["missing"]
    # while at pinned GPUs the CPUs decide nothing (a spinning collective): an unread CPU series blocks no stop
    pinned = evidence(
        gpu_host(1, 100), gpu_host(2, 100).model_copy(update={"series": {GPU: (800.0,) * 30, CPU: ()}})
    )
    assert judge(StallKind.HANG, pinned, POLICY, gpu_threshold=None).confirmed


def test_a_cpu_only_jobs_hang_is_still_confirmed_on_its_silence() -> None:
    # Given a job without GPUs (no host publishes GPUUtilization) whose metric and log are silent
    cpu_host = host(1, cpu=150.0, series={GPU: (), GPU_MEMORY: ()}).model_copy(update={"vcpus": 4})
    ev = Evidence(start=START, end=END, hosts=(cpu_host,), gpu_hosts=0, logs=LogEvidence(streams=1))
    # Then the hang is confirmed as before: its missing GPU series is no gap, its CPUs decide nothing
    assert judge(StallKind.HANG, ev, POLICY, gpu_threshold=None).confirmed


def test_a_mixed_clusters_host_is_pinned_or_idle_only_under_every_gpu_count_it_may_have() -> None:
    # Given a cluster of 8-GPU and 1-GPU hosts: SageMaker does not say which host is which, and each host's
    # GPUUtilization is the sum over its GPUs
    def mixed(n: int, reported: float) -> HostEvidence:
        return host(n, gpu=reported, cpu=200.0).model_copy(update={"gpus": (1, 8), "vcpus": 4})

    # When a silent job's hosts report 400 (more than one GPU can: 8 GPUs at 50%) and 100 (one GPU pinned, or
    # eight at 12.5%)
    half = judge(StallKind.HANG, evidence(mixed(1, 400.0), mixed(2, 100.0)), POLICY, gpu_threshold=None)
    # Then neither is read as pinned: both are working, a veto
    assert not half.confirmed and half.code is JudgeCode.GPU_WORKING
    assert "job-1/algo-1" in half.reason and "job-1/algo-2" in half.reason
    # A host above 800 x 95% is pinned under every count it may have, one below 5% idle under every count:
    # the stuck host is still confirmed
    stuck = judge(StallKind.HANG, evidence(mixed(1, 790.0), mixed(2, 0.0)), POLICY, gpu_threshold=None)
    assert stuck.confirmed
    # The 1-GPU host at 30% is not idle (it may have one GPU), so the GPUs are not idle on every host
    assert not gpus_idle(evidence(mixed(1, 0.0), mixed(2, 30.0)), POLICY)
    assert gpus_idle(evidence(mixed(1, 0.0), mixed(2, 2.0)), POLICY)


def test_the_jobs_gpu_groups_tell_which_hosts_are_small_once_the_large_ones_have_shown_themselves() -> None:
    # Given a silent job on two 8-GPU hosts and four 1-GPU hosts (which host is which, SageMaker does not say)
    groups = ((8, 2), (1, 4))

    def mixed(n: int, reported: float) -> HostEvidence:
        return host(n, gpu=reported, cpu=200.0).model_copy(update={"gpus": (1, 8), "vcpus": 4})

    spinning = [mixed(1, 790.0), mixed(2, 790.0), *(mixed(n, 99.0) for n in range(3, 7))]
    # When every host spins in a collective: the two 8-GPU hosts show 790 (only 8 GPUs can), the others 99
    hang = judge(StallKind.HANG, evidence(*spinning, gpu_groups=groups), POLICY, gpu_threshold=None)
    # Then the two groups' room for 8-GPU hosts is taken, the other four have 1 GPU each and are pinned: confirmed
    assert hang.confirmed
    # Without the groups each host at 99 may be eight GPUs at 12%: working, a veto (no stop on a guess)
    unsized = judge(StallKind.HANG, evidence(*spinning), POLICY, gpu_threshold=None)
    assert not unsized.confirmed and unsized.code is JudgeCode.GPU_WORKING
    # Healthy load stays a veto: the 8-GPU hosts at 50% per GPU work, whatever the 1-GPU hosts show
    healthy = [mixed(1, 400.0), mixed(2, 400.0), *(mixed(n, 99.0) for n in range(3, 7))]
    found = judge(StallKind.HANG, evidence(*healthy, gpu_groups=groups), POLICY, gpu_threshold=None)
    assert not found.confirmed and found.code is JudgeCode.GPU_WORKING
    # And groups that what was read contradicts (three hosts above 100 where the groups hold two 8-GPU hosts)
    # narrow nothing: the hosts at 99 stay ambiguous, a veto
    odd = [mixed(1, 790.0), mixed(2, 790.0), mixed(3, 790.0), *(mixed(n, 99.0) for n in range(4, 7))]
    contradicted = judge(StallKind.HANG, evidence(*odd, gpu_groups=groups), POLICY, gpu_threshold=None)
    assert not contradicted.confirmed and contradicted.code is JudgeCode.GPU_WORKING


def test_the_working_range_must_be_a_range() -> None:
    with pytest.raises(ValueError, match="gpu_working_percent"):
        JudgePolicy(gpu_working_percent=(95, 5))


# ---- the job's log rhythm -------------------------------------------------------------------------------


def at(minute: float) -> datetime:
    return START + timedelta(minutes=minute)


def test_the_longest_gap_counts_the_quiet_start_but_not_the_current_silence() -> None:
    # Lines at minutes 6, 8, 10, 12 of a read from minute 0 to 60: the start's 6 minutes are a healthy gap
    # (it ended), the 48 minutes since the last line are the silence being judged, not a gap
    rhythm = LogRhythm.of(START, at(60), [at(12), at(6), at(8), at(10), at(61)], complete=True)
    assert rhythm.lines == 4 and rhythm.longest_gap_seconds == 6 * 60 and rhythm.last_line_at == at(12)
    assert rhythm.silence_minutes(JudgePolicy()) == 20  # 3 x 6 = 18, at least 20
    assert rhythm.silence_minutes(JudgePolicy(min_silence_minutes=10)) == 18


def test_the_silence_limit_is_capped_and_unknown_without_enough_lines_or_a_complete_read() -> None:
    sparse = LogRhythm.of(START, at(600), [at(0), at(100), at(200), at(300)], complete=True)
    assert sparse.silence_minutes(JudgePolicy()) == 240  # 3 x 100, at most max_rejudge_minutes
    few = LogRhythm.of(START, at(60), [at(1), at(2), at(3)], complete=True)
    cut = LogRhythm.of(START, at(60), [at(m) for m in range(50)], complete=False)
    assert few.silence_minutes(JudgePolicy()) is None and cut.silence_minutes(JudgePolicy()) is None


def test_the_rhythms_lines_answer_for_log_activity_in_a_shorter_window() -> None:
    rhythm = LogRhythm.of(START, at(60), [at(m) for m in range(0, 40, 5)], complete=True)
    assert rhythm.activity(at(30), streams=2) == LogEvidence(streams=2, line_at=at(30))
    assert rhythm.activity(at(36), streams=2) == LogEvidence(streams=2, line_at=None)


def test_a_large_clusters_record_keeps_the_busiest_hosts_in_full_and_sums_up_the_rest() -> None:
    # Given 100 idle hosts, host 77 the least idle (GPU 6 of 8, CPU busier)
    hosts = [host(n, gpu=6.0 if n == 77 else 0.0, cpu=50.0 if n == 77 else 5.0) for n in range(1, 101)]
    found = judge(StallKind.IDLE, evidence(*hosts), POLICY, gpu_threshold=THRESHOLD)
    # Then the record holds 64 hosts, the closest to a veto first among them, and what the other 36 had
    recorded = found.evidence
    assert found.confirmed and len(recorded["hosts"]) == MAX_HOSTS_RECORDED == 64
    assert next(iter(recorded["hosts"])) == "job-1/algo-77"
    omitted = recorded["hosts_omitted"]
    assert omitted["count"] == 36
    assert omitted["signals"][GPU] == {"lowest_mean": 0.0, "highest_mean": 0.0, "max": 0.0}
    # and a record of any size stays far below the 256 KB of a PutEvents entry
    assert len(json.dumps(recorded)) < 32_000


def test_a_cluster_within_the_limit_is_recorded_host_by_host() -> None:
    found = judge(StallKind.IDLE, evidence(*(host(n) for n in range(1, 65))), POLICY, gpu_threshold=THRESHOLD)
    assert len(found.evidence["hosts"]) == 64 and "hosts_omitted" not in found.evidence


def test_what_the_job_wrote_vetoes_a_stall_every_other_signal_agreed_on() -> None:
    # Given every other signal quiet, and then what the stopper read last: its checkpoint location, its disk
    since = END - timedelta(minutes=30)
    shard = CheckpointWrites(
        location="s3://b/job-1/", since=since, written=3, latest_at=END - timedelta(minutes=2)
    )
    saving = judge(StallKind.IDLE, evidence(checkpoints=shard), POLICY, gpu_threshold=THRESHOLD)
    assert saving.code == JudgeCode.CHECKPOINT_WRITES and not saving.confirmed
    assert saving.evidence["checkpoints"]["written"] == 3
    filling = DiskWrites(since=since, hosts={"job-1/algo-1": (20.0, 20.4, 20.9), "job-1/algo-2": (20.0, 20.0)})
    writing = judge(StallKind.HANG, evidence(disk=filling), POLICY, gpu_threshold=THRESHOLD)
    assert writing.code == JudgeCode.DISK_WRITES and "job-1/algo-1 (0.9 points)" in writing.reason
    assert writing.evidence["disk"]["largest_changes"] == {"job-1/algo-1": 0.9, "job-1/algo-2": 0.0}


def test_writes_that_say_nothing_never_veto_and_never_block_a_stop() -> None:
    since = END - timedelta(minutes=30)
    quiet = [
        CheckpointWrites(location="s3://b/job-1/", since=since),  # listed, nothing new
        CheckpointWrites(location="s3://b/job-1/", since=since, unread="ListObjectsV2 failed (AccessDenied)"),
    ]
    disks = [
        DiskWrites(since=since, hosts={"job-1/algo-1": (20.0, 20.3)}),  # under 0.5 points
        DiskWrites(since=since, hosts={"job-1/algo-1": (35.0,)}),  # one datapoint: no move to measure
        DiskWrites(since=since, unread="GetMetricData failed (Throttling)"),
    ]
    for checkpoints in quiet:
        for disk in disks:
            found = judge(
                StallKind.IDLE, evidence(checkpoints=checkpoints, disk=disk), POLICY, gpu_threshold=THRESHOLD
            )
            assert found.confirmed, (checkpoints, disk)
    # and the confirmed reason names what was ruled out when it was read
    found = judge(StallKind.IDLE, evidence(checkpoints=quiet[0], disk=disks[0]), POLICY, gpu_threshold=THRESHOLD)
    assert "no host's disk moved by 0.5 points" in found.reason and "nothing new in its checkpoint" in found.reason
