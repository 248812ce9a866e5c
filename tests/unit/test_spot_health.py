"""The fleet's Spot health (pure): the signals a Spot event writes, the health of a type over a sliding
window, storms, and what they change in Spot decisions (running jobs decide sooner, new jobs may start
On-Demand when the team opted in)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.recovery_policy import SpotPolicy, StormPolicy
from sagemaker_governance.domain.resume import CloneDecision, SpotCode, decide_spot, decide_spot_start
from sagemaker_governance.domain.spot_economics import Unknown
from sagemaker_governance.domain.spot_health import FleetHealth, SignalKind, SpotSignal, signals_of
from tests.resume_builders import T0, TAGS, as_job, context
from tests.spot_builders import TYPE, listed, lived, starting


def signal(
    job: str,
    minutes: int,
    kind: SignalKind = SignalKind.INTERRUPTION,
    rate: float | None = 0.5,
    hours: float = 4.0,
) -> SpotSignal:
    """An interruption of ``job`` at its ``rate`` over ``hours`` of running so far (its counts)."""
    return SpotSignal(
        TYPE,
        kind,
        T0 + timedelta(minutes=minutes),
        job,
        rate_per_hour=rate,
        interruptions=None if rate is None else round(rate * hours),
        running_hours=None if rate is None else hours,
    )


def health(*signals: SpotSignal, now_minutes: int = 60, **policy: object) -> FleetHealth:
    return FleetHealth.of(TYPE, signals, T0 + timedelta(minutes=now_minutes), StormPolicy.model_validate(policy))


def test_an_interruption_writes_itself_with_the_jobs_rate_and_the_last_wait_that_ended() -> None:
    # Given a job interrupted twice (the first wait ended 10 minutes later)
    doc, _, now = lived([60, 60], every=30, wait=10)
    signals = signals_of(as_job(doc), now)
    assert not isinstance(signals, Unknown)
    kinds = {s.kind: s for s in signals}
    assert set(kinds) == {SignalKind.INTERRUPTION, SignalKind.CAPACITY_WAIT}
    assert kinds[SignalKind.INTERRUPTION].at == now  # the current interruption
    assert kinds[SignalKind.INTERRUPTION].rate_per_hour is not None
    assert kinds[SignalKind.CAPACITY_WAIT].wait_minutes == 10
    # and the same event again writes the same keys (the ledger counts it once)
    again = signals_of(as_job(doc), now + timedelta(minutes=3))
    assert not isinstance(again, Unknown)
    assert {s.key for s in again} == {s.key for s in signals}


def test_a_capacity_wait_through_pending_after_a_restart_is_a_signal_too() -> None:
    # Given a job interrupted, restarted (Starting), waiting 3 hours in Pending for capacity, back to
    # training and interrupted again
    doc, _, now = lived([60, 60], every=30, wait=10)
    transitions = doc["SecondaryStatusTransitions"]
    restart = next(i for i, t in enumerate(transitions) if i and t["Status"] == "Starting")
    shift = timedelta(hours=3)
    pending = {"Status": "Pending", "StartTime": transitions[restart]["EndTime"]}
    pending["EndTime"] = pending["StartTime"] + shift
    for transition in transitions[restart + 1 :]:
        transition["StartTime"] += shift
        if "EndTime" in transition:
            transition["EndTime"] += shift
    transitions.insert(restart + 1, pending)
    # When the second interruption writes its signals
    signals = signals_of(as_job(doc), now + shift)
    assert not isinstance(signals, Unknown)
    # Then the capacity wait runs from the first interruption through Starting and Pending: 3 h 10 min
    (wait,) = [s for s in signals if s.kind is SignalKind.CAPACITY_WAIT]
    assert wait.wait_minutes == 190


@pytest.mark.parametrize("waiting", ["Starting", "Pending"])
def test_an_interruption_read_in_its_capacity_wait_still_writes_itself(waiting: str) -> None:
    # Given a job interrupted twice, re-read waiting for capacity after its second interruption (AWS's
    # Managed Spot lifecycle: Interrupted, then Starting/Pending until capacity comes back)
    doc, _, now = lived([60, 60], every=30, wait=10)
    interrupted = signals_of(as_job(doc), now)
    doc["SecondaryStatus"] = waiting
    doc["SecondaryStatusTransitions"][-1]["EndTime"] = now + timedelta(minutes=1)
    doc["SecondaryStatusTransitions"].append({"Status": waiting, "StartTime": now + timedelta(minutes=1)})
    # When it writes its signals
    signals = signals_of(as_job(doc), now + timedelta(minutes=5))
    # Then the interruption is written, the same as when it was re-read Interrupted (the same key)
    assert not isinstance(signals, Unknown) and not isinstance(interrupted, Unknown)
    (interruption,) = [s for s in signals if s.kind is SignalKind.INTERRUPTION]
    assert interruption.key in {s.key for s in interrupted}
    # and once it is billed again, the interruption is no longer the job's current one
    doc["SecondaryStatus"] = "Downloading"
    doc["SecondaryStatusTransitions"][-1]["EndTime"] = now + timedelta(minutes=20)
    doc["SecondaryStatusTransitions"].append({"Status": "Downloading", "StartTime": now + timedelta(minutes=20)})
    later = signals_of(as_job(doc), now + timedelta(minutes=25))
    assert not isinstance(later, Unknown)
    assert SignalKind.INTERRUPTION not in {s.kind for s in later}


def test_max_wait_exceeded_is_a_signal() -> None:
    doc, _, now = lived([60], every=30)
    doc["TrainingJobStatus"], doc["SecondaryStatus"] = "Stopped", "MaxWaitTimeExceeded"
    doc["SecondaryStatusTransitions"][-1]["EndTime"] = now
    doc["SecondaryStatusTransitions"].append({"Status": "MaxWaitTimeExceeded", "StartTime": now, "EndTime": now})
    signals = signals_of(as_job(doc), now)
    assert not isinstance(signals, Unknown)
    assert [s.kind for s in signals] == [SignalKind.MAX_WAIT_EXCEEDED]


def test_three_jobs_interrupted_within_the_window_are_a_storm_and_older_ones_do_not_count() -> None:
    assert health(signal("a", 10), signal("b", 20), signal("c", 30)).storm
    assert not health(signal("a", 10), signal("a", 20), signal("b", 30)).storm  # two distinct jobs
    old = health(signal("a", -50), signal("b", 20), signal("c", 30), now_minutes=60)
    assert not old.storm and old.interruptions == 2


def test_jobs_out_of_spot_wait_time_are_a_storm_too() -> None:
    fleet = health(signal("a", 5, SignalKind.MAX_WAIT_EXCEEDED), signal("b", 6, SignalKind.MAX_WAIT_EXCEEDED))
    assert fleet.storm and fleet.max_wait_jobs == 2


def test_the_fleet_rate_pools_each_jobs_latest_counts_and_leaves_out_the_deciding_job() -> None:
    signals = (
        signal("a", 10, rate=0.5, hours=2),
        signal("a", 40, rate=1.0, hours=4),  # a's latest: 4 interruptions in 4 running hours
        signal("b", 20, rate=3.0, hours=2),  # 6 in 2
        signal("me", 30, rate=9, hours=1),
    )
    fleet = FleetHealth.of(TYPE, signals, T0 + timedelta(hours=1), StormPolicy(), exclude_job="me")
    # (4 + 6) / (4 + 2): the pool, not the mean of 1.0 and 3.0
    assert fleet.fleet_rate_per_hour == pytest.approx(10 / 6) and fleet.interrupted_jobs == 2
    assert (fleet.rated_jobs, fleet.exposure_hours) == (2, 6)


def test_a_job_interrupted_minutes_after_it_started_does_not_make_the_fleets_rate() -> None:
    # Given one other job interrupted 2 minutes into its first Downloading (1 interruption in 0.03 h)
    brief = SpotSignal(TYPE, SignalKind.INTERRUPTION, T0, "other-b", 30.0, interruptions=1, running_hours=2 / 60)
    fleet = FleetHealth.of(TYPE, [brief], T0 + timedelta(minutes=5), StormPolicy())
    # Then it counts as an interrupted job, but says nothing of the rate: under MIN_RUNNING_HOURS
    assert fleet.interrupted_jobs == 1 and fleet.fleet_rate_per_hour is None and fleet.rated_jobs == 0
    # and with a job that ran long enough the rate is that job's
    long = SpotSignal(TYPE, SignalKind.INTERRUPTION, T0, "other-c", 0.25, interruptions=2, running_hours=8)
    pooled = FleetHealth.of(TYPE, [brief, long], T0 + timedelta(minutes=5), StormPolicy())
    assert pooled.fleet_rate_per_hour == 0.25 and pooled.exposure_hours == 8
    # and a signal of an older ledger (a rate, no counts) counts for storms only
    old = SpotSignal(TYPE, SignalKind.INTERRUPTION, T0, "other-d", 2.0)
    assert FleetHealth.of(TYPE, [old], T0 + timedelta(minutes=5), StormPolicy()).fleet_rate_per_hour is None


def test_an_interruption_signal_carries_the_jobs_counts_so_far() -> None:
    doc, _, now = lived([60, 60], every=30, wait=10)
    signals = signals_of(as_job(doc), now)
    assert not isinstance(signals, Unknown)
    (interruption,) = [s for s in signals if s.kind is SignalKind.INTERRUPTION]
    assert interruption.interruptions == 2 and interruption.running_hours == pytest.approx(2 * 63 / 60)


def spot(
    doc: dict[str, Any],
    now: datetime,
    fleet: FleetHealth | Unknown | None,
    policy: SpotPolicy | None = None,
    **kwargs: object,
) -> CloneDecision:
    return decide_spot(
        as_job(doc),
        doc,
        TAGS,
        spot=policy or SpotPolicy(),
        default_mode=Mode.ENFORCE,
        ctx=context(now),
        fleet=fleet,
        **kwargs,  # type: ignore[arg-type]
    )


def test_in_a_storm_a_running_job_without_numbers_moves_at_its_first_interruption_when_the_team_says() -> None:
    doc, _, now = lived([60], every=30)
    storm = health(signal("a", 10), signal("b", 20), signal("c", 30))
    sooner = SpotPolicy.model_validate({"storm": {"count_rule_interruptions": 1}})
    # by default a storm leaves the count rule as it is (the numbers, when there are some, move sooner)
    assert spot(doc, now, storm).decisions[0].code == SpotCode.BELOW_THRESHOLD
    assert spot(doc, now, health(signal("a", 10)), sooner).decisions[0].code == SpotCode.BELOW_THRESHOLD
    result = spot(doc, now, storm, sooner)
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_COUNT_RULE, SpotCode.STOP_COUNT_RULE]
    assert result.decisions[0].evidence["fleet_storm"] is True


def test_a_stormy_fleet_rate_makes_the_numbers_move_a_young_job_sooner() -> None:
    # Given a job interrupted once after 3 hours and 10 minutes that had checkpointed after 130 minutes (50
    # lost), 1 hour capacity waits
    doc, writes, now = lived([190], every=130, wait=60, start=60, max_runtime_hours=20, max_wait_hours=30)
    alone = spot(doc, now, None, checkpoint=listed(writes))
    assert alone.decisions[0].code == SpotCode.SPOT_CHEAPER
    # When the other jobs of its type are interrupted three times an hour (over 4 running hours each)
    stormy = FleetHealth.of(
        TYPE, [signal(j, 10 + i, rate=3.0) for i, j in enumerate("abc")], now, StormPolicy(window_hours=168)
    )
    moved = spot(doc, now, stormy, checkpoint=listed(writes))
    # Then the same job moves On-Demand now: at the fleet's rate it would lose more than Spot saves
    assert moved.decisions[0].code == SpotCode.CLONE_ON_DEMAND_CHEAPER
    evidence = moved.decisions[0].evidence
    assert evidence["fleet_interruption_rate_per_hour"] == 3.0 and evidence["fleet_weight_hours"] == 12
    assert evidence["job_spot_efficiency"] > evidence["spot_efficiency"]  # its own numbers would stay


def start(fleet: FleetHealth | Unknown, doc: dict[str, Any] | None = None) -> CloneDecision:
    doc = doc or starting()
    policy = SpotPolicy.model_validate({"storm": {"move_new_jobs": True}})
    return decide_spot_start(
        as_job(doc),
        doc,
        TAGS,
        spot=policy,
        default_mode=Mode.ENFORCE,
        ctx=context(T0 + timedelta(minutes=2)),
        fleet=fleet,
    )


def test_a_new_spot_job_of_a_stormy_type_starts_on_demand_before_it_bills() -> None:
    result = start(health(signal("a", 10), signal("b", 20), signal("c", 30)))
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_STORM, SpotCode.STOP_STORM]
    assert result.stop_source and result.plan is not None
    assert result.plan.request["EnableManagedSpotTraining"] is False
    assert result.plan.request["ResourceConfig"]["InstanceType"] == TYPE  # the same instances


def test_without_a_storm_or_without_the_ledger_a_new_spot_job_stays() -> None:
    (calm,) = start(health(signal("a", 10))).decisions
    assert calm.code == SpotCode.NO_STORM and calm.action is Action.NONE
    (unknown,) = start(Unknown("the ledger could not be read: throttled")).decisions
    assert unknown.code == SpotCode.HEALTH_UNKNOWN and "throttled" in unknown.evidence["fleet_health"]


def test_a_delayed_start_event_of_a_job_that_bills_by_now_moves_nothing_even_in_a_storm() -> None:
    # Given a storm, and the job of a start event re-read after it started training
    stormy = health(signal("a", 10), signal("b", 20), signal("c", 30))
    doc = starting()
    doc["SecondaryStatus"] = "Training"
    doc["SecondaryStatusTransitions"] = [
        {"Status": "Starting", "StartTime": T0, "EndTime": T0 + timedelta(minutes=3)},
        {"Status": "Downloading", "StartTime": T0 + timedelta(minutes=3), "EndTime": T0 + timedelta(minutes=5)},
        {"Status": "Training", "StartTime": T0 + timedelta(minutes=5)},
    ]
    # Then the storm move does not apply: it bills already
    (decision,) = start(stormy, doc).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.NO_LONGER_STARTING


def test_another_job_interrupted_two_minutes_into_its_download_does_not_move_a_steady_job() -> None:
    # Given a job that trained 170 minutes, checkpointing hourly, and was interrupted once: Spot pays
    doc, writes, now = lived([170], every=60)
    assert spot(doc, now, None, checkpoint=listed(writes)).decisions[0].code == SpotCode.SPOT_CHEAPER
    # and another job of its type interrupted 2 minutes into its first Downloading (its ledger signal)
    other = as_job(
        {
            **doc,
            "TrainingJobName": "other-b",
            "SecondaryStatusTransitions": [
                {
                    "Status": "Starting",
                    "StartTime": now - timedelta(minutes=10),
                    "EndTime": now - timedelta(minutes=4),
                },
                {
                    "Status": "Downloading",
                    "StartTime": now - timedelta(minutes=4),
                    "EndTime": now - timedelta(minutes=2),
                },
                {"Status": "Interrupted", "StartTime": now - timedelta(minutes=2)},
            ],
        }
    )
    signals = signals_of(other, now)
    assert not isinstance(signals, Unknown)
    fleet = FleetHealth.of(TYPE, signals, now, StormPolicy(), exclude_job="bert-spot-1")
    # Then the fleet has no rate to blend (2 minutes of running say nothing of it), and the job stays
    (decision,) = spot(doc, now, fleet, checkpoint=listed(writes)).decisions
    assert decision.code == SpotCode.SPOT_CHEAPER and "fleet_interruption_rate_per_hour" not in decision.evidence
    assert decision.evidence["fleet_interrupted_jobs"] == 1
