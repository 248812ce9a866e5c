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
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.stall_judge import LogEvidence

LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
MAX_PAGES: Final = 10
STREAMS_PAGE: Final = 50  # DescribeLogStreams' maximum limit


class LogsUnavailable(AdapterError):
    """The job's logs could not be read (throttled, denied, no such group ...)."""


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class TrainingLogs:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"logs:DescribeLogStreams", "logs:FilterLogEvents"})

    def __init__(self, client: Any) -> None:
        self._client = client

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
            code = (
                exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
            )
            raise LogsUnavailable(f"the job's log streams in {LOG_GROUP} could not be read ({code})") from exc
