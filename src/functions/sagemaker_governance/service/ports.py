"""The small interfaces the service layer acts through; adapters implement them, tests may fake them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sagemaker_governance.domain.errors import StopOutcome
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification
from sagemaker_governance.domain.policy import Policy

Clock = Callable[[], datetime]


class JobsPort(Protocol):
    def describe(self, name: str) -> dict[str, Any]: ...

    def list_tags(self, arn: str) -> dict[str, str]: ...

    def get_job(self, name: str) -> TrainingJob: ...

    def stop(self, name: str) -> StopOutcome: ...


class NotifierPort(Protocol):
    def publish(self, message: Notification) -> str | None: ...


class PolicySource(Protocol):
    def current(self) -> Policy: ...


class EvaluationMarksPort(Protocol):
    def mark(self, arn: str, key: str, value: str) -> None:
        """Tag the job (``AddTags``): compliance leaves a mark the reconciler reads."""
