"""Auto-resume and Spot fallback decisions (pure): when to clone, when not, and why."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.clone import TAG_ATTEMPT, TAG_REASON, TAG_RETRIES, TAG_ROOT, TAG_SOURCE
from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.failure_evidence import FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.resume import (
    ResumeCode,
    SpotCode,
    decide_spot_takeover,
    end_unseen,
    interruption_unseen,
    next_clone_name,
)
from sagemaker_governance.settings import Settings
from tests.builders import describe
from tests.resume_builders import (
    T0,
    TAGS,
    as_job,
    failed_description,
    resume_of,
    spot_description,
    spot_of,
    transitions,
)

NOW = T0 + timedelta(hours=44)  # within late_after_hours of each failure here (resume.skip.too-late)


def resume(
    description: dict[str, Any],
    tags: dict[str, str] | None = None,
    policy: ResumePolicy | None = None,
    mode: Mode = Mode.ENFORCE,
    roles: tuple[str, ...] = ("*SageMaker*",),
    source: Any = None,
    next_clone: Any = None,
) -> Any:
    return resume_of(
        description, NOW, tags=tags, policy=policy, mode=mode, roles=roles, source=source, next_clone=next_clone
    )


def spot(
    description: dict[str, Any],
    policy: SpotPolicy | None = None,
    tags: dict[str, str] | None = None,
    reported: dict[str, Any] | None = None,
) -> Any:
    return spot_of(description, NOW, policy=policy, tags=tags, reported=reported)


# ---- auto-resume ----------------------------------------------------------------------------------


def test_a_job_that_failed_after_26_hours_is_resumed() -> None:
    # Given a job that trained 26 hours (timedelta.seconds would read 2 hours) and failed transiently
    description = failed_description(trained=timedelta(hours=26))
    assert (timedelta(hours=26)).seconds == 2 * 3600  # the trap
    # When the policy wants 24 hours of training
    result = resume(description, policy=ResumePolicy(min_training_hours=24))
    # Then the job is resumed, and the evidence shows the real training time and the matched signature
    (decision,) = result.decisions
    assert decision.action is Action.CLONE and decision.acts
    assert decision.evidence["training_hours"] == 26
    assert decision.evidence["diagnosis"]["signature"] == "internal-server-error"
    assert decision.evidence["diagnosis"]["basis"] == "failure-reason"  # no log was read
    assert decision.evidence["clone_name"] == "llm-sft-1-r1"
    assert result.plan is not None and decision.request == result.plan.request


def test_a_short_run_is_not_worth_resuming() -> None:
    result = resume(failed_description(trained=timedelta(minutes=20)), policy=ResumePolicy(min_training_hours=1))
    (decision,) = result.decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.TOO_SHORT
    assert decision.evidence["training_hours"] == 0.33
    assert result.plan is None


@pytest.mark.parametrize(
    ("reason", "code", "failure_class"),
    [
        (
            "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'labels'\"\n"
            'Command "/opt/conda/bin/python3.11 train.py"',
            ResumeCode.USER_CODE,
            "user-code",
        ),
        (
            "ClientError: Data download failed: s3://bucket/train/ does not exist",
            ResumeCode.USER_CODE,
            "user-code",
        ),
        # A user's traceback that mentions a transient error class does not make it transient.
        (
            "AlgorithmError: botocore.exceptions.ClientError: InternalServerError when calling GetObject",
            ResumeCode.UNKNOWN,
            "unknown",
        ),
        ("AlgorithmError: ExecuteUserScriptError: ExitCode 1", ResumeCode.UNKNOWN, "unknown"),
        ("", ResumeCode.UNKNOWN, "unknown"),
    ],
)
def test_failures_that_are_not_faults_are_not_resumed(reason: str, code: ResumeCode, failure_class: str) -> None:
    (decision,) = resume(failed_description(reason=reason)).decisions
    assert decision.action is Action.NONE
    assert decision.code == code
    assert decision.evidence["diagnosis"]["class"] == failure_class


@pytest.mark.parametrize(
    ("reason", "signature"),
    [
        ("InternalServerError: We encountered an internal error. Please try again.", "internal-server-error"),
        ("CapacityError: Unable to provision requested ML compute capacity.", "capacity-error"),
        (
            "ClientError: Insufficient capacity error from EC2 while launching instances, retry!",
            "insufficient-capacity",
        ),
        ("InternalServerError: The instance failed health checks; unhealthy instance replaced", "instance-health"),
        ("ClientError: Training failed due to an instance hardware failure", "instance-health"),
    ],
)
def test_transient_failures_are_classified_and_recorded(reason: str, signature: str) -> None:
    (decision,) = resume(failed_description(reason=reason)).decisions
    assert decision.action is Action.CLONE and decision.code == ResumeCode.CLONE
    assert decision.evidence["diagnosis"]["signature"] == signature


def test_a_team_adds_a_signature_and_keeps_the_defaults() -> None:
    # Given a team that adds an interconnect signature of its own
    policy = Policy.model_validate(
        {
            "teams": {
                "vision": {
                    "resume": {
                        "signatures": [
                            {
                                "id": "nccl-aborted",
                                "class": "interconnect",
                                "pattern": "NCCL communicator was aborted",
                            }
                        ]
                    }
                }
            }
        }
    )
    description = failed_description(reason="AlgorithmError: RuntimeError: NCCL communicator was aborted")
    job = as_job(description)
    # When the global policy and the team's decide
    (global_decision,) = resume(description, policy=policy.resume).decisions
    effective = policy.for_job(job).resume
    (team_decision,) = resume(description, policy=effective).decisions
    # Then only the team's resumes it, by its signature; the built-in signatures still apply
    assert global_decision.code == ResumeCode.UNKNOWN
    assert team_decision.code == ResumeCode.CLONE
    assert team_decision.evidence["diagnosis"]["signature"] == "nccl-aborted"
    (internal,) = resume(failed_description(), policy=effective).decisions
    assert internal.evidence["diagnosis"]["signature"] == "internal-server-error"


def test_a_team_changes_a_class_verdict() -> None:
    policy = Policy.model_validate({"resume": {"classes": {"capacity": "skip"}}})
    (decision,) = resume(
        failed_description(reason="CapacityError: Unable to provision"), policy=policy.resume
    ).decisions
    assert decision.code == ResumeCode.CLASS_SKIPPED and decision.evidence["diagnosis"]["class"] == "capacity"


def test_legacy_transient_patterns_still_load_as_generic_reason_signatures() -> None:
    # Given a document written before the taxonomy (a team's pattern, a default switched off)
    policy = ResumePolicy.model_validate(
        {"transient_patterns": {"nccl": "^AlgorithmError:.*NCCL", "capacity-error": None}}
    )
    # Then it loads: the team's pattern is a generic FailureReason signature of a resumed class
    (legacy,) = policy.signatures
    assert legacy.id == "legacy-nccl" and legacy.where.value == "reason" and legacy.role.value == "generic"
    (decision,) = resume(
        failed_description(reason="AlgorithmError: NCCL error: remote process exited"), policy=policy
    ).decisions
    assert decision.code == ResumeCode.CLONE


def test_bad_team_signatures_are_rejected_and_never_replace_the_defaults() -> None:
    with pytest.raises(ValidationError, match="not a regular expression"):
        ResumePolicy.model_validate(
            {"signatures": [{"id": "broken", "class": "hardware", "pattern": "(unclosed"}]}
        )
    with pytest.raises(ValidationError, match="kebab-case"):
        ResumePolicy.model_validate({"signatures": [{"id": "Bad Name", "class": "hardware", "pattern": "x"}]})
    with pytest.raises(ValidationError, match="built in"):
        ResumePolicy.model_validate(
            {"signatures": [{"id": "cuda-out-of-memory", "class": "hardware", "pattern": "x"}]}
        )
    with pytest.raises(ValidationError, match="unknown class"):
        ResumePolicy.model_validate({"signatures": [{"id": "mine", "class": "cosmic-rays", "pattern": "x"}]})
    # nested quantifiers, words that split two ways, and alternatives that are one word only ignoring case (as matched);
    # two copies of nested quantifiers too, which a tag value may hold: a signature is searched for in long lines
    for slow in ("(a+)+$", "(a|aa)+ failed", "([a-z0-9]+-?)+!", "(ab|AB)+c", r"(?:\w+\s?){2}x"):
        with pytest.raises(ValidationError, match="backtrack"):
            ResumePolicy.model_validate({"signatures": [{"id": "slow", "class": "hardware", "pattern": slow}]})
    with pytest.raises(ValidationError, match="unknown class"):
        ResumePolicy.model_validate({"classes": {"gremlins": "resume"}})


EFA_LINE = (
    "algo-1:288:390 [1] NCCL WARN NET/OFI Request 0x7f3a2c01e0c0 completed with error. RC: 21. Error: 4 "
    "(Interrupted system call). Completed length: 0"
)
ECC_LINE = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
# what SageMaker quotes of an interconnect fault: a survivor's ncclRemoteError
NCCL_REASON = (
    'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ncclRemoteError: remote process exited"'
)
REMOTE_LINE = (
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
)


def cause_on_algo_1_of_four(cause: str, *, cut: bool) -> FailureEvidence:
    """A 4-host job's logs: ``cause`` on algo-1, algo-2 and algo-3 reporting its exit, algo-4 not read: left out
    by the read's budget (``cut``) or its ``GetLogEvents`` failed."""
    at = NOW - timedelta(hours=2)
    hosts = [HostLog("algo-1", "llm-sft-1/algo-1-1700000000", (LogLine("step 900", at), LogLine(cause, at)))]
    hosts += [
        HostLog(
            h,
            f"llm-sft-1/{h}-1700000000",
            (LogLine("step 920", at), LogLine(REMOTE_LINE, at + timedelta(minutes=20))),
        )
        for h in ("algo-2", "algo-3")
    ]
    notes = ("read 3 of 4 hosts",) if cut else ("algo-4: GetLogEvents failed (ThrottlingException)",)
    return FailureEvidence(hosts=tuple(hosts), logs_read=True, notes=notes, hosts_total=4, hosts_cut=int(cut))


