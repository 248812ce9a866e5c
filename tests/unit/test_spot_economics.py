"""Spot decisions on economics (pure): the numbers at an interruption, the rule they pick, and the count
rule when the numbers cannot be computed."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.failure_evidence import CheckpointProgress
from sagemaker_governance.domain.recovery_policy import SpotPolicy, StormPolicy
from sagemaker_governance.domain.resume import CloneDecision, SpotCode, decide_spot
from sagemaker_governance.domain.spot_economics import FLEET_MAX_HOURS, SpotEstimate, Unknown, estimate, history_of
from sagemaker_governance.domain.spot_health import FleetHealth, SignalKind, SpotSignal
from tests.resume_builders import T0, TAGS, as_job, context
from tests.spot_builders import listed, lived


def decide(
    doc: dict[str, Any],
    now: datetime,
    checkpoint: CheckpointProgress | None,
    policy: SpotPolicy | None = None,
    prices: dict[str, float] | None = None,
    fleet: FleetHealth | None = None,
) -> CloneDecision:
    return decide_spot(
        as_job(doc),
        doc,
        TAGS,
        spot=policy or SpotPolicy(),
        default_mode=Mode.ENFORCE,
        ctx=context(now),
        checkpoint=checkpoint,
        prices=prices,
        fleet=fleet,
    )


def calm_fleet(now: datetime, instance_type: str = "ml.g5.12xlarge") -> FleetHealth:
    """Another job of the type: one interruption in 50 running hours."""
    other = SpotSignal(
        instance_type,
        SignalKind.INTERRUPTION,
        now - timedelta(minutes=30),
        "long-runner",
        0.02,
        interruptions=1,
        running_hours=50,
    )
    return FleetHealth.of(instance_type, [other], now, StormPolicy(), exclude_job="bert-spot-1")


def test_a_long_job_interrupted_three_times_over_two_days_stays_on_spot() -> None:
    # Given 14-hour stints with a checkpoint every 30 minutes (little lost at each interruption)
    doc, writes, now = lived([14 * 60, 14 * 60, 14 * 60], every=30, max_runtime_hours=60, max_wait_hours=120)
    # When it is interrupted the third time (the count rule would move it)
    (decision,) = decide(doc, now, listed(writes)).decisions
    # Then finishing on Spot is cheaper, and the numbers say so
    assert decision.action is Action.NONE and decision.code == SpotCode.SPOT_CHEAPER
    evidence = decision.evidence
    assert evidence["economics"] == "computed"
    assert evidence["spot_efficiency"] > 0.95
    assert evidence["spot_cost_cluster_hours"] < evidence["on_demand_cost_cluster_hours"]
    assert evidence["kept_work_hours"] == pytest.approx(42.0, abs=0.01)


def test_interruptions_faster_than_the_checkpoints_move_the_job_once_it_has_run_an_hour() -> None:
    # Given two stints of 30 minutes and checkpoints every 45: nothing kept in an hour of running
    doc, writes, now = lived([30, 30], every=45)
    result = decide(doc, now, listed(writes))
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_NO_PROGRESS, SpotCode.STOP_NO_PROGRESS]
    assert result.decisions[0].evidence["spot_efficiency"] < 0.05
    assert result.stop_source and result.plan is not None
    assert result.plan.request["EnableManagedSpotTraining"] is False


def test_on_demand_is_chosen_when_spot_loses_more_than_its_discount() -> None:
    # Given half of each hour lost at each interruption, and Spot at 60% of the On-Demand price
    doc, writes, now = lived([58, 58], every=30, download=10, max_runtime_hours=12, max_wait_hours=400)
    policy = SpotPolicy(price_factor=0.6)
    result = decide(doc, now, listed(writes), policy)
    assert result.decisions[0].code == SpotCode.CLONE_ON_DEMAND_CHEAPER
    evidence = result.decisions[0].evidence
    assert evidence["spot_cost_cluster_hours"] > evidence["on_demand_cost_cluster_hours"]
    # and at Spot's usual discount, the same history stays on Spot
    (stay,) = decide(doc, now, listed(writes), SpotPolicy(price_factor=0.3)).decisions
    assert stay.code == SpotCode.SPOT_CHEAPER


def test_spot_that_would_outrun_max_wait_moves_before_it_ends_unfinished() -> None:
    # Given 10-hour capacity waits: 13 of its 16 hours of MaxWaitTimeInSeconds are spent
    doc, writes, now = lived([85, 85], every=20, wait=600, max_runtime_hours=12, max_wait_hours=16)
    result = decide(doc, now, listed(writes))
    # Then even with no work left the wait under way outlasts it: moved On-Demand now
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_MAX_WAIT_BUDGET, SpotCode.STOP_MAX_WAIT_BUDGET]
    evidence = result.decisions[0].evidence
    assert evidence["max_wait_hours"] == 16 and evidence["max_wait_work_bound"] == "lower"
    assert evidence["max_wait_work_left_hours"] == 0 and evidence["max_wait_finishable_work_hours"] == 0


@pytest.mark.parametrize("max_wait_hours", [24, 26, 36])
def test_max_wait_equal_to_max_runtime_is_no_reason_to_leave_spot(max_wait_hours: int) -> None:
    # Given a healthy job (one interruption after 4 hours, a checkpoint every 10 minutes) whose
    # MaxWaitTimeInSeconds equals its MaxRuntimeInSeconds (valid: "equal to or greater than"), or a little more
    doc, writes, now = lived([240], every=10, max_runtime_hours=24, max_wait_hours=max_wait_hours)
    (decision,) = decide(doc, now, listed(writes)).decisions
    # Then it stays on Spot: the upper bound of the work left (MaxRuntime - kept) is no reason to say it
    # would run out of wait time, only the least work left is (none), and the evidence says which
    assert decision.action is Action.NONE and decision.code == SpotCode.SPOT_CHEAPER
    evidence = decision.evidence
    assert evidence["max_wait_work_bound"] == "lower" and evidence["max_wait_work_left_hours"] == 0
    assert evidence["remaining_work_hours"] == pytest.approx(20, abs=0.01)  # the upper bound, for the costs
    assert 0 < evidence["max_wait_finishable_work_hours"] < max_wait_hours


def test_the_deadline_slack_moves_a_job_spot_would_finish_late() -> None:
    doc, writes, now = lived([120, 120], every=30, wait=60)
    (stay,) = decide(doc, now, listed(writes)).decisions
    assert stay.code == SpotCode.SPOT_CHEAPER
    result = decide(doc, now, listed(writes), SpotPolicy(max_delay_hours=2))
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_DEADLINE, SpotCode.STOP_DEADLINE]


def test_max_interruptions_is_a_hard_cap_whatever_the_numbers() -> None:
    doc, writes, now = lived([14 * 60] * 3, every=30, max_runtime_hours=60, max_wait_hours=120)
    result = decide(doc, now, listed(writes), SpotPolicy(max_interruptions=3))
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_INTERRUPTED, SpotCode.STOP_INTERRUPTED]
    assert result.decisions[0].evidence["economics"] == "computed"  # the numbers are still recorded


@pytest.mark.parametrize(
    ("checkpoint", "note"),
    [
        (None, "not listed"),
        (
            CheckpointProgress.out_of_scope("bucket ckpt does not match CheckpointBucketPattern"),
            "CheckpointBucket",
        ),
        (CheckpointProgress.unknown("ListObjectsV2 on ckpt failed (AccessDenied)"), "AccessDenied"),
        (CheckpointProgress(checked=True, truncated=True, written_at=()), "cut short"),
        (CheckpointProgress(checked=True, written_at=(T0 - timedelta(days=2),)), "outside the job's life"),
    ],
)
def test_missing_or_conflicting_data_falls_back_to_the_count_rule_and_says_so(
    checkpoint: CheckpointProgress | None, note: str
) -> None:
    # Given rapid interruptions that the numbers would move at once
    doc, _, now = lived([20, 20], every=30)
    (decision,) = decide(doc, now, checkpoint).decisions
    # Then without the numbers the count rule (3) decides: not yet at 2
    assert decision.code == SpotCode.BELOW_THRESHOLD
    assert decision.evidence["economics"] == "unavailable" and note in decision.evidence["economics_note"]
    doc, _, now = lived([20, 20, 20], every=30)
    assert decide(doc, now, checkpoint).decisions[0].code == SpotCode.CLONE_COUNT_RULE


def test_economics_off_is_the_count_rule() -> None:
    doc, writes, now = lived([20], every=30)
    (decision,) = decide(doc, now, listed(writes), SpotPolicy(economics=False)).decisions
    assert decision.code == SpotCode.BELOW_THRESHOLD and "economics is off" in decision.evidence["economics_note"]


def test_dollars_are_in_the_evidence_when_the_type_is_priced() -> None:
    doc, writes, now = lived([14 * 60] * 2, every=30)
    (priced,) = decide(doc, now, listed(writes), prices={"ml.g5.12xlarge": 7.09}).decisions
    assert priced.evidence["on_demand_cost_usd"] == pytest.approx(
        priced.evidence["on_demand_cost_cluster_hours"] * 2 * 7.09, rel=0.01
    )
    (unpriced,) = decide(doc, now, listed(writes), prices={}).decisions
    assert "on_demand_cost_usd" not in unpriced.evidence and unpriced.code == priced.code


def test_the_fleet_rate_pulls_a_young_jobs_rate_towards_it_as_far_as_its_exposure_goes() -> None:
    doc, writes, now = lived([6 * 60], every=30)
    job = as_job(doc)
    alone = estimate(job, writes, now, price_factor=0.35)
    stormy = estimate(job, writes, now, price_factor=0.35, fleet_rate_per_hour=3.0, fleet_exposure_hours=4)
    assert isinstance(alone, SpotEstimate) and isinstance(stormy, SpotEstimate)
    assert alone.rate_per_hour < stormy.rate_per_hour < 3.0
    assert stormy.efficiency < alone.efficiency and stormy.fleet_weight_hours == 4
    # the job's own 6 h and the fleet's 4 h, pooled: (1 + 4 x 3) / (6.05 + 4)
    assert stormy.rate_per_hour == pytest.approx(13 / (6 + 3 / 60 + 4))
    # a fleet that ran for minutes barely moves it; a huge one weighs FLEET_MAX_HOURS at most
    brief = estimate(job, writes, now, price_factor=0.35, fleet_rate_per_hour=30.0, fleet_exposure_hours=0.03)
    huge = estimate(job, writes, now, price_factor=0.35, fleet_rate_per_hour=0.01, fleet_exposure_hours=5000)
    assert isinstance(brief, SpotEstimate) and isinstance(huge, SpotEstimate)
    assert brief.rate_per_hour < 2 * alone.rate_per_hour
    assert huge.fleet_weight_hours == FLEET_MAX_HOURS


def test_a_job_that_keeps_nothing_leaves_spot_whatever_a_calm_fleet_says() -> None:
    # Given a job interrupted three times after 40 minutes each, with checkpoints every 45: nothing kept
    doc, writes, now = lived([40, 40, 40], every=45)
    # and a calm fleet (one interruption in 50 running hours of another job)
    (decision,) = decide(doc, now, listed(writes), fleet=calm_fleet(now)).decisions[:1]
    # Then it is moved for want of progress, by its own numbers, and the evidence shows both efficiencies
    assert decision.code == SpotCode.CLONE_NO_PROGRESS
    assert decision.evidence["job_spot_efficiency"] == 0 and decision.evidence["kept_work_hours"] == 0
    assert decision.evidence["fleet_interruption_rate_per_hour"] == 0.02


def test_no_interruption_on_record_is_unknown() -> None:
    doc, writes, now = lived([60], every=30)
    doc["SecondaryStatusTransitions"] = doc["SecondaryStatusTransitions"][:-1]
    assert isinstance(estimate(as_job(doc), writes, now, price_factor=0.35), Unknown)


def restarted_through(waiting: str) -> tuple[dict[str, Any], datetime]:
    """A Spot job that trained 2 h, was interrupted, waited 3 h for capacity in ``waiting`` after its
    restart's Starting, trained 2 h more and is interrupted again."""
    doc, _, _ = lived([10], every=5)
    at, history = T0, []
    for status, minutes in [
        ("Starting", 3), ("Downloading", 3), ("Training", 120),
        ("Interrupted", 5), ("Starting", 5), (waiting, 180),
        ("Downloading", 3), ("Training", 120),
    ]:  # fmt: skip
        history.append({"Status": status, "StartTime": at, "EndTime": at + timedelta(minutes=minutes)})
        at += timedelta(minutes=minutes)
    history.append({"Status": "Interrupted", "StartTime": at})
    doc["SecondaryStatusTransitions"] = history
    return doc, at


