"""The alarm evaluator against hand-computed cases and the CloudWatch user guide's missing-data tables."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from smgov.simulation.alarms import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    AlarmDefinitionError,
    AlarmEvaluator,
    CompositeAlarm,
    MetricAlarm,
    Transition,
    decide,
    evaluate_alarm,
)
from smgov.simulation.alarms.metric_math import evaluate_expression
from smgov.simulation.messages import alarm_notification
from smgov.simulation.metrics import MetricStore, metric_key

EPOCH = datetime(2026, 12, 24, 18, 0, tzinfo=UTC)
NS, NAME = "/aws/sagemaker/TrainingJobs", "GPUUtilization"


def host(job: str, n: int) -> list[dict[str, str]]:
    return [{"Name": "Host", "Value": f"{job}/algo-{n}"}]


def single(**overrides: Any) -> dict[str, Any]:
    alarm = {
        "AlarmName": "idle-job",
        "AlarmArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:idle-job",
        "Namespace": NS,
        "MetricName": NAME,
        "Dimensions": host("job", 1),
        "Statistic": "Average",
        "Period": 60,
        "EvaluationPeriods": 3,
        "DatapointsToAlarm": 3,
        "Threshold": 5.0,
        "ComparisonOperator": "LessThanThreshold",
        "TreatMissingData": "missing",
        "AlarmActions": ["arn:aws:sns:us-east-1:123456789012:alarms"],
    }
    alarm.update(overrides)
    return alarm


def points(pattern: str) -> list[float | None]:
    """The user guide's notation: 0 not breaching, X breaching, - missing (threshold: > 1)."""
    return [{"0": 0.0, "X": 5.0, "-": None}[c] for c in pattern.split()]


# ---- the CloudWatch user guide tables (evaluation range 5, greater-than-threshold alarm) ----------

RETAIN = "retain"
TABLE_3_OF_3 = [
    ("0 - X - X", OK, OK, OK, OK),
    ("0 - - - -", OK, OK, OK, OK),
    ("- - - - -", INSUFFICIENT_DATA, RETAIN, ALARM, OK),
    ("0 X X - X", ALARM, ALARM, ALARM, ALARM),
    ("- - - - X", INSUFFICIENT_DATA, RETAIN, ALARM, OK),
    ("X - - - -", ALARM, RETAIN, ALARM, OK),
]
TABLE_2_OF_3 = [
    ("0 - X - X", ALARM, ALARM, ALARM, ALARM),
    ("0 0 X 0 X", ALARM, ALARM, ALARM, ALARM),
    ("0 - X - -", OK, OK, ALARM, OK),
    ("- - - - 0", OK, OK, ALARM, OK),
    ("- - - - X", INSUFFICIENT_DATA, RETAIN, ALARM, OK),
]


@pytest.mark.parametrize(("m", "table"), [(3, TABLE_3_OF_3), (2, TABLE_2_OF_3)])
def test_missing_data_tables_of_the_user_guide(m: int, table: list[tuple[str, ...]]) -> None:
    for row in table:
        pattern, *expected = row
        for treatment, want in zip(("missing", "ignore", "breaching", "notBreaching"), expected, strict=True):
            for current in (OK, ALARM):
                state, *_ = decide(
                    points(pattern),
                    evaluation_periods=3,
                    datapoints_to_alarm=m,
                    treat_missing=treatment,
                    breaches=lambda v: v > 1,
                    current=current,
                )
                assert state == (current if want == RETAIN else want), (m, pattern, treatment, current)


# ---- periods, statistics, operators ------------------------------------------------------------


def test_three_of_three_one_minute_periods_fire_exactly_after_three_idle_minutes() -> None:
    # Given a host busy until minute 10, then idle
    store = MetricStore()
    key = metric_key(NS, NAME, host("job", 1))
    store.publish(key, 0, 90.0)
    store.publish(key, 10, 0.0)
    alarm = MetricAlarm.from_description(single())
    # Then: at minute 12 only minutes 10 and 11 are idle; at 13 minutes 10, 11, 12 are
    assert evaluate_alarm(alarm, store, 12, OK, EPOCH).state == OK
    result = evaluate_alarm(alarm, store, 13, OK, EPOCH)
    assert result.state == ALARM
    assert result.evaluated == ((10, 0.0), (11, 0.0), (12, 0.0))
    assert result.reason.startswith("Threshold Crossed: 3 out of the last 3 datapoints [0.0 (24/12/26 18:12:00)")
    assert "were less than the threshold (5.0) (minimum 3 datapoints for OK -> ALARM transition)" in result.reason