@pytest.mark.parametrize(
    ("cause", "cut", "code"),
    [
        # an interconnect cause beside a host whose read failed: a code bug there would explain it
        (EFA_LINE, False, ResumeCode.INSUFFICIENT_EVIDENCE),
        # beside a host no read reaches (the read's budget): decided on what can be read, as before
        (EFA_LINE, True, ResumeCode.CLONE),
        # a GPU's ECC error: no peer's exit explains it, a host unread changes nothing
        (ECC_LINE, False, ResumeCode.CLONE),
    ],
)
def test_an_interconnect_cause_beside_a_host_whose_read_failed_is_insufficient_evidence(
    cause: str, cut: bool, code: ResumeCode
) -> None:
    result = resume_of(
        failed_description(reason=NCCL_REASON), NOW, failure=cause_on_algo_1_of_four(cause, cut=cut)
    )
    (decision,) = result.decisions
    assert decision.code == code
    assert decision.evidence["diagnosis"]["host"] == "algo-1"
    assert decision.evidence["diagnosis"]["hosts_unread"] == 1
    if code is ResumeCode.INSUFFICIENT_EVIDENCE:
        assert not result.settled  # a later read may reach the host


def test_the_retry_budget_stops_the_lineage() -> None:
    # Given the second clone of a lineage failed, and the budget is two attempts
    tags = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_ATTEMPT: "2"}
    (decision,) = resume(failed_description("llm-sft-1-r2"), tags, ResumePolicy(max_attempts=2)).decisions
    # Then it is not resumed again
    assert decision.action is Action.NONE and decision.code == ResumeCode.BUDGET_SPENT
    assert decision.evidence["attempt"] == 3 and decision.evidence["max_attempts"] == 2


ISE = "InternalServerError: We encountered an internal error. Please try again."
RETRIED_ONCE = transitions(
    ("Starting", timedelta(minutes=3)),
    ("Training", timedelta(hours=5)),
    ("Starting", timedelta(minutes=3)),
    ("Training", timedelta(hours=5)),
    ("Failed", timedelta(0)),
)


def clone_tags(decision: Any) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in decision.request["Tags"]}


def test_sagemaker_s_retries_in_an_earlier_generation_keep_spending_the_lineage_s_budget() -> None:
    # Given a job SageMaker retried once inside itself (RetryStrategy) and a budget of 2
    policy = ResumePolicy(max_attempts=2, backoff_minutes=(0,))
    source = failed_description(
        "llm-sft-1", reason=ISE, SecondaryStatusTransitions=RETRIED_ONCE, RetryStrategy={"MaximumRetryAttempts": 1}
    )
    (first,) = resume(source, policy=policy).decisions
    # Then its clone (attempt 1 + 1 retry: within the budget) carries the retry down the lineage
    assert first.code == ResumeCode.CLONE and first.evidence["sagemaker_retries"] == 1
    tags = clone_tags(first)
    assert tags[TAG_RETRIES] == "1"
    # When the clone fails in turn, with no retry of its own
    clone = failed_description("llm-sft-1-r1", reason=ISE, RetryStrategy={"MaximumRetryAttempts": 1})
    (second,) = resume(clone, tags, policy).decisions
    # Then attempt 2 + the earlier retry exceed the budget: not resumed, and the record says why
    assert second.action is Action.NONE and second.code == ResumeCode.BUDGET_SPENT
    assert second.evidence["sagemaker_retries"] == 0 and second.evidence["sagemaker_retries_earlier"] == 1


