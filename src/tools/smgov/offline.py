"""Ports that answer from files and record instead of acting: `smgov explain` runs the real service
through these, so its output is what the deployed functions would decide, with no AWS call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sagemaker_governance.domain.clone import CreateOutcome
from sagemaker_governance.domain.errors import JobNotFound, StopOutcome
from sagemaker_governance.domain.guards.base import AlarmPlan
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.notifications import Notification


class OfflineJobs:
    """Answers from a ``DescribeTrainingJob`` document (or the event itself); records stops.

    ``describe`` is the document a re-read would return; without it, ``get_job`` answers with the
    event's job and ``describe`` with ``fallback`` (the event detail, which mirrors DescribeTrainingJob),
    or says the job was not found when there is none."""

    def __init__(
        self, job: TrainingJob, describe: dict[str, Any] | None = None, *, fallback: dict[str, Any] | None = None
    ) -> None:
        self._describe = describe
        self._fallback = fallback
        self._job = job
        self.stopped: list[str] = []

    def describe(self, name: str) -> dict[str, Any]:
        document = self._describe if self._describe is not None else self._fallback
        if document is None:
            raise JobNotFound(f"{name}: no --describe file given")
        return dict(document)

    def list_tags(self, arn: str) -> dict[str, str]:
        return dict(self._job.tags or {})

    def get_job(self, name: str, tags: Mapping[str, str] | None = None) -> TrainingJob:
        if self._describe is None:
            return self._job  # the event is the best knowledge we have offline
        known = tags if tags is not None else self._job.tags or {}
        return TrainingJob.model_validate({**self._describe, "Tags": dict(known)})

    def stop(self, name: str) -> StopOutcome:
        self.stopped.append(name)
        return StopOutcome.STOPPED


class RecordingNotifier:
    def __init__(self) -> None:
        self.messages: list[Notification] = []

    def publish(self, message: Notification) -> str | None:
        self.messages.append(message)
        return None


class RecordingLauncher:
    """Records the CreateTrainingJob requests it is given instead of sending them."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome:
        self.requests.append(request)
        return CreateOutcome.CREATED


class RecordingAlarms:
    """Records the alarm requests instead of sending them (`smgov explain`)."""

    def __init__(self) -> None:
        self.plans: list[AlarmPlan] = []
        self.requests: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.resets: list[str] = []

    def put(self, plan: AlarmPlan) -> None:
        self.plans.append(plan)
        self.requests += [dict(a.request) for a in plan.alarms]

    def delete(self, names: Sequence[str]) -> list[str]:
        self.deleted += names
        return list(names)

    def reset(self, names: Sequence[str], reason: str) -> None:
        self.resets += names
