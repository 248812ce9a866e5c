"""The alarm guards' lifecycle (service/guard_alarms.py) on in-memory ports: order and branches."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.errors import AdapterError, Throttled
from sagemaker_governance.domain.guards.base import AlarmNaming
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.progress import PROGRESS
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.reconcile import AlarmListing, JobListing, JobSummary
from sagemaker_governance.domain.stall_judge import MetricReadResult
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.service.guard_alarms import LIFECYCLE_POLICY_MAX_AGE_SECONDS
from sagemaker_governance.service.job_events import JobEventsService
from sagemaker_governance.service.reconciler import ReconcilerService
from sagemaker_governance.service.recording import Trigger
from smgov.simulation.metrics import kept_at
from tests.builders import job
from tests.service.conftest import NOW, FixedPolicies

TRAINING = [
    {"Status": "Starting", "StartTime": "1763719201000"},
    {"Status": "Training", "StartTime": "1763719501000"},
]
TRIGGER = Trigger(kind="job-state-change", event_id="e-1")


def training(name: str = "job-1", **overrides: Any) -> TrainingJob:
    return job(name, **{"SecondaryStatus": "Training", "SecondaryStatusTransitions": TRAINING, **overrides})


def test_training_rereads_the_job_with_the_events_tags_then_creates(
    idle_lifecycle: Any, jobs: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a GPU job in Training for the first time, as SageMaker describes it
    jobs.jobs["job-1"] = training()
    # When its Training event arrives
    (decision,) = idle_lifecycle.react(training(), TRIGGER)
    # Then: re-read (the event's tags, no ListTags) and create; no reset (a new alarm starts in
    # INSUFFICIENT_DATA, and no earlier stint can have left it in ALARM); one record, the create code
    assert calls.log == ["get-job job-1 (event tags)", "put gov-guard-job-1"]
    assert decision.code == "idle.alarm.create"
    assert [(r.code, r.outcome.value) for r in audit.records] == [("idle.alarm.create", "done")]
    # and the lifecycle accepted a policy document up to 10 minutes old
    assert policies.asked == [LIFECYCLE_POLICY_MAX_AGE_SECONDS]


def test_back_in_training_the_alarm_is_upserted_then_reset(idle_lifecycle: Any, jobs: Any, calls: Any) -> None:
    # Given a job back in Training after a Spot interruption (its alarm kept its state through the pause)
    restarted = [
        *TRAINING,
        {"Status": "Interrupted", "StartTime": "1763720000000"},
        {"Status": "Training", "StartTime": "1763720500000"},
    ]
    jobs.jobs["job-1"] = training(SecondaryStatusTransitions=restarted)
    # When its second Training event arrives
    (decision,) = idle_lifecycle.react(training(SecondaryStatusTransitions=restarted), TRIGGER)
    # Then the alarm is upserted and reset to OK, so a stall of this stint notifies again
    assert calls.log == ["get-job job-1 (event tags)", "put gov-guard-job-1", "reset gov-guard-job-1"]
    assert decision.code == "idle.alarm.create"


def test_a_late_training_event_of_an_ended_job_creates_nothing(
    idle_lifecycle: Any, jobs: Any, alarms: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    jobs.jobs["job-1"] = training(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    (decision,) = idle_lifecycle.react(training(), TRIGGER)
    assert decision.code == "idle.alarm.late-event"
    assert alarms.alarms == {} and calls.log == ["get-job job-1 (event tags)"]
    assert [r.outcome.value for r in audit.records] == ["skipped"]


def test_a_job_gone_when_reread_creates_nothing(idle_lifecycle: Any, alarms: Any) -> None:
    (decision,) = idle_lifecycle.react(training(), TRIGGER)
    assert decision.code == "idle.alarm.job-gone" and alarms.alarms == {}


def test_a_terminal_event_deletes_the_jobs_alarms_without_a_reread(
    idle_lifecycle: Any, jobs: Any, alarms: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given the job's alarm exists
    alarms.alarms["gov-guard-job-1"] = "OK"
    guard = idle_lifecycle
    ended = training(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    # When it completes, and the event is delivered again later
    guard.react(ended, TRIGGER)
    guard.react(ended, TRIGGER)
    # Then the alarm is deleted without asking SageMaker; the second delete finds nothing
    assert calls.log == ["delete gov-guard-job-1", "delete gov-guard-job-1"]
    assert [(r.code, r.outcome.value) for r in audit.records] == [
        ("idle.alarm.delete", "done"),
        ("idle.alarm.delete", "already-done"),
    ]


def test_a_delete_throttled_past_botocores_retries_is_deferred_and_the_delivery_succeeds(
    idle_lifecycle: Any, alarms: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given the job's alarm exists and CloudWatch still throttles DeleteAlarms after the client's retries
    alarms.alarms["gov-guard-job-1"] = "OK"
    alarms.throttled = 1
    ended = training(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    # When the job's Completed event is handled
    (decision,) = idle_lifecycle.react(ended, TRIGGER)
    # Then nothing is raised (the delivery succeeds), the alarm is still there for the reconciler, and
    # the decision is on the record as deferred, with its own code and the names it could not delete
    assert decision.code == "idle.alarm.delete-deferred"
    assert alarms.alarms == {"gov-guard-job-1": "OK"}
    assert [(r.code, r.outcome.value) for r in audit.records] == [("idle.alarm.delete-deferred", "deferred")]
    assert "throttled" in audit.records[0].evidence


def test_a_delete_throttled_after_an_earlier_composites_delete_records_what_was_deleted(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a 12-host GPU job's efficiency alarms (two composites: its notice's and its stop's, each with its
    # children), deleted in one request per composite, and CloudWatch throttling the second request
    policy = Policy.model_validate({"mode": "enforce", "efficiency": {"enabled": True}})
    lifecycle = lifecycle_with_notifier(EFFICIENCY, jobs, alarms, policy, audit, notifier)
    naming = AlarmNaming(prefix="gov-guard-", managed_by="gov")
    names = EFFICIENCY.owned_alarms("job-1", 12, naming)
    alarms.alarms.update(dict.fromkeys(names, "OK"))
    delete = alarms.delete
    requests: list[list[str]] = []

    def second_throttled(request: Any) -> list[str]:
        requests.append(list(request))
        if len(requests) == 2:
            raise Throttled("DeleteAlarms throttled: Rate exceeded")
        result: list[str] = delete(request)
        return result

    monkeypatch.setattr(alarms, "delete", second_throttled)
    hosts = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 12, "VolumeSizeInGB": 50}
    ended = training(TrainingJobStatus="Completed", SecondaryStatus="Completed", ResourceConfig=hosts)
    # When the job's Completed event is handled
    (decision,) = lifecycle.react(ended, TRIGGER)
    # Then the deletion is deferred (the second composite's alarms left for the reconciler), and its record names
    # the alarms the first request deleted: they are gone, and no later record would say so
    assert decision.code == "efficiency.alarm.delete-deferred"
    assert [(r.code, r.outcome.value) for r in audit.records] == [("efficiency.alarm.delete-deferred", "deferred")]
    assert audit.records[0].evidence["deleted"] == requests[0]
    assert set(alarms.alarms) == set(requests[1])


# ---- declared tolerance (domain/tolerance.py) ------------------------------------------------------


def lifecycle_with_notifier(
    guard: Any, jobs: Any, alarms: Any, policy: Any, audit: MemoryAuditSink, notifier: Any, notices: Any = None
) -> Any:
    from sagemaker_governance.service.guard_alarms import GuardAlarms

    naming = AlarmNaming(prefix="gov-guard-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")
    return GuardAlarms(
        guard,
        jobs=jobs,
        alarms=alarms,
        policies=FixedPolicies(policy),
        audit=audit,
        clock=lambda: NOW,
        naming=naming,
        notifier=notifier,
        notices=notices,
    )


def test_a_declared_idle_window_is_applied_and_recorded_and_nobody_is_told(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any
) -> None:
    # Given a job that declares a 90-minute idle window (the team's cap is the default 240)
    tags = {"team": "rl", "owner": "alice", "smgov:idle-minutes": "90"}
    jobs.jobs["job-1"] = training(tags=tags)
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, Policy(mode=Mode.ENFORCE), audit, notifier)
    # When its Training event arrives
    decisions = lifecycle.react(training(tags=tags), TRIGGER)
    # Then the alarm watches 90 periods, the declaration is on the record, and no message is sent
    assert [d.code for d in decisions] == ["judge.tolerance.applied", "idle.alarm.create"]
    assert decisions[1].request is not None and decisions[1].request["EvaluationPeriods"] == 90
    (applied,) = [r for r in audit.records if r.code == "judge.tolerance.applied"]
    assert applied.evidence["declared_minutes"] == 90 and applied.evidence["team_window_minutes"] == 30
    assert notifier.sent == []


# A job whose progress tag (600 minutes) exceeds its team's cap of 180, on a job with a loss definition.
OVER_CAP_TAGS = {"team": "rl", "owner": "alice", "smgov:progress-minutes": "600"}
CAPPED_AT_180 = Policy.model_validate(
    {"mode": "enforce", "teams": {"rl": {"judge": {"max_declared_minutes": 180}}}}
)
LOSS_DEFINITION = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "loss", "Regex": "loss=(\\S+)"}],
}


def test_an_over_cap_declaration_is_ignored_and_the_owner_told_once(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any
) -> None:
    # Given a job whose progress tag exceeds its team's cap of 180 minutes
    tags, definitions = OVER_CAP_TAGS, LOSS_DEFINITION
    jobs.jobs["job-1"] = training(tags=tags, AlgorithmSpecification=definitions)
    lifecycle = lifecycle_with_notifier(PROGRESS, jobs, alarms, CAPPED_AT_180, audit, notifier)
    # When its Training event arrives
    decisions = lifecycle.react(training(tags=tags, AlgorithmSpecification=definitions), TRIGGER)
    # Then the team's 120-minute window stays (the alarm its 20-minute trigger, not the tag's 600), the ignored
    # tag is recorded and the owner is told
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    assert decisions[1].request is not None
    assert decisions[1].request["PutMetricAlarm"][0]["EvaluationPeriods"] == 20
    assert decisions[1].evidence["window_minutes"] == 120
    (message,) = notifier.sent
    assert message.kind == "tolerance-ignored" and message.owner == "alice"
    assert [i.code for i in message.items] == ["judge.tolerance.ignored"]
    # and after a Spot restart (a second Training transition) it is recorded again, not told again
    restarted = [
        *TRAINING,
        {"Status": "Interrupted", "StartTime": "1763720000000"},
        {"Status": "Training", "StartTime": "1763720500000"},
    ]
    jobs.jobs["job-1"] = training(
        tags=tags, AlgorithmSpecification=definitions, SecondaryStatusTransitions=restarted
    )
    lifecycle.react(training(tags=tags, AlgorithmSpecification=definitions), TRIGGER)
    assert len(notifier.sent) == 1
    assert [r.code for r in audit.records].count("judge.tolerance.ignored") == 2


def test_a_declaration_key_in_capitals_is_ignored_and_the_owner_told(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any
) -> None:
    # Given a job tagged SMGOV:progress-minutes=90 (a valid value, but not the key the service reads)
    tags = {"team": "rl", "owner": "alice", "SMGOV:progress-minutes": "90"}
    jobs.jobs["job-1"] = training(tags=tags, AlgorithmSpecification=LOSS_DEFINITION)
    lifecycle = lifecycle_with_notifier(PROGRESS, jobs, alarms, CAPPED_AT_180, audit, notifier)
    # When its Training event arrives
    decisions = lifecycle.react(training(tags=tags, AlgorithmSpecification=LOSS_DEFINITION), TRIGGER)
    # Then the team's window stays, the ignored tag is recorded and its owner told, not left believing the
    # job protected
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    assert decisions[1].evidence["window_minutes"] == 120
    (message,) = notifier.sent
    assert message.kind == "tolerance-ignored" and message.owner == "alice"


def test_a_restarts_training_event_whose_reread_lags_it_resets_and_does_not_tell_again(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given a job with an over-cap declaration whose owner was told at its first Training
    tags, definitions = OVER_CAP_TAGS, LOSS_DEFINITION
    jobs.jobs["job-1"] = training(tags=tags, AlgorithmSpecification=definitions)
    lifecycle = lifecycle_with_notifier(PROGRESS, jobs, alarms, CAPPED_AT_180, audit, notifier)
    lifecycle.react(training(tags=tags, AlgorithmSpecification=definitions), TRIGGER)
    assert len(notifier.sent) == 1
    # When it is back in Training after a Spot interruption, and DescribeTrainingJob still answers the job as
    # it stood before (Downloading: one Training in its transitions) when the event is handled
    pause = [
        {"Status": "Interrupted", "StartTime": "1763720000000"},
        {"Status": "Downloading", "StartTime": "1763720400000"},
    ]
    jobs.jobs["job-1"] = training(
        tags=tags,
        AlgorithmSpecification=definitions,
        SecondaryStatus="Downloading",
        SecondaryStatusTransitions=[*TRAINING, *pause],
    )
    restarted = [*TRAINING, *pause, {"Status": "Training", "StartTime": "1763720500000"}]
    calls.log.clear()
    decisions = lifecycle.react(
        training(tags=tags, AlgorithmSpecification=definitions, SecondaryStatusTransitions=restarted), TRIGGER
    )
    # Then the event's second Training counts: the alarms are reset, and the owner is not told again
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    assert any(entry.startswith("reset ") for entry in calls.log), calls.log
    assert len(notifier.sent) == 1


def test_a_job_without_the_tags_gets_no_tolerance_record(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any
) -> None:
    jobs.jobs["job-1"] = training()
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, Policy(mode=Mode.ENFORCE), audit, notifier)
    assert [d.code for d in lifecycle.react(training(), TRIGGER)] == ["idle.alarm.create"]
    assert notifier.sent == []


# ---- an event whose Tags map is empty (AWS's documented sample shows "Tags": {}) ------------------------


def training_event(tags: dict[str, str], of: TrainingJob | None = None) -> TrainingJobStateChange:
    """The job's first Training event as EventBridge delivers it (``of``: the event of that job's state instead),
    its detail carrying ``tags``."""
    detail = (of or training()).model_dump(by_alias=True, mode="json", exclude={"tags"})
    return TrainingJobStateChange.model_validate(
        {
            "version": "0",
            "id": "e-1",
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": "123456789012",
            "time": "2026-11-21T12:00:00Z",
            "region": "us-east-1",
            "resources": [str(training().arn)],
            "detail": {**detail, "Tags": tags},
        }
    )


def test_a_training_event_with_an_empty_tag_map_plans_the_alarm_on_the_teams_terms(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given a vision job whose team counts a GPU idle below 5 % (the default: 1 %), and its Training event carries
    # an empty Tags map
    policy = Policy.model_validate({"mode": "enforce", "teams": {"vision": {"idle": {"threshold_percent": 5}}}})
    jobs.jobs["job-1"] = training()
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, policy, audit, notifier)
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    # When the job-events service handles the event as it reads it
    (decision,) = service.handle(service.said(training_event({})))
    # Then the job is re-read with its own tags (not the empty map), and the alarm has the team's threshold
    assert calls.log[0] == "get-job job-1"
    assert decision.code == "idle.alarm.create" and decision.request is not None
    assert decision.request["Threshold"] == 5
    assert [r.team for r in audit.records] == ["vision"]


def test_a_training_event_with_an_empty_tag_map_creates_the_alarms_of_a_guard_only_its_team_turns_on(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given the minimum-utilization guard, off by default and on for the vision team, and a vision job whose
    # Training event carries an empty Tags map
    policy = Policy.model_validate({"mode": "enforce", "teams": {"vision": {"efficiency": {"enabled": True}}}})
    jobs.jobs["job-1"] = training()
    lifecycle = lifecycle_with_notifier(EFFICIENCY, jobs, alarms, policy, audit, notifier)
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    # When the job-events service handles the event as it reads it
    decisions = service.handle(service.said(training_event({})))
    # Then the guard is not taken for off (as the default team has it): the job's tags are read first, the re-read
    # takes them (one ListTags in all), and its alarms are made
    assert calls.log[:2] == [f"list-tags {training().arn}", "get-job job-1 (event tags)"]
    assert [d.code for d in decisions] == ["efficiency.alarm.create"]
    assert alarms.alarms


def test_a_training_event_with_its_tags_is_planned_on_them_without_listing_them(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given the same vision team, and a Training event that carries the job's tags
    policy = Policy.model_validate({"mode": "enforce", "teams": {"vision": {"idle": {"threshold_percent": 5}}}})
    jobs.jobs["job-1"] = training()
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, policy, audit, notifier)
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    # When it is handled
    (decision,) = service.handle(service.said(training_event(dict(training().tags or {}))))
    # Then the re-read takes the event's tags (no ListTags), and the alarm is the team's
    assert calls.log[0] == "get-job job-1 (event tags)"
    assert decision.request is not None and decision.request["Threshold"] == 5


EFFICIENCY_FOR_VISION = {"mode": "enforce", "teams": {"vision": {"efficiency": {"enabled": True}}}}
NLP = {"team": "nlp", "owner": "bob"}
COMPLETED = {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}


@pytest.mark.parametrize(
    ("event_state", "job_state"),
    [({}, {}), (COMPLETED, COMPLETED), ({}, COMPLETED)],
    ids=["training", "completed", "late-training-after-the-end"],
)
def test_an_empty_tag_map_keeps_a_guard_quiet_for_a_team_that_leaves_it_off_when_another_team_turns_it_on(
    jobs: Any,
    alarms: Any,
    audit: MemoryAuditSink,
    notifier: Any,
    calls: Any,
    event_state: dict[str, str],
    job_state: dict[str, str],
) -> None:
    # Given the minimum-utilization guard, off by default and on for the vision team only, and an nlp job whose
    # event (Training, Completed, or a Training event delivered after the job completed) carries an empty Tags map
    policy = Policy.model_validate(EFFICIENCY_FOR_VISION)
    jobs.jobs["job-1"] = training(tags=NLP, **job_state)
    lifecycle = lifecycle_with_notifier(EFFICIENCY, jobs, alarms, policy, audit, notifier)
    # When the job-events service handles the event as it reads it
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    decisions = service.handle(service.said(training_event({}, of=training(**event_state))))
    # Then the guard reads the job's tags (one ListTags) and, off for its team, stays quiet: no DescribeTrainingJob,
    # no alarm created or deleted, no record of its own
    assert calls.log == [f"list-tags {training().arn}"]
    assert [d.code for d in decisions] == ["router.skip.no-reaction"]
    assert [r.code for r in audit.records] == ["router.skip.no-reaction"]


def test_an_empty_tag_map_end_event_deletes_the_alarms_of_a_guard_its_team_turns_on_with_one_tag_read(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given the minimum-utilization guard on for the vision team only, and a vision job with its alarms whose
    # Completed event carries an empty Tags map
    policy = Policy.model_validate(EFFICIENCY_FOR_VISION)
    jobs.jobs["job-1"] = training(**COMPLETED)
    alarms.alarms["gov-guard-job-1.efficiency"] = "OK"
    lifecycle = lifecycle_with_notifier(EFFICIENCY, jobs, alarms, policy, audit, notifier)
    # When the job-events service handles it
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    decisions = service.handle(service.said(training_event({}, of=training(**COMPLETED))))
    # Then the tags the quiet check read are the delete's too (one ListTags), and the record names the team
    assert [c for c in calls.log if c.startswith("list-tags")] == [f"list-tags {training().arn}"]
    assert [d.code for d in decisions] == ["efficiency.alarm.delete"]
    assert "gov-guard-job-1.efficiency" not in alarms.alarms
    assert [(r.code, r.team, r.owner) for r in audit.records] == [("efficiency.alarm.delete", "vision", "alice")]


@pytest.mark.parametrize("tags", ["empty", "as-launched"])
def test_an_end_events_alarm_deletion_is_recorded_on_the_jobs_own_team_and_owner(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any, tags: str
) -> None:
    # Given a vision job owned by alice (vision in audit mode, the default enforce), with its idle alarm, whose
    # Completed event carries an empty Tags map, or the job's tags
    policy = Policy.model_validate({"mode": "enforce", "teams": {"vision": {"mode": "audit"}}})
    ended = training(**COMPLETED)
    jobs.jobs["job-1"] = ended
    alarms.alarms["gov-guard-job-1"] = "OK"
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, policy, audit, notifier)
    # When the job-events service handles it
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    said = dict(ended.tags or {}) if tags == "as-launched" else {}
    (decision,) = service.handle(service.said(training_event(said, of=ended)))
    # Then the alarm is deleted and recorded under the job's team, owner and mode; the empty map costs one ListTags,
    # read before the delete, and the event with its tags none
    expected = (
        [f"list-tags {ended.arn}", "delete gov-guard-job-1"] if tags == "empty" else ["delete gov-guard-job-1"]
    )
    assert calls.log == expected
    assert (decision.code, decision.mode) == ("idle.alarm.delete", Mode.AUDIT)
    assert [(r.team, r.owner, r.mode) for r in audit.records] == [("vision", "alice", Mode.AUDIT)]


def test_an_end_event_whose_tags_cannot_be_read_deletes_and_records_nothing_and_fails_the_delivery(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given a job with its idle alarm whose Completed event carries an empty Tags map, and ListTags fails
    ended = training(**COMPLETED)
    jobs.jobs["job-1"] = ended
    alarms.alarms["gov-guard-job-1"] = "OK"

    def refused(arn: str) -> dict[str, str]:
        raise AdapterError(f"ListTags {arn} failed: AccessDenied")

    jobs.list_tags = refused
    policy = Policy(mode=Mode.ENFORCE)
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, policy, audit, notifier)
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    # When it is handled
    # Then the delivery fails (it is retried), and nothing was deleted or recorded on no team's terms meanwhile
    with pytest.raises(AdapterError):
        service.handle(service.said(training_event({}, of=ended)))
    assert alarms.alarms == {"gov-guard-job-1": "OK"}
    assert audit.records == []


def test_an_end_event_of_a_job_deleted_since_deletes_its_alarms_rather_than_failing_the_delivery(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, calls: Any
) -> None:
    # Given a job with its idle alarm, deleted from SageMaker after it ended (DeleteTrainingJob), whose Completed
    # event carries an empty Tags map: ListTags on its ARN fails and DescribeTrainingJob no longer finds it
    ended = training(**COMPLETED)
    alarms.alarms["gov-guard-job-1"] = "OK"

    def gone(arn: str) -> dict[str, str]:
        calls(f"list-tags {arn}")
        raise AdapterError(f"ListTags {arn} failed: ValidationException")

    jobs.list_tags = gone
    policy = Policy(mode=Mode.ENFORCE)
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, policy, audit, notifier)
    service = JobEventsService([lifecycle], FixedPolicies(policy), audit, lambda: NOW, jobs)
    # When it is handled
    (decision,) = service.handle(service.said(training_event({}, of=ended)))
    # Then the alarm is deleted and recorded without the job's tags (none can be read), and the delivery succeeds
    assert calls.log == [f"list-tags {ended.arn}", "describe job-1", "delete gov-guard-job-1"]
    assert decision.code == "idle.alarm.delete" and alarms.alarms == {}
    assert [(r.code, r.team) for r in audit.records] == [("idle.alarm.delete", None)]


# ---- a put after the stopper may have armed the progress guard (a late event, the reconciler's repair) ----


class MetricReads:
    """``MetricReadPort``: every query answers ``values`` (None: unread), each read logged in ``calls``; as
    CloudWatch answers it, a read whose start lies more than 15 days before its end (now) answers no datapoint
    unless its period is one CloudWatch keeps from then (the simulator's ``kept_at``: botocore's model,
    ``MetricStat.Period``)."""

    def __init__(self, calls: Any, values: tuple[float, ...] | None) -> None:
        self.calls, self.values = calls, values
        self.asked: list[tuple[Any, ...]] = []

    def read(self, queries: Any, start: Any, end: Any, period: int = 60) -> MetricReadResult:
        self.calls(f"read {','.join(q.metric for q in queries)}")
        self.asked.append((tuple(q.stat for q in queries), start, end, period))
        errors = () if self.values is not None else ("GetMetricData failed (Throttling) for 1 series",)
        kept = kept_at(period, int((end - start).total_seconds() // 60))
        values = self.values if self.values is None or kept else ()
        return MetricReadResult(values={q.id: values for q in queries}, errors=errors)


class PutPlans:
    """``AlarmLifecyclePort`` keeping each put's ``ActionsEnabled`` by alarm."""

    def __init__(self, alarms: Any) -> None:
        self.inner = alarms
        self.enabled: dict[str, bool] = {}

    def put(self, plan: Any) -> None:
        self.inner.put(plan)
        self.enabled.update({a.name: a.request["ActionsEnabled"] for a in plan.alarms})

    def delete(self, names: Any) -> list[str]:
        return list(self.inner.delete(names))

    def reset(self, names: Any, reason: str) -> None:
        self.inner.reset(names, reason)

    def metric_alarm(self, name: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self.inner.metric_alarm(name)
        return result


def progress_lifecycle(jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, reads: MetricReads) -> Any:
    from sagemaker_governance.service.guard_alarms import GuardAlarms

    naming = AlarmNaming(prefix="gov-guard-", managed_by="gov")
    return GuardAlarms(
        PROGRESS,
        jobs=jobs,
        alarms=alarms,
        policies=policies,
        audit=audit,
        clock=lambda: NOW,
        naming=naming,
        metric_data=reads,
    )


LOSS = {
    "TrainingImage": "img:1",
    "TrainingInputMode": "File",
    "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
}
STALL, ARMER = "gov-guard-job-1.progress", "gov-guard-job-1.progress-armer"


def entered_training(at: datetime) -> list[dict[str, str]]:
    """The transitions of a job that entered Training at ``at``, five minutes after it started."""
    ms = int(at.timestamp() * 1000)
    return [{"Status": "Starting", "StartTime": str(ms - 300_000)}, {"Status": "Training", "StartTime": str(ms)}]


def test_a_late_put_of_a_job_that_published_puts_the_guard_armed_and_again_the_same(
    jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job in Training for two hours whose metric was published (the stopper may have armed its guard)
    stint = entered_training(datetime(2026, 11, 21, 10, 5, 1, tzinfo=UTC))
    jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS, SecondaryStatusTransitions=stint)
    reads, puts = MetricReads(calls, (0.0, 3.0, 1.0)), PutPlans(alarms)
    lifecycle = progress_lifecycle(jobs, puts, policies, audit, reads)
    # When its Training event is handled (late), and delivered again
    for _ in range(2):
        (decision,) = lifecycle.react(
            training(AlgorithmSpecification=LOSS, SecondaryStatusTransitions=stint), TRIGGER
        )
    # Then each time: one read of the metric's datapoints since the stint's minute, the alarms put as the
    # stopper leaves them, the stall alarm reset
    once = ["get-job job-1 (event tags)", "read train:loss", f"put {STALL}", f"put {ARMER}", f"reset {STALL}"]
    assert calls.log == once * 2
    assert puts.enabled == {STALL: True, ARMER: False}
    (stats, start, end, period), _ = reads.asked
    assert stats == ("SampleCount",) and period == 60 and end == NOW
    assert start == datetime(2026, 11, 21, 10, 5, tzinfo=UTC)  # the entry at 10:05:01, to its minute
    assert decision.code == "progress.alarm.create" and decision.evidence["armed"] is True
    # and the decision shows the requests made (what `smgov explain` shows): armed
    shown = {r["AlarmName"]: r["ActionsEnabled"] for r in decision.request["PutMetricAlarm"]}
    assert shown == {STALL: True, ARMER: False}


@pytest.mark.parametrize(
    ("entered", "period", "since"),
    [
        # 20 days into the stint: CloudWatch answers 5-minute periods from then, from the entry's 5 minutes
        (datetime(2026, 11, 1, 12, 3, 1, tzinfo=UTC), 300, datetime(2026, 11, 1, 12, 0, tzinfo=UTC)),
        # more than 63 days back (the retention's last step): hours, from the entry's hour
        (datetime(2026, 9, 1, 12, 33, 1, tzinfo=UTC), 3600, datetime(2026, 9, 1, 12, 0, tzinfo=UTC)),
    ],
)
def test_a_late_put_long_into_the_stint_reads_at_a_period_cloudwatch_keeps_and_keeps_the_guard_armed(
    jobs: Any,
    alarms: Any,
    policies: Any,
    audit: MemoryAuditSink,
    calls: Any,
    entered: datetime,
    period: int,
    since: datetime,
) -> None:
    # Given a job that entered Training long ago and publishes its metric (the stopper armed its guard), whose
    # alarms are put again late (the reconciler's repair after a redeploy, a redriven Training event); CloudWatch
    # answers a one-minute read from that far back with no datapoint at all
    stint = entered_training(entered)
    jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS, SecondaryStatusTransitions=stint)
    reads, puts = MetricReads(calls, (60.0, 60.0, 60.0)), PutPlans(alarms)
    lifecycle = progress_lifecycle(jobs, puts, policies, audit, reads)
    # When the put is made
    (decision,) = lifecycle.react(training(AlgorithmSpecification=LOSS, SecondaryStatusTransitions=stint), TRIGGER)
    # Then the metric is read at the finest period CloudWatch still answers, from the interval the entry fell in
    ((stats, start, end, asked),) = reads.asked
    assert (stats, start, end, asked) == (("SampleCount",), since, NOW, period)
    # and the guard is put as the stopper left it, the stall alarm reset: not disarmed with its armer stuck in
    # ALARM (it would never notify again)
    assert puts.enabled == {STALL: True, ARMER: False}
    assert calls.log[-3:] == [f"put {STALL}", f"put {ARMER}", f"reset {STALL}"]
    assert decision.code == "progress.alarm.create" and decision.evidence["armed"] is True


