"""Ports that answer from files and record instead of acting: `smgov explain` runs the real service
through these, so its output is what the deployed functions would decide, with no AWS call."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagemaker_governance.domain.clone import CreateOutcome
from sagemaker_governance.domain.errors import JobNotFound, StopOutcome
from sagemaker_governance.domain.failure_evidence import (
    CheckpointProgress,
    FailureEvidence,
    HostLog,
    LogLine,
    host_of_stream,
)
from sagemaker_governance.domain.guards.base import AlarmPlan
from sagemaker_governance.domain.job import TrainingJob, parse_timestamp
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

    def explained(self) -> list[dict[str, Any]]:
        """The exact ``Publish`` request of each message, its per-protocol forms opened up (e-mail text,
        the Chatbot custom notification, the versioned JSON): what `smgov explain --json` shows."""
        from sagemaker_governance.adapters.sns import explained

        return [explained(message) for message in self.messages]


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

    def metric_alarm(self, name: str) -> dict[str, Any] | None:
        """Offline nothing is known of an alarm (and with no metric read, never asked)."""
        return None


# ---- a failed job's logs, from files (`smgov explain --logs`) ------------------------------------------

_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+")


def _parse_line(raw: str) -> LogLine:
    """A line, with its time when it starts with an ISO 8601 timestamp (as `aws logs tail` prints it)."""
    found = _STAMP.match(raw)
    if found is None:
        return LogLine(raw)
    try:
        at = datetime.fromisoformat(found[1].replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return LogLine(raw)
    return LogLine(raw[found.end() :], at if at.tzinfo else at.replace(tzinfo=UTC))


def _read_stream(path: Path) -> list[LogLine]:
    """A file of lines, or a `GetLogEvents` answer saved as JSON (``{"events": [...]}``)."""
    text = path.read_text(errors="replace")
    if path.suffix == ".json":
        document = json.loads(text)
        events = document.get("events", []) if isinstance(document, dict) else []
        out: list[LogLine] = []
        for event in sorted(events, key=lambda e: e.get("timestamp") or 0):
            stamp = event.get("timestamp")
            at = datetime.fromtimestamp(stamp / 1000, tz=UTC) if isinstance(stamp, int | float) else None
            out += [LogLine(line, at) for line in str(event.get("message", "")).splitlines()]
        return out
    return [_parse_line(line) for line in text.splitlines()]


class OfflineLogs:
    """The hosts' log tails from ``path``: a file of log lines (one host, named after the file) or a folder
    with one file per stream (``algo-1.log``, ``<job>/algo-2-1700000000``, a saved ``GetLogEvents``
    answer ``algo-3.json``). Lines may start with an ISO 8601 timestamp. Ordered as the deployed reader
    orders them: the host whose last line came first, first."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        if not self._path.exists():
            return FailureEvidence.unread(f"{self._path} does not exist")
        files = sorted(p for p in self._path.rglob("*") if p.is_file()) if self._path.is_dir() else [self._path]
        if not files:
            return FailureEvidence.unread(f"no file in {self._path}")
        read: list[HostLog] = []
        for path in files:
            stem = path.name.removesuffix(path.suffix) if path.suffix in (".log", ".txt", ".json") else path.name
            read.append(
                HostLog(host=host_of_stream(stem), stream=str(path), lines=tuple(_read_stream(path)[-lines:]))
            )
        read.sort(key=lambda h: (h.last_at is None, h.last_at or datetime.max.replace(tzinfo=UTC), h.host))
        notes = (f"read {hosts} of {len(read)} hosts",) if len(read) > hosts else ()
        return FailureEvidence(
            hosts=tuple(read[:hosts]),
            logs_read=True,
            notes=notes,
            hosts_total=len(read),
            hosts_cut=max(len(read) - hosts, 0),
        )


class NoLogs:
    """``smgov explain`` without ``--logs``: the decision rests on ``FailureReason`` alone, and says so."""

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        return FailureEvidence.unread("no --logs given")


class OfflineCheckpoints:
    """A job's checkpoint writes from ``path``: a saved ``ListObjectsV2`` answer (JSON, ``Contents`` with
    ``LastModified``) or a text file of ISO 8601 times, one per line (``smgov explain --checkpoints``)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        try:
            text = self._path.read_text()
        except OSError as exc:
            return CheckpointProgress.unknown(f"{self._path}: {exc.strerror}")
        try:
            data = json.loads(text)
            raw = [item.get("LastModified") for item in data.get("Contents") or []]
        except (json.JSONDecodeError, AttributeError):
            raw = [line.strip() for line in text.splitlines() if line.strip()]
        try:
            times = [t for t in (parse_timestamp(value) for value in raw) if t is not None]
        except ValueError as exc:
            return CheckpointProgress.unknown(f"{self._path}: {exc}")
        if len(times) != len(raw):
            return CheckpointProgress.unknown(f"{self._path}: an object has no LastModified")
        written = sorted(t for t in times if t >= since)
        return CheckpointProgress(
            checked=True,
            written=len(written),
            total=len(times),
            latest=max(times) if times else None,
            written_at=tuple(written),
        )
