"""Auto-resume's use case (service/resume.py) on in-memory ports: re-read -> read the evidence (logs, then the
checkpoint location) -> decide -> clone -> record -> count -> tell. Order and branches, asserted by decision
code: budget spent, owned by an orchestrator, no checkpoint progress, a lemon, SageMaker's own retries, a
backoff that defers the resume (the job tagged for the reconciler), a duplicate event, a clone name already
taken, a job gone, a launch that fails."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import BusinessMetric, MemoryBusinessMetrics
from sagemaker_governance.domain import failures
from sagemaker_governance.domain import resume as domain_resume
from sagemaker_governance.domain.clone import (
    TAG_ATTEMPT,
    TAG_FAILURE,
    TAG_REASON,
    TAG_RESUME_AFTER,
    TAG_RESUME_SETTLED,
    TAG_ROOT,
    TAG_SOURCE,
    TAG_STRIKES,
    CreateOutcome,
)
from sagemaker_governance.domain.errors import (
    AdapterError,
    DescriptionBehind,
    JobNotFound,
    LogsUnread,
    StopOutcome,
)
from sagemaker_governance.domain.failure_evidence import CheckpointProgress, FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.tolerance import read_declarations
from sagemaker_governance.service import resume as service_resume
from sagemaker_governance.service.idempotency import (
    CloneNotices,
    Duplicate,
    OnceAuditSink,
    OnceNotifier,
    deliver,
    job_delivery_key,
)
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.service.resume import AutoResumeReaction
from tests.resume_builders import T0, TAGS, failed_description, shape, transitions
from tests.service.conftest import Calls, FakeNotifier, FixedPolicies, MemoryLedger

NOW = T0 + timedelta(days=3)
ALGORITHM_ERROR = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
ISE = "InternalServerError: We encountered an internal error. Please try again."
EVENT = Trigger(kind="event", event_id="e-1")
EFA = (
    "{host}:288:390 [1] NCCL WARN NET/OFI Request 0x7f3a2c01e0c0 completed with error. RC: 21. Error: 4 "
    "(Interrupted system call). Completed length: 0"
)
REMOTE = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
NCCL_REASON = (
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "torch.distributed.DistBackendError: NCCL '
    'error: remote process exited or there was a network error, NCCL version 2.21.5 ncclRemoteError"'
)


class FakeSageMaker:
    """``JobsPort`` and ``LauncherPort`` over one set of jobs: a created clone exists from then on, so a
    second ``CreateTrainingJob`` of the same name meets "already exists" as SageMaker answers."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.descriptions: dict[str, dict[str, Any]] = {}
        self.tags: dict[str, dict[str, str]] = {}  # by ARN
        self.created: list[dict[str, Any]] = []
        self.launch_error: AdapterError | None = None

    def add(self, description: dict[str, Any], tags: dict[str, str]) -> TrainingJob:
        self.descriptions[description["TrainingJobName"]] = description
        self.tags[description["TrainingJobArn"]] = dict(tags)
        return TrainingJob.model_validate({**description, "Tags": tags})

    def describe(self, name: str) -> dict[str, Any]:
        self.calls(f"describe {name}")
        if name not in self.descriptions:
            raise JobNotFound(name)
        return dict(self.descriptions[name])

    def list_tags(self, arn: str) -> dict[str, str]:
        self.calls(f"list-tags {arn.rsplit('/', 1)[-1]}")
        return dict(self.tags.get(arn, {}))

    def get_job(self, name: str, tags: Any = None) -> TrainingJob:
        raise AssertionError("auto-resume re-reads with describe and list_tags")

    def stop(self, name: str) -> StopOutcome:
        self.calls(f"stop {name}")
        return StopOutcome.STOPPED

    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome:
        name = request["TrainingJobName"]
        self.calls(f"create {name}")
        if self.launch_error is not None:
            raise self.launch_error
        if name in self.descriptions:
            return CreateOutcome.ALREADY_EXISTS
        self.created.append(request)
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"
        self.descriptions[name] = {
            "TrainingJobName": name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "InProgress",
        }
        self.tags[arn] = {t["Key"]: t["Value"] for t in request.get("Tags", [])}
        return CreateOutcome.CREATED


class FakeLogs:
    def __init__(self, calls: Calls, evidence: FailureEvidence) -> None:
        self.calls = calls
        self.evidence = evidence

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        self.calls(f"logs {job_name}")
        return self.evidence


class ClusterLogs:
    """``FailureLogsPort`` over many hosts, read as the adapter reads them when DescribeLogStreams'
    ``lastEventTimestamp`` lags or is absent ("eventual consistency", its API reference): in name order
    (algo-1, algo-10, algo-11, ...), at most ``hosts`` of them."""

    def __init__(self, calls: Calls, tails: dict[str, tuple[LogLine, ...]]) -> None:
        self.calls = calls
        self.by_host = tails
        self.asked: list[int] = []
        self.lines: list[int] = []  # the lines asked of each host, per read
        # the reads (by number, the first 0) whose DescribeLogStreams fails, and the hosts whose GetLogEvents
        # fails in the reads from ``hosts_failing_from`` on, answered as the adapter answers them
        self.failing_reads: frozenset[int] = frozenset()
        self.failing_hosts: frozenset[str] = frozenset()
        self.hosts_failing_from = 0

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        self.calls(f"logs {job_name}")
        number = len(self.asked)
        self.asked.append(hosts)
        self.lines.append(lines)
        if number in self.failing_reads:
            return FailureEvidence.unread("DescribeLogStreams failed (ThrottlingException)")
        order = sorted(self.by_host)
        failing = self.failing_hosts if number >= self.hosts_failing_from else frozenset()
        read = tuple(
            HostLog(h, f"{job_name}/{h}-1700000000", self.by_host[h][-lines:])
            for h in order[:hosts]
            if h not in failing
        )
        notes = tuple(f"{h}: GetLogEvents failed (ThrottlingException)" for h in order[:hosts] if h in failing)
        return FailureEvidence(
            hosts=read,
            logs_read=bool(read),
            notes=notes,
            hosts_total=len(order),
            hosts_cut=max(len(order) - hosts, 0),
        )

    def lines_read(self) -> int:
        """The log lines the reads asked for in all (what the service would fetch and classify)."""
        return sum(
            lines * min(hosts, len(self.by_host)) for lines, hosts in zip(self.lines, self.asked, strict=True)
        )


def efa_fault_on(
    host: str,
    hosts: int,
    *,
    history: int = 0,
    aftermath: int = 0,
    cause: str | None = None,
    end: datetime = NOW - timedelta(hours=1),
) -> dict[str, tuple[LogLine, ...]]:
    """``host``'s EFA transport fails 20 minutes before the job ends at ``end`` (its log ends ``aftermath`` lines
    of the launcher's report later); every other rank trains on and reports its peer's exit (``ncclRemoteError``)
    when NCCL gives up. ``history``: lines of training progress before each host's last lines; ``cause``: the
    line ``host`` writes instead of its EFA error (an ECC error, say)."""
    fault = end - timedelta(minutes=20)
    tails: dict[str, tuple[LogLine, ...]] = {}
    for n in range(1, hosts + 1):
        name = f"algo-{n}"
        at = fault if name == host else end
        progress = tuple(
            LogLine(f"step {i} loss=2.{i:04d}", at - timedelta(minutes=21, seconds=history - i))
            for i in range(history)
        )
        if name == host:
            report = tuple(LogLine(f"torchrun: {i}", fault) for i in range(aftermath))
            tails[name] = (
                *progress,
                LogLine("step 900", fault - timedelta(minutes=1)),
                LogLine(cause or EFA.format(host=host), fault),
                *report,
            )
        else:
            tails[name] = (*progress, LogLine("step 920", end - timedelta(minutes=1)), LogLine(REMOTE, end))
    return tails


class FakeCheckpoints:
    def __init__(self, calls: Calls, progress: CheckpointProgress) -> None:
        self.calls = calls
        self.answer = progress

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        self.calls(f"list-checkpoints {s3_uri}")
        return self.answer


class FakeMarks:
    """``EvaluationMarksPort``: tags written on jobs (``AddTags``)."""

    def __init__(self, calls: Calls, sagemaker: FakeSageMaker) -> None:
        self.calls = calls
        self.sagemaker = sagemaker
        self.error: AdapterError | None = None

    def mark(self, arn: str, key: str, value: str) -> None:
        self.calls(f"tag {arn.rsplit('/', 1)[-1]} {key}={value}")
        if self.error is not None:
            raise self.error
        self.sagemaker.tags.setdefault(arn, {})[key] = value


def ecc_on(host: str, job_name: str = "llm-sft-1") -> FailureEvidence:
    """An ECC error in ``host``'s log tail, the other host healthy until the end."""
    other = "algo-1" if host != "algo-1" else "algo-2"
    return FailureEvidence(
        hosts=(
            HostLog(host, f"{job_name}/{host}-1700000000", (LogLine("step 900"), LogLine(ECC))),
            HostLog(other, f"{job_name}/{other}-1700000000", (LogLine("step 900"),)),
        ),
        logs_read=True,
        hosts_total=2,
    )


class World:
    """The use case wired to the fakes; ``policy``: an enforce-mode policy unless given."""

    def __init__(
        self,
        *,
        evidence: FailureEvidence | None = None,
        progress: CheckpointProgress | None = None,
        policy: dict[str, Any] | None = None,
        once_per_delivery: bool = False,
        notifier: type[FakeNotifier] = FakeNotifier,
        cluster: dict[str, tuple[LogLine, ...]] | None = None,
    ) -> None:
        self.calls = Calls()
        self.now = NOW
        self.sagemaker = FakeSageMaker(self.calls)
        self.notifier = notifier(self.calls)
        self.audit = MemoryAuditSink()
        self.ledger = MemoryLedger(self.calls)
        self.metrics = MemoryBusinessMetrics()
        self.logs: FakeLogs | ClusterLogs = FakeLogs(self.calls, evidence or ecc_on("algo-2"))
        if cluster is not None:
            self.logs = ClusterLogs(self.calls, cluster)
        written = CheckpointProgress(checked=True, written=3, total=5)
        self.checkpoints = FakeCheckpoints(self.calls, progress or written)
        self.marks = FakeMarks(self.calls, self.sagemaker)
        # once_per_delivery: wired as the composition root wires them (each record and notification once)
        self.reaction = AutoResumeReaction(
            self.sagemaker,
            self.sagemaker,
            OnceNotifier(self.notifier) if once_per_delivery else self.notifier,
            FixedPolicies(Policy.model_validate(policy or {"mode": "enforce"})),
            OnceAuditSink(self.audit) if once_per_delivery else self.audit,
            clock=lambda: self.now,
            shape=shape,
            role_patterns=("*SageMaker*",),
            metrics=self.metrics,
            logs=self.logs,
            checkpoints=self.checkpoints,
            marks=self.marks,
            notices=CloneNotices(self.ledger, lambda: NOW) if once_per_delivery else None,
        )

    def failed(self, name: str = "llm-sft-1", tags: dict[str, str] | None = None, **overrides: Any) -> TrainingJob:
        description = failed_description(name, reason=ALGORITHM_ERROR, **overrides)
        return self.sagemaker.add(description, {**TAGS, **(tags or {})})

    def codes(self) -> list[tuple[str, str]]:
        return [(r.code or "", r.outcome.value) for r in self.audit.records]

    def deliver(self, job: TrainingJob, owner: str = "sqs-message-1") -> Any:
        """React as the job-events handler does: under the delivery ledger's claim of the state change."""
        return deliver(
            self.ledger,
            job_delivery_key(job),
            lambda: self.reaction.react(job, EVENT),
            owner=owner,
            now=NOW,
            hold_seconds=0,
        )