def test_a_late_put_of_a_job_that_published_nothing_puts_the_guard_disarmed(
    jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS)
    puts = PutPlans(alarms)
    lifecycle = progress_lifecycle(jobs, puts, policies, audit, MetricReads(calls, ()))
    (decision,) = lifecycle.react(training(AlgorithmSpecification=LOSS), TRIGGER)
    assert calls.log == ["get-job job-1 (event tags)", "read train:loss", f"put {STALL}", f"put {ARMER}"]
    assert puts.enabled == {STALL: False, ARMER: True}
    assert "armed" not in decision.evidence


def test_a_late_put_whose_read_failed_keeps_an_armed_guard_armed(
    jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job the stopper armed (stall alarm on, armer off) that has since hung (no datapoint to read
    # anyway), and a late Training event whose GetMetricData fails
    jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS)
    alarms.alarms.update({STALL: "OK", ARMER: "ALARM"})
    alarms.actions_on.update({STALL: True, ARMER: False})
    puts = PutPlans(alarms)
    lifecycle = progress_lifecycle(jobs, puts, policies, audit, MetricReads(calls, None))
    # When it is handled, and delivered again
    for _ in range(2):
        (decision,) = lifecycle.react(training(AlgorithmSpecification=LOSS), TRIGGER)
    # Then the guard stays armed: the alarms are put as the stopper left them
    assert puts.enabled == {STALL: True, ARMER: False}
    # and each time the stall alarm's current arming was read (one DescribeAlarms) before the put, and the
    # stall alarm reset after it, as on the published path
    once = [
        "get-job job-1 (event tags)",
        "read train:loss",
        f"actions {STALL}",
        f"put {STALL}",
        f"put {ARMER}",
        f"reset {STALL}",
    ]
    assert calls.log == once * 2
    assert decision.code == "progress.alarm.create"
    assert {k: decision.evidence[k] for k in ("arming_unread", "arming_seen", "arming_kept", "armed")} == {
        "arming_unread": True,
        "arming_seen": "armed",
        "arming_kept": True,
        "armed": True,
    }
    shown = {r["AlarmName"]: r["ActionsEnabled"] for r in decision.request["PutMetricAlarm"]}
    assert shown == {STALL: True, ARMER: False}


@pytest.mark.parametrize(
    ("existing", "unreadable", "seen"),
    [
        ({STALL: False, ARMER: True}, False, "disarmed"),  # not armed yet: nothing to keep
        ({}, False, "missing"),  # the reconciler's repair of lost alarms
        ({STALL: True, ARMER: False}, True, "unread"),  # DescribeAlarms fails too: armed on no evidence, never
    ],
)
def test_a_late_put_whose_read_failed_and_finds_no_arming_puts_disarmed_and_resets_so_the_armer_fires_again(
    jobs: Any,
    alarms: Any,
    policies: Any,
    audit: MemoryAuditSink,
    calls: Any,
    existing: dict[str, bool],
    unreadable: bool,
    seen: str,
) -> None:
    # Given a late first Training event, GetMetricData failing, and the stall alarm disarmed, missing, or
    # its arming unreadable
    jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS)
    alarms.alarms.update({name: "ALARM" for name in existing})
    alarms.actions_on.update(existing)
    alarms.actions_unreadable = unreadable
    puts = PutPlans(alarms)
    lifecycle = progress_lifecycle(jobs, puts, policies, audit, MetricReads(calls, None))
    # When it is handled
    (decision,) = lifecycle.react(training(AlgorithmSpecification=LOSS), TRIGGER)
    # Then nothing is armed on no evidence; both alarms are reset (an armer left in ALARM notifies again)
    assert calls.log[-5:] == [
        f"actions {STALL}",
        f"put {STALL}",
        f"put {ARMER}",
        f"reset {STALL}",
        f"reset {ARMER}",
    ]
    assert puts.enabled == {STALL: False, ARMER: True}
    assert {k: decision.evidence.get(k) for k in ("arming_unread", "arming_seen", "arming_kept", "armed")} == {
        "arming_unread": True,
        "arming_seen": seen,
        "arming_kept": False,
        "armed": None,
    }


