"""The minimum-utilization guard: notices first, a stop only after unheeded notices, never in grace or on
missing data; off by default and silent where it is off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator
from pydantic import ValidationError

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.guards.base import (
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    DescribedAlarm,
    NoAlarm,
    Notice,
    Verdict,
    metric_alarm_terms,
)
from sagemaker_governance.domain.guards.efficiency import (
    EFFICIENCY,
    EfficiencyGuardCode,
    EfficiencyPolicy,
    EfficiencyRole,
)
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.service.guard_alarms import GuardAlarms
from sagemaker_governance.service.recording import Trigger
from tests.builders import job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:alarms")
MODEL: Any = botocore.session.get_session().get_service_model("cloudwatch")
ON = {"enabled": True, "min_gpu_percent": 50, "window_minutes": 60, "grace_minutes": 30}


def training(minutes_ago: float, *, instance_type: str = "ml.g5.12xlarge", count: int = 2, **extra: Any) -> Any:
    started = NOW - timedelta(minutes=minutes_ago)
    return job(
        TrainingJobStatus="InProgress",
        SecondaryStatus="Training",
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 50},
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": started.isoformat()}],
        TrainingStartTime=started.isoformat(),
        **extra,
    )


def notice(j: Any, mode: Mode = Mode.ENFORCE) -> Notice:
    return Notice(job=j, mode=mode, now=NOW, naming=NAMING, alarm_changed_at=NOW - timedelta(minutes=1))


def test_off_by_default() -> None:
    assert EFFICIENCY.config(Policy()).enabled is False


def test_the_notice_alarm_is_the_mean_over_the_gpu_hosts_below_the_minimum_and_never_on_missing_data() -> None:
    plan = EFFICIENCY.plan(training(0), EfficiencyPolicy(**ON), NAMING)
    assert isinstance(plan, AlarmPlan)
    (alarm,) = plan.alarms
    request = alarm.request
    assert alarm.role == EfficiencyRole.NOTICE and request["AlarmName"] == "gov-idle-job-1.efficiency"
    assert not ParamValidator().validate(request, MODEL.operation_model("PutMetricAlarm").input_shape).has_errors()
    assert request["Threshold"] == 200.0  # 50% per GPU x 4 GPUs of ml.g5.12xlarge
    assert request["TreatMissingData"] == "notBreaching"
    assert request["EvaluationPeriods"] == request["DatapointsToAlarm"] == 12  # 60 minutes of 5-minute periods
    assert [q["Expression"] for q in request["Metrics"] if "Expression" in q] == ["AVG([m1, m2])"]


def test_a_stop_alarm_only_when_the_policy_asks_for_stops_over_every_notice_and_a_window_more() -> None:
    plan = EFFICIENCY.plan(training(0), EfficiencyPolicy(**ON, stop_after_notices=3), NAMING)
    assert isinstance(plan, AlarmPlan)
    stop = next(a.request for a in plan.alarms if a.role == EfficiencyRole.STOP)
    assert stop["AlarmName"] == "gov-idle-job-1.efficiency-stop"
    assert stop["EvaluationPeriods"] == 48  # (3 + 1) x 60 minutes / 5
    with pytest.raises(ValidationError):
        EfficiencyPolicy(**{**ON, "window_minutes": 725}, stop_after_notices=1)  # 2 x 725 min > one day


def test_no_alarm_without_gpus() -> None:
    cpu = EFFICIENCY.plan(training(0, instance_type="ml.m5.xlarge"), EfficiencyPolicy(**ON), NAMING)
    assert isinstance(cpu, NoAlarm) and cpu.code == EfficiencyGuardCode.NO_GPU
    assert not EFFICIENCY.watchable(training(0, instance_type="ml.m5.xlarge"))  # the event says: no re-read


def test_an_event_that_does_not_say_what_the_job_runs_on_is_read_again() -> None:
    # No ResourceConfig in the event: no proof of a CPU job (DescribeTrainingJob says, on the re-read)
    assert EFFICIENCY.watchable(job(SecondaryStatus="Training", ResourceConfig=None))


def valid(operation: str, request: dict[str, Any]) -> bool:
    shape = MODEL.operation_model(operation).input_shape
    return not ParamValidator().validate(request, shape).has_errors()


def test_above_ten_hosts_one_alarm_per_ten_hosts_under_a_composite_that_notifies() -> None:
    # Given a 23-host job (one metric alarm reads at most 10 metrics)
    plan = EFFICIENCY.plan(training(0, count=23), EfficiencyPolicy(**ON), NAMING)
    # Then the notice is a composite alarm over three children (1-10, 11-20, 21-23), each the mean of its hosts
    assert isinstance(plan, AlarmPlan)
    head = "gov-idle-job-1.efficiency"
    children = [f"{head}.hosts-1-10", f"{head}.hosts-11-20", f"{head}.hosts-21-23"]
    assert [a.name for a in plan.alarms] == [*children, head]
    assert plan.composite_request is not None and valid("PutCompositeAlarm", plan.composite_request)
    assert plan.composite_request["AlarmRule"] == " AND ".join(f'ALARM("{c}")' for c in children)
    assert plan.composite_request["AlarmActions"] == NAMING.actions
    for request in plan.metric_requests:
        assert valid("PutMetricAlarm", request)
        assert request["AlarmActions"] == [] and request["Threshold"] == 200.0
        assert request["TreatMissingData"] == "notBreaching"
    first, _, last = plan.metric_requests
    hosts = [q["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for q in first["Metrics"] if "MetricStat" in q]
    assert hosts == [f"job-1/algo-{n}" for n in range(1, 11)]
    assert [q["Expression"] for q in last["Metrics"] if "Expression" in q] == ["AVG([m21, m22, m23])"]
    assert plan.names[0] == head  # deleted before its children


def test_every_group_below_the_minimum_means_the_jobs_mean_is_below_it() -> None:
    """What the composite claims: the AND of "group mean < t" implies "job mean < t" (a weighted mean of
    values below t is below t); the converse does not hold, so a job with one busy group is not told."""
    threshold = 200.0
    groups = [[150.0] * 10, [190.0] * 10, [199.0] * 3]
    means = [sum(g) / len(g) for g in groups]
    job_mean = sum(sum(g) for g in groups) / sum(len(g) for g in groups)
    assert all(m < threshold for m in means) and job_mean < threshold
    busy = [[100.0] * 10, [100.0] * 10, [390.0] * 3]  # job mean 177: below, but one group is busy
    assert sum(map(sum, busy)) / 23 < threshold and not all(sum(g) / len(g) < threshold for g in busy)


def test_above_ten_hosts_with_stops_two_composites_deleted_one_per_request() -> None:
    from sagemaker_governance.domain.alarm_deletion import deletion_batches
    from sagemaker_governance.domain.guards.base import deletion_units

    plan = EFFICIENCY.plan(training(0, count=12), EfficiencyPolicy(**ON, stop_after_notices=2), NAMING)
    assert isinstance(plan, AlarmPlan)
    composites = [a for a in plan.alarms if a.kind.value == "composite"]
    assert [a.role for a in composites] == [EfficiencyRole.NOTICE, EfficiencyRole.STOP]
    stop_child = next(a.request for a in plan.alarms if a.role == EfficiencyRole.STOP_CHILD)
    assert stop_child["EvaluationPeriods"] == 36  # (2 + 1) x 60 minutes of 5-minute periods
    owned = EFFICIENCY.owned_alarms("job-1", 12, NAMING)
    assert set(owned) == {a.name for a in plan.alarms}
    units = deletion_units(owned)
    batches = [[name for i in batch for name in units[i]] for batch in deletion_batches(units)]
    heads = {a.name for a in composites}
    assert all(sum(name in heads for name in batch) == 1 for batch in batches)
    assert all(batch[0] in heads for batch in batches)  # a composite before its children


def test_above_ten_hosts_the_grace_period_resets_the_children_and_only_the_composites_act() -> None:
    config = EfficiencyPolicy(**ON)
    verdict = EFFICIENCY.judge(EfficiencyRole.NOTICE, notice(training(60, count=12)), config)
    head = "gov-idle-job-1.efficiency"
    assert verdict.verdict is Verdict.TOO_EARLY  # a composite follows its children: they are what is reset
    assert verdict.reset == (f"{head}.hosts-1-10", f"{head}.hosts-11-12")
    assert EFFICIENCY.role_of(f"{head}.hosts-1-10", "job-1", NAMING) == EfficiencyRole.NOTICE_CHILD
    assert EFFICIENCY.role_of(f"{head}-stop.hosts-1-10", "job-1", NAMING) == EfficiencyRole.STOP_CHILD
    assert not EFFICIENCY.acts_on(EfficiencyRole.NOTICE_CHILD) and EFFICIENCY.acts_on(EfficiencyRole.STOP)


def test_a_lost_composite_or_child_makes_the_set_incomplete() -> None:
    head = "gov-idle-job-1.efficiency"
    children = [f"{head}.hosts-1-10", f"{head}.hosts-11-12"]
    assert not EFFICIENCY.incomplete("job-1", [head, *children], NAMING)
    assert EFFICIENCY.incomplete("job-1", children, NAMING)  # the composite is gone
    assert EFFICIENCY.incomplete("job-1", [head, children[1]], NAMING)  # a child between others is gone
    assert EFFICIENCY.incomplete("job-1", [head, *children, f"{head}-stop.hosts-1-10"], NAMING)
    assert not EFFICIENCY.incomplete("job-1", ["gov-idle-job-1.efficiency"], NAMING)  # up to 10 hosts


def test_a_heterogeneous_cluster_above_ten_hosts_never_waits_on_a_child_without_gpus() -> None:
    groups = [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 8},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.4xlarge", "InstanceCount": 8},
    ]
    j = job(
        TrainingJobStatus="InProgress",
        SecondaryStatus="Training",
        ResourceConfig={"InstanceGroups": groups, "VolumeSizeInGB": 50},
    )
    plan = EFFICIENCY.plan(j, EfficiencyPolicy(**ON), NAMING)
    assert isinstance(plan, AlarmPlan) and plan.composite_request is not None
    assert plan.composite_request["AlarmRule"].startswith("(NOT (OK(")
    assert {r["TreatMissingData"] for r in plan.metric_requests} == {"missing"}


def mixed(groups: list[tuple[str, int]]) -> Any:
    started = NOW - timedelta(hours=5)
    return job(
        TrainingJobStatus="InProgress",
        SecondaryStatus="Training",
        ResourceConfig={
            "InstanceGroups": [
                {"InstanceGroupName": f"g{n}", "InstanceType": t, "InstanceCount": c}
                for n, (t, c) in enumerate(groups)
            ],
            "VolumeSizeInGB": 50,
        },
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": started.isoformat()}],
        TrainingStartTime=started.isoformat(),
    )


@pytest.mark.parametrize(
    "groups",
    [
        [("ml.p4d.24xlarge", 1), ("ml.g5.xlarge", 3)],  # 8 and 1 GPUs per host
        [("ml.g5.xlarge", 2), ("ml.g5.12xlarge", 2), ("ml.p4d.24xlarge", 2)],  # 1, 4 and 8
        [("ml.p4d.24xlarge", 9), ("ml.g5.xlarge", 6), ("ml.c5.4xlarge", 2)],  # above 10 hosts, a CPU group
    ],
)
def test_gpu_groups_of_different_sizes_are_never_below_the_minimum_when_every_gpu_meets_it(
    groups: list[tuple[str, int]],
) -> None:
    # Given a cluster whose GPU groups differ in GPUs per host (SageMaker does not say which host is which)
    config = EfficiencyPolicy(**ON, stop_after_notices=1)
    plan = EFFICIENCY.plan(mixed(groups), config, NAMING)
    assert isinstance(plan, AlarmPlan)
    # When every GPU is exactly at the minimum, each host publishes min x its own GPU count
    hosts = [
        config.min_gpu_percent * instance_facts(t).gpus
        for t, c in groups
        if instance_facts(t).publishes_gpu_utilization
        for _ in range(c)
    ]
    # Then whichever hosts an alarm averages (any 10 of them: the assignment is unknown), never below it
    smallest = min(instance_facts(t).gpus for t, _ in groups if instance_facts(t).publishes_gpu_utilization)
    assert plan.evidence["gpus_per_host_for_scaling"] == smallest and "scaling_note" in plan.evidence
    for request in plan.metric_requests:
        assert request["Threshold"] == config.min_gpu_percent * smallest
        assert min(hosts) >= request["Threshold"]  # so is the mean of any of them


def test_the_threshold_of_gpu_groups_of_one_size_is_unchanged() -> None:
    plan = EFFICIENCY.plan(mixed([("ml.g5.12xlarge", 2), ("ml.g6.12xlarge", 2)]), EfficiencyPolicy(**ON), NAMING)
    assert isinstance(plan, AlarmPlan) and plan.metric_requests[0]["Threshold"] == 200.0
    assert "scaling_note" not in plan.evidence


def test_beyond_what_a_composite_alarm_rule_allows_no_alarm() -> None:
    many = EFFICIENCY.plan(training(0, count=1001), EfficiencyPolicy(**ON), NAMING)
    assert isinstance(many, NoAlarm) and many.code == EfficiencyGuardCode.TOO_MANY_HOSTS
    assert "children" in many.evidence["composite_limits_exceeded"]


def test_a_notice_tells_the_owner_and_leaves_its_alarm_in_alarm() -> None:
    # one notice per stretch below the minimum: a reset alarm returns to ALARM within seconds
    verdict = EFFICIENCY.judge(EfficiencyRole.NOTICE, notice(training(120)), EfficiencyPolicy(**ON))
    assert verdict.verdict is Verdict.NOTIFY and not verdict.stops
    assert verdict.decision.code == EfficiencyGuardCode.NOTIFY and verdict.decision.action is Action.NOTIFY
    assert verdict.decision.remedy and verdict.reset == ()


@pytest.mark.parametrize("role", [EfficiencyRole.NOTICE, EfficiencyRole.STOP])
def test_never_in_the_grace_period_plus_the_window(role: EfficiencyRole) -> None:
    config = EfficiencyPolicy(**ON, stop_after_notices=2)
    early = 30 + (60 if role == EfficiencyRole.NOTICE else 180) - 1
    verdict = EFFICIENCY.judge(role, notice(training(early)), config)
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == EfficiencyGuardCode.GRACE
    assert verdict.reset


def test_a_late_stop_notification_is_judged_as_of_its_alarms_state_change() -> None:
    # Given the stop alarm's 180-minute window after a 30-minute grace, and a stop notification handled 10 minutes
    # after its alarm fired (an SQS retry): 215 minutes into Training now, 205 when the window it reports ended
    config = EfficiencyPolicy(**ON, stop_after_notices=2)
    late = notice(training(215)).model_copy(update={"alarm_changed_at": NOW - timedelta(minutes=10)})
    verdict = EFFICIENCY.judge(EfficiencyRole.STOP, late, config)
    # Then the grace minutes it counted keep the job running; its alarm is reset and fires again if it stays low
    assert verdict.verdict is Verdict.TOO_EARLY and verdict.decision.code == EfficiencyGuardCode.GRACE
    assert verdict.reset


def test_the_stop_after_unheeded_notices_is_a_stop_verdict_for_the_stoppers_review() -> None:
    config = EfficiencyPolicy(**ON, stop_after_notices=2)
    verdict = EFFICIENCY.judge(EfficiencyRole.STOP, notice(training(30 + 180 + 5)), config)
    assert verdict.stops and verdict.decision.code == EfficiencyGuardCode.STOP
    exempt = notice(training(400)).model_copy(update={"exempted_by": "INC-1"})
    assert EFFICIENCY.judge(EfficiencyRole.STOP, exempt, config).verdict is Verdict.EXEMPTED


def test_the_stall_judge_does_not_review_an_efficiency_stop_and_reads_nothing() -> None:
    # What the README says: a job below a minimum is not stalled; the stall judge leaves its stop as it is
    from sagemaker_governance.service.stall_judge import StallJudge

    config = EfficiencyPolicy(**ON, stop_after_notices=2)
    verdict = EFFICIENCY.judge(EfficiencyRole.STOP, notice(training(400)), config)
    policy = Policy.model_validate({"efficiency": {**ON, "stop_after_notices": 2}})
    review = StallJudge(metrics=Refuses(), logs=Refuses()).review(
        EFFICIENCY, EfficiencyRole.STOP, notice(training(400)), verdict, policy
    )
    assert review is verdict and review.decision.code == EfficiencyGuardCode.STOP


def test_not_training_or_ended_is_not_judged() -> None:
    config = EfficiencyPolicy(**ON)
    uploading = training(120).model_copy(update={"secondary_status": "Uploading"})
    ended = training(120).model_copy(update={"status": "Completed"})
    assert EFFICIENCY.judge(EfficiencyRole.NOTICE, notice(uploading), config).verdict is Verdict.NOT_TRAINING
    done = EFFICIENCY.judge(EfficiencyRole.NOTICE, notice(ended), config)
    assert done.verdict is Verdict.ALREADY_ENDED and done.decision.action is Action.NONE


# ---- where it is off it costs nothing --------------------------------------------------------------


class Policies:
    def __init__(self, document: dict[str, Any]) -> None:
        self.policy = Policy.model_validate(document)

    def current(self, max_age_seconds: float | None = None) -> Policy:
        return self.policy


class Refuses:
    """Any AWS call is a failure of the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