def test_the_retries_of_every_generation_add_up_down_the_lineage() -> None:
    # Given the first clone, whose source SageMaker retried once, was itself retried once
    policy = ResumePolicy(max_attempts=4, backoff_minutes=(0,))
    tags = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_ATTEMPT: "1", TAG_RETRIES: "1"}
    clone = failed_description(
        "llm-sft-1-r1",
        reason=ISE,
        SecondaryStatusTransitions=RETRIED_ONCE,
        RetryStrategy={"MaximumRetryAttempts": 1},
    )
    (decision,) = resume(clone, tags, policy).decisions
    # Then the next clone (attempt 2 + 2 retries = 4: within the budget) carries both
    assert decision.code == ResumeCode.CLONE and clone_tags(decision)[TAG_RETRIES] == "2"


def test_a_job_governance_did_not_create_ignores_a_stray_retries_tag() -> None:
    # A job relaunched by hand with a copy of a clone's tags, but no lineage: a new lineage, nothing spent
    tags = {**TAGS, TAG_RETRIES: "5"}
    (decision,) = resume(failed_description(reason=ISE), tags, ResumePolicy(backoff_minutes=(0,))).decisions
    assert decision.code == ResumeCode.CLONE and TAG_RETRIES not in clone_tags(decision)


def test_a_clone_inherits_its_lineages_qualification() -> None:
    # A clone auto-resume made that failed on capacity before training is resumed within the budget.
    tags = {**TAGS, TAG_ROOT: "llm-sft-1", TAG_ATTEMPT: "1", TAG_REASON: "failed-transient"}
    description = failed_description("llm-sft-1-r1", trained=timedelta(0), reason="CapacityError: no capacity")
    (decision,) = resume(description, tags, ResumePolicy(min_training_hours=4, max_attempts=3)).decisions
    assert decision.action is Action.CLONE and decision.evidence["clone_name"] == "llm-sft-1-r2"


def test_a_storm_moves_clone_that_trained_minutes_is_not_worth_resuming() -> None:
    # Given the On-Demand clone a Spot storm move made of a job before it billed, which failed on an internal
    # error after 6 minutes of training: nothing in its lineage ever met min_training_hours
    tags = {**TAGS, TAG_ROOT: "new-job", TAG_ATTEMPT: "1", TAG_SOURCE: "new-job", TAG_REASON: "spot-storm"}
    description = failed_description("new-job-r1", trained=timedelta(minutes=6), reason=ISE)
    # When auto-resume decides on it
    (decision,) = resume(description, tags, ResumePolicy(backoff_minutes=(0,))).decisions
    # Then it is too short to resume, as the same failure of a job governance did not create would be
    assert decision.action is Action.NONE and decision.code == ResumeCode.TOO_SHORT
    (first,) = resume(failed_description("new-job", trained=timedelta(minutes=6), reason=ISE)).decisions
    assert first.code == ResumeCode.TOO_SHORT


def test_a_spot_fallbacks_clone_counts_its_sources_training() -> None:
    # Given the On-Demand clone of a Spot job that trained 3 h before it ran out of MaxWaitTimeInSeconds, the
    # clone failed on capacity before it trained at all
    tags = {
        **TAGS,
        TAG_ROOT: "bert-spot-1",
        TAG_ATTEMPT: "1",
        TAG_SOURCE: "bert-spot-1",
        TAG_REASON: "spot-max-wait",
    }
    description = failed_description("bert-spot-1-r1", trained=timedelta(0), reason="CapacityError: no capacity")
    source = as_job(spot_description(interruptions=3, status="Stopped", secondary="MaxWaitTimeExceeded"))
    # When auto-resume decides on it under a 2 h and a 4 h min_training_hours
    (resumed,) = resume(
        description, tags, ResumePolicy(min_training_hours=2, backoff_minutes=(0,)), source=source
    ).decisions
    (short,) = resume(
        description, tags, ResumePolicy(min_training_hours=4, backoff_minutes=(0,)), source=source
    ).decisions
    # Then the lineage's 3 h (its own and its source's) decide: resumed under 2 h, too short under 4 h
    assert resumed.code == ResumeCode.CLONE and resumed.evidence["lineage_training_hours"] == 3
    assert short.code == ResumeCode.TOO_SHORT and short.evidence["source_training_hours"] == 3
    # and a source that could not be found, or a job other than the one its tag names, counts nothing: the
    # clone's own training alone is too short
    (unknown,) = resume(description, tags, ResumePolicy(min_training_hours=2, backoff_minutes=(0,))).decisions
    assert unknown.code == ResumeCode.TOO_SHORT and unknown.evidence["lineage_training_hours"] == 0
    stranger = as_job(
        spot_description("bert-spot-2", interruptions=3, status="Stopped", secondary="MaxWaitTimeExceeded")
    )
    (other,) = resume(
        description, tags, ResumePolicy(min_training_hours=2, backoff_minutes=(0,)), source=stranger
    ).decisions
    assert other.code == ResumeCode.TOO_SHORT and other.evidence["lineage_training_hours"] == 0


def test_a_spot_move_of_an_auto_resumed_clone_inherits_its_sources_qualification() -> None:
    # Given llm-sft-1-r2, the On-Demand clone of llm-sft-1-r1 (on Spot, a clone auto-resume made after
    # llm-sft-1 trained long enough), each of the two having trained less than min_training_hours
    tags = {
        **TAGS,
        TAG_ROOT: "llm-sft-1",
        TAG_ATTEMPT: "2",
        TAG_SOURCE: "llm-sft-1-r1",
        TAG_REASON: "spot-max-wait",
    }
    description = failed_description("llm-sft-1-r2", trained=timedelta(minutes=6), reason=ISE)
    resumed_by_auto_resume = {
        **TAGS,
        TAG_ROOT: "llm-sft-1",
        TAG_ATTEMPT: "1",
        TAG_SOURCE: "llm-sft-1",
        TAG_REASON: "failed-transient",
    }
    spot_source = spot_description(
        "llm-sft-1-r1", interruptions=1, status="Stopped", secondary="MaxWaitTimeExceeded"
    )
    policy = ResumePolicy(min_training_hours=4, max_attempts=3, backoff_minutes=(0,))
    # When auto-resume decides on it with its source's tags read
    (decision,) = resume(description, tags, policy, source=as_job(spot_source, resumed_by_auto_resume)).decisions
    # Then it inherits the qualification the source's resume checked
    assert decision.code == ResumeCode.CLONE and decision.evidence["qualified_by"] == "llm-sft-1-r1"
    # while a source of another lineage, or one whose tags are not known, lends it none
    other = {**resumed_by_auto_resume, TAG_ROOT: "other-job"}
    (foreign,) = resume(description, tags, policy, source=as_job(spot_source, other)).decisions
    (untagged,) = resume(description, tags, policy, source=as_job(spot_source, {})).decisions
    assert foreign.code == untagged.code == ResumeCode.TOO_SHORT


