"""The service tier: use cases driven through in-memory fakes of their ports (no moto, no boto3).

Every fake records the calls it answers in one shared ``Calls`` log, so a test can assert the *order* of
what a use case did (re-read before creating, create before resetting, claim before processing ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.domain.errors import AdapterError, Claim, JobNotFound, StopOutcome, Throttled
from sagemaker_governance.domain.guards.base import (
    AlarmNaming,
    AlarmPlan,
    AlarmState,
    DescribedAlarm,
    metric_alarm_terms,
)
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy
from sagemaker_governance.settings import Settings

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
TAGS = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"}


@dataclass
class Calls:
    log: list[str] = field(default_factory=list)

    def __call__(self, entry: str) -> None:
        self.log.append(entry)


class FakeJobs:
    """``JobsPort``: jobs as SageMaker describes them now."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.jobs: dict[str, TrainingJob] = {}

    def describe(self, name: str) -> dict[str, Any]:
        self.calls(f"describe {name}")
        if name not in self.jobs:
            raise JobNotFound(name)
        return self.jobs[name].model_dump(by_alias=True)

    def list_tags(self, arn: str) -> dict[str, str]:
        self.calls(f"list-tags {arn}")
        return next((dict(j.tags or {}) for j in self.jobs.values() if j.arn == arn), {})

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        self.calls(f"get-job {name}" + (" (event tags)" if tags is not None else ""))
        if name not in self.jobs:
            raise JobNotFound(name)
        job = self.jobs[name]
        return job.with_tags(tags) if tags is not None else job

    def stop(self, name: str) -> StopOutcome:
        self.calls(f"stop {name}")
        return StopOutcome.STOPPED


class FakeAlarms:
    """``AlarmLifecyclePort``: the alarms that exist, by name."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.alarms: dict[str, str] = {}  # name -> state
        self.tagged: dict[str, dict[str, str]] = {}  # name -> its tags
        self.throttled = 0  # the next n deletes are refused for the request-rate quota
        self.changed: dict[str, datetime] = {}  # name -> when its state last changed (none: not known)
        self.state_unreadable = False  # DescribeAlarms fails
        self.descriptions: dict[str, str] = {}  # name -> its AlarmDescription (DescribeAlarms)
        self.terms: dict[str, dict[str, Any]] = {}  # name -> its threshold and periods (DescribeAlarms)
        self.describe_fails = False  # DescribeAlarms of a definition fails
        self.actions_on: dict[str, bool] = {}  # name -> its ActionsEnabled (as put, armed or disarmed)
        self.actions_unreadable = False  # DescribeAlarms of a metric alarm's ActionsEnabled fails

    def put(self, plan: AlarmPlan) -> None:
        for name in plan.metric_alarm_names:
            self.calls(f"put {name}")
            self.alarms.setdefault(name, "INSUFFICIENT_DATA")
        self.terms.update({r["AlarmName"]: metric_alarm_terms(r) for r in plan.metric_requests})
        self.actions_on.update({a.name: bool(a.request.get("ActionsEnabled", True)) for a in plan.alarms})

    def delete(self, names: Sequence[str]) -> list[str]:
        existed = [n for n in names if n in self.alarms]
        self.calls("delete " + ",".join(names))
        if self.throttled:
            self.throttled -= 1
            raise Throttled("DeleteAlarms throttled: Rate exceeded")
        for name in existed:
            del self.alarms[name]
        return existed

    def reset(self, names: Sequence[str], reason: str) -> None:
        for name in names:
            self.calls(f"reset {name}")
            self.alarms[name] = "OK"

    def metric_alarm(self, name: str) -> dict[str, Any] | None:
        """The metric alarm with its actions as they are now (``actions_on``; no metric: whichever it reads is
        unknown); ``None``: no such alarm."""
        self.calls(f"actions {name}")
        if self.actions_unreadable:
            raise AdapterError(f"DescribeAlarms {name} failed: Rate exceeded")
        return (
            {"AlarmName": name, "ActionsEnabled": self.actions_on.get(name, True)} if name in self.alarms else None
        )

    # ``AlarmOwnershipPort`` and ``AlarmArmingPort`` (the stopper's view of the same alarms)

    def tags(self, name: str) -> dict[str, str] | None:
        self.calls(f"tags {name}")
        return dict(self.tagged.get(name, {})) if name in self.alarms else None

    def current_state(self, name: str) -> AlarmState | None:
        """``AlarmTransitionsPort``."""
        self.calls(f"state {name}")
        if self.state_unreadable:
            raise AdapterError(f"DescribeAlarms {name} failed: Rate exceeded")
        changed = self.changed.get(name)
        return AlarmState(self.alarms[name], changed) if name in self.alarms and changed is not None else None

    def definition(self, name: str) -> DescribedAlarm | None:
        """``AlarmTransitionsPort``: what an alarm was planned to watch (``descriptions``) and on which terms
        (``terms``: as put); ``None``: neither is known."""
        self.calls(f"describe {name}")
        if self.describe_fails:
            raise AdapterError(f"DescribeAlarms {name} failed: Rate exceeded")
        if name not in self.descriptions and name not in self.terms:
            return None
        return DescribedAlarm(name=name, description=self.descriptions.get(name), terms=self.terms.get(name, {}))

    def enable_actions(self, names: Sequence[str]) -> None:
        self.calls("arm " + ",".join(names))
        self.actions_on.update({name: True for name in names if name in self.alarms})

    def disable_actions(self, names: Sequence[str]) -> None:
        self.calls("disarm " + ",".join(names))
        self.actions_on.update({name: False for name in names if name in self.alarms})


class FakeNotifier:
    """``NotifierPort``: keeps what it would publish."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.sent: list[Notification] = []

    def publish(self, message: Notification) -> str | None:
        self.calls(f"notify {message.kind} {message.job_name}")
        self.sent.append(message)
        return f"m-{len(self.sent)}"


