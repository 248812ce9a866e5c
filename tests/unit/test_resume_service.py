"""Auto-resume's use case with in-memory fakes of its ports: evidence read at failure only, what cannot be
read is said and never turns into a clone, the diagnosis reaches the audit record and the owner."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.clone import CreateOutcome, InvalidCloneRequest
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import CheckpointProgress, FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.service.resume import AutoResumeReaction, SpotFallbackReaction
from smgov.explain import FixedPolicy
from smgov.offline import OfflineJobs, RecordingLauncher, RecordingNotifier
from tests.resume_builders import T0, TAGS, as_job, failed_description, shape, spot_description

NOW = T0 + timedelta(days=3)
ALGORITHM_ERROR = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
TRIGGER = Trigger(kind="event", event_id="e-1")


class FakeLogs:
    def __init__(self, answer: FailureEvidence | Exception) -> None:
        self.answer = answer
        self.calls: list[tuple[str, int, int]] = []

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        self.calls.append((job_name, lines, hosts))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class FakeCheckpoints:
    def __init__(self, answer: CheckpointProgress | Exception) -> None:
        self.answer = answer
        self.calls: list[tuple[str, datetime]] = []

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        self.calls.append((s3_uri, since))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def gpu_fault() -> FailureEvidence:
    hosts = (
        HostLog("algo-2", "llm-sft-1/algo-2-1700000000", (LogLine("step 9"), LogLine(ECC))),
        HostLog("algo-1", "llm-sft-1/algo-1-1700000000", (LogLine("step 9"),)),
    )
    return FailureEvidence(hosts=hosts, logs_read=True, hosts_total=2)


class World:
    def __init__(
        self,
        description: dict[str, Any],
        logs: FakeLogs | None = None,
        checkpoints: FakeCheckpoints | None = None,
        policy: Policy | None = None,
        launcher: RecordingLauncher | None = None,
    ) -> None:
        self.job = as_job(description)
        self.jobs = OfflineJobs(self.job, description)
        self.launcher = launcher or RecordingLauncher()
        self.notifier = RecordingNotifier()
        self.audit = MemoryAuditSink()
        parts = (self.jobs, self.launcher, self.notifier, FixedPolicy(policy or Policy()), self.audit)
        common: dict[str, Any] = {
            "clock": lambda: NOW,
            "shape": shape,
            "role_patterns": ("*SageMaker*",),
            "metrics": MemoryBusinessMetrics(),
        }
        self.resume = AutoResumeReaction(*parts, logs=logs, checkpoints=checkpoints, **common)
        self.spot = SpotFallbackReaction(*parts, **common)


def enforce() -> Policy:
    return Policy.model_validate({"mode": "enforce"})


def test_a_gpu_fault_in_the_logs_resumes_and_the_evidence_reaches_audit_and_owner() -> None:
    # Given a job failed as AlgorithmError whose algo-2 log shows an ECC error
    logs = FakeLogs(gpu_fault())
    world = World(failed_description(reason=ALGORITHM_ERROR), logs, policy=enforce())
    # When auto-resume reacts
    (decision,) = world.resume.react(world.job, TRIGGER)
    # Then the logs were read once, 200 lines of at most 8 hosts, and the clone was created
    assert logs.calls == [("llm-sft-1", 200, 8)]
    assert decision.code == "resume.clone.transient"
    assert [r["TrainingJobName"] for r in world.launcher.requests] == ["llm-sft-1-r1"]
    # and the audit record and the owner's message carry the class, the host and the line
    (record,) = world.audit.records
    assert record.evidence["diagnosis"]["host"] == "algo-2"
    assert record.evidence["diagnosis"]["lines"][0]["line"] == ECC
    (message,) = world.notifier.messages
    assert message.diagnosis is not None and message.diagnosis["class"] == "hardware"
    assert message.diagnosis["lines"][0]["host"] == "algo-2"


def test_unreadable_logs_decide_from_the_failure_reason_alone_and_say_so() -> None:
    # Given logs that cannot be read and an AlgorithmError (which alone names no cause)
    logs = FakeLogs(AdapterError("GetLogEvents throttled"))
    world = World(failed_description(reason=ALGORITHM_ERROR), logs, policy=enforce())
    (decision,) = world.resume.react(world.job, TRIGGER)
    # Then nothing is cloned, and the record says why
    assert decision.code == "resume.skip.unknown" and world.launcher.requests == []
    diagnosis = decision.evidence["diagnosis"]
    assert diagnosis["basis"] == "failure-reason"
    assert any("throttled" in note for note in diagnosis["notes"])


def test_unreadable_logs_still_resume_what_the_failure_reason_proves() -> None:
    logs = FakeLogs(AdapterError("AccessDenied"))
    world = World(failed_description(), logs, policy=enforce())  # InternalServerError
    (decision,) = world.resume.react(world.job, TRIGGER)
    assert (
        decision.code == "resume.clone.transient" and decision.evidence["diagnosis"]["basis"] == "failure-reason"
    )


def test_a_job_that_did_not_fail_reads_no_evidence() -> None:
    logs, checkpoints = FakeLogs(gpu_fault()), FakeCheckpoints(CheckpointProgress(checked=True, written=1))
    stopped = failed_description(TrainingJobStatus="Stopped", SecondaryStatus="Stopped", FailureReason=None)
    world = World(stopped, logs, checkpoints, policy=enforce())
    (decision,) = world.resume.react(world.job, TRIGGER)
    assert decision.code == "resume.skip.not-failed"
    assert logs.calls == [] and checkpoints.calls == []
    # and the Spot reaction reads none either
    spot_world = World(spot_description(), logs, checkpoints, policy=enforce())
    spot_world.spot.react(TrainingJob.model_validate({**spot_description(), "Tags": TAGS}), TRIGGER)
    assert logs.calls == [] and checkpoints.calls == []


def test_checkpoint_progress_is_checked_from_the_attempts_start() -> None:
    description = failed_description(reason=ALGORITHM_ERROR)
    checkpoints = FakeCheckpoints(CheckpointProgress(checked=True, written=0, total=3))
    world = World(description, FakeLogs(gpu_fault()), checkpoints, policy=enforce())
    (decision,) = world.resume.react(world.job, TRIGGER)
    assert checkpoints.calls == [("s3://bucket/checkpoints/llm-sft-1/", description["TrainingStartTime"])]
    assert decision.code == "resume.skip.no-checkpoint-progress" and world.launcher.requests == []


def test_a_checkpoint_listing_that_fails_never_clones() -> None:
    checkpoints = FakeCheckpoints(AdapterError("ListObjectsV2 denied"))
    world = World(failed_description(reason=ALGORITHM_ERROR), FakeLogs(gpu_fault()), checkpoints, policy=enforce())
    (decision,) = world.resume.react(world.job, TRIGGER)
    assert decision.code == "resume.skip.checkpoint-unreadable" and world.launcher.requests == []
    assert "denied" in decision.evidence["checkpoint_note"]


def test_without_readers_the_deployment_decides_on_the_failure_reason_and_checkpoint_config() -> None:
    world = World(failed_description(), policy=enforce())
    (decision,) = world.resume.react(world.job, TRIGGER)
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["checkpoint_progress"] == "not checked"
    assert decision.evidence["diagnosis"]["notes"][0] == "this deployment does not read training logs"


class RefusingLauncher(RecordingLauncher):
    """SageMaker refuses the request as invalid (a ValidationException: the same request fails again)."""

    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome:
        self.requests.append(request)
        raise InvalidCloneRequest(
            f"CreateTrainingJob {request['TrainingJobName']} refused by SageMaker: ValidationException"
        )


def test_a_clone_request_sagemaker_refuses_is_recorded_not_clonable_and_not_raised_for_a_retry() -> None:
    # Given a resumable failure whose clone request SageMaker refuses as invalid
    world = World(
        failed_description(reason=ALGORITHM_ERROR),
        FakeLogs(gpu_fault()),
        policy=enforce(),
        launcher=RefusingLauncher(),
    )
    # When auto-resume reacts: no exception (a redelivery would be refused the same way, until the DLQ)
    (decision,) = world.resume.react(world.job, TRIGGER)
    # Then the decision is not-clonable, recorded once, and nobody is told of a resume
    assert decision.code == "resume.skip.not-clonable" and decision.action is Action.NONE
    assert [(r.code, r.outcome.value) for r in world.audit.records] == [("resume.skip.not-clonable", "no-action")]
    assert "ValidationException" in decision.evidence["refused"]
    assert world.notifier.messages == []


def test_a_spot_clone_sagemaker_refuses_leaves_the_spot_job_running() -> None:
    # Given a Spot job the count rule moves On-Demand, whose clone request SageMaker refuses
    world = World(spot_description(), policy=enforce(), launcher=RefusingLauncher())
    (decision,) = world.spot.react(TrainingJob.model_validate({**spot_description(), "Tags": TAGS}), TRIGGER)
    # Then it is not clonable, the stop is skipped (no clone takes over) and the job is not stopped
    assert decision.code == "spot.skip.not-clonable"
    assert [(r.code, r.outcome.value) for r in world.audit.records] == [
        ("spot.skip.not-clonable", "no-action"),
        ("spot.stop.count-rule", "skipped"),
    ]
    assert world.jobs.stopped == []