def clone_of(source: str, attempt: int, *, failure: str | None = None, strikes: int = 0) -> dict[str, str]:
    """The lineage tags governance puts on the ``attempt``-th clone of ``source``'s lineage."""
    tags = {TAG_ROOT: "llm-sft-1", TAG_SOURCE: source, TAG_ATTEMPT: str(attempt)}
    if failure:
        tags[TAG_FAILURE] = failure
    if strikes:
        tags[TAG_STRIKES] = str(strikes)
    return tags


# ---- the main path -----------------------------------------------------------------------------------


def test_a_hardware_fault_is_re_read_diagnosed_checked_cloned_recorded_and_told_in_that_order() -> None:
    # Given a job failed with an ECC error on algo-2 that wrote checkpoints during the attempt
    world = World()
    job = world.failed()
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the job is re-read, its evidence read (logs, then the checkpoint location), the clone created,
    # and only then the owner told
    assert world.calls.log == [
        "describe llm-sft-1",
        "list-tags llm-sft-1",
        "logs llm-sft-1",
        "list-checkpoints s3://bucket/checkpoints/llm-sft-1/",
        "create llm-sft-1-r1",
        "notify resume llm-sft-1",
    ]
    assert decision.code == "resume.clone.transient"
    assert world.codes() == [("resume.clone.transient", "done")]
    # and the clone carries the fault it was made for (the lemon rule's key), the lineage's first attempt
    (request,) = world.sagemaker.created
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert tags[TAG_FAILURE] == "hardware@algo-2" and tags[TAG_ATTEMPT] == "1"
    assert TAG_STRIKES not in tags
    assert len(world.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1


def test_the_clone_keeps_the_quiet_phases_its_owner_declared_on_the_job() -> None:
    # Given a failed job whose owner declared a 90-minute idle and a 120-minute progress window
    world = World()
    job = world.failed(tags={"smgov:idle-minutes": "90", "smgov:progress-minutes": "120"})
    # When auto-resume clones it
    (decision,) = world.reaction.react(job, EVENT)
    # Then the clone carries both, so its guards apply the owner's windows and not the team's
    assert decision.code == "resume.clone.transient"
    (request,) = world.sagemaker.created
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    declared = {d.tag: d.minutes for d in read_declarations(tags, 240)}
    assert declared == {"smgov:idle-minutes": 90, "smgov:progress-minutes": 120}


def test_audit_mode_records_what_it_would_do_and_creates_nothing() -> None:
    world = World(policy={"mode": "audit"})
    (decision,) = world.reaction.react(world.failed(), EVENT)
    assert decision.code == "resume.clone.transient"
    assert world.codes() == [("resume.clone.transient", "audit-only")]
    assert world.sagemaker.created == [] and not any(c.startswith("create") for c in world.calls.log)


# ---- duplicates and names already taken ----------------------------------------------------------------


def test_a_duplicate_event_finds_its_own_clone_and_does_nothing_twice() -> None:
    # Given the Failed event was handled once (the clone exists)
    world = World()
    job = world.failed()
    world.reaction.react(job, EVENT)
    world.calls.log.clear()
    # When the same event arrives again
    (decision,) = world.reaction.react(job, Trigger(kind="event", event_id="e-1"))
    # Then the create meets "already exists", the existing clone is checked to be this job's, and it counts
    # as done: one clone, one notification, one metric
    assert world.calls.log[-3:] == ["create llm-sft-1-r1", "describe llm-sft-1-r1", "list-tags llm-sft-1-r1"]
    assert decision.code == "resume.clone.transient"
    assert world.codes() == [("resume.clone.transient", "done"), ("resume.clone.transient", "already-done")]
    assert len(world.sagemaker.created) == 1
    assert len(world.notifier.sent) == 1 and len(world.metrics.emitted) == 1


class ThrottledOnce(FakeNotifier):
    """SNS refuses the first Publish (throttled after botocore's retries), then delivers."""

    def __init__(self, calls: Calls) -> None:
        super().__init__(calls)
        self.refused = 0

    def publish(self, message: Notification) -> str | None:
        if not self.refused:
            self.refused += 1
            raise AdapterError("SNS Publish failed: ThrottlingException")
        return super().publish(message)


def test_a_retry_after_the_notification_failed_tells_the_owner_once_and_counts_the_clone_once() -> None:
    # Given a delivery whose attempt created the clone and then failed to tell the owner (nor counted it:
    # told first, then counted)
    world = World(once_per_delivery=True, notifier=ThrottledOnce)
    job = world.failed()
    with pytest.raises(AdapterError):
        world.deliver(job)  # the claim is released with what that attempt completed
    assert world.notifier.sent == [] and len(world.metrics.of(BusinessMetric.JOBS_RESUMED)) == 0
    # When the delivery is retried (its create meets "already exists", the clone is this job's)
    (decision,) = world.deliver(job)
    # Then the owner is told now, once; the clone is counted once in all and recorded once
    assert decision.code == "resume.clone.transient"
    (message,) = world.notifier.sent
    assert message.related_job == "llm-sft-1-r1" and message.items[0].code == "resume.clone.transient"
    assert len(world.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1
    assert len(world.sagemaker.created) == 1
    assert world.codes() == [("resume.clone.transient", "done")]
    # and a duplicate of the completed delivery is refused at its claim: nothing is told or counted again
    assert isinstance(world.deliver(job, owner="sqs-message-2"), Duplicate)
    assert len(world.notifier.sent) == 1 and len(world.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1


def test_a_clone_name_held_by_another_job_is_a_failure_not_a_resume() -> None:
    # Given a job named like the clone exists, made by someone else (no lineage tag of this source)
    world = World()
    job = world.failed()
    world.sagemaker.add(failed_description("llm-sft-1-r1"), dict(TAGS))
    (decision,) = world.reaction.react(job, EVENT)
    # Then nothing is claimed: the record says failed, nobody is told it was resumed
    assert decision.code == "resume.clone.transient"
    assert world.codes() == [("resume.clone.transient", "failed")]
    assert world.notifier.sent == [] and world.metrics.emitted == []


def test_a_clone_that_exists_but_cannot_be_read_yet_is_retried_not_recorded_failed() -> None:
    # Given another decider (a duplicate delivery, the reconciler) created this job's clone a moment ago: the
    # create meets "already exists", but DescribeTrainingJob does not find the new job yet (a read right after
    # a create may lag it)
    world = World()
    job = world.failed()
    original = world.sagemaker.create_training_job

    def exists_unreadable(request: dict[str, Any]) -> CreateOutcome:
        world.calls(f"create {request['TrainingJobName']}")
        return CreateOutcome.ALREADY_EXISTS

    world.sagemaker.create_training_job = exists_unreadable  # type: ignore[method-assign]
    # When the resume is decided
    with pytest.raises(DescriptionBehind):
        world.reaction.react(job, EVENT)
    # Then nothing is recorded (not "failed: the name is another job's") and nobody is told: the delivery is
    # retried in a minute
    assert world.codes() == [] and world.notifier.sent == []
    # and its retry, once the clone can be read (made from this job), finds it done (its maker tells the owner)
    world.sagemaker.create_training_job = original  # type: ignore[method-assign]
    clone = "arn:aws:sagemaker:us-east-1:123456789012:training-job/llm-sft-1-r1"
    made = {"TrainingJobName": "llm-sft-1-r1", "TrainingJobArn": clone, "TrainingJobStatus": "InProgress"}
    world.sagemaker.add(made, {**TAGS, **clone_of("llm-sft-1", 1)})
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.clone.transient"
    assert world.codes() == [("resume.clone.transient", "already-done")]
    assert world.notifier.sent == []


def test_a_launch_that_fails_is_recorded_and_raised_for_the_retry() -> None:
    world = World()
    job = world.failed()
    world.sagemaker.launch_error = AdapterError("CreateTrainingJob throttled")
    with pytest.raises(AdapterError):
        world.reaction.react(job, EVENT)
    assert world.codes() == [("resume.clone.transient", "failed")]
    assert world.notifier.sent == []


def test_a_job_gone_when_re_read_reads_no_evidence() -> None:
    world = World()
    job = world.failed()
    del world.sagemaker.descriptions["llm-sft-1"]
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.skip.job-gone"
    assert world.calls.log == ["describe llm-sft-1"]
    assert world.codes() == [("resume.skip.job-gone", "skipped")]


# ---- the branches that do not clone --------------------------------------------------------------------


def test_a_spent_budget_creates_nothing() -> None:
    # Given the lineage's second clone failed (budget: 2 clones)
    world = World()
    job = world.failed("llm-sft-1-r2", tags=clone_of("llm-sft-1-r1", 2))
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.skip.budget-spent"
    assert decision.evidence["attempt"] == 3 and decision.evidence["max_attempts"] == 2
    assert not any(c.startswith("create") for c in world.calls.log)
    assert world.codes() == [("resume.skip.budget-spent", "no-action")] and world.notifier.sent == []


def test_a_job_an_orchestrator_owns_is_never_cloned() -> None:
    world = World()
    tuning = "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/hpo-1"
    job = world.failed(TuningJobArn=tuning)
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.skip.orchestrated"
    assert decision.evidence["orchestrator_id"] == tuning
    assert not any(c.startswith("create") for c in world.calls.log)


def test_an_attempt_that_wrote_no_checkpoint_is_not_cloned() -> None:
    world = World(progress=CheckpointProgress(checked=True, written=0, total=4))
    (decision,) = world.reaction.react(world.failed(), EVENT)
    assert decision.code == "resume.skip.no-checkpoint-progress"
    assert world.calls.log[-1] == "list-checkpoints s3://bucket/checkpoints/llm-sft-1/"
    assert world.codes() == [("resume.skip.no-checkpoint-progress", "no-action")]


def oom_on_algo_1() -> FailureEvidence:
    """Every host read (one), and it shows the user's code: CUDA out of memory."""
    return FailureEvidence(
        hosts=(HostLog("algo-1", "llm-sft-1/algo-1-1", (LogLine("torch.OutOfMemoryError: CUDA out of memory"),)),),
        logs_read=True,
    )


def test_a_code_bug_reads_the_logs_but_not_the_checkpoint_decision() -> None:
    world = World(evidence=oom_on_algo_1())
    (decision,) = world.reaction.react(world.failed(), EVENT)
    assert decision.code == "resume.skip.user-code"
    assert not any(c.startswith("create") for c in world.calls.log)


def test_a_code_bug_on_one_host_is_not_cloned_for_the_ncclremoteerror_of_its_peers() -> None:
    # Given algo-1's code raised a KeyError and algo-2 then reported ncclRemoteError (its peer exited)
    at = NOW - timedelta(hours=1)
    peer_crash = FailureEvidence(
        hosts=(
            HostLog("algo-1", "llm-sft-1/algo-1-1", (LogLine("step 900", at), LogLine("KeyError: 'label'", at))),
            HostLog(
                "algo-2",
                "llm-sft-1/algo-2-1",
                (
                    LogLine("step 900", at),
                    LogLine(
                        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
                        "exiting prematurely.",
                        at + timedelta(seconds=2),
                    ),
                ),
            ),
        ),
        logs_read=True,
        hosts_total=2,
    )
    world = World(evidence=peer_crash)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(world.failed(), EVENT)
    # Then it is the user's code on algo-1: nothing created, nobody told it was resumed
    assert decision.code == "resume.skip.user-code"
    assert decision.evidence["diagnosis"]["host"] == "algo-1"
    assert world.sagemaker.created == [] and world.notifier.sent == []
    assert world.codes() == [("resume.skip.user-code", "no-action")]


def test_a_peer_s_fault_outside_the_hosts_read_first_is_found_by_reading_them_all() -> None:
    # Given a 12-host job whose algo-7 lost its EFA transport 20 minutes before the end, the 11 others then
    # reporting its exit (ncclRemoteError, quoted in the FailureReason), and stream timestamps that lag, so
    # the 8 hosts read first (algo-1, algo-10, algo-11, algo-12, algo-2 .. algo-5) do not include algo-7
    world = World(cluster=efa_fault_on("algo-7", 12))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the consequences alone send it back for every host, and the interconnect fault on algo-7 is resumed
    assert decision.code == "resume.clone.transient"
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8, 64]
    assert decision.evidence["diagnosis"]["class"] == "interconnect"
    assert decision.evidence["diagnosis"]["host"] == "algo-7"
    (request,) = world.sagemaker.created
    assert {t["Key"]: t["Value"] for t in request["Tags"]}[TAG_FAILURE] == "interconnect@algo-7"


def test_a_cause_among_the_hosts_read_first_reads_no_more() -> None:
    # Given a 12-host job whose GPU on algo-2, among the 8 hosts read first, had an uncorrectable ECC error
    world = World(cluster=efa_fault_on("algo-2", 12, cause=ECC))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the logs are read once: no peer's exit explains a GPU's ECC error, the other 4 hosts cost nothing
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["class"] == "hardware"
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8]


def test_a_peer_s_report_a_silent_peer_corroborates_reads_the_others_before_a_clone() -> None:
    # Given a 12-host job that failed 2 hours ago with a bare AlgorithmError: algo-9 raised a KeyError and exited,
    # algo-2 fell silent at that moment (its rank hung in the collective), and the others reported the exit
    # (ncclRemoteError) 20 minutes later; the 8 hosts read first (name order) hold algo-2's silence, not algo-9
    end = NOW - timedelta(hours=2)
    fault = end - timedelta(minutes=20)
    tails: dict[str, tuple[LogLine, ...]] = {
        f"algo-{n}": (LogLine("step 920", end - timedelta(minutes=1)), LogLine(REMOTE, end)) for n in range(1, 13)
    }
    tails["algo-2"] = (LogLine("step 900", fault - timedelta(minutes=1)),)
    tails["algo-9"] = (
        LogLine("step 900", fault - timedelta(minutes=1)),
        LogLine("Traceback (most recent call last):", fault - timedelta(seconds=10)),
        LogLine("KeyError: 'label'", fault - timedelta(seconds=10)),
    )
    world = World(cluster=tails)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(world.failed(**recent_failure(120)), EVENT)
    # Then the reports that algo-2's silence corroborates (interconnect) are no verdict while hosts are unread:
    # every host is read, and algo-9's KeyError makes them the report of its exit: the user's code, nothing made
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8, 64]
    assert decision.code == "resume.skip.user-code"
    assert decision.evidence["diagnosis"]["host"] == "algo-9"
    assert world.sagemaker.created == []


