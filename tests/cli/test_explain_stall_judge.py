"""`smgov explain ALARM --describe FILE --evidence FILE`: the stall judge's inputs and verdict, offline.

Each sample under events/stall-evidence/ is one verdict of the judge on the sample alarm notifications."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sagemaker_governance.domain.guards.idle import pinned_expression
from sagemaker_governance.domain.stall_judge import MetricRead
from smgov.cli.main import main
from smgov.stall_evidence import OfflineCheckpoints, OfflineLogActivity, OfflineMetricData, load_evidence
from tests.conftest import EVENTS

SAMPLES = EVENTS / "stall-evidence"
IDLE = ("idle-alarm-single-metric.json", "describe-bert-sst2-finetune-42.json")
HANG = ("progress-alarm-stalled.json", "describe-llama-pretrain-7b-nccl.json")


def explain(alarm: str, describe: str, evidence: str, capsys: pytest.CaptureFixture[str], *more: str) -> Any:
    args = ["explain", str(EVENTS / alarm), "--describe", str(SAMPLES / describe), "--evidence", evidence, *more]
    assert main(args) == 0
    out = capsys.readouterr().out
    return json.loads(out) if "--json" in more else out


@pytest.mark.parametrize(
    ("sample", "files", "verdict", "code", "action"),
    [
        ("idle-stop.json", IDLE, "stop", "idle.stop.idle", "stop"),
        ("idle-veto-cpu-busy.json", IDLE, "veto", "judge.veto.cpu-busy", "none"),
        ("idle-veto-logs-active.json", IDLE, "veto", "judge.veto.logs-active", "none"),
        ("idle-veto-gpu-busy.json", IDLE, "veto", "judge.veto.gpu-busy", "none"),
        ("idle-veto-metric-progress.json", IDLE, "veto", "judge.veto.metric-progress", "none"),
        ("idle-veto-checkpoint-writes.json", IDLE, "veto", "judge.veto.checkpoint-writes", "none"),
        ("idle-veto-disk-writes.json", IDLE, "veto", "judge.veto.disk-writes", "none"),
        ("idle-insufficient.json", IDLE, "insufficient-evidence", "judge.skip.insufficient-evidence", "none"),
        ("hang-stop.json", HANG, "stop", "progress.stop.stalled", "stop"),
        ("hang-veto-gpu-working.json", HANG, "veto", "judge.veto.gpu-working", "none"),
        ("hang-stop-log-rhythm.json", HANG, "stop", "progress.stop.stalled", "stop"),
        ("hang-veto-log-rhythm.json", HANG, "veto", "judge.veto.metric-progress", "none"),
    ],
)
def test_each_sample_shows_the_judges_verdict_code_and_inputs(
    sample: str, files: tuple[str, str], verdict: str, code: str, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an alarm notification, the job's description and the judge's reads of it
    alarm, describe = files
    # When explained as JSON (judged as at the alarm's StateChangeTime)
    result = explain(alarm, describe, str(SAMPLES / sample), capsys, "--json")
    # Then the one decision carries the judge's verdict, code and every signal per host
    (decision,) = result["decisions"]
    assert (decision["code"], decision["action"]) == (code, action)
    judge = decision["judge"]
    assert (judge["verdict"], judge["code"]) == (verdict, code) and judge["why"] == decision["reason"]
    signals = judge["signals"]
    assert signals["kind"] == ("idle" if files == IDLE else "hang")
    for series in signals["hosts"].values():
        assert {"GPUUtilization", "GPUMemoryUtilization", "CPUUtilization", "MemoryUtilization"} <= set(series)
    assert "train:loss" in signals["training_metrics"] and "logs" in signals
    assert result["stopped"] == []  # the default policy is audit mode: recorded, not stopped
    # and the text names the verdict and the code
    text = explain(alarm, describe, str(SAMPLES / sample), capsys)
    assert "stall judge: " in text and f"({code};" in text


@pytest.mark.parametrize(
    ("sample", "silence", "window"),
    [
        ("hang-stop.json", None, 120),
        ("hang-stop-log-rhythm.json", 20, 20),
        ("hang-veto-log-rhythm.json", 150, 150),
    ],
)
def test_a_hang_is_judged_over_the_silence_the_jobs_log_rhythm_allows(
    sample: str, silence: int | None, window: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the hung job's log lines: two only (no rhythm), every 5 minutes, or once 50 minutes apart
    result = explain(*HANG, str(SAMPLES / sample), capsys, "--json")
    signals = result["decisions"][0]["judge"]["signals"]
    # Then the judge shows the rhythm it read and judged over its limit (the guard's window without one)
    assert signals["rhythm"]["silence_minutes"] == silence
    assert signals["window"]["minutes"] == window


def test_the_checkpoint_writes_the_judge_counted_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the idle job's reads and its checkpoint listing: one object before the 30-minute window, two in it
    result = explain(*IDLE, str(SAMPLES / "idle-veto-checkpoint-writes.json"), capsys, "--json")
    saved = result["decisions"][0]["judge"]["signals"]["checkpoints"]
    # Then only the two in the window count, and the text names them
    assert saved["written"] == 2 and saved["latest_written_at"] == "2025-11-21T10:38:52+00:00"
    text = explain(*IDLE, str(SAMPLES / "idle-veto-checkpoint-writes.json"), capsys)
    assert "checkpoints: 2 object(s) written since 2025-11-21T10:10:12.345000+00:00" in text
    # and the same reads without a checkpoint listing (no CheckpointBucketPattern) confirm the stop
    stop = explain(*IDLE, str(SAMPLES / "idle-stop.json"), capsys, "--json")
    assert (
        stop["decisions"][0]["code"] == "idle.stop.idle"
        and "checkpoints" not in stop["decisions"][0]["judge"]["signals"]
    )


def test_insufficient_evidence_says_what_was_missing(capsys: pytest.CaptureFixture[str]) -> None:
    result = explain(*IDLE, str(SAMPLES / "idle-insufficient.json"), capsys, "--json")
    missing = result["decisions"][0]["judge"]["signals"]["missing"]
    assert any("CPUUtilization" in m for m in missing) and any("no log stream" in m for m in missing)


def test_a_failed_log_read_is_insufficient_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the idle-stop reads without log_streams (the log read failed)
    raw = json.loads((SAMPLES / "idle-stop.json").read_text())
    del raw["log_streams"]
    unread = tmp_path / "e.json"
    unread.write_text(json.dumps(raw))
    # Then the stop is not confirmed
    result = explain(*IDLE, str(unread), capsys, "--json")
    assert result["decisions"][0]["code"] == "judge.skip.insufficient-evidence"


def test_enforce_mode_stops_only_a_confirmed_stall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nmode: enforce\n")
    stop = explain(*IDLE, str(SAMPLES / "idle-stop.json"), capsys, "--json", "--policy", str(policy))
    assert stop["stopped"] == ["bert-sst2-finetune-42"]
    veto = explain(*IDLE, str(SAMPLES / "idle-veto-cpu-busy.json"), capsys, "--json", "--policy", str(policy))
    assert veto["stopped"] == [] and veto["alarms_reset"]


def test_without_evidence_the_result_says_the_stop_was_not_judged(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explain", str(EVENTS / IDLE[0]), "--describe", str(SAMPLES / IDLE[1]), "--json"]
    assert main([*args, "--at", "2025-11-21T10:40:30Z"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "no --evidence" in result["assumed"] and "judge" not in result["decisions"][0]


def test_evidence_needs_an_alarm_and_its_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = str(SAMPLES / "idle-stop.json")
    assert main(["explain", str(EVENTS / "training-job-training.json"), "--evidence", evidence]) == 2
    assert "alarm notification" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"metrics": [{"MetricName": "GPUUtilization", "Timestamps": [1], "Values": []}]}))
    args = ["explain", str(EVENTS / IDLE[0]), "--describe", str(SAMPLES / IDLE[1]), "--evidence", str(bad)]
    assert main(args) == 1
    assert "not the stall judge's evidence" in capsys.readouterr().err


def test_the_offline_reader_answers_per_minute_within_the_window_only() -> None:
    # Given two datapoints of a training metric in one minute, one before the window, and a host series
    at = datetime(2025, 11, 21, 10, 0, tzinfo=UTC)
    read = load_evidence(
        {
            "metrics": [
                {
                    "MetricName": "loss",
                    "Dimensions": [{"Name": "TrainingJobName", "Value": "j"}],
                    "Timestamps": ["2025-11-21T09:59:30Z", "2025-11-21T10:01:10Z", "2025-11-21T10:01:50Z"],
                    "Values": [3.0, 2.0, 1.0],
                },
                {
                    "MetricName": "CPUUtilization",
                    "Dimensions": [{"Name": "Host", "Value": "j/algo-1"}],
                    "Timestamps": [1763719260000, 1763719290000],  # 10:01:00 and 10:01:30, epoch ms
                    "Values": [10.0, 30.0],
                },
            ],
            "log_streams": ["j/algo-1-1", "other/algo-1-1"],
            "log_events": [{"logStreamName": "other/algo-1-1", "timestamp": 1763719300000, "message": "x"}],
        }
    )
    queries = [
        MetricRead("t", "loss", (("TrainingJobName", "j"),), "SampleCount"),
        MetricRead("c", "CPUUtilization", (("Host", "j/algo-1"),), "Average"),
        MetricRead("g", "GPUUtilization", (("Host", "j/algo-1"),), "Average"),
    ]
    result = OfflineMetricData(read).read(queries, at, at.replace(minute=30))
    # Then: counts per minute in the window, averages per minute, an absent series read as empty
    assert result.values == {"t": (2.0,), "c": (20.0,), "g": ()} and result.errors == ()
    assert result.times["t"] == (at.replace(minute=1),)
    # and only the job's own streams count (another job's line is not this job's)
    logs = OfflineLogActivity(read).activity("j", at, at.replace(minute=30))
    assert (logs.streams, logs.line_at) == (1, None)


def test_a_trigger_notification_shows_the_judge_waiting_for_the_window(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the idle alarm's 20-minute trigger fired on a job idle (GPU, CPUs, log) since 20 minutes, busy before
    alarm, describe = "idle-alarm-trigger.json", IDLE[1]
    result = explain(alarm, describe, str(SAMPLES / "idle-wait-trigger.json"), capsys, "--json")
    # Then no stop: the judge read the trigger's 20 minutes and widens the alarm to the 30-minute window
    (decision,) = result["decisions"]
    assert (decision["code"], decision["action"]) == ("judge.wait.window", "none")
    judge = decision["judge"]
    assert judge["verdict"] == "wait" and judge["signals"]["window"]["minutes"] == 20
    assert judge["rejudge"] == {
        "trigger_minutes": 20,
        "window_minutes": 30,
        "widened": ["sagemaker-governance-idle-bert-sst2-finetune-42"],
    }
    # and the text says so
    text = explain(alarm, describe, str(SAMPLES / "idle-wait-trigger.json"), capsys)
    assert "waits for the window (judge.wait.window;" in text and "fired on its 20-min trigger" in text


@pytest.mark.parametrize(("sample", "window"), [("hang-stop-log-rhythm.json", 20), ("hang-stop.json", 120)])
def test_a_progress_trigger_notification_is_judged_over_the_rhythm_or_the_window(
    sample: str, window: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the progress guard's 20-minute trigger fired: a job that logged every 5 minutes and has been silent
    # 27, or one with no rhythm (two lines) silent for hours
    alarm, describe = "progress-alarm-trigger.json", HANG[1]
    result = explain(alarm, describe, str(SAMPLES / sample), capsys, "--json")
    # Then the hang is stopped, judged over the job's rhythm's 20 minutes, or over the whole 120 without one
    (decision,) = result["decisions"]
    assert (decision["code"], decision["judge"]["verdict"]) == ("progress.stop.stalled", "stop")
    assert decision["judge"]["signals"]["window"]["minutes"] == window
    assert "for 20 minutes" in decision["reason"]


def test_a_stuck_host_notification_is_judged_a_hang_and_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the idle alarm of a 4-host job with no training metric fired on its stuck-host trigger: host 3's
    # GPUs idle while the other three spin at 100%, the log (every 5 minutes before) silent for 23 minutes
    alarm, describe = "idle-alarm-stuck-host.json", "describe-llm-4x-stuck-host.json"
    (expression,) = [
        q["Expression"]
        for q in json.loads(json.loads((EVENTS / alarm).read_text())["Records"][0]["Sns"]["Message"])["Trigger"][
            "Metrics"
        ]
        if q.get("ReturnData")
    ]
    # the sample carries the expression the idle guard plans (4 hosts x 8 GPUs: pinned 760, idle below 8)
    hosts = [{"Id": f"m{n}", "MetricStat": {}} for n in range(1, 5)]
    assert expression == pinned_expression(hosts, 760, 8, 1, 4)["Expression"]
    result = explain(alarm, describe, str(SAMPLES / "hang-stop-stuck-host.json"), capsys, "--json")
    # Then the judge read the trigger's 20 minutes as a hang (pinned and idle hosts, none in between) and
    # confirmed it: no metric, no line for the rhythm's limit
    (decision,) = result["decisions"]
    assert (decision["code"], decision["action"]) == ("idle.stop.hung", "stop")
    judge = decision["judge"]
    assert (judge["verdict"], judge["signals"]["kind"], judge["signals"]["trigger"]) == ("stop", "hang", "pinned")
    assert judge["signals"]["window"]["minutes"] == 20
    gpu = {
        host.rsplit("/", 1)[1]: series["GPUUtilization"]["mean"]
        for host, series in judge["signals"]["hosts"].items()
    }
    assert gpu == {"algo-1": 800, "algo-2": 800, "algo-3": 0, "algo-4": 800}
    assert "a stuck host" in decision["reason"]


def test_saved_checkpoint_objects_are_read_as_the_stopper_lists_them() -> None:
    # Given a saved listing of the prefix "hpo/trial-1" (as `aws s3api list-objects-v2 --prefix` answers it:
    # trial-10's files too), when explain reads the job's location given without a trailing /, then only its
    # folder counts, as in the stopper (adapters/checkpoints.py reads the location as its folder)
    evidence = load_evidence(
        {
            "checkpoint_objects": [
                {"Key": "hpo/trial-1/step-100.pt", "LastModified": "2026-11-21T12:10:00Z"},
                {"Key": "hpo/trial-10/step-900.pt", "LastModified": "2026-11-21T12:20:00Z"},
            ]
        }
    )
    progress = OfflineCheckpoints(evidence).progress(
        "s3://acme/hpo/trial-1", datetime(2026, 11, 21, 12, tzinfo=UTC)
    )
    assert (progress.written, progress.total) == (1, 1)
