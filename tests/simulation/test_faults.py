"""Fault injection: every fault really happens, the invariants hold under them, and each invariant is
shown to catch the failure it is about when the protection is taken away (so none is vacuous)."""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from smgov.cli.simulate import check_failed
from smgov.simulation.deploy import DeployedFunction
from smgov.simulation.engine import RunResult, Simulation
from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.logs import LogStreams
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.faults import (
    DEFAULT_RATES,
    FAULTS,
    LATE_LOG_MAX_DELAY_MINUTES,
    LATE_LOG_TAIL_MINUTES,
    SPARSE_SECTIONS,
    FaultInjector,
    FaultSpec,
    LaggingReads,
    LateLogs,
)
from smgov.simulation.report import invariants, simulate
from smgov.simulation.scenario import Scenario, builtin_scenario
from tests.builders import sim_job, sim_scenario
from tests.simulation.capabilities import granted, require_auto_resume, require_idle_guard


def fleet(size: int | None = None) -> Scenario:
    scenario = builtin_scenario("fleet")
    if size is None:
        return scenario
    assert scenario.fleet is not None
    return scenario.model_copy(update={"fleet": scenario.fleet.model_copy(update={"size": size})})


def run(scenario: Scenario, template: dict[str, Any], spec: str | None, seed: int = 0) -> RunResult:
    return Simulation(scenario, seed=seed, template=template, faults=FaultSpec.parse(spec) if spec else None).run()


def known_gaps(result: RunResult) -> set[str]:
    """The jobs whose scenario marks today's decision as a known gap (their outcome is reported apart,
    as ``smgov simulate --check`` does): the invariants hold for every other job."""
    return {spec.name for spec in result.scenario.expand(result.seed) if spec.expect.known_gap is not None}


def scheduled_functions(template: dict[str, Any]) -> set[str]:
    return {
        name
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::Serverless::Function"
        and any(e.get("Type") in ("Schedule", "ScheduleV2") for e in res["Properties"].get("Events", {}).values())
    }


def require_reconciler(template: dict[str, Any]) -> None:
    repairers = [
        f
        for f in scheduled_functions(template)
        if {"cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"} <= granted(template, f)
    ]
    if not repairers:
        pytest.skip(
            "no scheduled function may create and delete alarms: no reconciler deployed, so a dropped "
            "event cannot be repaired (branch issue-6-reconciler)"
        )


def without_schedules(template: dict[str, Any]) -> dict[str, Any]:
    """The template with every scheduled function (the reconciler) undeployed."""
    out = copy.deepcopy(template)
    for name in scheduled_functions(out):
        out["Resources"].pop(name)
    return out