def test_five_minute_average_mixes_busy_and_idle_minutes() -> None:
    # Given busy (80) for minutes 0-6 and idle from 7: the period [5, 10) averages (80*2 + 0*3) / 5 = 32
    store = MetricStore()
    key = metric_key(NS, NAME, host("job", 1))
    store.publish(key, 0, 80.0)
    store.publish(key, 7, 0.0)
    assert store.aggregate(key, 5, 10, "Average") == pytest.approx(32.0)
    assert store.aggregate(key, 5, 10, "Maximum") == 80.0
    assert store.aggregate(key, 5, 10, "Minimum") == 0.0
    assert store.aggregate(key, 5, 10, "Sum") == 160.0
    assert store.aggregate(key, 5, 10, "SampleCount") == 5.0
    alarm = MetricAlarm.from_description(
        single(Period=300, EvaluationPeriods=2, DatapointsToAlarm=2, Threshold=40.0)
    )
    # At minute 15: periods [5,10)=32 and [10,15)=0 are both below 40 -> ALARM
    assert evaluate_alarm(alarm, store, 15, OK, EPOCH).state == ALARM
    # At minute 10 the newest period is [5,10)=32 and [0,5)=80 -> only one breaching -> OK
    assert evaluate_alarm(alarm, store, 10, OK, EPOCH).state == OK


@pytest.mark.parametrize(
    ("operator", "value", "breaches"),
    [
        ("LessThanThreshold", 5.0, False),
        ("LessThanOrEqualToThreshold", 5.0, True),
        ("GreaterThanThreshold", 5.0, False),
        ("GreaterThanOrEqualToThreshold", 5.0, True),
        ("LessThanThreshold", 4.9, True),
    ],
)
def test_comparison_operators_at_the_threshold(operator: str, value: float, breaches: bool) -> None:
    alarm = MetricAlarm.from_description(single(ComparisonOperator=operator))
    assert alarm.breaches(value) is breaches


def test_m_of_n_counts_breaching_datapoints_that_need_not_be_consecutive() -> None:
    store = MetricStore()
    key = metric_key(NS, NAME, host("job", 1))
    for minute, value in enumerate([0, 90, 0, 90, 0]):  # idle, busy, idle, busy, idle
        store.publish(key, minute, float(value))
    store.publish(key, 5, 90.0)
    two_of_five = MetricAlarm.from_description(single(EvaluationPeriods=5, DatapointsToAlarm=3))
    assert evaluate_alarm(two_of_five, store, 5, OK, EPOCH).state == ALARM  # 3 idle of the last 5
    four_of_five = MetricAlarm.from_description(single(EvaluationPeriods=5, DatapointsToAlarm=4))
    assert evaluate_alarm(four_of_five, store, 5, OK, EPOCH).state == OK


def test_missing_data_after_a_job_ends_never_alarms_with_not_breaching() -> None:
    store = MetricStore()
    key = metric_key(NS, NAME, host("job", 1))
    store.publish(key, 0, 90.0)
    store.publish(key, 10, None)  # the host stops publishing
    alarm = MetricAlarm.from_description(single(TreatMissingData="notBreaching"))
    assert all(evaluate_alarm(alarm, store, t, OK, EPOCH).state == OK for t in range(10, 40))


# ---- metric math -------------------------------------------------------------------------------


def math_alarm(hosts: int, expression: str = "", **overrides: Any) -> dict[str, Any]:
    ids = [f"m{i}" for i in range(1, hosts + 1)]
    metrics: list[dict[str, Any]] = [
        {
            "Id": "busiest",
            "Expression": expression or f"MAX([{', '.join(ids)}])",
            "Label": "busiest host",
            "ReturnData": True,
        }
    ]
    for i, mid in enumerate(ids, start=1):
        metrics.append(
            {
                "Id": mid,
                "MetricStat": {
                    "Metric": {"Namespace": NS, "MetricName": NAME, "Dimensions": host("job", i)},
                    "Period": 60,
                    "Stat": "Average",
                },
                "ReturnData": False,
            }
        )
    alarm = single(Metrics=metrics)
    for key in ("Namespace", "MetricName", "Dimensions", "Statistic", "Period"):
        alarm.pop(key)
    alarm.update(overrides)
    return alarm