def test_a_put_that_read_the_metric_never_reads_the_alarms_arming(
    jobs: Any, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a late Training event whose GetMetricData answers (published, or nothing published)
    for values in ((1.0,), ()):
        calls.log.clear()
        jobs.jobs["job-1"] = training(AlgorithmSpecification=LOSS)
        lifecycle = progress_lifecycle(jobs, PutPlans(alarms), policies, audit, MetricReads(calls, values))
        # When it is handled
        (decision,) = lifecycle.react(training(AlgorithmSpecification=LOSS), TRIGGER)
        # Then only the failure path pays the DescribeAlarms
        assert not any(entry.startswith("actions ") for entry in calls.log), calls.log
        assert "arming_unread" not in decision.evidence and "arming_kept" not in decision.evidence


# ---- an ignored declaration told once per job, guard and declaration, whoever creates the alarms ----------


class InProgressListing:
    """The reconciler's job and alarm inventories: ``job-1`` listed in Training, no alarm of this stack."""

    def in_progress(
        self, created_after: datetime, more: Callable[[], bool], created_before: datetime | None = None
    ) -> JobListing:
        listed = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Training", "CreationTime": NOW}
        job = JobSummary.model_validate({"TrainingJobName": "job-1", "TrainingJobArn": "arn:job-1", **listed})
        return JobListing(jobs=(job,))

    def alarm_states(self, prefix: str) -> list[AlarmListing]:
        return []


def over_cap_lifecycle(jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any) -> Any:
    """The progress guard's lifecycle, with the delivery ledger's tolerance notices, on a job in Training whose
    progress tag exceeds its team's cap."""
    from sagemaker_governance.service.idempotency import ToleranceNotices

    jobs.jobs["job-1"] = training(tags=OVER_CAP_TAGS, AlgorithmSpecification=LOSS_DEFINITION)
    notices = ToleranceNotices(ledger, lambda: NOW)
    return lifecycle_with_notifier(PROGRESS, jobs, alarms, CAPPED_AT_180, audit, notifier, notices=notices)


def over_cap_training_event() -> TrainingJob:
    return training(tags=OVER_CAP_TAGS, AlgorithmSpecification=LOSS_DEFINITION)


def test_the_reconcilers_repair_then_a_late_training_event_tell_the_owner_once(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any, calls: Any
) -> None:
    # Given a job in Training with an over-cap declaration, whose Training event is late: the reconciler's run
    # finds it without alarms and creates them
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)
    reconciler = ReconcilerService(
        jobs=jobs,
        inventory=InProgressListing(),
        alarm_inventory=InProgressListing(),
        alarms=alarms,
        guards=(lifecycle,),
        compliance=lifecycle,  # never asked: the job is younger than the evaluation grace
        policies=FixedPolicies(CAPPED_AT_180),
        audit=audit,
        metrics=MemoryBusinessMetrics(),
        clock=lambda: NOW,
        interval_minutes=10,
    )
    report = reconciler.run(Trigger(kind="reconciler", event_id="run-1"), remaining=lambda: 300.0)
    assert report.repairs == {"missing-alarm": 1}
    # When the late Training event arrives
    decisions = lifecycle.react(over_cap_training_event(), TRIGGER)
    # Then each path records the ignored declaration (an auditor sees both decisions), and the owner is told once
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    recorded = [(r.code, r.trigger) for r in audit.records if r.code == "judge.tolerance.ignored"]
    assert recorded == [("judge.tolerance.ignored", "reconciler"), ("judge.tolerance.ignored", "job-state-change")]
    (message,) = notifier.sent
    assert message.kind == "tolerance-ignored" and [i.code for i in message.items] == ["judge.tolerance.ignored"]


