"""The reconciler's pure planning: which job an alarm watches, the work list, the rotation of runs."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.alarm_compare import alarm_definition
from sagemaker_governance.domain.alarm_deletion import deletion_batches, deletion_order
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, Notice, described_with
from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
from sagemaker_governance.domain.reconcile import (
    EVALUATION_GRACE,
    WINDOW_TERMS,
    AlarmListing,
    JobSummary,
    definition_changes,
    group_alarms,
    job_of_alarm,
    plan_work,
    ring_start,
    run_index,
)
from tests.builders import job

PREFIX = "gov-idle-"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix=PREFIX, managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")


def summary(name: str, secondary: str = "Training", created: datetime | None = None) -> JobSummary:
    return JobSummary.model_validate(
        {
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": secondary,
            "CreationTime": created or NOW,
        }
    )


@pytest.mark.parametrize(
    ("alarm", "job"),
    [
        ("gov-idle-job-1", "job-1"),
        ("gov-idle-job-1.hosts-1-10", "job-1"),
        ("gov-idle-job-1.progress", "job-1"),  # any per-job suffix after the dot
        ("gov-idle-", None),
        ("gov-idle-not a job", None),
        ("gov-idle--leading-dash", None),
        ("other-job-1", None),
        ("gov-idle-" + "a" * 64, None),  # longer than a job name can be
    ],
)
def test_job_of_alarm(alarm: str, job: str | None) -> None:
    assert job_of_alarm(alarm, PREFIX) == job


def test_alarms_are_grouped_by_job_and_foreign_names_dropped() -> None:
    names = ["gov-idle-a", "gov-idle-b.hosts-1-10", "gov-idle-b.hosts-11-12", "gov-idle-?", "x"]
    assert group_alarms(names, PREFIX) == {"a": ["gov-idle-a"], "b": names[1:3]}


def test_the_notifying_alarm_is_deleted_first_even_when_unlisted() -> None:
    children = ["gov-idle-b.hosts-11-12", "gov-idle-b.hosts-1-10"]
    assert deletion_order("b", PREFIX, children) == ["gov-idle-b", *sorted(children)]
    assert deletion_order("a", PREFIX, ["gov-idle-a"]) == ["gov-idle-a"]


def test_work_covers_listed_jobs_and_alarm_jobs_once_each() -> None:
    items = plan_work([summary("a"), summary("b")], {"b": ["gov-idle-b"], "c": ["gov-idle-c"]}, run=0)
    assert [(i.job_name, i.listed is not None, i.alarms) for i in items] == [
        ("a", True, ()),
        ("b", True, ("gov-idle-b",)),
        ("c", False, ("gov-idle-c",)),
    ]


def test_consecutive_runs_start_at_different_places() -> None:
    jobs = [summary(f"job-{i:04d}") for i in range(100)]
    starts = {plan_work(jobs, {}, run)[0].job_name for run in range(10)}
    assert len(starts) == 10


def test_run_index_counts_scheduled_runs() -> None:
    assert run_index(NOW + timedelta(minutes=10), 10) == run_index(NOW, 10) + 1
    assert run_index(NOW + timedelta(minutes=3), 10) in {run_index(NOW, 10), run_index(NOW, 10) + 1}


@pytest.mark.parametrize(("count", "per_run"), [(5000, 50), (3000, 300), (1000, 7), (10, 1)])
def test_every_item_is_covered_within_three_over_f_runs(count: int, per_run: int) -> None:
    # Given runs that each get through `per_run` of `count` items, starting at consecutive run numbers
    first = 123_456  # any run number
    bound = 3 * count // per_run + 1
    seen: set[int] = set()
    for run in range(first, first + bound):
        start = ring_start(count, run)
        seen.update((start + k) % count for k in range(per_run))
    # Then every item was visited (three-gap theorem: the largest gap is below 2.62 / runs)
    assert len(seen) == count


def test_a_job_is_reconciled_for_compliance_only_after_the_grace_period() -> None:
    assert not summary("a", created=NOW).old_enough_to_reconcile(NOW + EVALUATION_GRACE - timedelta(seconds=1))
    assert summary("a", created=NOW).old_enough_to_reconcile(NOW + EVALUATION_GRACE)


def test_a_clone_does_not_inherit_the_evaluated_mark() -> None:
    from sagemaker_governance.domain.clone import copyable_tags
    from sagemaker_governance.domain.compliance import EVALUATED_TAG

    assert copyable_tags({"team": "vision", EVALUATED_TAG: "2026-01-01T00:00:00Z"}) == {"team": "vision"}


def test_deletion_batches_hold_100_names_and_at_most_one_group_that_may_hold_a_composite() -> None:
    # Given ended jobs' alarm groups: single metric alarms, and groups of a composite over its children
    singles = [["a"]] * 200
    composite = ["c", "c.1", "c.2"]
    groups = [composite, *singles[:60], composite, *singles[60:], ["big", *[f"big.{i}" for i in range(120)]]]
    # When they are packed into DeleteAlarms requests
    batches = deletion_batches(groups)
    # Then every group is in exactly one request, in order, and no request has two groups of several alarms
    assert [i for batch in batches for i in batch] == list(range(len(groups)))
    for batch in batches:
        sizes = [len(groups[i]) for i in batch]
        assert sum(1 for size in sizes if size > 1) <= 1
        assert sum(sizes) <= 100 or len(batch) == 1  # a group larger than 100 names goes alone
    assert [len(batch) for batch in batches] == [61, 98, 43, 1]  # [c + 60], [c + 97], [43 singles], [big]
    assert deletion_batches([]) == []


def test_an_alarm_is_ours_by_its_description_not_by_its_prefix_alone() -> None:
    # Stack "gov" and stack "gov-idle-b" (whose prefix "gov-idle-b-idle-" starts with ours, "gov-idle-"):
    # each tells its alarms apart by the managed note, up to its ";"
    ours = AlarmNaming(prefix="gov-idle-", managed_by="gov")
    theirs = AlarmNaming(prefix="gov-idle-b-idle-", managed_by="gov-idle-b")
    described = f"sagemaker-governance idle guard for training job j. {theirs.managed_note}"
    assert not ours.describes_ours(described) and theirs.describes_ours(described)
    assert ours.describes_ours(f"... {ours.managed_note} Widened to 60 minutes after a veto of the stall judge")
    assert not ours.describes_ours(None) and not ours.describes_ours("")


# ---- what an alarm fires on: planned (PutMetricAlarm) and listed (DescribeAlarms) alike ----------------


def idle_requests(hosts: int, threshold_percent: float = 1.0) -> tuple[dict[str, Any], ...]:
    training = training_job(hosts)
    plan = IDLE.plan(training, IdlePolicy(threshold_percent=threshold_percent), NAMING)
    assert isinstance(plan, AlarmPlan)
    return plan.metric_requests


def training_job(hosts: int) -> Any:
    return job(
        "job-1",
        SecondaryStatus="Training",
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": hosts, "VolumeSizeInGB": 50},
    )


def as_listed(request: dict[str, Any]) -> dict[str, Any]:
    """The alarm as DescribeAlarms lists it: dimensions in another order, a query's label and the alarm's state
    and ARN added, DatapointsToAlarm left out when it equals EvaluationPeriods."""
    listed = copy.deepcopy(request)
    listed.pop("Tags", None)
    listed.update(
        AlarmArn="arn:aws:cloudwatch:us-east-1:1:alarm:x", StateValue="OK", Threshold=float(listed["Threshold"])
    )
    if listed.get("DatapointsToAlarm") == listed["EvaluationPeriods"]:
        del listed["DatapointsToAlarm"]
    listed.get("Dimensions", []).reverse()
    for query in listed.get("Metrics", []):
        query["Label"] = "shown"
        query.get("MetricStat", {}).get("Metric", {}).get("Dimensions", []).reverse()
    listed.get("Metrics", []).reverse()
    return listed


@pytest.mark.parametrize("hosts", [1, 4])  # a plain metric alarm; metric math over the hosts
def test_a_planned_alarm_and_the_same_alarm_listed_have_one_definition(hosts: int) -> None:
    for request in idle_requests(hosts):
        assert alarm_definition(request) is not None
        assert alarm_definition(as_listed(request)) == alarm_definition(request)


@pytest.mark.parametrize(
    ("hosts", "terms"),
    [
        (1, {"Threshold"}),
        (4, {"Threshold", "Metrics"}),  # the metric math that tells idle from pinned hosts names the threshold
    ],
)
def test_a_threshold_planned_under_another_policy_is_a_change_of_what_names_it(
    hosts: int, terms: set[str]
) -> None:
    (at_5,), (at_10,) = idle_requests(hosts, 5.0), idle_requests(hosts, 10.0)
    listed, planned = alarm_definition(as_listed(at_5)), alarm_definition(at_10)
    assert listed is not None and planned is not None
    assert set(definition_changes(listed, planned)) == terms


def test_a_composite_alarm_has_no_definition_to_compare() -> None:
    assert alarm_definition({"AlarmName": "x", "AlarmRule": 'ALARM("a")', "ActionsEnabled": True}) is None


def test_an_alarm_the_stall_judge_widened_is_told_by_its_description_and_differs_in_its_window_only() -> None:
    training = training_job(1)
    notice = Notice(job=training, mode=Mode.ENFORCE, now=NOW, naming=NAMING)
    (widened,) = IDLE.widened(notice, IdlePolicy(), 90)
    (planned,) = idle_requests(1)
    assert AlarmListing(name=widened["AlarmName"], description=widened["AlarmDescription"]).widened
    assert not AlarmListing(name=planned["AlarmName"], description=planned["AlarmDescription"]).widened
    was, now = alarm_definition(widened), alarm_definition(planned)
    assert was is not None and now is not None
    assert set(definition_changes(was, now)) == set(WINDOW_TERMS)
    assert definition_changes(was, now, keep=WINDOW_TERMS) == {}


def listed_as(request: dict[str, Any]) -> AlarmListing:
    return AlarmListing(
        name=request["AlarmName"],
        description=request["AlarmDescription"],
        definition=alarm_definition(as_listed(request)),
    )


def full_description(request: dict[str, Any]) -> dict[str, Any]:
    """The request with a description at CloudWatch's 1,024 characters, as ``AlarmNaming.describe`` cuts one."""
    return {**request, "AlarmDescription": NAMING.describe("a long alarm description " * 60)}


