"""The simulated account's CloudWatch Logs: FilterLogEvents honours logStreamNamePrefix, as CloudWatch Logs
does; DescribeLogStreams' lastEventTimestamp may lag, as CloudWatch Logs' may; a host whose process died
writes no more lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import boto3
from moto import mock_aws
from moto.logs.responses import LogsResponse

from sagemaker_governance.adapters.training_logs import LOG_GROUP, TrainingLogs, TrainingLogTails
from smgov.simulation.engine import Simulation
from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.logs import GROUP, LogStreams
from smgov.simulation.engine.moto_logs import DirectLogs, honoring_prefix, lagging_last_event
from smgov.simulation.harness import REGION, patched_env
from tests.builders import sim_job, sim_scenario

NOW = datetime.now(UTC).replace(second=0, microsecond=0)  # moto's Logs keeps recent events only


def test_another_jobs_busy_stream_is_not_the_stalled_jobs_log_activity() -> None:
    with (
        mock_aws(),
        mock.patch.object(LogsResponse, "filter_log_events", honoring_prefix(LogsResponse.filter_log_events)),
    ):
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=LOG_GROUP)
        # Given a busy job whose stream sorts before the stalled job's, and a silent stalled job
        for stream in ("a-busy/algo-1-1", "stalled/algo-1-1", "stalled-2/algo-1-1"):
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        for stream in ("a-busy/algo-1-1", "stalled-2/algo-1-1"):
            logs.put_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=stream,
                logEvents=[{"timestamp": int((NOW - timedelta(minutes=3)).timestamp() * 1000), "message": "step"}],
            )
        # When the judge reads the stalled job's activity over the last 30 minutes
        found = TrainingLogs(logs).activity("stalled", NOW - timedelta(minutes=30), NOW)
        # Then only its own stream counts: silent (moto alone answers with the busy job's line)
        assert found.streams == 1 and found.line_at is None
        busy = TrainingLogs(logs).activity("a-busy", NOW - timedelta(minutes=30), NOW)
        assert busy.line_stream == "a-busy/algo-1-1"
        none = logs.filter_log_events(logGroupName=LOG_GROUP, logStreamNamePrefix="nobody/")
        assert none["events"] == []


def _written(logs: Any, clock: VirtualClock, writer: Any) -> list[tuple[str, list[tuple[int, str]]]]:
    """Two hosts' lines flushed twice through ``writer``, read back by a client: (stream, [(time, text)])."""
    streams = LogStreams(clock)
    streams.cadence("job/algo-1", 1, 0)
    streams.cadence("job/algo-2", 5, 0)
    streams.write("job/algo-2", 7, ("Traceback (most recent call last):", "RuntimeError: boom"))
    for minute in (30, 61):
        clock.now = minute
        streams.flush(writer, minute)
    out = []
    for name in sorted(streams.streams):
        events = logs.get_log_events(logGroupName=GROUP, logStreamName=name, startFromHead=True)["events"]
        out.append((name, [(e["timestamp"], e["message"]) for e in events]))
    return out


def _flushed(account: str, *, direct: bool) -> tuple[list[tuple[str, list[tuple[int, str]]]], int]:
    """The lines read back from ``account``, written directly or by a client; PutLogEvents requests served."""
    served: list[None] = []
    put_log_events = LogsResponse.put_log_events

    def counted(self: LogsResponse) -> str:
        served.append(None)
        return put_log_events(self)

    with patched_env({"MOTO_ACCOUNT_ID": account}), mock.patch.object(LogsResponse, "put_log_events", counted):
        logs = boto3.client("logs", region_name=REGION)
        logs.create_log_group(logGroupName=GROUP)
        writer = DirectLogs(account, REGION) if direct else logs
        return _written(logs, VirtualClock(NOW - timedelta(hours=2)), writer), len(served)


def test_the_simulators_own_lines_go_into_motos_backend_as_a_client_would_put_them() -> None:
    with mock_aws():
        # Given the same hosts' lines, written by a client in one account and directly in another
        by_client, client_requests = _flushed("111111111111", direct=False)
        direct, direct_requests = _flushed("222222222222", direct=True)
    # Then moto holds the same events in the same streams, and the direct writes made no request
    assert direct == by_client and sum(len(events) for _, events in direct) > 60
    assert client_requests > 0 and direct_requests == 0


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_a_lagging_last_event_timestamp_is_answered_as_of_the_lag_and_absent_for_a_recent_stream() -> None:
    now = NOW.replace(tzinfo=None)
    lagging = lagging_last_event(LogsResponse.describe_log_streams, 60, lambda: now)
    with mock_aws(), mock.patch.object(LogsResponse, "describe_log_streams", lagging):
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=LOG_GROUP)
        # Given algo-1 logging until 2 hours ago and algo-2 until now, and algo-3 whose stream began 30 min ago
        lines = {
            "job/algo-1-1700000000": [NOW - timedelta(hours=3), NOW - timedelta(hours=2)],
            "job/algo-2-1700000000": [NOW - timedelta(hours=3), NOW - timedelta(minutes=90), NOW],
            "job/algo-3-1700000000": [NOW - timedelta(minutes=30)],
        }
        for stream, times in lines.items():
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
            events = [{"timestamp": _millis(t), "message": "step"} for t in times]
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)
        # When the streams are described with a lastEventTimestamp that lags by an hour
        described = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix="job/")["logStreams"]
        last = {s["logStreamName"]: s.get("lastEventTimestamp") for s in described}
        # Then each stream reports its last event an hour ago, none for the stream younger than the lag
        assert last == {
            "job/algo-1-1700000000": _millis(NOW - timedelta(hours=2)),
            "job/algo-2-1700000000": _millis(NOW - timedelta(minutes=90)),
            "job/algo-3-1700000000": None,
        }
        # and a reader that orders by it takes algo-3 last, though every event is there for GetLogEvents
        tail = TrainingLogTails(logs).tails("job", lines=10, hosts=3)
        assert [(h.host, len(h.lines)) for h in tail.hosts] == [("algo-1", 2), ("algo-2", 3), ("algo-3", 1)]


