"""The real job-events handler, with the events/ samples, against moto and the SageMaker double."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.compliance import EVALUATED_TAG
from sagemaker_governance.domain.job import EVENT_SECTIONS_MISSING
from sagemaker_governance.domain.stall_judge import TAG_IDLE_MINUTES
from sagemaker_governance.handlers.job_events import handler
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request, launch_from_sample
from tests.conftest import load_event
from tests.handlers.conftest import ENFORCE, NOW, sqs_batch


def test_compliant_job_is_left_alone_with_one_audit_record(account: LocalAccount) -> None:
    event = launch_from_sample(account, "training-job-starting.json")
    result = account.invoke(handler, event)
    assert [d["action"] for d in result["decisions"]] == ["none"]
    assert account.sagemaker.stop_requests == []
    (record,) = account.audit.records
    assert record.event_id == event["id"] and record.outcome.value == "no-action"


def test_untagged_job_is_stopped_and_its_owner_told(account: LocalAccount) -> None:
    event = launch_from_sample(account, "training-job-starting-untagged.json")
    result = account.invoke(handler, event)
    assert result["decisions"][0]["rule"] == "required-tags"
    assert account.sagemaker.stop_requests == ["untagged-experiment-7"]
    (record,) = account.audit.records
    assert (record.action, record.mode, record.outcome.value) == ("stop", "enforce", "done")
    assert record.owner == "bob"


# The defaults pass the sample's job (no required tag, any ml.* type); its vision team allows only ml.p5.* and stops.
VISION_ON_P5_ONLY = """
rules:
  - {id: instance-types, type: allowed-instance-types, patterns: ["ml.*"]}
teams:
  vision:
    rules:
      - {id: instance-types, type: allowed-instance-types, patterns: ["ml.p5.*"], on_violation: stop}
