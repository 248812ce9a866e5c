"""What was read about a failed job: the last lines of its hosts' logs and its checkpoint progress.

Plain data, shared by the adapters that read it (``adapters/training_logs.py``, ``adapters/checkpoints.py``),
the failure classification (``failures.py``) and the resume decisions. Its own module so that the guard
stopper, whose log-rhythm reader reads the same lines, does not import the classification (cold start,
BENCHMARKS.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class LogLine:
    text: str
    at: datetime | None = None


@dataclass(frozen=True)
class HostLog:
    """The last lines of one host's log stream (oldest first)."""

    host: str  # "algo-2"
    stream: str
    lines: tuple[LogLine, ...]
    last_event_at: datetime | None = None

    @property
    def last_at(self) -> datetime | None:
        times = [line.at for line in self.lines if line.at is not None]
        return max(times) if times else self.last_event_at


@dataclass(frozen=True)
class FailureEvidence:
    """What was read about a failure besides its ``FailureReason``: the hosts' tails, failing host first."""

    hosts: tuple[HostLog, ...] = ()
    logs_read: bool = False  # False: no log could be read (the diagnosis rests on FailureReason alone)
    notes: tuple[str, ...] = ()  # what could not be read, and why
    hosts_total: int = 0  # streams found (the latest per host), read or not
    # Of those, the hosts the read's budget left out (the port's ``hosts``: never tried, and no later read with
    # the same budget reaches them), as against hosts whose read failed (a throttled ``GetLogEvents``), which a
    # later read may reach. Unsaid (0): every host not read counts as a failed read.
    hosts_cut: int = 0

    @classmethod
    def unread(cls, note: str) -> FailureEvidence:
        return cls(logs_read=False, notes=(note,))

    @property
    def hosts_failed(self) -> int:
        """The hosts found whose log was not read for a reason other than the read's budget (a failed read)."""
        return max(self.hosts_total - len(self.hosts) - self.hosts_cut, 0)


def host_of_stream(stream: str, job_name: str | None = None) -> str:
    """``<job>/algo-2-1700000000`` -> ``algo-2``: the host position, without the container start time."""
    name = stream.split("/", 1)[1] if "/" in stream else stream
    if job_name and stream.startswith(job_name + "/"):
        name = stream[len(job_name) + 1 :]
    return re.sub(r"-\d{9,}$", "", name) or name


@dataclass(frozen=True)
class CheckpointProgress:
    """What the checkpoint location holds relative to the failed attempt (``ListObjectsV2``)."""

    checked: bool
    written: int = 0  # objects written since the attempt started
    total: int = 0  # objects seen under the prefix
    latest: datetime | None = None
    note: str | None = None  # why it was not checked, or that the listing was cut short
    # False: the deployment does not check this location (no CheckpointBucketPattern, or a bucket outside
    # it); True and not checked: it should have been checked but could not be (denied, throttled, cut).
    in_scope: bool = True
    # LastModified of each object written since the attempt started (Spot economics: work kept per stint).
    written_at: tuple[datetime, ...] = ()
    truncated: bool = False  # the listing was cut short: ``written_at`` may miss objects

    @classmethod
    def unknown(cls, note: str) -> CheckpointProgress:
        """The location is in scope but could not be read: progress cannot be confirmed."""
        return cls(checked=False, note=note)

    @classmethod
    def out_of_scope(cls, note: str) -> CheckpointProgress:
        """The deployment does not check this location (the documented consequence: resumed on its
        ``CheckpointConfig`` alone)."""
        return cls(checked=False, note=note, in_scope=False)

    @property
    def unreadable(self) -> bool:
        return self.in_scope and not self.checked

    def evidence(self) -> dict[str, Any]:
        if not self.checked:
            state = "unreadable" if self.in_scope else "not checked"
            return {"checkpoint_progress": state, "checkpoint_note": self.note}
        out: dict[str, Any] = {
            "checkpoint_progress": "written" if self.written else "none",
            "checkpoint_objects_written": self.written,
            "checkpoint_objects": self.total,
        }
        if self.latest is not None:
            out["checkpoint_latest"] = self.latest.isoformat()
        if self.note:
            out["checkpoint_note"] = self.note
        return out