def test_a_clone_whose_source_still_runs_is_not_resumed() -> None:
    # Given an On-Demand clone of a Spot job that failed transiently while its source (whose stop failed)
    # trains on: a second clone would bill beside the source and write the same checkpoint location
    tags = {**TAGS, TAG_ROOT: "bert-spot-7", TAG_ATTEMPT: "1", TAG_SOURCE: "bert-spot-7"}
    description = failed_description("bert-spot-7-r1", reason=ISE)
    policy = ResumePolicy(backoff_minutes=(0,))
    running = as_job(spot_description("bert-spot-7", interruptions=3, secondary="Training"))
    # When auto-resume decides on the clone
    result = resume(description, tags, policy, source=running)
    (decision,) = result.decisions
    # Then it is not resumed now but deferred to the reconciler (due at once: its next run decides again),
    # and the record names the source and its status
    assert decision.action is Action.NONE and decision.code == ResumeCode.DEFER_SOURCE_RUNNING
    assert result.resume_after is not None and result.plan is None
    assert decision.evidence["source_job"] == "bert-spot-7"
    assert decision.evidence["source_status"] == "InProgress/Training"
    # while a source stopped before the clone failed (a Spot move's stop), or gone (None), leaves the clone
    # to the usual checks
    stopped = as_job(spot_description("bert-spot-7", interruptions=3, status="Stopped", secondary="Stopped"))
    assert resume(description, tags, policy, source=stopped).decisions[0].code == ResumeCode.CLONE
    assert resume(description, tags, policy).decisions[0].code == ResumeCode.CLONE
    # but a source stopped after the clone failed was stopped by its owner, not by the move: not trained
    # again through its clone (nor one whose stop time is unknown)
    later = failed_description("bert-spot-7", trained=timedelta(hours=40), reason=ISE)
    later.update(TrainingJobStatus="Stopped", SecondaryStatus="Stopped", FailureReason=None)
    later["SecondaryStatusTransitions"][-1]["Status"] = "Stopped"
    owner_stopped = as_job(later)
    (skip,) = resume(description, tags, policy, source=owner_stopped).decisions
    assert skip.code == ResumeCode.SOURCE_STOPPED and skip.action is Action.NONE
    assert skip.evidence["source_stopped_at"] > skip.evidence["clone_failed_at"]
    # and a source that completed (the lineage finished) is not trained again: the record names it
    completed = as_job(spot_description("bert-spot-7", interruptions=3, status="Completed", secondary="Completed"))
    result = resume(description, tags, policy, source=completed)
    (skip,) = result.decisions
    assert skip.code == ResumeCode.SOURCE_COMPLETED and result.plan is None and result.resume_after is None
    assert skip.evidence["source_status"] == "Completed/Completed"


# ---- a clone's source that was stopped: when was its stop requested? -----------------------------------

_CLONE_FAILED = T0 + timedelta(hours=26, minutes=7)  # failed_description's Failed transition


def _stopped_source(
    stop_requested: timedelta | None,
    stopping: timedelta = timedelta(minutes=6),
    *,
    status: str = "Stopped",
    secondary: str | None = None,
) -> Any:
    """The Spot source ``bert-spot-7``, its stop requested ``stop_requested`` after its clone failed (negative:
    before; None: no Stopping transition, its Stopped one then lies at the same offset as ``stopping``), and
    Stopping for ``stopping`` (SIGTERM grace and the artifacts' upload: minutes) before it ends as ``status``
    / ``secondary`` (default: the status; e.g. ``Stopped``/``MaxRuntimeExceeded``, a stop for its runtime
    limit, which reads ``Stopping`` like any other while it stops)."""
    secondary = secondary or status
    requested = _CLONE_FAILED + (stop_requested if stop_requested is not None else -stopping)
    ending = [("Stopping", stopping)] if stop_requested is not None else []
    ending += [(secondary, timedelta(0))] if status != "Stopping" else []
    steps = [("Starting", timedelta(minutes=2)), ("Training", requested - T0 - timedelta(minutes=2)), *ending]
    history = transitions(*steps, open_last=status == "Stopping")
    doc = spot_description("bert-spot-7", interruptions=0, status=status, secondary=secondary)
    doc["SecondaryStatusTransitions"] = history
    if status != "Stopping":
        doc["TrainingEndTime"] = doc["LastModifiedTime"] = history[-1]["StartTime"]
    return as_job(doc)


def _clone_of_source(source: Any, policy: ResumePolicy | None = None, next_clone: Any = None) -> Any:
    tags = {**TAGS, TAG_ROOT: "bert-spot-7", TAG_ATTEMPT: "1", TAG_SOURCE: "bert-spot-7"}
    description = failed_description("bert-spot-7-r1", reason=ISE)
    policy = policy or ResumePolicy(backoff_minutes=(0,))
    return resume(description, tags, policy, source=source, next_clone=next_clone)


def test_a_stopped_source_is_timed_by_when_its_stop_was_requested() -> None:
    # Given the Spot move's own stop (e.g. a throttled move whose retry took over), requested 2 min BEFORE
    # the On-Demand clone failed, but Stopped 4 min after it (Stopping lasts minutes: SIGTERM grace, upload)
    move_stopped = _stopped_source(-timedelta(minutes=2))
    # When the clone's resume is decided (the reconciler, once the source is Stopped)
    (decision,) = _clone_of_source(move_stopped).decisions
    # Then it is the move's stop, not its owner's: the clone goes on to the usual checks and is resumed
    assert decision.code == ResumeCode.CLONE
    # Given the owner's stop, requested 2 min AFTER the clone failed
    (skip,) = _clone_of_source(_stopped_source(timedelta(minutes=2))).decisions
    # Then the lineage was stopped: not resumed, and the record times the stop by its request
    assert skip.code == ResumeCode.SOURCE_STOPPED and skip.action is Action.NONE
    assert skip.evidence["source_stopped_at"] == (_CLONE_FAILED + timedelta(minutes=2)).isoformat()
    assert skip.evidence["clone_failed_at"] == _CLONE_FAILED.isoformat()


