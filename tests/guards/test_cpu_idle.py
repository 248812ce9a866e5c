"""A new guard is one module: the tiny CPU guard (``cpu_idle.py``, not a product guard) plugs into the
service's one alarm lifecycle, stopper and reconciler, through the real handlers, with no other change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan, Notice
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.handlers.reconciler import handler as reconciler
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request, job
from tests.conftest import load_event
from tests.guards.cpu_idle import CPU_IDLE, CpuCode, CpuPolicy, CpuRole
from tests.handlers.conftest import ENFORCE, NOW

PREFIX = "sagemaker-governance-idle-"
NAMING = AlarmNaming(prefix=PREFIX, managed_by="sagemaker-governance")


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def acct(clock: Clock) -> Iterator[LocalAccount]:
    # The registration: the registered guards and the new one (in the product: one line in registry.py).
    with local_account(clock, ENFORCE, guards=(*GUARDS, CPU_IDLE)) as account:
        yield account


def cpu_records(account: LocalAccount) -> list[Any]:
    return [r for r in account.audit.records if r.rule == "cpu-guard"]


def training(account: LocalAccount, name: str, *, event: bool = True) -> str:
    account.sagemaker.launch(create_request(name), secondary="Training")
    if event:
        account.invoke(job_events, account.sagemaker.event(name))
    return f"{PREFIX}{name}.cpu"


# ---- the guard alone (pure) --------------------------------------------------------------------------


def test_the_guard_plans_one_alarm_and_judges_its_notification() -> None:
    j = job("job-1", TrainingJobStatus="InProgress", SecondaryStatus="Training")
    plan = CPU_IDLE.plan(j, CpuPolicy(), NAMING)
    assert isinstance(plan, AlarmPlan) and plan.names == (f"{PREFIX}job-1.cpu",)
    assert CPU_IDLE.role_of(f"{PREFIX}job-1.cpu", "job-1", NAMING) == CpuRole.WATCH
    notice = Notice(job=j, mode=Mode.ENFORCE, now=NOW, naming=NAMING, alarm_changed_at=NOW)
    assert CPU_IDLE.judge(CpuRole.WATCH, notice, CpuPolicy()).decision.code == CpuCode.STOP
    stale = notice.model_copy(update={"alarm_changed_at": NOW - timedelta(hours=1)})
    assert CPU_IDLE.judge(CpuRole.WATCH, stale, CpuPolicy()).reset == (f"{PREFIX}job-1.cpu",)


# ---- plugged into the service ------------------------------------------------------------------------


def test_training_creates_its_alarm_next_to_the_registered_guards(acct: LocalAccount) -> None:
    alarm = training(acct, "job-1")
    assert alarm in acct.cloudwatch.alarms
    assert {f"{PREFIX}job-1", alarm} <= set(acct.cloudwatch.alarms)  # the idle guard's too
    (record,) = cpu_records(acct)
    assert (record.action, record.outcome.value) == ("create-alarm", "done")


def test_its_alarm_is_verified_routed_judged_and_acted_on_by_the_one_stopper(
    acct: LocalAccount, clock: Clock
) -> None:
    queue = acct.notification_inbox()
    alarm = training(acct, "job-1")
    clock.now += timedelta(minutes=40)
    acct.cloudwatch.set_state(alarm, "ALARM")
    result = acct.invoke(stopper, acct.cloudwatch.sns_event([acct.cloudwatch.notification(alarm)]))
    assert result["results"][0]["code"] == CpuCode.STOP
    assert acct.sagemaker.stop_requests == ["job-1"]
    stop = cpu_records(acct)[-1]
    assert (stop.trigger, stop.action, stop.outcome.value) == ("cpu-alarm", "stop", "done")
    assert acct.metrics.savings and acct.metrics.savings[0][0] == "cpu-guard"
    (message,) = acct.sqs.receive_message(QueueUrl=queue)["Messages"]
    assert json.loads(message["Body"])["kind"] == "cpu-stop"


def test_its_alarm_is_deleted_when_the_job_ends(acct: LocalAccount) -> None:
    alarm = training(acct, "job-1")
    acct.sagemaker.transition("job-1", "Completed", "Completed")
    acct.invoke(job_events, acct.sagemaker.event("job-1"))
    assert alarm not in acct.cloudwatch.alarms
    assert cpu_records(acct)[-1].action == "delete-alarm"


def test_the_reconciler_repairs_its_missing_alarm_and_deletes_its_orphan(acct: LocalAccount, clock: Clock) -> None:
    lost = training(acct, "lost-1", event=False)  # its Training event was lost
    orphan = training(acct, "ended-1")
    acct.sagemaker.transition("ended-1", "Completed", "Completed")  # its terminal event was lost
    clock.now += timedelta(minutes=30)
    acct.invoke(reconciler, load_event("scheduled-reconcile.json"))
    assert lost in acct.cloudwatch.alarms
    assert orphan not in acct.cloudwatch.alarms
    repaired = [r for r in cpu_records(acct) if r.trigger == "reconciler"]
    assert [(r.job_name, r.action) for r in repaired] == [("lost-1", "create-alarm")]
