"""The interfaces the idle guard acts through (CloudWatch alarms, business metrics).

Two alarm ports, so that each function is granted only what it uses: the job-events function manages
the alarms' lifecycle; the stopper only reads an alarm's tags and resets its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sagemaker_governance.domain.idle import AlarmPlan
from sagemaker_governance.domain.instances import InstanceFacts


class AlarmLifecyclePort(Protocol):
    def put(self, plan: AlarmPlan) -> None:
        """Create or update (upsert) every alarm of the plan, children before their composite."""

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete the named alarms in order; return those that existed. A missing alarm is success."""

    def reset(self, names: Sequence[str], reason: str) -> None:
        """Set metric alarms back to ``OK`` so that they notify again if the condition still holds."""


class AlarmOwnershipPort(Protocol):
    def tags(self, name: str) -> dict[str, str] | None:
        """The alarm's tags, or ``None`` when no such alarm exists."""

    def reset(self, names: Sequence[str], reason: str) -> None:
        """Set metric alarms back to ``OK`` so that they notify again if the condition still holds."""


class InstanceCatalogPort(Protocol):
    def facts(self, instance_type: str) -> InstanceFacts:
        """What is known of the type's GPUs (``unknown`` with the reason when nobody can say); never raises."""