def test_off_for_the_team_means_no_call_and_no_record_on_training_or_at_the_end() -> None:
    audit = MemoryAuditSink()
    lifecycle = GuardAlarms(
        EFFICIENCY,
        jobs=Refuses(),
        alarms=Refuses(),
        policies=Policies({"teams": {"nlp": {"efficiency": ON}}}),
        audit=audit,
        clock=lambda: NOW,
        naming=NAMING,
    )
    vision = training(0)  # tagged team=vision: the guard is on for nlp only
    assert lifecycle.react(vision, Trigger(kind="job-state-change")) == []
    assert lifecycle.react(vision.model_copy(update={"status": "Completed"}), Trigger(kind="x")) == []
    assert audit.records == []


def test_only_the_stop_alarm_is_muted_after_a_judgement_that_held_its_stretch() -> None:
    # A notice leaves its alarm in ALARM with its actions on by design (told once per stretch); a stop held
    # (audit mode, exempt, off) mutes the stop alarm, which the reconciler turns on when the guard can act
    head, stop = "gov-idle-job-1.efficiency", "gov-idle-job-1.efficiency-stop"
    assert EFFICIENCY.mutes(EfficiencyRole.STOP) and not EFFICIENCY.mutes(EfficiencyRole.NOTICE)
    assert not EFFICIENCY.mutes(EfficiencyRole.STOP_CHILD)
    assert EFFICIENCY.muted("job-1", [head, stop, f"{stop}.hosts-1-10"], NAMING) == (stop,)
    # and neither is re-armed when left in ALARM with its actions on (no stall judge: nothing vetoes)
    assert not EFFICIENCY.rejudged(EfficiencyRole.STOP) and not EFFICIENCY.rejudged(EfficiencyRole.NOTICE)


