"""The interfaces the progress guard acts through (alarm lifecycle in job-events, arming in the stopper)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class ProgressAlarmLifecyclePort(Protocol):
    def put_metric_alarms(self, job_name: str, requests: Sequence[Mapping[str, Any]]) -> None:
        """Create or update (upsert) the metric alarms, in order."""

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete the named alarms; return those that existed. A missing alarm is success."""

    def reset(self, names: Sequence[str], reason: str) -> None:
        """Set metric alarms back to ``OK`` so that they notify again if the condition still holds."""


class AlarmArmingPort(Protocol):
    def enable_actions(self, names: Sequence[str]) -> None: ...

    def disable_actions(self, names: Sequence[str]) -> None: ...
