"""The guards' stopper pipeline (service/guard_stopper.py) on in-memory ports: verify -> route -> re-read
-> judge -> review -> act -> record, count, tell. Order and branches, asserted by decision code."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.errors import AdapterError, StopOutcome
from sagemaker_governance.domain.guards.base import (
    PINNED_TRIGGER_MARK,
    TAG_JOB,
    TAG_MANAGED_BY,
    AlarmNaming,
    AlarmPlan,
    GuardVerdict,
    Verdict,
)
from sagemaker_governance.domain.guards.idle import IDLE, IdleCode
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.events.alarms import AlarmNotification
from sagemaker_governance.service.guard_stopper import GuardStopper, StopReview
from sagemaker_governance.service.idempotency import (
    Duplicate,
    OnceAuditSink,
    OnceNotifier,
    alarm_delivery_key,
    deliver,
)
from sagemaker_governance.service.ports import NotifierPort
from sagemaker_governance.service.stall_judge import StallJudge
from sagemaker_governance.settings import Settings
from tests.builders import job
from tests.service.conftest import NOW

ACCOUNT = "123456789012"
ALARM = "gov-guard-job-1"


def training(hours: float = 2.0, **overrides: Any) -> TrainingJob:
    """A one-GPU job in Training for ``hours``."""
    started = str(int((NOW - timedelta(hours=hours)).timestamp() * 1000))
    fields = {
        "SecondaryStatus": "Training",
        "TrainingStartTime": started,
        "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": started}],
    }
    return job("job-1", **{**fields, **overrides})


def notification(name: str = ALARM, *, state: str = "ALARM", account: str = ACCOUNT) -> AlarmNotification:
    at = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return AlarmNotification.model_validate(
        {
            "AlarmName": name,
            "AWSAccountId": account,
            "NewStateValue": state,
            "StateChangeTime": at,
            "Trigger": {"MetricName": "GPUUtilization", "Threshold": 1.0},
        }
    )


class Veto:
    """A ``StopReview`` that vetoes every stop (what the stall judge does on a sign of life)."""

    def __init__(self) -> None:
        self.reviewed: list[str] = []

    def review(
        self, guard: Any, role: str, notice: Any, verdict: GuardVerdict, policy: Any = None
    ) -> GuardVerdict:
        self.reviewed.append(verdict.decision.code)
        decision = verdict.decision.model_copy(update={"code": "test.veto", "action": Action.NONE})
        return GuardVerdict(
            verdict=Verdict.VETOED, decision=decision, reset=(ALARM,), reset_reason="a sign of life"
        )


@pytest.fixture
def metrics() -> MemoryBusinessMetrics:
    return MemoryBusinessMetrics()


@pytest.fixture
def stopper_with(
    jobs: Any, alarms: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, metrics: Any, naming: AlarmNaming
) -> Any:
    """``GuardStopper`` on the fakes with every registered guard; ``review``: the StopReview (None: accept);
    ``windows``: what puts alarms again (None: none)."""

    def build(review: StopReview | None = None, windows: Any = None) -> GuardStopper:
        return GuardStopper(
            windows=windows,
            transitions=alarms,
            guards=GUARDS,
            jobs=jobs,
            alarms=alarms,
            arming=alarms,
            notifier=notifier,
            policies=policies,
            audit=audit,
            metrics=metrics,
            clock=lambda: NOW,
            naming=naming,
            account_id=ACCOUNT,
            review=review,
        )

    return build


@pytest.fixture
def idle_alarm(alarms: Any) -> str:
    """The idle alarm of job-1, in ALARM and tagged as this stack's."""
    alarms.alarms[ALARM] = "ALARM"
    alarms.tagged[ALARM] = {TAG_JOB: "job-1", TAG_MANAGED_BY: "gov"}
    return ALARM


