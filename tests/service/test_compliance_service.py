"""Compliance (service/compliance.py) on in-memory ports: decide from the event, re-read before a stop,
stop, record, tell, mark. Order and branches, asserted by decision code and outcome."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.clone import MAX_TAGS
from sagemaker_governance.domain.compliance import EVALUATED_TAG, ComplianceCode
from sagemaker_governance.domain.errors import AdapterError, DescriptionBehind, JobNotFound
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification, NotificationOutcome
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.service.compliance import ComplianceService
from sagemaker_governance.service.idempotency import ComplianceNotices, Duplicate, deliver
from sagemaker_governance.service.job_events import JobEventsService
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.settings import Settings
from tests.builders import job
from tests.service.conftest import NOW, TAGS, FakeJobs, FakeNotifier, FixedPolicies, MemoryLedger

TRIGGER = Trigger(kind="job-state-change", event_id="e-1")
KEY = "job:job-1:InProgress:Starting:1:-"  # the Starting event's delivery key
UNTAGGED = {"team": "vision", "owner": "alice"}  # no cost-center


class Marks:
    """``EvaluationMarksPort``: the tags compliance puts on the jobs it evaluated."""

    def __init__(self, calls: Any) -> None:
        self.calls = calls

    def mark(self, arn: str, key: str, value: str) -> None:
        self.calls(f"mark {arn.rsplit('/', 1)[-1]} {key}")


@pytest.fixture
def compliance(jobs: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, calls: Any) -> ComplianceService:
    return ComplianceService(jobs, notifier, policies, audit, lambda: NOW, marks=Marks(calls))


def required_tag_policy(mode: str = "enforce") -> Any:
    settings = Settings.from_env({"REQUIRED_TAGS": "team,cost-center"})
    return build_policy({**settings.base_policy_document(), "mode": mode})


@pytest.fixture(autouse=True)
def _require_cost_center(policies: Any) -> None:
    policies.policy = required_tag_policy()


def test_a_violation_is_reread_then_stopped_recorded_told_and_marked_in_that_order(
    compliance: ComplianceService, jobs: Any, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job that starts without its cost-center tag (and SageMaker still says so)
    jobs.jobs["job-1"] = job(tags=UNTAGGED)
    # When its first InProgress event is evaluated
    decisions = compliance.react(job(tags=UNTAGGED), TRIGGER)
    # Then: re-read before acting, stop, tell the owner, mark the job as evaluated
    assert calls.log == ["get-job job-1", "stop job-1", "notify compliance job-1", f"mark job-1 {EVALUATED_TAG}"]
    assert [d.code for d in decisions] == [ComplianceCode.STOP]
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "done")]
    assert notifier.sent[0].outcome == "stopped"


def test_a_tag_added_before_the_stop_saves_the_job(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given the event lacks the tag, but the owner added it since: SageMaker describes the job with it
    jobs.jobs["job-1"] = job(tags=TAGS)
    decisions = compliance.react(job(tags=UNTAGGED), TRIGGER)
    # Then the re-read decides: compliant, no stop, no message
    assert "stop job-1" not in calls.log and not any(c.startswith("notify") for c in calls.log)
    assert [d.code for d in decisions] == [ComplianceCode.COMPLIANT]
    assert [r.outcome.value for r in audit.records] == ["no-action"]


def test_a_job_that_ended_before_the_stop_is_recorded_as_already_done(
    compliance: ComplianceService, jobs: Any, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    jobs.jobs["job-1"] = job(tags=UNTAGGED, TrainingJobStatus="Failed", SecondaryStatus="Failed")
    compliance.react(job(tags=UNTAGGED), TRIGGER)
    assert "stop job-1" not in calls.log
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "already-done")]
    assert notifier.sent[0].outcome == "already-ended"


def test_a_job_gone_before_the_stop_is_recorded_as_skipped_and_nobody_is_told(
    compliance: ComplianceService, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    compliance.react(job(tags=UNTAGGED), TRIGGER)
    assert calls.log == ["get-job job-1"]
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "skipped")]
    assert notifier.sent == []


def test_a_compliant_job_reads_nothing_stops_nothing_and_is_marked(
    compliance: ComplianceService, audit: MemoryAuditSink, calls: Any
) -> None:
    decisions = compliance.react(job(tags=TAGS), TRIGGER)
    assert calls.log == [f"mark job-1 {EVALUATED_TAG}"]
    assert [d.code for d in decisions] == [ComplianceCode.COMPLIANT]
    assert [r.outcome.value for r in audit.records] == ["no-action"]


@pytest.mark.parametrize(("notify_in_audit_mode", "told"), [(False, []), (True, [NotificationOutcome.WOULD_STOP])])
def test_audit_mode_records_what_enforce_would_stop_and_stops_nothing(
    compliance: ComplianceService,
    jobs: Any,
    policies: Any,
    notifier: Any,
    audit: MemoryAuditSink,
    calls: Any,
    notify_in_audit_mode: bool,
    told: list[NotificationOutcome],
) -> None:
    policies.policy = required_tag_policy("audit").overlay({"notify_in_audit_mode": notify_in_audit_mode})
    jobs.jobs["job-1"] = job(tags=UNTAGGED)
    compliance.react(job(tags=UNTAGGED), TRIGGER)
    assert "stop job-1" not in calls.log
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "audit-only")]
    assert [m.outcome for m in notifier.sent] == told


def test_an_audit_mode_stop_rule_is_not_told_beside_an_enforce_notice(
    compliance: ComplianceService, jobs: Any, policies: Any, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given enforce mode without notify_in_audit_mode, the required-tags stop rule in audit mode (its rollout) and
    # a notify-only rule on the instance count, and a job that violates both
    document = Settings.from_env({"REQUIRED_TAGS": "team,cost-center"}).base_policy_document()
    for rule in document["rules"]:
        if rule["id"] == "required-tags":
            rule["mode"] = "audit"
        if rule["id"] == "max-instances":
            rule.update({"max": 1, "on_violation": "notify"})
    policies.policy = build_policy({**document, "mode": "enforce", "notify_in_audit_mode": False})
    two_hosts = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50}
    jobs.jobs["job-1"] = job(tags=UNTAGGED, ResourceConfig=two_hosts)
    # When its first InProgress event is evaluated
    compliance.react(job(tags=UNTAGGED, ResourceConfig=two_hosts), TRIGGER)
    # Then nothing is stopped, both are recorded, and the owner is told of the notice alone, as a notice
    assert "stop job-1" not in calls.log
    assert sorted((r.code, r.outcome.value) for r in audit.records) == [
        (ComplianceCode.NOTIFY, "done"),
        (ComplianceCode.STOP, "audit-only"),
    ]
    (told,) = notifier.sent
    assert told.outcome is NotificationOutcome.NOTIFIED
    assert [(item.code, item.mode) for item in told.items] == [(ComplianceCode.NOTIFY, "enforce")]


def test_an_event_without_tags_reads_them_once(
    compliance: ComplianceService, jobs: Any, calls: Any, audit: MemoryAuditSink
) -> None:
    # Given an event whose payload carries no tags (EventBridge omits them at times)
    jobs.jobs["job-1"] = job(tags=TAGS)
    event_job = job(tags=TAGS).model_copy(update={"tags": None})
    compliance.react(event_job, TRIGGER)
    assert calls.log[0].startswith("list-tags ") and [r.code for r in audit.records] == [ComplianceCode.COMPLIANT]


def test_an_event_that_leaves_out_what_a_rule_needs_is_decided_from_the_job_as_sagemaker_describes_it(
    compliance: ComplianceService, jobs: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a policy that flags Spot jobs without checkpoints, and an event that does not say whether the job
    # is Managed Spot (no AWS sample of the event shows the field), of a job that is
    policies.policy = build_policy({"rules": [{"type": "spot-checkpoint"}]})
    jobs.jobs["job-1"] = job(tags=TAGS, EnableManagedSpotTraining=True)
    decisions = compliance.react(job(tags=TAGS, EnableManagedSpotTraining=None), TRIGGER)
    # Then the job is read again, and the rule decides on what SageMaker says: Spot without checkpoints
    assert calls.log[0] == "get-job job-1"
    assert [d.code for d in decisions] == [ComplianceCode.NOTIFY]
    assert [r.code for r in audit.records] == [ComplianceCode.NOTIFY]


@pytest.mark.parametrize("mode", ["enforce", "audit"])
def test_an_event_with_an_empty_tag_map_is_confirmed_against_sagemaker_before_any_record(
    compliance: ComplianceService, jobs: Any, policies: Any, notifier: Any, audit: MemoryAuditSink, mode: str
) -> None:
    # Given an event whose Tags map is empty (AWS's documented sample event shows "Tags": {}) for a job that
    # SageMaker lists with all its tags
    policies.policy = required_tag_policy(mode).overlay({"notify_in_audit_mode": True})
    jobs.jobs["job-1"] = job(tags=TAGS)
    decisions = compliance.react(job(tags={}), TRIGGER)
    # Then it is compliant in either mode: no stop, no "would stop" record, nobody told
    assert [d.code for d in decisions] == [ComplianceCode.COMPLIANT]
    assert [r.code for r in audit.records] == [ComplianceCode.COMPLIANT] and notifier.sent == []


def test_a_job_launched_with_50_tags_is_evaluated_but_no_mark_is_tried(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a compliant job launched with SageMaker's 50 tags per resource (and an aws: one, not counted)
    tags = {**TAGS, **{f"k{i}": "v" for i in range(MAX_TAGS - len(TAGS))}, "aws:x": "y"}
    jobs.jobs["job-1"] = job(tags=tags)
    # When compliance evaluates it
    decisions = compliance.react(job(tags=tags), TRIGGER)
    # Then it is decided and recorded, and no AddTags is tried: it would be refused now and at every retry
    assert [d.code for d in decisions] == [ComplianceCode.COMPLIANT]
    assert [r.outcome.value for r in audit.records] == ["no-action"]
    assert not any(c.startswith("mark") for c in calls.log)
    # while a job with room is marked
    compliance.react(job(tags=TAGS), TRIGGER)
    assert calls.log[-1] == f"mark job-1 {EVALUATED_TAG}"


class TaggingMarks:
    """``EvaluationMarksPort`` that tags the job as SageMaker would: a later re-read (``FakeJobs``) shows the mark."""

    def __init__(self, jobs: Any, calls: Any) -> None:
        self.jobs = jobs
        self.calls = calls

    def mark(self, arn: str, key: str, value: str) -> None:
        name = arn.rsplit("/", 1)[-1]
        self.calls(f"mark {name} {key}")
        self.jobs.jobs[name] = self.jobs.jobs[name].with_tags({**(self.jobs.jobs[name].tags or {}), key: value})


@pytest.fixture
def marking(jobs: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, calls: Any) -> ComplianceService:
    return ComplianceService(jobs, notifier, policies, audit, lambda: NOW, marks=TaggingMarks(jobs, calls))


RECONCILER = Trigger(kind="reconciler", event_id="run-1")
SPOT_WITHOUT_CHECKPOINT: dict[str, Any] = {
    "EnableManagedSpotTraining": True,
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
}


def test_a_job_the_reconciler_evaluated_while_pending_is_not_evaluated_again_by_its_starting_event(
    marking: ComplianceService, jobs: Any, policies: Any, notifier: Any, audit: MemoryAuditSink
) -> None:
    # Given the default policy in enforce mode (a Spot job without a checkpoint: tell the owner), and such a job
    # queued on a training plan, InProgress/Pending past the grace, which the reconciler evaluated and marked
    policies.policy = build_policy({**Settings.from_env({}).base_policy_document(), "mode": "enforce"})
    pending = job(
        SecondaryStatus="Pending",
        SecondaryStatusTransitions=[{"Status": "Pending", "StartTime": "1763719201000"}],
        **SPOT_WITHOUT_CHECKPOINT,
    )
    jobs.jobs["job-1"] = pending
    marking.evaluate(pending, RECONCILER)
    # When the plan starts the job and its first InProgress/Starting event arrives (its tags from before the mark)
    decisions = marking.react(job(**SPOT_WITHOUT_CHECKPOINT), TRIGGER)
    # Then the event finds the mark on the re-read job: the owner was told once, the violation recorded once
    assert [d.code for d in decisions] == [ComplianceCode.ALREADY_EVALUATED]
    assert [(r.code, r.trigger, r.outcome.value) for r in audit.records] == [
        (ComplianceCode.NOTIFY, "reconciler", "done"),
        (ComplianceCode.ALREADY_EVALUATED, "job-state-change", "already-done"),
    ]
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.NOTIFIED]


def test_a_late_starting_event_of_a_job_the_reconciler_stopped_stops_records_and_tells_nothing_new(
    marking: ComplianceService, jobs: Any, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job without its cost-center tag that the reconciler evaluated (its Starting event was late): stopped
    jobs.jobs["job-1"] = job(tags=UNTAGGED)
    marking.evaluate(job(tags=UNTAGGED), RECONCILER)
    jobs.jobs["job-1"] = jobs.jobs["job-1"].model_copy(update={"status": "Stopped", "secondary_status": "Stopped"})
    # When the Starting event is delivered at last (an SQS retry, a redrive from the dead-letter queue)
    decisions = marking.react(job(tags=UNTAGGED), TRIGGER)
    # Then it re-reads the job, finds it evaluated, and leaves it: one stop, one violation record, one message
    assert [d.code for d in decisions] == [ComplianceCode.ALREADY_EVALUATED]
    assert [c for c in calls.log if c.startswith("stop")] == ["stop job-1"]
    assert [(r.code, r.outcome.value) for r in audit.records] == [
        (ComplianceCode.STOP, "done"),
        (ComplianceCode.ALREADY_EVALUATED, "already-done"),
    ]
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.STOPPED]


def test_an_event_without_tags_whose_listed_tags_show_the_mark_is_not_evaluated_again(
    compliance: ComplianceService, jobs: Any, notifier: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job the reconciler evaluated and marked, and its Starting event carries no tags
    jobs.jobs["job-1"] = job(tags={**UNTAGGED, EVALUATED_TAG: "2026-11-21T11:40:00Z"})
    decisions = compliance.react(job().model_copy(update={"tags": None}), TRIGGER)
    # Then the tags it reads show the mark: nothing else is read, decided, recorded as a violation or told
    assert calls.log == ["list-tags " + str(job().arn)]
    assert [d.code for d in decisions] == [ComplianceCode.ALREADY_EVALUATED]
    assert [(r.code, r.outcome.value) for r in audit.records] == [
        (ComplianceCode.ALREADY_EVALUATED, "already-done")
    ]
    assert decisions[0].evidence == {"evaluated_at": "2026-11-21T11:40:00Z"} and notifier.sent == []


def test_the_retry_of_a_delivery_that_marked_the_job_evaluates_it_again_under_the_policy_it_finds(
    marking: ComplianceService, jobs: Any, policies: Any, notifier: Any, audit: MemoryAuditSink, ledger: Any
) -> None:
    # Given a Starting event whose first attempt, in audit mode, recorded the would-stop, marked the job, then
    # failed later in the delivery (its claim released with what it did)
    policies.policy = required_tag_policy("audit")
    jobs.jobs["job-1"] = job(tags=UNTAGGED)

    def attempt(fail: bool) -> list[str]:
        decisions = marking.react(job(tags=UNTAGGED), TRIGGER)
        if fail:
            raise RuntimeError("a later reaction failed")
        return [d.code for d in decisions]

    with pytest.raises(RuntimeError):
        deliver(ledger, KEY, lambda: attempt(True), owner="m-1", now=NOW, hold_seconds=60)
    # When its retry runs after the policy was switched to enforce (the README's rollout)
    policies.policy = required_tag_policy("enforce")
    codes = deliver(ledger, KEY, lambda: attempt(False), owner="m-1", now=NOW, hold_seconds=60)
    # Then the mark is its own attempt's: the job is evaluated again and stopped, as before this mark was read
    assert codes == [ComplianceCode.STOP]
    assert [(r.code, r.outcome.value) for r in audit.records] == [
        (ComplianceCode.STOP, "audit-only"),
        (ComplianceCode.STOP, "done"),
    ]
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.STOPPED]


def test_a_duplicate_of_a_completed_delivery_is_skipped_by_the_ledger_before_compliance_reads_anything(
    marking: ComplianceService, jobs: Any, audit: MemoryAuditSink, ledger: Any, calls: Any
) -> None:
    # Given a Starting event handled (the job stopped and marked)
    jobs.jobs["job-1"] = job(tags=UNTAGGED)
    deliver(ledger, KEY, lambda: marking.react(job(tags=UNTAGGED), TRIGGER), owner="m-1", now=NOW, hold_seconds=60)
    calls.log.clear()
    # When another event of the same state change arrives
    again = deliver(
        ledger, KEY, lambda: marking.react(job(tags=UNTAGGED), TRIGGER), owner="m-2", now=NOW, hold_seconds=60
    )
    # Then it is a duplicate, as before: nothing read, recorded or told
    assert again == Duplicate(KEY) and calls.log == ["claim m-2"]
    assert [r.code for r in audit.records] == [ComplianceCode.STOP]


# A team narrower than the defaults: the defaults pass a job on ml.g5.2xlarge, the vision team's override stops it.
VISION_ON_P5_ONLY = {
    "mode": "enforce",
    "rules": [{"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.*"]}],
    "teams": {
        "vision": {
            "rules": [
                {
                    "id": "instance-types",
                    "type": "allowed-instance-types",
                    "patterns": ["ml.p5.*"],
                    "on_violation": "stop",
                }
            ]
        }
    },
}


def starting_event(tags: dict[str, str] | None) -> TrainingJobStateChange:
    """The job's Starting event as EventBridge delivers it, its detail carrying ``tags`` (None: no Tags)."""
    detail = job().model_dump(by_alias=True, mode="json", exclude={"tags"})
    return TrainingJobStateChange.model_validate(
        {
            "version": "0",
            "id": "e-1",
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": "123456789012",
            "time": "2026-11-21T12:00:00Z",
            "region": "us-east-1",
            "resources": [str(job().arn)],
            "detail": {**detail, **({"Tags": tags} if tags is not None else {})},
        }
    )