def test_a_failure_the_hosts_read_first_do_not_explain_reads_the_others() -> None:
    # Given a 12-host job that failed 30 minutes ago with a bare AlgorithmError, whose GPU on algo-9 had an
    # uncorrectable ECC error while every other host trained on, silent about it; lastEventTimestamp not set yet,
    # so the 8 hosts read first (in name order: algo-1, algo-10 .. algo-12, algo-2 .. algo-5) leave algo-9 out
    end = NOW - timedelta(minutes=30)
    tails: dict[str, tuple[LogLine, ...]] = {
        f"algo-{n}": (LogLine("step 900", end - timedelta(minutes=1)),) for n in range(1, 13)
    }
    tails["algo-9"] = (LogLine("step 899", end - timedelta(minutes=2)), LogLine(ECC, end - timedelta(minutes=1)))
    world = World(cluster=tails)
    job = world.failed(**recent_failure(30))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the hosts read first, holding no cause, send it back for every host, and the ECC fault is resumed
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8, 64]
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["class"] == "hardware"
    assert decision.evidence["diagnosis"]["host"] == "algo-9"


def test_an_interconnect_cause_among_the_hosts_read_first_still_reads_the_others() -> None:
    # Given a 12-host job whose EFA fault is on algo-2, among the 8 hosts read first, the 4 others reporting its exit
    world = World(cluster=efa_fault_on("algo-2", 12))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then every host is read (an EFA error is also a rank's report of a peer's exit), and with no code bug
    # anywhere the interconnect fault on algo-2 is resumed, every host read
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8, 64]
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["host"] == "algo-2"
    assert "hosts_unread" not in decision.evidence["diagnosis"]


def code_bug_behind_an_interconnect_fault(end: datetime) -> dict[str, tuple[LogLine, ...]]:
    """A 12-host job that ended at ``end``: algo-1's EFA completion error, and 10 s before it a KeyError on algo-9,
    which the 8 hosts read first (algo-1, algo-10 .. algo-12, algo-2 .. algo-5, in name order) leave out; the
    others report the exit (``ncclRemoteError``)."""
    tails = efa_fault_on("algo-1", 12, end=end)
    fault = end - timedelta(minutes=20)
    tails["algo-9"] = (
        LogLine("step 900", fault - timedelta(minutes=1)),
        LogLine("Traceback (most recent call last):", fault - timedelta(seconds=10)),
        LogLine("KeyError: 'label'", fault - timedelta(seconds=10)),
    )
    return tails


def test_an_interconnect_cause_read_first_is_explained_by_a_code_bug_on_a_host_read_after() -> None:
    # Given a job that failed 30 minutes ago whose algo-1 EFA error follows algo-9's KeyError, algo-9 not read first
    world = World(cluster=code_bug_behind_an_interconnect_fault(NOW - timedelta(minutes=30)))
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(30))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then every host is read, within the first read's budget shared (1,600 / 12 lines), and algo-9's KeyError
    # makes algo-1's EFA error the report of its exit: the user's code, nothing created
    assert isinstance(world.logs, ClusterLogs)
    assert world.logs.asked == [8, 64] and world.logs.lines == [200, 133]
    assert decision.code == "resume.skip.user-code"
    assert decision.evidence["diagnosis"]["host"] == "algo-9"
    assert "hosts_unread" not in decision.evidence["diagnosis"]
    assert world.sagemaker.created == [] and world.notifier.sent == []


@pytest.mark.parametrize(
    ("failing", "unread"),
    [
        ("read", 4),  # the second read's DescribeLogStreams fails: the 4 hosts not read first stay unread
        ("host", 1),  # algo-9's GetLogEvents fails in the second read
    ],
)
def test_an_interconnect_cause_whose_other_hosts_cannot_be_read_is_not_cloned_and_is_decided_again(
    failing: str, unread: int
) -> None:
    # Given the same job, deferred for its last lines (tagged for the reconciler), decided when due while the read
    # of the hosts not read first fails
    world = World(cluster=code_bug_behind_an_interconnect_fault(NOW - timedelta(minutes=30)))
    job = world.failed(tags={TAG_RESUME_AFTER: at_due(-25)}, FailureReason=NCCL_REASON, **recent_failure(30))
    logs = world.logs
    assert isinstance(logs, ClusterLogs)
    if failing == "read":
        logs.failing_reads = frozenset({1})
    else:
        logs.failing_hosts, logs.hosts_failing_from = frozenset({"algo-9"}), 1
    # When the reconciler hands it to auto-resume
    (decision,) = world.reaction.react(job, RUN)
    # Then the interconnect fault read first is no confident verdict: insufficient evidence, the hosts unread
    # said, nothing created, and the job not settled
    assert logs.asked == [8, 64]
    assert decision.code == "resume.skip.insufficient-evidence"
    assert decision.evidence["diagnosis"]["class"] == "interconnect"
    assert decision.evidence["diagnosis"]["hosts_unread"] == unread
    assert world.sagemaker.created == [] and world.notifier.sent == []
    assert TAG_RESUME_SETTLED not in world.sagemaker.tags[job.arn or ""]
    # When the next run reads every host
    logs.failing_reads, logs.failing_hosts = frozenset(), frozenset()
    world.now = NOW + timedelta(minutes=10)
    (decision,) = world.reaction.react(job, RUN)
    # Then algo-9's KeyError decides it, for good
    assert decision.code == "resume.skip.user-code"
    assert world.sagemaker.tags[job.arn or ""][TAG_RESUME_SETTLED] == "resume.skip.user-code@llm-sft-1"


def test_a_peer_s_report_whose_other_hosts_cannot_be_read_is_insufficient_evidence() -> None:
    # Given a 12-host job whose algo-7 lost its EFA transport, the 8 hosts read first showing only the others'
    # ncclRemoteError, and the read of every host failing, decided 20 minutes after the failure (past the settle
    # period, within the reconciler's look-back)
    world = World(cluster=efa_fault_on("algo-7", 12))
    assert isinstance(world.logs, ClusterLogs)
    world.logs.failing_reads = frozenset({1})
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON, **recent_failure(20)), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then, as for an interconnect cause, the 4 hosts unread are said and nothing is cloned on a guess
    assert decision.code == "resume.skip.insufficient-evidence"
    assert decision.evidence["diagnosis"]["hosts_unread"] == 4
    assert world.sagemaker.created == []


