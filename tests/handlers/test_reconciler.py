"""The reconciler through its real handler and service (moto, the SageMaker and CloudWatch doubles):
what lost events leave behind is repaired by the next run, and nothing that is still running is harmed."""

from __future__ import annotations

import copy
import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from pydantic import ValidationError

from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.composition.alarm_stopper import build as stopper_build
from sagemaker_governance.composition.job_events import build as job_events_build
from sagemaker_governance.composition.reconciler import build as reconciler_build
from sagemaker_governance.composition.reconciler import reconciler_service
from sagemaker_governance.domain.compliance import EVALUATED_TAG
from sagemaker_governance.domain.errors import AdapterError, Claim
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.handlers.reconciler import handler as reconciler
from sagemaker_governance.observability import govern_diagnostics_only, logger
from sagemaker_governance.service.reconciler import ReconcileDefect, ReconcilerService
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.settings import Settings
from smgov.simulation.fake_sagemaker import SageMakerError
from smgov.simulation.harness import LocalAccount, local_account, patched_env
from smgov.simulation.job_signals import JobSignals, log_stream
from tests.builders import create_request, job
from tests.conftest import load_event
from tests.handlers.conftest import ENFORCE, PREFIX, MovableClock, NextTransitionLags

SCHEDULED = "scheduled-reconcile.json"
TWELVE_HOSTS = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 12, "VolumeSizeInGB": 50}


@pytest.fixture
def repairs() -> MemoryBusinessMetrics:
    return MemoryBusinessMetrics()


def _account(clock: MovableClock, repairs: MemoryBusinessMetrics, env: dict[str, str]) -> Iterator[LocalAccount]:
    with local_account(clock, env, metrics=repairs) as account:
        yield account


@pytest.fixture
def acct(clock: MovableClock, repairs: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from _account(clock, repairs, ENFORCE)


@pytest.fixture
def audit_acct(clock: MovableClock, repairs: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from _account(clock, repairs, {**ENFORCE, "GOVERNANCE_MODE": "audit"})


def reconcile(account: LocalAccount) -> dict[str, Any]:
    result: dict[str, Any] = account.invoke(reconciler, load_event(SCHEDULED))
    return result


def reconciler_records(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.trigger == "reconciler"]


def training(account: LocalAccount, name: str = "job-1", *, event: bool = True, **overrides: Any) -> None:
    """A job in Training; its Starting and Training events delivered (or lost: ``event=False``)."""
    account.sagemaker.launch(create_request(name, **overrides))
    if event:
        account.invoke(job_events, account.sagemaker.event(name))
    account.sagemaker.transition(name, "InProgress", "Training")
    if event:
        account.invoke(job_events, account.sagemaker.event(name))


def fire(account: LocalAccount, alarm: str) -> dict[str, Any]:
    """CloudWatch's evaluation puts the alarm in ALARM and SNS delivers the notification."""
    account.cloudwatch.set_state(alarm, "ALARM")
    result: dict[str, Any] = account.invoke(
        stopper, account.cloudwatch.sns_event([account.cloudwatch.notification(alarm)])
    )
    return result


# ---- orphan alarms ------------------------------------------------------------------------------


def test_an_orphan_alarm_from_a_lost_terminal_event_is_removed_by_the_next_run(
    acct: LocalAccount, repairs: MemoryBusinessMetrics
) -> None:
    # Given a job whose alarm was created, and which completed while its Completed event was lost
    training(acct)
    assert f"{PREFIX}job-1" in acct.cloudwatch.alarms
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    # When the reconciler runs
    result = reconcile(acct)
    # Then the alarm is gone, and the repair is recorded and counted
    assert acct.cloudwatch.alarms == {}
    assert result["repairs"] == {"orphan-alarm": 1}
    (record,) = reconciler_records(acct)
    assert (record.rule, record.action, record.outcome.value) == ("reconciler", "delete-alarm", "done")
    assert record.job_status == "Completed" and record.evidence["deleted"] == [f"{PREFIX}job-1"]
    assert record.event_id == load_event(SCHEDULED)["id"]
    assert repairs.repairs == ["orphan-alarm"]
    # And the next run finds nothing to repair
    assert reconcile(acct)["repairs"] == {}
    assert len(reconciler_records(acct)) == 1


def test_the_alarm_of_a_job_that_no_longer_exists_is_removed(acct: LocalAccount) -> None:
    training(acct)
    del acct.sagemaker.jobs["job-1"]
    reconcile(acct)
    assert acct.cloudwatch.alarms == {}
    (record,) = reconciler_records(acct)
    assert record.job_status == "NotFound" and record.code == "reconciler.delete.orphan-alarm"


def test_orphaned_composite_and_child_alarms_are_deleted_composite_first(acct: LocalAccount) -> None:
    # 12 hosts: two child metric alarms and a composite
    training(acct, ResourceConfig=TWELVE_HOSTS)
    assert len(acct.cloudwatch.alarms) == 3
    acct.sagemaker.transition("job-1", "Failed", "Failed")
    reconcile(acct)
    assert acct.cloudwatch.alarms == {}
    (record,) = reconciler_records(acct)
    assert record.evidence["deleted"][0] == f"{PREFIX}job-1"  # the composite before its children


def test_ended_jobs_alarms_are_deleted_in_batches_of_100_with_one_composite_per_request(
    acct: LocalAccount,
) -> None:
    # Given 120 single-host jobs and two 12-host jobs (a composite over two children each) that ended
    # while their alarms stayed (deletes deferred under a throttled burst, or lost events)
    for index in range(120):
        training(acct, f"job-{index:03d}")
    training(acct, "big-a", ResourceConfig=TWELVE_HOSTS)
    training(acct, "big-b", ResourceConfig=TWELVE_HOSTS)
    for name in [f"job-{index:03d}" for index in range(120)] + ["big-a", "big-b"]:
        acct.sagemaker.transition(name, "Completed", "Completed")
    assert len(acct.cloudwatch.alarms) == 126
    before = len(acct.cloudwatch.requests)
    # When the reconciler runs
    result = reconcile(acct)
    # Then every alarm is gone, each job's repair is on the record, and it took a few DeleteAlarms
    # requests of at most 100 names and one composite each (the double refuses two), not one per job
    assert acct.cloudwatch.alarms == {}
    assert result["repairs"] == {"orphan-alarm": 122} and result["errors"] == 0
    deletes = [
        params["AlarmNames"] for name, params in acct.cloudwatch.requests[before:] if name == "DeleteAlarms"
    ]
    assert 2 <= len(deletes) <= 3
    assert all(len(names) <= 100 for names in deletes)
    assert all(sum(name in (f"{PREFIX}big-a", f"{PREFIX}big-b") for name in names) <= 1 for names in deletes)
    assert len(reconciler_records(acct)) == 122


def test_a_job_still_running_never_loses_its_alarm(acct: LocalAccount) -> None:
    # Given jobs in Training, in a Spot restart, and stopping: each has its alarm
    training(acct, "train")
    training(acct, "restarting")
    acct.sagemaker.transition("restarting", "InProgress", "Starting")
    training(acct, "stopping")
    acct.sagemaker.transition("stopping", "Stopping", "Stopping")  # not listed as InProgress, not ended
    before = set(acct.cloudwatch.alarms)
    # When the reconciler runs, twice
    reconcile(acct)
    reconcile(acct)
    # Then every alarm is still there and nothing was deleted
    assert set(acct.cloudwatch.alarms) == before == {f"{PREFIX}train", f"{PREFIX}restarting", f"{PREFIX}stopping"}
    assert acct.cloudwatch.calls["DeleteAlarms"] == 0


def test_the_alarms_of_a_stack_whose_prefix_starts_with_ours_are_left_alone(acct: LocalAccount) -> None:
    # Given this stack ("sagemaker-governance") and a second one in the account, "sagemaker-governance-idle-team2",
    # whose alarm for its running job "job-x" is named under our prefix too, its remainder a valid job name
    # ("team2-idle-job-x", a job that does not exist here)
    other = AlarmNaming(
        prefix="sagemaker-governance-idle-team2-idle-",
        managed_by="sagemaker-governance-idle-team2",
        alarm_topic_arn=acct.environment["ALARM_TOPIC_ARN"],
    )
    plan = IDLE.plan(job("job-x", SecondaryStatus="Training"), IdlePolicy(), other)
    assert isinstance(plan, AlarmPlan)
    (request,) = plan.metric_requests
    acct.root.client("cloudwatch").put_metric_alarm(**request)
    foreign = request["AlarmName"]
    assert foreign == f"{PREFIX}team2-idle-job-x"
    # and one of our own jobs in Training with its alarm
    training(acct, "job-x")
    acct.sagemaker.calls.clear()
    # When the reconciler runs
    result = reconcile(acct)
    # Then the other stack's alarm is not ours: not read for, not deleted, not counted
    assert set(acct.cloudwatch.alarms) == {foreign, f"{PREFIX}job-x"}
    assert result["repairs"] == {} and result["alarms"] == 1
    assert acct.sagemaker.calls["DescribeTrainingJob"] == 1  # our job's (it has no progress alarm), no other
    assert [r for r in reconciler_records(acct) if r.job_name == "team2-idle-job-x"] == []


def test_alarms_that_are_not_ours_are_left_alone(acct: LocalAccount) -> None:
    cw = acct.root.client("cloudwatch")
    for name in (f"{PREFIX}not a job name", "someone-elses-alarm"):
        cw.put_metric_alarm(
            AlarmName=name,
            MetricName="CPUUtilization",
            Namespace="AWS/EC2",
            Statistic="Average",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )
    reconcile(acct)
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}not a job name", "someone-elses-alarm"}
    assert acct.sagemaker.calls["DescribeTrainingJob"] == 0


def test_a_read_that_gets_no_answer_costs_only_its_own_job_the_run(acct: LocalAccount) -> None:
    # Given a job whose Completed event was lost (its alarm left behind) and a job in Training without its alarm
    for name in ("aaa-ended", "zzz-slow"):
        training(acct, name)
    acct.sagemaker.transition("aaa-ended", "Completed", "Completed")
    del acct.cloudwatch.alarms[f"{PREFIX}zzz-slow"]

    # When SageMaker gives no answer to the read of zzz-slow (a read timeout, past botocore's retries: a
    # BotoCoreError, not a ClientError)
    def no_answer(params: dict[str, Any], **_: Any) -> None:
        if params.get("TrainingJobName") == "zzz-slow":
            raise ReadTimeoutError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com")

    acct.root.client("sagemaker").meta.events.register_first(
        "before-parameter-build.sagemaker.DescribeTrainingJob", no_answer
    )
    result = reconcile(acct)
    # Then the run goes on: that item is counted as an error, and the ended job's alarm is deleted
    assert result["errors"] == 1 and result["repairs"] == {"orphan-alarm": 1}
    assert acct.cloudwatch.alarms == {}


def fail_pages(account: LocalAccount, service: str, operation: str, fails: Any) -> None:
    """``operation``'s requests for which ``fails(params)`` get no answer (a read timeout past botocore's
    retries)."""

    def no_answer(params: dict[str, Any], **_: Any) -> None:
        if fails(params):
            raise ReadTimeoutError(endpoint_url=f"https://{service}.us-east-1.amazonaws.com")

    account.root.client(service).meta.events.register_first(
        f"before-parameter-build.{service}.{operation}", no_answer
    )


def test_a_failed_page_of_the_jobs_in_progress_keeps_the_pages_read_and_fails_nothing(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given, newest first: a job in Training whose Training event was lost, a job whose Completed event was lost
    # (its alarm left behind), then 6 ended jobs: 4 pages of 2
    for i in range(6):
        acct.sagemaker.launch(create_request(f"hist-{i}"))
        acct.sagemaker.transition(f"hist-{i}", "Completed", "Completed")
        clock.advance(minutes=1)
    training(acct, "ended")
    acct.sagemaker.transition("ended", "Completed", "Completed")
    clock.advance(minutes=1)
    training(acct, "lost", event=False)
    acct.sagemaker.list_page_size = 2
    # When the last page of the jobs in progress gets no answer (the listing of the failed jobs answers)
    fail_pages(
        acct, "sagemaker", "ListTrainingJobs", lambda p: "StatusEquals" not in p and p.get("NextToken") == "6"
    )
    result = reconcile(acct)
    # Then the pages read are used as a listing cut short: the orphan alarm deleted, the listed job watched, and
    # the failed page counted as an error of the run, which does not fail
    assert result["repairs"] == {"orphan-alarm": 1, "missing-alarm": 1}
    assert result["errors"] == 1 and result["unlisted"] == ["jobs-in-progress"]
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}lost"}


def test_a_failed_page_of_the_alarms_visits_no_job_rather_than_repair_from_part_of_them(
    acct: LocalAccount,
) -> None:
    # Given a job in Training with its alarm and a job whose Completed event was lost, one alarm per page
    training(acct, "ended")
    acct.sagemaker.transition("ended", "Completed", "Completed")
    training(acct, "job-1")
    acct.cloudwatch.alarm_page_size = 1
    puts = acct.cloudwatch.calls["PutMetricAlarm"]
    # When the second page of the alarms gets no answer
    fail_pages(acct, "cloudwatch", "DescribeAlarms", lambda p: "NextToken" in p)
    result = reconcile(acct)
    # Then no job is visited: the job in Training is not taken for unwatched (no alarm put again), the orphan is
    # kept for a run that sees every alarm, and the run counts the error without failing
    assert result["visited"] == 0 and result["repairs"] == {}
    assert result["errors"] == 1 and result["unlisted"] == ["alarms"]
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}ended", f"{PREFIX}job-1"}
    assert acct.cloudwatch.calls["PutMetricAlarm"] == puts