def test_max_over_hosts_alarms_only_when_the_busiest_host_is_idle() -> None:
    # Given two hosts: algo-1 idle from minute 0, algo-2 busy until minute 20
    store = MetricStore()
    store.publish(metric_key(NS, NAME, host("job", 1)), 0, 0.0)
    store.publish(metric_key(NS, NAME, host("job", 2)), 0, 400.0)
    store.publish(metric_key(NS, NAME, host("job", 2)), 20, 0.0)
    alarm = MetricAlarm.from_description(math_alarm(2))
    assert alarm.period == 1
    assert evaluate_alarm(alarm, store, 20, OK, EPOCH).state == OK
    assert evaluate_alarm(alarm, store, 22, OK, EPOCH).state == OK
    assert evaluate_alarm(alarm, store, 23, OK, EPOCH).state == ALARM


def test_max_ignores_a_host_without_data_such_as_a_cpu_instance() -> None:
    store = MetricStore()
    store.publish(metric_key(NS, NAME, host("job", 2)), 0, 0.0)  # algo-1 (CPU) never publishes
    alarm = MetricAlarm.from_description(math_alarm(2))
    assert evaluate_alarm(alarm, store, 3, OK, EPOCH).state == ALARM


def test_expression_arithmetic_fill_and_metrics() -> None:
    store = MetricStore()
    store.publish(metric_key(NS, NAME, host("job", 1)), 0, 100.0)
    store.publish(metric_key(NS, NAME, host("job", 2)), 2, 300.0)
    alarm = MetricAlarm.from_description(math_alarm(2, "SUM(FILL(METRICS(), 0)) / 2"))
    assert alarm.series(store, 5)[-5:] == [50.0, 50.0, 200.0, 200.0, 200.0]
    avg = MetricAlarm.from_description(math_alarm(2, "AVG([m1, m2]) * 2 - 100"))
    assert avg.series(store, 5)[-3:] == [300.0, 300.0, 300.0]
    assert avg.series(store, 5)[-5] == 100.0  # only m1 exists at minute 0


def test_unsupported_expressions_fail_loudly() -> None:
    store = MetricStore()
    alarm = MetricAlarm.from_description(math_alarm(1, "ANOMALY_DETECTION_BAND(m1)"))
    with pytest.raises(AlarmDefinitionError, match="not supported"):
        alarm.series(store, 5)
    with pytest.raises(AlarmDefinitionError, match="period"):
        MetricAlarm.from_description(single(Period=30))


# ---- composite alarms -------------------------------------------------------------------------


def test_composite_rule_grammar() -> None:
    composite = CompositeAlarm.from_description(
        {"AlarmName": "c", "AlarmRule": 'ALARM("a") AND (OK(b) OR NOT INSUFFICIENT_DATA(c)) AND TRUE'}
    )
    states = {"a": ALARM, "b": ALARM, "c": OK}
    assert composite.evaluate(states.__getitem__) is True
    states["c"] = INSUFFICIENT_DATA
    assert composite.evaluate(states.__getitem__) is False
    assert composite.children() == {"a", "b", "c"}
    with pytest.raises(AlarmDefinitionError):
        CompositeAlarm.from_description({"AlarmName": "bad", "AlarmRule": "ALARM(a) AND"}).evaluate(lambda _: OK)


# ---- the stateful evaluator and its notification ------------------------------------------------