def test_a_duplicate_training_event_does_not_tell_the_owner_again(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any, calls: Any
) -> None:
    # Given a job in Training with an over-cap declaration whose owner was told at its Training event
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)
    lifecycle.react(over_cap_training_event(), TRIGGER)
    # When a copy of that event reaches the lifecycle again (one the delivery ledger let through: a redelivery
    # after its delivery's claim expired, or one whose completion mark failed and came back past the hold)
    calls.log.clear()
    decisions = lifecycle.react(over_cap_training_event(), TRIGGER)
    # Then the declaration is recorded again and the owner is not told again: the notice's claim is refused
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    assert [r.code for r in audit.records].count("judge.tolerance.ignored") == 2
    assert len(notifier.sent) == 1
    assert "claim tolerance-notice" in calls.log and not any(c.startswith("notify") for c in calls.log)


def test_a_tolerance_notice_whose_claim_fails_is_told_anyway(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any, monkeypatch: Any
) -> None:
    # Given a job with an over-cap declaration, and a ledger that throttles the notice's claim past botocore's
    # retries
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)

    def throttled(*_: Any) -> Any:
        raise AdapterError("DynamoDB UpdateItem (claim) failed: ProvisionedThroughputExceededException")

    monkeypatch.setattr(ledger, "claim", throttled)
    # When its Training event arrives
    decisions = lifecycle.react(over_cap_training_event(), TRIGGER)
    # Then the owner is told all the same (told twice rather than never), and the alarms are created
    assert [d.code for d in decisions] == ["judge.tolerance.ignored", "progress.alarm.create"]
    assert len(notifier.sent) == 1


