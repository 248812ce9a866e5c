"""A failure's classification interrupted by the service's time budget (PatternTimeout) names the signature whose
search it interrupted; the decision made of it is resume.skip.diagnosis-timeout: no clone, settled."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT, PatternTimeout
from sagemaker_governance.domain.failure_evidence import FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.failure_signatures import Role, Signature
from sagemaker_governance.domain.failures import builtin_taxonomy, classify
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.recovery_policy import ResumePolicy
from sagemaker_governance.domain.resume import ResumeCode, diagnosis_timed_out
from tests.resume_builders import T0, TAGS, failed_description

NOW = T0 + timedelta(days=3)


class Interrupting:
    """A compiled pattern whose ``at``-th search the budget's signal interrupts (the interruption, injected)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.searches = 0

    def search(self, text: str) -> None:
        self.searches += 1
        if self.searches == self.at:
            raise PatternTimeout(20.0)


PATTERNS: dict[str, Interrupting] = {}


class InterruptedSignature(Signature):
    @property
    def regex(self) -> Any:
        return PATTERNS[self.id]


def evidence(*lines: str) -> FailureEvidence:
    host = HostLog("algo-1", "llm-sft-1/algo-1-1700000000", tuple(LogLine(line) for line in lines))
    return FailureEvidence(hosts=(host,), logs_read=True, hosts_total=1)


@pytest.mark.parametrize(
    ("role", "at"),
    [
        (Role.CAUSE, 1),  # among the matches
        (Role.CONSEQUENCE, 4),  # after the 3 lines' matches: which lines only report a consequence
    ],
)
def test_an_interrupted_search_is_named_after_its_signature(role: Role, at: int) -> None:
    # Given a team's signature whose search the budget interrupts
    PATTERNS["team-slow"] = Interrupting(at)
    slow = InterruptedSignature.model_validate(
        {"id": "team-slow", "class": "interconnect", "pattern": r"MYPLUGIN \w+ lost", "role": role}
    )
    taxonomy = builtin_taxonomy().with_team([slow], {})
    # When the failure is classified
    with pytest.raises(PatternTimeout) as raised:
        classify("AlgorithmError: ExitCode 1", evidence("step 900", "RuntimeError: boom"), taxonomy)
    # Then the timeout names the signature and its pattern, where it came
    assert PATTERNS["team-slow"].searches == at
    assert (raised.value.subject, raised.value.pattern, raised.value.seconds) == (
        "signature team-slow",
        r"MYPLUGIN \w+ lost",
        20.0,
    )


def test_a_diagnosis_that_did_not_finish_clones_nothing_and_is_settled() -> None:
    # Given a failed job whose diagnosis ran out of its budget on a team's signature
    job = TrainingJob.model_validate({**failed_description("llm-sft-1"), "Tags": TAGS})
    timeout = PatternTimeout(20.0).naming(r"MYPLUGIN \w+ lost", "signature team-slow")
    # When auto-resume decides on it
    result = diagnosis_timed_out(job, resume=ResumePolicy(), default_mode=Mode.ENFORCE, now=NOW, timeout=timeout)
    # Then nothing is cloned, the decision is final, and it names the signature and its budget
    (decision,) = result.decisions
    assert (decision.code, decision.action, decision.mode) == (
        ResumeCode.DIAGNOSIS_TIMEOUT,
        Action.NONE,
        Mode.ENFORCE,
    )
    assert result.settled and not result.again and result.plan is None and result.resume_after is None
    assert decision.evidence[PATTERN_TIMEOUT] == {
        "subject": "signature team-slow",
        "pattern": r"MYPLUGIN \w+ lost",
        "bound_seconds": 20.0,
    }