def test_a_starting_event_with_an_empty_tag_map_is_judged_on_the_jobs_own_tags_and_its_teams_override(
    compliance: ComplianceService, jobs: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a vision job on ml.g5.2xlarge (the defaults allow it, its team's override stops it), and its Starting
    # event carries an empty Tags map, as AWS's documented sample event does
    policies.policy = build_policy(VISION_ON_P5_ONLY)
    jobs.jobs["job-1"] = job(tags=TAGS)
    service = JobEventsService([compliance], policies, audit, lambda: NOW, jobs)
    # When the job-events service handles the event as it reads it
    decisions = service.handle(service.said(starting_event({})))
    # Then the empty map is not taken for "no tags": the job's tags are read, and its team's verdict stops it
    assert calls.log[0] == f"list-tags {job().arn}" and "stop job-1" in calls.log
    assert [d.code for d in decisions] == [ComplianceCode.STOP]
    assert [(r.code, r.outcome.value, r.team) for r in audit.records] == [(ComplianceCode.STOP, "done", "vision")]


def test_a_starting_event_with_its_tags_reads_none(
    compliance: ComplianceService, jobs: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a compliant job whose Starting event carries its tags
    policies.policy = build_policy(VISION_ON_P5_ONLY)
    jobs.jobs["job-1"] = job(tags={**TAGS, "team": "nlp"})
    service = JobEventsService([compliance], policies, audit, lambda: NOW, jobs)
    # When the job-events service handles it
    decisions = service.handle(service.said(starting_event({**TAGS, "team": "nlp"})))
    # Then it is judged on the event's tags: nothing is read from SageMaker
    assert [d.code for d in decisions] == [ComplianceCode.COMPLIANT]
    assert calls.log == [f"mark job-1 {EVALUATED_TAG}"]


@pytest.mark.parametrize("copied", ["2025-11-20T09:15:00Z", "2025-11-21T09:59:59Z", "evaluated"])
def test_a_mark_the_job_was_launched_with_is_ignored_and_the_job_evaluated_stopped_and_marked_again(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any, copied: str
) -> None:
    # Given a job created at 10:00:00 without its cost-center tag, launched carrying a mark it did not earn (a
    # console Clone of an evaluated job, a pasted ListTags output): older than the job, or not a time at all
    tags = {**UNTAGGED, EVALUATED_TAG: copied}
    jobs.jobs["job-1"] = job(tags=tags)
    # When its first InProgress event is evaluated
    decisions = compliance.react(job(tags=tags), TRIGGER)
    # Then the mark is not governance's: the job is re-read, stopped, told, and marked with this evaluation
    assert [d.code for d in decisions] == [ComplianceCode.STOP]
    assert calls.log == ["get-job job-1", "stop job-1", "notify compliance job-1", f"mark job-1 {EVALUATED_TAG}"]
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "done")]


def test_an_event_without_tags_or_creation_time_reads_the_job_before_trusting_the_mark_its_tags_show(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job created at 10:00:00 without its cost-center tag, launched with a mark copied from a job
    # evaluated the day before, whose event leaves out both its tags and its creation time
    tags = {**UNTAGGED, EVALUATED_TAG: "2025-11-20T09:15:00Z"}
    jobs.jobs["job-1"] = job(tags=tags)
    event = job(CreationTime=None).model_copy(update={"tags": None})
    # When it is evaluated
    decisions = compliance.react(event, TRIGGER)
    # Then the job is read for its creation time before its mark is trusted: the mark is older, the job is stopped
    assert [d.code for d in decisions] == [ComplianceCode.STOP]
    assert calls.log[:2] == ["list-tags " + str(job().arn), "get-job job-1 (event tags)"]  # tags listed once
    assert [c for c in calls.log if c.startswith("get-job")] == ["get-job job-1 (event tags)"]  # and read once
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ComplianceCode.STOP, "done")]