def test_evaluator_reports_each_transition_once_with_the_real_message_shape() -> None:
    store = MetricStore()
    seen: list[Transition] = []
    evaluator = AlarmEvaluator(
        store, epoch=EPOCH, account="123456789012", region="us-east-1", on_transition=seen.append
    )
    key = metric_key(NS, NAME, host("job", 1))
    evaluator.upsert({**single(), "AlarmConfigurationUpdatedTimestamp": EPOCH}, now=0)
    evaluator.upsert({"AlarmName": "both", "AlarmArn": "arn:both", "AlarmRule": "ALARM(idle-job)"}, now=0)
    store.publish(key, 0, 90.0)
    # When time advances the way the simulator advances it: the host goes idle at minute 30
    for minute in range(200):
        if minute == 30:
            store.publish(key, 30, 0.0)
        if evaluator.next_due() == minute:
            evaluator.run_due(minute)
    assert [(t.alarm["AlarmName"], t.old_state, t.new_state, t.minute) for t in seen] == [
        ("both", INSUFFICIENT_DATA, OK, 0),  # ALARM(idle-job) is false while idle-job has no data
        ("idle-job", INSUFFICIENT_DATA, OK, 1),  # one busy datapoint, none breaching: OK (user guide)
        ("idle-job", OK, ALARM, 33),
        ("both", OK, ALARM, 33),
    ]
    # Event-driven: a handful of evaluations, not one per minute for 200 minutes
    assert evaluator.evaluations <= 14
    message = seen[2].message
    assert set(message) == {
        "AlarmName", "AlarmDescription", "AWSAccountId", "AlarmConfigurationUpdatedTimestamp", "NewStateValue",
        "NewStateReason", "StateChangeTime", "Region", "AlarmArn", "OldStateValue", "OKActions", "AlarmActions",
        "InsufficientDataActions", "Trigger",
    }  # fmt: skip
    assert message["Region"] == "US East (N. Virginia)"
    assert message["StateChangeTime"] == "2026-12-24T18:33:00.000+0000"
    assert message["Trigger"]["Dimensions"] == [{"value": "job/algo-1", "name": "Host"}]
    assert message["Trigger"]["Statistic"] == "AVERAGE"
    assert seen[2].actions == ["arn:aws:sns:us-east-1:123456789012:alarms"]
    assert seen[3].message["AlarmRule"] == "ALARM(idle-job)"
    json.dumps(message)


def test_metric_math_message_lists_the_queries() -> None:
    message = alarm_notification(
        math_alarm(2),
        old_state=OK,
        new_state=ALARM,
        reason="r",
        changed_at=EPOCH,
        account="123456789012",
        region="us-east-1",
    )
    trigger = message["Trigger"]
    assert trigger["Period"] == 60
    assert trigger["Metrics"][0] == {
        "Expression": "MAX([m1, m2])",
        "Id": "busiest",
        "ReturnData": True,
        "Label": "busiest host",
    }
    assert trigger["Metrics"][1]["MetricStat"]["Metric"]["Dimensions"] == [{"value": "job/algo-1", "name": "Host"}]


def test_comparisons_and_if_follow_cloudwatch_metric_math() -> None:
    # Comparison operators give 1 or 0 per datapoint; IF picks per datapoint; a missing datapoint stays missing
    values = {"a": [100.0, 96.0, None, 40.0], "b": [99.0, 20.0, 99.0, 97.0]}
    assert evaluate_expression("MIN([a, b]) >= 95", values, 4, ()) == [1.0, 0.0, 1.0, 0.0]
    assert evaluate_expression("IF(MIN([a, b]) >= 95, 0, MAX([a, b]))", values, 4, ()) == [0.0, 96.0, 0.0, 97.0]
    assert evaluate_expression("IF(a < 50, 1, 2)", values, 4, ()) == [2.0, 2.0, None, 1.0]
    assert evaluate_expression("1 + 2 == 3", {}, 1, ()) == 1.0


def test_the_pinned_trigger_breaches_on_pinned_hosts_and_on_a_stuck_host_not_on_work() -> None:
    # The idle alarm's expression over three 4-GPU hosts (pinned 380, idle threshold 4), minute by minute:
    # every host pinned; one idle host while the others are pinned (a stuck host); every host working;
    # one working host and the others pinned; one host pinned while the other two idle (a rank-0
    # evaluation, the others waiting: fewer than half the hosts are pinned); every host idle (the idle alarm's own
    # breach, below 4)
    from sagemaker_governance.domain.guards.idle import pinned_expression

    metrics = [{"Id": f"m{n}", "MetricStat": {}} for n in (1, 2, 3)]
    expression = pinned_expression(metrics, 380, 4, 1, 3)["Expression"]
    values = {
        "m1": [390.0, 395.0, 200.0, 390.0, 399.0, 0.0],
        "m2": [385.0, 0.0, 210.0, 250.0, 0.0, 1.0],
        "m3": [399.0, 398.0, 190.0, 396.0, 1.0, 0.0],
    }
    assert evaluate_expression(expression, values, 6, ()) == [0.0, 0.0, 210.0, 396.0, 399.0, 1.0]


