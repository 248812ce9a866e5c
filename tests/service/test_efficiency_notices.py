"""The minimum-utilization guard through the one stopper: a notice reaches the owner (and is audited
under rule ``efficiency``), audit mode only records it, a stop after unheeded notices stops."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink, Outcome
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmState, DescribedAlarm
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.events.alarms import AlarmNotification
from sagemaker_governance.service.guard_alarms import GuardAlarms
from sagemaker_governance.service.guard_stopper import GuardStopper
from sagemaker_governance.service.idempotency import GuardNotices
from sagemaker_governance.service.recording import Trigger
from tests.builders import job
from tests.service.conftest import NOW, TAGS, Calls, FakeAlarms, FakeJobs, FixedPolicies, MemoryLedger

PREFIX = "gov-idle-"
ON = {"enabled": True, "min_gpu_percent": 50, "window_minutes": 60, "grace_minutes": 30, "stop_after_notices": 2}


class Alarms:
    """The alarms exist with this stack's tags; resets are recorded; ``now``: the notified alarm's state
    and when it last changed (``None``: not known)."""

    def __init__(self, calls: Calls, now: AlarmState | None = None, notice: AlarmState | None = None) -> None:
        self.calls = calls
        self.now = now
        self.notice = notice  # the notice alarm's, when a stop is judged (None: as ``now``)

    def current_state(self, name: str) -> AlarmState | None:
        self.calls(f"state {name}")
        return self.notice if self.notice is not None and name.endswith(".efficiency") else self.now

    def tags(self, name: str) -> dict[str, str] | None:
        return {"smgov:training-job": "job-1", "smgov:managed-by": "gov"}

    def definition(self, name: str) -> DescribedAlarm | None:
        return None

    def reset(self, names: Any, reason: str) -> None:
        self.calls("reset " + ",".join(names))

    def enable_actions(self, names: Any) -> None: ...

    def disable_actions(self, names: Any) -> None: ...


class Notifier:
    def __init__(self) -> None:
        self.messages: list[Notification] = []

    def publish(self, message: Notification) -> str | None:
        self.messages.append(message)
        return "m-1"


def run(
    mark: str,
    *,
    reason: str = "",
    mode: str = "enforce",
    minutes_training: int = 400,
    changed_minutes_ago: int = 1,
    alarm_now: tuple[str, timedelta] | None = None,
    efficiency: dict[str, Any] | None = None,
    notices: tuple[MemoryLedger, AlarmState | None] | None = None,
) -> tuple[Calls, MemoryAuditSink, Notifier]:
    """``alarm_now``: the alarm's state and how long after the notification's change it moved there;
    ``efficiency``: the team's section now (default ``ON``); ``notices``: the notices' ledger (None: none)
    and the notice alarm's state as a stop reads it."""
    calls, audit, notifier = Calls(), MemoryAuditSink(), Notifier()
    jobs = FakeJobs(calls)
    started = (NOW - timedelta(minutes=minutes_training)).isoformat()
    jobs.jobs["job-1"] = job(
        "job-1",
        TAGS,
        SecondaryStatus="Training",
        ResourceConfig={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1},
        TrainingStartTime=started,
        SecondaryStatusTransitions=[{"Status": "Training", "StartTime": started}],
    )
    changed = NOW - timedelta(minutes=changed_minutes_ago)
    alarms = Alarms(
        calls, AlarmState(alarm_now[0], changed + alarm_now[1]) if alarm_now else None, notices and notices[1]
    )
    stopper = GuardStopper(
        guards=(EFFICIENCY,),
        jobs=jobs,
        alarms=alarms,
        arming=alarms,
        notifier=notifier,
        policies=FixedPolicies(Policy.model_validate({"mode": mode, "efficiency": efficiency or ON})),
        audit=audit,
        metrics=MemoryBusinessMetrics(),
        clock=lambda: NOW,
        naming=AlarmNaming(prefix=PREFIX, managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t"),
        account_id="123456789012",
        transitions=alarms,
        notices=GuardNotices(notices[0], lambda: NOW) if notices is not None else None,
    )
    message = AlarmNotification.model_validate(
        {
            "AlarmName": f"{PREFIX}job-1{mark}",
            "AWSAccountId": "123456789012",
            "NewStateValue": "ALARM",
            "NewStateReason": reason,
            "StateChangeTime": changed.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000",
        }
    )
    stopper.handle(message, "msg-1")
    return calls, audit, notifier


def test_a_notice_reaches_the_owner_with_the_suggestion_and_nothing_is_stopped() -> None:
    calls, audit, notifier = run(".efficiency")
    (record,) = audit.records
    assert (record.rule, record.code, record.action, record.outcome) == (
        "efficiency",
        "efficiency.notify.below-minimum",
        "notify",
        Outcome.DONE,
    )
    (message,) = notifier.messages
    assert message.kind == "efficiency-notice" and message.outcome == "notified" and message.team == "vision"
    assert message.items[0].remedy and "stop job-1" not in calls.log
    # its alarm stays in ALARM: a reset would bring it back within seconds, a notice every period
    assert not any(line.startswith("reset") for line in calls.log)


def test_the_notice_shows_the_owner_the_utilization_its_alarm_measured_last() -> None:
    # Given the notice alarm's state reason lists its newest 5-minute mean: 124 on a 4-GPU host
    reason = (
        "Threshold Crossed: 12 out of the last 12 datapoints [124.0 (21/11/26 11:55:00), 130.0 (21/11/26 "
        "11:50:00) ...] were less than the threshold (200.0) (minimum 12 datapoints for OK -> ALARM transition)."
    )
    _, audit, notifier = run(".efficiency", reason=reason)
    # Then the record carries it per GPU, and the owner reads it
    (record,) = audit.records
    assert record.code == "efficiency.notify.below-minimum"
    assert record.evidence["newest_value"] == 124.0 and record.evidence["newest_percent_per_gpu"] == 31.0
    (message,) = notifier.messages
    assert "31% per GPU" in message.items[0].reason


def test_in_audit_mode_a_notice_is_recorded_not_sent() -> None:
    _, audit, notifier = run(".efficiency", mode="audit")
    assert [r.outcome for r in audit.records] == [Outcome.AUDIT_ONLY] and notifier.messages == []


def test_the_stop_alarm_stops_after_the_unheeded_notices() -> None:
    calls, audit, notifier = run(".efficiency-stop")
    assert "stop job-1" in calls.log
    assert [r.code for r in audit.records] == ["efficiency.stop.below-minimum"]
    assert [m.kind for m in notifier.messages] == ["efficiency-stop"]


def test_a_stop_alarm_from_before_the_team_set_never_a_stop_does_not_stop_the_job() -> None:
    # Given a stop alarm created under stop_after_notices 2, and the team's policy now says 0: never a stop
    calls, audit, notifier = run(".efficiency-stop", efficiency={**ON, "stop_after_notices": 0})
    # Then its firing stops nothing and tells nothing; the skip is recorded, the alarm left as it is
    assert "stop job-1" not in calls.log and notifier.messages == []
    assert [(r.code, r.outcome) for r in audit.records] == [("efficiency.skip.unplanned-alarm", Outcome.SKIPPED)]
    assert not any(line.startswith("reset") for line in calls.log)


def test_never_a_stop_in_the_grace_period_plus_its_window() -> None:
    calls, audit, notifier = run(".efficiency-stop", minutes_training=30 + 180 - 5)
    assert "stop job-1" not in calls.log and notifier.messages == []
    assert [r.code for r in audit.records] == ["efficiency.skip.grace"]


# ---- late and superseded notifications (a redelivery after a failure, a reordered delivery) -------------


def test_a_notice_whose_alarm_fired_again_since_is_left_to_the_newer_notification() -> None:
    # Given a notice alarm that changed state again after this notification and is in ALARM now (e.g. a
    # composite's second transition while its children were reset, or a retry after a failed delivery)
    calls, audit, notifier = run(".efficiency", alarm_now=("ALARM", timedelta(seconds=40)))
    # Then the owner is not told by this one: the newer ALARM's own notification tells them, once
    assert notifier.messages == [] and not any(line.startswith("reset") for line in calls.log)
    (record,) = audit.records
    assert (record.code, record.outcome) == ("efficiency.skip.superseded", Outcome.SKIPPED)
    assert record.evidence["superseded_code"] == "efficiency.notify.below-minimum"


def test_a_late_notice_whose_stretch_has_ended_is_still_sent_saying_when_the_window_ended() -> None:
    # Given the notice's first delivery failed and came back 30 minutes later (the queue's visibility timeout),
    # after the job recovered (the alarm went OK): no newer notification will tell this stretch
    calls, audit, notifier = run(".efficiency", changed_minutes_ago=30, alarm_now=("OK", timedelta(minutes=10)))
    # Then the owner is told now, as of the window's end, and nothing is reset
    assert [m.kind for m in notifier.messages] == ["efficiency-notice"]
    (record,) = audit.records
    assert record.code == "efficiency.notify.below-minimum"
    assert (NOW - timedelta(minutes=30)).isoformat() in record.reason and "late" in record.reason
    assert not any(line.startswith("reset") for line in calls.log)


def test_a_late_notice_is_judged_as_of_its_alarm_change_not_of_its_delivery() -> None:
    # The notification changed state 20 minutes ago, 5 minutes before grace plus window had passed: judged
    # as of then it is too early (a reset), though 15 minutes later the job would pass
    _, audit, notifier = run(".efficiency", minutes_training=30 + 60 + 15, changed_minutes_ago=20)
    assert notifier.messages == [] and [r.code for r in audit.records] == ["efficiency.skip.grace"]
    # ... and a notification of the same delivery time but changed 10 minutes ago notifies
    _, audit, notifier = run(".efficiency", minutes_training=30 + 60 + 15, changed_minutes_ago=10)
    assert [r.code for r in audit.records] == ["efficiency.notify.below-minimum"] and len(notifier.messages) == 1


def test_the_stop_alarm_still_treats_a_late_notification_as_stale() -> None:
    calls, audit, _ = run(".efficiency-stop", changed_minutes_ago=30)
    assert [r.code for r in audit.records] == ["efficiency.skip.stale"] and "stop job-1" not in calls.log


# ---- a stop only after a notice that reached the owner -------------------------------------------------


def test_a_stop_after_a_notice_only_recorded_in_audit_mode_is_a_notice_instead() -> None:
    # Given the stretch's notice judged in audit mode (recorded, not sent: notify_in_audit_mode false), its notice
    # alarm left in ALARM since then
    ledger = MemoryLedger(Calls())
    _, audit, notifier = run(".efficiency", mode="audit", changed_minutes_ago=120, notices=(ledger, None))
    assert [r.outcome for r in audit.records] == [Outcome.AUDIT_ONLY] and notifier.messages == []
    # When the team switched to enforce and the stop alarm fires in that stretch
    noticed = AlarmState("ALARM", NOW - timedelta(minutes=120))
    calls, audit, notifier = run(".efficiency-stop", notices=(ledger, noticed))
    # Then the job is not stopped: its owner, never told, gets the notice now, and nothing is reset
    assert "stop job-1" not in calls.log
    assert [(r.code, r.outcome) for r in audit.records] == [("efficiency.notify.before-stop", Outcome.DONE)]
    assert [m.kind for m in notifier.messages] == ["efficiency-notice"]
    assert not any(line.startswith("reset") for line in calls.log)
    # and the stretch's notice counts as told: a later firing of its stop alarm stops the job
    calls, audit, _ = run(".efficiency-stop", notices=(ledger, noticed))
    assert "stop job-1" in calls.log and [r.code for r in audit.records] == ["efficiency.stop.below-minimum"]


def test_a_stop_after_the_notice_was_sent_in_the_same_stretch_stops() -> None:
    # Given the stretch's notice sent (enforce), its notice alarm in ALARM since
    ledger = MemoryLedger(Calls())
    _, _, notifier = run(".efficiency", changed_minutes_ago=120, notices=(ledger, None))
    assert [m.kind for m in notifier.messages] == ["efficiency-notice"]
    # When the stop alarm fires
    noticed = AlarmState("ALARM", NOW - timedelta(minutes=120))
    calls, audit, notifier = run(".efficiency-stop", notices=(ledger, noticed))
    # Then the job is stopped, and the owner is told of the stop (not noticed again)
    assert "stop job-1" in calls.log and [r.code for r in audit.records] == ["efficiency.stop.below-minimum"]
    assert [m.kind for m in notifier.messages] == ["efficiency-stop"]


def test_a_stop_whose_notice_alarm_is_not_in_alarm_neither_stops_nor_tells() -> None:
    # Given a notice alarm reset a moment ago (OK): which notice this stretch had is unknown
    ledger = MemoryLedger(Calls())
    calls, audit, notifier = run(
        ".efficiency-stop", notices=(ledger, AlarmState("OK", NOW - timedelta(minutes=2)))
    )
    # Then no stop and no message: the notice alarm's own notification tells the owner
    assert "stop job-1" not in calls.log and notifier.messages == []
    assert [(r.code, r.outcome) for r in audit.records] == [("efficiency.skip.not-told", Outcome.SKIPPED)]


# ---- told once per stretch, also across entries into Training ----------------------------------------


def test_a_late_training_event_does_not_reset_a_notice_alarm_whose_owner_was_told() -> None:
    # Given a job in its second stint, below the minimum and its owner told (its notice alarm in ALARM), with stops on
    calls = Calls()
    jobs, alarms = FakeJobs(calls), FakeAlarms(calls)
    first = [
        {"Status": "Starting", "StartTime": (NOW - timedelta(minutes=700)).isoformat()},
        {"Status": "Training", "StartTime": (NOW - timedelta(minutes=690)).isoformat()},
    ]
    both = [
        *first,
        {"Status": "Interrupted", "StartTime": (NOW - timedelta(minutes=500)).isoformat()},
        {"Status": "Training", "StartTime": (NOW - timedelta(minutes=400)).isoformat()},
    ]
    resources = {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}
    jobs.jobs["job-1"] = job(
        "job-1", TAGS, SecondaryStatus="Training", SecondaryStatusTransitions=both, ResourceConfig=resources
    )
    naming = AlarmNaming(prefix=PREFIX, managed_by="gov")
    notice, stop = naming.alarm_name("job-1", ".efficiency"), naming.alarm_name("job-1", ".efficiency-stop")
    alarms.alarms[notice] = "ALARM"
    lifecycle = GuardAlarms(
        EFFICIENCY,
        jobs=jobs,
        alarms=alarms,
        audit=MemoryAuditSink(),
        clock=lambda: NOW,
        naming=naming,
        policies=FixedPolicies(Policy.model_validate({"mode": "enforce", "efficiency": ON})),
    )
    # When the first stint's Training event comes late (a redrive), after the re-read shows the restart
    late = job(
        "job-1", TAGS, SecondaryStatus="Training", SecondaryStatusTransitions=first, ResourceConfig=resources
    )
    (decision,) = lifecycle.react(late, Trigger(kind="job-state-change", event_id="late"))
    # Then the alarms are put again, the stop alarm reset as before, but the notice alarm stays in ALARM: reset, it
    # would fire again within a minute and tell the owner again of the same stretch
    assert decision.code == "efficiency.alarm.create"
    assert f"reset {stop}" in calls.log and f"reset {notice}" not in calls.log
    assert alarms.alarms[notice] == "ALARM"