def test_a_stopped_source_without_a_stopping_transition_is_timed_by_its_end() -> None:
    # Given a source whose history lists no Stopping transition: its Stopped transition (later than the
    # request: a stop that may have been the move's is taken for the owner's, never the other way round)
    before = _stopped_source(None, stopping=timedelta(minutes=3))  # Stopped 3 min before the clone failed
    after = _stopped_source(None, stopping=-timedelta(minutes=3))  # Stopped 3 min after it
    assert _clone_of_source(before).decisions[0].code == ResumeCode.CLONE
    assert _clone_of_source(after).decisions[0].code == ResumeCode.SOURCE_STOPPED
    # and with no transition at all, TrainingEndTime
    doc = spot_description("bert-spot-7", interruptions=0, status="Stopped", secondary="Stopped")
    doc.update(SecondaryStatusTransitions=[], TrainingEndTime=_CLONE_FAILED + timedelta(minutes=1))
    doc["LastModifiedTime"] = doc["TrainingEndTime"]
    (skip,) = _clone_of_source(as_job(doc)).decisions
    assert skip.code == ResumeCode.SOURCE_STOPPED
    assert skip.evidence["source_stopped_at"] == (_CLONE_FAILED + timedelta(minutes=1)).isoformat()
    # and when nothing tells when it stopped, nothing is guessed: no clone
    doc.pop("TrainingEndTime")
    doc.pop("LastModifiedTime")
    (skip,) = _clone_of_source(as_job(doc)).decisions
    assert skip.code == ResumeCode.SOURCE_STOPPED and skip.evidence["source_stopped_at"] is None


def test_a_source_still_stopping_after_the_clone_failed_defers_the_clone_until_it_has_ended() -> None:
    # Given a failed clone whose source's stop was requested 3 min after the clone failed and is still
    # Stopping: likely its owner's, but while it stops SecondaryStatus reads Stopping whatever the cause, so
    # a stop for the source's runtime limit (MaxRuntimeExceeded) cannot be told from it until it has ended
    stopping = _stopped_source(timedelta(minutes=3), status="Stopping")
    # When the clone's resume is decided (its own Failed event, or the reconciler's re-visit)
    result = _clone_of_source(stopping)
    (deferred,) = result.decisions
    # Then no clone is made while the source stops, and no final skip either: the clone is deferred (tagged
    # smgov:resume-after, due at once) so that the reconciler decides it once the source has ended
    assert deferred.code == ResumeCode.DEFER_SOURCE_STOPPING and deferred.action is Action.NONE
    assert result.plan is None and result.resume_after == NOW and not result.settled
    assert deferred.evidence["source_status"] == "Stopping/Stopping"
    assert deferred.evidence["source_stopped_at"] == (_CLONE_FAILED + timedelta(minutes=3)).isoformat()
    assert deferred.evidence["clone_failed_at"] == _CLONE_FAILED.isoformat()
    # and a Stopping source whose stop time is unknown is deferred the same way (no guess, no clone)
    doc = spot_description("bert-spot-7", interruptions=0, status="Stopping", secondary="Stopping")
    doc.update(SecondaryStatusTransitions=[])
    doc.pop("TrainingEndTime", None)
    doc.pop("LastModifiedTime", None)
    (unknown,) = _clone_of_source(as_job(doc)).decisions
    assert unknown.code == ResumeCode.DEFER_SOURCE_STOPPING and unknown.evidence["source_stopped_at"] is None
    # and however often it is decided again while the source still stops (duplicates, reconciler runs, a
    # next clone made by an earlier decision), it stays deferred: never a clone
    r2_tags = {**TAGS, TAG_ROOT: "bert-spot-7", TAG_ATTEMPT: "2", TAG_SOURCE: "bert-spot-7-r1"}
    r2 = as_job(describe("bert-spot-7-r2", TrainingJobStatus="InProgress", SecondaryStatus="Training"), r2_tags)
    for next_clone in (None, r2):
        again = _clone_of_source(stopping, next_clone=next_clone)
        assert again.decisions[0].code == ResumeCode.DEFER_SOURCE_STOPPING and again.clone is None
    # When the source has ended: Stopped by that stop (Stopped/Stopped), the owner's: a final skip, settled
    result = _clone_of_source(_stopped_source(timedelta(minutes=3)))
    assert result.decisions[0].code == ResumeCode.SOURCE_STOPPED and result.settled and result.resume_after is None
    # but Stopped at its runtime limit (no owner's stop), or Failed, the usual checks decide: resumed
    for secondary in ("MaxRuntimeExceeded", "MaxWaitTimeExceeded"):
        limit = _stopped_source(timedelta(minutes=3), secondary=secondary)
        assert _clone_of_source(limit).decisions[0].code == ResumeCode.CLONE
    failed = _stopped_source(timedelta(minutes=3), status="Failed")
    assert _clone_of_source(failed).decisions[0].code == ResumeCode.CLONE
    # while the Spot move's own stop, requested before the clone failed and still Stopping, leaves the clone
    # to the usual checks as before
    assert _clone_of_source(_stopped_source(-timedelta(minutes=2), status="Stopping")).decisions[0].code == (
        ResumeCode.CLONE
    )


