"""Window accounting (issue 17 item 5): a stop needs max(grace, window) minutes in Training; one of
evaluation_periods / datapoints_to_alarm keeps "idle for the whole window"; M-of-N is warned about."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import AlarmNaming, Notice, Verdict
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode, IdlePolicy, IdleRole
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from tests.builders import job

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov")


def after_downloading(training_minutes: float) -> TrainingJob:
    """A job that spent 40 idle minutes Downloading, then ``training_minutes`` in Training."""
    trained = NOW - timedelta(minutes=training_minutes)

    def ms(moment: datetime) -> str:
        return str(int(moment.timestamp() * 1000))

    return job(
        SecondaryStatus="Training",
        TrainingStartTime=ms(trained - timedelta(minutes=40)),
        SecondaryStatusTransitions=[
            {"Status": "Downloading", "StartTime": ms(trained - timedelta(minutes=40))},
            {"Status": "Training", "StartTime": ms(trained)},
        ],
    )


def code(training_minutes: float, changed: datetime | None = None, **policy: object) -> tuple[Verdict, str]:
    """The idle guard's verdict ``training_minutes`` into Training; ``changed``: the alarm's StateChangeTime."""
    notice = Notice(
        job=after_downloading(training_minutes),
        mode=Mode.ENFORCE,
        now=NOW,
        naming=NAMING,
        alarm_changed_at=changed,
    )
    verdict = IDLE.judge(IdleRole.NOTIFYING, notice, IdlePolicy.model_validate(policy))
    return verdict.verdict, verdict.decision.code


def test_idle_minutes_before_training_never_count_towards_the_window() -> None:
    # Given grace 20 and a 30-minute window: 25 minutes into Training (after 40 idle minutes Downloading)
    assert code(25) == (Verdict.TOO_EARLY, IdleCode.TOO_EARLY)
    assert code(15) == (Verdict.TOO_EARLY, IdleCode.GRACE)
    assert code(31) == (Verdict.STOP, IdleCode.STOP)
    # A grace longer than the window decides alone
    assert code(45, grace_minutes=60) == (Verdict.TOO_EARLY, IdleCode.GRACE)


def test_a_late_notification_is_judged_as_of_its_alarms_state_change() -> None:
    # Given grace 20 and a 30-minute window, and a notification handled 10 minutes after its alarm fired (an SQS
    # retry): the window it reports ended then, not now
    fired = NOW - timedelta(minutes=10)
    # 35 minutes into Training now, 25 when it fired: its window began 5 idle Downloading minutes before Training
    assert code(35, changed=fired) == (Verdict.TOO_EARLY, IdleCode.TOO_EARLY)
    # 28 minutes into Training now, 18 when it fired: within the grace period then
    assert code(28, changed=fired) == (Verdict.TOO_EARLY, IdleCode.GRACE)
    # 41 now, 31 when it fired: the whole window was Training
    assert code(41, changed=fired) == (Verdict.STOP, IdleCode.STOP)
    # A change stamped after the handling (clocks a moment apart) is judged as of the handling
    assert code(31, changed=NOW + timedelta(seconds=30)) == (Verdict.STOP, IdleCode.STOP)


def test_setting_one_of_the_two_keeps_idle_for_the_whole_window() -> None:
    policy = Policy.model_validate({"teams": {"rl": {"idle": {"evaluation_periods": 60}}}})
    idle = IDLE.config(policy.for_team("rl"))
    assert (idle.evaluation_periods, idle.datapoints_to_alarm) == (60, 60)
    only_m = Policy.model_validate({"idle": {"datapoints_to_alarm": 45}})
    whole = IDLE.config(only_m)
    assert (whole.evaluation_periods, whole.datapoints_to_alarm) == (45, 45)
    assert policy.warnings() == []


def test_m_of_n_is_kept_when_both_are_set_and_validate_warns() -> None:
    policy = Policy.model_validate(
        {
            "teams": {
                "nlp": {"idle": {"evaluation_periods": 60, "datapoints_to_alarm": 40, "threshold_percent": 60}}
            }
        }
    )
    idle = IDLE.config(policy.for_team("nlp"))
    assert (idle.evaluation_periods, idle.datapoints_to_alarm) == (60, 40)
    warnings = policy.warnings()
    assert any(w.startswith("teams.nlp.idle: datapoints_to_alarm 40 < evaluation_periods 60") for w in warnings)
    assert any(w.startswith("teams.nlp.idle: threshold_percent 60") for w in warnings)


def test_policy_validate_prints_the_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from smgov.cli.main import main

    document = tmp_path / "policy.yaml"
    document.write_text("teams: {nlp: {idle: {evaluation_periods: 60, datapoints_to_alarm: 40}}}\n")
    assert main(["policy", "validate", str(document)]) == 0
    assert "warning: teams.nlp.idle: datapoints_to_alarm 40 < evaluation_periods 60" in capsys.readouterr().out
