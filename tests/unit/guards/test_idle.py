"""The idle-alarm planner: exact requests, checked against botocore's own parameter validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.guards.base import (
    WHY_REPLANNED,
    WHY_VETOED,
    AlarmNaming,
    AlarmPlan,
    GuardVerdict,
    NoAlarm,
    Notice,
    Verdict,
)
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode, IdlePolicy, IdleRole, grace_remaining
from sagemaker_governance.domain.instances import GPU_COUNTS, Accelerator, InstanceFacts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.pricing import estimate_savings
from tests.builders import job

TOPIC = "arn:aws:sns:us-east-1:123456789012:gov-AlarmTopic"
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn=TOPIC)
CLOUDWATCH: Any = botocore.session.get_session().get_service_model("cloudwatch")


def assert_valid(operation: str, request: dict[str, Any]) -> None:
    report = ParamValidator().validate(request, CLOUDWATCH.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def assert_plan_valid(plan: AlarmPlan) -> None:
    for request in plan.metric_requests:
        assert_valid("PutMetricAlarm", request)
        stats = [q for q in request.get("Metrics", []) if "MetricStat" in q]
        assert len(stats) <= 10
        assert request["TreatMissingData"] == "notBreaching"
    if plan.composite_request is not None:
        assert_valid("PutCompositeAlarm", plan.composite_request)


def hosts_watched(plan: AlarmPlan) -> list[str]:
    out = []
    for request in plan.metric_requests:
        for dim in request.get("Dimensions", []):
            out.append(dim["Value"])
        for query in request.get("Metrics", []):
            if "MetricStat" in query:
                out += [d["Value"] for d in query["MetricStat"]["Metric"]["Dimensions"]]
    return out


def planned(**resource_config: Any) -> AlarmPlan:
    plan = IDLE.plan(job("train-1", ResourceConfig=resource_config), IdlePolicy(), NAMING)
    assert isinstance(plan, AlarmPlan), plan
    assert_plan_valid(plan)
    return plan


def planned_without_pinned(**resource_config: Any) -> AlarmPlan:
    plan = IDLE.plan(job("train-1", ResourceConfig=resource_config), IdlePolicy(pinned_percent=None), NAMING)
    assert isinstance(plan, AlarmPlan), plan
    assert_plan_valid(plan)
    return plan


def test_one_gpu_job_gets_a_single_metric_alarm() -> None:
    plan = planned_without_pinned(InstanceType="ml.g5.2xlarge", InstanceCount=1)
    (request,) = plan.metric_requests
    assert plan.composite_request is None
    assert request["AlarmName"] == "gov-idle-train-1"
    assert request["Namespace"] == "/aws/sagemaker/TrainingJobs"
    assert request["MetricName"] == "GPUUtilization"
    assert request["Dimensions"] == [{"Name": "Host", "Value": "train-1/algo-1"}]
    assert request["Threshold"] == 1.0
    assert request["ComparisonOperator"] == "LessThanThreshold"
    assert (request["EvaluationPeriods"], request["DatapointsToAlarm"], request["Period"]) == (30, 30, 60)
    assert request["AlarmActions"] == [TOPIC]
    assert {"Key": "smgov:training-job", "Value": "train-1"} in request["Tags"]
    assert plan.request() == request


def test_eight_gpu_host_threshold_is_scaled_by_eight() -> None:
    plan = planned(InstanceType="ml.p4d.24xlarge", InstanceCount=1)
    assert plan.metric_requests[0]["Threshold"] == 8.0


def test_two_hosts_alarm_on_the_busiest_host_with_metric_math() -> None:
    plan = planned_without_pinned(InstanceType="ml.g5.12xlarge", InstanceCount=2)
    (request,) = plan.metric_requests
    assert "MetricName" not in request
    assert hosts_watched(plan) == ["train-1/algo-1", "train-1/algo-2"]
    expression = [q for q in request["Metrics"] if q.get("ReturnData")]
    assert expression == [
        {
            "Id": "busiest",
            "Expression": "MAX([m1, m2])",
            "Label": "GPUUtilization of the busiest host (algo-1..algo-2)",
            "ReturnData": True,
        }
    ]
    assert request["Threshold"] == 4.0


@pytest.mark.parametrize(
    ("hosts", "condition"),
    [
        (1, "MIN([m1]) >= 380"),
        (
            2,
            "((MAX([m1, m2]) >= 380) * ((MIN([m1, m2]) >= 380) + (MIN([m1, m2]) < 4) * (AVG([m1, m2]) >= 190))) >= 1",
        ),
    ],
)
def test_the_pinned_trigger_makes_a_minute_where_every_host_is_pinned_breach(hosts: int, condition: str) -> None:
    # Given the default policy (pinned_percent 95) and 4-GPU hosts
    plan = planned(InstanceType="ml.g5.12xlarge", InstanceCount=hosts)
    (request,) = plan.metric_requests
    # Then the alarm reads metric math even over one host: 0 (below the idle threshold) while every host is
    # at or above 95% x 4 GPUs (and, on several hosts, while one is pinned and another below the idle
    # threshold: a stuck host), else the busiest host's value; the idle threshold is unchanged
    ids = ", ".join(f"m{n}" for n in range(1, hosts + 1))
    (expression,) = [q for q in request["Metrics"] if q.get("ReturnData")]
    assert expression["Expression"] == f"IF({condition}, 0, MAX([{ids}]))"
    assert request["Threshold"] == 4.0 and request["ComparisonOperator"] == "LessThanThreshold"
    assert plan.evidence["pinned_threshold"] == 380.0
    assert "pinned" in request["AlarmDescription"]


def test_no_pinned_trigger_at_or_below_the_idle_threshold_or_without_the_judge() -> None:
    plan = IDLE.plan(job("train-1"), IdlePolicy(threshold_percent=96), NAMING)
    assert isinstance(plan, AlarmPlan) and "pinned_threshold" not in plan.evidence
    # The judge off: the guard's config drops the trigger (the alarm alone never stops busy GPUs)
    policy = Policy.model_validate({"judge": {"enabled": False}})
    assert IDLE.config(policy).pinned_percent is None
    assert IDLE.config(Policy()).pinned_percent == 95.0


def test_sixteen_hosts_use_child_alarms_and_one_composite() -> None:
    plan = planned(InstanceType="ml.p4d.24xlarge", InstanceCount=16)
    first, second = plan.metric_requests
    assert first["AlarmName"] == "gov-idle-train-1.hosts-1-10"
    assert second["AlarmName"] == "gov-idle-train-1.hosts-11-16"
    assert hosts_watched(plan) == [f"train-1/algo-{n}" for n in range(1, 17)]
    assert first["AlarmActions"] == [] and second["AlarmActions"] == []
    assert first["Threshold"] == second["Threshold"] == 8.0
    composite = plan.composite_request
    assert composite is not None
    assert composite["AlarmName"] == "gov-idle-train-1"
    assert (
        composite["AlarmRule"] == 'ALARM("gov-idle-train-1.hosts-1-10") AND ALARM("gov-idle-train-1.hosts-11-16")'
    )
    assert composite["AlarmActions"] == [TOPIC]
    assert set(plan.request()) == {"PutMetricAlarm", "PutCompositeAlarm"}
    assert plan.names[0] == "gov-idle-train-1"  # composite first when deleting
    assert IDLE.owned_alarms("train-1", 16, NAMING) == plan.names


def test_heterogeneous_cluster_covers_every_host_and_scales_by_the_gpu_group() -> None:
    plan = planned(
        InstanceGroups=[
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4},
        ]
    )
    assert hosts_watched(plan) == [f"train-1/algo-{n}" for n in range(1, 7)]
    assert plan.metric_requests[0]["Threshold"] == 8.0
    assert "scaling_note" in plan.evidence


def test_mixed_gpu_groups_scale_by_the_smallest_so_a_busy_small_host_never_looks_idle() -> None:
    plan = planned(
        InstanceGroups=[
            {"InstanceGroupName": "big", "InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
            {"InstanceGroupName": "small", "InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
        ]
    )
    # A fully busy 1-GPU host reads 100: with an 8x scaling a 20% team floor (160) would call it idle.
    assert plan.metric_requests[0]["Threshold"] == 1.0


@pytest.mark.parametrize(
    ("instance_type", "code", "why"),
    [
        ("ml.m5.xlarge", IdleCode.NO_GPU, "CPU-only"),
        ("ml.trn1.32xlarge", IdleCode.NO_GPU, "Trainium"),
        ("ml.inf2.24xlarge", IdleCode.NO_GPU, "Inferentia"),
        ("ml.p9.48xlarge", IdleCode.UNKNOWN_INSTANCE, "unknown instance family"),
    ],
)
def test_jobs_without_gpu_utilization_get_no_alarm_and_a_reason(instance_type: str, code: str, why: str) -> None:
    plan = IDLE.plan(
        job("train-1", ResourceConfig={"InstanceType": instance_type, "InstanceCount": 2}), IdlePolicy(), NAMING
    )
    assert isinstance(plan, NoAlarm)
    assert plan.code == code
    assert why in plan.evidence["instance_types"][instance_type]


def test_unknown_group_in_a_heterogeneous_cluster_means_no_alarm() -> None:
    plan = IDLE.plan(
        job(
            "train-1",
            ResourceConfig={
                "InstanceGroups": [
                    {"InstanceGroupName": "a", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
                    {"InstanceGroupName": "b", "InstanceType": "ml.p7.48xlarge", "InstanceCount": 1},
                ]
            },
        ),
        IdlePolicy(),
        NAMING,
    )
    assert isinstance(plan, NoAlarm) and plan.code == IdleCode.UNKNOWN_INSTANCE


def test_a_type_ec2_could_not_size_now_is_no_settled_answer() -> None:
    # Given a job on a type our table lacks, whose EC2 lookup could not answer (throttled)
    g5g = "ml.g5g.16xlarge"
    failed = InstanceFacts(
        instance_type=g5g, accelerator=Accelerator.UNKNOWN, note="throttled", lookup_failed=True
    )
    one = job("train-1", ResourceConfig={"InstanceType": g5g, "InstanceCount": 1})
    # When it is planned, then no alarm, provisional: "cannot know now", with the type that failed
    plan = IDLE.plan(one, IdlePolicy(), NAMING, resolved={g5g: failed})
    assert isinstance(plan, NoAlarm) and plan.code == IdleCode.UNKNOWN_INSTANCE
    assert plan.provisional and plan.evidence["lookup_failed"] == [g5g]
    # and a type nobody knows for good (EC2 was asked and does not know it) is a settled answer
    plan = IDLE.plan(
        job("train-1", ResourceConfig={"InstanceType": "ml.p9.48xlarge", "InstanceCount": 1}), IdlePolicy(), NAMING
    )
    assert isinstance(plan, NoAlarm) and not plan.provisional and "lookup_failed" not in plan.evidence


def test_a_failed_lookup_beside_a_type_unknown_for_good_is_settled() -> None:
    # Whatever EC2 answers later for g5g, p9 keeps the job without an idle alarm: nothing to ask again
    failed = InstanceFacts(
        instance_type="ml.g5g.16xlarge", accelerator=Accelerator.UNKNOWN, note="throttled", lookup_failed=True
    )
    groups = [
        {"InstanceGroupName": "a", "InstanceType": "ml.g5g.16xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "b", "InstanceType": "ml.p9.48xlarge", "InstanceCount": 1},
    ]
    plan = IDLE.plan(
        job("train-1", ResourceConfig={"InstanceGroups": groups}),
        IdlePolicy(),
        NAMING,
        resolved={"ml.g5g.16xlarge": failed},
    )
    assert isinstance(plan, NoAlarm) and plan.code == IdleCode.UNKNOWN_INSTANCE and not plan.provisional


def test_team_override_requires_a_minimum_utilization() -> None:
    policy = Policy.model_validate(
        {"idle": {"threshold_percent": 1}, "teams": {"nlp": {"idle": {"threshold_percent": 60}}}}
    )
    nlp_job = job(
        "train-1", tags={"team": "nlp"}, ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}
    )
    plan = IDLE.plan(nlp_job, IDLE.config(policy.for_job(nlp_job)), NAMING)
    assert isinstance(plan, AlarmPlan)
    assert plan.metric_requests[0]["Threshold"] == 240.0
    other = job(
        "train-2", tags={"team": "cv"}, ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}
    )
    plan = IDLE.plan(other, IDLE.config(policy.for_job(other)), NAMING)
    assert isinstance(plan, AlarmPlan) and plan.metric_requests[0]["Threshold"] == 4.0


def test_window_and_grace_come_from_the_policy() -> None:
    idle = IdlePolicy(period_seconds=300, evaluation_periods=6, datapoints_to_alarm=5, grace_minutes=45)
    plan = IDLE.plan(job("train-1"), idle.model_copy(update={"pinned_percent": None}), NAMING)
    assert isinstance(plan, AlarmPlan)
    request = plan.metric_requests[0]
    assert (request["Period"], request["EvaluationPeriods"], request["DatapointsToAlarm"]) == (300, 6, 5)
    assert plan.evidence["grace_minutes"] == 45


@pytest.mark.parametrize(
    "fields",
    [
        {"datapoints_to_alarm": 31, "evaluation_periods": 30},
        {"period_seconds": 90},
        {"period_seconds": 3600, "evaluation_periods": 25, "datapoints_to_alarm": 25},
        {"threshold_percent": 0},
        {"prices": {"ml.p5.48xlarge": -1}},
        {"unknown": 1},
    ],
)
def test_invalid_idle_policies_are_rejected(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        IdlePolicy.model_validate(fields)


def test_docstring_example_is_a_valid_policy() -> None:
    doc = IdlePolicy.__doc__ or ""
    example = yaml.safe_load(doc.split("Example:", 1)[1])
    assert IDLE.config(Policy.model_validate(example)).prices == {"ml.p4d.24xlarge": 37.69}


_GPU_TYPES = [f"ml.{family}.{size}" for family, sizes in GPU_COUNTS.items() for size in sizes]


@settings(max_examples=60, deadline=None)
@given(
    instance_type=st.sampled_from(_GPU_TYPES),
    hosts=st.integers(min_value=1, max_value=120),
    threshold=st.floats(min_value=0.1, max_value=100),
    periods=st.integers(min_value=1, max_value=60),
    name=st.from_regex(r"[a-zA-Z0-9](-?[a-zA-Z0-9]){0,31}", fullmatch=True),  # job names: at most 63
)
def test_every_planned_request_passes_botocore_validation(
    instance_type: str, hosts: int, threshold: float, periods: int, name: str
) -> None:
    idle = IdlePolicy(threshold_percent=threshold, evaluation_periods=periods, datapoints_to_alarm=periods)
    plan = IDLE.plan(
        job(name, ResourceConfig={"InstanceType": instance_type, "InstanceCount": hosts}), idle, NAMING
    )
    assert isinstance(plan, AlarmPlan)
    assert_plan_valid(plan)
    assert sorted(hosts_watched(plan), key=lambda h: int(h.rsplit("-", 1)[1])) == [
        f"{name}/algo-{n}" for n in range(1, hosts + 1)
    ]


def test_the_validation_helper_does_catch_a_bad_request() -> None:
    plan = planned(InstanceType="ml.g5.2xlarge", InstanceCount=1)
    bad = {**plan.metric_requests[0], "EvaluationPeriods": "thirty", "AlarmName": "x" * 256}
    with pytest.raises(AssertionError):
        assert_valid("PutMetricAlarm", bad)


# ---- the stopper's judgement of the notifying alarm --------------------------------------------

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def training_job(started: datetime, *, status: str = "InProgress", secondary: str = "Training") -> TrainingJob:
    millis = str(int(started.timestamp() * 1000))
    return job(
        TrainingJobStatus=status,
        SecondaryStatus=secondary,
        TrainingStartTime=millis,
        SecondaryStatusTransitions=[
            {"Status": "Starting", "StartTime": str(int((started - timedelta(minutes=5)).timestamp() * 1000))},
            {"Status": "Training", "StartTime": millis},
        ],
    )


def judge(j: TrainingJob, mode: Mode = Mode.ENFORCE, *, changed_at: datetime = NOW, **kw: Any) -> GuardVerdict:
    notice = Notice(job=j, mode=mode, now=NOW, naming=NAMING, alarm_changed_at=changed_at)
    return IDLE.judge(IdleRole.NOTIFYING, notice, IdlePolicy(**kw))


def decide(j: TrainingJob, mode: Mode = Mode.ENFORCE, **kw: Any) -> str:
    return judge(j, mode, **kw).decision.code


def test_idle_after_grace_is_stopped() -> None:
    assert decide(training_job(NOW - timedelta(hours=2))) == IdleCode.STOP


def test_within_grace_is_not_stopped() -> None:
    j = training_job(NOW - timedelta(minutes=10))
    assert decide(j) == IdleCode.GRACE
    assert grace_remaining(j, IdlePolicy(), NOW) == timedelta(minutes=10)


def test_spot_restart_starts_a_new_grace_period() -> None:
    # Given a job that trained for hours, was interrupted and re-entered Training 5 minutes ago
    first = NOW - timedelta(hours=3)
    j = job(
        SecondaryStatus="Training",
        SecondaryStatusTransitions=[
            {"Status": "Training", "StartTime": str(int(first.timestamp() * 1000))},
            {"Status": "Interrupted", "StartTime": str(int((NOW - timedelta(minutes=30)).timestamp() * 1000))},
            {"Status": "Training", "StartTime": str(int((NOW - timedelta(minutes=5)).timestamp() * 1000))},
        ],
    )
    assert decide(j) == IdleCode.GRACE


@pytest.mark.parametrize("secondary", ["Uploading", "Interrupted", "Downloading", "Restarting"])
def test_other_phases_are_never_stopped(secondary: str) -> None:
    assert decide(training_job(NOW - timedelta(hours=2), secondary=secondary)) == IdleCode.NOT_TRAINING


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped", "Stopping"])
def test_a_job_that_ended_is_already_done(status: str) -> None:
    assert (
        decide(training_job(NOW - timedelta(hours=2), status=status, secondary=status)) == IdleCode.ALREADY_ENDED
    )


def test_an_old_notification_is_not_acted_on() -> None:
    assert decide(training_job(NOW - timedelta(hours=2)), changed_at=NOW - timedelta(hours=1)) == IdleCode.STALE


def test_disabled_guard_does_nothing() -> None:
    assert decide(training_job(NOW - timedelta(hours=2)), enabled=False) == IdleCode.DISABLED


def test_audit_mode_decides_the_same_but_does_not_act() -> None:
    verdict = judge(training_job(NOW - timedelta(hours=2)), Mode.AUDIT)
    assert verdict.verdict is Verdict.STOP and verdict.decision.action is Action.STOP
    assert verdict.decision.code == IdleCode.STOP
    assert not verdict.decision.acts


def test_the_stop_tells_the_owner_how_to_declare_long_quiet_phases_on_the_job() -> None:
    remedy = judge(training_job(NOW - timedelta(hours=2)), Mode.ENFORCE).decision.remedy or ""
    assert "smgov:idle-minutes" in remedy and "judge.max_declared_minutes" in remedy and "from 10 to" in remedy


def test_too_early_and_stale_reset_the_metric_alarms_and_stop_does_not() -> None:
    assert judge(training_job(NOW - timedelta(minutes=10))).reset == ("gov-idle-job-1",)
    stale = judge(training_job(NOW - timedelta(hours=2)), changed_at=NOW - timedelta(hours=1))
    assert stale.reset == ("gov-idle-job-1",)
    stop = judge(training_job(NOW - timedelta(hours=2)))
    assert stop.reset == stop.arm == stop.disarm == ()


def test_an_exempted_job_is_judged_idle_but_not_stopped() -> None:
    job_ = training_job(NOW - timedelta(hours=2))
    notice = Notice(job=job_, mode=Mode.ENFORCE, now=NOW, naming=NAMING, exempted_by="INC-1")
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, IdlePolicy())
    assert verdict.verdict is Verdict.EXEMPTED and verdict.decision.code == IdleCode.EXEMPTED
    assert verdict.decision.action is Action.STOP and not verdict.decision.acts


def test_only_the_notifying_alarm_acts() -> None:
    assert IDLE.role_of("gov-idle-train-1", "train-1", NAMING) == IdleRole.NOTIFYING
    assert IDLE.role_of("gov-idle-train-1.hosts-1-10", "train-1", NAMING) == IdleRole.CHILD
    assert IDLE.role_of("gov-idle-train-10", "train-1", NAMING) is None
    assert IDLE.acts_on(IdleRole.NOTIFYING) and not IDLE.acts_on(IdleRole.CHILD)


def test_savings_are_remaining_runtime_times_instances_times_price() -> None:
    # 24 h allowed, 2 h elapsed, 2 x ml.g5.12xlarge at a team price of 10 USD/h -> 22 h x 2 x 10
    j = job(
        TrainingStartTime=str(int((NOW - timedelta(hours=2)).timestamp() * 1000)),
        ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
        StoppingCondition={"MaxRuntimeInSeconds": 86_400},
    )
    estimate = estimate_savings(j, {**IdlePolicy(prices={"ml.g5.12xlarge": 10.0}).price_table()}, NOW)
    assert estimate.usd == pytest.approx(440.0)
    assert estimate.evidence()["remaining_runtime_seconds"] == 22 * 3600


def test_unpriced_instance_types_are_named_not_guessed() -> None:
    j = job(ResourceConfig={"InstanceType": "ml.g6e.48xlarge", "InstanceCount": 1})
    estimate = estimate_savings(j, IdlePolicy().price_table(), NOW)
    assert estimate.usd == 0 and estimate.unpriced_types == ("ml.g6e.48xlarge",)


def test_an_unjudged_pinned_firing_recreates_the_alarms_without_the_trigger_and_never_stops() -> None:
    # Given the judge off (its config: no pinned trigger) and a firing of an alarm created with it
    policy = Policy.model_validate({"mode": "enforce", "judge": {"enabled": False}})
    config = IDLE.config(policy)
    assert config.pinned_percent is None
    j = training_job(NOW - timedelta(hours=2))
    notice = Notice(job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=NOW, unjudged_pinned=True)
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, config)
    # Then no stop: the alarm is re-created as planned now (no IF(...) pinned expression in its metrics, no
    # pinned words in its description) over the window, and reset
    assert verdict.decision.code == IdleCode.PINNED_UNJUDGED and not verdict.stops
    (request,) = verdict.rewindow
    assert "IF(" not in str(request.get("Metrics", "")) and "hang trigger" not in request["AlarmDescription"]
    assert WHY_REPLANNED in request["AlarmDescription"] and WHY_VETOED not in request["AlarmDescription"]
    assert verdict.reset == (request["AlarmName"],)
    # while the same firing under a judge that is on is judged as before (the stall judge decides)
    on = IDLE.config(Policy.model_validate({"mode": "enforce"}))
    assert IDLE.judge(IdleRole.NOTIFYING, notice.model_copy(update={"unjudged_pinned": False}), on).stops


def test_the_guard_says_it_plans_the_pinned_trigger_exactly_when_its_plan_has_one() -> None:
    # (the stopper re-plans an older alarm's pinned trigger when the current plan has none)
    j = training_job(NOW - timedelta(hours=2))
    for config in (IdlePolicy(), IdlePolicy(pinned_percent=None), IdlePolicy(threshold_percent=96)):
        plan = IDLE.plan(j, config, NAMING)
        assert isinstance(plan, AlarmPlan)
        assert IDLE.plans_pinned_trigger(config) == ("pinned_threshold" in plan.evidence), config


@pytest.mark.parametrize(
    ("mode", "verdict", "exempted_by", "holds"),
    [
        ("audit", Verdict.STOP, None, True),  # a would-stop: the stretch is reported
        ("enforce", Verdict.STOP, None, False),  # the job is stopped: nothing to hold
        ("enforce", Verdict.EXEMPTED, "benchmark", True),
        ("enforce", Verdict.DISABLED, None, True),
        ("enforce", Verdict.VETOED, None, False),  # the judge's veto: judged again (the reconciler re-arms it)
        ("audit", Verdict.TOO_EARLY, None, False),
    ],
)
def test_a_judgement_holds_its_alarms_stretch_only_when_it_settles_it_without_acting(
    mode: str, verdict: Verdict, exempted_by: str | None, holds: bool
) -> None:
    action = Action.STOP if verdict in (Verdict.STOP, Verdict.EXEMPTED) else Action.NONE
    decision = Decision(
        rule="idle-guard",
        code="idle.test.verdict",
        action=action,
        mode=Mode(mode),
        reason="r",
        exempted_by=exempted_by,
    )
    assert GuardVerdict(verdict=verdict, decision=decision).holds is holds


def test_the_idle_alarm_muted_is_the_notifying_one() -> None:
    head = "gov-idle-train-1"
    assert IDLE.muted("train-1", [head, f"{head}.hosts-1-10"], NAMING) == (head,)
    assert IDLE.muted("train-1", [f"{head}.hosts-1-10"], NAMING) == ()


def fired_notice(j: TrainingJob, alarm: dict[str, Any]) -> Notice:
    """The notice of ``alarm`` (a planned PutMetricAlarm request) firing, its definition as its SNS message
    repeats it (``events/alarms.py``)."""
    period = alarm.get("Period") or alarm["Metrics"][0]["MetricStat"]["Period"]
    evidence = {
        "alarm": alarm["AlarmName"],
        "threshold": alarm["Threshold"],
        "comparison": alarm["ComparisonOperator"],
        "period_seconds": period,
        "evaluation_periods": alarm["EvaluationPeriods"],
        "datapoints_to_alarm": alarm["DatapointsToAlarm"],
    }
    return Notice(job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=NOW, evidence=evidence)


def alarm_under(j: TrainingJob, config: IdlePolicy) -> dict[str, Any]:
    plan = IDLE.plan(j, config, NAMING)
    assert isinstance(plan, AlarmPlan)
    (request,) = plan.metric_requests
    return request


@pytest.mark.parametrize(
    ("then", "now"),
    [
        ({"threshold_percent": 10}, {"threshold_percent": 1}),  # the threshold lowered
        ({"evaluation_periods": 20, "datapoints_to_alarm": 20}, {}),  # the window lengthened to 30 minutes
    ],
    ids=["threshold-lowered", "window-lengthened"],
)
def test_an_alarm_stricter_than_the_current_plan_is_re_planned_not_obeyed(
    then: dict[str, Any], now: dict[str, Any]
) -> None:
    # Given a job whose alarm was planned under an earlier, stricter policy (the stall judge on, as by default:
    # a window shorter than the judge's is its trigger, so the judge off would widen it as idle.skip.trigger)
    j = training_job(NOW - timedelta(hours=2))
    notice = fired_notice(j, alarm_under(j, IdlePolicy(**then)))
    current = IdlePolicy(**now)
    # When it fires under the current policy
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, current)
    # Then the job is not stopped: its alarm is put again exactly as planned now, and reset
    assert verdict.decision.code == IdleCode.STRICTER_ALARM and not verdict.stops
    (request,) = verdict.rewindow
    planned_now = {k: v for k, v in alarm_under(j, current).items() if k != "Tags"}
    assert request == planned_now
    assert verdict.reset == (request["AlarmName"],)
    assert verdict.decision.evidence["planned_threshold"] == planned_now["Threshold"]


def test_an_alarm_laxer_than_the_current_plan_stops_and_says_the_threshold_it_applied() -> None:
    # Given a job whose alarm was planned at 0.5 % per GPU, and the policy raised to 1 % since
    j = training_job(NOW - timedelta(hours=2))
    notice = fired_notice(j, alarm_under(j, IdlePolicy(pinned_percent=None, threshold_percent=0.5)))
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, IdlePolicy(pinned_percent=None))
    # Then it is judged as before (a stop), and the record states the 0.5 % the alarm applied, not the 1 %
    assert verdict.stops and verdict.decision.code == IdleCode.STOP
    assert verdict.decision.evidence["threshold_percent_per_gpu_applied"] == 0.5
    assert verdict.decision.evidence["threshold_percent_per_gpu"] == 1.0  # the policy's now