def test_a_source_skip_gives_way_to_the_next_clone_an_earlier_attempt_made() -> None:
    # Given a failed clone whose next clone -r2 exists and trains (an earlier decision made it, e.g. before
    # the source's stop was seen, and its owner may not have been told), and whose source is now stopped by
    # its owner, or completed
    stopped = _stopped_source(timedelta(minutes=40))
    doc = spot_description("bert-spot-7", interruptions=3, status="Completed", secondary="Completed")
    completed = as_job(doc)
    r2_tags = {**TAGS, TAG_ROOT: "bert-spot-7", TAG_ATTEMPT: "2", TAG_SOURCE: "bert-spot-7-r1"}
    running = as_job(
        describe("bert-spot-7-r2", TrainingJobStatus="InProgress", SecondaryStatus="Training"), r2_tags
    )
    for source in (stopped, completed):
        # When the clone's resume is decided again (a retry, or the reconciler's hand-back of an untold clone)
        (decision,) = _clone_of_source(source, next_clone=running).decisions
        # Then it is the same resume, meeting "already exists" (its owner told once), not a "not resumed"
        # recorded beside a running -r2
        assert decision.code == ResumeCode.CLONE and decision.evidence["clone_name"] == "bert-spot-7-r2"
    # but another job under that name, or a next clone that failed or was stopped, changes nothing
    others = as_job(describe("bert-spot-7-r2", TrainingJobStatus="InProgress"), {**r2_tags, TAG_SOURCE: "x"})
    failed = as_job(describe("bert-spot-7-r2", TrainingJobStatus="Failed", SecondaryStatus="Failed"), r2_tags)
    for existing in (others, failed):
        assert _clone_of_source(stopped, next_clone=existing).decisions[0].code == ResumeCode.SOURCE_STOPPED
        assert _clone_of_source(completed, next_clone=existing).decisions[0].code == ResumeCode.SOURCE_COMPLETED


def test_checkpoints_are_required_by_default() -> None:
    description = failed_description(checkpoint=False)
    (decision,) = resume(description).decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.NO_CHECKPOINT
    (decision,) = resume(description, policy=ResumePolicy(require_checkpoint=False)).decisions
    assert decision.action is Action.CLONE and decision.code == ResumeCode.CLONE
    assert decision.request is not None and "CheckpointConfig" not in decision.request  # from scratch


def test_audit_mode_plans_but_does_not_act() -> None:
    (decision,) = resume(failed_description(), mode=Mode.AUDIT).decisions
    assert decision.action is Action.CLONE and not decision.acts
    assert decision.request is not None
    (decision,) = resume(failed_description(), mode=Mode.AUDIT, policy=ResumePolicy(mode=Mode.ENFORCE)).decisions
    assert decision.acts  # the section's mode wins over the policy's


def test_disabled_and_disallowed_roles_do_nothing() -> None:
    (decision,) = resume(failed_description(), policy=ResumePolicy(enabled=False)).decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.DISABLED
    (decision,) = resume(failed_description(), roles=("ml-training-*",)).decisions
    assert decision.action is Action.NONE and decision.code == ResumeCode.ROLE_NOT_ALLOWED


def test_a_job_that_did_not_fail_is_not_resumed() -> None:
    description = failed_description(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    (decision,) = resume(description).decisions
    assert decision.action is Action.NONE


# ---- Spot fallback --------------------------------------------------------------------------------


def test_without_economics_below_the_count_rule_nothing_happens() -> None:
    # Given no checkpoint listing (the economics lack data), When interrupted twice
    (decision,) = spot(spot_description(interruptions=2)).decisions
    # Then the count rule decides, and the record says why
    assert decision.action is Action.NONE and decision.code == SpotCode.BELOW_THRESHOLD
    assert decision.evidence["count_rule_interruptions"] == 3
    assert decision.evidence["economics"] == "unavailable"
    assert "not listed" in decision.evidence["economics_note"]


def test_without_economics_at_the_count_rule_the_spot_job_is_cloned_on_demand_then_stopped() -> None:
    result = spot(spot_description(interruptions=3))
    assert [d.action for d in result.decisions] == [Action.CLONE, Action.STOP]
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_COUNT_RULE, SpotCode.STOP_COUNT_RULE]
    assert result.stop_source and result.plan is not None
    assert result.plan.request["EnableManagedSpotTraining"] is False
    assert "MaxWaitTimeInSeconds" not in result.plan.request["StoppingCondition"]
    assert result.decisions[0].evidence["interruptions"] == 3


def test_spot_without_checkpoint_is_not_moved_unless_the_policy_says_so() -> None:
    description = spot_description(checkpoint=False)
    (decision,) = spot(description).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.NO_CHECKPOINT
    result = spot(description, SpotPolicy(require_checkpoint=False))
    assert [d.action for d in result.decisions] == [Action.CLONE, Action.STOP]


def test_max_wait_exceeded_falls_back_when_allowed() -> None:
    description = spot_description(interruptions=1, status="Stopped", secondary="MaxWaitTimeExceeded")
    result = spot(description)
    assert [d.action for d in result.decisions] == [Action.CLONE]  # it has ended: nothing to stop
    assert not result.stop_source
    assert result.decisions[0].code == SpotCode.CLONE_MAX_WAIT
    (decision,) = spot(description, SpotPolicy(fallback_on_max_wait=False)).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.NO_FALLBACK_ON_MAX_WAIT


def test_a_job_no_longer_running_is_not_stopped_or_cloned() -> None:
    description = spot_description(status="Stopping", secondary="Stopping")
    (decision,) = spot(description).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.NOT_IN_PROGRESS


def test_a_late_interrupted_event_of_a_job_that_trains_again_moves_nothing() -> None:
    # Given the third interruption's event (the count rule's threshold), handled late or retried: the job
    # re-read is back in Training
    event = spot_description(interruptions=3)
    training = spot_description(interruptions=3, secondary="Training")
    # When Spot fallback decides on it
    (decision,) = spot(training, reported=event).decisions
    # Then nothing is cloned or stopped, and the record says the interruption is over
    assert decision.action is Action.NONE and decision.code == SpotCode.NO_LONGER_INTERRUPTED
    assert decision.evidence["secondary_status"] == "Training"
    assert (
        decision.evidence["reported_interruption_at"]
        == event["SecondaryStatusTransitions"][-1]["StartTime"].isoformat()
    )
    # and without an event to compare with (a decision by hand), the status alone says the same
    assert spot(training).decisions[0].code == SpotCode.NO_LONGER_INTERRUPTED


@pytest.mark.parametrize("waiting", ["Starting", "Pending"])
def test_a_job_waiting_for_capacity_after_its_interruption_is_still_in_it(waiting: str) -> None:
    # Given the third interruption's event, and the job re-read in the capacity wait that follows it (AWS's
    # Managed Spot lifecycle: Interrupted -> Starting -> Downloading -> Training; Pending is "waiting for
    # compute capacity": botocore's SecondaryStatus documentation)
    event = spot_description(interruptions=3)
    waits = spot_description(interruptions=3, secondary=waiting)
    # When Spot fallback decides on it
    result = spot(waits, reported=event)
    # Then it is still that interruption: the count rule moves it as if it were re-read Interrupted
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_COUNT_RULE, SpotCode.STOP_COUNT_RULE]
    assert result.decisions[0].evidence["secondary_status"] == waiting
    assert (
        result.decisions[0].evidence["current_interruption_at"]
        == result.decisions[0].evidence["reported_interruption_at"]
    )


