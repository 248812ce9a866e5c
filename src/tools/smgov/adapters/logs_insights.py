"""Running a CloudWatch Logs Insights query: StartQuery, then GetQueryResults until it is done.

Polling a query is waiting for a result, not retrying a failure (botocore's retry configuration handles
throttling of each call). The sleeper and the monotonic clock are injected so tests never sleep; the
wait is capped and a query that runs out of time is stopped so it stops costing money.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.domain.errors import AdapterError

CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})
DONE_STATUSES = frozenset({"Complete", "Failed", "Cancelled", "Timeout", "Unknown"})


class QueryFailed(AdapterError):
    pass


class QueryTimedOut(AdapterError):
    pass


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
    ) -> None:
        self._client = client
        self._sleep = sleep
        self._monotonic = monotonic
        self._poll_seconds = poll_seconds
        self._timeout_seconds = timeout_seconds

    @classmethod
    def connect(cls, region: str | None = None) -> LogsInsights:
        """From the caller's AWS configuration (the CLI)."""
        import boto3

        return cls(boto3.client("logs", region_name=region, config=CLIENT_CONFIG))

    def run(
        self, log_groups: Sequence[str], query: str, *, start: datetime, end: datetime, limit: int | None = None
    ) -> list[list[dict[str, str]]]:
        """The query's ``results`` (rows of ``{"field", "value"}``) once it is Complete."""
        request: dict[str, Any] = {
            "logGroupNames": list(log_groups),
            "startTime": int(start.timestamp()),
            "endTime": int(end.timestamp()),
            "queryString": query,
        }
        if limit is not None:
            request["limit"] = limit
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
                results: list[list[dict[str, str]]] = response.get("results", [])
                return results
            if status in DONE_STATUSES:
                raise QueryFailed(f"Logs Insights query {query_id} ended {status}")
            if self._monotonic() >= deadline:
                self._stop(query_id)
                raise QueryTimedOut(
                    f"Logs Insights query {query_id} still {status} after {self._timeout_seconds:g}s (stopped)"
                )
            self._sleep(self._poll_seconds)

    def _stop(self, query_id: str) -> None:
        with contextlib.suppress(ClientError, BotoCoreError):  # it may have finished meanwhile; nothing else to do
            self._client.stop_query(queryId=query_id)