def test_a_stop_composite_is_reset_through_its_children() -> None:
    stop = "gov-idle-job-1.efficiency-stop"
    observed = [stop, f"{stop}.hosts-1-10", f"{stop}.hosts-11-12", "gov-idle-job-1.efficiency.hosts-1-10"]
    assert EFFICIENCY.rearm_targets(stop, "job-1", observed, NAMING) == (
        f"{stop}.hosts-1-10",
        f"{stop}.hosts-11-12",
    )
    assert EFFICIENCY.rearm_targets(stop, "job-1", [stop], NAMING) == (stop,)


def firing(j: Any, config: EfficiencyPolicy, role: EfficiencyRole) -> Notice:
    """The notice of ``j``'s ``role`` alarm as planned under ``config`` firing (its message repeats its terms)."""
    plan = EFFICIENCY.plan(j, config, NAMING)
    assert isinstance(plan, AlarmPlan)
    (alarm,) = [a.request for a in plan.alarms if a.role == role]
    terms = {
        "alarm": alarm["AlarmName"],
        "threshold": alarm["Threshold"],
        "comparison": alarm["ComparisonOperator"],
        "period_seconds": alarm["Metrics"][0]["MetricStat"]["Period"],
        "evaluation_periods": alarm["EvaluationPeriods"],
        "datapoints_to_alarm": alarm["DatapointsToAlarm"],
    }
    return notice(j).model_copy(update={"evidence": terms})