def test_a_job_billed_again_after_its_interruption_is_out_of_it() -> None:
    # Given the third interruption's event, the job re-read Downloading or Uploading after it (billed)
    event = spot_description(interruptions=3)
    for billed in ("Downloading", "Uploading"):
        (decision,) = spot(spot_description(interruptions=3, secondary=billed), reported=event).decisions
        # Then the interruption is over
        assert decision.code == SpotCode.NO_LONGER_INTERRUPTED
    # and a job waiting with no interruption on record (transitions unreadable) is not taken for one
    waits = spot_description(interruptions=3, secondary="Starting")
    waits["SecondaryStatusTransitions"] = None
    (decision,) = spot(waits, reported=event).decisions
    assert decision.code == SpotCode.NO_LONGER_INTERRUPTED


def test_an_event_of_an_earlier_interruption_leaves_the_current_one_to_its_own_event() -> None:
    # Given the event of the third interruption, and the job re-read in its fourth
    third, fourth = spot_description(interruptions=3), spot_description(interruptions=4)
    (decision,) = spot(fourth, reported=third).decisions
    # Then the late event moves nothing; both interruptions are in the record
    assert decision.action is Action.NONE and decision.code == SpotCode.NO_LONGER_INTERRUPTED
    assert decision.evidence["reported_interruption_at"] != decision.evidence["current_interruption_at"]
    # and the fourth interruption's own event decides as usual (the count rule, no numbers)
    moved = spot(fourth, reported=fourth)
    assert [d.code for d in moved.decisions] == [SpotCode.CLONE_COUNT_RULE, SpotCode.STOP_COUNT_RULE]


def test_a_job_that_ended_at_max_wait_is_resumed_whichever_event_brought_the_news() -> None:
    # Given an interruption's event, and the job re-read after it ended with MaxWaitTimeExceeded
    event = spot_description(interruptions=1)
    ended = spot_description(interruptions=1, status="Stopped", secondary="MaxWaitTimeExceeded")
    # Then it is resumed On-Demand, as its own end event would (nothing to stop)
    result = spot(ended, reported=event)
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_MAX_WAIT] and not result.stop_source


def clone_of(source: str, status: str = "InProgress", **tags: str) -> Any:
    """The job under ``<source>-r1``, as DescribeTrainingJob and ListTags say (an On-Demand clone)."""
    doc = spot_description(f"{source}-r1", interruptions=0, secondary="Training")
    doc.update(TrainingJobStatus=status, EnableManagedSpotTraining=False)
    lineage = {TAG_ROOT: source, TAG_ATTEMPT: "1", TAG_SOURCE: source, TAG_REASON: "spot-interrupted"}
    return as_job(doc, {**TAGS, **lineage, **tags})


def takeover(source: dict[str, Any], clone: Any, mode: Mode = Mode.ENFORCE) -> Any:
    return decide_spot_takeover(as_job(source), clone, spot=SpotPolicy(), default_mode=mode)


def test_a_move_whose_clone_exists_is_finished_by_stopping_the_spot_job_whatever_it_does_now() -> None:
    # Given a Spot job training again (a fresh verdict would move nothing) and its On-Demand clone running
    training = spot_description(interruptions=3, secondary="Training")
    assert next_clone_name("bert-spot-1", TAGS) == "bert-spot-1-r1"
    result = takeover(training, clone_of("bert-spot-1"))
    # Then the move is finished: a stop of the Spot job, with its own code, handing over to the clone
    assert result is not None and result.stop_source and result.plan is None
    (stop,) = result.decisions
    assert (stop.action, stop.code) == (Action.STOP, SpotCode.STOP_CLONE_EXISTS) and stop.acts
    assert stop.evidence["clone_name"] == "bert-spot-1-r1" and stop.evidence["on_demand"] is True
    assert result.takes_over is not None and result.takes_over.name == "bert-spot-1-r1"
    # and in audit mode it is only recorded
    (audited,) = takeover(training, clone_of("bert-spot-1"), Mode.AUDIT).decisions
    assert audited.code == SpotCode.STOP_CLONE_EXISTS and not audited.acts


def test_only_a_running_clone_of_this_very_job_finishes_a_move() -> None:
    training = spot_description(interruptions=3, secondary="Training")
    assert takeover(training, None) is None  # no job under the clone's name
    # a job under the name, but another job's clone, or nobody's: not ours to finish
    assert takeover(training, clone_of("bert-spot-1", **{TAG_SOURCE: "someone-else"})) is None
    not_ours = clone_of("bert-spot-1")
    assert takeover(training, not_ours.with_tags(TAGS)) is None
    # our clone, but it failed or was stopped: the Spot job is all there is, it keeps running
    assert takeover(training, clone_of("bert-spot-1", status="Failed")) is None
    assert takeover(training, clone_of("bert-spot-1", status="Stopped")) is None
    # the Spot job already stopping or stopped: the move is finished, nothing left to stop (the service
    # tells the owner when an earlier attempt stopped it and failed before telling)
    for status in ("Stopping", "Stopped"):
        ending = spot_description(interruptions=3, status=status, secondary=status)
        finished = takeover(ending, clone_of("bert-spot-1"))
        assert finished is not None and not finished.stop_source
        assert finished.decisions[0].code == SpotCode.STOP_CLONE_EXISTS
        assert finished.takes_over is not None and finished.takes_over.name == "bert-spot-1-r1"
    # a job that ended otherwise (it failed) is not a move's source
    failed = spot_description(interruptions=3, status="Failed", secondary="Failed")
    assert takeover(failed, clone_of("bert-spot-1")) is None


def test_on_demand_jobs_have_no_spot_fallback() -> None:
    description = spot_description()
    description["EnableManagedSpotTraining"] = False
    (decision,) = spot(description).decisions
    assert decision.action is Action.NONE and decision.code == SpotCode.NOT_SPOT


# ---- policy defaults from the template ----------------------------------------------------------


def test_template_parameters_become_the_resume_and_spot_sections() -> None:
    settings = Settings.from_env(
        {
            "AUTO_RESUME": "disabled",
            "RESUME_MIN_TRAINING_HOURS": "6",
            "RESUME_MAX_ATTEMPTS": "4",
            "RESUME_REQUIRE_CHECKPOINT": "false",
            "SPOT_MAX_INTERRUPTIONS": "5",
            "SPOT_FALLBACK_ON_MAX_WAIT": "false",
        }
    )
    policy = Policy.model_validate(settings.base_policy_document())
    assert policy.resume == ResumePolicy(
        enabled=False, min_training_hours=6, max_attempts=4, require_checkpoint=False
    )
    assert policy.spot == SpotPolicy(
        max_interruptions=5, fallback_on_max_wait=False, max_attempts=4, require_checkpoint=False
    )
    assert Policy.model_validate(Settings.from_env({}).base_policy_document()).spot.max_interruptions == 8
    # the policy document (and a team) may still override them
    assert policy.overlay({"resume": {"enabled": True}}).resume.min_training_hours == 6