def test_a_capacity_wait_in_pending_after_a_restart_counts_as_the_wait_it_is() -> None:
    # Given the same 3-hour wait for Spot capacity lived in Starting, or in Pending ("waiting for compute
    # capacity", DescribeTrainingJob's SecondaryStatus) after the restart's Starting
    waits = {}
    for waiting in ("Starting", "Pending"):
        doc, at = restarted_through(waiting)
        writes = [T0 + timedelta(minutes=100), at - timedelta(minutes=1)]  # one in each Training stint
        history = history_of(as_job(doc), writes, at + timedelta(minutes=1))
        assert not isinstance(history, Unknown)
        waits[waiting] = history.wait_hours_per_interruption
    # Then both are the same capacity wait: Interrupted 5 + Starting 5 + 180 minutes
    assert waits["Pending"] == waits["Starting"] == pytest.approx(190 / 60)


def test_before_any_wait_has_ended_the_first_starting_and_pending_are_the_wait() -> None:
    # Given a job that waited 2 hours in Pending for its first capacity, trained and is interrupted once
    doc, writes, now = lived([120], every=30, start=3)
    transitions = doc["SecondaryStatusTransitions"]
    pending = {"Status": "Pending", "StartTime": transitions[0]["EndTime"]}
    shift = timedelta(hours=2)
    pending["EndTime"] = pending["StartTime"] + shift
    for transition in transitions[1:]:
        transition["StartTime"] += shift
        if "EndTime" in transition:
            transition["EndTime"] += shift
    transitions.insert(1, pending)
    history = history_of(as_job(doc), [w + shift for w in writes], now + shift)
    assert not isinstance(history, Unknown)
    # Then its expected capacity wait is Starting + Pending, and an On-Demand start is still the Starting
    assert history.wait_hours_per_interruption == pytest.approx(2 + 3 / 60)
    assert history.first_start_hours == pytest.approx(3 / 60)


