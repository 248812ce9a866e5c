"""`smgov audit` and `smgov report` against AWS answered locally, over log lines the real code wrote."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import AuditRecord, LogAuditSink, Outcome
from sagemaker_governance.handlers.job_events import handler
from smgov.adapters.cloudformation import StackOutputs
from smgov.adapters.logs_insights import LogsInsights
from smgov.audit_queries import unknown_fields
from smgov.cli import visibility
from smgov.cli.main import main
from smgov.simulation.harness import local_account
from tests.builders import launch_from_sample
from tests.cli.local_aws import LocalCloudFormation, LocalLogsInsights, clients

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
STACK = "sagemaker-governance"
JOB_EVENTS_GROUP = f"/aws/lambda/{STACK}-job-events"
IDLE_GROUP = f"/aws/lambda/{STACK}-idle-stopper"


@dataclass
class FakeTime:
    """A monotonic clock that only moves when the code sleeps."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


@dataclass
class Aws:
    cloudformation: LocalCloudFormation
    logs: LocalLogsInsights
    time: FakeTime
    regions: list[str | None]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    cfn_client, logs_client, cfn, logs = clients()
    time = FakeTime()
    deps = visibility.Dependencies(
        stacks=StackOutputs(cfn_client),
        insights=LogsInsights(
            logs_client, sleep=time.sleep, monotonic=time.monotonic, poll_seconds=1.0, timeout_seconds=30.0
        ),
        now=lambda: NOW,
    )
    regions: list[str | None] = []

    def make(region: str | None) -> visibility.Dependencies:
        regions.append(region)
        return deps

    monkeypatch.setattr(visibility, "make_dependencies", make)
    cfn.deploy(
        STACK,
        {
            "JobEventsLogGroupName": JOB_EVENTS_GROUP,
            "IdleStopperLogGroupName": IDLE_GROUP,
            "NotificationsTopicArn": "arn:aws:sns:us-east-1:123456789012:topic",
            "PolicyParameterName": "/sagemaker-governance/policy",
        },
    )
    logs.create_log_group(JOB_EVENTS_GROUP)
    logs.create_log_group(IDLE_GROUP)
    yield Aws(cfn, logs, time, regions)


def record(**overrides: Any) -> AuditRecord:
    base: dict[str, Any] = {
        "at": NOW,
        "trigger": "alarm",
        "event_id": None,
        "job_name": "llm-pretrain",
        "job_arn": None,
        "job_status": "InProgress",
        "team": "nlp",
        "owner": "carol",
        "rule": "idle-gpu",
        "action": "stop",
        "mode": "enforce",
        "outcome": Outcome.DONE,
        "reason": "GPU idle for 30 minutes",
    }
    return AuditRecord.model_validate({**base, **overrides})


def write(aws: Aws, log_output: io.StringIO, group: str, at: datetime, *records: AuditRecord) -> None:
    """Records through the real sink; its lines (log records and EMF blobs) land in the log group as
    Lambda would ship them."""
    start = log_output.tell()
    emf = io.StringIO()
    with contextlib.redirect_stdout(emf):
        for rec in records:
            LogAuditSink().write(rec)
    aws.logs.put_lines(group, at, log_output.getvalue()[start:] + emf.getvalue())


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # forget what setting the scene printed
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- smgov audit --------------------------------------------------------------------------------