def test_an_idle_alarm_stops_the_job_then_records_counts_and_tells_in_that_order(
    stopper_with: Any, jobs: Any, idle_alarm: str, audit: MemoryAuditSink, metrics: Any, notifier: Any, calls: Any
) -> None:
    # Given an idle GPU job two hours into Training and its alarm in ALARM
    jobs.jobs["job-1"] = training()
    # When the notification arrives
    result = stopper_with().handle(notification(), "msg-1")
    # Then: verify the alarm (its tags), re-read the job, check the alarm is still in ALARM (no judge confirmed the
    # stop on fresh evidence), stop it, then tell the owner
    assert calls.log == [
        f"tags {ALARM}",
        "get-job job-1",
        f"state {ALARM}",
        "stop job-1",
        "notify idle-stop job-1",
    ]
    assert (result.code, result.outcome) == (IdleCode.STOP, "done")
    # one audit record with the stop's code, the delivery's id as its trigger; savings counted once
    (record,) = audit.records
    assert (record.code, record.outcome.value, record.trigger, record.event_id) == (
        IdleCode.STOP,
        "done",
        "idle-alarm",
        "msg-1",
    )
    assert [rule for rule, _ in metrics.savings] == ["idle-guard"]
    assert notifier.sent[0].outcome == "stopped"


@pytest.mark.parametrize(
    ("message", "tagged", "exists"),
    [
        (notification(state="OK"), True, True),  # only ALARM is acted on
        (notification(account="999999999999"), True, True),  # another account's alarm
        (notification("other-stack-job-1"), True, True),  # not our prefix
        (notification(), True, False),  # deleted since it fired
        (notification(), False, True),  # ours by name, not by tag
    ],
)
def test_a_notification_that_fails_verification_touches_nothing(
    stopper_with: Any, jobs: Any, alarms: Any, audit: MemoryAuditSink, message: Any, tagged: bool, exists: bool
) -> None:
    jobs.jobs["job-1"] = training()
    if exists:
        alarms.alarms[ALARM] = "ALARM"
    if tagged:
        alarms.tagged[ALARM] = {TAG_JOB: "job-1", TAG_MANAGED_BY: "gov"}
    result = stopper_with().handle(message)
    assert result.outcome == "ignored" and result.code is None
    assert not [c for c in alarms.calls.log if c.startswith(("get-job", "stop", "reset", "notify"))]
    assert audit.records == []


def test_a_job_gone_when_reread_is_ignored_without_a_record(
    stopper_with: Any, idle_alarm: str, audit: MemoryAuditSink, calls: Any
) -> None:
    result = stopper_with().handle(notification())
    assert result.outcome == "ignored" and calls.log == [f"tags {ALARM}", "get-job job-1"]
    assert audit.records == []


def test_a_job_that_ended_meanwhile_is_recorded_not_stopped(
    stopper_with: Any, jobs: Any, idle_alarm: str, audit: MemoryAuditSink, calls: Any, notifier: Any
) -> None:
    jobs.jobs["job-1"] = training(TrainingJobStatus="Completed", SecondaryStatus="Completed")
    result = stopper_with().handle(notification())
    assert result.code == IdleCode.ALREADY_ENDED and "stop job-1" not in calls.log
    assert [(r.code, r.outcome.value) for r in audit.records] == [(IdleCode.ALREADY_ENDED, "already-done")]
    assert notifier.sent == []


def test_a_vetoed_stop_resets_the_alarm_and_stops_nothing(
    stopper_with: Any, jobs: Any, idle_alarm: str, audit: MemoryAuditSink, metrics: Any, notifier: Any, calls: Any
) -> None:
    # Given a review that finds a sign of life
    jobs.jobs["job-1"] = training()
    veto = Veto()
    # When the guard's verdict is to stop
    result = stopper_with(veto).handle(notification())
    # Then the review saw the guard's stop; its veto is what is done and recorded: reset, no stop, no message
    assert veto.reviewed == [IdleCode.STOP]
    assert calls.log == [f"tags {ALARM}", "get-job job-1", f"state {ALARM}", f"reset {ALARM}"]
    assert (result.code, result.outcome) == ("test.veto", "skipped")
    assert [r.code for r in audit.records] == ["test.veto"]
    assert metrics.savings == [] and notifier.sent == []


def test_audit_mode_records_the_stop_it_would_make_and_stops_nothing(
    stopper_with: Any, jobs: Any, idle_alarm: str, policies: Any, audit: MemoryAuditSink, metrics: Any, calls: Any
) -> None:
    policies.policy = build_policy({**Settings().base_policy_document(), "mode": "audit"})
    jobs.jobs["job-1"] = training()
    result = stopper_with().handle(notification())
    assert (result.code, result.outcome) == (IdleCode.STOP, "audit-only")
    assert "stop job-1" not in calls.log and metrics.savings == []
    assert [(r.code, r.outcome.value) for r in audit.records] == [(IdleCode.STOP, "audit-only")]
    # and the alarm that fired is muted, left in ALARM: the stretch is judged, recorded and told once
    assert f"disarm {ALARM}" in calls.log and f"reset {ALARM}" not in calls.log