def test_one_interruption_minutes_into_the_first_run_is_judged_with_the_fleet_not_alone() -> None:
    # Given a job interrupted 4 minutes into its first Training (checkpoints every 30: nothing kept yet),
    # in a calm fleet
    doc, writes, now = lived([4], every=30)
    # Then its own 7 minutes of running (all lost) do not say it makes no progress: the fleet's rate is
    # blended in, and it stays on Spot
    (decision,) = decide(doc, now, listed(writes), fleet=calm_fleet(now)).decisions
    assert decision.code == SpotCode.SPOT_CHEAPER
    assert decision.evidence["job_spot_efficiency"] == 0 and decision.evidence["spot_efficiency"] > 0.9


def on_p4d(doc: dict[str, Any]) -> dict[str, Any]:
    doc["ResourceConfig"] = {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 8, "VolumeSizeInGB": 500}
    return doc


@pytest.mark.parametrize("surviving", [1, 2])
def test_a_checkpoint_key_overwritten_or_rotated_is_no_evidence_that_earlier_stints_lost_their_work(
    surviving: int,
) -> None:
    # Given 8 x p4d interrupted four times (stints of 100, 90, 110 and 95 minutes) with a checkpoint every
    # 10 minutes, and a team whose count rule waits for a fifth interruption
    doc, writes, now = lived([100, 90, 110, 95], every=10, max_runtime_hours=48, max_wait_hours=96)
    doc, policy = on_p4d(doc), SpotPolicy(count_rule_interruptions=5)
    prices = {"ml.p4d.24xlarge": 37.688}
    (full,) = decide(doc, now, listed(writes), policy, prices).decisions
    assert full.code == SpotCode.SPOT_CHEAPER and full.evidence["spot_efficiency"] > 0.9
    # When its location keeps only the newest write(s): one key it overwrites (checkpoint.pt), or rotated
    # checkpoints (save_total_limit=2), so ListObjectsV2 shows no write in the first three stints
    result = decide(doc, now, listed(writes[-surviving:]), policy, prices)
    # Then those stints are not taken as all lost (a move On-Demand at 2.9 times the price): the work kept
    # is unknown, the count rule decides, and the record says why
    assert [d.code for d in result.decisions] == [SpotCode.BELOW_THRESHOLD]
    decision = result.decisions[0]
    assert decision.action is Action.NONE and decision.evidence["economics"] == "unavailable"
    assert decision.evidence["economics_cause"] == "checkpoint-history-unknown"


