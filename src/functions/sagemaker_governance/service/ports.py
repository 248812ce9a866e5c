"""The small interfaces the service layer acts through; adapters implement them, tests may fake them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sagemaker_governance.domain.errors import StopOutcome
from sagemaker_governance.domain.failure_evidence import CheckpointProgress, FailureEvidence
from sagemaker_governance.domain.guards.base import AlarmPlan, AlarmState, DescribedAlarm
from sagemaker_governance.domain.instances import InstanceFacts
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy

if TYPE_CHECKING:  # annotations only: the guard stopper never loads the Spot health models
    from sagemaker_governance.domain.spot_health import SpotSignal

Clock = Callable[[], datetime]
T = TypeVar("T")


class JobsPort(Protocol):
    def describe(self, name: str) -> dict[str, Any]: ...

    def list_tags(self, arn: str) -> dict[str, str]: ...

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        """The job as it is now; ``tags``: its tags when the caller knows them (an event carries them)."""
        ...

    def stop(self, name: str) -> StopOutcome: ...


class FailureLogsPort(Protocol):
    """The last lines of a failed job's log streams (auto-resume reads them at failure only)."""

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        """The last ``lines`` lines of at most ``hosts`` hosts' latest streams, failing host first.
        Never raises for what cannot be read: the evidence says what was not read and why."""


class CheckpointsPort(Protocol):
    """What a checkpoint location holds (auto-resume: did the failed attempt write any checkpoint?)."""

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        """Objects under ``s3_uri`` and how many were written at or after ``since``; never raises for
        what cannot be read (``CheckpointProgress.unknown``)."""


class SpotHealthPort(Protocol):
    """The fleet's Spot health ledger (``adapters/spot_health.py``)."""

    def record(self, signals: Iterable[SpotSignal]) -> None: ...

    def recent(self, instance_type: str, since: datetime) -> list[SpotSignal]: ...


class NotifierPort(Protocol):
    def publish(self, message: Notification) -> str | None: ...


class PolicySource(Protocol):
    def current(self, max_age_seconds: float | None = None) -> Policy:
        """The effective policy; ``max_age_seconds``: the caller accepts a document read that long ago
        (more than the store's own cache time), to spare a read (the alarm lifecycle: guard_alarms.py).
        Raises ``PolicyUnavailable`` when the policy is unknown (a new container that cannot read the document):
        the caller acts on nothing and lets it fail the delivery."""
        ...


class EvaluationMarksPort(Protocol):
    def mark(self, arn: str, key: str, value: str) -> None:
        """Tag the job (``AddTags``): compliance leaves a mark the reconciler reads."""


class Bounded(Protocol):
    """A time budget that work matching a policy's patterns on untrusted text is run in (``TimeBound``)."""

    def __call__(self, work: Callable[[], T]) -> T:
        """``work()``, interrupted when the budget runs out: raises ``PatternTimeout`` (then, and for any work run in
        the budget after it was spent). Work that ends in time spends its time from the budget."""
        ...


# A new budget of so many seconds (``adapters/time_bound.py``): Python's ``re`` has no timeout, and a pattern the
# backtracking check misses (``domain/backtracking.py``) could otherwise time a function out.
TimeBound = Callable[[float], Bounded]


# ---- the alarm guards' alarms: one port per function's grant ---------------------------------------


class AlarmLifecyclePort(Protocol):
    """The job-events function (and the reconciler) manage the guards' alarms' lifecycle."""

    def put(self, plan: AlarmPlan) -> None:
        """Create or update (upsert) every alarm of the plan, in its order."""

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete the named alarms in order; return those that existed. A missing alarm is success."""

    def reset(self, names: Sequence[str], reason: str) -> None:
        """Set metric alarms back to ``OK`` so that they notify again if the condition still holds."""

    def metric_alarm(self, name: str) -> Mapping[str, Any] | None:
        """The metric alarm as ``DescribeAlarms`` lists it now (its ``ActionsEnabled``, its metric or queries);
        ``None``: no such metric alarm. Raises ``AdapterError``. Read only when a put cannot tell otherwise
        whether a guard was armed, and on which metrics (``GuardAlarms``)."""


class AlarmOwnershipPort(Protocol):
    """The stopper reads an alarm's tags (existence and ownership) and resets alarms' state."""

    def tags(self, name: str) -> dict[str, str] | None:
        """The alarm's tags, or ``None`` when no such alarm exists."""

    def reset(self, names: Sequence[str], reason: str) -> None: ...


class AlarmTransitionsPort(Protocol):
    """The stopper reads an alarm's current state and when it last changed (to tell a notification
    superseded by a newer state change from the alarm's current one), and a composite's triggering child's
    definition (which its notification does not repeat)."""

    def current_state(self, name: str) -> AlarmState | None:
        """``None`` when the alarm, or the time of its last state change, is not there."""

    def definition(self, name: str) -> DescribedAlarm | None:
        """The alarm's ``AlarmDescription`` and terms (``None``: no such alarm); raises ``AdapterError``."""


class AlarmArmingPort(Protocol):
    """The stopper turns alarms' actions on and off (a guard's verdict to arm or disarm)."""

    def enable_actions(self, names: Sequence[str]) -> None: ...

    def disable_actions(self, names: Sequence[str]) -> None: ...


class InstanceCatalogPort(Protocol):
    def facts(self, instance_type: str) -> InstanceFacts:
        """What is known of the type's GPUs (``unknown`` with the reason when nobody can say); never raises."""
