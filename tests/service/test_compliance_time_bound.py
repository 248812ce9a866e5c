"""Compliance (service/compliance.py) with a time budget that runs out during a required tag's pattern match: the
rule is inconclusive and recorded with its pattern, nothing is stopped on it, the other rules still act, the job
is marked evaluated, and an error names the team, the rule and the pattern."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.compliance import EVALUATED_TAG, ComplianceCode
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT, PatternTimeout
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.service.compliance import TAG_PATTERN_SECONDS, ComplianceService
from sagemaker_governance.service.ports import Bounded
from sagemaker_governance.service.recording import Trigger
from tests.builders import job
from tests.service.conftest import NOW

T = TypeVar("T")
TRIGGER = Trigger(kind="job-state-change", event_id="e-1")
PATTERN = "cc-[0-9]{4}"


class Marks:
    def __init__(self, calls: Any) -> None:
        self.calls = calls

    def mark(self, arn: str, key: str, value: str) -> None:
        self.calls(f"mark {arn.rsplit('/', 1)[-1]} {key}")


class ExpiringBudgets:
    """``TimeBound`` whose budgets run out during any work run in them (the interruption, injected)."""

    def __init__(self) -> None:
        self.opened: list[float] = []

    def __call__(self, seconds: float) -> Bounded:
        self.opened.append(seconds)

        def bounded(work: Callable[[], T]) -> T:
            raise PatternTimeout(seconds)

        return bounded


@pytest.fixture
def budgets() -> ExpiringBudgets:
    return ExpiringBudgets()


@pytest.fixture
def compliance(
    jobs: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, calls: Any, budgets: ExpiringBudgets
) -> ComplianceService:
    policies.policy = build_policy(
        {
            "mode": "enforce",
            "rules": [
                {"type": "required-tags", "tags": {"team": {}, "cost-center": {"pattern": PATTERN}}},
                {"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.g5.*"]},
            ],
        }
    )
    return ComplianceService(jobs, notifier, policies, audit, lambda: NOW, marks=Marks(calls), bound=budgets)


def errors(log_output: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_output.getvalue().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("level") == "ERROR"]


def test_a_pattern_out_of_time_stops_nothing_and_names_the_pattern(
    compliance: ComplianceService,
    jobs: Any,
    audit: MemoryAuditSink,
    calls: Any,
    budgets: ExpiringBudgets,
    log_output: io.StringIO,
) -> None:
    # Given a job whose cost-center pattern runs out of time on its value (and SageMaker describes it so)
    jobs.jobs["job-1"] = job()
    # When its first InProgress event is evaluated
    decisions = compliance.react(job(), TRIGGER)
    # Then the rule is inconclusive: nothing is stopped or told, the job is marked evaluated
    assert [d.code for d in decisions] == [ComplianceCode.INCONCLUSIVE]
    assert "stop job-1" not in calls.log and not any(c.startswith("notify") for c in calls.log)
    assert f"mark job-1 {EVALUATED_TAG}" in calls.log
    # And the record carries the pattern, the tag and the budget (one per match, of TAG_PATTERN_SECONDS)
    (record,) = audit.records
    assert (record.rule, record.code, record.outcome.value) == (
        "required-tags",
        ComplianceCode.INCONCLUSIVE,
        "no-action",
    )
    assert record.evidence[PATTERN_TIMEOUT] == {
        "subject": "tag cost-center",
        "pattern": PATTERN,
        "bound_seconds": TAG_PATTERN_SECONDS,
    }
    assert budgets.opened and set(budgets.opened) == {TAG_PATTERN_SECONDS}
    # And an error names the team, the rule and the pattern, for the platform team to fix the document
    (error,) = errors(log_output)
    assert (error["team"], error["rule"], error["pattern"]) == ("vision", "required-tags", PATTERN)


def test_the_other_rules_still_stop_the_job(
    compliance: ComplianceService, jobs: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job on a type the policy does not allow, whose cost-center pattern runs out of time
    violating = job(ResourceConfig={"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50})
    jobs.jobs["job-1"] = violating
    # When its first InProgress event is evaluated
    decisions = compliance.react(violating, TRIGGER)
    # Then it is stopped for the type rule alone; the tag rule is recorded inconclusive
    assert {d.rule: d.code for d in decisions} == {
        "required-tags": ComplianceCode.INCONCLUSIVE,
        "instance-types": ComplianceCode.STOP,
    }
    assert "stop job-1" in calls.log
    assert {(r.rule, r.outcome.value) for r in audit.records} == {
        ("required-tags", "no-action"),
        ("instance-types", "done"),
    }


class RunsOutOn:
    """``TimeBound`` whose budgets run out during a match on ``value`` and stay spent then (as ``InterruptBudget``: work
    run in a spent budget raises at once); a budget spent by no such match runs its work."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.opened = 0

    def __call__(self, seconds: float) -> Bounded:
        self.opened += 1
        spent = [False]

        def bounded(work: Callable[[], T]) -> T:
            if spent[0] or self.value in getattr(work, "args", ()):
                spent[0] = True
                raise PatternTimeout(seconds)
            return work()

        return bounded


def test_a_pattern_out_of_time_leaves_another_rule_s_sound_pattern_its_own_time(
    jobs: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given two required-tags rules: the first's pattern runs out of time on the job's value; the second's, sound, is
    # violated by the job's value
    policies.policy = build_policy(
        {
            "mode": "enforce",
            "rules": [
                {"id": "a-ticket", "type": "required-tags", "tags": {"ticket": {"pattern": "[A-Z]+-[0-9]+"}}},
                {"id": "b-cost", "type": "required-tags", "tags": {"cost-center": {"pattern": PATTERN}}},
            ],
        }
    )
    violating = job(tags={"team": "vision", "owner": "alice", "ticket": "OPS-1", "cost-center": "WRONG"})
    jobs.jobs["job-1"] = violating
    bound = RunsOutOn("OPS-1")
    service = ComplianceService(jobs, notifier, policies, audit, lambda: NOW, marks=Marks(calls), bound=bound)
    # When its first InProgress event is evaluated
    decisions = service.react(violating, TRIGGER)
    # Then the first rule is inconclusive, and the second, matched in a budget of its own, stops the job
    assert {d.rule: d.code for d in decisions} == {
        "a-ticket": ComplianceCode.INCONCLUSIVE,
        "b-cost": ComplianceCode.STOP,
    }
    assert "stop job-1" in calls.log