@pytest.mark.parametrize("files_per_save", [1, 3])
def test_a_stint_too_short_for_a_checkpoint_is_lost_work_wherever_it_falls(files_per_save: int) -> None:
    # Given stints of 20 and 8 minutes, before and after two of 120 minutes that saved every 30 minutes (each
    # save one object, or three written seconds apart: weights, optimizer, trainer state)
    doc, saves, now = lived([20, 120, 120, 8], every=30, max_runtime_hours=48, max_wait_hours=96)
    writes = [save - timedelta(seconds=20 * n) for save in saves for n in range(files_per_save)]
    history = history_of(as_job(doc), writes, now)
    # Then the history is read: both were shorter than the 30 minutes between saves that three consecutive
    # saves in one stint prove, so a listing that keeps every write shows them without one too, and their
    # 28 minutes are lost work
    assert not isinstance(history, Unknown)
    assert history.lost_hours == pytest.approx(28 / 60)


@pytest.mark.parametrize("newest", [1, 2])
def test_a_best_checkpoint_kept_beside_the_newest_proves_no_checkpoint_interval(newest: int) -> None:
    # Given 8 x p4d interrupted four times (stints of 100, 90, 110 and 150 minutes) with a checkpoint every
    # 10 minutes, which the full listing judges worth keeping on Spot, and a count rule at five
    doc, writes, now = lived([100, 90, 110, 150], every=10, max_runtime_hours=48, max_wait_hours=96)
    doc, policy = on_p4d(doc), SpotPolicy(count_rule_interruptions=5)
    prices = {"ml.p4d.24xlarge": 37.688}
    (full,) = decide(doc, now, listed(writes), policy, prices).decisions
    assert full.code == SpotCode.SPOT_CHEAPER and full.evidence["spot_efficiency"] > 0.9
    # When the location keeps the best checkpoint (20 minutes into the last stint) beside the newest one or
    # two (save_total_limit with load_best_model_at_end, or save_top_k on a metric): gaps of 130 minutes, or
    # 120 and 10, none that two consecutive gaps agree on
    best = writes[-14]
    result = decide(doc, now, listed((best, *writes[-newest:])), policy, prices)
    # Then the earlier stints are not taken as too short for a checkpoint and all lost (a stop and a clone
    # On-Demand): the work kept is unknown, the count rule decides and keeps the job, and the record says why
    assert [d.code for d in result.decisions] == [SpotCode.BELOW_THRESHOLD]
    (decision,) = result.decisions
    assert decision.action is Action.NONE and decision.evidence["economics"] == "unavailable"
    assert decision.evidence["economics_cause"] == "checkpoint-history-unknown"