def test_a_tolerance_notice_whose_message_failed_is_released_for_the_next_teller(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any, monkeypatch: Any
) -> None:
    # Given a job with an over-cap declaration whose first teller's message fails (SNS throttled)
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)
    publish = notifier.publish

    def throttled(message: Any) -> str | None:
        raise AdapterError("SNS Publish throttled")

    monkeypatch.setattr(notifier, "publish", throttled)
    with pytest.raises(AdapterError):
        lifecycle.react(over_cap_training_event(), TRIGGER)
    # When the event is retried and SNS answers
    monkeypatch.setattr(notifier, "publish", publish)
    lifecycle.react(over_cap_training_event(), TRIGGER)
    # Then the retry tells the owner (the failed attempt released the notice's key)
    assert len(notifier.sent) == 1


def test_an_event_that_meets_another_tellers_unfinished_notice_comes_back_and_tells_when_that_one_failed(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any
) -> None:
    from sagemaker_governance.service.idempotency import NoticePending, deliver, unreleased

    # Given the reconciler's repair telling a job's owner of an ignored declaration, its Publish in flight
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)
    publish = notifier.publish
    met: list[BaseException] = []

    def the_late_training_event() -> None:
        deliver(ledger, "event-1", lambda: lifecycle.react(over_cap_training_event(), TRIGGER), owner="m-1",
                now=NOW, hold_seconds=60)  # fmt: skip

    def reconcilers_publish(message: Any) -> str | None:
        # When the job's late Training event is delivered meanwhile
        with pytest.raises(NoticePending) as pending:
            the_late_training_event()
        met.append(pending.value)
        raise AdapterError("SNS Publish throttled past botocore's retries")  # and the reconciler's fails

    notifier.publish = reconcilers_publish
    with pytest.raises(AdapterError):
        lifecycle.create_alarms(jobs.jobs["job-1"], Trigger(kind="reconciler", event_id="run-1"))
    notifier.publish = publish
    # Then the event's delivery failed marked unreleased (its record comes back after the hold), not "told"
    assert len(met) == 1 and unreleased(met[0]) and notifier.sent == []
    # and its retry tells the owner, once (the reconciler released the key when its Publish failed)
    the_late_training_event()
    assert len(notifier.sent) == 1