def test_a_peer_s_failure_with_hosts_still_unread_is_insufficient_evidence_and_clones_nothing() -> None:
    # Given a 70-host job whose failing host (algo-9) sorts after the 64 hosts that can be read, so every log
    # read shows only its peers' ncclRemoteError
    world = World(cluster=efa_fault_on("algo-9", 70))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it reads as many hosts as it may and says the evidence is insufficient: no clone on a guess
    assert decision.code == "resume.skip.insufficient-evidence"
    assert isinstance(world.logs, ClusterLogs) and world.logs.asked == [8, 64]
    assert decision.evidence["diagnosis"]["hosts_unread"] == 6
    assert world.sagemaker.created == [] and world.notifier.sent == []


def test_reading_every_host_shares_the_first_read_s_budget_instead_of_multiplying_it() -> None:
    # Given a team reading the last 2,000 lines of 8 hosts (16,000 lines), and a 64-host job whose algo-7
    # lost its EFA transport, the 8 hosts read first showing only the others' ncclRemoteError
    world = World(
        policy={"mode": "enforce", "resume": {"log_lines": 2000}},
        cluster=efa_fault_on("algo-7", 64),
    )
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the second read asks every host for its share of the 16,000 lines (250 each), not 2,000 each,
    # and algo-7's fault is still found and resumed
    assert isinstance(world.logs, ClusterLogs)
    assert world.logs.asked == [8, 64] and world.logs.lines == [2000, 250]
    assert world.logs.lines_read() <= 2 * 8 * 2000
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["host"] == "algo-7"


def test_every_host_read_gets_at_least_its_last_hundred_lines_where_a_failed_process_s_cause_sits() -> None:
    # Given the default budget (200 lines of 8 hosts: 25 lines a host for 64 hosts), and a 64-host job whose
    # algo-7 wrote its EFA error 60 lines before its log ends (the launcher's report of its failed process)
    world = World(cluster=efa_fault_on("algo-7", 64, history=150, aftermath=60))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then each host is read 100 lines deep, not 25, so the cause itself is found (not only algo-7's silence)
    assert isinstance(world.logs, ClusterLogs) and world.logs.lines == [200, 100]
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["signature"] == "efa-transport-error"
    assert decision.evidence["diagnosis"]["host"] == "algo-7"


def test_the_hosts_read_first_keep_their_longer_tails_when_every_host_is_read() -> None:
    # Given a 12-host job whose algo-7 lost its EFA transport, every host's log holding 300 lines, the 8
    # hosts read first (200 lines each) showing only the others' ncclRemoteError
    world = World(cluster=efa_fault_on("algo-7", 12, history=300))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    failure, _ = world.reaction._read_failure_logs(job, Policy.model_validate({"mode": "enforce"}).resume)
    # When every host is read again (at the 100-line floor, 1,600 / 12 = 133 lines each)
    # Then the hosts read first keep their 200 lines, the others have 133, and all 12 are there
    lengths = {h.host: len(h.lines) for h in failure.hosts}
    assert isinstance(world.logs, ClusterLogs) and world.logs.lines == [200, 133]
    assert len(lengths) == 12 and failure.hosts_total == 12
    assert lengths["algo-1"] == 200 and lengths["algo-7"] == 133


@pytest.mark.parametrize(
    ("cause", "reads"),
    [
        (ECC, 1),  # a hardware cause among the first hosts: decided on the first read
        (None, 2),  # an EFA error among the first hosts: every host read, then classified once more
    ],
)
def test_the_logs_of_a_job_of_more_hosts_than_are_read_first_are_classified_once_per_read(
    monkeypatch: pytest.MonkeyPatch, cause: str | None, reads: int
) -> None:
    # Given a 12-host job whose fault is on algo-2, among the 8 hosts read first, and a count of the
    # classifications made (each a signature search over every line read)
    made: list[int] = []

    def counted(reason: str | None, evidence: FailureEvidence, taxonomy: Any) -> Any:
        made.append(sum(len(h.lines) for h in evidence.hosts))
        return failures.classify(reason, evidence, taxonomy)

    monkeypatch.setattr(service_resume, "classify", counted)
    monkeypatch.setattr(domain_resume, "classify", counted)
    world = World(cluster=efa_fault_on("algo-2", 12, cause=cause))
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON), TAGS)
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the classification of the last read is the one the decision uses: the lines of each read are
    # classified once, not once to look and once to decide
    assert decision.code == "resume.clone.transient"
    assert isinstance(world.logs, ClusterLogs) and len(world.logs.asked) == len(made) == reads


# ---- the lemon rule and SageMaker's own retries ----------------------------------------------------------


def test_a_fault_that_recurs_on_the_same_host_counts_double_and_ends_the_lineage() -> None:
    # Given the first clone, made for an ECC error on algo-2, fails with an ECC error on algo-2 again
    world = World(evidence=ecc_on("algo-2", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1, failure="hardware@algo-2"))
    (decision,) = world.reaction.react(job, EVENT)
    # Then the repeat costs one attempt more: 2 clones + 1 strike > the budget of 2, nothing created
    assert decision.code == "resume.skip.budget-spent"
    assert decision.evidence["repeated_fault"] == "hardware@algo-2"
    assert decision.evidence["repeat_faults"] == 1
    assert world.sagemaker.created == []


def test_the_same_fault_on_another_host_is_no_lemon() -> None:
    # Given the first clone fails with an ECC error on algo-1 (its source's was on algo-2)
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1, failure="hardware@algo-2"))
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is resumed as the second attempt, carrying the new fault and no strike
    assert decision.code == "resume.clone.transient"
    (request,) = world.sagemaker.created
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert request["TrainingJobName"] == "llm-sft-1-r2"
    assert tags[TAG_FAILURE] == "hardware@algo-1" and TAG_STRIKES not in tags


def test_a_strike_is_carried_down_the_lineage() -> None:
    # Given a budget of 4, the first clone's fault recurred on algo-2 (a strike) and it was resumed
    world = World(
        evidence=ecc_on("algo-2", "llm-sft-1-r1"), policy={"mode": "enforce", "resume": {"max_attempts": 4}}
    )
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1, failure="hardware@algo-2"))
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.clone.transient"
    (request,) = world.sagemaker.created
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert tags[TAG_STRIKES] == "1"


def copied_clone_tags() -> dict[str, str]:
    """The lineage tags of auto-resume's first clone of llm-sft-1, as a console Clone of it copies them."""
    return {**clone_of("llm-sft-1", 1, failure="hardware@algo-2", strikes=1), TAG_REASON: "failed-transient"}


def test_a_job_launched_with_a_clone_s_lineage_tags_is_judged_on_its_own_training() -> None:
    # Given a job launched by hand with the tags of llm-sft-1's first clone (its lineage among them), which failed
    # with an ECC fault after 20 minutes of training
    world = World(evidence=ecc_on("algo-2", "relaunch-7"))
    failed = recent_failure(30, trained=timedelta(minutes=20))
    job = world.failed("relaunch-7", tags=copied_clone_tags(), FailureReason=ECC_REASON, **failed)
    # When auto-resume decides it
    (decision,) = world.reaction.react(job, EVENT)
    # Then the copied lineage does not lend it the clone's qualification: too short, and no other job is read
    assert decision.code == "resume.skip.too-short"
    assert world.sagemaker.created == []
    assert "describe llm-sft-1" not in world.calls.log


def test_a_job_launched_with_a_clone_s_lineage_tags_is_resumed_in_a_lineage_of_its_own() -> None:
    # Given the same job, which trained 26 hours
    world = World(evidence=ecc_on("algo-2", "relaunch-7"))
    job = world.failed("relaunch-7", tags=copied_clone_tags(), FailureReason=ECC_REASON, **recent_failure(30))
    # When auto-resume decides it
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is resumed as the first attempt of its own lineage, not as the next one of llm-sft-1's, whose
    # fault (the same class on the same host) and extra strike are not charged to it
    assert decision.code == "resume.clone.transient"
    (request,) = world.sagemaker.created
    assert request["TrainingJobName"] == "relaunch-7-r1"
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert (tags[TAG_ROOT], tags[TAG_ATTEMPT], tags[TAG_SOURCE]) == ("relaunch-7", "1", "relaunch-7")
    assert TAG_STRIKES not in tags and "repeated_fault" not in decision.evidence


def test_a_job_an_earlier_deployment_resumed_under_its_copied_lineage_is_not_cloned_again() -> None:
    # Given relaunch-7, launched with llm-sft-1-r1's tags and failed after 26 h (ECC on algo-1), which the deployment
    # before lineage tags were dated to their job already resumed under them: llm-sft-1-r2 (smgov:resumed-from
    # relaunch-7) runs
    world = World(evidence=ecc_on("algo-1", "relaunch-7"), once_per_delivery=True)
    copied = {**clone_of("llm-sft-1", 1), TAG_REASON: "failed-transient"}
    job = world.failed("relaunch-7", tags=copied, FailureReason=ECC_REASON, **recent_failure(30))
    earlier = {**TAGS, **clone_of("relaunch-7", 2), TAG_REASON: "failed-transient"}
    world.sagemaker.add(failed_description("llm-sft-1-r2", TrainingJobStatus="InProgress"), earlier)
    # When the new code meets relaunch-7's Failed event again (a delivery retried across the deployment)
    (decision,) = world.reaction.react(job, EVENT)
    # Then llm-sft-1-r2 is its clone, met as "already exists": nothing more is created
    assert world.codes() == [("resume.clone.transient", "already-done")]
    assert world.sagemaker.created == []
    assert decision.evidence["clone_name"] == "llm-sft-1-r2"


def test_a_copied_lineage_s_next_clone_made_from_another_job_does_not_keep_the_copied_tags() -> None:
    # Given relaunch-7 as above, while llm-sft-1-r2 exists as the real lineage's clone (made from llm-sft-1-r1)
    world = World(evidence=ecc_on("algo-2", "relaunch-7"))
    job = world.failed("relaunch-7", tags=copied_clone_tags(), FailureReason=ECC_REASON, **recent_failure(30))
    theirs = {**TAGS, **clone_of("llm-sft-1-r1", 2), TAG_REASON: "failed-transient"}
    world.sagemaker.add(failed_description("llm-sft-1-r2", TrainingJobStatus="InProgress"), theirs)
    # When auto-resume decides it
    world.reaction.react(job, EVENT)
    # Then it is resumed in a lineage of its own
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["relaunch-7-r1"]


