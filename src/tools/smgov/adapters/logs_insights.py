"""Running a CloudWatch Logs Insights query: StartQuery, then GetQueryResults until it is done.

Polling a query is waiting for a result, not retrying a failure (botocore's retry configuration handles
throttling of each call). The sleeper and the monotonic clock are injected so tests never sleep; the
wait is capped and a query that runs out of time is stopped so it stops costing money.

**Every row, or an error.** A query returns at most ``StartQuery``'s ``limit`` rows, up to 10,000 per
``GetQueryResults`` page, the further pages by ``nextToken`` (botocore's logs model: ``limit`` "The
maximum limit is 100,000", ``GetQueryResults.maxItems`` "The maximum is 10,000 log events per request.
You can retrieve up to 100,000 log event results from a query by paginating with the ``nextToken``").
Each query asks for the most the client's service model allows (an older botocore knows 10,000 and no
pages) and reads every page; one that comes back with that many rows may have lost some, and raises
``QueryTruncated`` rather than hand back a total that silently leaves rows out.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError

CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})
DONE_STATUSES = frozenset({"Complete", "Failed", "Cancelled", "Timeout", "Unknown"})


class QueryFailed(AdapterError):
    pass


class QueryTimedOut(AdapterError):
    pass


class QueryTruncated(AdapterError):
    """The query returned as many rows as one query can: some may be missing."""


FALLBACK_MAX_ROWS: Final = 10_000  # StartQuery.limit's maximum in botocore models before paging existed


def model_max_rows(client: Any) -> int:
    """The most rows ``StartQuery`` may ask for, by the client's service model (botocore's logs model:
    100,000 where ``GetQueryResults`` pages, 10,000 before)."""
    try:
        limit = client.meta.service_model.operation_model("StartQuery").input_shape.members["limit"]
        return int(limit.metadata["max"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return FALLBACK_MAX_ROWS


class LogsInsights:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"logs:StartQuery", "logs:GetQueryResults", "logs:StopQuery"}
    )

    def __init__(
        self,
        client: Any,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        poll_seconds: float = 1.0,
        timeout_seconds: float = 120.0,
        max_rows: int | None = None,
    ) -> None:
        self._client = client
        self._sleep = sleep
        self._monotonic = monotonic
        self._poll_seconds = poll_seconds
        self._timeout_seconds = timeout_seconds
        self._max_rows = max_rows or model_max_rows(client)  # None: the most the service model allows

    @classmethod
    def connect(cls, region: str | None = None) -> LogsInsights:
        """From the caller's AWS configuration (the CLI)."""
        import boto3

        return cls(boto3.client("logs", region_name=region, config=CLIENT_CONFIG))

    def run(
        self, log_groups: Sequence[str], query: str, *, start: datetime, end: datetime, limit: int | None = None
    ) -> list[list[dict[str, str]]]:
        """The query's ``results`` (rows of ``{"field", "value"}``) once it is Complete, every page of them.
        ``limit``: the most rows wanted (reaching it is no error); without it the most one query returns, and
        reaching that raises ``QueryTruncated``."""
        request: dict[str, Any] = {
            "logGroupNames": list(log_groups),
            "startTime": int(start.timestamp()),
            "endTime": int(end.timestamp()),
            "queryString": query,
            "limit": limit if limit is not None else self._max_rows,
        }
        try:
            query_id: str = self._client.start_query(**request)["queryId"]
        except (ClientError, BotoCoreError) as exc:
            raise AdapterError(f"StartQuery failed: {exc}") from exc
        deadline = self._monotonic() + self._timeout_seconds
        while True:
            try:
                response = self._client.get_query_results(queryId=query_id)
            except (ClientError, BotoCoreError) as exc:
                raise AdapterError(f"GetQueryResults {query_id} failed: {exc}") from exc
            status = response.get("status", "Unknown")
            if status == "Complete":
                results = self._pages(query_id, response, request["limit"])
                if limit is None and len(results) >= request["limit"]:
                    raise QueryTruncated(
                        f"Logs Insights query {query_id} returned {len(results):,} rows, the most one query returns: "
                        "rows beyond them would be missing; query a shorter time range"
                    )
                return results
            if status in DONE_STATUSES:
                raise QueryFailed(f"Logs Insights query {query_id} ended {status}")
            if self._monotonic() >= deadline:
                self._stop(query_id)
                raise QueryTimedOut(
                    f"Logs Insights query {query_id} still {status} after {self._timeout_seconds:g}s (stopped)"
                )
            self._sleep(self._poll_seconds)

    def _pages(self, query_id: str, response: dict[str, Any], most: int) -> list[list[dict[str, str]]]:
        """The rows of the first page and of every page after it (``nextToken``), up to ``most``."""
        results: list[list[dict[str, str]]] = list(response.get("results", []))
        token = response.get("nextToken")
        while token and len(results) < most:
            try:
                page = self._client.get_query_results(queryId=query_id, nextToken=token)
            except (ClientError, BotoCoreError) as exc:
                raise AdapterError(f"GetQueryResults {query_id} (a further page) failed: {exc}") from exc
            if page.get("status", "Unknown") != "Complete":
                raise QueryFailed(f"Logs Insights query {query_id}: a further page came back {page.get('status')}")
            results += page.get("results", [])
            token, previous = page.get("nextToken"), token
            if token == previous:
                raise QueryFailed(f"Logs Insights query {query_id}: its pages do not advance (the same nextToken)")
        return results[:most]

    def _stop(self, query_id: str) -> None:
        with contextlib.suppress(ClientError, BotoCoreError):  # it may have finished meanwhile; nothing else to do
            self._client.stop_query(queryId=query_id)