@pytest.mark.parametrize("role", [EfficiencyRole.NOTICE, EfficiencyRole.STOP])
def test_a_minimum_lowered_since_the_alarms_were_planned_neither_tells_nor_stops_on_the_old_one(
    role: EfficiencyRole,
) -> None:
    # Given a job whose alarms were planned at a 50 % minimum, and the team's minimum lowered to 20 % since
    j = training(400)
    then, now = (
        EfficiencyPolicy(**ON, stop_after_notices=2),
        EfficiencyPolicy(**{**ON, "min_gpu_percent": 20}, stop_after_notices=2),
    )
    verdict = EFFICIENCY.judge(role, firing(j, then, role), now)
    # Then the alarm is put again as planned now and reset: no notice, no stop
    assert verdict.decision.code == EfficiencyGuardCode.STRICTER_ALARM and verdict.verdict is Verdict.TOO_EARLY
    (request,) = verdict.rewindow
    assert request["Threshold"] == now.min_gpu_percent * 4 and verdict.reset == (request["AlarmName"],)
    # and an alarm planned at a lower minimum than today's is judged on it, and says so
    laxer = EFFICIENCY.judge(role, firing(j, now, role), then)
    assert laxer.decision.code != EfficiencyGuardCode.STRICTER_ALARM
    assert laxer.decision.evidence["min_gpu_percent_applied"] == 20


