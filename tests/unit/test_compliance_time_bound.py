"""A required tag's pattern that does not finish matching within the evaluation's time budget (PatternTimeout) makes
its rule inconclusive, naming the tag and the pattern: never a stop on it, and the other rules decide as usual."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sagemaker_governance.domain.compliance import ComplianceCode, evaluate_compliance
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.errors import PATTERN_TIMEOUT, PatternTimeout
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.domain.rules.base import EvaluationContext
from sagemaker_governance.domain.rules.required_tags import RequiredTags
from tests.builders import job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PATTERN = "cc-[0-9]{4}"


def expiring(match: Callable[[], bool]) -> bool:
    """A budget that runs out during every match it runs (the interruption, injected)."""
    raise PatternTimeout(1.0)


def policy(types: str = "ml.p5.*") -> Any:
    return build_policy(
        {
            "mode": "enforce",
            "rules": [
                {"type": "required-tags", "tags": {"team": {}, "cost-center": {"pattern": PATTERN}}},
                {"id": "instance-types", "type": "allowed-instance-types", "patterns": [types]},
            ],
        }
    )


def test_a_pattern_out_of_time_makes_the_rule_inconclusive_even_beside_a_missing_tag() -> None:
    # Given a rule whose team tag the job lacks, and whose cost-center pattern runs out of time on its value
    rule = RequiredTags.model_validate(
        {"id": "cost-tags", "type": "required-tags", "tags": {"team": {}, "cost-center": {"pattern": PATTERN}}}
    )
    ctx = EvaluationContext(now=NOW, bounded=expiring)
    # When the rule evaluates the job
    finding = rule.evaluate(job(tags={"cost-center": "cc-1234"}), ctx)
    # Then it could not decide, and says which pattern on which tag did not finish
    assert finding is not None and not finding.conclusive
    assert finding.unfinished == {"subject": "tag cost-center", "pattern": PATTERN, "bound_seconds": 1.0}


def test_the_other_rules_still_decide_when_one_rules_pattern_runs_out_of_time() -> None:
    # Given a job on a type the policy does not allow, whose cost-center pattern runs out of time
    result = evaluate_compliance(job(), policy(), NOW, bounded=expiring)
    # Then required-tags is inconclusive (nothing stopped on it, the pattern in its evidence) and the type rule stops
    by_rule = {d.rule: d for d in result.decisions}
    assert (by_rule["required-tags"].code, by_rule["required-tags"].action) == (
        ComplianceCode.INCONCLUSIVE,
        Action.NONE,
    )
    assert by_rule["required-tags"].evidence[PATTERN_TIMEOUT]["pattern"] == PATTERN
    assert by_rule["instance-types"].code == ComplianceCode.STOP
    assert [d.rule for d in result.timed_out] == ["required-tags"] and result.stops


def test_a_pattern_out_of_time_alone_stops_nothing() -> None:
    # Given a job of an allowed type whose cost-center pattern runs out of time
    result = evaluate_compliance(job(), policy("ml.g5.*"), NOW, bounded=expiring)
    # Then nothing is stopped or told
    assert [d.code for d in result.decisions] == [ComplianceCode.INCONCLUSIVE]
    assert not result.stops and not result.notify_owner


def test_a_pattern_in_time_decides_as_without_a_budget() -> None:
    # Given a budget that lets every match finish
    def in_time(match: Callable[[], bool]) -> bool:
        return match()

    # When a job with a cost-center value the pattern refuses is evaluated
    bad = job(tags={"team": "vision", "cost-center": "x"})
    # Then it is the same violation as unbounded
    bounded = evaluate_compliance(bad, policy("ml.g5.*"), NOW, bounded=in_time)
    assert bounded.decisions == evaluate_compliance(bad, policy("ml.g5.*"), NOW).decisions
    assert [d.code for d in bounded.decisions] == [ComplianceCode.STOP]