def test_audit_shows_what_the_real_service_decided(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the real job-events function governed two jobs (one compliant, one untagged)
    with local_account(
        lambda: NOW - timedelta(hours=2), {"GOVERNANCE_MODE": "enforce", "REQUIRED_TAGS": "team,cost-center"}
    ) as account:
        for sample in ("training-job-starting.json", "training-job-starting-untagged.json"):
            account.invoke(handler, launch_from_sample(account, sample))
    shipped = log_output.getvalue() + capsys.readouterr().out  # log records and EMF blobs
    aws.logs.put_lines(JOB_EVENTS_GROUP, NOW - timedelta(hours=2), shipped)

    # When a platform engineer asks what governance did this week
    code, out, _ = run(capsys, "audit")

    # Then the stop of the untagged job is listed with its reason, and the no-op decision is not
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "time",
        "(UTC)",
        "job",
        "team",
        "rule",
        "code",
        "action",
        "mode",
        "outcome",
        "reason",
    ]
    (row,) = lines[2:]
    assert "untagged-experiment-7" in row and "required-tags" in row and " stop " in row and " done " in row
    assert " compliance.stop.violation " in row
    assert row.endswith("missing or empty tag(s): cost-center, team")
    # the query went to every log group the stack exports, over the last 7 days
    (query,) = aws.logs.queries.values()
    assert sorted(query["logGroupNames"]) == sorted([JOB_EVENTS_GROUP, IDLE_GROUP])
    assert query["endTime"] == int(NOW.timestamp())
    assert query["startTime"] == int((NOW - timedelta(days=7)).timestamp())
    assert unknown_fields(query["queryString"]) == set()
    assert aws.time.sleeps == [1.0]  # polled once while Running, never really slept