def test_a_widening_keeps_its_sentence_and_the_stacks_note_in_a_description_at_the_limit() -> None:
    # Given an alarm whose planned description already fills CloudWatch's 1,024 characters
    (planned,) = idle_requests(1)
    planned = full_description(planned)
    assert len(planned["AlarmDescription"]) == 1024
    # When a widening sentence is added to it
    sentence = " Widened to 90 minutes after a veto of the stall judge; back to the guard's window."
    described = described_with(planned["AlarmDescription"], sentence)
    # Then the body loses its end, never the note nor the sentence
    assert len(described) == 1024 and described.endswith(f"... {NAMING.managed_note}{sentence}")
    assert NAMING.describes_ours(described) and AlarmListing(name="x", description=described).widened


def test_an_alarm_widened_when_its_sentence_was_cut_off_is_told_by_a_full_description_and_longer_window() -> None:
    # Given an alarm planned with a full description, listed with that description and a longer window (widened
    # when the widening sentence was cut off at the limit), or a shorter one
    (planned,) = idle_requests(1)
    planned = full_description(planned)
    periods = planned["EvaluationPeriods"]
    longer = listed_as({**planned, "EvaluationPeriods": periods + 60, "DatapointsToAlarm": periods + 60})
    shorter = listed_as({**planned, "EvaluationPeriods": 1, "DatapointsToAlarm": 1})
    # Then the longer one counts as widened (its window is kept), the shorter one does not
    assert not longer.widened and longer.widened_from(planned)
    assert not shorter.widened_from(planned)
    # and neither does one whose description is not the plan's (the policy changed what the description says)
    other = {**planned, "AlarmDescription": NAMING.describe("another alarm description " * 60)}
    assert not longer.widened_from(other)
    # and a description under the limit must say it was widened
    (short,) = idle_requests(1)
    assert not listed_as({**short, "EvaluationPeriods": periods + 60}).widened_from(short)