"""


@pytest.fixture
def no_required_tags() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, {**ENFORCE, "REQUIRED_TAGS": ""}) as acct:
        acct.ssm.put_parameter(Name="/gov/policy", Value=VISION_ON_P5_ONLY, Type="String")
        yield acct


@pytest.mark.parametrize("tags", ["empty", "as-launched"])
def test_a_starting_event_with_an_empty_tag_map_is_judged_on_the_jobs_tags_under_its_team(
    no_required_tags: LocalAccount, tags: str
) -> None:
    # Given a vision job on ml.g5.12xlarge (its team allows only ml.p5.*), whose Starting event carries an empty
    # Tags map (as AWS's documented sample event does), or the job's tags
    account = no_required_tags
    event = launch_from_sample(account, "training-job-starting.json")
    if tags == "empty":
        event["detail"]["Tags"] = {}
    before = account.sagemaker.calls.copy()
    # When it is delivered
    account.invoke(handler, event)
    # Then the job's own tags decide (an empty map costs one ListTags more than the event with its tags, whose
    # violation is read again before the stop in either case): the vision team's rule stops it, and the record
    # names the team and the owner
    assert account.sagemaker.stop_requests == ["resnet50-imagenet-2025-11-21-10-00-00"]
    (record,) = account.audit.records
    assert (record.code, record.outcome.value) == ("compliance.stop.violation", "done")
    assert (record.team, record.owner) == ("vision", "alice")
    assert (account.sagemaker.calls - before)["ListTags"] == (2 if tags == "empty" else 1)


def test_a_declared_window_on_a_job_outside_a_team_override_is_governed_not_dead_lettered(
    account: LocalAccount,
) -> None:
    # Given a valid document whose nlp team samples GPU utilization every 10 minutes, and a compliant vision
    # job declaring 240 idle minutes (the default cap), which nlp's periods would make longer than a day
    account.ssm.put_parameter(
        Name="/gov/policy", Type="String", Value="teams:\n  nlp:\n    idle: {period_seconds: 600}\n"
    )
    tags = {"team": "vision", "cost-center": "cc-1234", "owner": "alice", TAG_IDLE_MINUTES: "240"}
    account.sagemaker.launch(create_request("vision-1", tags=tags))
    # When its Starting event is delivered from the queue
    result = account.invoke(handler, sqs_batch(json.dumps(account.sagemaker.event("vision-1"))))
    # Then the delivery succeeds (not retried into the dead-letter queue) and the job is judged compliant
    assert result == {"batchItemFailures": []}
    assert [r.code for r in account.audit.records if r.job_name == "vision-1"] == ["compliance.pass.compliant"]
    assert account.sagemaker.stop_requests == []


def test_a_team_value_spelled_otherwise_than_its_override_is_governed_as_written_and_its_owner_told(
    no_required_tags: LocalAccount,
) -> None:
    # Given a job on ml.g5.2xlarge tagged team=Vision: the vision override (ml.p5.* only) would stop it, the
    # policy without it allows any ml.* type
    account = no_required_tags
    queue_url = account.notification_inbox()
    account.sagemaker.launch(create_request("vision-2", tags={"team": "Vision", "owner": "alice"}))
    # When its Starting event is delivered
    account.invoke(handler, account.sagemaker.event("vision-2"))
    # Then it is governed by the value as written (not stopped) and the miss is recorded and told to its owner
    assert account.sagemaker.stop_requests == []
    assert [(r.code, r.outcome.value) for r in account.audit.records] == [
        ("compliance.pass.compliant", "no-action"),
        ("compliance.notify.team-misspelled", "done"),
    ]
    (message,) = account.sqs.receive_message(QueueUrl=queue_url)["Messages"]
    body = json.loads(message["Body"])
    assert body["outcome"] == "notified" and [item["rule"] for item in body["items"]] == ["compliance"]


def test_audit_mode_records_but_never_stops(audit_account: LocalAccount) -> None:
    event = launch_from_sample(audit_account, "training-job-starting-untagged.json")
    audit_account.invoke(handler, event)
    assert audit_account.sagemaker.stop_requests == []
    (record,) = audit_account.audit.records
    assert (record.action, record.outcome.value) == ("stop", "audit-only")


def test_tag_added_after_launch_is_seen_before_stopping(account: LocalAccount) -> None:
    # Given an event without cost tags, but the developer added them since
    event = launch_from_sample(account, "training-job-starting-untagged.json")
    arn = account.sagemaker.arn("untagged-experiment-7")
    account.sagemaker.tags[arn] += [{"Key": "team", "Value": "nlp"}, {"Key": "cost-center", "Value": "cc-9"}]
    # When the stale event arrives
    account.invoke(handler, event)
    # Then the job is re-read and not stopped
    assert account.sagemaker.stop_requests == []
    assert account.audit.records[0].outcome.value == "no-action"


def test_a_job_launched_with_a_mark_copied_from_an_earlier_job_is_evaluated_stopped_and_marked_again(
    account: LocalAccount,
) -> None:
    # Given a job without its cost tags cloned from an earlier job: the clone copied the earlier job's tags, among
    # them governance's mark, written when that job was evaluated, the day before this one was created
    account.sagemaker.launch(
        create_request("cloned-1", tags={"owner": "alice", EVALUATED_TAG: "2026-11-20T09:15:00Z"})
    )
    # When its Starting event (its tags as launched) is delivered
    result = account.invoke(handler, account.sagemaker.event("cloned-1"))
    # Then the copied mark is not governance's: the job is evaluated and stopped, and marked with this evaluation
    assert [d["code"] for d in result["decisions"]] == ["compliance.stop.violation"]
    assert account.sagemaker.stop_requests == ["cloned-1"]
    assert [(r.code, r.outcome.value) for r in account.audit.records] == [("compliance.stop.violation", "done")]
    tags = {t["Key"]: t["Value"] for t in account.sagemaker.tags[account.sagemaker.arn("cloned-1")]}
    assert tags[EVALUATED_TAG] == "2026-11-21T12:00:00Z"


def test_a_job_marked_by_governance_after_its_creation_is_not_evaluated_again(account: LocalAccount) -> None:
    # Given a job without its cost tags that governance evaluated and marked once it existed (the reconciler)
    account.sagemaker.launch(create_request("marked-1", tags={"owner": "alice"}))
    arn = account.sagemaker.arn("marked-1")
    account.sagemaker.tags[arn] += [{"Key": EVALUATED_TAG, "Value": "2026-11-21T12:00:00Z"}]
    # When its Starting event (its tags from before the mark) is delivered
    result = account.invoke(handler, account.sagemaker.event("marked-1"))
    # Then the re-read finds governance's own mark: nothing is decided or stopped again
    assert [d["code"] for d in result["decisions"]] == ["compliance.skip.already-evaluated"]
    assert account.sagemaker.stop_requests == []


def test_job_that_already_ended_is_not_stopped(account: LocalAccount) -> None:
    event = launch_from_sample(account, "training-job-starting-untagged.json")
    account.sagemaker.transition("untagged-experiment-7", "Failed", "Failed", failure_reason="AlgorithmError")
    account.invoke(handler, event)
    assert account.sagemaker.stop_requests == []
    assert account.audit.records[0].outcome.value == "already-done"


def test_duplicate_delivery_stops_once(account: LocalAccount) -> None:
    event = launch_from_sample(account, "training-job-starting-untagged.json")
    account.invoke(handler, event)
    account.invoke(handler, event)
    assert account.sagemaker.calls["StopTrainingJob"] == 1
    assert [r.outcome.value for r in account.audit.records] == ["done", "already-done"]


def test_owner_notification_reaches_the_topic(account: LocalAccount) -> None:
    queue_url = account.notification_inbox()
    account.invoke(handler, launch_from_sample(account, "training-job-starting-untagged.json"))
    (message,) = account.sqs.receive_message(QueueUrl=queue_url)["Messages"]
    body = json.loads(message["Body"])
    assert body["outcome"] == "stopped" and body["items"][0]["rule"] == "required-tags"
    assert body["items"][0]["remedy"]


def test_heterogeneous_job_is_checked_group_by_group(account: LocalAccount) -> None:
    account.ssm.put_parameter(
        Name="/gov/policy",
        Type="String",
        Value="rules: [{id: types, type: allowed-instance-types, patterns: ['ml.p4d.*']}]",
    )
    account.invoke(handler, launch_from_sample(account, "training-job-starting-heterogeneous.json"))
    record = next(r for r in account.audit.records if r.rule == "types")
    assert record.evidence["observed"] == ["ml.c5.18xlarge"]


def test_later_states_make_no_decision_but_are_recorded(account: LocalAccount) -> None:
    # A state no reaction acts on (Training now belongs to the idle guard, see test_idle_alarms.py)
    event = load_event("training-job-training.json")
    event["detail"]["SecondaryStatus"] = "Downloading"
    result = account.invoke(handler, event)
    assert result["decisions"][0]["rule"] == "event-router"
    assert len(account.audit.records) == 1


def test_malformed_event_is_rejected_loudly(account: LocalAccount) -> None:
    with pytest.raises(ValidationError):
        account.invoke(handler, load_event("malformed-missing-job-name.json"))
    assert account.audit.records == []


def test_event_of_another_type_is_rejected(account: LocalAccount) -> None:
    event = load_event("training-job-starting.json")
    event["detail-type"] = "SageMaker Processing Job State Change"
    with pytest.raises(ValidationError):
        account.invoke(handler, event)


def test_audit_record_is_one_structured_log_line(account: LocalAccount, log_output: Any) -> None:
    account.invoke(handler, launch_from_sample(account, "training-job-starting-untagged.json"))
    lines = [json.loads(line) for line in log_output.getvalue().splitlines() if '"governance decision"' in line]
    (line,) = lines
    audit = line["audit"]
    assert audit["schema"] == "smgov.audit/2"
    for field in (
        "job_name",
        "job_arn",
        "rule",
        "code",
        "action",
        "mode",
        "outcome",
        "reason",
        "evidence",
        "event_id",
    ):
        assert field in audit
    assert audit["code"] == "compliance.stop.violation"


def test_a_job_that_lets_sagemaker_choose_among_types_the_policy_refuses_is_stopped(account: LocalAccount) -> None:
    # Given a job of InstancePreferences (p4d, then p5) whose team's policy allows p4d only
    account.ssm.put_parameter(
        Name="/gov/policy",
        Value='rules: [{id: instance-types, type: allowed-instance-types, patterns: ["ml.p4d.24xlarge"]}]',
        Type="String",
    )
    event = launch_from_sample(account, "training-job-starting-instance-preferences.json")
    # When its Starting event arrives, before SageMaker selected a type
    result = account.invoke(handler, event)
    # Then p5 may be the one launched: the job is stopped, and the record says it is a preference
    assert [d["rule"] for d in result["decisions"]] == ["instance-types"]
    assert account.sagemaker.stop_requests == ["llm-flex-7"]
    (record,) = account.audit.records
    assert "ml.p5.48xlarge (in InstancePreferences" in record.reason


def test_an_event_that_leaves_out_a_section_the_service_reads_says_so(
    account: LocalAccount, log_output: io.StringIO
) -> None:
    # No AWS source documents the whole event: the platform team learns from the log (and `smgov doctor`)
    event = launch_from_sample(account, "training-job-pending-spot-field-absent.json")
    account.invoke(handler, event)
    lines = [json.loads(line) for line in log_output.getvalue().splitlines() if line.startswith("{")]
    (warning,) = [line for line in lines if line["message"] == EVENT_SECTIONS_MISSING]
    assert warning["sections"] == ["EnableManagedSpotTraining"] and warning["job"] == "spot-llm-pretrain-7"
    # and an event that carries every section says nothing
    log_output.truncate(0)
    account.invoke(handler, launch_from_sample(account, "training-job-starting.json"))
    assert EVENT_SECTIONS_MISSING not in log_output.getvalue()


def test_an_event_that_writes_absent_members_as_null_is_governed_like_any(account: LocalAccount) -> None:
    # SageMaker's events write a member the job lacks as null (InstanceGroups, VpcConfig, FailureReason ...):
    # read as left out, the job is judged and its alarms planned, not rejected into the dead-letter queue
    event = launch_from_sample(account, "training-job-starting-null-members.json")
    result = account.invoke(handler, event)
    assert [d["action"] for d in result["decisions"]] == ["none"]
    assert account.sagemaker.stop_requests == []


def test_an_interruption_whose_transitions_are_null_is_decided_not_retried(account: LocalAccount) -> None:
    # Given a Spot job's Interrupted event that writes its transitions as null, and the job read again at the
    # same state without an Interrupted transition (SageMaker documents Interrupted as a SecondaryStatus,
    # not among SecondaryStatusTransition's statuses)
    event = launch_from_sample(account, "training-job-interrupted-spot-null-transitions.json")
    job = account.sagemaker.jobs[event["detail"]["TrainingJobName"]]
    job["TrainingJobStatus"], job["SecondaryStatus"] = "InProgress", "Interrupted"
    assert "Interrupted" not in [t["Status"] for t in job["SecondaryStatusTransitions"]]
    # When it is delivered, then the Spot fallback decides on it (it is not taken for a lagging answer)
    result = account.invoke(handler, event)
    assert any(d["code"].startswith("spot.") for d in result["decisions"])