@pytest.mark.parametrize(
    ("hosts", "breaching"),
    [
        ((399.0, 0.0), True),  # two hosts, one computing, one waiting idle (rank 0 evaluating): half pinned
        ((399.0, 399.0, 0.0, 1.0), True),  # half of four pinned
        ((399.0, 0.0, 1.0), False),  # one of three
        ((399.0, 0.0, 0.0, 2.0), False),  # one of four
    ],
)
def test_the_stuck_host_term_fires_once_pinned_hosts_are_half_the_cluster(
    hosts: tuple[float, ...], breaching: bool
) -> None:
    # What the planner's docstring says: with some host idle, the pinned trigger breaches once the pinned hosts
    # are at least half of them (their mean reaches half of pinned), so on two hosts a rank-0 evaluation is
    # that shape too (the README lists it as a risk; the stall judge decides on the log and the metrics)
    from sagemaker_governance.domain.guards.idle import pinned_expression

    metrics = [{"Id": f"m{n}", "MetricStat": {}} for n in range(1, len(hosts) + 1)]
    expression = pinned_expression(metrics, 380, 4, 1, len(hosts))["Expression"]
    values = {f"m{n}": [value] for n, value in enumerate(hosts, start=1)}
    assert (evaluate_expression(expression, values, 1, ()) == [0.0]) is breaching


COMPOSITE = {"AlarmName": "both", "AlarmArn": "arn:both", "AlarmRule": "ALARM(idle-job)"}


def _idle_child_under_a_composite() -> tuple[AlarmEvaluator, MetricStore, list[Transition]]:
    """A child alarm in ALARM on idle data (40 idle minutes) and a composite over it, in ALARM too; what
    changed so far forgotten."""
    store = MetricStore()
    seen: list[Transition] = []
    evaluator = AlarmEvaluator(
        store, epoch=EPOCH, account="123456789012", region="us-east-1", on_transition=seen.append,
        returns_at_once=True,
    )  # fmt: skip
    evaluator.upsert(single(), now=0)
    evaluator.upsert(COMPOSITE, now=0)
    _idle_minutes(evaluator, store, range(40))
    assert evaluator.states == {"idle-job": ALARM, "both": ALARM}
    seen.clear()
    return evaluator, store, seen


def _idle_minutes(evaluator: AlarmEvaluator, store: MetricStore, minutes: range) -> None:
    key = metric_key(NS, NAME, host("job", 1))
    for minute in minutes:
        store.publish(key, minute, 0.0)
        if evaluator.next_due() == minute:
            evaluator.run_due(minute)


def test_a_composite_over_a_reset_child_leaves_alarm_and_notifies_again_when_it_returns() -> None:
    evaluator, _, seen = _idle_child_under_a_composite()
    # When the service resets the child (SetAlarmState OK) while its data still breaches
    evaluator.set_state("idle-job", OK, now=40)
    # Then the composite, evaluated on its child's change, leaves ALARM and notifies again as it returns
    assert [(t.alarm["AlarmName"], t.old_state, t.new_state) for t in seen] == [
        ("both", ALARM, OK),
        ("idle-job", OK, ALARM),
        ("both", OK, ALARM),
    ]


def test_a_composite_reset_alone_stays_ok_until_a_child_changes_state_or_it_is_updated() -> None:
    evaluator, store, seen = _idle_child_under_a_composite()
    # When the service resets the composite alone (SetAlarmState OK) while its child stays in ALARM
    evaluator.set_state("both", OK, now=40)
    _idle_minutes(evaluator, store, range(40, 60))
    # Then it stays in OK: "it returns to its actual state only once any of its children alarms change
    # state" (the SetAlarmState API reference), and nothing notifies
    assert evaluator.states == {"idle-job": ALARM, "both": OK} and seen == []
    # "It is also reevaluated if you update its configuration": an update brings it back to ALARM
    evaluator.upsert(COMPOSITE, now=60)
    assert evaluator.states["both"] == ALARM
    assert [(t.alarm["AlarmName"], t.old_state, t.new_state) for t in seen] == [("both", OK, ALARM)]
