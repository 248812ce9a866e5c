"""Declared tolerance (domain/tolerance.py): a job's own guard windows, bounded by the team's cap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.progress import PROGRESS
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.stall_judge import TAG_IDLE_MINUTES, TAG_PROGRESS_MINUTES
from sagemaker_governance.domain.tolerance import ToleranceCode, read_declarations
from tests.builders import job

TEAM = {"team": "rl", "owner": "alice"}


def tagged(**tags: str) -> TrainingJob:
    return job(tags={**TEAM, **tags})


def test_a_valid_declaration_becomes_the_guards_window_for_that_job_only() -> None:
    # Given the default policy (idle 30 minutes, progress 120 minutes, cap 240)
    policy = Policy()
    declared = job(tags={**TEAM, TAG_IDLE_MINUTES: "90", TAG_PROGRESS_MINUTES: "180"})
    # When the job's effective policy is resolved
    effective = policy.for_job(declared)
    # Then its idle window is 90 whole one-minute periods, its progress window 180 minutes
    idle, progress = IDLE.config(effective), PROGRESS.config(effective)
    assert (idle.evaluation_periods, idle.datapoints_to_alarm, idle.window_minutes) == (90, 90, 90)
    assert progress.window_minutes == 180
    # and the stall judge's evidence window follows the guard's
    assert IDLE.evidence_window(idle).total_seconds() == 90 * 60
    # while a job without the tags keeps the team's windows
    plain = policy.for_job(job(tags=TEAM))
    assert IDLE.config(plain).window_minutes == 30 and PROGRESS.config(plain).window_minutes == 120


@pytest.mark.parametrize(
    "value",
    ["abc", "-30", "0", "5", "241", "90.5", "", " ", "1e3", "\uff19\uff10"],
    ids=["word", "negative", "zero", "below-floor", "over-cap", "fraction", "empty", "blank", "exponent", "wide"],
)
def test_a_bad_value_is_ignored_and_the_team_window_stays(value: str) -> None:
    policy = Policy()
    (declaration,) = policy.declared_tolerance(tagged(**{TAG_IDLE_MINUTES: value}))
    assert declaration.code is ToleranceCode.IGNORED and declaration.minutes is None
    assert IDLE.config(policy.for_job(tagged(**{TAG_IDLE_MINUTES: value}))).window_minutes == 30


@pytest.mark.parametrize("key", ["SMGOV:idle-minutes", "smgov:Idle-Minutes", "SMGOV:IDLE-MINUTES"])
def test_a_declaration_key_in_another_capitalization_is_ignored_and_told(key: str) -> None:
    # Given a job tagged with the idle declaration's key in other letters, and a valid value
    policy = Policy()
    miscased = tagged(**{key: "90"})
    # When its declarations are read
    (declaration,) = policy.declared_tolerance(miscased)
    # Then it is ignored, as tag keys are read exactly, the team's window stays, and the owner is told the key
    assert declaration.code is ToleranceCode.IGNORED and declaration.minutes is None
    assert IDLE.config(policy.for_job(miscased)).window_minutes == 30
    decision = declaration.decision(policy.mode)
    assert decision.code == ToleranceCode.IGNORED and decision.action is Action.NOTIFY
    assert decision.remedy is not None and TAG_IDLE_MINUTES in decision.remedy and key in decision.remedy


def test_the_exact_key_is_applied_and_comes_first_beside_another_capitalization() -> None:
    # Given the exact progress key and the same key in capitals, with different values
    both = tagged(**{TAG_PROGRESS_MINUTES: "60", "SMGOV:PROGRESS-MINUTES": "200"})
    exact, miscased = Policy().declared_tolerance(both)
    # Then the exact one is the guard's window and the first of its guard's declarations; the other is ignored
    assert exact.tag == TAG_PROGRESS_MINUTES and exact.minutes == 60
    assert miscased.code is ToleranceCode.IGNORED and miscased.section == "progress"
    assert PROGRESS.config(Policy().for_job(both)).window_minutes == 60


def test_the_cap_is_the_teams_and_zero_accepts_nothing() -> None:
    # Given a team cap of 60 and another team that accepts no declaration
    policy = Policy.model_validate(
        {"teams": {"rl": {"judge": {"max_declared_minutes": 60}}, "ops": {"judge": {"max_declared_minutes": 0}}}}
    )
    # Then 90 is over the rl team's cap (ignored), 60 is applied
    (over,) = policy.for_team("rl").declared_tolerance(tagged(**{TAG_PROGRESS_MINUTES: "90"}))
    assert over.code is ToleranceCode.IGNORED and "cap" in over.reason
    assert PROGRESS.config(policy.for_job(tagged(**{TAG_PROGRESS_MINUTES: "90"}))).window_minutes == 120
    assert PROGRESS.config(policy.for_job(tagged(**{TAG_PROGRESS_MINUTES: "60"}))).window_minutes == 60
    # and the ops team ignores every declaration
    ops = job(tags={"team": "ops", TAG_PROGRESS_MINUTES: "60"})
    (none,) = policy.for_team("ops").declared_tolerance(ops)
    assert none.code is ToleranceCode.IGNORED and PROGRESS.config(policy.for_job(ops)).window_minutes == 120


def test_an_m_of_n_idle_window_keeps_its_ratio_and_a_longer_period_counts_whole_periods() -> None:
    policy = Policy.model_validate(
        {"idle": {"evaluation_periods": 20, "datapoints_to_alarm": 10, "period_seconds": 120}}
    )
    idle = IDLE.config(policy.for_job(tagged(**{TAG_IDLE_MINUTES: "61"})))
    assert (idle.evaluation_periods, idle.datapoints_to_alarm) == (31, 16)  # ceil(61 / 2), half of it


def test_the_cap_is_validated() -> None:
    with pytest.raises(ValidationError):
        Policy(judge={"max_declared_minutes": 5})
    with pytest.raises(ValidationError):
        Policy(judge={"max_declared_minutes": 1441})
    assert Policy(judge={"max_declared_minutes": 0}).judge.max_declared_minutes == 0


def test_no_tags_no_declaration() -> None:
    assert read_declarations(None, 240) == () and read_declarations({"team": "rl"}, 240) == ()


@given(value=st.text(max_size=12), cap=st.sampled_from([0, 10, 60, 240, 1440]))
def test_any_tag_value_never_loosens_beyond_the_cap(value: str, cap: int) -> None:
    """Whatever a developer writes, the window applied is within [10, cap] or the team's own."""
    policy = Policy(judge={"max_declared_minutes": cap})
    declared = job(tags={**TEAM, TAG_IDLE_MINUTES: value, TAG_PROGRESS_MINUTES: value})
    (idle, progress) = policy.declared_tolerance(declared)
    effective = policy.for_job(declared)
    for declaration, window in (
        (idle, IDLE.config(effective).window_minutes),
        (progress, PROGRESS.config(effective).window_minutes),
    ):
        if declaration.minutes is None:
            assert window in (30, 120)
        else:
            assert 10 <= declaration.minutes <= cap and window == declaration.minutes