def test_audit_json_filters_by_rule_and_job(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        aws,
        log_output,
        IDLE_GROUP,
        NOW - timedelta(hours=3),
        record(job_name="llm-pretrain"),
        record(job_name="vision-resnet", team="vision"),
        record(job_name="llm-pretrain", rule="max-runtime", action="notify", reason="runtime too long"),
        record(job_name="llm-pretrain", rule="event-router", action="none", outcome=Outcome.NO_ACTION),
    )

    code, out, _ = run(capsys, "audit", "--rule", "idle-gpu", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {r["job_name"] for r in rows} == {"llm-pretrain", "vision-resnet"}
    assert set(rows[0]) == {"timestamp", "job_name", "team", "rule", "code", "action", "mode", "outcome", "reason"}
    assert rows[0]["timestamp"] == "2026-11-21 09:00:00.000"

    code, out, _ = run(capsys, "audit", "--job", "llm-pretrain", "--json", "--since", "12h")
    assert code == 0
    # a named job shows its whole story, "no action" decisions included
    assert sorted(r["rule"] for r in json.loads(out)) == ["event-router", "idle-gpu", "max-runtime"]
    assert aws.logs.queries["q-0002"]["startTime"] == int((NOW - timedelta(hours=12)).timestamp())


def test_audit_filters_by_code_and_shows_records_of_schema_1_without_one(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        aws,
        log_output,
        IDLE_GROUP,
        NOW - timedelta(hours=3),
        record(job_name="llm-pretrain", code="idle.stop.idle"),
        record(job_name="vision-resnet", team="vision", code="progress.stop.stalled"),
        record(job_name="old-job", schema="smgov.audit/1"),  # logged before the upgrade: no code
    )
    code, out, _ = run(capsys, "audit", "--code", "idle.stop.idle", "--json")
    assert code == 0 and [(r["job_name"], r["code"]) for r in json.loads(out)] == [
        ("llm-pretrain", "idle.stop.idle")
    ]
    code, out, _ = run(capsys, "audit")
    (old,) = [line for line in out.splitlines() if "old-job" in line]
    assert old.split()[5] == "-"  # the code column of a smgov.audit/1 record
    code, _, err = run(capsys, "audit", "--code", "Idle Stop")
    assert code == 2 and "not a decision code" in err


def test_audit_only_looks_back_as_far_as_asked(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    write(aws, log_output, JOB_EVENTS_GROUP, NOW - timedelta(days=3), record(job_name="old-job"))
    write(aws, log_output, JOB_EVENTS_GROUP, NOW - timedelta(minutes=10), record(job_name="new-job"))
    code, out, _ = run(capsys, "audit", "--since", "30m", "--json")
    assert code == 0 and [r["job_name"] for r in json.loads(out)] == ["new-job"]


def test_audit_with_nothing_to_show(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "audit", "--since", "12h")
    assert code == 0 and "no governance decisions in the last 12h" in out


@pytest.mark.parametrize("since", ["7x", "0d", "-1d", "d", "1.5h", "4000d", ""])
def test_a_bad_duration_is_a_usage_error(since: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["audit", f"--since={since}"])
    assert exited.value.code == 2
    assert "duration" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value"), [("--rule", 'x" or audit.rule != "'), ("--job", "a b"), ("--rule", "UPPER")]
)
def test_values_that_could_change_the_query_are_refused(
    aws: Aws, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    code, _, err = run(capsys, "audit", option, value)
    assert code == 2 and "not a" in err
    assert aws.logs.queries == {}


def test_a_missing_stack_is_explained(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "audit", "--stack", "nope")
    assert code == 1 and "stack 'nope' not found" in err


def test_a_stack_without_log_group_outputs_is_explained(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    aws.cloudformation.deploy("other", {"BucketName": "b"})
    code, _, err = run(capsys, "audit", "--stack", "other")
    assert code == 1 and "no *LogGroupName outputs" in err


def test_a_query_that_runs_too_long_is_stopped(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    aws.logs.running_polls = 10_000
    code, _, err = run(capsys, "audit")
    assert code == 1 and "still Running after 30s" in err
    assert aws.logs.operations()[-1] == "StopQuery"
    assert sum(aws.time.sleeps) == 30.0  # the cap, measured on the injected clock


def test_a_failed_query_is_reported(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    aws.logs.final_status = "Failed"
    code, _, err = run(capsys, "audit")
    assert code == 1 and "ended Failed" in err


def test_the_region_option_reaches_the_clients(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "audit", "--region", "eu-west-1")
    assert aws.regions == ["eu-west-1"]


# ---- smgov report -------------------------------------------------------------------------------


def fleet(aws: Aws, log_output: io.StringIO) -> None:
    at = NOW - timedelta(days=2)
    write(
        aws,
        log_output,
        JOB_EVENTS_GROUP,
        at,
        record(job_name="nlp-a", rule="required-tags", action="none", outcome=Outcome.NO_ACTION),
        record(job_name="nlp-b", rule="required-tags", action="none", outcome=Outcome.NO_ACTION),
        record(job_name="vision-a", team="vision", rule="required-tags", action="none", outcome=Outcome.NO_ACTION),
        record(job_name="untagged-1", team=None, rule="required-tags", action="stop", schema="smgov.audit/1"),
        record(
            job_name="vision-b",
            team="vision",
            rule="auto-resume",
            action="clone",
            evidence={"clone_name": "vision-b-r1", "root_job": "vision-b", "attempt": 1, "on_demand": False},
        ),
    )
    write(
        aws,
        log_output,
        IDLE_GROUP,
        at,
        record(job_name="nlp-a", code="idle.stop.idle", evidence={"estimated_savings_usd": 16_948.0}),
        record(job_name="nlp-a", code="idle.stop.idle", outcome=Outcome.ALREADY_DONE),  # not a second stop
        record(
            job_name="nlp-b",
            code="idle.stop.idle",
            mode="audit",
            outcome=Outcome.AUDIT_ONLY,
            evidence={"estimated_savings_usd": 512.5},
        ),
    )


def test_report_per_team(aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]) -> None:
    fleet(aws, log_output)
    code, out, _ = run(capsys, "report", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["since"] == "30d"
    teams = {t["team"]: t for t in report["teams"]}
    assert teams["nlp"] == {
        "team": "nlp",
        "governed": 2,
        "stopped": 1,
        "resumed": 0,
        "saved_usd": 16_948.0,
        "would_stop": 1,
        "would_save_usd": 512.5,
    }
    assert (teams["vision"]["governed"], teams["vision"]["resumed"], teams["vision"]["stopped"]) == (2, 1, 0)
    assert (teams["(no team tag)"]["governed"], teams["(no team tag)"]["stopped"]) == (1, 1)
    assert report["teams"][0]["team"] == "nlp"  # biggest savings first
    assert report["stops_by_code"] == [
        {"code": "(no code: smgov.audit/1)", "outcome": "done", "jobs": 1, "saved_usd": 0.0},
        {"code": "idle.stop.idle", "outcome": "audit-only", "jobs": 1, "saved_usd": 512.5},
        {"code": "idle.stop.idle", "outcome": "done", "jobs": 1, "saved_usd": 16_948.0},
    ]
    assert len(aws.logs.queries) == 3
    for query in aws.logs.queries.values():
        assert query["startTime"] == int((NOW - timedelta(days=30)).timestamp())
        assert unknown_fields(query["queryString"]) == set()


def test_report_counts_a_stop_recorded_twice_once(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stop recorded twice (a late copy of a delivery runs again and writes its audit records a
    # second time: README "Retries, throttling and idempotency"), the second with the estimate of its time
    stop = {"job_name": "nlp-a", "code": "idle.stop.idle"}
    write(
        aws,
        log_output,
        IDLE_GROUP,
        NOW - timedelta(hours=2),
        record(**stop, evidence={"estimated_savings_usd": 90.0}),
    )
    write(
        aws,
        log_output,
        IDLE_GROUP,
        NOW - timedelta(hours=1),
        record(**stop, evidence={"estimated_savings_usd": 80.0}),
    )
    code, out, _ = run(capsys, "report", "--json")
    assert code == 0
    report = json.loads(out)
    (nlp,) = report["teams"]
    assert (nlp["stopped"], nlp["saved_usd"]) == (1, 90.0)  # one stop, its first estimate; not 170
    assert [(c["jobs"], c["saved_usd"]) for c in report["stops_by_code"]] == [(1, 90.0)]


def test_report_table(aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]) -> None:
    fleet(aws, log_output)
    code, out, _ = run(capsys, "report", "--since", "7d")
    assert code == 0
    assert "last 7d" in out
    header, _, first, *_ = out.splitlines()[1:]
    assert header.split()[:4] == ["team", "governed", "stopped", "resumed"]
    assert first.split()[:5] == ["nlp", "2", "1", "0", "16,948.00"]
    assert "Estimated savings: $16,948.00" in out
    assert any(line.split()[:4] == ["idle.stop.idle", "done", "1", "16,948.00"] for line in out.splitlines())


def test_report_over_an_empty_period(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "report")
    assert code == 0 and "no governance decisions in the last 30d" in out


# ---- smgov report --by: chargeback ----------------------------------------------------------------


def efficiency(job: str, team: str | None, **figures: Any) -> AuditRecord:
    return record(
        job_name=job,
        team=team,
        job_status="Completed",
        trigger="job-state-change",
        rule="efficiency-record",
        code="efficiency.record.measured",
        action="none",
        outcome=Outcome.NO_ACTION,
        evidence=figures,
    )


def test_chargeback_per_team_from_the_audit_records(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two nlp jobs and a vision CPU job that ended, one nlp job stopped by the idle guard
    at = NOW - timedelta(hours=2)
    write(
        aws,
        log_output,
        JOB_EVENTS_GROUP,
        at,
        efficiency("nlp-a", "nlp", cost_usd=100.0, idle_cost_usd=40.0, idle_gpu_hours=8.0,
                   gpu_utilization_mean_percent=50.0, instance_type="ml.g5.12xlarge", project="llm"),
        efficiency("nlp-b", "nlp", cost_usd=300.0, idle_cost_usd=0.0, idle_gpu_hours=0.0,
                   gpu_utilization_mean_percent=90.0, instance_type="ml.p4d.24xlarge", project="llm"),
        efficiency("vision-cpu", "vision", cost_usd=5.0, instance_type="ml.m5.xlarge"),
    )  # fmt: skip
    write(aws, log_output, IDLE_GROUP, at, record(job_name="nlp-a", code="idle.stop.idle",
                                                 evidence={"estimated_savings_usd": 250.0}))  # fmt: skip
    # When the chargeback is asked per team, as CSV
    code, out, _ = run(capsys, "report", "--by", "team", "--format", "csv")
    # Then spend, idle cost and savings add up per team; a job without utilization is counted, not filled in
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split(",")[:4] == ["team", "spend_usd", "idle_cost_usd", "saved_usd"]
    rows = {line.split(",")[0]: line.split(",") for line in lines[1:]}
    assert rows["nlp"][1:6] == ["400.0", "40.0", "250.0", "8.0", "80.0"]  # GPU %: spend-weighted
    assert rows["vision"][1:4] == ["5.0", "0.0", "0.0"] and rows["vision"][5] == ""
    assert rows["vision"][7] == "1"  # jobs without metrics
    for query in aws.logs.queries.values():
        assert unknown_fields(query["queryString"]) == set()
    # and per project / instance type from the same records
    code, out, _ = run(capsys, "report", "--by", "instance-type", "--json")
    groups = {g["key"]: g for g in json.loads(out)["groups"]}
    assert groups["ml.p4d.24xlarge"]["spend_usd"] == 300.0 and groups["ml.g5.12xlarge"]["saved_usd"] == 250.0


def ended_jobs(aws: Aws, log_output: io.StringIO, count: int) -> None:
    """``count`` efficiency records of $10 nlp jobs: the line the service's sink writes for one, repeated
    with each job's name (writing each through the sink is slow)."""
    start = log_output.tell()
    with contextlib.redirect_stdout(io.StringIO()):
        LogAuditSink().write(efficiency("job-0", "nlp", cost_usd=10.0, gpu_utilization_mean_percent=60.0))
    line = next(json.loads(raw) for raw in log_output.getvalue()[start:].splitlines() if '"audit"' in raw)
    at = NOW - timedelta(hours=2)
    for n in range(count):
        aws.logs.put(JOB_EVENTS_GROUP, at, {**line, "audit": {**line["audit"], "job_name": f"job-{n}"}})


def test_chargeback_counts_every_job_beyond_one_page_of_results(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given 12,000 ended jobs in the window: more rows than one GetQueryResults page (10,000)
    ended_jobs(aws, log_output, 12_000)
    # When the chargeback is asked per team
    code, out, _ = run(capsys, "report", "--by", "team", "--json")
    # Then every job counts: the query asked for the most rows the API allows and read every page
    assert code == 0
    (nlp,) = json.loads(out)["groups"]
    assert (nlp["jobs"], nlp["spend_usd"]) == (12_000, 120_000.0)
    starts = [params for name, params in aws.logs.calls if name == "StartQuery"]
    assert {params["limit"] for params in starts} == {100_000}  # botocore's logs model: StartQuery.limit max
    assert any(params.get("nextToken") for name, params in aws.logs.calls if name == "GetQueryResults")


def test_chargeback_fails_rather_than_leave_out_jobs_beyond_what_one_query_returns(
    aws: Aws, log_output: io.StringIO, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given more ended jobs than one query returns (its cap lowered to 1,000 to keep the test small)
    ended_jobs(aws, log_output, 1_500)
    deps = visibility.make_dependencies(None)
    monkeypatch.setattr(deps.insights, "_max_rows", 1_000)
    # When the chargeback is asked
    code, out, err = run(capsys, "report", "--by", "team", "--since", "30d")
    # Then it fails, saying why and what to do, instead of printing totals without 500 jobs
    assert code == 1 and out == ""
    assert "1,000 rows" in err and "shorter --since than 30d" in err


def test_chargeback_from_a_simulation_report(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    report = {
        "jobs": [
            {"name": "a", "team": "nlp", "owner": "carol", "project": None, "instance_type": "ml.g5.2xlarge",
             "cost_usd": 20.0, "saved_usd": 100.0,
             "efficiency": {"code": "efficiency.record.measured", "cost_usd": 10.0, "idle_cost_usd": 5.0,
                            "idle_gpu_hours": 3.0, "gpu_utilization_mean_percent": 40.0}},
            {"name": "b", "team": None, "owner": None, "project": None, "instance_type": "ml.m5.xlarge",
             "cost_usd": 1.0, "saved_usd": 0.0, "efficiency": None},
        ]
    }  # fmt: skip
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(report))
    code, out, _ = run(capsys, "report", "--from-simulation", str(path), "--by", "owner", "--format", "json")
    assert code == 0
    groups = {g["key"]: g for g in json.loads(out)["groups"]}
    # the record's idle share (5 of 10) applied to the simulated spend (20)
    assert (groups["carol"]["spend_usd"], groups["carol"]["idle_cost_usd"], groups["carol"]["saved_usd"]) == (
        20.0,
        10.0,
        100.0,
    )
    assert groups["(none)"]["jobs_without_metrics"] == 1
    code, out, _ = run(capsys, "report", "--from-simulation", str(tmp_path / "missing.json"))
    assert code == 2