@pytest.mark.parametrize("section", [ResumePolicy, SpotPolicy])
def test_section_docstring_examples_are_valid_policies(section: type) -> None:
    import textwrap

    import yaml

    doc = section.__doc__ or ""
    example = yaml.safe_load(textwrap.dedent(doc.split("Example:", 1)[1]))
    policy = Policy.model_validate(example)
    assert policy.model_dump()[next(iter(example))] != {}


def test_a_reread_whose_history_ends_before_the_reported_interruption_lags_the_event() -> None:
    # Given the third interruption's event, and DescribeTrainingJob answering from before it (Training, its
    # history ending when the third stint began)
    event = spot_description(interruptions=3)
    history = [dict(t) for t in event["SecondaryStatusTransitions"][:-1]]
    history[-1].pop("EndTime")
    lagging = {**event, "SecondaryStatus": "Training", "SecondaryStatusTransitions": history}
    began = event["SecondaryStatusTransitions"][-1]["StartTime"]
    # Then the re-read lags: it does not know the interruption yet
    assert interruption_unseen(as_job(lagging), as_job(event)) == began
    # while a re-read that knows it (still in it, waiting for capacity, training again after it) does not
    for secondary in ("Interrupted", "Starting", "Training"):
        assert (
            interruption_unseen(as_job(spot_description(interruptions=3, secondary=secondary)), as_job(event))
            is None
        )
    # nor does one that lists no history, one whose job has ended, or an event that is no interruption
    unsaid = {**lagging, "SecondaryStatusTransitions": None}
    assert interruption_unseen(as_job(unsaid), as_job(event)) is None
    stopped = spot_description(interruptions=2, status="Stopped", secondary="Stopped")
    assert interruption_unseen(as_job(stopped), as_job(event)) is None
    training_event = spot_description(interruptions=3, secondary="Training")
    assert interruption_unseen(as_job(lagging), as_job(training_event)) is None


def test_an_interruption_event_without_its_interrupted_transition_is_dated_by_its_last_modified_time() -> None:
    # Given the third interruption's event that left its transitions out, read again while DescribeTrainingJob
    # still answered from before it: the event takes the re-read's history, which ends in Training
    event = spot_description(interruptions=3)
    began = event["SecondaryStatusTransitions"][-1]["StartTime"]
    history = [dict(t) for t in event["SecondaryStatusTransitions"][:-1]]
    history[-1].pop("EndTime")
    lagging = {
        **event,
        "SecondaryStatus": "Training",
        "SecondaryStatusTransitions": history,
        "LastModifiedTime": history[-1]["StartTime"],
    }
    said = {**event, "SecondaryStatusTransitions": history, "LastModifiedTime": began}
    # Then the re-read, last modified before the event, lags it as of the event's own LastModifiedTime (the
    # status change): retried, not judged an interruption that is over
    assert interruption_unseen(as_job(lagging), as_job(said)) == began
    # while a re-read that is itself Interrupted knows it, and an event without a LastModifiedTime says nothing
    assert interruption_unseen(as_job({**lagging, "SecondaryStatus": "Interrupted"}), as_job(said)) is None
    assert interruption_unseen(as_job(lagging), as_job({**said, "LastModifiedTime": None})) is None
    # and a re-read waiting for capacity after the interruption (Pending, no recorded transition either), modified
    # at or after the event, or one that does not say when it changed, is no lag: never retried until dead-lettered
    pending = {**lagging, "SecondaryStatus": "Pending"}
    for changed in (began, began + timedelta(minutes=3)):
        assert interruption_unseen(as_job({**pending, "LastModifiedTime": changed}), as_job(said)) is None
    assert interruption_unseen(as_job({**pending, "LastModifiedTime": None}), as_job(said)) is None


@pytest.mark.parametrize(
    ("event", "reread", "behind"),
    [
        # an end the re-read does not know yet: it still runs, or stops (a job never leaves an end)
        (("Failed", "Failed"), ("InProgress", "Training"), True),
        (("Failed", "Failed"), ("Stopping", "Stopping"), True),
        (("Stopped", "MaxWaitTimeExceeded"), ("InProgress", "Interrupted"), True),
        (("Stopped", "MaxWaitTimeExceeded"), ("Stopping", "Stopping"), True),
        (("Failed", "MaxWaitTimeExceeded"), ("InProgress", "Starting"), True),
        (("Completed", "Completed"), ("InProgress", "Uploading"), True),
        # a re-read that has ended is judged as read, even an end other than the event's
        (("Failed", "Failed"), ("Failed", "Failed"), False),
        (("Failed", "Failed"), ("Stopped", "Stopped"), False),
        (("Stopped", "MaxWaitTimeExceeded"), ("Completed", "Completed"), False),
        # an event of a running or stopping job reports no end
        (("InProgress", "Interrupted"), ("InProgress", "Training"), False),
        (("Stopping", "Stopping"), ("InProgress", "Training"), False),
    ],
)
def test_a_reread_that_still_runs_after_an_ended_event_lags_it(
    event: tuple[str, str], reread: tuple[str, str], behind: bool
) -> None:
    # Given an event of the job in one state and DescribeTrainingJob's answer in another
    reported = as_job(spot_description(interruptions=1, status=event[0], secondary=event[1]))
    fresh = as_job(spot_description(interruptions=1, status=reread[0], secondary=reread[1]))
    # Then the answer lags the event exactly when the event says the job ended and the answer that it has not
    assert end_unseen(fresh, reported) is behind


def test_the_reported_interruption_is_the_current_one_within_a_second() -> None:
    # Given the event's interruption start in epoch milliseconds and DescribeTrainingJob's a fraction of a second
    # apart (two readings of one transition)
    event = spot_description(interruptions=3)
    reread = spot_description(interruptions=3)
    reread["SecondaryStatusTransitions"][-1]["StartTime"] += timedelta(milliseconds=400)
    # Then it is the same interruption, and the count rule moves the job
    result = spot(reread, reported=event)
    assert [d.code for d in result.decisions] == [SpotCode.CLONE_COUNT_RULE, SpotCode.STOP_COUNT_RULE]