def test_a_host_whose_process_died_writes_no_more_lines_until_its_container_starts_again() -> None:
    # Given two hosts logging every minute, and algo-2's process dying at minute 10 after its last line
    streams = LogStreams(VirtualClock(NOW - timedelta(hours=2)))
    streams.start("job/algo-1", 0)
    streams.start("job/algo-2", 0)
    streams.cadence("job/algo-1", 1, 0)
    streams.cadence("job/algo-2", 1, 0)
    streams.write("job/algo-2", 10, ("NCCL WARN NET/OFI Request completed with error",))
    streams.silence("job/algo-2", 10)
    # When the hosts publish again (the cadence is set anew at minute 15)
    streams.cadence("job/algo-1", 1, 15)
    streams.cadence("job/algo-2", 1, 15)
    # Then algo-2's stream ends with its last line at minute 10, algo-1's goes on; no new stream for algo-2
    (algo_2,) = streams.of("job/algo-2")
    (algo_1,) = streams.of("job/algo-1")
    assert algo_2.last_line(30) == 10 and algo_1.last_line(30) == 29
    # and a new container (a retry, a restart) writes again
    restarted = streams.start("job/algo-2", 40)
    streams.cadence("job/algo-2", 1, 40)
    assert restarted.last_line(45) == 44


class _PutLogs:
    """What ``LogStreams.flush`` calls of CloudWatch Logs: the messages put, in order."""

    def __init__(self) -> None:
        self.put: list[str] = []

    def create_log_stream(self, **_: Any) -> None:
        pass

    def put_log_events(self, *, logEvents: list[dict[str, Any]], **_: Any) -> None:
        self.put += [event["message"] for event in logEvents]


def test_a_late_host_s_lines_are_held_from_its_process_s_death_even_long_before_the_job_failed() -> None:
    # Given algo-2's process that died at minute 100 writing its traceback, the job failing at 106 (6 minutes
    # later, beyond the last 5 minutes a late batch holds), and its lines held until 109 from its death on
    streams = LogStreams(VirtualClock(NOW - timedelta(hours=3)))
    streams.start("job/algo-2", 0)
    streams.write("job/algo-2", 100, ("Traceback (most recent call last):", "KeyError: 'label'"))
    streams.silence("job/algo-2", 100)
    streams.hold("job/algo-2", 106, 109, since=100)
    logs = _PutLogs()
    # When the lines are put at the Failed event, and after their arrival
    streams.flush(logs, 106)
    before = list(logs.put)
    streams.flush(logs, 109)
    # Then the traceback is not in CloudWatch Logs before minute 109, and is then
    assert "KeyError: 'label'" not in before
    assert "KeyError: 'label'" in logs.put


def test_a_late_host_s_traceback_is_held_from_its_real_death_when_a_stall_comes_between() -> None:
    # Given algo-2's process dying 10 training minutes before the job fails (progress 110 of 120), the other ranks
    # stalling at progress 112 for 30 minutes before training goes on, and algo-2's last lines 3 minutes late
    script = {
        "train_hours": 3,
        "fail_after_hours": 2,
        "failure_host": 2,
        "failure_host_silent_minutes": 10,
        "failure_log": ["Traceback (most recent call last):", "KeyError: 'label'"],
        "stall_after_minutes": 112,
        "stall_recovers_after_minutes": 30,
        "failure_log_late_minutes": 3,
    }
    sim = Simulation(sim_scenario(sim_job("j", instance_count=2, script=script)), governed=False)
    writes: list[tuple[str, int, tuple[str, ...]]] = []
    holds: list[dict[str, Any]] = []
    write, hold = LogStreams.write, LogStreams.hold

    def recording_write(self: LogStreams, host: str, now: int, lines: tuple[str, ...]) -> None:
        writes.append((host, now, tuple(lines)))
        write(self, host, now, lines)

    def recording_hold(self: LogStreams, host: str, now: int, arrival: int, since: int | None = None) -> None:
        holds.append({"host": host, "now": now, "arrival": arrival, "since": since})
        hold(self, host, now, arrival, since)

    sim.lifecycle.logs.write = recording_write.__get__(sim.lifecycle.logs)  # type: ignore[method-assign]
    sim.lifecycle.logs.hold = recording_hold.__get__(sim.lifecycle.logs)  # type: ignore[method-assign]
    # When the job runs to its failure
    run = sim.run().jobs["j"]
    assert run.final_status == "Failed"
    died = next(now for host, now, lines in writes if host.endswith("algo-2") and "KeyError: 'label'" in lines)
    (late,) = [h for h in holds if h["host"].endswith("algo-2")]
    # Then algo-2's lines are held from its death on (the traceback among them), as the field says
    assert late["since"] <= died, f"traceback written at minute {died}, held only from {late['since']}: {holds}"
