"""Auto-resume (service/resume.py) with a diagnosis budget that runs out: no clone, resume.skip.diagnosis-timeout
recorded and settled (a deferred job is tagged smgov:resume-settled), and an error names the team and the
signature. One budget covers the whole diagnosis, both classifications of a job whose hosts are all read."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.clone import TAG_RESUME_AFTER, TAG_RESUME_SETTLED, CreateOutcome
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT, PatternTimeout, StopOutcome
from sagemaker_governance.domain.failure_evidence import FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.resume import ResumeCode, resume_after_tag
from sagemaker_governance.service.ports import Bounded
from sagemaker_governance.service.recording import Trigger
from sagemaker_governance.service.resume import DIAGNOSIS_SECONDS, AutoResumeReaction
from tests.resume_builders import T0, TAGS, failed_description, shape
from tests.service.conftest import FakeNotifier, FixedPolicies

T = TypeVar("T")
NOW = T0 + timedelta(days=3)
EVENT = Trigger(kind="event", event_id="e-1")
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"  # a hardware fault: resumed when diagnosed


class Budgets:
    """``TimeBound`` whose budgets let ``runs`` works finish, then run out during the next (the interruption,
    injected, named as the domain names it)."""

    def __init__(self, runs: int = 0) -> None:
        self.runs = runs
        self.opened: list[float] = []

    def __call__(self, seconds: float) -> Bounded:
        self.opened.append(seconds)
        finished: list[object] = []

        def bounded(work: Callable[[], T]) -> T:
            if len(finished) == self.runs:
                raise PatternTimeout(seconds).naming(r"MYPLUGIN \w+ lost", "signature team-slow")
            result = work()
            finished.append(result)
            return result

        return bounded


class SageMaker:
    """``JobsPort``, ``LauncherPort`` and ``EvaluationMarksPort`` over one failed job."""

    def __init__(
        self, tags: dict[str, str], reason: str = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1"
    ) -> None:
        self.description = failed_description("llm-sft-1", reason=reason)
        self.job_tags = dict(tags)
        self.calls: list[str] = []

    def job(self) -> TrainingJob:
        return TrainingJob.model_validate({**self.description, "Tags": self.job_tags})

    def describe(self, name: str) -> dict[str, Any]:
        return dict(self.description)

    def list_tags(self, arn: str) -> dict[str, str]:
        return dict(self.job_tags)

    def get_job(self, name: str, tags: Any = None) -> TrainingJob:
        raise AssertionError("auto-resume re-reads with describe and list_tags")

    def stop(self, name: str) -> StopOutcome:
        self.calls.append(f"stop {name}")
        return StopOutcome.STOPPED

    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome:
        self.calls.append(f"create {request['TrainingJobName']}")
        return CreateOutcome.CREATED

    def mark(self, arn: str, key: str, value: str) -> None:
        self.calls.append(f"tag {key}={value}")


class Logs:
    """``FailureLogsPort``: ``total`` hosts whose tails are ``lines``, ``algo-1``'s ending with ``last``."""

    def __init__(self, total: int, last: str) -> None:
        self.total = total
        self.last = last
        self.reads: list[int] = []  # the hosts asked for, read by read

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        self.reads.append(hosts)
        logs = tuple(
            HostLog(
                f"algo-{n}",
                f"{job_name}/algo-{n}-1700000000",
                (LogLine("step 900"), *((LogLine(self.last),) if n == 1 else ())),
            )
            for n in range(1, min(hosts, self.total) + 1)
        )
        return FailureEvidence(hosts=logs, logs_read=True, hosts_total=self.total)


def reaction(budgets: Budgets, sagemaker: SageMaker, logs: Logs, audit: MemoryAuditSink) -> AutoResumeReaction:
    return AutoResumeReaction(
        sagemaker,
        sagemaker,
        FakeNotifier(lambda entry: None),  # type: ignore[arg-type]
        FixedPolicies(Policy.model_validate({"mode": "enforce"})),
        audit,
        clock=lambda: NOW,
        shape=shape,
        role_patterns=("*SageMaker*",),
        metrics=MemoryBusinessMetrics(),
        logs=logs,
        marks=sagemaker,
        bound=budgets,
    )