def test_a_checkpoint_interval_two_writes_show_is_not_proven() -> None:
    # Given a stint of 12 minutes before one of 60 that shows two writes 40 minutes apart (a best checkpoint
    # and the newest, or two saves 40 minutes apart: the listing cannot say which)
    doc, _, now = lived([12, 60], every=10, max_runtime_hours=48, max_wait_hours=96)
    second = as_job(doc).transitions[-2].start_time  # the second Training stint's start
    assert second is not None
    writes = [second + timedelta(minutes=15), second + timedelta(minutes=55)]
    # When the history is read
    history = history_of(as_job(doc), writes, now)
    # Then the 12 minutes without a write are not taken as lost: the work kept is unknown
    assert isinstance(history, Unknown) and history.cause == "checkpoint-history-unknown"


@pytest.mark.parametrize(
    "fleet",
    [None, Unknown("the ledger could not be read: ThrottlingException"), "interrupted early"],
)
def test_one_interruption_minutes_in_without_a_rated_fleet_is_left_to_the_count_rule(fleet: Any) -> None:
    # Given 8 x p4d interrupted 20 minutes into its first Training (checkpoints every 30: nothing kept yet),
    # and the fleet's rate of its type unknown: the ledger not read, unreadable (throttled), or holding only
    # jobs interrupted minutes into their runs (no job of the type ran an hour)
    doc, writes, now = lived([20], every=30, max_runtime_hours=48, max_wait_hours=96)
    doc = on_p4d(doc)
    if fleet == "interrupted early":
        early = SpotSignal(
            "ml.p4d.24xlarge", SignalKind.INTERRUPTION, now - timedelta(minutes=20), "other", 4.0,
            interruptions=1, running_hours=0.25,
        )  # fmt: skip
        fleet = FleetHealth.of("ml.p4d.24xlarge", [early], now, StormPolicy(), exclude_job="bert-spot-1")
    result = decide(doc, now, listed(writes), prices={"ml.p4d.24xlarge": 37.688}, fleet=fleet)
    # Then its 23 minutes of running alone do not move it On-Demand (spot.clone.no-progress and a stop, on
    # the old code): the economics are unknown, the count rule decides (not yet at 1), and the record says why
    assert [d.code for d in result.decisions] == [SpotCode.BELOW_THRESHOLD]
    evidence = result.decisions[0].evidence
    assert evidence["economics"] == "unavailable" and evidence["economics_cause"] == "too-little-running"
    # while with a rated, calm fleet the blended numbers decide, as before
    (calm,) = decide(doc, now, listed(writes), fleet=calm_fleet(now, "ml.p4d.24xlarge")).decisions
    assert calm.code == SpotCode.SPOT_CHEAPER and calm.evidence["economics"] == "computed"


