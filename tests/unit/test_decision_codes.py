"""Decision codes are defined once per capability, unique, well-formed, and all in the README table; the
README's list of actions is the `Action` enum."""

from __future__ import annotations

import re
from enum import StrEnum

from sagemaker_governance.domain.compliance import ComplianceCode
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.efficiency import EfficiencyCode
from sagemaker_governance.domain.guards.base import AlarmCode
from sagemaker_governance.domain.guards.efficiency import EfficiencyGuardCode
from sagemaker_governance.domain.guards.idle import IdleCode
from sagemaker_governance.domain.guards.progress import ProgressCode
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.reconcile import ReconcilerCode
from sagemaker_governance.domain.resume import ResumeCode, SpotCode
from sagemaker_governance.domain.stall_judge import JudgeCode
from sagemaker_governance.domain.tolerance import ToleranceCode
from sagemaker_governance.service.job_events import RouterCode
from tests.conftest import REPO

CAPABILITIES: tuple[type[StrEnum], ...] = (
    ComplianceCode,
    IdleCode,
    ProgressCode,
    JudgeCode,
    ToleranceCode,
    ResumeCode,
    SpotCode,
    ReconcilerCode,
    RouterCode,
    EfficiencyCode,
    EfficiencyGuardCode,
)
GUARD_PLACEHOLDER = "<guard>"


def codes() -> list[str]:
    """Every code the service can record (the lifecycle's once per registered guard)."""
    out = [member.value for enum in CAPABILITIES for member in enum]
    return out + [guard.code(code) for guard in GUARDS for code in AlarmCode]


def readme_codes() -> set[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("### Decision codes", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def test_codes_are_unique_and_well_formed() -> None:
    all_codes = codes()
    assert len(all_codes) == len(set(all_codes))
    pattern = re.compile(Decision.model_fields["code"].metadata[0].pattern)
    assert [c for c in all_codes if not pattern.fullmatch(c)] == []


def test_every_code_is_in_the_readme_table_and_nothing_else() -> None:
    documented = readme_codes()
    lifecycle = {f"{GUARD_PLACEHOLDER}.{code.value}" for code in AlarmCode}
    expected = {c for c in codes() if c.split(".", 1)[1] not in {code.value for code in AlarmCode}} | lifecycle
    assert documented == expected


def test_the_readme_lists_every_action_and_nothing_else() -> None:
    # Given the sentence of the README that lists a decision's `action` values
    text = " ".join((REPO / "README.md").read_text().split())
    (listed,) = re.findall(r"where `action` is one of (.*?)\. ", text)
    # Then its values are the Action enum's, in its order
    assert re.findall(r"`([^`]+)`", listed) == [action.value for action in Action]


def test_each_capability_prefixes_its_codes_with_its_own_name() -> None:
    for enum in CAPABILITIES:
        assert len({member.value.split(".", 1)[0] for member in enum}) == 1, enum


def test_a_decision_needs_a_code() -> None:
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Decision(rule="r", action=Action.NONE, mode=Mode.AUDIT, reason="x")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Decision(rule="r", code="Not A Code", action=Action.NONE, mode=Mode.AUDIT, reason="x")


def test_audit_records_of_schema_1_still_read() -> None:
    """A record logged before the upgrade (``smgov.audit/1``, no code) still validates; a new one has both."""
    from sagemaker_governance.audit import AUDIT_SCHEMA, AuditRecord

    old = {
        "schema": "smgov.audit/1",
        "at": "2026-11-21T12:00:00+00:00",
        "trigger": "idle-alarm",
        "event_id": None,
        "job_name": "job-1",
        "job_arn": None,
        "job_status": "InProgress",
        "team": "vision",
        "owner": None,
        "rule": "idle-guard",
        "action": "stop",
        "mode": "enforce",
        "outcome": "done",
        "reason": "idle",
    }
    record = AuditRecord.model_validate(old)
    assert record.code is None and record.as_log()["schema"] == "smgov.audit/1"
    assert AUDIT_SCHEMA == "smgov.audit/2"
    assert (
        AuditRecord.model_validate({**old, "schema": AUDIT_SCHEMA, "code": "idle.stop.idle"}).code
        == "idle.stop.idle"
    )
