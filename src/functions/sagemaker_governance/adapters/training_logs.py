"""The training jobs' own log streams in CloudWatch Logs (``/aws/sagemaker/TrainingJobs``).

SageMaker writes one stream per host and container start, ``<job>/algo-<n>-<epoch>``, so the prefix
``<job>/`` names exactly one job's streams (a job name cannot contain ``/``).

**Log activity in a window** (the stall judge, only when an alarm fired): ``FilterLogEvents`` with the
job's stream prefix and ``startTime``, one event is enough. Not ``DescribeLogStreams``'
``lastEventTimestamp``: its API reference says it "updates on an eventual consistency basis. It typically
updates in less than an hour from ingestion, but in rare situations might take longer", too stale for a
30-minute window. ``FilterLogEvents`` "might return empty pages ... Partially full or empty pages don't
necessarily mean that pagination is finished. If the results include a nextToken, there might be more
log events available" (its API reference): the pages are followed until an event or no token, at most
``MAX_PAGES``; a search cut short says so (never read as silence). ``DescribeLogStreams`` with the prefix
(one page) tells whether the job has streams at all: no stream is missing evidence, not silence.

IAM: both actions on the training-job log group only.

**The job's log rhythm** (the stall judge, when it judges a hang): the times of the job's lines since it
(re)entered Training, from ``FilterLogEvents`` pages (the prefix, ``startTime``/``endTime``, up to 10,000
events a page), at most ``RHYTHM_PAGES`` pages; a read cut short says so. The judge reads the stint's last
hours first (cut short: it does without the rhythm) and its older part only when the job has been silent for
the limit those give; that read cut short is joined with them (``service/stall_judge.StintRhythm``). Only
timestamps are kept.

**The last lines of each host's stream** (auto-resume, only when a job failed): for each host, its latest
stream's last lines. ``GetLogEvents`` with ``startFromHead=false`` returns the latest events first
(CloudWatch Logs API reference, GetLogEvents), at most ``limit`` per page, and a few pages at most (the API
may answer a page with no events while more exist). Hosts are read failing host first: the one whose stream
received its last event earliest (a host that crashed or fell silent stops writing first), at most
``hosts`` of them; that order rests on ``lastEventTimestamp`` (below), so auto-resume asks again for every
host, fewer lines each, when the first ones show only a peer's failure (``service/resume.py``). IAM:
``DescribeLogStreams`` on the log group, ``GetLogEvents`` on its streams.

Nothing here raises for what cannot be read (no log group, no stream, throttled or denied after botocore's
retries): the evidence lists what was not read and why, and the decision rests on ``FailureReason``.
``DescribeLogStreams`` cannot order by event time when it filters by name prefix (API reference), so the
streams are listed by name and ordered here by their ``lastEventTimestamp``, which CloudWatch Logs updates
eventually (usually within an hour): for ordering only, never for a verdict.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import ReadFailures
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import FailureEvidence, HostLog, LogLine, host_of_stream
from sagemaker_governance.domain.stall_judge import LogEvidence, LogRhythm

LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
MAX_PAGES: Final = 10
RHYTHM_PAGES: Final = 5
STREAMS_PAGE: Final = 50  # DescribeLogStreams' maximum limit


class LogsUnavailable(AdapterError):
    """The job's logs could not be read (throttled, denied, no such group ...)."""


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class TrainingLogs:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"logs:DescribeLogStreams", "logs:FilterLogEvents"})

    def __init__(self, client: Any, metrics: BusinessMetricsPort | None = None) -> None:
        self._client = client
        self._failures = ReadFailures(metrics)

    def activity(self, job_name: str, start: datetime, end: datetime) -> LogEvidence:
        """The job's streams and the first line in ``[start, end)``; raises ``LogsUnavailable``."""
        prefix = f"{job_name}/"
        try:
            described = self._client.describe_log_streams(
                logGroupName=LOG_GROUP, logStreamNamePrefix=prefix, limit=STREAMS_PAGE
            )
            streams = len(described.get("logStreams", []))
            if streams == 0:
                return LogEvidence(streams=0)
            request: dict[str, Any] = {
                "logGroupName": LOG_GROUP,
                "logStreamNamePrefix": prefix,
                "startTime": _millis(start),
                "endTime": _millis(end) - 1,  # endTime is inclusive
                "limit": 1,
            }
            for _ in range(MAX_PAGES):
                page = self._client.filter_log_events(**request)
                events = page.get("events", [])
                if events:
                    event = events[0]
                    return LogEvidence(
                        streams=streams,
                        line_at=datetime.fromtimestamp(event["timestamp"] / 1000, UTC),
                        line_stream=event.get("logStreamName"),
                    )
                token = page.get("nextToken")
                if not token:
                    return LogEvidence(streams=streams)
                request["nextToken"] = token
            return LogEvidence(streams=streams, truncated=True)
        except (ClientError, BotoCoreError) as exc:
            code = self._failures.failed("DescribeLogStreams/FilterLogEvents", exc)
            raise LogsUnavailable(f"the job's log streams in {LOG_GROUP} could not be read ({code})") from exc

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        """The times of the job's lines in ``[start, end)``, at most ``RHYTHM_PAGES`` pages; raises
        ``LogsUnavailable``."""
        request: dict[str, Any] = {
            "logGroupName": LOG_GROUP,
            "logStreamNamePrefix": f"{job_name}/",
            "startTime": _millis(start),
            "endTime": _millis(end) - 1,  # endTime is inclusive
        }
        times: list[datetime] = []
        try:
            for _ in range(RHYTHM_PAGES):
                page = self._client.filter_log_events(**request)
                times += [t for e in page.get("events", []) if (t := _time(e.get("timestamp"))) is not None]
                token = page.get("nextToken")
                if not token:
                    return LogRhythm.of(start, end, times, complete=True)
                request["nextToken"] = token
        except (ClientError, BotoCoreError) as exc:
            code = self._failures.failed("FilterLogEvents", exc)
            raise LogsUnavailable(f"the job's log lines in {LOG_GROUP} could not be read ({code})") from exc
        return LogRhythm.of(start, end, times, complete=False)


