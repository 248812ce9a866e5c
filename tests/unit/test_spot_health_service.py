"""Spot fallback with the fleet's Spot health ledger (in-memory fakes): only Spot events write and read it,
a failing ledger never blocks a decision, and a new Spot job of a stormy type is moved On-Demand before it
bills only when its team opted in."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.errors import AdapterError, DescriptionBehind
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.spot_health import SignalKind, SpotSignal
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.service.resume import SpotFallbackReaction
from smgov.explain import FixedPolicy
from smgov.offline import OfflineJobs, RecordingLauncher, RecordingNotifier
from tests.resume_builders import T0, TAGS, as_job, shape, spot_description
from tests.spot_builders import TYPE, starting

TRIGGER = Trigger(kind="event", event_id="e-1")


class FakeHealth:
    def __init__(self, signals: list[SpotSignal] | None = None, fail: bool = False) -> None:
        self.signals = list(signals or [])
        self.fail = fail
        self.written: list[SpotSignal] = []
        self.reads: list[tuple[str, datetime]] = []

    def record(self, signals: Iterable[SpotSignal]) -> None:
        if self.fail:
            raise AdapterError("ProvisionedThroughputExceededException")
        self.written += list(signals)

    def recent(self, instance_type: str, since: datetime) -> list[SpotSignal]:
        self.reads.append((instance_type, since))
        if self.fail:
            raise AdapterError("ProvisionedThroughputExceededException")
        return [s for s in self.signals if s.instance_type == instance_type and s.at >= since]


def reaction(
    description: dict[str, Any],
    health: FakeHealth,
    policy: dict[str, Any],
    now: datetime,
    tags: dict[str, str] | None = None,
) -> tuple[Any, ...]:
    job = as_job(description, tags)
    jobs, launcher, audit = OfflineJobs(job, description), RecordingLauncher(), MemoryAuditSink()
    spot = SpotFallbackReaction(
        jobs,
        launcher,
        RecordingNotifier(),
        FixedPolicy(Policy.model_validate({"mode": "enforce", **policy})),
        audit,
        clock=lambda: now,
        shape=shape,
        role_patterns=("*SageMaker*",),
        metrics=MemoryBusinessMetrics(),
        spot_health=health,
    )
    return job, spot, jobs, launcher, audit


def storm(now: datetime) -> list[SpotSignal]:
    return [
        SpotSignal(TYPE, SignalKind.INTERRUPTION, now - timedelta(minutes=m), f"j{m}", 1.5) for m in (5, 9, 14)
    ]


def test_an_interruption_writes_the_ledger_and_reads_its_type() -> None:
    description = spot_description(interruptions=1)
    description["ResourceConfig"]["InstanceType"] = TYPE
    now = T0 + timedelta(hours=2)
    health = FakeHealth()
    job, spot, *_ = reaction(description, health, {}, now)
    (decision,) = spot.react(job, TRIGGER)
    assert [s.kind for s in health.written] == [SignalKind.INTERRUPTION]
    assert health.reads == [(TYPE, now - timedelta(hours=1))]
    assert decision.evidence["fleet_storm"] is False


def test_an_interruption_re_read_in_its_capacity_wait_writes_the_ledger_all_the_same() -> None:
    # Given an interruption's event and the job re-read waiting for capacity after it (Starting)
    event = spot_description(interruptions=1)
    waits = spot_description(interruptions=1, secondary="Starting")
    for doc in (event, waits):
        doc["ResourceConfig"]["InstanceType"] = TYPE
    now = T0 + timedelta(hours=2)
    health = FakeHealth()
    _, spot, *_ = reaction(waits, health, {}, now)
    # When the event is handled
    (decision,) = spot.react(as_job(event), TRIGGER)
    # Then the interruption is written to the fleet's ledger and the type's health read, as when re-read
    # Interrupted (the storm detection counts it)
    assert [s.kind for s in health.written] == [SignalKind.INTERRUPTION]
    assert health.reads == [(TYPE, now - timedelta(hours=1))]
    assert decision.code == "spot.skip.below-threshold"


def test_an_unreadable_ledger_never_blocks_the_decision_and_is_said() -> None:
    description = spot_description(interruptions=3)
    job, spot, _, launcher, _ = reaction(description, FakeHealth(fail=True), {}, T0 + timedelta(hours=6))
    clone, _ = spot.react(job, TRIGGER)
    assert clone.code == "spot.clone.count-rule" and len(launcher.requests) == 1
    assert clone.evidence["fleet_health"].startswith("unavailable")


def test_a_new_spot_job_of_a_team_that_did_not_opt_in_costs_no_call() -> None:
    now = T0 + timedelta(minutes=2)
    health = FakeHealth(storm(now))
    job, spot, _, launcher, audit = reaction(starting(), health, {}, now)
    assert spot.applies(job)
    assert spot.react(job, TRIGGER) == []
    assert health.reads == [] and launcher.requests == [] and audit.records == []


def test_in_a_storm_a_new_spot_job_of_an_opted_in_team_starts_on_demand_once() -> None:
    now = T0 + timedelta(minutes=2)
    health = FakeHealth(storm(now))
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    job, spot, jobs, launcher, _ = reaction(starting(), health, opted, now)
    clone, stop = spot.react(job, TRIGGER)
    assert (clone.code, stop.code) == ("spot.clone.storm", "spot.stop.storm")
    assert [r["EnableManagedSpotTraining"] for r in launcher.requests] == [False]
    assert jobs.stopped == ["new-spot-1"]
    assert health.written == []  # a start is no Spot signal


def test_in_a_storm_a_new_spot_job_whose_event_does_not_say_its_team_is_moved_when_its_team_opted_in() -> None:
    # Given only the vision team opted in, and a vision job's Starting event that does not say its tags (an empty
    # Tags map, read as left out)
    now = T0 + timedelta(minutes=2)
    opted = {"teams": {"vision": {"spot": {"storm": {"move_new_jobs": True}}}}}
    job, spot, jobs, launcher, _ = reaction(starting(), FakeHealth(storm(now)), opted, now)
    # When the event is handled
    clone, stop = spot.react(job.model_copy(update={"tags": None}), TRIGGER)
    # Then it is not taken for a job of a team that did not opt in: read, cloned On-Demand and stopped
    assert (clone.code, stop.code) == ("spot.clone.storm", "spot.stop.storm")
    assert jobs.stopped == ["new-spot-1"] and len(launcher.requests) == 1


def test_in_a_storm_a_new_spot_job_whose_event_does_not_say_its_team_stays_on_spot_when_its_team_did_not_opt_in() -> (
    None
):
    # Given only the nlp team opted in, and a vision job's Starting event that does not say its tags: the event
    # could be any team's, so the job is read (its tags say vision)
    now = T0 + timedelta(minutes=2)
    opted = {"teams": {"nlp": {"spot": {"storm": {"move_new_jobs": True}}}}}
    job, spot, jobs, launcher, audit = reaction(starting(), FakeHealth(storm(now)), opted, now)
    # When the event is handled
    decisions = spot.react(job.model_copy(update={"tags": None}), TRIGGER)
    # Then the job's own team decides: it did not opt in, so the job stays on Spot, as when the event says its
    # tags (nothing cloned, nothing stopped, nothing recorded)
    assert decisions == [] and audit.records == []
    assert launcher.requests == [] and jobs.stopped == []


def test_without_a_storm_the_opted_in_new_job_stays_on_spot() -> None:
    now = T0 + timedelta(minutes=2)
    job, spot, jobs, launcher, _ = reaction(
        starting(), FakeHealth(), {"spot": {"storm": {"move_new_jobs": True}}}, now
    )
    (decision,) = spot.react(job, TRIGGER)
    assert decision.code == "spot.skip.no-storm" and launcher.requests == [] and jobs.stopped == []


def test_in_a_storm_an_opted_in_spot_job_waiting_in_pending_starts_on_demand_before_it_bills() -> None:
    # Given a new Spot job that went from Starting to Pending (waiting for capacity, nothing billed yet)
    now = T0 + timedelta(minutes=6)
    description = starting()
    description["SecondaryStatus"] = "Pending"
    description["SecondaryStatusTransitions"] = [
        {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(minutes=4)},
        {"Status": "Pending", "StartTime": T0 + timedelta(minutes=4)},
    ]
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    job, spot, jobs, launcher, _ = reaction(description, FakeHealth(storm(now)), opted, now)
    # When its Pending event arrives in a storm of its type
    clone, stop = spot.react(job, TRIGGER)
    # Then it is cloned On-Demand and stopped, as on Starting
    assert (clone.code, stop.code) == ("spot.clone.storm", "spot.stop.storm")
    assert [r["EnableManagedSpotTraining"] for r in launcher.requests] == [False]
    assert jobs.stopped == ["new-spot-1"]


def pending_event(description: dict[str, Any]) -> TrainingJob:
    """The job as a state-change event may state it: without ``EnableManagedSpotTraining``."""
    waiting = {**description, "SecondaryStatus": "Pending", "Tags": TAGS}
    return TrainingJob.model_validate({k: v for k, v in waiting.items() if k != "EnableManagedSpotTraining"})


def test_an_event_that_does_not_say_spot_is_read_again_and_a_spot_job_still_moved() -> None:
    # Given a storm, an opted-in team, and a Pending event that leaves EnableManagedSpotTraining out
    now = T0 + timedelta(minutes=6)
    description = {**starting(), "SecondaryStatus": "Pending"}
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    _, spot, jobs, launcher, _ = reaction(description, FakeHealth(storm(now)), opted, now)
    event = pending_event(description)
    assert not event.spot_known and not event.spot
    # When it is handled, then DescribeTrainingJob says Spot, and the job is moved as if the event had said so
    assert spot.applies(event)
    clone, stop = spot.react(event, TRIGGER)
    assert (clone.code, stop.code) == ("spot.clone.storm", "spot.stop.storm")
    assert jobs.stopped == ["new-spot-1"] and len(launcher.requests) == 1


def test_an_event_that_does_not_say_spot_of_an_on_demand_job_decides_and_records_nothing() -> None:
    now = T0 + timedelta(minutes=6)
    description = {**starting(), "SecondaryStatus": "Pending", "EnableManagedSpotTraining": False}
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    _, spot, jobs, launcher, audit = reaction(description, FakeHealth(storm(now)), opted, now)
    event = pending_event(description)
    assert spot.applies(event)
    assert spot.react(event, TRIGGER) == []
    assert launcher.requests == [] and jobs.stopped == [] and audit.records == []


def test_an_event_that_says_on_demand_is_not_read_again() -> None:
    now = T0 + timedelta(minutes=6)
    description = {**starting(), "SecondaryStatus": "Pending", "EnableManagedSpotTraining": False}
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    job, spot, *_ = reaction(description, FakeHealth(storm(now)), opted, now)
    assert job.spot_known and not spot.applies(job)


def test_a_spot_job_back_in_pending_after_an_interruption_is_not_a_new_start() -> None:
    # Given a Spot job that trained, was interrupted and now waits in Pending
    now = T0 + timedelta(hours=2)
    description = starting()
    description["SecondaryStatus"] = "Pending"
    description["SecondaryStatusTransitions"] = [
        {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(minutes=4)},
        {"Status": "Training", "StartTime": T0 + timedelta(minutes=4), "EndTime": T0 + timedelta(hours=1)},
        {"Status": "Interrupted", "StartTime": T0 + timedelta(hours=1), "EndTime": T0 + timedelta(hours=1.5)},
        {"Status": "Pending", "StartTime": T0 + timedelta(hours=1.5)},
    ]
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    job, spot, _, launcher, _ = reaction(description, FakeHealth(storm(now)), opted, now)
    # Then the storm move does not apply (its interruptions decide, at the Interrupted event)
    assert not spot.applies(job)
    assert launcher.requests == []


def test_the_ledger_is_read_for_each_alternative_only_when_the_job_opted_in() -> None:
    # Given a team that lists two alternatives, and an interrupted job of its own type
    now = T0 + timedelta(hours=2)
    policy = {"spot": {"fallbacks": [{"instance_type": "ml.g6.12xlarge"}, {"instance_type": "ml.p4d.24xlarge"}]}}
    description = spot_description(interruptions=1)
    description["ResourceConfig"]["InstanceType"] = TYPE
    # When the job does not carry the opt-in tag: only its own type is read
    health = FakeHealth()
    job, spot, *_ = reaction(description, health, policy, now)
    spot.react(job, TRIGGER)
    assert [t for t, _ in health.reads] == [TYPE]
    # When it does: each alternative's type is read too, in order
    health = FakeHealth()
    job, spot, *_ = reaction(description, health, policy, now, {**TAGS, "spot-fallbacks": "allow"})
    spot.react(job, TRIGGER)
    assert [t for t, _ in health.reads] == [TYPE, "ml.g6.12xlarge", "ml.p4d.24xlarge"]


def test_a_delayed_start_event_of_a_job_interrupted_since_moves_nothing() -> None:
    # Given an opted-in team in a storm, and a new Spot job's start event delivered hours late: the job
    # re-read has trained and been interrupted three times (the count rule's threshold) and trains again
    now = T0 + timedelta(hours=4)
    event = as_job(starting("bert-spot-1"))
    description = spot_description(interruptions=3, secondary="Training")
    description["ResourceConfig"]["InstanceType"] = TYPE
    opted = {"spot": {"storm": {"move_new_jobs": True}}}
    _, spot, jobs, launcher, audit = reaction(description, FakeHealth(storm(now)), opted, now)
    assert spot.applies(event)
    # When the start event is handled
    (decision,) = spot.react(event, TRIGGER)
    # Then nothing is cloned or stopped: the storm move is for a job before it bills
    assert decision.code == "spot.skip.no-longer-starting"
    assert launcher.requests == [] and jobs.stopped == []
    assert [r.code for r in audit.records] == ["spot.skip.no-longer-starting"]


def test_a_late_interrupted_event_of_a_job_that_trains_again_moves_nothing() -> None:
    # Given the third interruption's event (the count rule's threshold), retried 30 minutes later: the job
    # re-read trains again
    now = T0 + timedelta(hours=4)
    event = as_job(spot_description(interruptions=3))
    description = spot_description(interruptions=3, secondary="Training")
    _, spot, jobs, launcher, audit = reaction(description, FakeHealth(), {}, now)
    # When the event is handled
    (decision,) = spot.react(event, TRIGGER)
    # Then nothing is cloned or stopped, and the one record says why
    assert decision.code == "spot.skip.no-longer-interrupted"
    assert launcher.requests == [] and jobs.stopped == []
    assert [r.code for r in audit.records] == ["spot.skip.no-longer-interrupted"]


def behind(description: dict[str, Any]) -> dict[str, Any]:
    """``description`` as DescribeTrainingJob answered a moment before its last transition: still in the one
    before it (a read that lags the event)."""
    history = [dict(t) for t in description["SecondaryStatusTransitions"][:-1]]
    history[-1].pop("EndTime", None)
    return {**description, "SecondaryStatus": history[-1]["Status"], "SecondaryStatusTransitions": history}


def test_an_interrupted_event_read_again_before_describe_knows_it_is_retried_not_decided() -> None:
    # Given the third interruption's event (the count rule's threshold), and DescribeTrainingJob still answering
    # from before it: Training, its history ending before the interruption began
    now = T0 + timedelta(hours=4)
    event_description = spot_description(interruptions=3)
    lagging = behind(event_description)
    assert lagging["SecondaryStatus"] == "Training"
    event = as_job(event_description)
    _, spot, jobs, launcher, audit = reaction(lagging, FakeHealth(), {}, now)
    # When the event is handled, the delivery fails for its retry (a minute later), with nothing decided:
    # the lagging read would have said the interruption is over (spot.skip.no-longer-interrupted)
    with pytest.raises(DescriptionBehind, match="Training"):
        spot.react(event, TRIGGER)
    assert audit.records == [] and launcher.requests == [] and jobs.stopped == []
    # When the retry reads the job in its interruption, the count rule moves it
    _, spot, jobs, launcher, audit = reaction(event_description, FakeHealth(), {}, now)
    assert [d.code for d in spot.react(event, TRIGGER)] == ["spot.clone.count-rule", "spot.stop.count-rule"]
    # and a retry that finds the job training again after it still records that the interruption is over
    trains_again = spot_description(interruptions=3, secondary="Training")
    _, spot, *_ = reaction(trains_again, FakeHealth(), {}, now)
    assert [d.code for d in spot.react(event, TRIGGER)] == ["spot.skip.no-longer-interrupted"]
