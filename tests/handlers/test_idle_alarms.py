"""Idle-alarm lifecycle through the real job-events handler (moto, the SageMaker and CloudWatch doubles)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sagemaker_governance.handlers.job_events import handler
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request
from tests.handlers.conftest import ENFORCE, NOW, MovableClock, NextTransitionLags

PREFIX = "sagemaker-governance-idle-"


@pytest.fixture
def acct() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as account:
        yield account


def start_training(account: LocalAccount, name: str = "job-1", **overrides: Any) -> dict[str, Any]:
    account.sagemaker.launch(create_request(name, **overrides), secondary="Training")
    return account.sagemaker.event(name)


def idle_records(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "idle-guard"]


def test_training_creates_one_alarm_and_records_it(acct: LocalAccount) -> None:
    result = acct.invoke(handler, start_training(acct))
    (decision,) = [d for d in result["decisions"] if d["rule"] == "idle-guard"]
    assert decision["action"] == "create-alarm"
    assert decision["alarm"]["AlarmName"] == f"{PREFIX}job-1"
    alarm = acct.cloudwatch.alarms[f"{PREFIX}job-1"]
    # one host, read through metric math for the pinned trigger (0 while the host is at 95% or more)
    (stat,) = [q["MetricStat"] for q in alarm["Metrics"] if "MetricStat" in q]
    assert alarm["Threshold"] == 1.0 and stat["Metric"]["Dimensions"] == [
        {"Name": "Host", "Value": "job-1/algo-1"}
    ]
    assert alarm["AlarmActions"] == [acct.environment["ALARM_TOPIC_ARN"]]
    assert acct.cloudwatch.tags[f"{PREFIX}job-1"] == [
        {"Key": "smgov:training-job", "Value": "job-1"},
        {"Key": "smgov:managed-by", "Value": "sagemaker-governance"},
    ]
    (record,) = idle_records(acct)
    assert (record.action, record.outcome.value) == ("create-alarm", "done")


def test_duplicate_training_events_upsert_and_keep_the_alarms_state(acct: LocalAccount) -> None:
    event = start_training(acct)
    acct.invoke(handler, event)
    acct.cloudwatch.set_state(f"{PREFIX}job-1", "ALARM")
    acct.invoke(handler, event)
    assert list(acct.cloudwatch.alarms) == [f"{PREFIX}job-1"]
    assert acct.cloudwatch.calls["PutMetricAlarm"] == 2
    # the job's first stint: its ALARM came from its own data and was notified (and judged) then; a
    # duplicate event does not reset it (only a re-entry into Training does: test_guard_alarms)
    assert acct.cloudwatch.calls["SetAlarmState"] == 0
    assert acct.cloudwatch.state(f"{PREFIX}job-1") == "ALARM"


def test_late_training_event_for_an_ended_job_creates_nothing(acct: LocalAccount) -> None:
    event = start_training(acct)
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    acct.invoke(handler, event)
    assert acct.cloudwatch.alarms == {}
    (record,) = idle_records(acct)
    assert record.outcome.value == "skipped" and record.code == "idle.alarm.late-event"


def test_training_event_for_an_unknown_job_creates_nothing(acct: LocalAccount) -> None:
    acct.sagemaker.launch(create_request("job-1"), secondary="Training")
    event = acct.sagemaker.event("job-1")
    del acct.sagemaker.jobs["job-1"]
    acct.invoke(handler, event)
    assert acct.cloudwatch.alarms == {}


def test_a_spot_restarts_training_whose_reread_lags_still_resets_the_alarm(clock: MovableClock) -> None:
    with local_account(clock, ENFORCE) as acct:
        # Given a Spot job whose first stint's alarm is in ALARM when Spot reclaims its capacity (its stretch
        # judged then, e.g. the stop vetoed), back through Starting and Downloading
        acct.invoke(handler, start_training(acct, EnableManagedSpotTraining=True))
        alarm = f"{PREFIX}job-1"
        acct.cloudwatch.set_state(alarm, "ALARM")
        for secondary in ("Interrupted", "Starting", "Downloading"):
            clock.advance(minutes=10)
            acct.sagemaker.transition("job-1", "InProgress", secondary)
        # When it enters Training again and its event is handled while DescribeTrainingJob still answers the
        # job as it stood before (Downloading, one Training in its transitions)
        clock.advance(minutes=10)
        lag = NextTransitionLags(clock)
        acct.sagemaker.lag = lag
        acct.sagemaker.transition("job-1", "InProgress", "Training")
        acct.invoke(handler, acct.sagemaker.event("job-1"))
        assert lag.reads >= 1
        # Then the alarm is upserted and reset as on an up-to-date read (the event shows the second Training):
        # left in ALARM, a stall of this stint would never notify
        assert acct.cloudwatch.calls["SetAlarmState"] == 1
        assert acct.cloudwatch.state(alarm) != "ALARM"
        codes = [r.code for r in idle_records(acct)]
        assert codes == ["idle.alarm.create", "idle.alarm.create"]


@pytest.mark.parametrize("terminal", ["Completed", "Failed", "Stopped"])
def test_alarm_is_deleted_on_each_terminal_status(acct: LocalAccount, terminal: str) -> None:
    acct.invoke(handler, start_training(acct))
    acct.sagemaker.transition("job-1", terminal, terminal)
    result = acct.invoke(handler, acct.sagemaker.event("job-1"))
    assert acct.cloudwatch.alarms == {}
    (decision,) = [d for d in result["decisions"] if d["rule"] == "idle-guard"]
    assert decision["action"] == "delete-alarm"
    assert decision["alarm"] == {"AlarmNames": [f"{PREFIX}job-1"]}
    # A duplicate terminal event: nothing left, still success
    acct.invoke(handler, acct.sagemaker.event("job-1"))
    assert [r.outcome.value for r in idle_records(acct)] == ["done", "done", "already-done"]


def test_sixteen_host_job_gets_children_and_a_composite_and_loses_them_all(acct: LocalAccount) -> None:
    resources = {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16, "VolumeSizeInGB": 100}
    acct.invoke(handler, start_training(acct, ResourceConfig=resources))
    assert sorted(acct.cloudwatch.alarms) == [
        f"{PREFIX}job-1",
        f"{PREFIX}job-1.hosts-1-10",
        f"{PREFIX}job-1.hosts-11-16",
    ]
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1"]["Kind"] == "composite"
    acct.sagemaker.transition("job-1", "Stopped", "Stopped")
    acct.invoke(handler, acct.sagemaker.event("job-1"))
    assert acct.cloudwatch.alarms == {}


def test_heterogeneous_cluster_with_a_cpu_group_watches_every_host(acct: LocalAccount) -> None:
    groups = {
        "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 4},
        ],
        "VolumeSizeInGB": 100,
    }
    acct.invoke(handler, start_training(acct, ResourceConfig=groups))
    alarm = acct.cloudwatch.alarms[f"{PREFIX}job-1"]
    hosts = [q["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for q in alarm["Metrics"] if "MetricStat" in q]
    assert hosts == [f"job-1/algo-{n}" for n in range(1, 7)]
    assert alarm["Threshold"] == 8.0


@pytest.mark.parametrize("instance_type", ["ml.m5.xlarge", "ml.trn1.32xlarge"])
def test_cpu_and_trainium_jobs_get_no_alarm_and_the_reason_is_recorded(
    acct: LocalAccount, instance_type: str
) -> None:
    resources = {"InstanceType": instance_type, "InstanceCount": 1, "VolumeSizeInGB": 50}
    acct.invoke(handler, start_training(acct, ResourceConfig=resources))
    assert acct.cloudwatch.alarms == {}
    (record,) = idle_records(acct)
    assert record.action == "none" and record.code == "idle.alarm.no-gpu"


def test_team_override_and_disabling_come_from_the_policy_document(acct: LocalAccount) -> None:
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Value="teams: {vision: {idle: {threshold_percent: 60}}, nlp: {idle: {enabled: false}}}",
    )
    acct.invoke(handler, start_training(acct, "vision-job"))  # builders tag team=vision
    assert acct.cloudwatch.alarms[f"{PREFIX}vision-job"]["Threshold"] == 60.0
    acct.invoke(handler, start_training(acct, "nlp-job", Tags=[{"Key": "team", "Value": "nlp"}]))
    assert f"{PREFIX}nlp-job" not in acct.cloudwatch.alarms


def test_a_training_event_with_an_empty_tag_map_gets_the_teams_alarm(acct: LocalAccount) -> None:
    # Given a vision team whose idle threshold is 60 % (the default: 1 %), and a vision job's Training event that
    # carries an empty Tags map (as AWS's documented sample event does)
    acct.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value="teams: {vision: {idle: {threshold_percent: 60}}}"
    )
    event = start_training(acct, "vision-job")  # builders tag team=vision
    event["detail"]["Tags"] = {}
    # When it is delivered
    acct.invoke(handler, event)
    # Then the alarm is planned on the job's own tags: the vision team's threshold, not the default team's
    assert acct.cloudwatch.alarms[f"{PREFIX}vision-job"]["Threshold"] == 60.0
    (record,) = idle_records(acct)
    assert (record.code, record.team) == ("idle.alarm.create", "vision")


def test_an_end_event_with_an_empty_tag_map_records_the_deletion_under_the_jobs_team_owner_and_mode(
    acct: LocalAccount,
) -> None:
    # Given a vision team in audit mode (the default enforces), and a vision job owned by alice with its idle alarm,
    # whose Completed event carries an empty Tags map
    acct.ssm.put_parameter(Name="/gov/policy", Type="String", Value="teams: {vision: {mode: audit}}")
    acct.invoke(handler, start_training(acct, "vision-job"))  # builders tag team=vision, owner=alice
    acct.sagemaker.transition("vision-job", "Completed", "Completed")
    event = acct.sagemaker.event("vision-job")
    event["detail"]["Tags"] = {}
    # When it is delivered
    acct.invoke(handler, event)
    # Then the alarm is deleted, and its record names the job's team and owner, in the team's mode
    assert f"{PREFIX}vision-job" not in acct.cloudwatch.alarms
    deleted = [r for r in idle_records(acct) if r.code == "idle.alarm.delete"]
    assert [(r.team, r.owner, r.mode) for r in deleted] == [("vision", "alice", "audit")]


def test_exempted_job_gets_no_alarm(acct: LocalAccount) -> None:
    acct.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Value=(
            "exemptions: [{job_name_prefix: 'eval-', rules: [idle-guard], expires: 2099-01-01, "
            "reason: 'PLAT-9: CPU-bound evaluation'}]"
        ),
    )
    acct.invoke(handler, start_training(acct, "eval-7"))
    assert acct.cloudwatch.alarms == {}
    assert idle_records(acct)[0].outcome.value == "exempted"


def test_a_type_missing_from_the_table_is_sized_by_ec2(acct: LocalAccount) -> None:
    # Given a job on an NVIDIA type our table does not list (g5g: 1 NVIDIA T4g GPU per EC2), when it
    # enters Training, then its alarm is created with the threshold scaled by EC2's GPU count.
    from sagemaker_governance.domain.instances import GPU_COUNTS

    assert "g5g" not in GPU_COUNTS
    resources = {"InstanceType": "ml.g5g.16xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50}
    result = acct.invoke(handler, start_training(acct, ResourceConfig=resources))
    (decision,) = [d for d in result["decisions"] if d["rule"] == "idle-guard"]
    assert decision["action"] == "create-alarm"
    assert acct.cloudwatch.alarms[f"{PREFIX}job-1"]["Threshold"] == 2.0  # 1% x 2 GPUs (g5g.16xlarge)


def test_a_type_nobody_can_size_gets_no_alarm_and_says_why(acct: LocalAccount) -> None:
    # Given a type neither our table nor EC2 knows, then no alarm, and the record says EC2 was asked.
    resources = {"InstanceType": "ml.g99.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50}
    acct.invoke(handler, start_training(acct, ResourceConfig=resources))
    assert acct.cloudwatch.alarms == {}
    (record,) = idle_records(acct)
    assert record.action == "none" and "cannot size" in record.reason
    assert "EC2" in record.evidence["instance_types"]["ml.g99.12xlarge"]