def test_a_copied_lineage_s_next_clone_that_cannot_be_read_decides_nothing() -> None:
    # Given relaunch-7 as above, and a throttled read of llm-sft-1-r2
    world = World(evidence=ecc_on("algo-2", "relaunch-7"))
    job = world.failed("relaunch-7", tags=copied_clone_tags(), FailureReason=ECC_REASON, **recent_failure(30))
    world.sagemaker.add(failed_description("llm-sft-1-r2", TrainingJobStatus="InProgress"), {})

    def throttled(arn: str) -> dict[str, str]:
        if arn.endswith("/llm-sft-1-r2"):
            raise AdapterError("ListTags throttled")
        return dict(world.sagemaker.tags.get(arn, {}))

    world.sagemaker.list_tags = throttled  # type: ignore[method-assign]
    # When auto-resume decides it
    with pytest.raises(AdapterError):
        world.reaction.react(job, EVENT)
    # Then nothing is created or recorded: a clone of it may run, the delivery is retried
    assert world.sagemaker.created == [] and world.codes() == []


def test_sagemaker_s_own_retries_count_against_the_budget() -> None:
    # Given a job SageMaker already retried twice inside itself (RetryStrategy: two more Starting after the
    # first, none after a Spot interruption), and a budget of 2 clones
    history = transitions(
        ("Starting", timedelta(minutes=3)),
        ("Training", timedelta(hours=9)),
        ("Starting", timedelta(minutes=3)),
        ("Training", timedelta(hours=9)),
        ("Starting", timedelta(minutes=3)),
        ("Training", timedelta(hours=9)),
        ("Failed", timedelta(0)),
    )
    world = World()
    job = world.failed(RetryStrategy={"MaximumRetryAttempts": 2}, SecondaryStatusTransitions=history)
    (decision,) = world.reaction.react(job, EVENT)
    # Then the first clone would be attempt 1 + 2 retries > 2: not resumed, and the record says why
    assert decision.code == "resume.skip.budget-spent"
    assert decision.evidence["sagemaker_retries"] == 2
    assert world.sagemaker.created == []


# ---- qualification of a clone auto-resume did not make ---------------------------------------------------


def spot_fallback_clone(world: World, name: str, source: str, attempt: int, *, trained: timedelta) -> TrainingJob:
    """``name``, the On-Demand clone the Spot fallback made of ``source`` when it ran out of
    MaxWaitTimeInSeconds, failed on an internal error after ``trained``."""
    lineage = {**clone_of(source, attempt), TAG_REASON: "spot-max-wait"}
    return world.sagemaker.add(
        failed_description(name, trained=trained, reason=ISE, **recent_failure(30, trained)), {**TAGS, **lineage}
    )


def ended_spot_source(world: World, name: str, tags: dict[str, str], *, trained: timedelta) -> None:
    """``name``, a Spot job that trained ``trained`` and ended at MaxWaitTimeExceeded an hour before NOW."""
    description = failed_description(
        name,
        trained=trained,
        TrainingJobStatus="Stopped",
        SecondaryStatus="MaxWaitTimeExceeded",
        FailureReason=None,
        EnableManagedSpotTraining=True,
        **recent_failure(60, trained),
    )
    world.sagemaker.add(description, tags)


def test_a_spot_fallbacks_clone_is_resumed_only_when_its_lineage_trained_long_enough() -> None:
    # Given the On-Demand clone of a Spot job (a job governance did not create) that trained 20 minutes, the
    # clone failed transiently after 6 minutes: the lineage trained less than the default 1 h
    world = World(evidence=FailureEvidence())
    job = spot_fallback_clone(world, "llm-sft-1-r1", "llm-sft-1", 1, trained=timedelta(minutes=6))
    ended_spot_source(world, "llm-sft-1", TAGS, trained=timedelta(minutes=20))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is too short: its source is read (DescribeTrainingJob), not its tags (it is the lineage's root)
    assert decision.code == "resume.skip.too-short"
    assert "describe llm-sft-1" in world.calls.log and "list-tags llm-sft-1" not in world.calls.log
    assert world.codes() == [("resume.skip.too-short", "no-action")] and world.sagemaker.created == []


def test_a_spot_fallbacks_clone_of_an_auto_resumed_clone_inherits_its_qualification() -> None:
    # Given llm-sft-1-r2, the On-Demand clone the Spot fallback made of llm-sft-1-r1, itself a clone auto-resume
    # made; both trained minutes
    policy = {"mode": "enforce", "resume": {"max_attempts": 3, "backoff_minutes": [0]}}
    world = World(evidence=FailureEvidence(), policy=policy)
    job = spot_fallback_clone(world, "llm-sft-1-r2", "llm-sft-1-r1", 2, trained=timedelta(minutes=6))
    auto_resumed = {**TAGS, **clone_of("llm-sft-1", 1), TAG_REASON: "failed-transient"}
    ended_spot_source(world, "llm-sft-1-r1", auto_resumed, trained=timedelta(minutes=20))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the source's tags are read too, and the qualification its resume checked carries the clone: resumed
    assert "list-tags llm-sft-1-r1" in world.calls.log
    assert decision.code == "resume.clone.transient"
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r3"]


# ---- backing off between attempts ------------------------------------------------------------------------


def recent_failure(minutes_ago: int, trained: timedelta = timedelta(hours=26)) -> dict[str, Any]:
    """Overrides that make the job fail ``minutes_ago`` before NOW (after ``trained``, 26 h unless given)."""
    failed = NOW - timedelta(minutes=minutes_ago)
    start = failed - trained - timedelta(minutes=7)
    history = transitions(
        ("Starting", timedelta(minutes=3)),
        ("Downloading", timedelta(minutes=4)),
        ("Training", trained),
        ("Failed", timedelta(0)),
        start=start,
    )
    return {
        "SecondaryStatusTransitions": history,
        "CreationTime": start,
        "TrainingStartTime": history[1]["StartTime"],
        "TrainingEndTime": failed,
        "LastModifiedTime": failed,
    }


def test_a_second_attempt_within_its_backoff_is_tagged_for_the_reconciler_and_not_cloned() -> None:
    # Given the first clone failed 5 minutes ago (the second attempt waits 15 minutes by default)
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(5))
    (decision,) = world.reaction.react(job, EVENT)
    # Then the evidence is read and the decision made, the job tagged with when it may be resumed, nothing
    # created and nobody told yet
    due = (NOW + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert world.calls.log[-1] == f"tag llm-sft-1-r1 {TAG_RESUME_AFTER}={due}"
    assert decision.code == "resume.defer.backoff"
    assert world.codes() == [("resume.defer.backoff", "deferred")]
    assert world.sagemaker.created == [] and world.notifier.sent == []


def test_once_due_the_same_reaction_clones() -> None:
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(15))
    (decision,) = world.reaction.react(job, Trigger(kind="reconciler", event_id="run-1"))
    assert decision.code == "resume.clone.transient"
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r2"]
    assert decision.evidence["backoff_minutes"] == 15


def test_a_deferral_that_cannot_be_tagged_fails_for_the_retry() -> None:
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(5))
    world.marks.error = AdapterError("AddTags throttled")
    with pytest.raises(AdapterError):
        world.reaction.react(job, EVENT)
    assert world.codes() == [("resume.defer.backoff", "failed")]


def test_a_deferral_in_audit_mode_is_recorded_only() -> None:
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"), policy={"mode": "audit"})
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(5))
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.defer.backoff"
    assert world.codes() == [("resume.defer.backoff", "audit-only")]
    assert not any(c.startswith("tag") for c in world.calls.log)


# ---- told once per clone, whoever made it -----------------------------------------------------------------
# The clone's owner is told, and the clone counted, once whoever made it: the job-events function (in a
# delivery) or the reconciler's deferred resume (outside any), keyed to the clone in the delivery ledger
# (``resume:<clone>``), not to the delivery that happened to meet "already exists".

RUN = Trigger(kind="reconciler", event_id="run-1")


class NoticeClock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class NoticeWorld:
    """A failed clone whose next attempt waits 15 minutes (a deferred resume), with the ledger."""

    def __init__(self, notifier: type[FakeNotifier] = FakeNotifier) -> None:
        self.calls = Calls()
        self.sagemaker = FakeSageMaker(self.calls)
        self.clock = NoticeClock()
        self.notifier = notifier(self.calls)
        self.metrics = MemoryBusinessMetrics()
        self.audit = MemoryAuditSink()
        self.ledger = MemoryLedger(self.calls)
        self.reaction = AutoResumeReaction(
            self.sagemaker,
            self.sagemaker,
            OnceNotifier(self.notifier),
            FixedPolicies(Policy.model_validate({"mode": "enforce"})),
            OnceAuditSink(self.audit),
            clock=self.clock,
            shape=shape,
            role_patterns=("*SageMaker*",),
            metrics=self.metrics,
            logs=FakeLogs(self.calls, ecc_on("algo-1", "llm-sft-1-r1")),
            checkpoints=FakeCheckpoints(self.calls, CheckpointProgress(checked=True, written=3, total=5)),
            marks=FakeMarks(self.calls, self.sagemaker),
            notices=CloneNotices(self.ledger, self.clock),
        )
        description = failed_description("llm-sft-1-r1", reason=ALGORITHM_ERROR, **recent_failure(5))
        self.job = self.sagemaker.add(description, {**TAGS, **clone_of("llm-sft-1", 1)})

    def told(self) -> list[tuple[str, str | None]]:
        return [(m.job_name, m.related_job) for m in self.notifier.sent]

    def resumed(self) -> int:
        return len(self.metrics.of(BusinessMetric.JOBS_RESUMED))


def test_a_deferred_resume_whose_notification_failed_is_told_by_a_later_run() -> None:
    # Given a Failed event that deferred the resume, and the reconciler's run once it is due, whose
    # Publish is throttled after the clone was made (outside any delivery)
    world = NoticeWorld(ThrottledOnce)
    world.reaction.react(world.job, EVENT)
    world.clock.now = NOW + timedelta(minutes=12)
    with pytest.raises(AdapterError):
        world.reaction.react(world.job, RUN)
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r2"]
    # When a later run hands the job to auto-resume again (its clone exists, its owner untold)
    assert not CloneNotices(world.ledger, world.clock).told("llm-sft-1-r2")
    world.reaction.react(world.job, RUN)
    # Then the owner is told once and the clone counted once; a further run tells nothing more
    assert world.told() == [("llm-sft-1-r1", "llm-sft-1-r2")] and world.resumed() == 1
    assert CloneNotices(world.ledger, world.clock).told("llm-sft-1-r2")
    world.reaction.react(world.job, RUN)
    assert len(world.told()) == 1 and world.resumed() == 1 and len(world.sagemaker.created) == 1


