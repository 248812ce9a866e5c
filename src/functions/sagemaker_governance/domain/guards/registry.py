"""The alarm guards this service runs: one line per guard.

Registering a guard here gives it its policy section (``Policy.<section>``, validated by its config
model), its place in the job-events function (create its alarms on Training, delete them at the end),
in the stopper (its notifications are routed to its ``judge``) and in the reconciler (its missing alarms
are repaired, its orphans deleted). Order matters only for the order of audit records.
"""

from __future__ import annotations

from typing import Any, Final

from sagemaker_governance.domain.guards.base import Guard
from sagemaker_governance.domain.guards.efficiency import EFFICIENCY
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.progress import PROGRESS

GUARDS: Final[tuple[Guard[Any], ...]] = (IDLE, PROGRESS, EFFICIENCY)
