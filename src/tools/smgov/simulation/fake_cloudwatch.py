"""A CloudWatch alarms double that sits *behind* boto3 (like ``fake_sagemaker``).

moto stores metric alarms but has no ``PutCompositeAlarm``, so the idle guard's alarms are answered
here (tests attach it to a client; the simulator serves moto's CloudWatch alarm APIs from it, see
``engine/cloudwatch_backend.py``). botocore still validates every request against the real API model
first; the double then enforces the service rules the idle guard depends on (10 metrics per alarm, query ids
(letters, numbers and underscore, a lowercase letter first, unique), a
composite's children must exist, at most 100 of them and 10,240 characters of rule, a child cannot be
deleted while its composite exists, one DeleteAlarms deletes at most one composite and nothing when one
name is missing, tags are set only on creation, an update keeps the alarm's state).

Tests and the simulator read ``alarms`` and build the SNS notification CloudWatch would publish when an
alarm changes state (``notification`` / ``sns_event``), in the real message shapes.

``RequestQuota`` models CloudWatch's per-account request-rate quotas (3 ``PutMetricAlarm`` and 3
``DeleteAlarms`` requests per second) as token buckets on a virtual clock. It answers at botocore's
``before-send`` step, *inside* the endpoint's retry loop, so a throttled request goes through botocore's
real retry handler (standard mode: backoff, retry quota) exactly as a ``ThrottlingException`` from AWS
would. It sits in front of whatever answers the request over the endpoint (moto in the simulator).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from botocore.awsrequest import AWSResponse, HTTPHeaders

from smgov.simulation.copies import plain_copy
from smgov.simulation.faults import ANSWERED_URL
from smgov.simulation.messages import (
    alarm_notification,
    alarm_subject,
    iso_millis,
    json_body,
    sns_lambda_event,
    sns_record,
)

Clock = Callable[[], datetime]
MAX_METRIC_STATS = 10
MAX_COMPOSITE_CHILDREN = 100  # a composite alarm watches at most 100 alarms
MAX_ALARM_RULE = 10_240  # characters of a composite's AlarmRule
ALARM_WRITE_QUOTAS = ("PutMetricAlarm", "DeleteAlarms")  # 3 requests/second each, per account and region
_CHILD_REF = re.compile(r'(?:ALARM|OK|INSUFFICIENT_DATA)\(\s*"?([^")]+?)"?\s*\)')
# MetricDataQuery.Id (GetMetricData, and PutMetricAlarm's Metrics): "The valid characters are letters,
# numbers, and underscore. The first character must be a lowercase letter", unique within a call
# (botocore's cloudwatch model documents it; botocore's validation checks only its length).
_QUERY_ID = re.compile(r"[a-z][A-Za-z0-9_]*")


class CloudWatchError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


class FakeCloudWatch:
    def __init__(self, clock: Clock, region: str = "us-east-1", account: str = "123456789012") -> None:
        self.clock = clock
        self.region = region
        self.account = account
        self.alarms: dict[str, dict[str, Any]] = {}
        self.tags: dict[str, list[dict[str, str]]] = {}
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.alarm_page_size: int | None = None  # DescribeAlarms page size (None: MaxRecords or one page)
        self.metrics: Any = None  # answers GetMetricData / ListMetrics when set (the simulator's store)
        self._pending: dict[int, dict[str, Any]] = {}

    # ---- wiring --------------------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.cloudwatch.*", self._capture)
        client.meta.events.register("before-call.cloudwatch.*", self._answer)
        return client

    def _capture(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending[id(model)] = plain_copy(params)

    def _answer(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        name = model.name
        params = self._pending.pop(id(model), {})
        self.calls[name] += 1
        # ``params`` is this double's own copy (``_capture``), which no operation changes: kept as it is, once
        self.requests.append((name, params))
        handler = getattr(self, f"_op_{name}", None)
        try:
            if handler is None:
                raise CloudWatchError("UnknownOperationException", f"the fake does not implement {name}")
            body = handler(params)
            status = 200
        except CloudWatchError as err:
            body = {"Error": {"Code": err.code, "Message": err.message}}
            status = err.status
        body.setdefault("ResponseMetadata", {"HTTPStatusCode": status, "RequestId": "fake"})
        return AWSResponse("https://monitoring.fake", status, HTTPHeaders(), None), body

    # ---- reading what the service did ----------------------------------------------------------

    def arn(self, name: str) -> str:
        return f"arn:aws:cloudwatch:{self.region}:{self.account}:alarm:{name}"

    def state(self, name: str) -> str:
        return str(self.alarms[name]["StateValue"])

    def set_state(self, name: str, value: str, reason: str = "set by the test") -> None:
        """What CloudWatch's own evaluation does (tests drive it)."""
        self._change_state(self.alarms[name], value, reason)

    def record_transition(self, name: str, value: str, reason: str, *, at: datetime) -> None:
        """The simulator's evaluation changed the alarm's state at ``at`` (its notification's StateChangeTime)."""
        self._change_state(self._alarm(name), value, reason, at=at)

    def _change_state(self, alarm: dict[str, Any], value: str, reason: str, *, at: datetime | None = None) -> None:
        """``StateUpdatedTimestamp`` moves on every update, ``StateTransitionedTimestamp`` only when the state
        value changes (botocore's cloudwatch model documents both fields so)."""
        now = at or self.clock()
        if alarm["StateValue"] != value:
            alarm["StateTransitionedTimestamp"] = now
        alarm.update(StateValue=value, StateReason=reason, StateUpdatedTimestamp=now)

    # ---- the notification CloudWatch would publish -----------------------------------------------

    def notification(
        self, name: str, *, new_state: str = "ALARM", old_state: str = "OK", reason: str | None = None
    ) -> dict[str, Any]:
        alarm = self.alarms[name]
        now = self.clock()
        children = []
        if alarm["Kind"] == "composite":
            children = [
                {"Arn": self.arn(child), "State": {"Value": "ALARM", "Timestamp": iso_millis(now)}}
                for child in _CHILD_REF.findall(alarm["AlarmRule"])[:1]
            ]
        return alarm_notification(
            alarm,
            old_state=old_state,
            new_state=new_state,
            reason=reason or _breach_reason(alarm, now),
            changed_at=now,
            account=self.account,
            region=self.region,
            triggering_children=children,
        )

    def sns_event(self, messages: Iterable[dict[str, Any] | str], topic_arn: str | None = None) -> dict[str, Any]:
        """The Lambda event SNS delivers for these messages (a dict is sent as JSON, a str as is)."""
        topic = topic_arn or f"arn:aws:sns:{self.region}:{self.account}:governance-alarms"
        return sns_lambda_event(
            sns_record(
                topic,
                json_body(message),
                subject=alarm_subject(message["AlarmName"], "ALARM", self.region)
                if isinstance(message, dict)
                else None,
                message_id=f"5b4a3c2d-0000-4000-8000-00000000000{index}",
                subscription_id=f"0f3c5e1a-1111-2222-3333-44445555666{index}",
                timestamp=self.clock(),
            )
            for index, message in enumerate(messages)
        )

    # ---- the API -------------------------------------------------------------------------------

    def _alarm(self, name: str, code: str = "ResourceNotFound") -> dict[str, Any]:
        alarm = self.alarms.get(name)
        if alarm is None:
            raise CloudWatchError(code, f"Alarm {name} does not exist", 404)
        return alarm

    def _upsert(self, name: str, kind: str, params: dict[str, Any]) -> None:
        now = self.clock()
        existing = self.alarms.get(name)
        if existing is not None and existing["Kind"] != kind:
            raise CloudWatchError("ValidationError", f"{name} exists as a {existing['Kind']} alarm")
        state = existing or {
            "StateValue": "INSUFFICIENT_DATA",
            "StateReason": "Unchecked: Initial alarm creation",
            "StateUpdatedTimestamp": now,
            "StateTransitionedTimestamp": now,
        }
        config = {k: plain_copy(v) for k, v in params.items() if k != "Tags"}
        self.alarms[name] = {
            **config,
            "Kind": kind,
            "AlarmArn": self.arn(name),
            "AlarmConfigurationUpdatedTimestamp": now,
            "StateValue": state["StateValue"],
            "StateReason": state["StateReason"],
            "StateUpdatedTimestamp": state["StateUpdatedTimestamp"],
            "StateTransitionedTimestamp": state["StateTransitionedTimestamp"],
        }
        if existing is None:  # tags are applied only when the alarm is created
            self.tags[name] = [dict(t) for t in params.get("Tags", [])]

    def _op_PutMetricAlarm(self, params: dict[str, Any]) -> dict[str, Any]:
        metrics = params.get("Metrics")
        if metrics is not None:
            _check_query_ids(metrics, "Metrics")
            if any(k in params for k in ("MetricName", "Namespace", "Dimensions", "Period", "Statistic")):
                raise CloudWatchError("ValidationError", "Metrics cannot be combined with MetricName etc.")
            stats = [q for q in metrics if "MetricStat" in q]
            if len(stats) > MAX_METRIC_STATS:
                raise CloudWatchError("ValidationError", f"at most {MAX_METRIC_STATS} metrics in one alarm")
            if sum(1 for q in metrics if q.get("ReturnData", True)) != 1:
                raise CloudWatchError("ValidationError", "exactly one item must have ReturnData true")
            period = stats[0]["MetricStat"]["Period"] if stats else 60
        else:
            if "MetricName" not in params or "Period" not in params:
                raise CloudWatchError("ValidationError", "MetricName and Period are required without Metrics")
            period = params["Period"]
        if params.get("DatapointsToAlarm", params["EvaluationPeriods"]) > params["EvaluationPeriods"]:
            raise CloudWatchError("ValidationError", "DatapointsToAlarm cannot exceed EvaluationPeriods")
        if period * params["EvaluationPeriods"] > 86_400:
            raise CloudWatchError("ValidationError", "Period x EvaluationPeriods cannot exceed one day")
        self._upsert(params["AlarmName"], "metric", params)
        return {}

    def _op_PutCompositeAlarm(self, params: dict[str, Any]) -> dict[str, Any]:
        children = _CHILD_REF.findall(params["AlarmRule"])
        if len(params["AlarmRule"]) > MAX_ALARM_RULE:
            raise CloudWatchError("ValidationError", f"AlarmRule is longer than {MAX_ALARM_RULE} characters")
        if len(set(children)) > MAX_COMPOSITE_CHILDREN:
            raise CloudWatchError(
                "ValidationError", f"a composite alarm watches at most {MAX_COMPOSITE_CHILDREN} alarms"
            )
        for child in children:
            if child not in self.alarms and self.arn(child) != child:
                raise CloudWatchError("ValidationError", f"Could not save the composite alarm: {child} missing")
        self._upsert(params["AlarmName"], "composite", params)
        return {}

    def _op_DeleteAlarms(self, params: dict[str, Any]) -> dict[str, Any]:
        names = params["AlarmNames"]
        composites = [n for n in names if n in self.alarms and self.alarms[n]["Kind"] == "composite"]
        if len(composites) > 1:  # the DeleteAlarms API reference: "no more than one composite alarm"
            raise CloudWatchError("ValidationError", "DeleteAlarms accepts at most one composite alarm per call")
        missing = [n for n in names if n not in self.alarms]
        if missing:
            raise CloudWatchError("ResourceNotFound", f"{', '.join(missing)} not found", 404)
        remaining = [a for n, a in self.alarms.items() if a["Kind"] == "composite" and n not in names]
        for name in names:
            if any(name in _CHILD_REF.findall(c["AlarmRule"]) for c in remaining):
                raise CloudWatchError(
                    "ValidationError", f"Cannot delete {name} as there are composite alarm(s) depending on it."
                )
        for name in names:
            del self.alarms[name]
            self.tags.pop(name, None)
        return {}

    def _op_GetMetricData(self, params: dict[str, Any]) -> dict[str, Any]:
        _check_query_ids(params["MetricDataQueries"], "MetricDataQueries")
        if self.metrics is None:
            raise CloudWatchError("UnknownOperationException", "the fake holds no metrics")
        return dict(self.metrics.get_metric_data(params))

    def _op_ListMetrics(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.metrics is None:
            raise CloudWatchError("UnknownOperationException", "the fake holds no metrics")
        return dict(self.metrics.list_metrics(params))

    def _op_ListTagsForResource(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["ResourceARN"].split(":alarm:", 1)[-1]
        if not params["ResourceARN"].startswith(self.arn("")) or name not in self.alarms:
            raise CloudWatchError("ResourceNotFoundException", "The named resource does not exist.", 404)
        return {"Tags": plain_copy(self.tags.get(name, []))}

    def _op_SetAlarmState(self, params: dict[str, Any]) -> dict[str, Any]:
        self._change_state(self._alarm(params["AlarmName"]), params["StateValue"], params["StateReason"])
        return {}

    def _op_EnableAlarmActions(self, params: dict[str, Any]) -> dict[str, Any]:
        for name in params["AlarmNames"]:  # CloudWatch ignores names that do not exist
            if name in self.alarms:
                self.alarms[name]["ActionsEnabled"] = True
        return {}

    def _op_DisableAlarmActions(self, params: dict[str, Any]) -> dict[str, Any]:
        for name in params["AlarmNames"]:
            if name in self.alarms:
                self.alarms[name]["ActionsEnabled"] = False
        return {}

    def _op_DescribeAlarms(self, params: dict[str, Any]) -> dict[str, Any]:
        """Filtered by ``AlarmNames`` / ``AlarmNamePrefix`` and, when given, ``AlarmTypes``. Pages (by name,
        ``NextToken``) when ``MaxRecords`` is given or ``alarm_page_size`` is set; otherwise one page."""
        names = params.get("AlarmNames")
        prefix = params.get("AlarmNamePrefix", "")
        kinds = {"MetricAlarm": "metric", "CompositeAlarm": "composite"}
        # Without AlarmTypes "only metric alarms are returned, even if composite alarms exist in the account"
        # (the DescribeAlarms API reference).
        wanted = {kinds[t] for t in params["AlarmTypes"]} if params.get("AlarmTypes") else {"metric"}
        chosen = [
            a
            for n, a in sorted(self.alarms.items())
            if (names is None or n in names) and n.startswith(prefix) and a["Kind"] in wanted
        ]
        size = params.get("MaxRecords") or self.alarm_page_size or len(chosen) or 1
        size = min(size, self.alarm_page_size or size)
        start = int(params.get("NextToken") or 0)
        page = chosen[start : start + size]

        def public(alarm: dict[str, Any]) -> dict[str, Any]:
            return {k: plain_copy(v) for k, v in alarm.items() if k != "Kind"}

        out: dict[str, Any] = {
            "MetricAlarms": [public(a) for a in page if a["Kind"] == "metric"],
            "CompositeAlarms": [public(a) for a in page if a["Kind"] == "composite"],
        }
        if start + size < len(chosen):
            out["NextToken"] = str(start + size)
        return out


def _breach_reason(alarm: dict[str, Any], now: datetime) -> str:
    """A ``NewStateReason`` in CloudWatch's wording, with all-zero datapoints."""
    if alarm["Kind"] == "composite":
        return f"arn:aws:cloudwatch alarm {alarm['AlarmName']} transitioned to ALARM"
    points = int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"])
    minute = now.replace(second=0, microsecond=0)
    shown = ", ".join(
        f"0.0 ({(minute - timedelta(minutes=k + 1)).strftime('%d/%m/%y %H:%M:%S')})" for k in range(min(points, 5))
    )
    more = " ..." if points > 5 else ""
    return (
        f"Threshold Crossed: {points} out of the last {alarm['EvaluationPeriods']} datapoints [{shown}{more}] "
        f"were less than the threshold ({float(alarm['Threshold'])}) (minimum {points} datapoints for "
        "OK -> ALARM transition)."
    )


# ---- request-rate quotas ---------------------------------------------------------------------------


class _Body:
    """The raw body botocore reads an ``AWSResponse`` from."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


class RequestQuota:
    """Token buckets per API (``rates``: requests per second), refilled on a clock in seconds.

    A bucket holds at most one second's worth of tokens (the burst); a request that finds less than one
    token is answered ``400 ThrottlingException`` ("Rate exceeded") in CloudWatch's JSON protocol shape,
    which botocore's standard retry mode recognises as a throttle. ``allowed`` and ``throttled`` count
    the requests (each attempt of a retried call counts).
    """

    def __init__(self, seconds: Callable[[], float], rates: Mapping[str, float]) -> None:
        if any(rate <= 0 for rate in rates.values()):
            raise ValueError("request rates must be positive")
        self._seconds = seconds
        self.rates = dict(rates)
        self._tokens = {api: max(1.0, rate) for api, rate in self.rates.items()}
        self._at = {api: seconds() for api in self.rates}
        self.allowed: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()

    @classmethod
    def cloudwatch_alarm_writes(cls, seconds: Callable[[], float], tps: float = 3.0) -> RequestQuota:
        return cls(seconds, {api: tps for api in ALARM_WRITE_QUOTAS})

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_id.hyphenize()
        for api in self.rates:
            # More specific than moto's catch-all ``before-send`` handler, so it is asked first.
            client.meta.events.register_first(f"before-send.{service}.{api}", self._check)
        return client

    def _take(self, api: str) -> bool:
        now = self._seconds()
        rate = self.rates[api]
        elapsed = max(0.0, now - self._at[api])
        self._tokens[api] = min(max(1.0, rate), self._tokens[api] + elapsed * rate)
        self._at[api] = max(self._at[api], now)
        if self._tokens[api] >= 1.0:
            self._tokens[api] -= 1.0
            self.allowed[api] += 1
            return True
        self.throttled[api] += 1
        return False

    def _check(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        api = event_name.rsplit(".", 1)[-1]
        if request.url == ANSWERED_URL or api not in self.rates or self._take(api):
            return None  # within the quota: let the request through to whatever answers it
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["x-amzn-RequestId"] = f"throttled-{sum(self.throttled.values())}"
        url = request.url
        # botocore asks every before-send handler and takes the first answer: moto's stubber, asked after
        # us, must not carry out a request CloudWatch refused (a throttled DeleteAlarms deletes nothing).
        request.url = ANSWERED_URL
        return AWSResponse(url, 400, headers, _Body(body))

    def summary(self) -> dict[str, dict[str, int]]:
        return {
            api: {"allowed": self.allowed[api], "throttled": self.throttled[api]} for api in sorted(self.rates)
        }


def _check_query_ids(queries: Iterable[Mapping[str, Any]], field: str) -> None:
    """CloudWatch's rule for ``MetricDataQuery.Id`` (see ``_QUERY_ID``): a ``ValidationError`` otherwise."""
    seen: set[str] = set()
    for number, query in enumerate(queries, start=1):
        ident = str(query.get("Id", ""))
        if _QUERY_ID.fullmatch(ident) is None:
            raise CloudWatchError(
                "ValidationError",
                f"The value {ident} for parameter {field}.member.{number}.Id is not matching the expected pattern: "
                "letters, numbers and underscore, starting with a lowercase letter",
            )
        if ident in seen:
            raise CloudWatchError("ValidationError", f"The Id {ident} is used more than once in {field}")
        seen.add(ident)