class FixedPolicies:
    """``PolicySource``: one policy; records the age each caller accepts."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.asked: list[float | None] = []

    def current(self, max_age_seconds: float | None = None) -> Policy:
        self.asked.append(max_age_seconds)
        return self.policy


class MemoryLedger:
    """``LedgerPort`` in memory, with the DynamoDB ledger's rules (adapters/idempotency.py)."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.items: dict[str, dict[str, Any]] = {}
        self.tokens = 0

    def claim(self, key: str, owner: str, now: datetime, hold_seconds: float) -> Claim:
        self.calls(f"claim {owner}")
        old = self.items.get(key)
        at = now.timestamp()
        free = (
            old is None
            or old["status"] == "FAILED"
            or (old["status"] == "INPROGRESS" and old["owner"] == owner and old["until"] < at)
        )
        if not free:
            return Claim(granted=False, pending=old is not None and old["status"] == "INPROGRESS")
        done = list(old["done"]) if old is not None else []  # a claim leaves the item's done list as it is
        self.tokens += 1
        token = f"t-{self.tokens}"
        self.items[key] = {"status": "INPROGRESS", "owner": owner, "until": at + hold_seconds, "done": done}
        self.items[key]["token"] = token
        return Claim(granted=True, done=frozenset(done), token=token)

    def release(self, key: str, owner: str, now: datetime, done: Sequence[str]) -> None:
        self.calls(f"release {owner} {sorted(done)}")
        old = self.items.get(key)
        if old is not None and old["owner"] == owner:  # the DynamoDB ledger's condition
            self.items[key] = {**old, "status": "FAILED", "until": now.timestamp(), "done": list(done)}

    def complete(self, key: str, token: str, now: datetime) -> None:
        old = self.items.get(key)
        self.calls(f"complete {old['owner'] if old else '-'}")
        if old is not None and old.get("token") == token:
            old["status"] = "COMPLETED"


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def jobs(calls: Calls) -> FakeJobs:
    return FakeJobs(calls)


@pytest.fixture
def alarms(calls: Calls) -> FakeAlarms:
    return FakeAlarms(calls)


@pytest.fixture
def notifier(calls: Calls) -> FakeNotifier:
    return FakeNotifier(calls)


@pytest.fixture
def ledger(calls: Calls) -> MemoryLedger:
    return MemoryLedger(calls)


@pytest.fixture
def audit() -> MemoryAuditSink:
    return MemoryAuditSink()


@pytest.fixture
def default_policy() -> Policy:
    """The deploy-time defaults (enforce mode, as the simulator's scenarios deploy)."""
    return build_policy({**Settings().base_policy_document(), "mode": "enforce"})


@pytest.fixture
def policies(default_policy: Policy) -> FixedPolicies:
    return FixedPolicies(default_policy)


@pytest.fixture
def naming() -> AlarmNaming:
    return AlarmNaming(prefix="gov-guard-", managed_by="gov")


@pytest.fixture
def clock() -> Callable[[], datetime]:
    return lambda: NOW


@pytest.fixture
def idle_lifecycle(
    jobs: FakeJobs, alarms: FakeAlarms, policies: FixedPolicies, audit: MemoryAuditSink, naming: AlarmNaming
) -> Any:
    """The idle guard's ``GuardAlarms`` on the fakes (the clock: NOW)."""
    from sagemaker_governance.domain.guards.idle import IDLE
    from sagemaker_governance.service.guard_alarms import GuardAlarms

    return GuardAlarms(
        IDLE, jobs=jobs, alarms=alarms, policies=policies, audit=audit, clock=lambda: NOW, naming=naming
    )