@pytest.mark.parametrize("role", [EfficiencyRole.NOTICE, EfficiencyRole.STOP])
def test_a_composites_child_planned_at_a_higher_minimum_neither_tells_nor_stops(role: EfficiencyRole) -> None:
    # Given a 12-host job whose alarms (a composite over two children each) were planned at a 50 % minimum, the
    # minimum lowered to 20 % since, and the composite firing: its notification repeats no child's terms, the
    # stopper's DescribeAlarms of the triggering child gives them (Notice.fired_child)
    j = training(400, count=12)
    then, now = (
        EfficiencyPolicy(**ON, stop_after_notices=2),
        EfficiencyPolicy(**{**ON, "min_gpu_percent": 20}, stop_after_notices=2),
    )

    def fired(config: EfficiencyPolicy) -> Notice:
        plan = EFFICIENCY.plan(j, config, NAMING)
        assert isinstance(plan, AlarmPlan)
        (composite,) = [a.name for a in plan.alarms if a.role == role and a.kind is AlarmKind.COMPOSITE]
        child = next(r for r in plan.metric_requests if r["AlarmName"].startswith(f"{composite}.hosts-"))
        definition = DescribedAlarm(name=child["AlarmName"], terms=metric_alarm_terms(child))
        return notice(j).model_copy(update={"evidence": {"alarm": composite}, "fired_child": definition})

    verdict = EFFICIENCY.judge(role, fired(then), now)
    # Then both children are put again as planned now and reset: no notice, no stop
    assert verdict.decision.code == EfficiencyGuardCode.STRICTER_ALARM and verdict.verdict is Verdict.TOO_EARLY
    assert [r["Threshold"] for r in verdict.rewindow] == [now.min_gpu_percent * 4] * 2
    assert verdict.reset == tuple(r["AlarmName"] for r in verdict.rewindow)
    assert all(".hosts-" in name for name in verdict.reset)
    # and a child planned as the policy holds now is judged as before
    assert EFFICIENCY.judge(role, fired(now), now).decision.code != EfficiencyGuardCode.STRICTER_ALARM