def errors(log_output: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_output.getvalue().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("level") == "ERROR"]


def test_a_diagnosis_in_time_resumes_the_job() -> None:
    # Given a job that failed on an ECC error, its diagnosis finishing within its budget
    sagemaker, audit = SageMaker(TAGS), MemoryAuditSink()
    react = reaction(Budgets(runs=2), sagemaker, Logs(2, ECC), audit)
    # When auto-resume reacts to its Failed event
    (decision,) = react.react(sagemaker.job(), EVENT)
    # Then it is resumed, as without a budget
    assert decision.code == ResumeCode.CLONE and any(c.startswith("create") for c in sagemaker.calls)


def test_a_diagnosis_out_of_time_clones_nothing_and_names_the_signature(log_output: io.StringIO) -> None:
    # Given the same job, whose diagnosis runs out of its budget
    budgets, sagemaker, audit = Budgets(), SageMaker(TAGS), MemoryAuditSink()
    react = reaction(budgets, sagemaker, Logs(2, ECC), audit)
    # When auto-resume reacts to its Failed event
    (decision,) = react.react(sagemaker.job(), EVENT)
    # Then nothing is cloned: the diagnosis did not finish, recorded with the signature and the budget
    assert decision.code == ResumeCode.DIAGNOSIS_TIMEOUT and sagemaker.calls == []
    assert [(r.code, r.outcome.value) for r in audit.records] == [(ResumeCode.DIAGNOSIS_TIMEOUT, "no-action")]
    assert decision.evidence[PATTERN_TIMEOUT] == {
        "subject": "signature team-slow",
        "pattern": r"MYPLUGIN \w+ lost",
        "bound_seconds": DIAGNOSIS_SECONDS,
    }
    assert budgets.opened == [DIAGNOSIS_SECONDS]
    # And an error names the team and the signature, for the platform team to fix the document
    (error,) = errors(log_output)
    assert (error["team"], error["subject"]) == (TAGS["team"], "signature team-slow")


def test_a_deferred_job_whose_diagnosis_runs_out_of_time_is_settled() -> None:
    # Given a failed job deferred before (tagged smgov:resume-after), whose diagnosis runs out of its budget
    sagemaker = SageMaker({**TAGS, TAG_RESUME_AFTER: resume_after_tag(NOW - timedelta(minutes=5))})
    react = reaction(Budgets(), sagemaker, Logs(2, ECC), MemoryAuditSink())
    # When the reconciler hands it back to auto-resume
    react.react(sagemaker.job(), Trigger(kind="reconciler"))
    # Then it is settled: the same signature would run out of time on the same lines at every later run
    assert sagemaker.calls == [f"tag {TAG_RESUME_SETTLED}={ResumeCode.DIAGNOSIS_TIMEOUT}@llm-sft-1"]


def test_one_budget_covers_both_classifications_of_a_job_whose_hosts_are_all_read() -> None:
    # Given a 12-host job whose first 8 hosts' tails show no cause (so every host is read and classified
    # again), in a budget that runs out during the second classification
    budgets, sagemaker, logs = Budgets(runs=1), SageMaker(TAGS), Logs(12, "step 901")
    react = reaction(budgets, sagemaker, logs, MemoryAuditSink())
    # When auto-resume reacts to its Failed event
    (decision,) = react.react(sagemaker.job(), EVENT)
    # Then both reads were made, in one budget, and nothing is cloned
    assert logs.reads == [8, 64] and budgets.opened == [DIAGNOSIS_SECONDS]
    assert decision.code == ResumeCode.DIAGNOSIS_TIMEOUT and sagemaker.calls == []
