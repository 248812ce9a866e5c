"""The progress guard's pure parts: which jobs are watched, the two alarms, the stopper's decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.guards.base import (
    AlarmNaming,
    AlarmPlan,
    GuardVerdict,
    NoAlarm,
    Notice,
    Verdict,
    may_have_armed,
    stint_started,
)
from sagemaker_governance.domain.guards.progress import (
    ARMED_REASON,
    PROGRESS,
    ProgressCode,
    ProgressPolicy,
    ProgressRole,
    normalize_metric_name,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from smgov.simulation.alarms import MetricAlarm, decide
from tests.builders import job

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:alarms")


def with_metrics(*names: str, **overrides: Any) -> TrainingJob:
    spec = {
        "TrainingImage": "img:1",
        "TrainingInputMode": "File",
        "MetricDefinitions": [{"Name": n, "Regex": f"{n}=([0-9.]+)"} for n in names],
    }
    return job(AlgorithmSpecification=spec, **overrides)


def plan(j: TrainingJob, **policy: Any) -> AlarmPlan:
    result = PROGRESS.plan(j, ProgressPolicy(**policy), NAMING)
    assert isinstance(result, AlarmPlan), result
    return result


def metrics(p: AlarmPlan) -> tuple[str, ...]:
    return tuple(p.evidence["metrics"])


# ---- which jobs are watched ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("defined", "watched"),
    [
        ("train:loss", "train:loss"),
        ("Train/Loss", "Train/Loss"),
        ("training-loss", "training-loss"),
        ("loss", "loss"),
        ("train:objective_loss", "train:objective_loss"),
    ],
)
def test_common_train_loss_names_are_progress_signals_by_default(defined: str, watched: str) -> None:
    assert metrics(plan(with_metrics(defined, "validation:accuracy"))) == (watched,)


def test_names_compare_case_insensitively_with_separators_equal() -> None:
    assert normalize_metric_name(" Train/Loss ") == normalize_metric_name("train:loss") == "train_loss"
    assert normalize_metric_name("validation:loss") != "train_loss"


def test_a_job_without_metric_definitions_gets_no_progress_alarm() -> None:
    result = PROGRESS.plan(job(), ProgressPolicy(), NAMING)
    assert isinstance(result, NoAlarm) and result.code == ProgressCode.NO_METRIC_DEFINITIONS
    assert not PROGRESS.watchable(job())  # its AlgorithmSpecification says it has none: no re-read
    assert PROGRESS.watchable(job(AlgorithmSpecification=None))  # an event without it says nothing


def test_a_job_whose_metrics_are_not_progress_signals_gets_no_progress_alarm() -> None:
    result = PROGRESS.plan(with_metrics("validation:accuracy", "epoch_time"), ProgressPolicy(), NAMING)
    assert isinstance(result, NoAlarm) and result.code == ProgressCode.NO_PROGRESS_METRIC
    assert result.evidence["defined_metrics"] == ["validation:accuracy", "epoch_time"]


def test_a_team_names_its_own_progress_metric() -> None:
    policy = Policy.model_validate({"teams": {"nlp": {"progress": {"metric_names": ["tokens_per_second"]}}}})
    j = with_metrics("tokens/per/second", "train:loss", tags={"team": "nlp"})
    effective = policy.for_job(j)
    assert metrics(plan(j, **PROGRESS.config(effective).model_dump())) == ("tokens/per/second",)
    assert metrics(plan(j)) == ("train:loss",)  # the default names for everybody else


def test_policy_bounds() -> None:
    with pytest.raises(ValidationError):
        ProgressPolicy(window_minutes=5)
    with pytest.raises(ValidationError):
        ProgressPolicy(window_minutes=1441)  # CloudWatch: period x periods <= one day
    with pytest.raises(ValidationError):
        ProgressPolicy(metric_names=("loss", " "))


# ---- the two alarms --------------------------------------------------------------------------------


def test_the_stall_alarm_is_created_disarmed_and_breaches_on_missing_data() -> None:
    p = plan(with_metrics("train:loss"), window_minutes=90)
    stall, armer = p.metric_requests
    assert stall["AlarmName"] == "gov-idle-job-1.progress"
    assert stall["ActionsEnabled"] is False
    assert stall["AlarmActions"] == ["arn:aws:sns:us-east-1:1:alarms"]
    assert (stall["Namespace"], stall["MetricName"]) == ("/aws/sagemaker/TrainingJobs", "train:loss")
    assert stall["Dimensions"] == [{"Name": "TrainingJobName", "Value": "job-1"}]
    assert (stall["Statistic"], stall["Period"]) == ("SampleCount", 60)
    assert (stall["EvaluationPeriods"], stall["DatapointsToAlarm"]) == (90, 90)
    assert (stall["ComparisonOperator"], stall["Threshold"]) == ("LessThanThreshold", 1.0)
    assert stall["TreatMissingData"] == "breaching"
    assert armer["AlarmName"] == "gov-idle-job-1.progress-armer"
    assert armer["ActionsEnabled"] is True
    assert (armer["EvaluationPeriods"], armer["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert armer["TreatMissingData"] == "notBreaching"
    assert {t["Key"] for t in stall["Tags"]} == {"smgov:training-job", "smgov:managed-by"}


def test_several_progress_metrics_any_datapoint_counts() -> None:
    p = plan(with_metrics("train:loss", "loss"))
    stall = p.metric_requests[0]
    assert [q["MetricStat"]["Metric"]["MetricName"] for q in stall["Metrics"] if "MetricStat" in q] == [
        "train:loss",
        "loss",
    ]
    assert stall["Metrics"][-1]["Expression"] == "SUM([m1, m2])"


def _evaluate(request: dict[str, Any], values: list[float | None]) -> str:
    alarm = MetricAlarm.from_description(request)
    state, *_ = decide(
        values,
        evaluation_periods=alarm.evaluation_periods,
        datapoints_to_alarm=alarm.datapoints_to_alarm,
        treat_missing=alarm.treat_missing,
        breaches=alarm.breaches,
        current="OK",
    )
    return state


def test_with_cloudwatch_semantics_the_stall_alarm_fires_only_when_the_whole_range_is_silent() -> None:
    stall = plan(with_metrics("train:loss"), window_minutes=10).metric_requests[0]
    assert _evaluate(stall, [None] * 12) == "ALARM"
    assert _evaluate(stall, [1.0] + [None] * 11) == "OK"  # one datapoint (SampleCount) in range
    assert _evaluate(stall, [None] * 11 + [3.0]) == "OK"


def test_with_cloudwatch_semantics_the_armer_fires_on_the_first_datapoint_only() -> None:
    armer = plan(with_metrics("train:loss")).metric_requests[1]
    assert _evaluate(armer, [None, None, None]) == "OK"  # a regex that never matches: never armed
    assert _evaluate(armer, [None, None, 1.0]) == "ALARM"


def test_roles_come_from_the_name_for_the_tagged_job() -> None:
    assert PROGRESS.role_of("gov-idle-job-1.progress", "job-1", NAMING) == ProgressRole.STALL
    assert PROGRESS.role_of("gov-idle-job-1.progress-armer", "job-1", NAMING) == ProgressRole.ARMER
    assert PROGRESS.role_of("gov-idle-job-1", "job-1", NAMING) is None
    assert PROGRESS.role_of("gov-idle-job-2.progress", "job-1", NAMING) is None
    assert PROGRESS.stops_from(ProgressRole.STALL) and not PROGRESS.stops_from(ProgressRole.ARMER)


# ---- the stopper's decisions -----------------------------------------------------------------------


def training(started: datetime, *, status: str = "InProgress", secondary: str = "Training") -> TrainingJob:
    millis = str(int(started.timestamp() * 1000))
    return with_metrics(
        "train:loss",
        TrainingJobStatus=status,
        SecondaryStatus=secondary,
        TrainingStartTime=millis,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": millis}],
    )


def judge(
    role: ProgressRole,
    j: TrainingJob,
    mode: Mode = Mode.ENFORCE,
    *,
    changed: datetime | None = NOW,
    exempted_by: str | None = None,
    metric_names: tuple[str, ...] | None = None,
    **kw: Any,
) -> GuardVerdict:
    notice = Notice(
        job=j,
        mode=mode,
        now=NOW,
        naming=NAMING,
        alarm_changed_at=changed,
        exempted_by=exempted_by,
        metric_names=metric_names,
    )
    return PROGRESS.judge(role, notice, ProgressPolicy(**kw))


def stop_verdict(j: TrainingJob, **kw: Any) -> str:
    return judge(ProgressRole.STALL, j, **kw).decision.code


def test_armed_and_silent_for_the_window_while_training_is_stopped_with_evidence() -> None:
    result = judge(
        ProgressRole.STALL, training(NOW - timedelta(hours=5)), window_minutes=60, metric_names=("train:loss",)
    )
    assert result.verdict is Verdict.STOP and result.decision.code == ProgressCode.STOP
    assert result.decision.rule == "progress-guard"
    assert result.decision.action is Action.STOP and result.decision.acts
    assert result.decision.evidence["window_minutes"] == 60
    # the remedy tells the owner how to declare a job's long quiet phases on the job itself
    assert "smgov:progress-minutes" in (result.decision.remedy or "")
    assert result.decision.evidence["last_datapoint_before"] == (NOW - timedelta(minutes=60)).isoformat()
    assert result.decision.evidence["metrics"] == ["train:loss"]
    assert result.reset == result.arm == result.disarm == ()


def test_not_stopped_when_not_training_ended_stale_early_disabled_or_exempted() -> None:
    long_ago = NOW - timedelta(hours=5)
    assert stop_verdict(training(long_ago, secondary="Uploading")) == ProgressCode.NOT_TRAINING
    assert stop_verdict(training(long_ago, status="Completed")) == ProgressCode.ALREADY_ENDED
    assert stop_verdict(training(long_ago), changed=NOW - timedelta(minutes=30)) == ProgressCode.STALE
    assert stop_verdict(training(NOW - timedelta(minutes=30)), window_minutes=60) == ProgressCode.TOO_EARLY
    assert stop_verdict(training(long_ago), enabled=False) == ProgressCode.DISABLED
    assert stop_verdict(training(long_ago), exempted_by="INC-1") == ProgressCode.EXEMPTED


def test_a_late_stall_notification_is_judged_as_of_its_alarms_state_change() -> None:
    # Given a 60-minute window and a notification handled 10 minutes after its alarm fired (an SQS retry): 65
    # minutes into Training now, 55 when it fired, so its window began before Training
    fired = NOW - timedelta(minutes=10)
    started = NOW - timedelta(minutes=65)
    assert stop_verdict(training(started), window_minutes=60, changed=fired) == ProgressCode.TOO_EARLY
    # the same job notified at once is stopped
    assert stop_verdict(training(started), window_minutes=60, changed=NOW) == ProgressCode.STOP


def test_audit_mode_records_only() -> None:
    result = judge(ProgressRole.STALL, training(NOW - timedelta(hours=5)), Mode.AUDIT)
    assert result.decision.code == ProgressCode.STOP and not result.decision.acts


def test_too_early_and_stale_reset_the_stall_alarm() -> None:
    long_ago = NOW - timedelta(hours=5)
    early = judge(ProgressRole.STALL, training(NOW - timedelta(minutes=30)), window_minutes=60)
    stale = judge(ProgressRole.STALL, training(long_ago), changed=NOW - timedelta(minutes=30))
    assert early.reset == stale.reset == ("gov-idle-job-1.progress",)


def test_arming_only_while_training_and_enabled() -> None:
    started = NOW - timedelta(minutes=5)

    def arming(j: TrainingJob, mode: Mode = Mode.ENFORCE, **kw: Any) -> str:
        return judge(ProgressRole.ARMER, j, mode, **kw).decision.code

    assert arming(training(started), Mode.AUDIT) == ProgressCode.ARM
    assert arming(training(started, secondary="Downloading")) == ProgressCode.ARM_NOT_TRAINING
    assert arming(training(started, status="Stopped")) == ProgressCode.ARM_ALREADY_ENDED
    assert arming(training(started), enabled=False) == ProgressCode.ARM_DISABLED


def test_arming_resets_then_arms_the_stall_alarm_and_disarms_the_armer() -> None:
    verdict = judge(ProgressRole.ARMER, training(NOW - timedelta(minutes=5)), Mode.AUDIT)
    assert verdict.verdict is Verdict.ARM and verdict.decision.action is Action.ARM_ALARM
    assert verdict.reset == verdict.arm == ("gov-idle-job-1.progress",)
    assert verdict.disarm == ("gov-idle-job-1.progress-armer",)


# ---- explain and the sample alarm messages ---------------------------------------------------------


def test_explain_shows_both_progress_alarm_requests_valid_for_the_cloudwatch_api() -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    from smgov.explain import explain_event
    from tests.conftest import load_event

    model: Any = botocore.session.get_session().get_service_model("cloudwatch")
    result = explain_event(load_event("training-job-training.json"), Policy(), now=NOW)
    (decision,) = [d for d in result["decisions"] if d["rule"] == "progress-guard"]
    assert decision["action"] == "create-alarm"
    requests = decision["alarm"]["PutMetricAlarm"]
    assert [r["AlarmName"].rsplit(".", 1)[-1] for r in requests] == ["progress", "progress-armer"]
    for request in requests:
        report = ParamValidator().validate(request, model.operation_model("PutMetricAlarm").input_shape)
        assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize(
    ("sample", "role"), [("progress-alarm-armer.json", "armer"), ("progress-alarm-stalled.json", "stall")]
)
def test_sample_alarm_messages_parse_and_name_their_role(sample: str, role: str) -> None:
    from sagemaker_governance.events.alarms import alarm_notifications
    from tests.conftest import load_event

    ((_, message),) = alarm_notifications(load_event(sample))
    naming = AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance")
    assert PROGRESS.role_of(message.alarm_name, "llama-pretrain-7b-nccl", naming) == ProgressRole(role)
    assert message.trigger is not None and message.trigger.metric_name == "train:loss"
    assert message.changed_at is not None


def test_the_stall_alarm_counts_as_muted_only_when_the_armer_is_off_too() -> None:
    # Its actions off alone: the guard not armed yet (turning it on would stop a job whose metric was never
    # seen); the armer's off alone: the guard armed; both off: the stopper muted a judgement's alarm
    stall, armer = "gov-idle-job-1.progress", "gov-idle-job-1.progress-armer"
    assert PROGRESS.muted("job-1", [stall], NAMING) == ()
    assert PROGRESS.muted("job-1", [armer], NAMING) == ()
    assert PROGRESS.muted("job-1", [stall, armer], NAMING) == (stall,)


# ---- a put after the stopper armed the guard in the job's current stint ----------------------------------


def test_the_armed_plan_is_the_alarms_as_the_stopper_leaves_them() -> None:
    # Given the progress alarms of a job
    p = plan(with_metrics("train:loss", "val:loss", "loss"))
    # When the guard says how it is armed
    arming = PROGRESS.arming(p)
    # Then the armed plan puts the same requests, the stall alarm's actions on and the armer's off
    assert arming.armed.names == p.names
    enabled = {a.name: a.request["ActionsEnabled"] for a in arming.armed.alarms}
    assert enabled == {"gov-idle-job-1.progress": True, "gov-idle-job-1.progress-armer": False}
    for planned, armed in zip(p.alarms, arming.armed.alarms, strict=True):
        assert {**planned.request, "ActionsEnabled": None} == {**armed.request, "ActionsEnabled": None}
    # and the stall alarm is reset, as the stopper does; the read is of the watched metrics' datapoints
    assert arming.reset == ("gov-idle-job-1.progress",) and arming.reset_reason == ARMED_REASON
    # and a put that cannot read the datapoints keeps what the stall alarm holds (the alarm the stopper arms)
    assert arming.stop_alarm == "gov-idle-job-1.progress"
    assert [q.metric_name for q in arming.metrics] == ["train:loss", "loss"]
    assert {q.dimensions for q in arming.metrics} == {(("TrainingJobName", "job-1"),)}
    assert (arming.stat, arming.period_seconds) == ("SampleCount", 60)


@pytest.mark.parametrize(
    ("entered", "handled", "may"),
    [
        ("12:03:00", "12:03:59", False),  # within the entry's minute: the armer's first period is not over
        ("12:03:59", "12:03:59.999", False),
        ("12:03:00", "12:04:00", True),  # the period is over: CloudWatch may have evaluated it
        ("12:03:59", "12:04:00", True),  # aligned to the minute, not counted from the entry
        ("12:03:20", "12:09:00", True),
    ],
)
def test_an_arming_of_the_stint_is_possible_from_the_end_of_the_entrys_minute(
    entered: str, handled: str, may: bool
) -> None:
    day = "2026-11-21T"
    started, now = (datetime.fromisoformat(f"{day}{t}+00:00") for t in (entered, handled))
    assert may_have_armed(started, now, 60) is may


def test_the_current_stint_is_the_later_entry_of_the_event_and_the_reread() -> None:
    def stints(*starts: datetime) -> TrainingJob:
        transitions = [{"Status": "Training", "StartTime": str(int(s.timestamp() * 1000))} for s in starts]
        return with_metrics("train:loss", SecondaryStatus="Training", SecondaryStatusTransitions=transitions)

    first, second = NOW, NOW + timedelta(minutes=25)
    # a held-back event of the first stint, read during the second: the second
    assert stint_started(stints(first), stints(first, second)) == second
    # an event of the second stint whose re-read still answers the first (lagging): the second
    assert stint_started(stints(first, second), stints(first)) == second