def test_an_exempted_job_is_recorded_as_exempted_and_runs_on(
    stopper_with: Any, jobs: Any, idle_alarm: str, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    document = {
        **Settings().base_policy_document(),
        "mode": "enforce",
        "exemptions": [{"job_name_prefix": "job-", "reason": "benchmark", "expires": "2099-01-01"}],
    }
    policies.policy = build_policy(document)
    jobs.jobs["job-1"] = training()
    result = stopper_with().handle(notification())
    assert result.code == IdleCode.EXEMPTED and "stop job-1" not in calls.log
    assert json.dumps([r.outcome.value for r in audit.records]) == '["exempted"]'
    assert f"disarm {ALARM}" in calls.log  # muted: the exemption holds for the whole stretch


def test_a_guard_switched_off_mutes_the_alarm_that_fired(
    stopper_with: Any, jobs: Any, idle_alarm: str, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    policies.policy = build_policy({**Settings().base_policy_document(), "idle": {"enabled": False}})
    jobs.jobs["job-1"] = training()
    result = stopper_with().handle(notification())
    assert result.code == IdleCode.DISABLED
    assert calls.log == [f"tags {ALARM}", "get-job job-1", f"disarm {ALARM}"]


def test_a_declared_idle_window_holds_at_the_stopper_with_the_tags_of_the_reread(
    stopper_with: Any, jobs: Any, idle_alarm: str, calls: Any
) -> None:
    # Given a job 45 minutes into Training that declares a 60-minute idle window (ListTags of the re-read)
    jobs.jobs["job-1"] = training(hours=0.75, tags={"team": "rl", "owner": "alice", "smgov:idle-minutes": "60"})
    # When its idle alarm (of the default 30 minutes, e.g. created before the tag was read) notifies
    result = stopper_with().handle(notification(), "msg-1")
    # Then the stopper judges by the declared window: too early, nothing stopped, no extra call
    assert result.code == IdleCode.TOO_EARLY and "stop job-1" not in calls.log
    assert calls.log[:2] == [f"tags {ALARM}", "get-job job-1"]
    # while the same job without the tag is stopped
    jobs.jobs["job-1"] = training(hours=0.75)
    assert stopper_with().handle(notification(), "msg-2").code == IdleCode.STOP


# ---- a notification superseded by a newer state change of its alarm ---------------------------------


def changed_at(message: AlarmNotification) -> datetime:
    assert message.changed_at is not None
    return message.changed_at


def test_a_reset_is_not_made_for_a_notification_its_alarm_has_since_moved_past(
    stopper_with: Any, jobs: Any, idle_alarm: str, alarms: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given a job in its grace period (the guard's verdict: too early, reset the alarm) and a notification
    # whose alarm changed state again 30 seconds after it (a late retry, a reordered delivery)
    jobs.jobs["job-1"] = training(hours=0.1)
    message = notification()
    alarms.changed[ALARM] = changed_at(message) + timedelta(seconds=30)
    # When it is judged
    result = stopper_with().handle(message, "msg-1")
    # Then the reset is not made (it would make the alarm, judged on its newer notification, fire once more)
    assert f"reset {ALARM}" not in calls.log and calls.log[-1] == f"state {ALARM}"
    assert (result.code, result.outcome) == ("idle.skip.superseded", "skipped")
    (record,) = audit.records
    assert record.code == "idle.skip.superseded"
    assert record.evidence["superseded_code"] == IdleCode.GRACE
    assert record.evidence["alarm_state_now"] == "ALARM"


@pytest.mark.parametrize(
    ("moved", "state_unreadable"),
    [
        (timedelta(0), False),  # the alarm's last change is the notification's own
        (timedelta(milliseconds=400), False),  # ... stamped a moment apart: the same change
        (None, False),  # the answer has no StateTransitionedTimestamp
        (timedelta(minutes=5), True),  # DescribeAlarms failed
    ],
)
def test_a_notification_taken_as_current_resets_as_before(
    stopper_with: Any,
    jobs: Any,
    idle_alarm: str,
    alarms: Any,
    calls: Any,
    moved: timedelta | None,
    state_unreadable: bool,
) -> None:
    jobs.jobs["job-1"] = training(hours=0.1)
    message = notification()
    if moved is not None:
        alarms.changed[ALARM] = changed_at(message) + moved
    alarms.state_unreadable = state_unreadable
    result = stopper_with().handle(message, "msg-1")
    assert result.code == IdleCode.GRACE and calls.log[-1] == f"reset {ALARM}"


class Confirm:
    """A ``StopReview`` that confirms every stop on evidence it read just now (what the stall judge does)."""

    def review(
        self, guard: Any, role: str, notice: Any, verdict: GuardVerdict, policy: Any = None
    ) -> GuardVerdict:
        return verdict.model_copy(update={"confirmed": True})


class Unread:
    """The stall judge's metric and log ports: with the judge off nothing may be read."""

    def read(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the judge is off: nothing is read")

    activity = rhythm = read


def _late_notification(minutes_ago: float) -> AlarmNotification:
    """The idle alarm's ALARM notification, its state change ``minutes_ago`` (under the stale limit)."""
    at = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return AlarmNotification.model_validate(
        {
            "AlarmName": ALARM,
            "AWSAccountId": ACCOUNT,
            "NewStateValue": "ALARM",
            "StateChangeTime": at,
            "Trigger": {"MetricName": "GPUUtilization", "Threshold": 1.0, "Period": 60, "EvaluationPeriods": 30},
        }
    )


def test_with_the_judge_off_a_stop_is_not_made_on_a_notification_its_alarm_has_since_left(
    stopper_with: Any, jobs: Any, idle_alarm: str, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given the judge off, a job two hours into Training, and a notification handled 8 minutes after its alarm
    # fired (an SQS retry), whose alarm went back to OK 3 minutes after firing (the GPUs came back)
    _judge_off(policies)
    jobs.jobs["job-1"] = training()
    alarms.alarms[ALARM] = "OK"
    alarms.changed[ALARM] = NOW - timedelta(minutes=5)
    # When it is judged
    result = stopper_with(StallJudge(Unread(), Unread())).handle(_late_notification(8), "msg-1")
    # Then the alarm's state is read before the stop, and the stop is not made: superseded
    assert "stop job-1" not in calls.log and f"state {ALARM}" in calls.log
    assert (result.code, result.outcome) == ("idle.skip.superseded", "skipped")
    (record,) = audit.records
    assert (record.evidence["superseded_code"], record.evidence["alarm_state_now"]) == (IdleCode.STOP, "OK")


@pytest.mark.parametrize(
    ("state", "moved"),
    [
        ("ALARM", timedelta(minutes=3)),  # it left ALARM and is back in it: the condition holds now
        ("ALARM", timedelta(0)),  # the notification is its alarm's last change
        ("OK", None),  # the answer has no StateTransitionedTimestamp: taken as current
    ],
)
def test_with_the_judge_off_a_stop_on_a_notification_still_current_is_made(
    stopper_with: Any, jobs: Any, idle_alarm: str, alarms: Any, policies: Any, calls: Any, state: str, moved: Any
) -> None:
    _judge_off(policies)
    jobs.jobs["job-1"] = training()
    message = _late_notification(8)
    alarms.alarms[ALARM] = state
    if moved is not None:
        alarms.changed[ALARM] = changed_at(message) + moved
    result = stopper_with(StallJudge(Unread(), Unread())).handle(message, "msg-1")
    assert result.code == IdleCode.STOP and calls.log[-3:] == [
        f"state {ALARM}",
        "stop job-1",
        "notify idle-stop job-1",
    ]


def test_with_the_judge_off_an_unreadable_alarm_state_stops_nothing_and_fails_the_delivery(
    stopper_with: Any, jobs: Any, idle_alarm: str, alarms: Any, policies: Any, audit: MemoryAuditSink, calls: Any
) -> None:
    # Given the judge off and DescribeAlarms failing when the stop is about to be made
    _judge_off(policies)
    jobs.jobs["job-1"] = training()
    alarms.state_unreadable = True
    # When the notification is judged, then nothing is stopped, the skip is recorded with its own code, and the
    # error goes back so that the delivery is retried (judged again, or stale and reset, past the limit)
    with pytest.raises(AdapterError):
        stopper_with(StallJudge(Unread(), Unread())).handle(_late_notification(2), "msg-1")
    assert "stop job-1" not in calls.log
    (record,) = audit.records
    assert (record.code, record.outcome.value) == ("idle.skip.state-unread", "skipped")
    assert record.evidence["unconfirmed_code"] == IdleCode.STOP


def test_a_stop_the_review_confirmed_on_fresh_evidence_reads_no_alarm_state(
    stopper_with: Any, jobs: Any, idle_alarm: str, alarms: Any, calls: Any
) -> None:
    # A stop the stall judge confirmed on evidence it read just now costs no DescribeAlarms: even a state change
    # since the notification is not consulted (the judge's reads are newer)
    jobs.jobs["job-1"] = training()
    message = notification()
    alarms.changed[ALARM] = changed_at(message) + timedelta(minutes=3)
    alarms.alarms[ALARM] = "OK"
    assert stopper_with(Confirm()).handle(message, "msg-1").code == IdleCode.STOP
    assert f"state {ALARM}" not in calls.log


# ---- the stall judge switched off: alarms created while it was on also fire on pinned GPUs -----------------


def _judge_off(policies: Any) -> None:
    policies.policy = build_policy(
        Settings().base_policy_document(), {"mode": "enforce", "judge": {"enabled": False}}
    )


def _pinned_description() -> str:
    return f"... or every host at or above 380 (95% per GPU: pinned) ...: {PINNED_TRIGGER_MARK}. Managed by gov."


def _composite_notification(child: str) -> AlarmNotification:
    at = (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    return AlarmNotification.model_validate(
        {
            "AlarmName": ALARM,
            "AWSAccountId": ACCOUNT,
            "NewStateValue": "ALARM",
            "StateChangeTime": at,
            "AlarmDescription": _pinned_description(),  # the composite's own: planned with the trigger too
            "AlarmRule": f'ALARM("{child}")',
            "TriggeringChildren": [{"Arn": f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{child}"}],
        }
    )


def test_with_the_judge_off_a_metric_alarm_planned_with_the_pinned_trigger_is_replanned_not_a_stop(
    stopper_with: Any, jobs: Any, idle_alarm: str, policies: Any, calls: Any
) -> None:
    # Given the judge switched off, and an alarm whose description says it was created with the pinned trigger
    _judge_off(policies)
    jobs.jobs["job-1"] = training()
    message = notification().model_copy(update={"description": _pinned_description()})
    # When it fires, then the job is not stopped: its alarms are re-created as planned now, and reset
    result = stopper_with().handle(message, "msg-1")
    assert result.code == IdleCode.PINNED_UNJUDGED and "stop job-1" not in calls.log
    # and an alarm without the trigger (re-created so, or created after the change) stops an idle job
    assert stopper_with().handle(notification(), "msg-2").code == IdleCode.STOP


@pytest.mark.usefixtures("idle_alarm")
@pytest.mark.parametrize(
    ("child_description", "code"),
    [
        (_pinned_description(), IdleCode.PINNED_UNJUDGED),  # the child has the trigger: re-plan
        ("the busiest of 16 host(s) below 4 GPUUtilization ... Managed by gov.", IdleCode.STOP),  # re-planned
        (None, IdleCode.PINNED_UNJUDGED),  # the child's definition unread: no stop on it
    ],
)
def test_with_the_judge_off_a_composite_is_judged_by_its_triggering_childs_definition(
    stopper_with: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, child_description: str | None, code: str
) -> None:
    # Given the judge off and a 16-host job's composite firing: its notification does not repeat what its
    # children watch, so the stopper reads the triggering child's description (one DescribeAlarms)
    _judge_off(policies)
    jobs.jobs["job-1"] = training(ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16})
    child = f"{ALARM}.hosts-1-10"
    if child_description is None:
        alarms.describe_fails = True
    else:
        alarms.descriptions[child] = child_description
    result = stopper_with().handle(_composite_notification(child), "msg-1")
    assert result.code == code and f"describe {child}" in calls.log


def test_a_firing_the_current_plan_has_no_pinned_trigger_for_is_replanned_with_the_judge_on_too(
    stopper_with: Any, jobs: Any, idle_alarm: str, policies: Any, calls: Any
) -> None:
    # Given a team that turned the pinned trigger off (idle.pinned_percent: null) while the judge stays on, and
    # an alarm created before with the trigger: re-planned once, not judged as idleness every minute
    policies.policy = build_policy(
        Settings().base_policy_document(), {"mode": "enforce", "idle": {"pinned_percent": None}}
    )
    jobs.jobs["job-1"] = training()
    message = notification().model_copy(update={"description": _pinned_description()})
    assert stopper_with(Veto()).handle(message, "msg-1").code == IdleCode.PINNED_UNJUDGED


# ---- a composite's children planned on stricter terms than the policy plans now --------------------------------

# 16 hosts of 8 GPUs: the idle guard plans a composite alarm over two children (algo-1..10, algo-11..16)
SIXTEEN_HOSTS: dict[str, Any] = {"ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 16}}


def _idle_policy(threshold_percent: float) -> Any:
    return build_policy(
        Settings().base_policy_document(), {"mode": "enforce", "idle": {"threshold_percent": threshold_percent}}
    )


def _sixteen_hosts_planned_at(threshold_percent: float, alarms: Any, naming: AlarmNaming) -> str:
    """job-1 on 16 hosts in Training, its idle alarms put as planned under ``threshold_percent`` (the composite
    ``ALARM``, tagged, over two children): the name of its first child."""
    job = training(**SIXTEEN_HOSTS)
    policy = _idle_policy(threshold_percent)
    plan = IDLE.plan(job, IDLE.config(policy.for_job(job)), naming)
    assert isinstance(plan, AlarmPlan) and plan.composite_request is not None
    alarms.put(plan)
    alarms.alarms[ALARM] = "ALARM"
    alarms.tagged[ALARM] = {TAG_JOB: "job-1", TAG_MANAGED_BY: "gov"}
    return plan.metric_alarm_names[0]


def test_a_composite_whose_child_was_planned_at_a_higher_idle_threshold_is_replanned_not_a_stop(
    stopper_with: Any,
    jobs: Any,
    alarms: Any,
    policies: Any,
    audit: MemoryAuditSink,
    calls: Any,
    naming: AlarmNaming,
) -> None:
    # Given a 16-host job whose children were planned at 10 % per GPU (80 a host), and the policy lowered to 1 %
    child = _sixteen_hosts_planned_at(10, alarms, naming)
    jobs.jobs["job-1"] = training(**SIXTEEN_HOSTS)
    policies.policy = _idle_policy(1)
    windows = Windows()
    # When the composite fires, its notification naming the child that triggered it
    result = stopper_with(windows=windows).handle(_composite_notification(child), "msg-1")
    # Then the job is not stopped: the child's definition (one DescribeAlarms) is stricter than the one planned now,
    # so both children are put again at the threshold in force (8 a host) and reset
    assert (result.code, result.outcome) == (IdleCode.STRICTER_ALARM, "skipped")
    assert "stop job-1" not in calls.log and calls.log.count(f"describe {child}") == 1
    children = (child, f"{ALARM}.hosts-11-16")
    assert [(u["AlarmName"], u["Threshold"]) for u in windows.updates] == [(name, 8.0) for name in children]
    assert [e for e in calls.log if e.startswith("reset")] == [f"reset {name}" for name in children]
    (record,) = audit.records
    assert (record.evidence["child_alarm"], record.evidence["alarm_threshold"]) == (child, 80.0)
    assert record.evidence["planned_threshold"] == 8.0


@pytest.mark.parametrize("review", [None, Confirm()])
def test_a_composite_whose_child_is_planned_as_the_policy_holds_stops_the_job(
    stopper_with: Any, jobs: Any, alarms: Any, policies: Any, calls: Any, naming: AlarmNaming, review: Any
) -> None:
    # The same job whose children were planned under today's policy (1 %): its composite's firing stops it
    child = _sixteen_hosts_planned_at(1, alarms, naming)
    jobs.jobs["job-1"] = training(**SIXTEEN_HOSTS)
    policies.policy = _idle_policy(1)
    result = stopper_with(review, windows=Windows()).handle(_composite_notification(child), "msg-1")
    assert result.code == IdleCode.STOP and "stop job-1" in calls.log


def test_a_composite_firing_in_the_grace_period_reads_no_childs_definition(
    stopper_with: Any, jobs: Any, alarms: Any, calls: Any, naming: AlarmNaming
) -> None:
    # A firing the guard judges before its stricter-alarm check (grace, too early, stale ...) costs no DescribeAlarms
    # of the child: only a verdict to stop or tell needs its terms
    child = _sixteen_hosts_planned_at(1, alarms, naming)
    jobs.jobs["job-1"] = training(0.1, **SIXTEEN_HOSTS)
    result = stopper_with(windows=Windows()).handle(_composite_notification(child), "msg-1")
    assert result.code == IdleCode.GRACE and not any(e.startswith("describe") for e in calls.log)


def test_a_composite_whose_childs_definition_cannot_be_read_stops_nothing_and_fails_the_delivery(
    stopper_with: Any,
    jobs: Any,
    alarms: Any,
    policies: Any,
    audit: MemoryAuditSink,
    calls: Any,
    naming: AlarmNaming,
) -> None:
    # Given DescribeAlarms failing on the composite's triggering child: whether it fired on stricter terms than the
    # policy plans now is unknown, and no review confirmed the stop on evidence read just now
    child = _sixteen_hosts_planned_at(1, alarms, naming)
    jobs.jobs["job-1"] = training(**SIXTEEN_HOSTS)
    alarms.describe_fails = True
    # When it is judged, then nothing is stopped, the skip is recorded as for an unread alarm state, and the error
    # goes back so that the delivery is retried
    with pytest.raises(AdapterError):
        stopper_with(windows=Windows()).handle(_composite_notification(child), "msg-1")
    assert "stop job-1" not in calls.log
    (record,) = audit.records
    assert (record.code, record.evidence["unconfirmed_code"]) == ("idle.skip.state-unread", IdleCode.STOP)


def test_a_stop_the_review_confirmed_is_made_though_the_composites_child_was_not_read(
    stopper_with: Any, jobs: Any, alarms: Any, calls: Any, naming: AlarmNaming
) -> None:
    # The stall judge confirmed the stop on metrics it read just now, against the threshold planned now: as with an
    # unread alarm state, a failed DescribeAlarms does not hold it back
    child = _sixteen_hosts_planned_at(1, alarms, naming)
    jobs.jobs["job-1"] = training(**SIXTEEN_HOSTS)
    alarms.describe_fails = True
    result = stopper_with(Confirm(), windows=Windows()).handle(_composite_notification(child), "msg-1")
    assert result.code == IdleCode.STOP and "stop job-1" in calls.log


class Catalog:
    """``InstanceCatalogPort``: EC2's answer for a type our table lacks (4 NVIDIA GPUs)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def facts(self, instance_type: str) -> InstanceFacts:
        self.asked.append(instance_type)
        return InstanceFacts(instance_type=instance_type, accelerator=Accelerator.NVIDIA_GPU, gpus=4, note="EC2")


class Windows:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def update(self, requests: Any) -> None:
        self.updates += list(requests)


def test_a_job_on_a_type_only_ec2_knows_is_replanned_with_ec2s_facts(
    jobs: Any, alarms: Any, notifier: Any, policies: Any, audit: MemoryAuditSink, metrics: Any, naming: AlarmNaming,
    idle_alarm: str,
) -> None:  # fmt: skip
    # Given the judge off and a job on a type our table lacks, whose alarm (planned with EC2's facts, as the
    # job-events function does) carries the pinned trigger
    _judge_off(policies)
    jobs.jobs["job-1"] = training(ResourceConfig={"InstanceType": "ml.g5g.16xlarge", "InstanceCount": 2})
    catalog, windows = Catalog(), Windows()
    stopper = GuardStopper(
        guards=GUARDS, jobs=jobs, alarms=alarms, arming=alarms, notifier=notifier, policies=policies, audit=audit,
        metrics=metrics, clock=lambda: NOW, naming=naming, account_id=ACCOUNT, transitions=alarms,
        windows=windows, instances=catalog,
    )  # fmt: skip
    message = notification().model_copy(update={"description": _pinned_description()})
    # When it fires, then the alarm is re-created from the same facts (without EC2's, the plan would be "unknown
    # instance type", nothing re-created, and the alarm would fire again every minute, never a stop)
    assert stopper.handle(message, "msg-1").code == IdleCode.PINNED_UNJUDGED
    assert catalog.asked == ["ml.g5g.16xlarge"] and [r["AlarmName"] for r in windows.updates] == [ALARM]
    assert PINNED_TRIGGER_MARK not in windows.updates[0]["AlarmDescription"]


# ---- a stop whose telling failed: the delivery's retry finds the job stopping ------------------------------


class FlakyNotifier:
    """``NotifierPort``: SNS throttles the first ``fails`` Publish calls, then sends (to ``inner``)."""

    def __init__(self, inner: NotifierPort, fails: int = 1) -> None:
        self.inner, self.fails = inner, fails

    def publish(self, message: Notification) -> str | None:
        if self.fails:
            self.fails -= 1
            raise AdapterError("SNS Publish failed: Throttling")
        return self.inner.publish(message)


class FlakyAudit:
    """``AuditSink``: CloudWatch Logs refuses the first ``fails`` records, then keeps them (in ``inner``)."""

    def __init__(self, inner: MemoryAuditSink, fails: int = 1) -> None:
        self.inner, self.fails = inner, fails

    def write(self, record: Any) -> None:
        if self.fails:
            self.fails -= 1
            raise AdapterError("PutLogEvents failed")
        self.inner.write(record)


@pytest.fixture
def delivered_twice(jobs: Any, alarms: Any, policies: Any, metrics: Any, naming: AlarmNaming, ledger: Any) -> Any:
    """The idle alarm's notification delivered by one SQS message, then its retry (the same owner), through the
    delivery ledger and the once-wrappers as the composition root builds them: what each attempt returned."""

    def run(*, audit: Any, notifier: Any) -> list[Any]:
        stopper = GuardStopper(
            transitions=alarms, guards=GUARDS, jobs=jobs, alarms=alarms, arming=alarms,
            notifier=OnceNotifier(notifier), policies=policies, audit=OnceAuditSink(audit), metrics=metrics,
            clock=lambda: NOW, naming=naming, account_id=ACCOUNT,
        )  # fmt: skip
        message = notification()
        key = alarm_delivery_key(message, "msg-1")
        outcomes: list[Any] = []
        for _ in range(2):
            try:
                handled = deliver(
                    ledger, key, lambda: stopper.handle(message, "msg-1"), owner="sqs-1", now=NOW, hold_seconds=60
                )
                outcomes.append(handled)
            except AdapterError as exc:
                outcomes.append(exc)
        return outcomes

    return run


@pytest.mark.usefixtures("idle_alarm")
def test_an_owner_whose_stop_message_failed_is_told_by_the_retry_once(
    delivered_twice: Any, jobs: Any, notifier: Any, audit: MemoryAuditSink, metrics: Any, calls: Any
) -> None:
    # Given an idle job that SageMaker shows Stopping once it is stopped, and SNS throttling the first Publish
    jobs.jobs["job-1"] = training()

    def stop(name: str) -> StopOutcome:
        calls(f"stop {name}")
        jobs.jobs[name] = training(TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
        return StopOutcome.STOPPED

    jobs.stop = stop
    # When the notification's delivery fails after the stop and is retried
    first, retry = delivered_twice(audit=audit, notifier=FlakyNotifier(notifier))
    # Then the first attempt stopped the job and raised; the retry, which finds the job stopping, tells the owner
    # it was stopped, under the stop's code, and stops nothing more
    assert isinstance(first, AdapterError)
    assert (retry.code, retry.outcome) == (IdleCode.ALREADY_ENDED, "already-done")
    assert calls.log.count("stop job-1") == 1
    (told,) = notifier.sent
    assert (told.kind, told.outcome, told.items[0].code) == ("idle-stop", "stopped", IdleCode.STOP)
    # one audit record (the stop's), the savings counted once
    assert [(r.code, r.outcome.value) for r in audit.records] == [(IdleCode.STOP, "done")]
    assert len(metrics.savings) == 1
    # and a late copy of the message (its delivery completed, marked so since it told someone) tells nobody again
    copy, _ = delivered_twice(audit=audit, notifier=notifier)
    assert isinstance(copy, Duplicate) and len(notifier.sent) == 1


@pytest.mark.usefixtures("idle_alarm")
def test_a_retry_tells_nobody_of_a_stop_its_delivery_did_not_make(
    delivered_twice: Any, jobs: Any, notifier: Any, audit: MemoryAuditSink
) -> None:
    # Given a job someone else stopped meanwhile (StopTrainingJob: already stopping), and the audit record failing
    jobs.jobs["job-1"] = training()

    def stop(name: str) -> StopOutcome:
        jobs.jobs[name] = training(TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
        return StopOutcome.ALREADY_ENDED

    jobs.stop = stop
    # When the delivery fails and is retried, then nobody is told: the stop was not this delivery's
    first, retry = delivered_twice(audit=FlakyAudit(audit), notifier=notifier)
    assert isinstance(first, AdapterError) and retry.code == IdleCode.ALREADY_ENDED
    assert notifier.sent == []