@pytest.mark.parametrize("max_runtime_hours", [24, 120])
def test_the_deadline_is_judged_on_the_least_work_left_not_on_max_runtime(max_runtime_hours: int) -> None:
    # Given 8 x p4d interrupted three times in about 6 hours, 10 minutes lost each time (a checkpoint every
    # 10 minutes, the last one of each stint lost), a team slack of 12 hours, and a MaxRuntimeInSeconds of
    # 24 hours or a generous 120 (an upper bound of the job's work: nothing says how much is left)
    doc, writes, now = lived([110, 100, 120], every=10, max_runtime_hours=max_runtime_hours, max_wait_hours=200)
    doc = on_p4d(doc)
    ends = {t["EndTime"] for t in doc["SecondaryStatusTransitions"] if t["Status"] == "Training"}
    kept = tuple(w for w in writes if w not in ends)
    result = decide(doc, now, listed(kept), SpotPolicy(max_delay_hours=12), {"ml.p4d.24xlarge": 37.688})
    # Then it stays on Spot either way: about an hour of delay so far and one restart are well within the
    # slack (with the upper bound, 120 h read as 26 h late: spot.clone.deadline and a stop on the old code)
    assert [d.code for d in result.decisions] == [SpotCode.SPOT_CHEAPER]
    evidence = result.decisions[0].evidence
    assert evidence["deadline_work_bound"] == "lower"
    assert evidence["least_delay_on_spot_hours"] < 2


def test_the_costs_in_hours_are_named_for_the_whole_cluster_they_measure() -> None:
    # Given 8 x p4d interrupted three times, priced per instance-hour
    doc, writes, now = lived([100, 90, 110], every=10, max_runtime_hours=48, max_wait_hours=96)
    doc = on_p4d(doc)
    (decision,) = decide(doc, now, listed(writes), prices={"ml.p4d.24xlarge": 37.688}).decisions
    evidence = decision.evidence
    # Then each side's cost in hours is hours of the whole cluster (an auditor costing them per instance
    # would understate them 8 times): so named, and the dollars are them x 8 instances x the price
    assert "on_demand_cost_instance_hours" not in evidence and "spot_cost_instance_hours" not in evidence
    for side in ("spot", "on_demand"):
        assert evidence[f"{side}_cost_usd"] == pytest.approx(
            evidence[f"{side}_cost_cluster_hours"] * 8 * 37.688, rel=0.01
        )
