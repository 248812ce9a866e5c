"""The idle guard against CloudWatch's own limits on alarms (issue 16 item 6).

The limits are read back from AWS's reference as botocore ships it (the ``cloudwatch`` service model: a
member's ``max``, an operation's documentation), not from our belief; the heterogeneous composite is run
through the simulator's alarm evaluator, whose missing-data behaviour is checked against the CloudWatch
user guide's tables (tests/simulation/test_alarm_evaluator.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagemaker_governance.domain.guards.base import (
    MAX_ALARM_RULE_ELEMENTS,
    MAX_ALARM_RULE_LENGTH,
    MAX_COMPOSITE_CHILDREN,
    MAX_METRICS_PER_ALARM,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    CompositeRule,
    NoAlarm,
    rule_elements,
)
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode, IdlePolicy
from smgov.simulation.alarms import ALARM, OK, AlarmEvaluator, CompositeAlarm
from smgov.simulation.metrics import MetricStore, metric_key
from tests.builders import job

TOPIC = "arn:aws:sns:us-east-1:123456789012:gov-AlarmTopic"
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn=TOPIC)
CLOUDWATCH = botocore.session.get_session().get_service_model("cloudwatch")
NAMESPACE = "/aws/sagemaker/TrainingJobs"
EPOCH = datetime(2026, 11, 23, tzinfo=UTC)


def _doc(text: str | None) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text or ""))


def rule_member() -> Any:
    shape = CLOUDWATCH.operation_model("PutCompositeAlarm").input_shape
    assert shape is not None
    return shape.members["AlarmRule"]


def rule_doc() -> str:
    return _doc(rule_member().documentation)


def plan_of(hosts: int = 0, *, naming: AlarmNaming = NAMING, name: str = "train-1", **resource: Any) -> Any:
    """The idle alarms without the pinned trigger (tested in test_idle.py): what is checked here is how
    hosts are grouped and combined."""
    config = resource or {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": hosts}
    return IDLE.plan(job(name, ResourceConfig=config), IdlePolicy(pinned_percent=None), naming)


# ---- the limits, as AWS states them ---------------------------------------------------------------


def test_the_rule_limits_are_the_ones_in_botocores_cloudwatch_model() -> None:
    # Given PutCompositeAlarm's AlarmRule member as botocore ships it
    member = rule_member()
    text = rule_doc()
    # Then our constants are AWS's: the member's max length, and the documented counts
    assert member.metadata["max"] == MAX_ALARM_RULE_LENGTH
    children = re.search(r"can specify as many as (\d+) \"children\" alarms", text)
    elements = re.search(r"can have as many as (\d+) elements", text)
    assert children and int(children.group(1)) == MAX_COMPOSITE_CHILDREN, text
    assert elements and int(elements.group(1)) == MAX_ALARM_RULE_ELEMENTS, text
    # and the operation's own documentation says the same of the underlying alarms
    operation = _doc(CLOUDWATCH.operation_model("PutCompositeAlarm").documentation)
    assert f"can include as many as {MAX_COMPOSITE_CHILDREN} underlying alarms" in operation


def test_deleting_a_jobs_alarms_never_needs_two_composites_in_one_call() -> None:
    # DeleteAlarms: "this total can include no more than one composite alarm" (its API reference). A plan
    # has at most one composite (no second level), so the lifecycle's batches of 100 stay valid.
    text = _doc(CLOUDWATCH.operation_model("DeleteAlarms").documentation)
    assert "can include no more than one composite alarm" in text
    plan = plan_of(1000)
    assert isinstance(plan, AlarmPlan)
    assert [a.kind for a in plan.alarms].count(AlarmKind.COMPOSITE) == 1


def test_a_thousand_hosts_fit_one_composite_and_one_more_is_refused_with_a_code() -> None:
    # Given the largest job one composite can watch (100 children of 10 hosts)
    fits = plan_of(MAX_COMPOSITE_CHILDREN * MAX_METRICS_PER_ALARM)
    assert isinstance(fits, AlarmPlan)
    assert len(fits.metric_requests) == MAX_COMPOSITE_CHILDREN
    # When one host more
    refused = plan_of(MAX_COMPOSITE_CHILDREN * MAX_METRICS_PER_ALARM + 1)
    # Then no alarm, with the decision code and the exceeded limit in the evidence (not 101 alarm names)
    assert isinstance(refused, NoAlarm)
    assert refused.code == IdleCode.TOO_MANY_HOSTS
    assert refused.evidence["composite_limits_exceeded"]["children"] == {"needed": 101, "limit": 100}
    assert refused.evidence["child_alarms_needed"] == 101
    assert "alarms" not in refused.evidence


def test_long_alarm_names_hit_the_rule_length_before_the_child_count() -> None:
    # Given the longest prefix the stack allows and a 63-character job name
    naming = AlarmNaming(prefix="p" * 150 + "-idle-", managed_by="gov", alarm_topic_arn=TOPIC)
    refused = plan_of(500, naming=naming, name="j" * 63)
    assert isinstance(refused, NoAlarm) and refused.code == IdleCode.TOO_MANY_HOSTS
    assert set(refused.evidence["composite_limits_exceeded"]) == {"rule_characters"}


@settings(max_examples=40, deadline=None)
@given(
    hosts=st.integers(min_value=11, max_value=1200),
    prefix=st.integers(min_value=1, max_value=150),
    cpu_hosts=st.integers(min_value=0, max_value=300),
)
def test_every_planned_composite_is_within_every_limit(hosts: int, prefix: int, cpu_hosts: int) -> None:
    naming = AlarmNaming(prefix="g" * prefix + "-", managed_by="gov", alarm_topic_arn=TOPIC)
    groups = [{"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "InstanceCount": hosts}]
    if cpu_hosts:
        groups.append({"InstanceGroupName": "cpu", "InstanceType": "ml.c5.18xlarge", "InstanceCount": cpu_hosts})
    plan = plan_of(naming=naming, InstanceGroups=groups)
    if isinstance(plan, NoAlarm):
        assert plan.code == IdleCode.TOO_MANY_HOSTS
        return
    assert plan.composite_request is not None
    rule = plan.composite_request["AlarmRule"]
    children = {ref for ref in re.findall(r'\("([^"]+)"\)', rule)}
    assert children == set(plan.metric_alarm_names)
    assert len(children) <= MAX_COMPOSITE_CHILDREN
    assert len(rule) <= MAX_ALARM_RULE_LENGTH
    assert rule_elements(rule) <= MAX_ALARM_RULE_ELEMENTS


def test_rule_elements_count_every_reference_and_parenthesis() -> None:
    assert rule_elements('ALARM("a")') == 3
    assert rule_elements('(NOT (OK("a") OR OK("b"))) AND (ALARM("a") OR ALARM("b"))') == 4 * 3 + 3 * 2


# ---- one host is a plain metric alarm -------------------------------------------------------------


@pytest.mark.parametrize("hosts", [1, 11, 21, 101])
def test_an_alarm_over_one_host_is_a_plain_metric_alarm_not_metric_math(hosts: int) -> None:
    # Given a job whose last chunk of hosts holds one host
    plan = plan_of(hosts)
    assert isinstance(plan, AlarmPlan)
    last = plan.metric_requests[-1]
    # Then that alarm reads the host's metric directly (MAX([m]) of one series is no aggregate)
    assert "Metrics" not in last
    assert last["MetricName"] == "GPUUtilization" and last["Statistic"] == "Average"
    assert last["Dimensions"] == [{"Name": "Host", "Value": f"train-1/algo-{hosts}"}]
    # and every alarm that uses metric math combines at least two hosts
    for request in plan.metric_requests:
        stats = [q for q in request.get("Metrics", []) if "MetricStat" in q]
        assert not request.get("Metrics") or len(stats) >= 2


# ---- heterogeneous clusters above 10 hosts: a child without data never blocks ---------------------

HETEROGENEOUS = [
    {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 10},
    {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 5},
]


def run(plan: AlarmPlan, gpu_load: Mapping[int, float | None], minutes: int = 120) -> dict[str, str]:
    """The plan's alarms in the simulator's evaluator: created and reset to OK (as the lifecycle does),
    then ``algo-n`` publishes ``gpu_load[n]`` every minute (hosts absent from it publish nothing)."""
    store = MetricStore()
    evaluator = AlarmEvaluator(store, epoch=EPOCH, account="123456789012", region="us-east-1", on_transition=_drop)
    for alarm in plan.alarms:
        arn = f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{alarm.name}"
        evaluator.upsert({**alarm.request, "AlarmArn": arn}, now=0)
    for name in plan.metric_alarm_names:
        evaluator.set_state(name, OK, 0)
    for n, value in gpu_load.items():
        store.publish(
            metric_key(NAMESPACE, "GPUUtilization", [{"Name": "Host", "Value": f"train-1/algo-{n}"}]), 0, value
        )
    for minute in range(minutes):
        if evaluator.next_due() == minute:
            evaluator.run_due(minute)
    return dict(evaluator.states)


def _drop(_: object) -> None:
    return None


def test_heterogeneous_children_treat_missing_data_as_missing_and_the_rule_tolerates_them() -> None:
    plan = plan_of(InstanceGroups=HETEROGENEOUS)
    assert isinstance(plan, AlarmPlan)
    assert plan.evidence["composite_rule"] == CompositeRule.IDLE_WHERE_DATA.value
    assert plan.composite_request is not None
    assert {r["TreatMissingData"] for r in plan.metric_requests} == {"missing"}
    assert plan.composite_request["AlarmRule"] == (
        '(NOT (OK("gov-idle-train-1.hosts-1-10") OR OK("gov-idle-train-1.hosts-11-15"))) AND '
        '(ALARM("gov-idle-train-1.hosts-1-10") OR ALARM("gov-idle-train-1.hosts-11-15"))'
    )
    # A homogeneous cluster keeps the strict rule and notBreaching
    strict = plan_of(15)
    assert strict.evidence["composite_rule"] == CompositeRule.ALL_IDLE.value
    assert {r["TreatMissingData"] for r in strict.metric_requests} == {"notBreaching"}


def test_a_child_holding_only_cpu_hosts_never_blocks_the_composite() -> None:
    # Given SageMaker put the 10 CPU hosts on algo-1..10 (one child without any data) and the GPUs idle
    plan = plan_of(InstanceGroups=HETEROGENEOUS)
    states = run(plan, {n: 0.0 for n in range(11, 16)})
    # Then the composite fires: the data-less child is INSUFFICIENT_DATA, not OK
    assert states["gov-idle-train-1.hosts-1-10"] == "INSUFFICIENT_DATA"
    assert states["gov-idle-train-1"] == ALARM
    # whereas the strict rule over notBreaching children (the plan before issue 16) would never fire
    strict_children = tuple({**r, "TreatMissingData": "notBreaching"} for r in plan.metric_requests)
    strict_rule = " AND ".join(f'ALARM("{r["AlarmName"]}")' for r in strict_children)
    before = AlarmPlan(
        job_name="train-1",
        what="idle alarms",
        alarms=(
            *(a.model_copy(update={"request": r}) for a, r in zip(plan.alarms[:-1], strict_children, strict=True)),
            plan.alarms[-1].model_copy(update={"request": {**plan.composite_request, "AlarmRule": strict_rule}}),
        ),
        evidence={},
    )
    assert run(before, {n: 0.0 for n in range(11, 16)})["gov-idle-train-1"] == OK


@pytest.mark.parametrize(
    ("load", "why"),
    [
        ({n: 0.0 for n in range(11, 16)} | {12: 800.0}, "one GPU host busy"),
        ({n: 800.0 for n in range(11, 16)}, "all GPU hosts busy"),
        ({}, "no host publishes anything: missing data never stops a job"),
        ({n: 0.0 for n in (1, 2)} | {n: 800.0 for n in (11, 12, 13)}, "GPU hosts in both children, one busy"),
    ],
)
def test_the_composite_does_not_fire_unless_every_host_with_data_is_idle(load: dict[int, float], why: str) -> None:
    states = run(plan_of(InstanceGroups=HETEROGENEOUS), load)
    assert states["gov-idle-train-1"] != ALARM, why


def test_gpu_hosts_spread_over_both_children_fire_only_when_all_are_idle() -> None:
    # Given SageMaker spread the 5 GPU hosts over both children (algo-1, algo-2 and algo-11..13), all idle
    states = run(plan_of(InstanceGroups=HETEROGENEOUS), {n: 0.0 for n in (1, 2, 11, 12, 13)})
    assert states["gov-idle-train-1"] == ALARM


def test_the_composite_rule_parses_as_cloudwatch_documents_it() -> None:
    # NOT binds tighter than AND (the API reference's example "ALARM(a) AND NOT ALARM(b)"); our rule
    # parenthesises anyway. The simulator's parser reads every reference back.
    plan = plan_of(InstanceGroups=HETEROGENEOUS)
    composite = CompositeAlarm.from_description({**plan.composite_request, "AlarmArn": "arn:x"})
    assert composite.children() == set(plan.metric_alarm_names)


# ---- what the reconciler repairs: the set of a job's alarms, judged from their names -----------------


@pytest.mark.parametrize(
    ("observed", "incomplete"),
    [
        (["gov-idle-train-1"], False),  # up to 10 hosts: one alarm
        (["gov-idle-train-1", "gov-idle-train-1.hosts-1-10", "gov-idle-train-1.hosts-11-12"], False),
        (["gov-idle-train-1.hosts-1-10", "gov-idle-train-1.hosts-11-12"], True),  # the composite is gone
        (["gov-idle-train-1.hosts-1-10"], True),  # creation failed after the first child
        (["gov-idle-train-1", "gov-idle-train-1.hosts-1-10", "gov-idle-train-1.hosts-21-25"], True),  # a gap
        (["gov-idle-train-1", "gov-idle-train-1.hosts-x-y"], False),  # not a child name: ignored
    ],
)
def test_a_jobs_idle_alarms_are_incomplete_without_their_composite_or_with_a_gap(
    observed: list[str], incomplete: bool
) -> None:
    assert IDLE.incomplete("train-1", observed, NAMING) is incomplete


@pytest.mark.parametrize("hosts", [1, 10, 11, 20, 21, 999, 1000])
def test_every_complete_plan_is_judged_complete(hosts: int) -> None:
    plan = plan_of(hosts)
    assert isinstance(plan, AlarmPlan)
    assert not IDLE.incomplete("train-1", plan.names, NAMING)
    if hosts > MAX_METRICS_PER_ALARM:  # and without its composite, incomplete
        assert IDLE.incomplete("train-1", plan.metric_alarm_names, NAMING)


@pytest.mark.parametrize(
    ("load", "fires", "why"),
    [
        ({n: 800.0 for n in range(1, 13)}, True, "every host pinned at 100% of 8 GPUs: the hang trigger"),
        ({n: 760.0 for n in range(1, 13)}, True, "every host at 95% per GPU, the trigger's level"),
        ({n: 800.0 for n in range(1, 13)} | {7: 700.0}, False, "one host below 95% per GPU: computing"),
        ({n: 400.0 for n in range(1, 13)}, False, "every host at 50% per GPU: computing"),
    ],
)
def test_the_pinned_trigger_fires_only_when_every_host_is_pinned(
    load: dict[int, float], fires: bool, why: str
) -> None:
    # Given 12 hosts of 8 GPUs (two children and a composite) with the default pinned trigger (95% per GPU)
    plan = IDLE.plan(
        job("train-1", ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 12}),
        IdlePolicy(),
        NAMING,
    )
    assert isinstance(plan, AlarmPlan)
    # Then the simulator's CloudWatch evaluates the IF/MIN metric math: pinned everywhere breaches
    assert (run(plan, load)["gov-idle-train-1"] == ALARM) is fires, why