def test_a_stop_alarm_left_from_an_earlier_policy_never_stops_once_the_team_says_never_a_stop() -> None:
    # Given a job whose stop alarm was planned under stop_after_notices 3, and the team has set 0 ("never a stop")
    j = training(400)
    then, now = EfficiencyPolicy(**ON, stop_after_notices=3), EfficiencyPolicy(**ON, stop_after_notices=0)
    # When that old stop alarm fires
    verdict = EFFICIENCY.judge(EfficiencyRole.STOP, firing(j, then, EfficiencyRole.STOP), now)
    # Then the job is not stopped: the alarm is not in the plan any more, and nothing is put, reset or muted
    assert not verdict.stops and verdict.decision.code == "efficiency.skip.unplanned-alarm"
    assert verdict.decision.action is Action.NONE and (verdict.rewindow, verdict.reset, verdict.disarm) == (
        (),
        (),
        (),
    )
    # and the notice alarm, still planned, tells as before
    told = EFFICIENCY.judge(EfficiencyRole.NOTICE, firing(j, then, EfficiencyRole.NOTICE), now)
    assert told.decision.code == EfficiencyGuardCode.NOTIFY


NEW_1_GPU = "ml.g8.xlarge"  # a type newer than our table; EC2 says: one NVIDIA GPU