def test_outside_a_delivery_an_unfinished_notice_is_left_to_its_teller(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any
) -> None:
    # Given a Training event's delivery telling the owner, its Publish in flight
    lifecycle = over_cap_lifecycle(jobs, alarms, audit, notifier, ledger)
    publish = notifier.publish

    def events_publish(message: Any) -> str | None:
        # When the reconciler's repair meets the job meanwhile: it neither tells nor fails
        decisions = lifecycle.create_alarms(jobs.jobs["job-1"], Trigger(kind="reconciler", event_id="run-1"))
        assert "judge.tolerance.ignored" in [d.code for d in decisions]
        sent: str | None = publish(message)
        return sent

    notifier.publish = events_publish
    lifecycle.react(over_cap_training_event(), TRIGGER)
    # Then the owner is told once, by the event
    assert len(notifier.sent) == 1


def test_a_job_without_an_ignored_declaration_makes_no_ledger_call(
    jobs: Any, alarms: Any, audit: MemoryAuditSink, notifier: Any, ledger: Any, calls: Any
) -> None:
    # Given the ledger's tolerance notices, a job that declares a window within the cap and one with no tags
    from sagemaker_governance.service.idempotency import ToleranceNotices

    notices = ToleranceNotices(ledger, lambda: NOW)
    within = {"team": "rl", "owner": "alice", "smgov:idle-minutes": "90"}
    jobs.jobs["job-1"], jobs.jobs["job-2"] = training(tags=within), training("job-2")
    lifecycle = lifecycle_with_notifier(IDLE, jobs, alarms, Policy(mode=Mode.ENFORCE), audit, notifier, notices)
    # When their Training events arrive
    lifecycle.react(training(tags=within), TRIGGER)
    lifecycle.react(training("job-2"), TRIGGER)
    # Then no ledger call is made (a healthy job's calls do not grow), and nobody is told
    assert not any(c.startswith(("claim", "release", "complete")) for c in calls.log), calls.log
    assert notifier.sent == []
