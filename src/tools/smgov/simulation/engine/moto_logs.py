"""moto's CloudWatch Logs in the simulated account: ``FilterLogEvents`` with ``logStreamNamePrefix`` as
CloudWatch Logs answers it, and the simulator's own writes of the training jobs' lines (``DirectLogs``).

moto's ``FilterLogEvents`` ignores ``logStreamNamePrefix`` and searches every stream of the group, so a
reader that asks for one training job's streams (``<job>/``) is given any job's lines: in a simulated
fleet, the stall judge saw other jobs' log lines as the stalled job's (and vetoed real stalls as "logs
active"). The CloudWatch Logs API reference: ``logStreamNamePrefix`` "Filters the results to include
only events from log streams that have names starting with this prefix"; it cannot be given together
with ``logStreamNames``. Installed by ``SimulatedAccount.open``: the prefix becomes the list of the
group's streams whose names start with it (none: no events), then moto answers as before.

The simulator writes the jobs' lines (``logs.py``) into moto's Logs backend directly (``DirectLogs``): the
same backend calls moto's ``LogsResponse`` makes for ``CreateLogStream`` and ``PutLogEvents`` (the checks
of chronological order and of the accepted time range are the backend's), without botocore serializing
each request and moto parsing it back (a fleet run writes a few thousand). The service's own reads (the
stall judge's ``DescribeLogStreams`` and ``FilterLogEvents``, a failure diagnosis's ``GetLogEvents``) are
answered in process too (``LogReads``): botocore still validates and serializes them, moto's own response
code answers them on its backend, and botocore's parser reads the answer; only the HTTP send loop and
moto's URL matching are skipped, unless the fault injector throttles the first attempt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any


class DirectLogs:
    """The two Logs calls ``LogStreams.flush`` makes, answered by moto's backend of one account and region."""

    def __init__(self, account: str, region: str) -> None:
        from moto.logs.models import logs_backends

        self._backend = logs_backends[account][region]

    def create_log_stream(self, *, logGroupName: str, logStreamName: str) -> None:
        self._backend.create_log_stream(logGroupName, logStreamName)

    def put_log_events(self, *, logGroupName: str, logStreamName: str, logEvents: list[dict[str, Any]]) -> Any:
        """What ``PutLogEvents`` answers: the events moto refused as too old or too new, if any."""
        _, rejected = self._backend.put_log_events(logGroupName, logStreamName, logEvents)
        return {"rejectedLogEventsInfo": rejected} if rejected else {}


def honoring_prefix(original: Callable[[Any], str]) -> Callable[[Any], str]:
    """A replacement for ``moto.logs.responses.LogsResponse.filter_log_events``."""

    def filter_log_events(self: Any) -> str:
        prefix = self._get_param("logStreamNamePrefix")
        if not prefix or self._get_param("logStreamNames"):
            return original(self)
        group = self.logs_backend.groups.get(self._get_param("logGroupName"))
        if group is None:
            return original(self)  # moto's own ResourceNotFoundException
        names = [name for name in group.streams if name.startswith(prefix)]
        if not names:
            return json.dumps({"events": [], "searchedLogStreams": []})
        events, token, searched = self.logs_backend.filter_log_events(
            self._get_param("logGroupName"),
            names,
            self._get_param("startTime"),
            self._get_param("endTime"),
            self._get_param("limit"),
            self._get_param("nextToken"),
            self._get_param("filterPattern"),
            self._get_param("interleaved", False),
        )
        return json.dumps({"events": events, "nextToken": token, "searchedLogStreams": searched})

    return filter_log_events


def lagging_last_event(
    original: Callable[[Any], str], lag_minutes: int, now: Callable[[], Any]
) -> Callable[[Any], str]:
    """A replacement for ``moto.logs.responses.LogsResponse.describe_log_streams`` whose
    ``lastEventTimestamp`` lags as CloudWatch Logs' may: moto computes it from the stream's events on each
    call; the API reference says it "updates on an eventual consistency basis. It typically updates in less
    than an hour from ingestion, but in rare situations might take longer". Each stream's is answered as of
    ``lag_minutes`` ago: its last event at or before then, and none (the member left out, as for a stream
    with no event) when it had no event by then. ``now``: the virtual clock, naive UTC (moto's)."""

    def describe_log_streams(self: Any) -> str:
        answer = json.loads(original(self))
        group = self.logs_backend.groups.get(self._get_param("logGroupName"))
        cutoff = int((now() - timedelta(minutes=lag_minutes)).replace(tzinfo=UTC).timestamp() * 1000)
        for described in answer.get("logStreams") or []:
            stream = group.streams.get(described.get("logStreamName")) if group is not None else None
            seen = [e.timestamp for e in stream.events if e.timestamp <= cutoff] if stream is not None else []
            if seen:
                described["lastEventTimestamp"] = max(seen)
            else:
                described.pop("lastEventTimestamp", None)
        return json.dumps(answer)

    return describe_log_streams


class _Request:
    """What moto's ``LogsResponse`` methods read of a request (``_get_param``, ``logs_backend``), over the
    JSON body botocore serialized: the methods run as they do behind moto's wire, without its dispatch."""

    def __init__(self, body: bytes, backend: Any) -> None:
        self._params: dict[str, Any] = json.loads(body or b"{}")
        self.logs_backend = backend

    def _get_param(self, name: str, if_none: Any = None) -> Any:
        return self._params.get(name, if_none)


class LogReads:
    """The service's Logs reads (``LOGS_READS``) answered before botocore's send loop by moto's own
    ``LogsResponse`` methods (``FilterLogEvents`` with ``honoring_prefix``, as patched) on its backend, the
    answer parsed by botocore's parser (``wire_answers``): what the wire answered, without serializing the
    request over HTTP, moto matching its URL against every service's patterns, and the send loop. A fault
    injector's throttler draws each request's first attempt here; a throttled one goes through the send
    loop and moto's wire, and botocore retries it as any other. Any other Logs operation is moto's wire."""

    OPERATIONS = {  # operation: the LogsResponse method that answers it
        "DescribeLogStreams": "describe_log_streams",
        "FilterLogEvents": "filter_log_events",
        "GetLogEvents": "get_log_events",
    }

    def __init__(self, account: str, region: str, throttler: Any = None) -> None:
        from moto.logs.models import logs_backends

        self._backend = logs_backends[account][region]
        self._throttler = throttler

    def attach(self, client: Any) -> Any:
        for operation in self.OPERATIONS:
            client.meta.events.register(f"before-call.cloudwatch-logs.{operation}", self._call)
        return client

    def _call(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> Any:
        from moto.logs.responses import LogsResponse

        from smgov.simulation.wire_answers import moto_answer

        if self._throttler is not None and not self._throttler.first_attempt(model, context):
            return None
        method = getattr(LogsResponse, self.OPERATIONS[model.name])  # honoring_prefix's, as patched
        request = _Request(params.get("body") or b"{}", self._backend)
        return moto_answer(model, lambda: method(request), "application/x-amz-json-1.1")
