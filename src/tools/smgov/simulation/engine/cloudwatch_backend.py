"""The simulator's CloudWatch behind moto's wire: alarms (composites included) and metric reads.

moto has no ``PutCompositeAlarm``, and its metric store knows nothing of the simulated hosts. Inside a
simulated account moto's CloudWatch answers

- the alarm APIs (``PutMetricAlarm``, ``PutCompositeAlarm``, ``DescribeAlarms``, ``DeleteAlarms``,
  ``SetAlarmState``, ``Enable/DisableAlarmActions``, ``ListTagsForResource``) from ``FakeCloudWatch``,
  which enforces the service rules the guards depend on (10 metrics per alarm, a composite's children
  must exist and cannot be deleted before it, at most 100 children and 10,240 characters of rule);
- the metric reads (``GetMetricData`` with ``MetricStat`` queries, ``ListMetrics``) from the
  simulator's metric store, with the ingestion delay (a datapoint not yet arrived is not returned).

When the request-rate quota model or the throttle fault is on, the service's requests go through
botocore's send loop and moto's wire protocol, so both (at ``before-send``) apply to them as to any
other call; otherwise the double answers the service's CloudWatch client directly at ``before-call``
(the same answers, without serializing them: a fleet's reconciler lists hundreds of alarms a run). The
simulator's own reads and writes (``direct``) never go through moto.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.fake_cloudwatch import CloudWatchError, FakeCloudWatch
from smgov.simulation.metrics import MetricKey, MetricStore, kept_at, metric_key, visible_until

ALARM_OPERATIONS = (
    "PutMetricAlarm",
    "PutCompositeAlarm",
    "DescribeAlarms",
    "DeleteAlarms",
    "SetAlarmState",
    "EnableAlarmActions",
    "DisableAlarmActions",
    "ListTagsForResource",
)
MAX_DATAPOINTS = 100_800  # GetMetricData: datapoints per call


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class SimulatedCloudWatch:
    def __init__(
        self,
        store: MetricStore,
        clock: VirtualClock,
        *,
        delay: tuple[int, int],
        salt: str,
        account: str = "123456789012",
    ) -> None:
        self.alarms = FakeCloudWatch(clock, account=account)
        self.alarms.metrics = self
        self.direct = DirectClient(self.alarms)
        self.store = store
        self.clock = clock
        self.delay = delay
        self.salt = salt

    @contextlib.contextmanager
    def installed(self) -> Iterator[SimulatedCloudWatch]:
        """moto's CloudWatch answers from here while the context is open."""
        from moto.cloudwatch.responses import CloudWatchResponse

        patches: dict[str, Callable[[Any], Any]] = {
            _snake(name): self._alarm_operation(name) for name in ALARM_OPERATIONS
        }
        # GetMetricData through the double's operation (its request checks), which reads from here (metrics)
        patches["get_metric_data"] = self._wire(self.alarms._op_GetMetricData)
        patches["list_metrics"] = self._wire(self.list_metrics)
        with contextlib.ExitStack() as stack:
            for attribute, method in patches.items():
                stack.enter_context(mock.patch.object(CloudWatchResponse, attribute, method, create=True))
            yield self

    # ---- alarms --------------------------------------------------------------------------------

    def _alarm_operation(self, name: str) -> Callable[[Any], Any]:
        handler = getattr(self.alarms, f"_op_{name}")
        return self._wire(handler)

    @staticmethod
    def _wire(handler: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[Any], Any]:
        """A moto response method: the request's parameters in, an ``ActionResult`` (or error) out."""

        def respond(response: Any) -> Any:
            from moto.cloudwatch.exceptions import CloudWatchException
            from moto.core.responses import ActionResult

            try:
                return ActionResult(handler(response._get_params()))
            except CloudWatchError as err:
                raise CloudWatchException(err.code, err.message) from err

        return respond

    # ---- metric reads --------------------------------------------------------------------------

    def _minute(self, moment: datetime) -> int:
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return int((moment - self.clock.epoch).total_seconds() // 60)

    def get_metric_data(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``MetricStat`` queries over ``[StartTime, EndTime)``, newest first unless ``ScanBy`` says
        otherwise; a datapoint that has not arrived yet (the ingestion delay) is not returned."""
        start, end = self._minute(params["StartTime"]), self._minute(params["EndTime"])
        now = self.clock.now
        ascending = params.get("ScanBy") == "TimestampAscending"
        results = []
        for query in params.get("MetricDataQueries", []):
            if "MetricStat" not in query:
                raise CloudWatchError("ValidationError", "the simulator answers MetricStat queries only")
            if not query.get("ReturnData", True):
                continue
            stat = query["MetricStat"]
            metric = stat["Metric"]
            key = metric_key(metric["Namespace"], metric["MetricName"], metric.get("Dimensions", []))
            period = max(1, int(stat["Period"]) // 60)
            first = start - start % period
            buckets = max(0, -(-(min(end, now) - first) // period))
            values = self.store.datapoints(
                key, first, buckets, period, _statistic(stat["Stat"]), until=self._arrived(key, now)
            )
            points = [(first + i * period, v) for i, v in enumerate(values) if v is not None]
            if not kept_at(int(stat["Period"]), now - start):
                points = []
            if not ascending:
                points.reverse()
            results.append(
                {
                    "Id": query["Id"],
                    "Label": query.get("Label") or metric["MetricName"],
                    "Timestamps": [self.clock.at(m) for m, _ in points],
                    "Values": [v for _, v in points],
                    "StatusCode": "Complete",
                }
            )
        return {"MetricDataResults": results, "Messages": []}

    def list_metrics(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The metrics with a datapoint in the last two weeks (CloudWatch's ListMetrics window)."""
        namespace, name = params.get("Namespace"), params.get("MetricName")
        wanted = {(d["Name"], d.get("Value")) for d in params.get("Dimensions", [])}
        since = self.clock.now - int(timedelta(days=14).total_seconds() // 60)
        out = []
        keys = self.store.keys()
        for key in keys:
            ns, metric, dims = key
            if (namespace and ns != namespace) or (name and metric != name):
                continue
            if not all((n, v) in dims or (v is None and any(d == n for d, _ in dims)) for n, v in wanted):
                continue
            segments = self.store.segments(key)
            if not segments or (segments[-1].end is not None and segments[-1].end <= since):
                continue
            out.append(
                {"Namespace": ns, "MetricName": metric, "Dimensions": [{"Name": n, "Value": v} for n, v in dims]}
            )
        return {"Metrics": out}

    def _arrived(self, key: MetricKey, now: int) -> int:
        return visible_until(key, now, self.delay, self.salt)


def _statistic(stat: str) -> str:
    if stat not in ("Average", "Maximum", "Minimum", "Sum", "SampleCount"):
        raise CloudWatchError("ValidationError", f"statistic {stat} is not supported by the simulator")
    return stat


class DirectClient:
    """The few CloudWatch calls the simulator itself makes, answered by the double without a wire."""

    def __init__(self, fake: FakeCloudWatch) -> None:
        self.fake = fake

    def describe_alarms(self, **params: Any) -> dict[str, Any]:
        return self.fake._op_DescribeAlarms(dict(params))

    def set_alarm_state(self, **params: Any) -> dict[str, Any]:
        return self.fake._op_SetAlarmState(dict(params))

    def record_transition(self, name: str, state: str, reason: str, *, at: datetime) -> None:
        """CloudWatch's own evaluation changed the alarm's state at ``at`` (the notification's time)."""
        self.fake.record_transition(name, state, reason, at=at)

    def transitioned_at(self, name: str) -> datetime | None:
        alarm = self.fake.alarms.get(name)
        when = alarm.get("StateTransitionedTimestamp") if alarm is not None else None
        return when if isinstance(when, datetime) else None

    def get_paginator(self, operation: str) -> DirectClient:
        if operation != "describe_alarms":
            raise ValueError(f"no paginator for {operation}")
        return self

    def paginate(self, **params: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self.fake._op_DescribeAlarms({**params, **({"NextToken": token} if token else {})})
            yield page
            token = page.get("NextToken")
            if not token:
                return
