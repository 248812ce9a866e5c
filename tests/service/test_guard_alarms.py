"""The alarm guards' lifecycle (service/guard_alarms.py) on in-memory ports: order and branches."""

from __future__ import annotations

from typing import Any

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.service.guard_alarms import LIFECYCLE_POLICY_MAX_AGE_SECONDS
from sagemaker_governance.service.recording import Trigger
from tests.builders import job

TRAINING = [
    {"Status": "Starting", "StartTime": "1763719201000"},
    {"Status": "Training", "StartTime": "1763719501000"},
]
TRIGGER = Trigger(kind="job-state-change", event_id="e-1")


def training(name: str = "job-1", **overrides: Any) -> TrainingJob:
    return job(name, **{"SecondaryStatus": "Training", "SecondaryStatusTransitions": TRAINING, **overrides})


def test_training_rereads_the_job_with_the_events_tags_then_creates_then_resets(
    idle_lifecycle: Any, jobs: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a GPU job in Training, as SageMaker describes it
    jobs.jobs["job-1"] = training()
    # When its Training event arrives
    (decision,) = idle_lifecycle.react(training(), TRIGGER)
    # Then: re-read (the event's tags, no ListTags), create, then reset to OK; one record, the create code
    assert calls.log == ["get-job job-1 (event tags)", "put gov-guard-job-1", "reset gov-guard-job-1"]
    assert decision.code == "idle.alarm.create"
    assert [(r.code, r.outcome.value) for r in audit.records] == [("idle.alarm.create", "done")]
    # and the lifecycle accepted a policy document up to 10 minutes old
    assert policies.asked == [LIFECYCLE_POLICY_MAX_AGE_SECONDS]


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