def test_a_gpu_group_of_a_type_the_table_does_not_know_is_sized_by_ec2_or_gets_no_alarm() -> None:
    # Given a cluster of one 8-GPU host and three 1-GPU hosts of a type our table does not know
    assert instance_facts(NEW_1_GPU).accelerator is Accelerator.UNKNOWN
    j = mixed([("ml.p4d.24xlarge", 1), (NEW_1_GPU, 3)])
    config = EfficiencyPolicy(**ON, stop_after_notices=1)
    # When nothing sizes the unknown type: no alarm rather than a threshold scaled without its hosts (their
    # GPUUtilization is averaged with the others: every GPU busy, (800 + 3 x 100) / 4 = 275 < 400)
    unsized = EFFICIENCY.plan(j, config, NAMING)
    assert isinstance(unsized, NoAlarm) and unsized.code == EfficiencyGuardCode.UNKNOWN_INSTANCE
    assert not unsized.provisional
    # When EC2 could not answer now: no alarm either, and the reconciler plans the job again
    failed = InstanceFacts(
        instance_type=NEW_1_GPU, accelerator=Accelerator.UNKNOWN, note="throttled", lookup_failed=True
    )
    retry = EFFICIENCY.plan(j, config, NAMING, resolved={NEW_1_GPU: failed})
    assert isinstance(retry, NoAlarm) and retry.provisional and retry.evidence["lookup_failed"] == [NEW_1_GPU]
    # When EC2 sizes it: the threshold is scaled by the smallest GPU count, 1, and a fully busy job is not below it
    ec2 = InstanceFacts(
        instance_type=NEW_1_GPU, accelerator=Accelerator.NVIDIA_GPU, gpus=1, note="EC2: 1 NVIDIA GPU"
    )
    plan = EFFICIENCY.plan(j, config, NAMING, resolved={NEW_1_GPU: ec2})
    assert isinstance(plan, AlarmPlan) and plan.evidence["gpus_per_host_for_scaling"] == 1
    busy_mean = (800 + 3 * 100) / 4
    assert all(r["Threshold"] <= busy_mean for r in plan.metric_requests)
    # and a job of that type alone is read again on its Training event (EC2 may know it), not passed by
    assert EFFICIENCY.watchable(training(0, instance_type=NEW_1_GPU))


def test_policy_validate_warns_of_a_stop_window_shorter_than_the_healthy_jobs_low_phases() -> None:
    # Given a team that stops after one notice of a 10-minute window (20 minutes below the minimum, no grace)
    quick = {**ON, "window_minutes": 10, "grace_minutes": 0, "stop_after_notices": 1}
    warnings = Policy.model_validate({"teams": {"nlp": {"efficiency": quick}}}).warnings()
    # Then `smgov policy validate` warns: healthy jobs of the calibration traces stay that low for up to 45 minutes
    assert [w.split(":")[0] for w in warnings] == ["teams.nlp.efficiency"]
    assert "20 minutes" in warnings[0]
    # and quick notices without stops, or stops over a long enough window, are fine
    notices_only = {**quick, "stop_after_notices": 0}
    long_enough = {**ON, "window_minutes": 45, "stop_after_notices": 1}
    for section in (notices_only, long_enough):
        assert Policy.model_validate({"teams": {"nlp": {"efficiency": section}}}).warnings() == []