def without_failure_destinations(template: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(template)
    for res in out["Resources"].values():
        if res["Type"] == "AWS::Serverless::Function":
            res["Properties"].get("EventInvokeConfig", {}).pop("DestinationConfig", None)
            res["Properties"].pop("DeadLetterQueue", None)
        elif res["Type"] == "AWS::SQS::Queue":  # a queue between a source and a function: no redrive
            res["Properties"].pop("RedrivePolicy", None)
    return out


# ---- the fault specification ------------------------------------------------------------------------


def test_fault_spec_takes_bare_names_rates_and_all() -> None:
    assert FaultSpec.parse("duplicate,drop=0.05").rates == {"duplicate": DEFAULT_RATES["duplicate"], "drop": 0.05}
    assert set(FaultSpec.parse("all").rates) == set(FAULTS)
    assert FaultSpec.parse("all,crash=0").rate("crash") == 0.0
    assert not FaultSpec.parse("crash=0").enabled


@pytest.mark.parametrize(
    ("text", "message"),
    [("explode", "unknown fault 'explode'"), ("drop=1.5", "not between 0 and 1"), ("drop=x", "not a number")],
)
def test_fault_spec_rejects_nonsense_with_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultSpec.parse(text)


# ---- every fault happens ------------------------------------------------------------------------------


@pytest.mark.heavy(15)
def test_every_fault_is_injected_and_counted(template: dict[str, Any]) -> None:
    # Given a small fleet with every fault at a high rate
    result = run(fleet(25), template, "all=0.3", seed=3)
    # Then each fault struck, and the report says how often
    assert set(result.faults["injected"]) == set(FAULTS)
    assert all(n > 0 for n in result.faults["injected"].values()), result.faults
    # crashes are real function failures that Lambda's retry ran again: each fails its invocation, every record
    # of its batch with it (one error per record): no fewer errors than crashes, and no fewer crashes than the
    # (minute, function) pairs those errors came from
    crashed = [e for e in result.errors if "InjectedCrash" in (e.error or "")]
    crashes = result.faults["injected"]["crash"]
    assert len({(e.minute, e.function) for e in crashed}) <= crashes <= len(crashed)
    # and no fault is silent: every delivery ended processed or dead-lettered
    d = result.deliveries
    assert d["delivered"] == d["processed"] + d["dead_lettered"] + d["lost"]


def test_throttling_goes_through_botocore_retries_without_wall_clock_sleeps(template: dict[str, Any]) -> None:
    # Given a third of every AWS request answered with a throttling error
    sim = Simulation(
        builtin_scenario("holiday-weekend"), template=template, faults=FaultSpec.parse("throttle=0.3")
    )
    result = sim.run()
    # Then requests were throttled, botocore backed off (virtually) and retried, and nothing failed
    assert result.faults["injected"]["throttle"] > 0
    assert result.throttling["retry_sleeps"] > 0 and result.throttling["backoff_seconds"] > 0
    assert result.errors == []
    counts, _ = invariants(result)
    assert counts == dict.fromkeys(counts, 0)
    # and the outcome is the fault-free one: the stall is stopped
    assert result.jobs["llm-pretrain-holiday"].stopped_by_service_at is not None


def test_a_fault_run_is_reproducible(template: dict[str, Any]) -> None:
    first = run(builtin_scenario("spot-storm"), template, "duplicate,reorder,crash,lag", seed=4)
    again = run(builtin_scenario("spot-storm"), template, "duplicate,reorder,crash,lag", seed=4)
    assert first.faults == again.faults
    assert [(r.job_name, r.action, r.outcome) for r in first.audit] == [
        (r.job_name, r.action, r.outcome) for r in again.audit
    ]


def lagging_double(rate: float, seed: int = 0) -> tuple[VirtualClock, FakeSageMaker, FaultInjector]:
    """The SageMaker double with the lag fault at ``rate``, a job ``j`` in Training since minute 0."""
    clock = VirtualClock(builtin_scenario("untagged").start)
    fake = FakeSageMaker(clock)
    injector = FaultInjector(FaultSpec(rates={"lag": rate}), seed)
    fake.lag = LaggingReads(injector, lambda: clock.now, clock.at)
    fake.launch({"TrainingJobName": "j", "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1}})
    fake.transition("j", "InProgress", "Training")
    clock.now = 1
    return clock, fake, injector


def describe(fake: FakeSageMaker, name: str) -> dict[str, Any]:
    return fake._op_DescribeTrainingJob({"TrainingJobName": name})


def test_a_lagging_describe_answers_the_previous_state_until_the_transitions_minute_is_over() -> None:
    # Given a job in Training whose every transition lags, read up to date once the minute moved on
    clock, fake, injector = lagging_double(1.0)
    before = describe(fake, "j")
    assert before["SecondaryStatus"] == "Training"
    # When it fails at minute 30
    clock.now = 30
    fake.transition("j", "Failed", "Failed", failure_reason="InternalServerError: boom")
    # Then every read in that minute answers the job as it stood before (status, transitions, no end time,
    # no failure reason), each one counted, while the double's own state is the new one
    lagging = [describe(fake, "j") for _ in range(2)]
    assert lagging == [before, before]
    assert injector.injected["lag"] == 2
    assert fake.jobs["j"]["TrainingJobStatus"] == "Failed"
    # and from the next minute (the service's quick retry comes 60 s later) the current state, uncounted
    clock.now = 31
    after = describe(fake, "j")
    assert (after["TrainingJobStatus"], after["SecondaryStatus"]) == ("Failed", "Failed")
    assert "TrainingEndTime" in after and after["SecondaryStatusTransitions"][-1]["Status"] == "Failed"
    assert injector.injected["lag"] == 2


def test_lags_strike_transitions_at_the_faults_rate_reproducibly_by_seed() -> None:
    # Given the lag fault at its default rate, the same job moving between two states many times
    def lagged(seed: int) -> list[bool]:
        clock, fake, _ = lagging_double(DEFAULT_RATES["lag"], seed)
        out = []
        for minute in range(2, 202):
            clock.now = minute
            fake.transition("j", "InProgress", "Training" if minute % 2 else "Interrupted")
            out.append(describe(fake, "j")["SecondaryStatus"] != fake.jobs["j"]["SecondaryStatus"])
        return out

    # Then about that share of the transitions is read lagging in their minute, the same ones for a seed
    first = lagged(seed=7)
    assert first == lagged(seed=7) != lagged(seed=8)
    assert 0.1 < sum(first) / len(first) < 0.3


def test_a_failed_job_whose_first_re_read_lags_is_resumed_once_by_the_retry(template: dict[str, Any]) -> None:
    # Given a 40-hour job that fails after 26 hours, and DescribeTrainingJob lagging every transition
    require_auto_resume(template)
    result = run(builtin_scenario("hardware-failure"), template, "lag=1")
    failed = result.jobs["resnet-long-run"]
    clones = [j for j in result.jobs.values() if j.source == failed.name]
    assert failed.final_status == "Failed" and result.faults["injected"]["lag"] > 0
    # Then the Failed event's first delivery met the lagging read and failed (DescriptionBehind)
    behind = [e for e in result.errors if "DescriptionBehind" in (e.error or "")]
    assert [(e.minute, e.function) for e in behind if failed.name in (e.error or "")] == [
        (failed.ended_at, "JobEventsFunction")
    ]
    # and its retry a minute later read the job Failed and resumed it, once
    assert [(c.created, c.final_status) for c in clones] == [((failed.ended_at or 0) + 1, "Completed")]
    counts, names = invariants(result)
    assert counts == dict.fromkeys(counts, 0), names
    d = result.deliveries
    assert d["delivered"] == d["processed"] and d["redelivered"] == len(result.errors)


def test_every_failure_class_is_decided_as_without_lag_when_every_re_read_lags(template: dict[str, Any]) -> None:
    # Given the failure classes (resumed, not resumed, each for its reason) with DescribeTrainingJob lagging
    # every transition: each Failed event's first read still answers the job running
    require_auto_resume(template)
    report = simulate(builtin_scenario("failure-classes"), template=template, faults=FaultSpec.parse("lag=1"))
    assert report["faults"]["injected"]["lag"] > 0
    # Then every job ends as its scenario expects (a decision spent on the lagging read, e.g. "not failed",
    # would leave a resumable job unresumed: unexpected), and --check passes
    assert not check_failed(report, faulty=True), [(j["name"], j["unexpected"]) for j in report["jobs"]]


# ---- the invariants hold under faults -------------------------------------------------------------------


@pytest.mark.heavy(30)
@pytest.mark.parametrize("seed", [1, 2])
def test_invariants_hold_on_a_fleet_under_every_fault_but_drop(template: dict[str, Any], seed: int) -> None:
    # Given a fleet with duplicated, reordered, throttled and crashing deliveries, lagging re-reads and sparse
    # events (drop needs the reconciler)
    require_idle_guard(template)
    result = run(fleet(100), template, "duplicate,reorder,throttle,crash,lag,sparse", seed=seed)
    assert all(n > 0 for n in result.faults["injected"].values()), result.faults
    # Then every invariant is 0
    counts, names = invariants(result, known_gaps(result))
    assert counts == dict.fromkeys(counts, 0), names


@pytest.mark.heavy(80)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_invariants_hold_on_the_fleet_under_every_fault(template: dict[str, Any], seed: int) -> None:
    # Given the full fleet with every fault enabled, dropped events included
    require_idle_guard(template)
    require_reconciler(template)
    result = run(fleet(), template, "all", seed=seed)
    assert all(n > 0 for n in result.faults["injected"].values()), result.faults
    # Then after the settle period every invariant is 0
    counts, names = invariants(result, known_gaps(result))
    assert counts == dict.fromkeys(counts, 0), names


# ---- and they are not vacuous ------------------------------------------------------------------------------


def test_without_a_reconciler_dropped_events_leave_missing_and_orphan_alarms(template: dict[str, Any]) -> None:
    # Given no scheduled function and EventBridge losing a third of the state changes
    require_idle_guard(template)
    result = run(fleet(40), without_schedules(template), "drop=0.3", seed=1)
    assert result.faults["injected"]["drop"] > 0
    # Then jobs ran in Training unwatched (lost Training events) and alarms outlived their job (lost ends)
    counts, names = invariants(result, known_gaps(result))
    assert counts["missing_alarms"] > 0, names
    assert counts["orphan_alarms"] > 0, names
    # and dropped events are the platform's loss, not lost by the service
    assert counts["lost_events"] == 0


def test_failed_events_without_a_failure_destination_are_lost(template: dict[str, Any]) -> None:
    # Given every invocation crashing, with and without the on-failure destination
    scenario = builtin_scenario("untagged")
    kept = run(scenario, template, "crash=1")
    lost = run(scenario, without_failure_destinations(template), "crash=1")
    # Then with the destination every failed event is dead-lettered; without it, each one is lost (a
    # scheduled reconciler run that records nothing does not reach the crash point and succeeds)
    assert kept.deliveries["dead_lettered"] > 0 and invariants(kept)[0]["lost_events"] == 0
    failed = lost.deliveries["delivered"] - lost.deliveries["processed"]
    assert lost.deliveries["dead_lettered"] == 0
    assert invariants(lost)[0]["lost_events"] == failed > 0


def test_a_second_clone_of_the_same_source_is_a_duplicate_clone(template: dict[str, Any]) -> None:
    # Given a run in which the service resumed a failed job once
    result = run(builtin_scenario("hardware-failure"), template, None)
    clones = [j for j in result.jobs.values() if j.source]
    if not clones:
        pytest.skip("no auto-resume deployed")
    assert invariants(result)[0]["duplicate_clones"] == 0
    # When a second clone of the same source had been created
    extra = copy.copy(clones[0])
    extra.name = clones[0].name + "-again"
    result.jobs[extra.name] = extra
    # Then the invariant counts it
    assert invariants(result)[0]["duplicate_clones"] == 1


def test_smgov_simulate_faults_reports_faults_and_invariants(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from smgov.cli.main import main

    code = main(
        ["simulate", "--scenario", "holiday-weekend", "--faults", "duplicate=1,crash", "--json", "--check"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["faults"]["rates"] == {"duplicate": 1.0, "crash": DEFAULT_RATES["crash"]}
    assert report["faults"]["injected"]["duplicate"] > 0
    assert report["invariants"] == dict.fromkeys(
        ["orphan_alarms", "missing_alarms", "duplicate_clones", "missed_stops", "false_stops", "lost_events"], 0
    )
    assert report["deliveries"]["delivered"] == report["deliveries"]["processed"]
    assert main(["simulate", "--scenario", "holiday-weekend", "--faults", "flood"]) == 2


def job_events_queue(template: dict[str, Any]) -> dict[str, Any]:
    return next(
        res["Properties"]
        for res in template["Resources"].values()
        if res["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in res["Properties"]
    )


def receive_minutes(result: RunResult, function: str) -> list[list[int]]:
    """The minutes each queued record of ``function`` was received at and failed, one list per record."""
    records: dict[str | None, list[int]] = {}
    for error in (e for e in result.errors if e.function == function):
        records.setdefault(error.record, []).append(error.minute)
    assert None not in records  # a queue-fed function's failures are its records'
    return list(records.values())


def test_a_queued_record_that_failed_by_raising_is_received_again_a_minute_then_five_then_the_queues_timeout(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the job-events queue as the template declares it, and every job event failing by raising (an
    # AdapterError: the function answers, releases its claim and shortens the record's visibility)
    from sagemaker_governance.domain.errors import AdapterError
    from sagemaker_governance.domain.redelivery import retry_visibility
    from sagemaker_governance.service.job_events import JobEventsService

    def failing(*_: Any, **__: Any) -> Any:
        raise AdapterError("injected: DescribeTrainingJob failed")

    monkeypatch.setattr(JobEventsService, "handle", failing)
    queue = job_events_queue(template)
    every = queue["VisibilityTimeout"] // 60
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    result = run(builtin_scenario("untagged"), template, None)
    # Then each record's receives are 1 minute, then 5 apart (the function shortened their visibility), then
    # one visibility timeout apart (no change after the second receive), maxReceiveCount of them
    gaps = [1, 5] + [every] * (receives - 3)
    assert gaps == [
        math.ceil((retry_visibility(k) or queue["VisibilityTimeout"]) / 60) for k in range(1, receives)
    ]
    records = receive_minutes(result, "JobEventsFunction")
    assert records and all([b - a for a, b in itertools.pairwise(minutes)] == gaps for minutes in records), records
    # and every record ends in the dead-letter queue (none is received at once again, none is lost)
    assert result.deliveries["redelivered"] == len(records) * (receives - 1)
    assert len(records) <= result.deliveries["dead_lettered"]
    # (two visibility changes per record: after its first and second receives)
    assert result.aws_calls["sqs:ChangeMessageVisibilityBatch"] == 2 * len(records)


def test_a_queued_record_whose_invocation_died_is_received_again_after_the_queues_timeout(
    template: dict[str, Any],
) -> None:
    # Given every invocation dying after acting (crash=1: a timeout, out of memory): nothing of the function
    # runs after it, no release of its claim, no visibility change, no answer
    queue = job_events_queue(template)
    every = queue["VisibilityTimeout"] // 60
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    result = run(builtin_scenario("untagged"), template, "crash=1")
    # Then Lambda returns each record (its whole batch) to the queue, received again after the queue's
    # visibility timeout every time, maxReceiveCount times, then dead-lettered
    records = receive_minutes(result, "JobEventsFunction")
    assert records and all(
        [b - a for a, b in itertools.pairwise(minutes)] == [every] * (receives - 1) for minutes in records
    ), records
    assert all("InjectedCrash" in (e.error or "") for e in result.errors if e.function == "JobEventsFunction")
    assert result.deliveries["redelivered"] == len(records) * (receives - 1)
    assert len(records) <= result.deliveries["dead_lettered"]
    # and the dead function changed no visibility
    assert result.aws_calls["sqs:ChangeMessageVisibilityBatch"] == 0
    # and each receive after the first took the dead attempt's claim over (its hold long over) and acted
    # again: the untagged jobs' stops are found done
    assert all(r.outcome.value in ("done", "already-done") for r in result.audit if r.action == "stop")


def test_a_storm_move_whose_deciding_interruption_was_dropped_is_out_of_reach_not_unexpected(
    template: dict[str, Any],
) -> None:
    # Given spot-storm-pending under every fault, seed 36: EventBridge drops storm-early-c's Interrupted event
    # (minute 76), the third interruption of ml.p4d.24xlarge in the hour, so the opted-in job's Pending event
    # (minute 78) finds two: no storm, and the job stays on Spot and bills
    report = simulate(
        builtin_scenario("spot-storm-pending"), seed=36, template=template, faults=FaultSpec.parse("all")
    )
    interruption = {
        "minute": 76,
        "job": "storm-early-c",
        "status": "InProgress",
        "secondary_status": "Interrupted",
    }
    assert interruption in report["faults"]["dropped"]
    job = next(j for j in report["jobs"] if j["name"] == "new-spot-opted-in")
    # Then the report says what happened and why, and --check passes: the move was out of reach
    assert job["out_of_reach"]["dropped"] == [interruption]
    assert "not resumed" in job["out_of_reach"]["differences"]
    assert job["unexpected"] == [] and job["final_status"] == "Completed"
    assert report["totals"]["out_of_reach"] == 1
    assert not check_failed(report, faulty=True)


def test_each_owner_is_told_once_per_stretch_below_the_minimum_under_every_fault(template: dict[str, Any]) -> None:
    # Retries after a crash come back after the alarm queue's 30-minute visibility timeout, reordered
    # deliveries overtake newer ones, and a reset composite fires once per child that returns: each would
    # reset an alarm already notified, or tell the owner again, unless the stopper checks the alarm's state
    # (before that check the 12-host job's owner was told four times, another job's never)
    report = simulate(builtin_scenario("efficiency-nudges"), template=template, faults=FaultSpec.parse("all"))
    assert not check_failed(report, faulty=True), [(j["name"], j["unexpected"]) for j in report["jobs"]]


# ---- sparse events ------------------------------------------------------------------------------------------


def state_change(fake: FakeSageMaker, name: str) -> dict[str, Any]:
    return fake.event(name, event_id="e-1")


def test_a_sparse_event_leaves_out_sections_aws_does_not_promise_and_only_those() -> None:
    # Given a job whose event carries every such section, and every state-change event sparse
    clock = VirtualClock(builtin_scenario("untagged").start)
    fake = FakeSageMaker(clock)
    fake.launch(
        {
            "TrainingJobName": "j",
            "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "AlgorithmSpecification": {"TrainingImage": "image", "TrainingInputMode": "File"},
            "Tags": [{"Key": "team", "Value": "nlp"}],
        }
    )
    full = state_change(fake, "j")
    injector = FaultInjector(FaultSpec(rates={"sparse": 1.0}), seed=4)
    # When a hundred events are made sparse
    sparse = [injector.sparse(state_change(fake, "j")) for _ in range(100)]
    # Then each left out at least one of those sections (absent, null or, for the tags, an empty map) and kept
    # everything else as SageMaker sent it, the full event untouched
    for event in sparse:
        changed = {k for k in full["detail"] if event["detail"].get(k, "absent") != full["detail"][k]}
        assert changed and changed <= set(SPARSE_SECTIONS)
        assert all(event["detail"].get(k) in (None, {}) for k in changed)
        assert {k: v for k, v in event.items() if k != "detail"} == {
            k: v for k, v in full.items() if k != "detail"
        }
    assert state_change(fake, "j") == full
    shapes = {("absent" if k not in e["detail"] else repr(e["detail"][k])) for e in sparse for k in ("Tags",)}
    assert shapes == {"absent", "None", "{}", "{'team': 'nlp'}"}
    assert injector.injected["sparse"] == 100
    # and at rate 0 the event is the same object, nothing counted
    quiet = FaultInjector(FaultSpec(rates={"sparse": 0.0}), seed=4)
    assert quiet.sparse(full) is full and quiet.injected["sparse"] == 0


def test_under_sparse_events_every_job_of_a_spot_storm_ends_as_with_full_ones(template: dict[str, Any]) -> None:
    # Given a Spot storm where one team moves its new Spot jobs On-Demand and another does not, and every
    # state-change event leaving out sections (the team's tags among them), each job read again while
    # DescribeTrainingJob lags its transitions
    require_auto_resume(template)
    report = simulate(
        builtin_scenario("spot-storm-pending"), template=template, faults=FaultSpec.parse("sparse=1,lag=1")
    )
    assert report["faults"]["injected"]["sparse"] > 0
    # Then every job ends as the scenario expects with full events: the other team's new job stays on Spot
    assert not check_failed(report, faulty=True), [(j["name"], j["unexpected"]) for j in report["jobs"]]


# ---- late log lines -----------------------------------------------------------------------------------------


class RecordingLogs:
    """Stands in for CloudWatch Logs behind ``LogStreams.flush``: the minute of each line put, per stream."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.lines: dict[str, list[tuple[int, str]]] = {}

    def create_log_stream(self, *, logGroupName: str, logStreamName: str) -> None:
        self.lines.setdefault(logStreamName, [])

    def put_log_events(self, *, logGroupName: str, logStreamName: str, logEvents: list[dict[str, Any]]) -> None:
        epoch = self.clock.at(0).timestamp()
        self.lines[logStreamName] += [
            (round((e["timestamp"] / 1000 - epoch) / 60), e["message"]) for e in logEvents
        ]


def test_a_failed_jobs_last_lines_reach_cloudwatch_logs_minutes_after_its_failed_event() -> None:
    # Given a host that logs every minute from minute 0 and fails at minute 60, writing its traceback then, with
    # every failure's lines late
    clock = VirtualClock(builtin_scenario("failure-classes").start)
    injector = FaultInjector(FaultSpec.parse("late-logs=1"), seed=2)
    logs = LogStreams(clock)
    logs.late = LateLogs(injector)
    stream = logs.start("j/algo-1", 0)
    logs.cadence("j/algo-1", 1, 0)
    logs.write("j/algo-1", 60, ("Traceback (most recent call last):", "EFA error: transport lost"))
    logs.stop("j/algo-1", 60)
    logs.failed(["j/algo-1"], 60)
    cloudwatch = RecordingLogs(clock)
    # When the service reads the stream at the Failed event (minute 60)
    logs.flush(cloudwatch, 60)
    # Then it holds the lines up to LATE_LOG_TAIL_MINUTES before the failure, not the last ones nor the traceback
    at_failure = list(cloudwatch.lines[stream.name])
    assert [m for m, _ in at_failure] == list(range(60 - LATE_LOG_TAIL_MINUTES))
    assert injector.injected["late-logs"] == 1 and injector.late_lines == 0
    # and still not at any minute before they arrive, then all of them, in order, counted as late
    arrived = next(
        minute
        for minute in range(61, 61 + LATE_LOG_MAX_DELAY_MINUTES)
        if logs.flush(cloudwatch, minute) and cloudwatch.lines[stream.name] != at_failure
    )
    assert 60 < arrived <= 60 + LATE_LOG_MAX_DELAY_MINUTES
    late = cloudwatch.lines[stream.name][len(at_failure) :]
    assert [m for m, _ in late] == [*range(60 - LATE_LOG_TAIL_MINUTES, 60), 60, 60]
    assert late[-1][1] == "EFA error: transport lost"
    assert injector.late_lines == LATE_LOG_TAIL_MINUTES + 2
    assert injector.report()["late_lines"] == LATE_LOG_TAIL_MINUTES + 2
    # and without the fault the same read at the Failed event holds every line, the traceback included
    on_time = LogStreams(clock)
    on_time.start("j/algo-1", 0)
    on_time.cadence("j/algo-1", 1, 0)
    on_time.write("j/algo-1", 60, ("Traceback (most recent call last):", "EFA error: transport lost"))
    on_time.stop("j/algo-1", 60)
    on_time.failed(["j/algo-1"], 60)
    plain = RecordingLogs(clock)
    on_time.flush(plain, 60)
    assert len(next(iter(plain.lines.values()))) == 60 + 2


def test_under_late_logs_every_failed_job_of_the_failure_classes_is_struck(template: dict[str, Any]) -> None:
    # Given the failure classes with every failure's last lines late
    require_auto_resume(template)
    result = run(builtin_scenario("failure-classes"), template, "late-logs=1")
    # Then each job (clones included) that ended Failed was struck once, and lines reached the log group late
    failed = [job for job in result.jobs.values() if job.final_status == "Failed"]
    assert failed and result.faults["injected"]["late-logs"] == len(failed)
    assert result.faults["late_lines"] > 0
    # and no invariant broke
    counts, _ = invariants(result)
    assert counts == dict.fromkeys(counts, 0)


# ---- SQS batches --------------------------------------------------------------------------------------------


def mapping_batch_size(template: dict[str, Any], function: str) -> int:
    return next(
        int(res["Properties"]["BatchSize"])
        for res in template["Resources"].values()
        if res["Type"] == "AWS::Lambda::EventSourceMapping"
        and res["Properties"]["FunctionName"] == {"Ref": function}
    )


def received_batches(sim: Simulation, function: str) -> list[list[tuple[str, str]]]:
    """The (job, secondary status) of the records of each batch ``function`` is invoked with, batch by batch:
    a batch's records are all wrapped (``on_invocation``) before its invocation, which ends the batch."""
    batches: list[list[tuple[str, str]]] = []
    state: dict[str, list[tuple[str, str]] | None] = {"open": None}

    @contextmanager
    def record(deployed: DeployedFunction, body: Any, trigger: str) -> Iterator[None]:
        if deployed.logical_id != function:
            yield
            return
        batch = state["open"]
        if batch is None:
            batch = state["open"] = []
            batches.append(batch)
        detail = json.loads(body)["detail"] if isinstance(body, str) else body["detail"]
        batch.append((detail["TrainingJobName"], detail["SecondaryStatus"]))
        yield
        state["open"] = None

    sim.on_invocation(record)
    return batches


def test_records_ready_together_reach_the_function_in_batches_of_the_templates_batch_size(
    template: dict[str, Any],
) -> None:
    # Given seven jobs created in the same minute, and SQS batching on
    size = mapping_batch_size(template, "JobEventsFunction")
    jobs = [sim_job(f"j{n}", instance_count=1) for n in range(7)]
    sim = Simulation(sim_scenario(*jobs), template=template, faults=FaultSpec.parse("batch=1"))
    batches = received_batches(sim, "JobEventsFunction")
    result = sim.run()
    received = batches
    # Then their Starting events came in one batch of BatchSize and one of the rest, each job's once
    assert [len(batch) for batch in received[:2]] == [size, 7 - size]
    assert sorted(received[0] + received[1]) == [(f"j{n}", "Starting") for n in range(7)]
    # and every batch was one invocation of at most BatchSize records, every record received
    assert all(1 <= len(batch) <= size for batch in received)
    assert result.invocations["JobEventsFunction"] == len(received) == sum(result.faults["batch_sizes"].values())
    assert max(result.faults["batch_sizes"]) == size
    assert result.faults["injected"]["batch"] > 0  # (batches shuffled)
    d = result.deliveries
    assert d["delivered"] == d["processed"] and not result.errors
    # and the jobs ran as without batches
    counts, _ = invariants(result)
    assert counts == dict.fromkeys(counts, 0)
    assert all(job.final_status == "Completed" for job in result.jobs.values())


def test_a_record_that_fails_in_a_batch_comes_back_alone_while_its_batch_mates_are_deleted(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two jobs created in the same minute, every event of one of them failing (an AdapterError: the
    # function names its record in the partial batch response), and SQS batching on
    from sagemaker_governance.domain.errors import AdapterError
    from sagemaker_governance.service.job_events import JobEventsService

    handle = JobEventsService.handle

    def failing_for_bad(self: JobEventsService, event: Any) -> Any:
        if event.detail.name == "bad":
            raise AdapterError("injected: DescribeTrainingJob failed")
        return handle(self, event)

    monkeypatch.setattr(JobEventsService, "handle", failing_for_bad)
    sim = Simulation(
        sim_scenario(sim_job("bad"), sim_job("good")), template=template, faults=FaultSpec.parse("batch=1")
    )
    batches = received_batches(sim, "JobEventsFunction")
    result = sim.run()
    received = batches
    # Then both Starting events came in one batch
    assert sorted(received[0]) == [("bad", "Starting"), ("good", "Starting")]
    # and only the failed record came back, maxReceiveCount times in all, each time in a batch of its own
    receives = job_events_queue(template)["RedrivePolicy"]["maxReceiveCount"]
    assert sum(batch.count(("bad", "Starting")) for batch in received) == receives
    assert sum(batch.count(("good", "Starting")) for batch in received) == 1
    assert all(batch == [("bad", "Starting")] for batch in received[1:] if ("bad", "Starting") in batch)
    # and the failing job's records failed maxReceiveCount times each, the good job's never: its compliance was
    # decided once
    failed = {e.record for e in result.errors}
    assert failed and all(e.function == "JobEventsFunction" for e in result.errors)
    assert len(result.errors) == receives * len(failed)
    assert sum(1 for batch in received for job, _ in batch if job == "bad") == receives * len(failed)
    good = [r.code for r in result.audit if r.job_name == "good"]
    assert good.count("compliance.pass.compliant") == 1