def test_a_defect_in_one_jobs_repair_costs_only_that_job_and_then_fails_the_run(
    acct: LocalAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose Completed event was lost (its alarm left behind) and a job in Training without its
    # alarm, whose repair meets a defect of ours (not an AWS failure)
    for name in ("aaa-ended", "zzz-defect"):
        training(acct, name)
    acct.sagemaker.transition("aaa-ended", "Completed", "Completed")
    del acct.cloudwatch.alarms[f"{PREFIX}zzz-defect"]
    original = ReconcilerService._in_progress

    def defective(self: ReconcilerService, item: Any, *args: Any, **kwargs: Any) -> Any:
        if item.job_name == "zzz-defect":
            raise TypeError("unsupported format string passed to NoneType.__format__")
        return original(self, item, *args, **kwargs)

    monkeypatch.setattr(ReconcilerService, "_in_progress", defective)
    # When the reconciler runs
    with pytest.raises(ReconcileDefect, match="zzz-defect"):
        reconcile(acct)
    # Then the other job was still repaired (its ended alarm deleted), and the invocation failed all the same
    # (so the defect reaches the dead-letter queue and its alarm, not only a log line)
    assert acct.cloudwatch.alarms == {}


# ---- missing alarms -----------------------------------------------------------------------------


def test_a_stalled_job_whose_training_event_was_lost_gets_its_alarm_and_is_then_stopped(
    acct: LocalAccount, clock: MovableClock, repairs: MemoryBusinessMetrics
) -> None:
    # Given a GPU job in Training whose events were all lost
    training(acct, event=False)
    assert acct.cloudwatch.alarms == {}
    # When the reconciler runs, the alarm is created as the Training event would have
    clock.advance(minutes=5)
    result = reconcile(acct)
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}job-1"}
    assert result["repairs"] == {"missing-alarm": 1}
    (record,) = [r for r in reconciler_records(acct) if r.rule == "idle-guard"]
    assert (record.action, record.outcome.value) == ("create-alarm", "done")
    # Then, the job idle past the grace period (what the stall judge reads: a stalled job), the alarm fires
    # and the stopper stops the job
    JobSignals(clock).attach(acct.cloudwatch).idle("job-1")
    log_stream("job-1")
    clock.advance(minutes=40)
    fire(acct, f"{PREFIX}job-1")
    assert acct.sagemaker.stop_requests == ["job-1"]
    assert acct.sagemaker.jobs["job-1"]["TrainingJobStatus"] == "Stopping"
    assert repairs.repairs.count("missing-alarm") == 1


def test_a_job_listed_in_training_but_read_before_it_is_not_remembered_and_gets_its_alarm_next_run(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a GPU job whose Starting event was handled and whose Training event was lost, entering Training as
    # the reconciler runs: ListTrainingJobs lists it in Training, DescribeTrainingJob still answers Starting
    acct.sagemaker.launch(create_request("job-1"))
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    clock.advance(minutes=5)
    lag = NextTransitionLags(clock)
    acct.sagemaker.lag = lag
    acct.sagemaker.transition("job-1", "InProgress", "Training")
    # When the reconciler runs then, no alarm is created (the job it read is not in Training)
    assert reconcile(acct)["repairs"] == {}
    assert lag.reads == 1 and acct.cloudwatch.alarms == {}
    # Then that is not remembered as a job no guard wants: the next run on the warm container reads it again,
    # up to date, and creates its alarm
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"missing-alarm": 1}
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}job-1"}


def test_a_missing_composite_alarm_is_recreated_over_its_children(
    acct: LocalAccount, clock: MovableClock, repairs: MemoryBusinessMetrics
) -> None:
    # Given a 12-host job whose composite alarm was lost (deleted by hand, or its creation failed after
    # the children's) while its two child alarms remain
    training(acct, ResourceConfig=TWELVE_HOSTS)
    head = f"{PREFIX}job-1"
    assert acct.cloudwatch.alarms[head]["Kind"] == "composite"
    del acct.cloudwatch.alarms[head]
    children = {f"{head}.hosts-1-10", f"{head}.hosts-11-12"}
    assert set(acct.cloudwatch.alarms) == children
    # When the reconciler runs
    clock.advance(minutes=5)
    result = reconcile(acct)
    # Then the composite is back, over the same children, notifying the alarm topic, and that is recorded
    assert set(acct.cloudwatch.alarms) == {head, *children}
    composite = acct.cloudwatch.alarms[head]
    assert composite["Kind"] == "composite" and composite["AlarmActions"]
    assert result["repairs"] == {"missing-alarm": 1}
    (record,) = [r for r in reconciler_records(acct) if r.rule == "idle-guard"]
    assert (record.action, record.outcome.value, record.code) == ("create-alarm", "done", "idle.alarm.create")
    assert repairs.repairs == ["missing-alarm"]
    # And the next run finds the set complete: no repair, no re-creation
    acct.cloudwatch.calls.clear()
    assert reconcile(acct)["repairs"] == {}
    assert "PutCompositeAlarm" not in acct.cloudwatch.calls


def test_a_complete_composite_set_is_not_repaired_and_its_job_not_read_for_it(
    acct: LocalAccount, clock: MovableClock
) -> None:
    training(acct, ResourceConfig=TWELVE_HOSTS)
    clock.advance(hours=1)
    reconcile(acct)  # learns the job has no progress metric
    acct.sagemaker.calls.clear()
    acct.cloudwatch.calls.clear()
    assert reconcile(acct)["repairs"] == {}
    assert dict(acct.sagemaker.calls) == {"ListTrainingJobs": 2}  # in progress, and failed (deferred resumes)
    assert dict(acct.cloudwatch.calls) == {"DescribeAlarms": 1}


def test_a_job_with_its_alarm_is_read_once_per_warm_container_and_not_repaired(
    acct: LocalAccount, clock: MovableClock
) -> None:
    training(acct)
    clock.advance(hours=1)
    acct.sagemaker.calls.clear()
    acct.cloudwatch.calls.clear()
    assert reconcile(acct)["repairs"] == {}
    # the job has its idle alarm but no progress alarm: it is read once, to learn it has no progress
    # metric (the warm container remembers that)
    assert dict(acct.sagemaker.calls) == {"ListTrainingJobs": 2, "ListTags": 1, "DescribeTrainingJob": 1}
    assert dict(acct.cloudwatch.calls) == {"DescribeAlarms": 1}
    acct.sagemaker.calls.clear()
    acct.cloudwatch.calls.clear()
    assert reconcile(acct)["repairs"] == {}
    # the next run on the warm container reads nothing about the job: both facts are remembered
    assert dict(acct.sagemaker.calls) == {"ListTrainingJobs": 2}  # in progress, and failed (deferred resumes)
    assert dict(acct.cloudwatch.calls) == {"DescribeAlarms": 1}