@pytest.mark.parametrize("team", ["vision", None], ids=["another-team", "no-team"])
def test_a_declaration_outside_a_team_override_is_not_validated_against_that_override(team: str | None) -> None:
    # Given a valid document whose nlp team samples GPU utilization every 10 minutes (30 x 600 s), and a job
    # of another team (or of none) declaring 240 idle minutes, the default cap
    policy = Policy.model_validate({"teams": {"nlp": {"idle": {"period_seconds": 600}}}})
    tags = {"owner": "alice", TAG_IDLE_MINUTES: "240"} | ({"team": team} if team else {})
    # When the job's policy is resolved
    effective = policy.for_job(job(tags=tags))
    # Then its declared window applies (240 one-minute periods, which nlp's 600 s periods would make longer
    # than a day), and its policy carries no other team's override
    assert IDLE.config(effective).evaluation_periods == 240
    assert effective.teams == {} and policy.for_team(team).teams == {}


@given(
    value=st.text(max_size=12) | st.integers(min_value=-10, max_value=2000).map(str),
    team=st.sampled_from([None, "nlp", "ops", "rl", "vision"]),
    key=st.sampled_from([TAG_IDLE_MINUTES, TAG_PROGRESS_MINUTES, "SMGOV:idle-minutes"]),
)
def test_no_declared_value_fails_the_resolution_of_any_teams_job(value: str, team: str | None, key: str) -> None:
    """Whatever a developer writes on a job of any team (or none), its policy resolves: applied or ignored."""
    # Given teams whose windows and caps differ as far as the schema allows
    policy = Policy.model_validate(
        {
            "judge": {"max_declared_minutes": 1440},
            "teams": {
                "nlp": {"idle": {"period_seconds": 2400}},  # 30 x 40 minutes
                "ops": {"judge": {"max_declared_minutes": 0}},
                "rl": {"idle": {"period_seconds": 120, "evaluation_periods": 20, "datapoints_to_alarm": 5}},
            },
        }
    )
    declared = job(
        tags={"owner": "alice", key: value, TAG_PROGRESS_MINUTES: value} | ({"team": team} if team else {})
    )
    # When it is resolved, then it does not raise, and each declaration is applied or ignored
    effective = policy.for_job(declared)
    for declaration in policy.for_team(team).declared_tolerance(declared):
        assert declaration.code in (ToleranceCode.APPLIED, ToleranceCode.IGNORED)
    assert IDLE.config(effective).period_seconds * IDLE.config(effective).evaluation_periods <= 86_400


def test_policy_validate_warns_about_a_cap_that_can_only_shorten_or_outruns_rejudging() -> None:
    assert Policy().warnings() == []
    low = Policy.model_validate({"teams": {"rl": {"judge": {"max_declared_minutes": 60}}}}).warnings()
    assert [w for w in low if "teams.rl.judge.max_declared_minutes 60" in w and "progress 120" in w]
    high = Policy(judge={"max_declared_minutes": 600}).warnings()
    assert [w for w in high if "exceeds max_rejudge_minutes 240" in w]