def test_an_event_retry_after_the_reconciler_resumed_the_job_tells_nothing_more() -> None:
    # Given a Failed event's delivery that deferred the resume, then failed later in the delivery
    world = NoticeWorld()
    key = job_delivery_key(world.job)

    def failing() -> None:
        world.reaction.react(world.job, EVENT)
        raise AdapterError("a later reaction of the delivery failed")

    with pytest.raises(AdapterError):
        deliver(world.ledger, key, failing, owner="sqs-m1", now=world.clock.now, hold_seconds=0)
    # and the reconciler's run once due: it made the clone and told the owner
    world.clock.now = NOW + timedelta(minutes=20)
    world.reaction.react(world.job, RUN)
    assert world.told() == [("llm-sft-1-r1", "llm-sft-1-r2")] and world.resumed() == 1
    # When the queue redelivers the event (its visibility timeout)
    world.clock.now = NOW + timedelta(minutes=30)
    deliver(
        world.ledger,
        key,
        lambda: world.reaction.react(world.job, EVENT),
        owner="sqs-m1",
        now=world.clock.now,
        hold_seconds=0,
    )
    # Then the retry meets "already exists" and tells and counts nothing more
    assert len(world.told()) == 1 and world.resumed() == 1


# ---- a clone whose source ended stopped or completed -----------------------------------------------------


def stopped_source(world: World, stop_requested: datetime) -> None:
    """``llm-sft-1`` (the source of ``llm-sft-1-r1``), its stop requested at ``stop_requested``."""
    history = transitions(
        ("Starting", timedelta(minutes=3)),
        ("Training", stop_requested - T0 - timedelta(minutes=3)),
        ("Stopping", timedelta(minutes=6)),
        ("Stopped", timedelta(0)),
    )
    description = failed_description(
        "llm-sft-1", TrainingJobStatus="Stopped", SecondaryStatus="Stopped", FailureReason=None
    )
    description.update(SecondaryStatusTransitions=history, TrainingEndTime=history[-1]["StartTime"])
    world.sagemaker.add(description, TAGS)


def test_a_skip_for_a_stopped_source_whose_next_clone_cannot_be_read_is_retried() -> None:
    # Given a failed clone whose source's owner stopped it after the clone failed, and DescribeTrainingJob of
    # the clone's next clone's name throttled (an earlier decision may have made it, its owner untold)
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(30))
    stopped_source(world, NOW - timedelta(minutes=10))
    original = world.sagemaker.describe

    def throttled(name: str) -> dict[str, Any]:
        if name == "llm-sft-1-r2":
            raise AdapterError("DescribeTrainingJob throttled")
        return original(name)

    world.sagemaker.describe = throttled  # type: ignore[method-assign]
    # When the clone's resume is decided
    with pytest.raises(AdapterError):
        world.reaction.react(job, EVENT)
    # Then nothing is recorded: a "not resumed" beside a clone that may run untold is not guessed
    assert world.codes() == [] and world.sagemaker.created == []
    # and once it can be read (none exists), the skip is recorded
    world.sagemaker.describe = original  # type: ignore[method-assign]
    world.reaction.react(job, EVENT)
    assert world.codes() == [("resume.skip.source-stopped", "no-action")]


def test_a_final_skip_of_a_deferred_resume_is_marked_settled_once_and_a_failed_mark_is_not_raised() -> None:
    # Given a failed clone deferred while its source ran (tagged smgov:resume-after), whose source's owner
    # then stopped it
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    deferred = {**clone_of("llm-sft-1", 1), TAG_RESUME_AFTER: "2026-11-23T07:30:00Z"}
    job = world.failed("llm-sft-1-r1", tags=deferred, **recent_failure(30))
    stopped_source(world, NOW - timedelta(minutes=10))
    # When its resume is decided and the settling tag cannot be written (throttled)
    world.marks.error = AdapterError("AddTags throttled")
    world.reaction.react(job, RUN)
    # Then the decision stands (recorded, not raised); the next run decides again and settles it
    world.marks.error = None
    world.reaction.react(job, RUN)
    assert world.codes() == [("resume.skip.source-stopped", "no-action")] * 2
    arn = job.arn or ""
    assert world.sagemaker.tags[arn][TAG_RESUME_SETTLED] == "resume.skip.source-stopped@llm-sft-1-r1"
    # while the same skip of a clone that was never deferred writes no tag (the reconciler never visits it)
    world = World(evidence=ecc_on("algo-1", "llm-sft-1-r1"))
    job = world.failed("llm-sft-1-r1", tags=clone_of("llm-sft-1", 1), **recent_failure(30))
    stopped_source(world, NOW - timedelta(minutes=10))
    world.reaction.react(job, EVENT)
    assert world.codes() == [("resume.skip.source-stopped", "no-action")]
    assert not any(line.startswith("tag") for line in world.calls.log)


# ---- waiting for the failed process's last log lines ------------------------------------------------------
# CloudWatch Logs receives a host's lines from an agent that batches them: the traceback that says why a job
# failed may arrive after its Failed event. A recent failure whose logs hold no cause yet is deferred
# (resume.defer.logs-pending) and decided by the reconciler once resume.logs_settle_minutes (5) have passed.

EFA_REASON = NCCL_REASON  # what SageMaker quotes of an EFA fault: a survivor's ncclRemoteError
ECC_REASON = f'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "{ECC}"'


def no_cause_yet(job_name: str = "llm-sft-1") -> FailureEvidence:
    """Both hosts' streams as read before the failed process's last lines arrived: training progress only."""
    return FailureEvidence(
        hosts=tuple(
            HostLog(host, f"{job_name}/{host}-1700000000", (LogLine("step 899"), LogLine("step 900")))
            for host in ("algo-1", "algo-2")
        ),
        logs_read=True,
        hosts_total=2,
    )


def efa_on_algo_1(job_name: str = "llm-sft-1") -> FailureEvidence:
    """The same streams once the lines arrived: algo-1's EFA transport failed, algo-2 reports its exit later."""
    fault = NOW - timedelta(minutes=6)
    return FailureEvidence(
        hosts=(
            HostLog(
                "algo-1",
                f"{job_name}/algo-1-1700000000",
                (LogLine("step 900", fault - timedelta(minutes=1)), LogLine(EFA.format(host="algo-1"), fault)),
            ),
            HostLog(
                "algo-2",
                f"{job_name}/algo-2-1700000000",
                (LogLine("step 920", fault + timedelta(minutes=4)), LogLine(REMOTE, fault + timedelta(minutes=5))),
            ),
        ),
        logs_read=True,
        hosts_total=2,
    )


def efa_on_algo_2_first_read(job_name: str = "llm-sft-1", *, algo_1: tuple[LogLine, ...] = ()) -> FailureEvidence:
    """algo-2's EFA completion error in its log, algo-1's stream holding training progress only (``algo_1``: the
    lines that arrived after that, appended to it)."""
    fault = NOW - timedelta(minutes=1)
    return FailureEvidence(
        hosts=(
            HostLog(
                "algo-1",
                f"{job_name}/algo-1-1700000000",
                (LogLine("step 899", fault - timedelta(minutes=2)), *algo_1),
            ),
            HostLog(
                "algo-2",
                f"{job_name}/algo-2-1700000000",
                (LogLine("step 900", fault - timedelta(minutes=1)), LogLine(EFA.format(host="algo-2"), fault)),
            ),
        ),
        logs_read=True,
        hosts_total=2,
    )


def test_an_interconnect_cause_waits_while_a_peer_s_log_is_silent_and_a_late_code_bug_skips_it() -> None:
    # Given a two-host job that failed a minute ago: algo-2's log holds its EFA completion error, algo-1's only its
    # training progress (algo-1 died first of a KeyError whose traceback has not reached CloudWatch Logs yet)
    world = World(evidence=efa_on_algo_2_first_read())
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then the interconnect fault is not cloned yet: algo-1's silence may hide the cause, the reconciler decides
    assert decision.code == "resume.defer.logs-pending"
    assert decision.evidence["diagnosis"]["class"] == "interconnect"
    assert decision.evidence["diagnosis"]["hosts_silent"] == ["algo-1"]
    assert world.sagemaker.created == []
    # When it is due and algo-1's traceback has arrived, written before algo-2's transport error
    assert isinstance(world.logs, FakeLogs)
    traceback = (LogLine("Traceback (most recent call last):", NOW - timedelta(minutes=1, seconds=30)),)
    keyerror = (LogLine("KeyError: 'label'", NOW - timedelta(minutes=1, seconds=20)),)
    world.logs.evidence = efa_on_algo_2_first_read(algo_1=traceback + keyerror)
    world.now = NOW + timedelta(minutes=4)
    (decision,) = world.reaction.react(job, RUN)
    # Then the EFA error is algo-2's report of algo-1's exit: the user's code, not resumed, settled for good
    assert decision.code == "resume.skip.user-code"
    assert world.sagemaker.created == []
    assert world.sagemaker.tags[job.arn or ""][TAG_RESUME_SETTLED] == "resume.skip.user-code@llm-sft-1"


def test_an_interconnect_cause_whose_silent_peer_still_says_nothing_when_due_is_resumed() -> None:
    # Given the same job deferred for algo-1's silence, whose log still holds nothing of its end when due
    world = World(evidence=efa_on_algo_2_first_read())
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    assert [d.code for d in world.reaction.react(job, EVENT)] == ["resume.defer.logs-pending"]
    world.now = NOW + timedelta(minutes=4)
    # When the reconciler decides it
    (decision,) = world.reaction.react(job, RUN)
    # Then the interconnect fault on algo-2 stands, as it did before the wait: resumed, its host kept for the lemon
    assert decision.code == "resume.clone.transient"
    (request,) = world.sagemaker.created
    assert {t["Key"]: t["Value"] for t in request["Tags"]}[TAG_FAILURE] == "interconnect@algo-2"


def efa_on_algo_2_peer_unread(*, cut: bool = False) -> FailureEvidence:
    """algo-2's EFA completion error; algo-1's stream found but not read: its ``GetLogEvents`` failed (throttled),
    or (``cut``) the read's budget left it out."""
    fault = NOW - timedelta(minutes=1)
    return FailureEvidence(
        hosts=(
            HostLog(
                "algo-2",
                "llm-sft-1/algo-2-1700000000",
                (LogLine("step 900", fault - timedelta(minutes=1)), LogLine(EFA.format(host="algo-2"), fault)),
            ),
        ),
        logs_read=True,
        hosts_total=2,
        hosts_cut=1 if cut else 0,
        notes=() if cut else ("algo-1: GetLogEvents throttled",),
    )