def test_alarms_that_notify_a_deleted_stacks_topic_are_put_again_on_this_stacks_topic(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose alarms a previous deployment of the stack made (deleted and deployed again while the
    # job trained): the alarms were kept, but they notify the deleted stack's alarm topic, whose ARN
    # CloudFormation named, so no notification would ever reach the stopper
    training(acct)
    topic = acct.environment["ALARM_TOPIC_ARN"]
    old_topic = topic + "-deleted"
    ours = [name for name, alarm in acct.cloudwatch.alarms.items() if alarm.get("AlarmActions")]
    assert ours and all(acct.cloudwatch.alarms[n]["AlarmActions"] == [topic] for n in ours)
    for name in ours:
        acct.cloudwatch.alarms[name]["AlarmActions"] = [old_topic]
    clock.advance(hours=1)
    # When the reconciler runs
    assert reconcile(acct)["repairs"] == {"missing-alarm": 1}
    # Then the job's alarms notify this stack's topic again, and the next run has nothing to repair
    assert all(acct.cloudwatch.alarms[n]["AlarmActions"] == [topic] for n in ours)
    assert reconcile(acct)["repairs"] == {}


def test_no_alarm_is_created_for_a_job_the_idle_guard_does_not_watch(acct: LocalAccount) -> None:
    training(
        acct,
        "cpu",
        event=False,
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
    )
    reconcile(acct)
    reconcile(acct)
    assert acct.cloudwatch.alarms == {}
    assert [r for r in reconciler_records(acct) if r.rule == "idle-guard"] == []  # no noise per run


G5G = {"InstanceType": "ml.g5g.16xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50}  # sized only by EC2


def throttle_ec2(account: LocalAccount) -> dict[str, bool]:
    """EC2 DescribeInstanceTypes fails (past botocore's retries) while the returned switch is on."""
    throttled = {"on": True}

    def refuse(**_: Any) -> None:
        if throttled["on"]:
            error = {"Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."}}
            raise ClientError(error, "DescribeInstanceTypes")  # type: ignore[arg-type]

    account.root.client("ec2").meta.events.register("before-call.ec2.DescribeInstanceTypes", refuse)
    return throttled


def test_a_gpu_type_ec2_could_not_size_is_asked_again_at_every_run_until_it_answers(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job on a GPU type only EC2 knows (g5g), whose Training event found EC2 throttled
    throttled = throttle_ec2(acct)
    training(acct, ResourceConfig=G5G)
    assert acct.cloudwatch.alarms == {}
    # Then its record says no alarm for now, which type EC2 could not size, and that the reconciler asks again
    (record,) = [r for r in acct.audit.records if r.rule == "idle-guard"]
    assert (record.code, record.action) == ("idle.alarm.unknown-instance", "none")
    assert record.evidence["lookup_failed"] == ["ml.g5g.16xlarge"]
    # When the reconciler runs while EC2 still cannot answer: still no alarm, and nothing remembered
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {}
    # Then, EC2 answering again, the next run on the same warm container creates the idle alarm
    throttled["on"] = False
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"missing-alarm": 1}
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}job-1"}
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1"]["Threshold"] == 2.0  # 1% x 2 GPUs, EC2's count


def test_a_type_ec2_answered_for_is_remembered_as_unwatched(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a job on a family our table lacks that EC2 says has no GPU (a settled answer, unlike a failed lookup)
    training(acct, ResourceConfig={"InstanceType": "ml.i4i.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50})
    assert [r.code for r in acct.audit.records if r.rule == "idle-guard"] == ["idle.alarm.no-gpu"]
    clock.advance(minutes=10)
    reconcile(acct)
    # When the reconciler runs again on the warm container, then it reads nothing about the job
    acct.sagemaker.calls.clear()
    assert reconcile(acct)["repairs"] == {}
    assert "DescribeTrainingJob" not in acct.sagemaker.calls


# ---- jobs compliance never evaluated ------------------------------------------------------------


def test_a_never_evaluated_non_compliant_job_is_stopped_once(
    acct: LocalAccount, clock: MovableClock, repairs: MemoryBusinessMetrics
) -> None:
    # Given an untagged job whose Starting event was lost
    acct.sagemaker.launch(create_request("untagged", tags={}))
    # When the reconciler runs before the grace period, it leaves the event path its chance
    reconcile(acct)
    assert acct.sagemaker.stop_requests == []
    # And after it, the job is evaluated and stopped, with the compliance records of the reconciler
    clock.advance(minutes=16)
    result = reconcile(acct)
    assert acct.sagemaker.stop_requests == ["untagged"]
    assert result["repairs"] == {"unevaluated-job": 1}
    stops = [r for r in reconciler_records(acct) if r.action == "stop"]
    assert [(r.rule, r.outcome.value) for r in stops] == [("required-tags", "done")]
    assert repairs.repairs == ["unevaluated-job"]
    arn = acct.sagemaker.jobs["untagged"]["TrainingJobArn"]
    assert EVALUATED_TAG in {t["Key"] for t in acct.sagemaker.tags[arn]}


def test_a_job_whose_only_mark_was_copied_from_an_older_job_is_evaluated_and_stopped(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an untagged job launched with an earlier job's tags pasted in, governance's mark among them (written
    # the day before this job existed), and whose Starting event was lost
    acct.sagemaker.launch(create_request("pasted", tags={EVALUATED_TAG: "2026-11-20T09:15:00Z"}))
    # When the reconciler runs after the grace period
    clock.advance(minutes=16)
    result = reconcile(acct)
    # Then the copied mark does not count: the job is evaluated, stopped, and marked with this evaluation's time
    assert acct.sagemaker.stop_requests == ["pasted"]
    assert result["repairs"] == {"unevaluated-job": 1}
    assert [r.code for r in reconciler_records(acct) if r.action == "stop"] == ["compliance.stop.violation"]
    arn = acct.sagemaker.jobs["pasted"]["TrainingJobArn"]
    assert {t["Key"]: t["Value"] for t in acct.sagemaker.tags[arn]}[EVALUATED_TAG] == "2026-11-21T12:16:00Z"


def test_in_audit_mode_a_never_evaluated_job_is_reported_once_and_not_stopped(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    audit_acct.sagemaker.launch(create_request("untagged", tags={}), secondary="Training")
    clock.advance(minutes=30)
    reconcile(audit_acct)
    audit_acct.root.forget(reconciler_build)  # a cold start: only the job's tag tells it was evaluated
    reconcile(audit_acct)
    assert audit_acct.sagemaker.stop_requests == []
    reports = [r for r in reconciler_records(audit_acct) if r.rule == "required-tags"]
    assert [(r.action, r.outcome.value) for r in reports] == [("stop", "audit-only")]  # once, not per run


def test_a_job_the_event_path_evaluated_is_not_evaluated_again(acct: LocalAccount, clock: MovableClock) -> None:
    acct.sagemaker.launch(create_request("job-1"))
    acct.invoke(job_events, acct.sagemaker.event("job-1"))  # Starting: evaluated, and marked
    clock.advance(hours=2)
    result = reconcile(acct)
    assert result["repairs"] == {}
    assert [r for r in reconciler_records(acct) if r.rule != "idle-guard"] == []


def publish_fails_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """SNS refuses the next Publish (throttled past botocore's retries), then publishes."""
    publish = SnsNotifier.publish
    failed: list[str] = []

    def flaky(self: SnsNotifier, message: Any) -> str | None:
        if not failed:
            failed.append(message.job_name)
            raise AdapterError("SNS Publish failed: Throttling")
        return publish(self, message)

    monkeypatch.setattr(SnsNotifier, "publish", flaky)


def inbox_bodies(account: LocalAccount, inbox: str) -> list[dict[str, Any]]:
    """The notifications the owner's inbox holds (taken out), as sent."""
    bodies: list[dict[str, Any]] = []
    while messages := account.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            bodies.append(json.loads(message["Body"]))
            account.sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def test_a_never_evaluated_jobs_stop_whose_message_failed_is_told_once_at_its_stopped_event(
    ledger_acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an untagged job whose Starting event was lost, and SNS refusing the reconciler's Publish once
    inbox = ledger_acct.notification_inbox()
    ledger_acct.sagemaker.launch(create_request("untagged", tags={}))
    publish_fails_once(monkeypatch)
    # When the reconciler evaluates and stops it (its message failing: an error of the run), the job stops (its
    # Stopped event delivered twice) and the reconciler runs on
    clock.advance(minutes=16)
    assert reconcile(ledger_acct)["errors"] == 1
    assert ledger_acct.sagemaker.stop_requests == ["untagged"]
    ledger_acct.sagemaker.transition("untagged", "Stopped", "Stopped")
    for _ in range(2):
        ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("untagged"))
        clock.advance(minutes=15)
        reconcile(ledger_acct)
    # Then the stop is recorded once, and its owner told once, at the Stopped event, that the job was stopped
    stops = [r for r in ledger_acct.audit.records if r.action == "stop"]
    assert [(r.trigger, r.code, r.outcome.value) for r in stops] == [
        ("reconciler", "compliance.stop.violation", "done")
    ]
    (told,) = inbox_bodies(ledger_acct, inbox)
    assert (told["kind"], told["outcome"]) == ("compliance", "stopped")
    assert [item["code"] for item in told["items"]] == ["compliance.stop.violation"]


def test_a_notice_told_with_a_stop_whose_message_failed_is_told_and_recorded_once_at_the_stopped_event(
    ledger_acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a never-evaluated Spot job without tags or checkpoints (a stop rule and a notify rule both violated),
    # and SNS refusing the reconciler's Publish once
    inbox = ledger_acct.notification_inbox()
    ledger_acct.sagemaker.launch(
        create_request(
            "spotty",
            tags={},
            EnableManagedSpotTraining=True,
            StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 90_000},
        )
    )
    publish_fails_once(monkeypatch)
    # When the reconciler stops it (its one message, stop and notice, failing), the job's Stopped event is
    # delivered twice and the reconciler runs on
    clock.advance(minutes=16)
    assert reconcile(ledger_acct)["errors"] == 1
    assert ledger_acct.sagemaker.stop_requests == ["spotty"]
    ledger_acct.sagemaker.transition("spotty", "Stopped", "Stopped")
    for _ in range(2):
        ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("spotty"))
        clock.advance(minutes=15)
        reconcile(ledger_acct)
    # Then the owner is told once, of the stop and the notice, and each is recorded done once: the stop by the
    # reconciler that made it, the notice by the Stopped event that told it
    (told,) = inbox_bodies(ledger_acct, inbox)
    assert told["outcome"] == "stopped"
    assert sorted(item["code"] for item in told["items"]) == [
        "compliance.notify.violation",
        "compliance.stop.violation",
    ]
    acted = [
        (r.trigger, r.action, r.outcome.value)
        for r in ledger_acct.audit.records
        if r.rule in ("required-tags", "spot-checkpoint")
    ]
    assert sorted(acted) == [("job-state-change", "notify", "done"), ("reconciler", "stop", "done")]


def test_a_stopped_job_compliance_did_not_stop_is_told_nothing_at_its_stopped_event(
    ledger_acct: LocalAccount,
) -> None:
    # Given an untagged job its owner stopped before anything evaluated it (its Starting event lost)
    inbox = ledger_acct.notification_inbox()
    ledger_acct.sagemaker.launch(create_request("untagged", tags={}))
    ledger_acct.sagemaker.transition("untagged", "Stopped", "Stopped")
    # When its Stopped event is delivered
    ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("untagged"))
    # Then nobody is told, and no stop is recorded
    assert inbox_bodies(ledger_acct, inbox) == []
    assert [r for r in ledger_acct.audit.records if r.action == "stop"] == []


def test_a_never_evaluated_jobs_stop_whose_notice_could_not_be_claimed_is_told_once_by_the_reconciler(
    ledger_acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an untagged job whose Starting event was lost, and the ledger refusing the claim of its compliance
    # notice once (DynamoDB throttled past botocore's retries)
    inbox = ledger_acct.notification_inbox()
    ledger_acct.sagemaker.launch(create_request("untagged", tags={}))
    claim = DeliveryLedger.claim
    refused: list[str] = []

    def refused_once(self: DeliveryLedger, key: str, owner: str, now: datetime, hold: float) -> Claim:
        if key.startswith("compliance:") and not refused:
            refused.append(key)
            raise AdapterError(f"DynamoDB UpdateItem (claim {key}) failed: ProvisionedThroughputExceededException")
        return claim(self, key, owner, now, hold)

    monkeypatch.setattr(DeliveryLedger, "claim", refused_once)
    # When the reconciler evaluates and stops it, the job stops (its Stopped event delivered) and the reconciler
    # runs on
    clock.advance(minutes=16)
    reconcile(ledger_acct)
    assert ledger_acct.sagemaker.stop_requests == ["untagged"]
    ledger_acct.sagemaker.transition("untagged", "Stopped", "Stopped")
    ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("untagged"))
    for _ in range(2):
        clock.advance(minutes=15)
        reconcile(ledger_acct)
    # Then the claim was tried, the stop recorded once, and its owner told once that the job was stopped
    assert refused == ["compliance:untagged"]
    stops = [r for r in ledger_acct.audit.records if r.action == "stop"]
    assert [(r.trigger, r.outcome.value) for r in stops] == [("reconciler", "done")]
    (told,) = inbox_bodies(ledger_acct, inbox)
    assert (told["kind"], told["outcome"]) == ("compliance", "stopped")


def test_a_never_evaluated_jobs_notice_whose_message_failed_is_told_and_recorded_once(
    acct: LocalAccount, clock: MovableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Spot job without checkpoints (a notify-only violation) whose Starting event was lost, and SNS
    # refusing the reconciler's Publish once
    inbox = acct.notification_inbox()
    acct.sagemaker.launch(
        create_request(
            "spotty",
            EnableManagedSpotTraining=True,
            StoppingCondition={"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 90_000},
        )
    )
    publish_fails_once(monkeypatch)
    # When the reconciler evaluates it (its message failing: an error of the run), and runs again
    clock.advance(minutes=16)
    assert reconcile(acct)["errors"] == 1
    clock.advance(minutes=15)
    assert reconcile(acct)["repairs"] == {"unevaluated-job": 1}
    clock.advance(minutes=15)
    reconcile(acct)
    # Then the notice is recorded done once, by the run that told the owner, and the owner told once
    notices = [r for r in reconciler_records(acct) if r.action == "notify"]
    assert [(r.code, r.outcome.value) for r in notices] == [("compliance.notify.violation", "done")]
    (told,) = inbox_bodies(acct, inbox)
    assert told["outcome"] == "notified"


def test_an_exempt_job_is_evaluated_once_and_not_stopped(acct: LocalAccount, clock: MovableClock) -> None:
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Value=(
            "exemptions:\n  - job_name_prefix: legacy-\n    rules: [required-tags]\n"
            "    expires: 2099-01-01\n    reason: migration\n"
        ),
    )
    acct.sagemaker.launch(create_request("legacy-job", tags={}))
    clock.advance(minutes=20)
    reconcile(acct)
    reconcile(acct)
    assert acct.sagemaker.stop_requests == []
    exempted = [r for r in reconciler_records(acct) if r.outcome.value == "exempted"]
    assert [r.rule for r in exempted] == ["required-tags"]


# ---- pagination and time budget -----------------------------------------------------------------


def test_every_page_of_jobs_and_alarms_is_read(acct: LocalAccount, clock: MovableClock) -> None:
    # Given 5 jobs in Training without alarms and 5 ended jobs with orphan alarms, 2 per page
    for i in range(5):
        training(acct, f"ended-{i}")
        acct.sagemaker.transition(f"ended-{i}", "Completed", "Completed")
        training(acct, f"lost-{i}", event=False)
    acct.sagemaker.list_page_size = 2
    acct.cloudwatch.alarm_page_size = 2
    # When the reconciler runs
    result = reconcile(acct)
    # Then every page was read and everything repaired
    # (SageMaker pages before it filters by status: the 10 jobs of the horizon in 5 pages for those in progress,
    # and the 10 modified within the look-back in 5 for the failed ones, the deferred resumes')
    assert acct.sagemaker.calls["ListTrainingJobs"] == 10
    assert acct.cloudwatch.calls["DescribeAlarms"] == 3
    assert result["repairs"] == {"orphan-alarm": 5, "missing-alarm": 5}
    assert set(acct.cloudwatch.alarms) == {f"{PREFIX}lost-{i}" for i in range(5)}


class CountdownBudget:
    """Seconds left: each look at the budget costs one second (about one work item)."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def __call__(self) -> float:
        self.left -= 1
        return self.left


def test_runs_stop_within_their_budget_and_eventually_cover_every_job(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given 60 ended jobs with orphan alarms and 60 jobs in Training without alarms
    for i in range(60):
        training(acct, f"ended-{i:03d}")
        acct.sagemaker.transition(f"ended-{i:03d}", "Completed", "Completed")
        training(acct, f"lost-{i:03d}", event=False)
    service = reconciler_service(acct.root)
    trigger = Trigger(kind="reconciler", event_id="test")
    # When each run can only get through 15 items (35 seconds, 20 of them kept as a margin)
    wanted = {f"{PREFIX}lost-{i:03d}" for i in range(60)}
    runs: list[Any] = []
    while set(acct.cloudwatch.alarms) != wanted and len(runs) < 100:
        runs.append(service.run(trigger, CountdownBudget(36)))
        clock.advance(minutes=10)
    # Then each run stopped early within its budget (one look of it spent between the two pages of the jobs in
    # progress, and one between the two of the failed jobs', listed first for the deferred resumes, while the
    # 120 jobs were modified within their look-back), and every orphan and every missing alarm was repaired
    assert all(r.stopped_early and len(r.visited) in (13, 14) for r in runs)
    assert set(acct.cloudwatch.alarms) == wanted
    assert sum(r.repairs["orphan-alarm"] for r in runs) == 60
    assert sum(r.repairs["missing-alarm"] for r in runs) == 60
    assert len(runs) <= 3 * 120 // 13  # the rotation's bound (domain/reconcile.py): nobody is starved


def test_no_time_left_means_no_call_at_all(acct: LocalAccount) -> None:
    report = reconciler_service(acct.root).run(Trigger(kind="reconciler"), lambda: 5.0)
    assert report.stopped_early and report.visited == []
    assert sum(acct.sagemaker.calls.values()) == sum(acct.cloudwatch.calls.values()) == 0


class PagedBudget:
    """Seconds left of a 300 s run in which each ``ListTrainingJobs`` page costs ``page_s`` (a busy account's
    listing: SageMaker pages jobs of every status) and nothing else costs time."""

    def __init__(self, account: LocalAccount, page_s: float) -> None:
        self.account, self.page_s = account, page_s
        self.pages_before = account.sagemaker.calls["ListTrainingJobs"]

    def __call__(self) -> float:
        return 300.0 - (self.account.sagemaker.calls["ListTrainingJobs"] - self.pages_before) * self.page_s


def test_a_window_longer_than_a_run_can_list_leaves_the_repairs_their_time_and_is_reached_over_runs(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given, oldest first: a job in Training with its alarm, a job in Training whose Training event was lost,
    # then 60 ended jobs (31 pages of 2), and two hours later (beyond the deferred resumes' look-back, whose
    # listing stays short) an orphan alarm's job and a new job whose Training event was lost
    training(acct, "old-watched")
    training(acct, "old-lost", event=False)
    for i in range(60):
        clock.advance(minutes=1)
        acct.sagemaker.launch(create_request(f"hist-{i:03d}"))
        acct.sagemaker.transition(f"hist-{i:03d}", "Completed", "Completed")
    clock.advance(hours=2)
    training(acct, "ended")
    acct.sagemaker.transition("ended", "Completed", "Completed")
    training(acct, "new-lost", event=False)
    acct.sagemaker.list_page_size = 2
    service = reconciler_service(acct.root)
    trigger = Trigger(kind="reconciler", event_id="test")
    # When the reconciler runs every 10 minutes and a page costs 10 s, so a run can read 28 pages, not the 32
    runs = [service.run(trigger, PagedBudget(acct, page_s=10.0))]
    # Then the first run lists for half its time and repairs with the rest: the orphan alarm deleted and the new
    # job watched, the oldest jobs (not listed) untouched: the watched one's alarm re-read and kept
    assert runs[0].stopped_early and runs[0].repairs == {"orphan-alarm": 1, "missing-alarm": 1}
    assert f"{PREFIX}ended" not in acct.cloudwatch.alarms and f"{PREFIX}new-lost" in acct.cloudwatch.alarms
    assert f"{PREFIX}old-watched" in acct.cloudwatch.alarms and f"{PREFIX}old-lost" not in acct.cloudwatch.alarms
    # And the next runs list the newest jobs again, then continue where the last one stopped, until the oldest
    # job in progress is reached and watched too
    for _ in range(4):
        clock.advance(minutes=10)
        runs.append(service.run(trigger, PagedBudget(acct, page_s=10.0)))
    assert all(r.visited for r in runs)
    assert sum(r.repairs["missing-alarm"] for r in runs[1:]) == 1
    assert f"{PREFIX}old-lost" in acct.cloudwatch.alarms and f"{PREFIX}old-watched" in acct.cloudwatch.alarms


# ---- the event ----------------------------------------------------------------------------------


def test_the_handler_rejects_an_event_that_is_not_a_schedule(acct: LocalAccount) -> None:
    with pytest.raises(ValidationError):
        acct.invoke(reconciler, load_event("training-job-starting.json"))


@pytest.fixture
def log_level_warning() -> Iterator[None]:
    """The functions started with LogLevel WARNING (their logger as ``observability`` sets it up then)."""
    saved = logger.log_level
    govern_diagnostics_only(logging.WARNING)
    yield
    govern_diagnostics_only(saved)


def test_each_run_writes_its_summary_whatever_the_log_level(
    acct: LocalAccount, log_output: io.StringIO, log_level_warning: None
) -> None:
    # Given the functions at LogLevel WARNING (INFO diagnostics are dropped) and an orphan alarm to repair
    training(acct)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    start = log_output.tell()
    # When the reconciler runs
    reconcile(acct)
    # Then it still writes its one summary line, what `smgov doctor` reads to tell that the reconciler runs
    written = [json.loads(line) for line in log_output.getvalue()[start:].splitlines() if line.startswith("{")]
    (summary,) = [line for line in written if line["message"] == "reconcile run"]
    assert summary["reconcile"]["repairs"] == {"orphan-alarm": 1} and summary["reconcile"]["errors"] == 0


# ---- the progress guard's alarms (issue 11) -------------------------------------------------------

LOSS = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
}


def test_a_lost_training_event_gets_both_guards_alarms_from_the_reconciler(acct: LocalAccount) -> None:
    # Given a GPU job that logs a progress metric, whose Training event was lost
    training(acct, event=False, AlgorithmSpecification=LOSS)
    # When the reconciler runs
    result = reconcile(acct)
    # Then the idle alarm and both progress alarms exist, the stall alarm created disarmed
    assert set(acct.cloudwatch.alarms) == {
        f"{PREFIX}job-1",
        f"{PREFIX}job-1.progress",
        f"{PREFIX}job-1.progress-armer",
    }
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1.progress"]["ActionsEnabled"] is False
    assert result["repairs"] == {"missing-alarm": 2}
    assert {r.rule for r in reconciler_records(acct) if r.action == "create-alarm"} == {
        "idle-guard",
        "progress-guard",
    }
    # and a second run repairs nothing (an armed or disarmed stall alarm is left as it is)
    assert reconcile(acct)["repairs"] == {}


def test_an_armed_progress_alarm_is_not_recreated(acct: LocalAccount) -> None:
    training(acct, AlgorithmSpecification=LOSS)
    acct.cloudwatch.alarms[f"{PREFIX}job-1.progress"]["ActionsEnabled"] = True  # the stopper armed it
    assert reconcile(acct)["repairs"] == {}
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1.progress"]["ActionsEnabled"] is True


def test_orphaned_progress_alarms_are_deleted_with_the_job_alarm(acct: LocalAccount) -> None:
    # Given a job with all its alarms whose terminal event was lost
    training(acct, AlgorithmSpecification=LOSS)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    # When the reconciler runs, every alarm of the job is gone
    reconcile(acct)
    assert acct.cloudwatch.alarms == {}


def test_progress_alarms_with_the_longest_descriptions_are_still_the_stacks(acct: LocalAccount) -> None:
    # Given a job that watches ten progress metrics of 53 characters each, their names filling the stall
    # alarm's description past CloudWatch's 1,024 characters
    names = [f"validation:per_class_mean_average_precision_at_iou_050_{i:02d}" for i in range(10)]
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Value=f"progress: {{metric_names: [{', '.join(names)}]}}",
        Type="String",
        Overwrite=True,
    )
    definitions = [{"Name": n, "Regex": "x=([0-9.]+)"} for n in names]
    training(acct, "j" * 63, AlgorithmSpecification={**LOSS, "MetricDefinitions": definitions})
    assert f"{PREFIX}{'j' * 63}.progress" in acct.cloudwatch.alarms
    # When the reconciler runs twice, then it finds every alarm of the job and repairs nothing
    assert reconcile(acct)["repairs"] == {}
    assert reconcile(acct)["repairs"] == {}
    # and once the job ended with its end event lost, the next run deletes every alarm of it
    acct.sagemaker.transition("j" * 63, "Completed", "Completed")
    assert reconcile(acct)["repairs"] == {"orphan-alarm": 1}
    assert acct.cloudwatch.alarms == {}


def test_a_guard_alarm_left_in_alarm_is_reset_at_the_next_run_so_the_job_is_judged_again(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a training job whose idle alarm the stall judge left in ALARM (a vetoed pinned trigger)
    training(acct)
    alarm = f"{PREFIX}job-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    # When the reconciler runs a minute later (judge.rearm_minutes 10, every 10 minutes: by the next run the
    # alarm would have sat there longer than 10 minutes), it resets it and says so
    clock.advance(minutes=1)
    assert reconcile(acct)["repairs"] == {"stale-alarm": 1}
    assert acct.cloudwatch.state(alarm) == "OK"
    (record,) = [r for r in reconciler_records(acct) if r.code == "reconciler.rearm.stale-alarm"]
    assert record.evidence["alarms"] == [alarm]


def test_a_composite_left_in_alarm_is_rearmed_through_its_children(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a 16-host job whose composite idle alarm the stall judge left in ALARM, its children in ALARM too
    training(acct, ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16, "VolumeSizeInGB": 100})
    composite = f"{PREFIX}job-1"
    children = sorted(a for a in acct.cloudwatch.alarms if a.startswith(f"{composite}.hosts-"))
    assert len(children) == 2
    for name in (*children, composite):
        acct.cloudwatch.set_state(name, "ALARM")
    # When the reconciler re-arms it, then its children are reset instead: a composite reset stays in OK while
    # its children stay in ALARM (SetAlarmState API reference), and would never notify again; a child's
    # return to ALARM has the composite evaluated again
    clock.advance(minutes=1)
    assert reconcile(acct)["repairs"] == {"stale-alarm": 1}
    assert {acct.cloudwatch.state(name) for name in children} == {"OK"}
    (record,) = [r for r in reconciler_records(acct) if r.code == "reconciler.rearm.stale-alarm"]
    assert record.evidence["alarms"] == [composite] and record.evidence["reset"] == children


def test_a_longer_rearm_waits_for_the_last_run_before_it(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a team that has its pinned jobs judged every 30 minutes at most
    acct.ssm.put_parameter(Name="/gov/policy", Value="judge: {rearm_minutes: 30}", Type="String")
    training(acct)
    alarm = f"{PREFIX}job-1"
    acct.cloudwatch.set_state(alarm, "ALARM")
    # When the reconciler runs 19 minutes later: nothing (the next run, at 29, is still within 30)
    clock.advance(minutes=19)
    assert reconcile(acct)["repairs"] == {}
    assert acct.cloudwatch.state(alarm) == "ALARM"
    # Then at 21 minutes (the next run would be at 31) it resets it
    clock.advance(minutes=2)
    assert reconcile(acct)["repairs"] == {"stale-alarm": 1}
    assert acct.cloudwatch.state(alarm) == "OK"


def test_a_progress_armer_left_in_alarm_with_its_actions_on_is_reset_so_the_guard_is_armed(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose armer fired while its stall alarm stayed disarmed: its notification was lost, or a late
    # Training event created the alarms again after it fired (PutMetricAlarm keeps the state: it would never
    # notify again, and the progress guard would never be armed)
    training(acct, AlgorithmSpecification=LOSS)
    armer = f"{PREFIX}job-1.progress-armer"
    acct.cloudwatch.set_state(armer, "ALARM")
    assert acct.cloudwatch.alarms[armer]["ActionsEnabled"] is True
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1.progress"]["ActionsEnabled"] is False
    # When the reconciler runs: the armer is reset, so the next datapoint notifies and arms the guard
    clock.advance(minutes=1)
    assert reconcile(acct)["repairs"] == {"stale-alarm": 1}
    assert acct.cloudwatch.state(armer) == "OK"
    # and an armer the stopper disabled after arming the stall alarm (its usual state: in ALARM, actions off)
    # is left alone
    acct.cloudwatch.set_state(armer, "ALARM")
    acct.cloudwatch.alarms[armer]["ActionsEnabled"] = False
    acct.cloudwatch.alarms[f"{PREFIX}job-1.progress"]["ActionsEnabled"] = True
    clock.advance(minutes=30)
    assert reconcile(acct)["repairs"] == {}


def test_a_progress_alarm_not_armed_yet_is_never_reset_nor_turned_on(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job's progress stall alarm in ALARM with its actions off, its armer's on: the job has not published
    # its metric yet (a regex that never matches never will), so the guard must stay unarmed
    training(acct, AlgorithmSpecification=LOSS)
    stall = f"{PREFIX}job-1.progress"
    acct.cloudwatch.set_state(stall, "ALARM")
    assert acct.cloudwatch.alarms[stall]["ActionsEnabled"] is False
    # When the reconciler runs, 45 minutes on, then it neither resets it nor turns its actions on
    clock.advance(minutes=45)
    assert reconcile(acct)["repairs"] == {}
    assert acct.cloudwatch.state(stall) == "ALARM" and acct.cloudwatch.alarms[stall]["ActionsEnabled"] is False


# ---- alarms muted after a judgement that did not act (audit mode, an exemption, the guard off) -------------

IDLE_ALARM = f"{PREFIX}job-1"
MUTED = "reconciler.rearm.muted-alarm"


@pytest.fixture
def telling_audit_acct(clock: MovableClock, repairs: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from _account(clock, repairs, {**ENFORCE, "GOVERNANCE_MODE": "audit", "NOTIFY_IN_AUDIT_MODE": "true"})


def evaluated(account: LocalAccount, alarm: str) -> dict[str, Any] | None:
    """CloudWatch evaluates the alarm of a job that is still idle: a reset alarm goes back to ALARM, and that
    change notifies the stopper only while the alarm's actions are on (None: no notification)."""
    if account.cloudwatch.state(alarm) == "ALARM":
        return None
    account.cloudwatch.set_state(alarm, "ALARM")
    if not account.cloudwatch.alarms[alarm]["ActionsEnabled"]:
        return None
    result: dict[str, Any] = account.invoke(
        stopper, account.cloudwatch.sns_event([account.cloudwatch.notification(alarm)])
    )
    return result


def idle_job_judged(account: LocalAccount, clock: MovableClock) -> tuple[str, str]:
    """A GPU job idle (and silent) past its grace period whose idle alarm fired: the stopper's (code, outcome)."""
    training(account)
    JobSignals(clock).attach(account.cloudwatch).idle("job-1")
    log_stream("job-1")
    clock.advance(minutes=40)
    (result,) = fire(account, IDLE_ALARM)["results"]
    return result["code"], result["outcome"]


def would_stops(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "idle-guard" and r.action == "stop"]


def received(account: LocalAccount, inbox: str) -> int:
    """How many notifications the owner's inbox holds (taken out)."""
    count = 0
    while messages := account.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", []):
        count += len(messages)
        for message in messages:
            account.sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
    return count


def redeploy(account: LocalAccount, **environment: str) -> None:
    """A stack update (a parameter changed): every function starts again in new containers."""
    with patched_env(environment):
        account.root.settings = Settings.from_env()
    account.root.__dict__.pop("policy_store", None)
    for build in (reconciler_build, stopper_build, job_events_build):
        account.root.forget(build)


def test_an_audit_mode_would_stop_is_recorded_and_told_once_per_idle_stretch(
    telling_audit_acct: LocalAccount, clock: MovableClock
) -> None:
    acct = telling_audit_acct
    inbox = acct.notification_inbox()
    # Given an idle job whose alarm fired in audit mode: the stop it would make is recorded and told
    assert idle_job_judged(acct, clock) == ("idle.stop.idle", "audit-only")
    # Then its alarm stays in ALARM with its actions off (muted)
    assert (
        acct.cloudwatch.state(IDLE_ALARM) == "ALARM"
        and acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is False
    )
    # When the reconciler runs for an hour while the job stays idle, and CloudWatch evaluates the alarm after each
    for _ in range(6):
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        assert evaluated(acct, IDLE_ALARM) is None
    # Then the stretch is recorded once (its savings counted once) and the owner was told once
    (record,) = would_stops(acct)
    assert (record.code, record.outcome.value) == ("idle.stop.idle", "audit-only")
    assert received(acct, inbox) == 1
    assert acct.sagemaker.stop_requests == []


def test_a_muted_alarm_is_turned_on_when_its_stretch_ends_so_the_next_stretch_is_recorded(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an idle job's would-stop recorded in audit mode, its alarm muted
    assert idle_job_judged(audit_acct, clock) == ("idle.stop.idle", "audit-only")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {}
    # When the job works again (CloudWatch moves its alarm to OK) and the reconciler runs
    audit_acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    clock.advance(minutes=10)
    audit_acct.sagemaker.calls.clear()
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    # Then the alarm's actions are on again, without a read of the job, and the record says why
    assert audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is True
    assert "DescribeTrainingJob" not in audit_acct.sagemaker.calls
    (record,) = [r for r in reconciler_records(audit_acct) if r.code == MUTED]
    assert record.evidence["stretch_ended"] == [IDLE_ALARM] and record.evidence["reset"] == []
    # And when the job goes idle again, the new stretch is judged and recorded
    clock.advance(minutes=40)
    result = evaluated(audit_acct, IDLE_ALARM)
    assert result is not None and result["results"][0]["outcome"] == "audit-only"
    assert len(would_stops(audit_acct)) == 2


def test_a_team_switched_to_enforce_has_its_still_idle_job_stopped_at_the_next_run(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given an idle job's would-stop recorded in audit mode, its alarm muted, and a reconciler run that leaves it
    assert idle_job_judged(audit_acct, clock) == ("idle.stop.idle", "audit-only")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {}
    # (the warm container remembers the job's guard cannot act under this policy today: no second read)
    audit_acct.sagemaker.calls.clear()
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {}
    assert "DescribeTrainingJob" not in audit_acct.sagemaker.calls
    # When the idle guard is switched to enforce in the policy while the job stays idle
    audit_acct.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value="{idle: {mode: enforce}}", Overwrite=True
    )
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    # Then its alarm is turned on and reset, fires again, and the job is stopped
    (record,) = [r for r in reconciler_records(audit_acct) if r.code == MUTED]
    assert record.evidence["acts_now"] == [IDLE_ALARM] and record.evidence["reset"] == [IDLE_ALARM]
    result = evaluated(audit_acct, IDLE_ALARM)
    assert result is not None
    assert (result["results"][0]["code"], result["results"][0]["outcome"]) == ("idle.stop.idle", "done")
    assert audit_acct.sagemaker.stop_requests == ["job-1"]


def test_a_deployment_switched_from_audit_to_enforce_stops_the_jobs_it_had_only_reported(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a 12-host job whose composite idle alarm fired in audit mode: muted, its children in ALARM too
    training(audit_acct, ResourceConfig=TWELVE_HOSTS)
    JobSignals(clock).attach(audit_acct.cloudwatch).idle("job-1", hosts=12)
    log_stream("job-1")
    clock.advance(minutes=40)
    children = sorted(a for a in audit_acct.cloudwatch.alarms if a.startswith(f"{IDLE_ALARM}.hosts-"))
    for child in children:
        audit_acct.cloudwatch.set_state(child, "ALARM")
    (result,) = fire(audit_acct, IDLE_ALARM)["results"]
    assert result["outcome"] == "audit-only"
    assert audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is False
    # When the stack is updated with GovernanceMode=enforce (new containers) and the reconciler runs
    redeploy(audit_acct, GOVERNANCE_MODE="enforce")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    # Then the composite is turned on and its children reset (a composite reset alone would stay in OK)
    assert audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is True
    assert {audit_acct.cloudwatch.state(child) for child in children} == {"OK"}
    # and when the children return to ALARM the composite notifies again: the job is stopped
    for child in children:
        audit_acct.cloudwatch.set_state(child, "ALARM")
    audit_acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    result_after = evaluated(audit_acct, IDLE_ALARM)
    assert result_after is not None and result_after["results"][0]["outcome"] == "done"
    assert audit_acct.sagemaker.stop_requests == ["job-1"]


def test_a_guard_switched_off_judges_its_idle_job_once_not_at_every_run(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given the idle guard switched off while a job's idle alarm exists
    training(acct)
    acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="{idle: {enabled: false}}", Overwrite=True)
    clock.advance(minutes=40)
    # When its alarm fires and the reconciler runs for an hour while the job stays idle
    (result,) = fire(acct, IDLE_ALARM)["results"]
    assert result["code"] == "idle.skip.disabled"
    for _ in range(6):
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        assert evaluated(acct, IDLE_ALARM) is None
    # Then the guard's "off" is recorded once
    assert [r.code for r in acct.audit.records if r.rule == "idle-guard" and r.trigger != "job-state-change"] == [
        "idle.skip.disabled"
    ]
    # And when it is switched on again while the job stays idle, the job is judged, and stopped
    JobSignals(clock).attach(acct.cloudwatch).idle("job-1")
    log_stream("job-1")
    acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="{idle: {enabled: true}}", Overwrite=True)
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"muted-alarm": 1}
    result_after = evaluated(acct, IDLE_ALARM)
    assert result_after is not None and result_after["results"][0]["outcome"] == "done"
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_a_progress_stall_reported_in_audit_mode_is_told_once_and_armed_again_when_progress_resumes(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose progress guard was armed (its metric published) and whose stall alarm fired in audit mode
    training(audit_acct, AlgorithmSpecification=LOSS)
    stall, armer = f"{PREFIX}job-1.progress", f"{PREFIX}job-1.progress-armer"
    fire(audit_acct, armer)
    assert audit_acct.cloudwatch.alarms[stall]["ActionsEnabled"] is True
    JobSignals(clock).attach(audit_acct.cloudwatch).idle("job-1")
    log_stream("job-1")
    clock.advance(hours=3)
    (result,) = fire(audit_acct, stall)["results"]
    assert (result["code"], result["outcome"]) == ("progress.stop.stalled", "audit-only")
    # When the reconciler runs while the job stays stalled: nothing is reset, nothing judged again
    for _ in range(3):
        clock.advance(minutes=10)
        assert reconcile(audit_acct)["repairs"] == {}
        assert evaluated(audit_acct, stall) is None
    assert len([r for r in audit_acct.audit.records if r.rule == "progress-guard" and r.action == "stop"]) == 1
    # Then, progress resumed (the stall alarm back to OK), the stall alarm is armed again, the armer left off
    audit_acct.cloudwatch.set_state(stall, "OK")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    assert audit_acct.cloudwatch.alarms[stall]["ActionsEnabled"] is True
    assert audit_acct.cloudwatch.alarms[armer]["ActionsEnabled"] is False


IDLE_EXEMPTION = """
exemptions:
  - tag: {smgov-approved-idle: INC-42}
    rules: [idle-guard]
    expires: 2027-01-31
    reason: "INC-42: approved idle debugging session"
"""


def retag(account: LocalAccount, name: str, changes: dict[str, str | None]) -> None:
    """The job's tags changed while it runs (AddTags, DeleteTags: a tag given None is removed)."""
    arn = account.sagemaker.arn(name)
    tags = {t["Key"]: t["Value"] for t in account.sagemaker.tags[arn]}
    for key, value in changes.items():
        if value is None:
            tags.pop(key, None)
        else:
            tags[key] = value
    account.sagemaker.tags[arn] = [{"Key": k, "Value": v} for k, v in tags.items()]


@pytest.mark.parametrize(
    ("policy", "tags", "change"),
    [
        # an exemption that matched a tag of the job, lifted by removing the tag from the running job
        (IDLE_EXEMPTION, {"smgov-approved-idle": "INC-42"}, {"smgov-approved-idle": None}),
        # the job moved from a team in audit mode to a team in enforce mode (its team tag changed)
        ("teams: {lab: {mode: audit}}", {"team": "lab"}, {"team": "vision"}),
    ],
)
def test_a_tag_change_that_lets_the_guard_act_is_seen_within_the_rearm_minutes(
    acct: LocalAccount, clock: MovableClock, policy: str, tags: dict[str, str], change: dict[str, str | None]
) -> None:
    # Given an idle job whose tags keep its idle guard from acting (exempt, or its team in audit mode): the
    # stopper's judgement muted its alarm, and a reconciler run found the guard could not act on it
    training(acct, tags={"team": "vision", "cost-center": "cc-1", "owner": "alice", **tags})
    acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value=policy, Overwrite=True)
    JobSignals(clock).attach(acct.cloudwatch).idle("job-1")
    log_stream("job-1")
    clock.advance(minutes=40)
    (result,) = fire(acct, IDLE_ALARM)["results"]
    assert result["outcome"] in ("exempted", "audit-only")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {}
    # When the job's tags change while it stays idle (the policy unchanged, the same UTC day)
    retag(acct, "job-1", change)
    clock.advance(minutes=10)
    # Then the next run (judge.rearm_minutes is 10, the interval too) turns the alarm on and resets it
    assert reconcile(acct)["repairs"] == {"muted-alarm": 1}
    (record,) = [r for r in reconciler_records(acct) if r.code == MUTED]
    assert record.evidence["acts_now"] == [IDLE_ALARM] and record.mode == "enforce"
    # and the job is judged again and stopped
    result_after = evaluated(acct, IDLE_ALARM)
    assert result_after is not None
    assert (result_after["results"][0]["code"], result_after["results"][0]["outcome"]) == (
        "idle.stop.idle",
        "done",
    )
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_a_held_jobs_tags_are_read_again_once_per_rearm_minutes_and_nothing_else_is_read(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a would-stop recorded in audit mode (its alarm muted) under a policy whose re-arm is 30 minutes
    audit_acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="judge: {rearm_minutes: 30}")
    assert idle_job_judged(audit_acct, clock) == ("idle.stop.idle", "audit-only")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {}
    # When the reconciler runs every 10 minutes for an hour while the job stays idle and the guard cannot act
    reads = []
    for _ in range(6):
        audit_acct.sagemaker.calls.clear()
        clock.advance(minutes=10)
        assert reconcile(audit_acct)["repairs"] == {}
        assert evaluated(audit_acct, IDLE_ALARM) is None
        reads.append((audit_acct.sagemaker.calls["ListTags"], audit_acct.sagemaker.calls["DescribeTrainingJob"]))
    # Then its tags are read at the run after which they would be 30 minutes old (every 20 minutes here, so a
    # change is seen within 30), and the job itself is not read
    assert reads == [(0, 0), (1, 0), (0, 0), (1, 0), (0, 0), (1, 0)]


def test_a_muted_alarm_turned_on_is_recorded_in_its_teams_mode(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a job of a team in audit mode under an enforcing deployment: its would-stop recorded, its alarm muted
    acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="teams: {vision: {mode: audit}}")
    assert idle_job_judged(acct, clock) == ("idle.stop.idle", "audit-only")
    # When its stretch ends and the reconciler turns the alarm on again
    acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"muted-alarm": 1}
    # Then the record carries the team's mode and the job's team (its tags), not the deployment's mode
    (record,) = [r for r in reconciler_records(acct) if r.code == MUTED]
    assert record.mode == "audit" and record.team == "vision"


def test_a_muted_alarm_whose_tags_cannot_be_read_is_left_muted_unless_its_stretch_ended(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a would-stop recorded in audit mode, its alarm muted, a run that left it so, and the idle guard then
    # switched to enforce
    assert idle_job_judged(audit_acct, clock) == ("idle.stop.idle", "audit-only")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {}
    audit_acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="{idle: {mode: enforce}}")
    # When the job's tags cannot be read (what the guard may do unknown)
    audit_acct.sagemaker.fail_next["ListTags"] = SageMakerError("AccessDeniedException", "denied", 400)
    clock.advance(minutes=10)
    # Then nothing is turned on (the job is not judged on a guess), and the next run asks again
    assert reconcile(audit_acct)["repairs"] == {} and "ListTags" not in audit_acct.sagemaker.fail_next
    assert audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is False
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    # And an alarm whose stretch ended is turned on even when the tags cannot be read (they only name the team)
    audit_acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] = False
    audit_acct.sagemaker.fail_next["ListTags"] = SageMakerError("AccessDeniedException", "denied", 400)
    clock.advance(minutes=10)
    assert (
        reconcile(audit_acct)["repairs"] == {"muted-alarm": 1} and "ListTags" not in audit_acct.sagemaker.fail_next
    )
    assert audit_acct.cloudwatch.alarms[IDLE_ALARM]["ActionsEnabled"] is True


EFFICIENCY_WITH_STOPS = "efficiency: {enabled: true, min_gpu_percent: 50, window_minutes: 60, grace_minutes: 30, stop_after_notices: 1}"


EFFICIENCY_STOP = f"{PREFIX}job-1.efficiency-stop"
EFFICIENCY_NOTICE = f"{PREFIX}job-1.efficiency"


def efficiency_stops(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "efficiency" and r.action == "stop"]


@pytest.mark.parametrize(
    ("before", "after", "held"),
    [
        # audit mode's would-stop; then the guard switched to enforce
        ("stop_after_notices: 1, mode: audit}", "stop_after_notices: 1, mode: enforce}", "audit-only"),
        # the guard off (its alarms kept); then on again
        (
            "stop_after_notices: 1}\nteams: {vision: {efficiency: {enabled: false}}}",
            "stop_after_notices: 1}",
            "no-action",
        ),
    ],
)
def test_an_efficiency_stop_held_for_its_stretch_is_made_at_the_next_run_once_its_guard_can_act(
    acct: LocalAccount, clock: MovableClock, before: str, after: str, held: str
) -> None:
    # Given a job under the minimum-utilization guard with stops, below the minimum for its whole stop window,
    # whose stop alarm fired while the guard could not stop it
    acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(acct)
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Overwrite=True,
        Value=EFFICIENCY_WITH_STOPS.replace("stop_after_notices: 1}", before),
    )
    clock.advance(minutes=30 + 120 + 5)
    (result,) = fire(acct, EFFICIENCY_STOP)["results"]
    assert result["outcome"] == held
    # Then its stop alarm is muted (left in ALARM, actions off): not judged again while the guard cannot act
    assert acct.cloudwatch.alarms[EFFICIENCY_STOP]["ActionsEnabled"] is False
    for _ in range(3):
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        assert evaluated(acct, EFFICIENCY_STOP) is None
    assert len([r for r in acct.audit.records if r.rule == "efficiency" and r.trigger == "efficiency-alarm"]) == 1
    # When the guard can stop the job (the job still below the minimum) and the reconciler runs
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Overwrite=True,
        Value=EFFICIENCY_WITH_STOPS.replace("stop_after_notices: 1}", after),
    )
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"muted-alarm": 1}
    (record,) = [r for r in reconciler_records(acct) if r.code == MUTED]
    assert record.evidence["acts_now"] == [EFFICIENCY_STOP] and record.evidence["reset"] == [EFFICIENCY_STOP]
    # Then the stop alarm fires again and the job is stopped
    result_after = evaluated(acct, EFFICIENCY_STOP)
    assert result_after is not None
    assert (result_after["results"][0]["code"], result_after["results"][0]["outcome"]) == (
        "efficiency.stop.below-minimum",
        "done",
    )
    assert acct.sagemaker.stop_requests == ["job-1"]


def test_a_large_jobs_efficiency_stop_composite_is_turned_on_through_its_children(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a 12-host job whose efficiency stop composite fired in audit mode (muted; its children in ALARM)
    audit_acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(audit_acct, ResourceConfig=TWELVE_HOSTS)
    clock.advance(minutes=30 + 120 + 5)
    children = [f"{EFFICIENCY_STOP}.hosts-1-10", f"{EFFICIENCY_STOP}.hosts-11-12"]
    for child in children:
        audit_acct.cloudwatch.set_state(child, "ALARM")
    (result,) = fire(audit_acct, EFFICIENCY_STOP)["results"]
    assert result["outcome"] == "audit-only"
    assert audit_acct.cloudwatch.alarms[EFFICIENCY_STOP]["ActionsEnabled"] is False
    # When the deployment is switched to enforce and the reconciler runs
    redeploy(audit_acct, GOVERNANCE_MODE="enforce")
    clock.advance(minutes=10)
    assert reconcile(audit_acct)["repairs"] == {"muted-alarm": 1}
    # Then the composite is turned on and its children reset (a composite reset alone would stay in OK)
    assert audit_acct.cloudwatch.alarms[EFFICIENCY_STOP]["ActionsEnabled"] is True
    assert {audit_acct.cloudwatch.state(child) for child in children} == {"OK"}


def test_an_efficiency_notice_and_a_stop_made_are_never_judged_again_by_the_reconciler(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job below the minimum: its notice told (the notice alarm left in ALARM, its actions on)
    acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(acct)
    clock.advance(minutes=95)
    (notice,) = fire(acct, EFFICIENCY_NOTICE)["results"]
    assert notice["code"] == "efficiency.notify.below-minimum"
    assert acct.cloudwatch.alarms[EFFICIENCY_NOTICE]["ActionsEnabled"] is True
    # When the reconciler runs while the job stays below (a warm container: the job evaluated, its alarms whole)
    reconcile(acct)
    for _ in range(3):
        clock.advance(minutes=10)
        acct.sagemaker.calls.clear()
        acct.cloudwatch.calls.clear()
        assert reconcile(acct)["repairs"] == {}
        # Then nothing is reset or turned on, and nothing of the job is read
        assert acct.sagemaker.calls.keys() <= {"ListTrainingJobs"}
        assert acct.cloudwatch.calls.keys() <= {"DescribeAlarms"}
    # And a stop made (enforce) is not judged again either: the job is stopping
    clock.advance(minutes=60)
    (stop,) = fire(acct, EFFICIENCY_STOP)["results"]
    assert (stop["code"], stop["outcome"]) == ("efficiency.stop.below-minimum", "done")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {}
    assert len(efficiency_stops(acct)) == 1


def test_a_large_jobs_idle_and_efficiency_composites_are_deleted_one_composite_per_request(
    acct: LocalAccount,
) -> None:
    # Given a 12-host job watched by the idle guard (a composite) and the minimum-utilization guard with
    # stops (a notice composite and a stop composite, each over two children), whose end event was lost
    acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(acct, ResourceConfig=TWELVE_HOSTS)
    kinds = [alarm["Kind"] for alarm in acct.cloudwatch.alarms.values()]
    assert kinds.count("composite") == 3 and len(kinds) == 9
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    before = len(acct.cloudwatch.requests)
    # When the reconciler runs
    result = reconcile(acct)
    # Then every alarm is gone without an error: the double refuses a request with two composites
    assert acct.cloudwatch.alarms == {} and result["errors"] == 0
    deletes = [p["AlarmNames"] for name, p in acct.cloudwatch.requests[before:] if name == "DeleteAlarms"]
    heads = {f"{PREFIX}job-1", f"{PREFIX}job-1.efficiency", f"{PREFIX}job-1.efficiency-stop"}
    assert len(deletes) == 3 and all(sum(n in heads for n in names) == 1 for names in deletes)
    (record,) = reconciler_records(acct)  # one repair record for the job
    assert len(record.evidence["deleted"]) == 9


def test_a_large_jobs_efficiency_composites_are_deleted_by_its_end_event(acct: LocalAccount) -> None:
    acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(acct, ResourceConfig=TWELVE_HOSTS)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    assert acct.cloudwatch.alarms == {}


def test_a_large_jobs_notice_composite_tells_the_owner_once(acct: LocalAccount, clock: MovableClock) -> None:
    # Given a 12-host job under the minimum-utilization guard, 95 minutes into Training
    acct.ssm.put_parameter(Name="/gov/policy", Value=EFFICIENCY_WITH_STOPS, Type="String")
    training(acct, ResourceConfig=TWELVE_HOSTS)
    clock.advance(minutes=95)
    head = f"{PREFIX}job-1.efficiency"
    for child in (f"{head}.hosts-1-10", f"{head}.hosts-11-12"):
        acct.cloudwatch.set_state(child, "ALARM")
    # When its notice composite fires
    fire(acct, head)
    # Then the owner is told (not stopped), and the alarms stay in ALARM (told once per stretch below)
    (decision,) = [r for r in acct.audit.records if r.rule == "efficiency" and r.trigger != "job-state-change"]
    assert decision.code == "efficiency.notify.below-minimum"
    assert acct.sagemaker.jobs["job-1"]["TrainingJobStatus"] == "InProgress"
    assert {acct.cloudwatch.alarms[c]["StateValue"] for c in (f"{head}.hosts-1-10", f"{head}.hosts-11-12")} == {
        "ALARM"
    }


# ---- the efficiency record of a job whose end event was lost (issue 20) ---------------------------

TABLE = "smgov-idempotency"


@pytest.fixture
def ledger_acct(clock: MovableClock, repairs: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    with local_account(clock, {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": TABLE}, metrics=repairs) as account:
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield account


def efficiency_records(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "efficiency-record"]


def ended_with_its_event_lost(
    account: LocalAccount, clock: MovableClock, minutes: int, status: str, **why: Any
) -> None:
    """A GPU job that trained for ``minutes`` and ended in ``status``; its end event never delivered."""
    training(account)
    clock.advance(minutes=minutes)
    account.sagemaker.transition("job-1", status, status, **why)


def test_a_lost_end_event_still_gets_one_efficiency_record_and_a_late_event_no_second(
    ledger_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a GPU job that trained for an hour and completed, its Completed event lost
    ended_with_its_event_lost(ledger_acct, clock, 60, "Completed")
    # When the reconciler finds its alarm left behind (twice: a later run too)
    first = reconcile(ledger_acct)
    reconcile(ledger_acct)
    # Then the job's efficiency record is written once, by the reconciler, as the event path writes it
    (record,) = efficiency_records(ledger_acct)
    assert record.trigger == "reconciler" and record.code.startswith("efficiency.record.")
    assert first["efficiency_records"] == 1 and first["repairs"] == {"orphan-alarm": 1}
    # And when the lost event arrives late after all, it writes no second record
    ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("job-1"))
    assert len(efficiency_records(ledger_acct)) == 1


def test_after_a_deferred_delete_the_reconciler_writes_no_second_record(
    ledger_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose end event was handled (its record written) but whose alarm stayed (a deferred delete)
    training(ledger_acct)
    clock.advance(minutes=30)
    ledger_acct.sagemaker.transition("job-1", "Completed", "Completed")
    alarm = dict(ledger_acct.cloudwatch.alarms)
    ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("job-1"))
    assert len(efficiency_records(ledger_acct)) == 1
    ledger_acct.cloudwatch.alarms.update(alarm)  # as if DeleteAlarms had been throttled
    # When the reconciler deletes the orphan alarm
    result = reconcile(ledger_acct)
    # Then it writes no record of its own
    assert result["repairs"] == {"orphan-alarm": 1} and "efficiency_records" not in result
    assert len(efficiency_records(ledger_acct)) == 1


def test_without_a_ledger_the_reconciler_writes_no_efficiency_record(acct: LocalAccount) -> None:
    # It could not tell whether the event path wrote one (chargeback would count the job twice)
    training(acct)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    reconcile(acct)
    assert efficiency_records(acct) == []


def test_a_failed_job_whose_end_event_was_lost_gets_its_auto_resume_decision_from_the_reconciler(
    ledger_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a GPU job that trained for three hours and failed with a transient error, its Failed event lost
    reason = "InternalServerError: We encountered an internal error."
    ended_with_its_event_lost(ledger_acct, clock, 180, "Failed", failure_reason=reason)
    # When the reconciler finds its alarm left behind
    reconcile(ledger_acct)
    # Then auto-resume decided about it, as the lost event would have (here: no checkpoint was ever written,
    # so it is not cloned), once: a second run finds nothing left to repair
    decided = [r for r in reconciler_records(ledger_acct) if r.rule == "auto-resume"]
    assert [r.code for r in decided] and all(r.code.startswith("resume.") for r in decided)
    reconcile(ledger_acct)
    assert [r for r in reconciler_records(ledger_acct) if r.rule == "auto-resume"] == decided
    # and when the lost Failed event arrives late after all, it writes no second auto-resume record
    ledger_acct.invoke(job_events, ledger_acct.sagemaker.event("job-1"))
    assert [r for r in ledger_acct.audit.records if r.rule == "auto-resume"] == decided


def test_a_completed_job_whose_end_event_was_lost_is_not_given_to_auto_resume(
    ledger_acct: LocalAccount, clock: MovableClock
) -> None:
    ended_with_its_event_lost(ledger_acct, clock, 180, "Completed")
    reconcile(ledger_acct)
    assert not [r for r in reconciler_records(ledger_acct) if r.rule == "auto-resume"]


def lagging_reread(account: LocalAccount, name: str, stale: dict[str, Any]) -> None:
    """The second DescribeTrainingJob of ``name`` from now on (auto-resume's re-read, after the reconciler's own)
    answers ``stale``; every other read the truth."""
    describe = account.sagemaker._op_DescribeTrainingJob
    reads = [0]

    def lag(params: dict[str, Any]) -> dict[str, Any]:
        if params["TrainingJobName"] != name:
            return describe(params)
        reads[0] += 1
        return copy.deepcopy(stale) if reads[0] == 2 else describe(params)

    account.sagemaker._op_DescribeTrainingJob = lag  # type: ignore[method-assign]


@pytest.mark.parametrize("failure", ["reread-lags", "create-refused"])
def test_a_lost_end_whose_auto_resume_failed_is_resumed_by_a_later_run_once(
    ledger_acct: LocalAccount, clock: MovableClock, failure: str
) -> None:
    # Given a checkpointed GPU job that trained for 26 hours and failed transiently, its Failed event lost
    inbox = ledger_acct.notification_inbox()
    fake = ledger_acct.sagemaker
    training(ledger_acct, CheckpointConfig={"S3Uri": "s3://bucket/checkpoints/job-1/"})
    clock.advance(hours=26)
    stale = copy.deepcopy(fake._op_DescribeTrainingJob({"TrainingJobName": "job-1"}))
    fake.transition("job-1", "Failed", "Failed", failure_reason="InternalServerError: Please try again.")
    # and the reconciler's auto-resume of it fails: its re-read lags, or SageMaker refuses the clone once
    if failure == "reread-lags":
        lagging_reread(ledger_acct, "job-1", stale)
    else:
        fake.fail_next["CreateTrainingJob"] = SageMakerError("ResourceLimitExceeded", "quota", 400)
    # When the reconciler finds its alarm left behind, its auto-resume fails (an error of the run) and the job is
    # tagged smgov:resume-after, so the deferred-resume pass (this run's, else a later one's) decides it again
    runs = [reconcile(ledger_acct)]
    assert runs[0]["errors"] >= 1
    assert any(t["Key"] == "smgov:resume-after" for t in fake.tags[fake.arn("job-1")])
    for _ in range(12):  # two more hours of runs
        clock.advance(minutes=10)
        runs.append(reconcile(ledger_acct))
    # Then it is resumed once, by the deferred-resume pass, and its owner told once
    assert [r["TrainingJobName"] for r in fake.created] == ["job-1-r1"]
    assert sum(run["repairs"].get("deferred-resume", 0) for run in runs) == 1
    told = ledger_acct.sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["kind"] for m in told].count("resume") == 1


def test_a_lost_end_whose_auto_resume_failed_and_could_not_be_tagged_is_an_error_of_the_run(
    ledger_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a failed job whose Failed event was lost, SageMaker refusing its clone once and then the tag
    fake = ledger_acct.sagemaker
    training(ledger_acct, CheckpointConfig={"S3Uri": "s3://bucket/checkpoints/job-1/"})
    clock.advance(hours=26)
    fake.transition("job-1", "Failed", "Failed", failure_reason="InternalServerError: Please try again.")
    fake.fail_next["CreateTrainingJob"] = SageMakerError("ResourceLimitExceeded", "quota", 400)
    fake.fail_next["AddTags"] = SageMakerError("ThrottlingException", "Rate exceeded", 400)
    # When the reconciler finds its alarm left behind
    first = reconcile(ledger_acct)
    # Then both failures are errors of the run, and nothing was made or tagged
    assert first["errors"] == 2 and "deferred-resume" not in first["repairs"]
    assert fake.created == [] and not any(t["Key"] == "smgov:resume-after" for t in fake.tags[fake.arn("job-1")])


# ---- drifted alarms: planned under an earlier policy --------------------------------------------

DRIFTED = "reconciler.replan.drifted-alarm"


def idle_threshold(account: LocalAccount, percent: float) -> None:
    account.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value=f"{{idle: {{threshold_percent: {percent}}}}}", Overwrite=True
    )


def cloudwatch_puts(account: LocalAccount, since: int) -> list[dict[str, Any]]:
    return [params for name, params in account.cloudwatch.requests[since:] if name == "PutMetricAlarm"]


def test_a_running_jobs_idle_alarm_planned_at_5_percent_is_put_again_at_10_when_the_policy_says_so(
    acct: LocalAccount, clock: MovableClock, repairs: MemoryBusinessMetrics
) -> None:
    # Given a job in Training whose idle alarm was planned at 5% per GPU, and the reconciler has seen it
    idle_threshold(acct, 5)
    training(acct, AlgorithmSpecification=LOSS)
    planned_at_5 = acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"]
    acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {}
    # When the platform team raises the idle threshold to 10% while the job trains on
    idle_threshold(acct, 10)
    clock.advance(minutes=10)
    before = len(acct.cloudwatch.requests)
    result = reconcile(acct)
    # Then the next run puts the job's idle alarm again at 10%, its state and actions kept, not reset
    assert result["repairs"] == {"drifted-alarm": 1} and result["errors"] == 0
    alarm = acct.cloudwatch.alarms[IDLE_ALARM]
    assert alarm["Threshold"] == pytest.approx(planned_at_5 * 2)
    assert acct.cloudwatch.state(IDLE_ALARM) == "OK" and alarm["ActionsEnabled"] is True
    assert [put["AlarmName"] for put in cloudwatch_puts(acct, before)] == [IDLE_ALARM]
    assert all(name != "SetAlarmState" for name, _ in acct.cloudwatch.requests[before:])
    (record,) = [r for r in reconciler_records(acct) if r.code == DRIFTED]
    assert (record.action, record.outcome.value) == ("create-alarm", "done")
    assert record.evidence["repair"] == "drifted-alarm" and record.evidence["alarms"] == [IDLE_ALARM]
    assert set(record.evidence["changes"][IDLE_ALARM]) == {"Threshold"}
    assert repairs.repairs == ["drifted-alarm"]
    # And the run after it finds the alarm as planned: nothing put, the job not read again
    acct.sagemaker.calls.clear()
    before = len(acct.cloudwatch.requests)
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {}
    assert cloudwatch_puts(acct, before) == [] and acct.sagemaker.calls["DescribeTrainingJob"] == 0


def test_an_unchanged_policy_reads_a_job_once_to_compare_and_puts_nothing(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in Training with all its guards' alarms (idle, progress), as planned
    training(acct, AlgorithmSpecification=LOSS)
    clock.advance(minutes=20)
    acct.sagemaker.calls.clear()
    before = len(acct.cloudwatch.requests)
    # When the reconciler runs: the job is read once to compare its alarms with the plan, and nothing is put
    assert reconcile(acct)["repairs"] == {}
    assert acct.sagemaker.calls["DescribeTrainingJob"] == 1 and cloudwatch_puts(acct, before) == []
    # Then the next runs on the warm container, the policy and the day unchanged, read nothing of the job
    for _ in range(3):
        acct.sagemaker.calls.clear()
        acct.cloudwatch.calls.clear()
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        assert dict(acct.sagemaker.calls) == {"ListTrainingJobs": 2}  # in progress, and failed
        assert dict(acct.cloudwatch.calls) == {"DescribeAlarms": 1}


def test_a_job_that_cannot_be_read_keeps_its_alarms_as_they_are_until_it_can(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose idle alarm was planned at 5%, the policy now 10%
    idle_threshold(acct, 5)
    training(acct, AlgorithmSpecification=LOSS)
    planned_at_5 = acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"]
    idle_threshold(acct, 10)
    clock.advance(minutes=10)
    unreadable = {"on": True}

    def no_answer(params: dict[str, Any], **_: Any) -> None:
        if unreadable["on"] and params.get("TrainingJobName") == "job-1":
            raise ReadTimeoutError(endpoint_url="https://api.sagemaker.us-east-1.amazonaws.com")

    acct.root.client("sagemaker").meta.events.register_first(
        "before-parameter-build.sagemaker.DescribeTrainingJob", no_answer
    )
    before = len(acct.cloudwatch.requests)
    # When the job cannot be read (no answer, past botocore's retries): nothing is put, nothing else fails
    result = reconcile(acct)
    assert result["repairs"] == {} and cloudwatch_puts(acct, before) == []
    assert acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"] == planned_at_5
    assert [r for r in reconciler_records(acct) if r.code == DRIFTED] == []
    # Then, once it can, the next run puts it as planned now
    unreadable["on"] = False
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    assert acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"] == pytest.approx(planned_at_5 * 2)


def test_an_alarm_that_fires_is_left_to_the_stopper_and_put_again_once_it_has_left_alarm(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose idle alarm, planned at 5%, is in ALARM with its actions on (its notification may be on its
    # way to the stopper, or judged now) when the policy goes to 10%
    idle_threshold(acct, 5)
    training(acct, AlgorithmSpecification=LOSS)
    planned_at_5 = acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"]
    idle_threshold(acct, 10)
    acct.cloudwatch.set_state(IDLE_ALARM, "ALARM")
    clock.advance(minutes=10)
    acct.sagemaker.calls.clear()
    before = len(acct.cloudwatch.requests)
    # When the reconciler runs, the alarm is not put
    assert "drifted-alarm" not in reconcile(acct)["repairs"]
    assert cloudwatch_puts(acct, before) == []
    assert acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"] == planned_at_5
    # Then once it has left ALARM, the next run puts it as planned now
    acct.cloudwatch.set_state(IDLE_ALARM, "OK")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    assert acct.cloudwatch.alarms[IDLE_ALARM]["Threshold"] == pytest.approx(planned_at_5 * 2)


def test_a_muted_alarm_stays_muted_and_a_widened_one_keeps_its_window_when_put_again(
    audit_acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job in audit mode whose idle alarm, planned at 5%, the stopper muted (left in ALARM, actions off) and the stall
    # judge widened (its description says so), when the policy goes to 10%
    idle_threshold(audit_acct, 5)
    training(audit_acct, AlgorithmSpecification=LOSS)
    alarm = audit_acct.cloudwatch.alarms[IDLE_ALARM]
    planned_at_5, periods = alarm["Threshold"], alarm["EvaluationPeriods"]
    alarm.update(
        EvaluationPeriods=periods + 30,
        DatapointsToAlarm=periods + 30,
        AlarmDescription=alarm["AlarmDescription"] + " Widened to 60 minutes after a veto of the stall judge.",
    )
    audit_acct.cloudwatch.set_state(IDLE_ALARM, "ALARM")
    alarm["ActionsEnabled"] = False
    idle_threshold(audit_acct, 10)
    clock.advance(minutes=10)
    # When the reconciler runs
    assert reconcile(audit_acct)["repairs"] == {"drifted-alarm": 1}
    # Then the alarm has the new threshold, keeps its widened window and its mute, and stays in ALARM
    alarm = audit_acct.cloudwatch.alarms[IDLE_ALARM]
    assert alarm["Threshold"] == pytest.approx(planned_at_5 * 2)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (periods + 30, periods + 30)
    assert "Widened to 60 minutes" in alarm["AlarmDescription"]
    assert alarm["ActionsEnabled"] is False and audit_acct.cloudwatch.state(IDLE_ALARM) == "ALARM"
    (record,) = [r for r in reconciler_records(audit_acct) if r.code == DRIFTED]
    assert record.evidence["kept_window"] == [IDLE_ALARM]


def test_a_large_jobs_child_alarms_are_put_again_and_its_composite_is_left_as_it_is(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a 12-host job (a composite over two child alarms) planned at 5%, the policy now 10%
    idle_threshold(acct, 5)
    training(acct, ResourceConfig=TWELVE_HOSTS)
    head = f"{PREFIX}job-1"
    children = [f"{head}.hosts-1-10", f"{head}.hosts-11-12"]
    idle_threshold(acct, 10)
    clock.advance(minutes=10)
    acct.cloudwatch.calls.clear()
    # When the reconciler runs, the children are put again as planned; the composite (its rule names them) is not
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 2 and acct.cloudwatch.calls["PutCompositeAlarm"] == 0
    (record,) = [r for r in reconciler_records(acct) if r.code == DRIFTED]
    assert record.evidence["alarms"] == children
    assert reconcile(acct)["repairs"] == {}


STALL = f"{PREFIX}job-1.progress"
ARMER = f"{PREFIX}job-1.progress-armer"
TRAIN_AND_VAL = {
    **LOSS,
    "MetricDefinitions": [
        {"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
        {"Name": "val:loss", "Regex": "val_loss=([0-9.]+)"},
    ],
}


def progress_metrics(account: LocalAccount, names: str) -> None:
    account.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value=f"{{progress: {{metric_names: [{names}]}}}}", Overwrite=True
    )


def watched(alarm: dict[str, Any]) -> set[str]:
    if "MetricName" in alarm:
        return {alarm["MetricName"]}
    return {q["MetricStat"]["Metric"]["MetricName"] for q in alarm["Metrics"] if "MetricStat" in q}


def armed_on_train_loss(account: LocalAccount, clock: MovableClock, *, metrics_answer: bool = True) -> None:
    """A job defining train:loss and val:loss whose progress guard, watching train:loss, the stopper armed once the
    job published it; it goes on publishing train:loss only (val:loss comes at the end). ``metrics_answer``
    False: CloudWatch's GetMetricData answers nothing (the double holds no metrics)."""
    if metrics_answer:
        JobSignals(clock).attach(account.cloudwatch).set("train:loss", "job-1", 1.0)
    progress_metrics(account, "train_loss")
    training(account, AlgorithmSpecification=TRAIN_AND_VAL)
    clock.advance(minutes=5)
    fire(account, ARMER)
    account.cloudwatch.set_state(STALL, "OK")
    assert account.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert account.cloudwatch.alarms[ARMER]["ActionsEnabled"] is False
    clock.advance(minutes=10)
    assert reconcile(account)["repairs"] == {}


def test_a_progress_guard_moved_to_a_metric_not_published_yet_is_disarmed_until_that_metric_is_published(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose progress guard was armed on train:loss, which it publishes
    armed_on_train_loss(acct, clock)
    # When the platform team makes val_loss the progress metric and the reconciler runs
    progress_metrics(acct, "val_loss")
    clock.advance(minutes=10)
    before = len(acct.cloudwatch.requests)
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    # Then both alarms watch val:loss as the job's entry into Training plans them: the stall alarm disarmed (its
    # missing data breaches: armed, it would stop a job that never published val:loss), the armer on and reset
    stall, armer = acct.cloudwatch.alarms[STALL], acct.cloudwatch.alarms[ARMER]
    assert watched(stall) == watched(armer) == {"val:loss"}
    assert stall["ActionsEnabled"] is False and armer["ActionsEnabled"] is True
    assert acct.cloudwatch.state(ARMER) == "OK"
    assert sorted(params["AlarmName"] for params in cloudwatch_puts(acct, before)) == [STALL, ARMER]
    (record,) = [r for r in reconciler_records(acct) if r.code == DRIFTED]
    assert record.evidence["retargeted"] == {STALL: False, ARMER: True}
    # And the next run finds them as planned and puts nothing
    before = len(acct.cloudwatch.requests)
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {} and cloudwatch_puts(acct, before) == []
    # And once the job publishes val:loss, the armer's notification arms the guard again
    fire(acct, ARMER)
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is True
    assert [r.code for r in acct.audit.records if r.rule == "progress-guard"][-1] == "progress.arm.published"


def test_a_progress_guard_moved_to_metrics_the_job_published_in_its_stint_stays_armed(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose progress guard was armed on train:loss, which it publishes
    armed_on_train_loss(acct, clock)
    # When the policy watches val_loss as well, and the reconciler runs
    progress_metrics(acct, "train_loss, val_loss")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    # Then the alarms watch both, and the stall alarm stays armed (the job published what it watches in this stint),
    # reset as the stopper's arming resets it; the armer stays off
    stall, armer = acct.cloudwatch.alarms[STALL], acct.cloudwatch.alarms[ARMER]
    assert watched(stall) == {"train:loss", "val:loss"}
    assert stall["ActionsEnabled"] is True and armer["ActionsEnabled"] is False
    assert acct.cloudwatch.state(STALL) == "OK"
    (record,) = [r for r in reconciler_records(acct) if r.code == DRIFTED]
    assert record.evidence["retargeted"] == {STALL: True, ARMER: False}


def test_a_progress_guard_moved_to_other_metrics_is_disarmed_when_whether_they_were_published_is_unread(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose progress guard was armed on train:loss, and GetMetricData does not answer
    armed_on_train_loss(acct, clock, metrics_answer=False)
    # When the policy watches val_loss as well, and the reconciler runs
    progress_metrics(acct, "train_loss, val_loss")
    clock.advance(minutes=10)
    assert reconcile(acct)["repairs"] == {"drifted-alarm": 1}
    # Then the stall alarm's arming on train:loss alone is not kept for metrics not seen: disarmed, its armer on
    assert watched(acct.cloudwatch.alarms[STALL]) == {"train:loss", "val:loss"}
    assert acct.cloudwatch.alarms[STALL]["ActionsEnabled"] is False
    assert acct.cloudwatch.alarms[ARMER]["ActionsEnabled"] is True and acct.cloudwatch.state(ARMER) == "OK"


LONG_NAMES = [f"validation:per_class_mean_average_precision_at_iou_050_{i:02d}" for i in range(10)]
LONG_JOB = "j" * 63
LONG_STALL = f"{PREFIX}{LONG_JOB}.progress"


def long_description_job(account: LocalAccount) -> None:
    """A 63-character job watching ten 53-character progress metrics: its stall alarm's description, as planned,
    fills CloudWatch's 1,024 characters."""
    progress_metrics(account, ", ".join(LONG_NAMES))
    definitions = [{"Name": n, "Regex": "x=([0-9.]+)"} for n in LONG_NAMES]
    training(account, LONG_JOB, AlgorithmSpecification={**LOSS, "MetricDefinitions": definitions})


def test_a_widened_stall_alarm_whose_description_was_full_keeps_its_window_and_says_so(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose stall alarm's description is at CloudWatch's limit, armed, then widened by the stopper:
    # the stall judge could not confirm the stall (no metric or log evidence)
    long_description_job(acct)
    planned = acct.cloudwatch.alarms[LONG_STALL]["EvaluationPeriods"]
    clock.advance(minutes=5)
    fire(acct, f"{LONG_STALL}-armer")
    clock.advance(minutes=25)
    fire(acct, LONG_STALL)
    widened = acct.cloudwatch.alarms[LONG_STALL]
    periods = widened["EvaluationPeriods"]
    assert periods > planned
    # Then its description keeps both the stack's note and the widening, within the limit
    description = widened["AlarmDescription"]
    assert len(description) <= 1024 and " Widened to " in description
    assert " Managed by " in description and description.endswith("when the job (re)enters Training.")
    # And the reconciler, the policy unchanged, leaves its window as it is, run after run
    for _ in range(2):
        before = len(acct.cloudwatch.requests)
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        assert cloudwatch_puts(acct, before) == []
        assert acct.cloudwatch.alarms[LONG_STALL]["EvaluationPeriods"] == periods


def test_a_stall_alarm_widened_before_its_widening_was_kept_in_a_full_description_keeps_its_window(
    acct: LocalAccount, clock: MovableClock
) -> None:
    # Given a job whose full-description stall alarm was widened to 120 minutes when the widening sentence was cut
    # off at CloudWatch's limit: the description is the planned one, only the window says it was widened
    long_description_job(acct)
    alarm = acct.cloudwatch.alarms[LONG_STALL]
    assert len(alarm["AlarmDescription"]) == 1024
    alarm.update(EvaluationPeriods=120, DatapointsToAlarm=120)
    # When the reconciler runs twice, the policy unchanged
    for _ in range(2):
        before = len(acct.cloudwatch.requests)
        clock.advance(minutes=10)
        assert reconcile(acct)["repairs"] == {}
        # Then the window is kept: nothing is put
        assert cloudwatch_puts(acct, before) == []
        assert acct.cloudwatch.alarms[LONG_STALL]["EvaluationPeriods"] == 120