class DescriptionLags(FakeJobs):
    """``JobsPort`` a moment after a job's creation: ``ListTags`` answers for it, ``DescribeTrainingJob`` does not
    find it yet."""

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        self.calls(f"get-job {name} (not found yet)")
        raise JobNotFound(name)


def test_a_mark_is_not_trusted_because_the_job_s_description_lags_its_starting_event(
    notifier: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job launched without its cost-center tag and with a copied mark, whose Starting event leaves out both
    # its tags and its creation time, and whose description lags its creation
    jobs = DescriptionLags(calls)
    jobs.jobs["job-1"] = job(tags={**UNTAGGED, EVALUATED_TAG: "2025-11-20T09:15:00Z"})
    compliance = ComplianceService(jobs, notifier, policies, audit, lambda: NOW, marks=Marks(calls))
    event = job(CreationTime=None).model_copy(update={"tags": None})
    # When it is evaluated
    with pytest.raises(DescriptionBehind):
        compliance.react(event, TRIGGER)
    # Then the mark is not trusted (a job in progress cannot have been deleted): the delivery is retried, nothing
    # is decided or recorded on this reading
    assert calls.log == ["list-tags " + str(job().arn), "get-job job-1 (not found yet)"]
    assert audit.records == []


@pytest.mark.parametrize(
    ("created", "mark"),
    [
        ("1763719200900", "2025-11-21T10:00:00Z"),  # written in the second the job was created (to the second)
        (None, "2025-11-20T09:15:00Z"),  # the job's creation time unknown: any mark is taken as governance's
    ],
)
def test_a_mark_governance_wrote_after_the_job_s_creation_or_of_a_job_of_unknown_creation_is_kept(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any, created: str | None, mark: str
) -> None:
    # Given a job without its cost-center tag, marked as evaluated
    tags = {**UNTAGGED, EVALUATED_TAG: mark}
    jobs.jobs["job-1"] = job(tags=tags, CreationTime=created)
    # When its first InProgress event is evaluated
    decisions = compliance.react(job(tags=tags, CreationTime=created), TRIGGER)
    # Then the mark counts: nothing is stopped, told or marked again
    assert [d.code for d in decisions] == [ComplianceCode.ALREADY_EVALUATED]
    assert calls.log == ["get-job job-1"]
    assert [(r.code, r.outcome.value) for r in audit.records] == [
        (ComplianceCode.ALREADY_EVALUATED, "already-done")
    ]


# ---- a compliance stop told at the job's Stopped event ------------------------------------------------------

COPIED = {**UNTAGGED, EVALUATED_TAG: "2025-11-20T09:15:00Z"}  # a mark a day older than the job (created at 10:00)
STOPPED_EVENT = Trigger(kind="job-state-change", event_id="e-stopped")


class ThrottledOnce(FakeNotifier):
    """The first Publish fails past botocore's retries; the later ones go through."""

    failures = 1

    def publish(self, message: Notification) -> str | None:
        if self.failures:
            self.failures -= 1
            self.calls(f"notify-throttled {message.job_name}")
            raise AdapterError("Publish throttled")
        return super().publish(message)


def stopped_by_the_reconciler(
    jobs: Any, calls: Any, audit: MemoryAuditSink, tags: dict[str, str]
) -> tuple[ComplianceService, ThrottledOnce]:
    """A job launched without cost-center and with ``tags``, which the reconciler's repair (outside any delivery)
    stopped, its owner's message failed or not (``ThrottledOnce``, as long as ``failures`` says)."""
    notifier = ThrottledOnce(calls)
    service = ComplianceService(
        jobs,
        notifier,
        FixedPolicies(required_tag_policy()),
        audit,
        lambda: NOW,
        marks=Marks(calls),
        notices=ComplianceNotices(MemoryLedger(calls), lambda: NOW),
    )
    jobs.jobs["job-1"] = job(tags=tags)
    return service, notifier


@pytest.mark.parametrize(
    "shape",
    ["as SageMaker sends it", "without tags or creation time", "with its tags, without its creation time"],
)
def test_a_stop_whose_telling_failed_is_told_at_the_stopped_event_whatever_mark_the_job_was_launched_with(
    jobs: Any, calls: Any, audit: MemoryAuditSink, shape: str
) -> None:
    # Given a job launched with a mark copied from a job evaluated the day before, stopped by the reconciler's
    # repair, whose owner's message failed: the copied mark is never overwritten (the mark comes after the telling)
    service, notifier = stopped_by_the_reconciler(jobs, calls, audit, COPIED)
    with pytest.raises(AdapterError):
        service.evaluate(job(tags=COPIED), RECONCILER)
    assert "stop job-1" in calls.log and notifier.sent == []
    jobs.jobs["job-1"] = job(tags=COPIED, TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
    # When its Stopped event arrives, leaving out its creation time or not
    event = job(tags=COPIED, TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
    if shape != "as SageMaker sends it":
        event = event.model_copy(update={"creation_time": None})
    if shape == "without tags or creation time":
        event = event.model_copy(update={"tags": None})
    assert service.applies(event)
    service.react(event, STOPPED_EVENT)
    # Then the mark, which the event does not let be dated, is no proof the owner was told: the stop is told
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.STOPPED]


def test_a_stopped_event_without_creation_time_of_a_job_whose_stop_was_told_tells_nothing_again(
    jobs: Any, calls: Any, audit: MemoryAuditSink
) -> None:
    # Given a job without cost-center stopped by the reconciler's repair, its owner told and the job marked
    service, notifier = stopped_by_the_reconciler(jobs, calls, audit, UNTAGGED)
    notifier.failures = 0
    service.evaluate(job(tags=UNTAGGED), RECONCILER)
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.STOPPED]
    marked = {**UNTAGGED, EVALUATED_TAG: "2025-11-21T12:00:00Z"}
    jobs.jobs["job-1"] = job(tags=marked, TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
    # When its Stopped event leaves out its creation time
    event = job(tags=marked, TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
    service.react(event.model_copy(update={"creation_time": None}), STOPPED_EVENT)
    # Then the ledger says nothing is owed: the owner is not told again
    assert [m.outcome for m in notifier.sent] == [NotificationOutcome.STOPPED]