def test_an_interconnect_cause_waits_while_a_peer_s_log_could_not_be_read_and_is_not_cloned_on_it_when_due() -> (
    None
):
    # Given a two-host job that failed a minute ago: algo-2's EFA completion error was read, algo-1's read failed
    # (algo-1 may hold the KeyError that makes algo-2's line its report of algo-1's exit, as a silent algo-1 may)
    world = World(evidence=efa_on_algo_2_peer_unread())
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it waits for the settle period, as for a silent peer: nothing cloned
    assert decision.code == "resume.defer.logs-pending"
    assert decision.evidence["diagnosis"]["hosts_unread"] == 1
    assert world.sagemaker.created == []
    # When the reconciler decides it once due, algo-1's read failing again
    world.now = NOW + timedelta(minutes=4)
    (decision,) = world.reaction.react(job, RUN)
    # Then the cause is not known: no clone on missing evidence, and the skip is left open (a read failed)
    assert decision.code == "resume.skip.insufficient-evidence"
    assert world.sagemaker.created == []
    assert TAG_RESUME_SETTLED not in world.sagemaker.tags[job.arn or ""]
    # When the next run reads algo-1, which still says nothing of its end
    assert isinstance(world.logs, FakeLogs)
    world.logs.evidence = efa_on_algo_2_first_read()
    world.now = NOW + timedelta(minutes=14)
    (decision,) = world.reaction.react(job, RUN)
    # Then the interconnect fault stands, as for a silent peer once due: resumed
    assert decision.code == "resume.clone.transient"
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r1"]


def test_a_skip_on_a_peer_s_failed_read_past_the_settle_period_is_handed_to_the_reconciler() -> None:
    # Given the same two-host job, its Failed event handled 20 minutes after the failure (a late delivery, a retry,
    # the lost-end repair): algo-2's EFA completion error read, algo-1's read throttled
    world = World(evidence=efa_on_algo_2_peer_unread())
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(20))
    # When auto-resume reacts to it
    (decision,) = world.reaction.react(job, EVENT)
    # Then the cause is not known (no clone), and the job is tagged for the reconciler's deferred-resume pass to
    # decide again on a new read, as a job deferred within the settle period is, not lost to one throttled read
    assert decision.code == "resume.skip.insufficient-evidence"
    assert world.sagemaker.created == []
    tags = world.sagemaker.tags[job.arn or ""]
    assert tags[TAG_RESUME_AFTER] == domain_resume.resume_after_tag(world.now) and TAG_RESUME_SETTLED not in tags
    # When the reconciler decides it and reads algo-1, which says nothing of its end
    assert isinstance(world.logs, FakeLogs)
    world.logs.evidence = efa_on_algo_2_first_read()
    world.now = NOW + timedelta(minutes=10)
    (decision,) = world.reaction.react(job, RUN)
    # Then it is resumed
    assert decision.code == "resume.clone.transient"


@pytest.mark.parametrize("minutes_ago", [60, 130, 60 * 30])
def test_a_skip_on_a_peer_s_failed_read_past_the_longest_wait_is_retried_not_handed_over(minutes_ago: int) -> None:
    # Given the same two-host job, its Failed delivery decided an hour or more after the failure (retried for hours,
    # or the reconciler deciding a deferral at its due time): the reconciler's look-back (the longest wait, 60
    # minutes, plus three runs) counts from the failure and would not list a job tagged now at its next runs
    world = World(evidence=efa_on_algo_2_peer_unread())
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(minutes_ago))
    # When auto-resume reacts to it with algo-1's read throttled, then the decision fails, to be made again on a
    # new read: nothing recorded, tagged or created
    with pytest.raises(LogsUnread, match="decided again on a new read"):
        world.reaction.react(job, EVENT)
    assert world.audit.records == [] and world.sagemaker.created == []
    assert TAG_RESUME_AFTER not in world.sagemaker.tags[job.arn or ""]
    # When the delivery is retried and algo-1 is read, saying nothing of its end
    assert isinstance(world.logs, FakeLogs)
    world.logs.evidence = efa_on_algo_2_first_read()
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is resumed
    assert decision.code == "resume.clone.transient"
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r1"]


def test_a_copied_resume_after_does_not_keep_a_skip_on_a_failed_read_from_the_reconciler() -> None:
    # Given the same job launched with tags pasted from an earlier job: its smgov:resume-after is dated before this
    # job was created, which the reconciler ignores as a copy
    world = World(evidence=efa_on_algo_2_peer_unread())
    copied = "2026-11-01T00:00:00Z"
    job = world.failed(FailureReason=NCCL_REASON, tags={TAG_RESUME_AFTER: copied}, **recent_failure(20))
    created = world.sagemaker.descriptions["llm-sft-1"]["CreationTime"]
    # When auto-resume skips it on algo-1's failed read
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == "resume.skip.insufficient-evidence"
    # Then the copy is written over, and the reconciler's deferred-resume pass finds the job
    tags = world.sagemaker.tags[job.arn or ""]
    assert tags[TAG_RESUME_AFTER] == domain_resume.resume_after_tag(world.now)
    assert domain_resume.DeferredResume.of("llm-sft-1", tags, created=created) is not None


def test_a_skip_on_logs_read_in_full_is_not_handed_to_the_reconciler() -> None:
    # Given a job whose every host was read and shows the user's code, decided long after its failure
    world = World(evidence=oom_on_algo_1())
    (decision,) = world.reaction.react(world.failed(), EVENT)
    # Then the skip stands, and nothing is tagged for the reconciler
    assert decision.code == "resume.skip.user-code"
    assert not any(line.startswith("tag") for line in world.calls.log)


def efa_on_algo_2_of(hosts: int, *, read: int, cut: int) -> FailureEvidence:
    """algo-2's EFA completion error and, on the other hosts read, NCCL's report of the peer's exit; ``read`` hosts
    read of ``hosts`` found, ``cut`` of the others left out by the read's budget."""
    fault = NOW - timedelta(minutes=1)
    efa = HostLog(
        "algo-2",
        "llm-sft-1/algo-2-1700000000",
        (LogLine("step 900", fault - timedelta(minutes=1)), LogLine(EFA.format(host="algo-2"), fault)),
    )
    reports = tuple(
        HostLog(f"algo-{n}", f"llm-sft-1/algo-{n}-1700000000", (LogLine(REMOTE, fault + timedelta(seconds=30)),))
        for n in range(3, read + 2)
    )
    return FailureEvidence(hosts=(efa, *reports), logs_read=True, hosts_total=hosts, hosts_cut=cut)


def test_an_interconnect_cause_beside_hosts_no_read_reaches_waits_then_is_resumed() -> None:
    # Given a 66-host job that failed a minute ago: algo-2's EFA completion error, 63 more hosts read reporting its
    # exit, and 2 hosts beyond the 64 any read reaches
    world = World(evidence=efa_on_algo_2_of(66, read=64, cut=2))
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event, then the reconciler once due
    assert [d.code for d in world.reaction.react(job, EVENT)] == ["resume.defer.logs-pending"]
    world.now = NOW + timedelta(minutes=4)
    (decision,) = world.reaction.react(job, RUN)
    # Then, every host any read reaches read and none of them explaining the cause, it is resumed: hosts beyond
    # the 64 are never read, and counting them against an interconnect cause would never resume a job that large
    # for one (only a read that failed, which a later read may mend, leaves it unknown)
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["host"] == "algo-2"
    assert [r["TrainingJobName"] for r in world.sagemaker.created] == ["llm-sft-1-r1"]


def test_an_interconnect_cause_waits_while_a_host_the_first_read_left_out_is_unread() -> None:
    # Given a two-host job of a team that reads one host first, failed a minute ago: algo-2's EFA completion
    # error read, algo-1 left out by the read's budget
    world = World(
        evidence=efa_on_algo_2_of(2, read=1, cut=1), policy={"mode": "enforce", "resume": {"log_hosts": 1}}
    )
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it waits as for a silent algo-1: nothing cloned at the event
    assert decision.code == "resume.defer.logs-pending"
    assert world.sagemaker.created == []


def test_audit_mode_writes_no_settled_tag_on_a_job_launched_with_a_copied_resume_after() -> None:
    # Given a team in audit mode (the policy's default) and a job launched with a deferred job's smgov:resume-after
    # (a console Clone copies it), failed of a code bug on both hosts
    world = World(
        evidence=FailureEvidence(
            hosts=tuple(
                HostLog(
                    h,
                    f"llm-sft-1/{h}-1700000000",
                    (LogLine("Traceback (most recent call last):"), LogLine("KeyError: 'label'")),
                )
                for h in ("algo-1", "algo-2")
            ),
            logs_read=True,
            hosts_total=2,
        ),
        policy={"mode": "audit", "notify_in_audit_mode": True},
    )
    job = world.failed(tags={TAG_RESUME_AFTER: "2026-11-22T07:00:00Z"}, **recent_failure(30))
    # When auto-resume decides its Failed event
    assert [d.code for d in world.reaction.react(job, EVENT)] == ["resume.skip.user-code"]
    # Then audit mode writes no tag: no smgov:resume-settled
    assert [line for line in world.calls.log if line.startswith("tag")] == []
    assert world.codes() == [("resume.skip.user-code", "no-action")]


def single_host_efa(job_name: str = "llm-sft-1") -> FailureEvidence:
    """A job of one host whose log holds its EFA completion error."""
    fault = NOW - timedelta(minutes=1)
    line = LogLine(EFA.format(host="algo-1"), fault)
    return FailureEvidence(
        hosts=(HostLog("algo-1", f"{job_name}/algo-1-1700000000", (LogLine("step 900"), line)),),
        logs_read=True,
        hosts_total=1,
    )


