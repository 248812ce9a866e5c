"""The minimum-utilization guard through the one stopper: a notice reaches the owner (and is audited
under rule ``efficiency``), audit mode only records it, a stop after unheeded notices stops."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sagemaker_governance.audit import MemoryAuditSink, Outcome
from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.domain.guards.base import AlarmNaming
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.events import AlarmNotification
from sagemaker_governance.service.guard_stopper import GuardStopper
from tests.builders import job
from tests.service.conftest import NOW, TAGS, Calls, FakeJobs, FixedPolicies

PREFIX = "gov-idle-"
ON = {"enabled": True, "min_gpu_percent": 50, "window_minutes": 60, "grace_minutes": 30, "stop_after_notices": 2}


class Alarms:
    """The alarms exist with this stack's tags; resets are recorded."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def tags(self, name: str) -> dict[str, str] | None:
        return {"smgov:training-job": "job-1", "smgov:managed-by": "gov"}

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
    mark: str, *, mode: str = "enforce", minutes_training: int = 400
) -> tuple[Calls, MemoryAuditSink, Notifier]:
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
    alarms = Alarms(calls)
    stopper = GuardStopper(
        guards=(EFFICIENCY,),
        jobs=jobs,
        alarms=alarms,
        arming=alarms,
        notifier=notifier,
        policies=FixedPolicies(Policy.model_validate({"mode": mode, "efficiency": ON})),
        audit=audit,
        metrics=MemoryBusinessMetrics(),
        clock=lambda: NOW,
        naming=AlarmNaming(prefix=PREFIX, managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t"),
        account_id="123456789012",
    )
    message = AlarmNotification.model_validate(
        {
            "AlarmName": f"{PREFIX}job-1{mark}",
            "AWSAccountId": "123456789012",
            "NewStateValue": "ALARM",
            "StateChangeTime": (NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000",
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


def test_in_audit_mode_a_notice_is_recorded_not_sent() -> None:
    _, audit, notifier = run(".efficiency", mode="audit")
    assert [r.outcome for r in audit.records] == [Outcome.AUDIT_ONLY] and notifier.messages == []


def test_the_stop_alarm_stops_after_the_unheeded_notices() -> None:
    calls, audit, notifier = run(".efficiency-stop")
    assert "stop job-1" in calls.log
    assert [r.code for r in audit.records] == ["efficiency.stop.below-minimum"]
    assert [m.kind for m in notifier.messages] == ["efficiency-stop"]


def test_never_a_stop_in_the_grace_period_plus_its_window() -> None:
    calls, audit, notifier = run(".efficiency-stop", minutes_training=30 + 180 - 5)
    assert "stop job-1" not in calls.log and notifier.messages == []
    assert [r.code for r in audit.records] == ["efficiency.skip.grace"]