# ---- the last lines of a failed job's streams (auto-resume) ----------------------------------------------

TRAINING_LOG_GROUP: Final = LOG_GROUP
MAX_STREAMS: Final = 500  # DescribeLogStreams answers 50 per page: at most 10 pages
MAX_PAGES_PER_STREAM: Final = 3
MAX_EVENTS_PER_PAGE: Final = 10_000  # GetLogEvents' own limit


def _time(millis: Any) -> datetime | None:
    if isinstance(millis, int | float) and not isinstance(millis, bool) and millis > 0:
        return datetime.fromtimestamp(millis / 1000, tz=UTC)
    return None


class TrainingLogTails:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"logs:DescribeLogStreams", "logs:GetLogEvents"})
    LAZY_CLIENT: ClassVar[bool] = True  # the client is built at the first failed job, not at cold start

    def __init__(
        self, client: Any, log_group: str = TRAINING_LOG_GROUP, metrics: BusinessMetricsPort | None = None
    ) -> None:
        self._client = client
        self._group = log_group
        self._failures = ReadFailures(metrics)

    def tails(self, job_name: str, *, lines: int, hosts: int) -> FailureEvidence:
        try:
            streams = self._streams(job_name)
        except (ClientError, BotoCoreError) as exc:
            code = self._failures.failed("DescribeLogStreams", exc)
            what = f"no log group {self._group}" if code == "ResourceNotFoundException" else code
            return FailureEvidence.unread(f"DescribeLogStreams failed ({what})")
        if not streams:
            return FailureEvidence.unread(f"no log stream {job_name}/* in {self._group}")
        latest: dict[str, dict[str, Any]] = {}
        for stream in streams:
            host = host_of_stream(stream["logStreamName"], job_name)
            known = latest.get(host)
            if known is None or stream.get("creationTime", 0) >= known.get("creationTime", 0):
                latest[host] = stream
        # Failing host first: the stream whose last event came earliest (unknown times last, by name).
        order = sorted(
            latest.items(),
            key=lambda item: (
                item[1].get("lastEventTimestamp") is None,
                item[1].get("lastEventTimestamp", 0),
                item[0],
            ),
        )
        read: list[HostLog] = []
        notes: list[str] = []
        for host, stream in order[:hosts]:
            try:
                events = self._last_events(stream["logStreamName"], lines)
            except (ClientError, BotoCoreError) as exc:
                notes.append(f"{host}: GetLogEvents failed ({self._failures.failed('GetLogEvents', exc)})")
                continue
            read.append(
                HostLog(
                    host=host,
                    stream=stream["logStreamName"],
                    lines=tuple(events),
                    last_event_at=_time(stream.get("lastEventTimestamp")),
                )
            )
        if len(order) > hosts:
            notes.append(f"read {hosts} of {len(order)} hosts (the {hosts} that fell silent first)")
        return FailureEvidence(
            hosts=tuple(read),
            logs_read=bool(read),
            notes=tuple(notes),
            hosts_total=len(order),
            hosts_cut=max(len(order) - hosts, 0),
        )

    def _streams(self, job_name: str) -> list[dict[str, Any]]:
        paginator = self._client.get_paginator("describe_log_streams")
        pages = paginator.paginate(
            logGroupName=self._group,
            logStreamNamePrefix=f"{job_name}/",
            PaginationConfig={"MaxItems": MAX_STREAMS},
        )
        return [
            stream
            for page in pages
            for stream in page.get("logStreams") or []
            if isinstance(stream.get("logStreamName"), str)
        ]

    def _last_events(self, stream: str, lines: int) -> list[LogLine]:
        """The stream's last ``lines`` events, oldest first (a few pages backwards at most)."""
        events: list[dict[str, Any]] = []
        token: str | None = None
        for _ in range(MAX_PAGES_PER_STREAM):
            request: dict[str, Any] = {
                "logGroupName": self._group,
                "logStreamName": stream,
                "startFromHead": False,
                "limit": min(lines - len(events), MAX_EVENTS_PER_PAGE),
            }
            if token:
                request["nextToken"] = token
            page = self._client.get_log_events(**request)
            events = list(page.get("events") or []) + events
            following = page.get("nextBackwardToken")
            if len(events) >= lines or not following or following == token:
                break
            token = following
        events.sort(key=lambda e: e.get("timestamp") or 0)
        out: list[LogLine] = []
        for event in events[-lines:]:
            at = _time(event.get("timestamp"))
            for text in str(event.get("message") or "").splitlines():
                out.append(LogLine(text=text, at=at))
        return out