def at_due(minutes: int) -> str:
    return (NOW + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_recent_failure_with_no_cause_in_its_logs_is_deferred_then_resumed_once_its_cause_arrived() -> None:
    # Given a job that failed a minute ago with the ncclRemoteError SageMaker quotes, whose hosts' streams do
    # not hold its last lines yet
    world = World(evidence=no_cause_yet())
    job = world.failed(FailureReason=EFA_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event, and the event is delivered again
    (decision,) = world.reaction.react(job, EVENT)
    world.reaction.react(job, EVENT)
    # Then nothing is decided for good: the job is tagged for the reconciler at the failure plus 5 minutes,
    # the same tag both times, nothing created and nobody told
    assert decision.code == "resume.defer.logs-pending"
    assert decision.evidence["diagnosis"]["class"] == "unknown" and decision.evidence["logs_settle_minutes"] == 5
    assert world.codes() == [("resume.defer.logs-pending", "deferred")] * 2
    tagged = [line for line in world.calls.log if line.startswith("tag")]
    assert tagged == [f"tag llm-sft-1 {TAG_RESUME_AFTER}={at_due(4)}"] * 2
    assert world.sagemaker.created == [] and world.notifier.sent == []
    # When the reconciler's run hands it to auto-resume once due, the EFA line now in algo-1's log
    assert isinstance(world.logs, FakeLogs)
    world.logs.evidence = efa_on_algo_1()
    world.now = NOW + timedelta(minutes=4)
    (decision,) = world.reaction.react(job, RUN)
    # Then it is resumed for the interconnect fault on algo-1, and its clone carries the fault for the lemon rule
    assert decision.code == "resume.clone.transient"
    assert decision.evidence["diagnosis"]["host"] == "algo-1"
    (request,) = world.sagemaker.created
    assert {t["Key"]: t["Value"] for t in request["Tags"]}[TAG_FAILURE] == "interconnect@algo-1"


def test_a_deferred_failure_whose_logs_still_hold_no_cause_when_due_is_skipped_for_good() -> None:
    # Given a failure deferred for its last log lines, which have still not arrived when it is due
    world = World(evidence=no_cause_yet())
    job = world.failed(FailureReason=EFA_REASON, **recent_failure(1))
    world.reaction.react(job, EVENT)
    world.now = NOW + timedelta(minutes=4)
    # When the reconciler's run decides it
    (decision,) = world.reaction.react(job, RUN)
    # Then it is decided on what the logs hold then, as before the deferral existed, and settled: the
    # reconciler does not decide it again at its next runs
    assert decision.code == "resume.skip.unknown"
    assert world.codes() == [("resume.defer.logs-pending", "deferred"), ("resume.skip.unknown", "no-action")]
    assert world.sagemaker.tags[job.arn or ""][TAG_RESUME_SETTLED] == "resume.skip.unknown@llm-sft-1"
    assert world.sagemaker.created == []


def test_a_clone_whose_fault_rests_on_failure_reason_alone_waits_for_its_host_and_is_charged_double() -> None:
    # Given the first clone, made for an ECC error on algo-1, failing a minute ago with the ECC error SageMaker
    # quotes, its hosts' streams without it yet (no host: the lemon rule cannot be applied)
    world = World(evidence=no_cause_yet("llm-sft-1-r1"))
    tags = clone_of("llm-sft-1", 1, failure="hardware@algo-1")
    job = world.failed("llm-sft-1-r1", tags=tags, FailureReason=ECC_REASON, **recent_failure(1))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is not resumed yet: a resume now would carry no fault for the next clone's lemon rule
    assert decision.code == "resume.defer.logs-pending"
    assert decision.evidence["diagnosis"]["class"] == "hardware" and decision.evidence["diagnosis"]["host"] is None
    # When it is due and the ECC error is now in algo-1's log
    assert isinstance(world.logs, FakeLogs)
    world.logs.evidence = ecc_on("algo-1", "llm-sft-1-r1")
    world.now = NOW + timedelta(minutes=4)
    (decision,) = world.reaction.react(job, RUN)
    # Then the fault recurred on the same host position: charged double, the budget of 2 is spent, for good
    assert decision.code == "resume.skip.budget-spent" and decision.evidence["repeated_fault"] == "hardware@algo-1"
    assert world.sagemaker.created == []
    assert world.sagemaker.tags[job.arn or ""][TAG_RESUME_SETTLED] == "resume.skip.budget-spent@llm-sft-1-r1"


@pytest.mark.parametrize(
    ("minutes_ago", "policy"),
    [
        (5, {"mode": "enforce"}),  # the settle period has passed
        (1, {"mode": "enforce", "resume": {"logs_settle_minutes": 0}}),  # no settle period
    ],
)
def test_a_failure_past_its_settle_period_or_with_none_is_decided_at_once(
    minutes_ago: int, policy: dict[str, Any]
) -> None:
    # Given a failure whose logs hold no cause, older than the settle period or with the period set to 0
    world = World(evidence=no_cause_yet(), policy=policy)
    job = world.failed(FailureReason=EFA_REASON, **recent_failure(minutes_ago))
    # When auto-resume reacts to its Failed event
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is decided at once, as before, and nothing is tagged (it was never deferred)
    assert decision.code == "resume.skip.unknown"
    assert not any(line.startswith("tag") for line in world.calls.log)


@pytest.mark.parametrize(
    ("evidence", "reason", "trained", "code"),
    [
        # the logs could not be read at all: waiting does not mend a read that failed; FailureReason decides
        (
            FailureEvidence.unread("GetLogEvents failed (ThrottlingException)"),
            EFA_REASON,
            26,
            "resume.skip.unknown",
        ),
        # a job too short to be resumed whatever its logs say: its diagnosis decides at once, as before
        (no_cause_yet(), EFA_REASON, 0.3, "resume.skip.unknown"),
        # a cause in a host's log: nothing to wait for
        (efa_on_algo_1(), EFA_REASON, 26, "resume.clone.transient"),
        # an interconnect cause on a job of one host: no peer whose late lines could explain it
        (single_host_efa(), EFA_REASON, 26, "resume.clone.transient"),
        # a hardware fault on a host, the other host silent: no peer's exit explains a GPU's ECC error
        (ecc_on("algo-2"), ECC_REASON, 26, "resume.clone.transient"),
        # SageMaker's own internal error: no host decides anything of it, its resume is not put off
        (no_cause_yet(), ISE, 26, "resume.clone.transient"),
    ],
)
def test_a_recent_failure_is_decided_at_once_when_waiting_for_its_logs_cannot_change_the_decision(
    evidence: FailureEvidence, reason: str, trained: float, code: str
) -> None:
    world = World(evidence=evidence)
    job = world.failed(FailureReason=reason, **recent_failure(1, trained=timedelta(hours=trained)))
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code == code
    assert not any(line.startswith("tag") for line in world.calls.log)


def test_a_recent_failure_in_audit_mode_is_decided_at_once_on_what_its_logs_hold() -> None:
    # Given audit mode, which writes no tag, so nothing would come back to a wait for the logs' last lines
    world = World(evidence=no_cause_yet(), policy={"mode": "audit"})
    job = world.failed(FailureReason=EFA_REASON, **recent_failure(1))
    # When a recent failure whose logs hold no cause yet is decided
    (decision,) = world.reaction.react(job, EVENT)
    # Then the decision made without the wait is recorded, on what the logs hold now, never a deferral
    assert [code for code, _ in world.codes()] == [decision.code] == ["resume.skip.unknown"]
    assert not any(line.startswith("tag") for line in world.calls.log)


class ThrottledLogs(FakeLogs):
    """The logs port while CloudWatch Logs throttles past botocore's retries."""

    throttled = False

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        if self.throttled:
            self.calls(f"logs {job_name} throttled")
            raise AdapterError("GetLogEvents: ThrottlingException")
        return super().tails(job_name, lines=lines, hosts=hosts)


def test_a_deferred_resume_decided_while_its_logs_cannot_be_read_is_not_settled_and_is_decided_again() -> None:
    # Given a failure deferred for its last log lines
    world = World(evidence=no_cause_yet())
    logs = ThrottledLogs(world.calls, no_cause_yet())
    world.reaction._logs = logs
    job = world.failed(FailureReason=NCCL_REASON, **recent_failure(1))
    assert [d.code for d in world.reaction.react(job, EVENT)] == ["resume.defer.logs-pending"]
    # When the reconciler decides it when due while CloudWatch Logs throttles: a skip on the FailureReason alone
    world.now = NOW + timedelta(minutes=4)
    logs.throttled = True
    assert [d.code for d in world.reaction.react(job, RUN)] == ["resume.skip.unknown"]
    # Then the skip is not settled: the next run reads the logs, which now hold the EFA fault, and resumes it
    assert TAG_RESUME_SETTLED not in world.sagemaker.tags[job.arn or ""]
    logs.throttled, logs.evidence = False, efa_on_algo_1()
    world.now = NOW + timedelta(minutes=14)
    assert [d.code for d in world.reaction.react(job, RUN)] == ["resume.clone.transient"]


def nine_hosts_no_cause(*, cut: bool) -> FailureEvidence:
    """A 9-host job's logs as read with log_hosts 8: the 8 hosts that fell silent first hold training progress
    only (no cause, no peer's report); the ninth is cut by the budget (``cut``) or its read failed."""
    return FailureEvidence(
        hosts=tuple(
            HostLog(f"algo-{n}", f"llm-sft-1/algo-{n}-1700000000", (LogLine("step 899"), LogLine("step 900")))
            for n in range(1, 9)
        ),
        logs_read=True,
        hosts_total=9,
        hosts_cut=1 if cut else 0,
        notes=("read 8 of 9 hosts (the 8 that fell silent first)",) if cut else ("algo-9: GetLogEvents failed",),
    )


@pytest.mark.parametrize(("cut", "settled"), [(True, True), (False, False)])
def test_a_due_skip_is_settled_when_the_only_hosts_unread_are_those_the_read_s_budget_leaves_out(
    cut: bool, settled: bool
) -> None:
    # Given a 9-host job that failed a minute ago (no peer's report: no second read), whose logs hold no cause,
    # deferred for its last lines
    world = World(evidence=nine_hosts_no_cause(cut=cut))
    job = world.failed(**recent_failure(1))
    assert [d.code for d in world.reaction.react(job, EVENT)] == ["resume.defer.logs-pending"]
    # When the reconciler decides it once due, the logs holding no cause still
    world.now = NOW + timedelta(minutes=4)
    assert [d.code for d in world.reaction.react(job, RUN)] == ["resume.skip.unknown"]
    # Then the skip is settled when the ninth host was cut by resume.log_hosts (every later read cuts it too), and
    # left open, to be decided again at the next run, when its read failed
    assert (
        world.sagemaker.tags[job.arn or ""].get(TAG_RESUME_SETTLED) == "resume.skip.unknown@llm-sft-1"
    ) is settled


def test_a_recent_failure_without_room_for_the_deferral_s_tags_is_decided_at_once() -> None:
    # Given a recent failure whose logs hold no cause yet, on a job with 49 tags: the deferral's mark would be the
    # 50th, leaving none for its settling
    many = {f"cc-{i:02d}": "x" for i in range(49 - len(TAGS))}
    world = World(evidence=no_cause_yet())
    job = world.failed(tags=many, FailureReason=NCCL_REASON, **recent_failure(1))
    # When it is decided, then at once, without a deferral nothing could settle
    (decision,) = world.reaction.react(job, EVENT)
    assert decision.code != "resume.defer.logs-pending"
    assert not any(line.startswith("tag") for line in world.calls.log)


def test_a_skip_on_a_failed_read_past_late_after_hours_is_final_not_retried() -> None:
    # Given the 12-host job whose other hosts' read fails, its Failed event decided 50 hours after the failure (a
    # dead letter redriven, the reconciler's last try by name), past resume.late_after_hours (48)
    world = World(cluster=efa_fault_on("algo-7", 12))
    assert isinstance(world.logs, ClusterLogs)
    world.logs.failing_reads = frozenset({1})
    job = world.sagemaker.add(failed_description("llm-sft-1", reason=NCCL_REASON, **recent_failure(50 * 60)), TAGS)
    # When auto-resume reacts: no new read could lead to a clone now
    (decision,) = world.reaction.react(job, EVENT)
    # Then it is the final too-late skip, recorded and settled, not a decision failed for a retry
    assert decision.code == "resume.skip.too-late"
    assert world.codes() == [("resume.skip.too-late", "no-action")]
    assert world.sagemaker.created == []
