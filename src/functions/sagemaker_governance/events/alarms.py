"""CloudWatch alarm notifications (SNS): what the guard stopper (IdleStopperFunction) accepts.

The notifications reach the stopper through its queue (SQS records whose bodies are SNS notifications:
``queued_alarm_notification``) or as a plain SNS event (``alarm_notifications``). A malformed message
raises ``pydantic.ValidationError``: the record (or the invocation) fails, is retried, then ends in the
dead-letter queue.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal

from aws_lambda_powertools.utilities.parser.models import SnsModel, SnsNotificationModel
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

# A datapoint as NewStateReason lists it: "Threshold Crossed: 12 out of the last 12 datapoints [62.5 (21/11/26
# 11:55:00), 70.0 (21/11/26 11:50:00) ...] were less than the threshold (...)" (events/*.json: newest first).
_LISTED_DATAPOINT: Final = re.compile(
    r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?) \((\d\d/\d\d/\d\d \d\d:\d\d:\d\d)\)", re.ASCII
)


def newest_listed_datapoint(reason: str) -> float | None:
    """The value of the newest datapoint a state reason lists (by its time), or None when it lists none (a
    composite alarm, missing data treated as breaching)."""
    opening = reason.find("[")
    closing = reason.find("]", opening + 1)
    if opening < 0 or closing < 0:
        return None
    listed = []
    for value, stamp in _LISTED_DATAPOINT.findall(reason[opening:closing]):
        try:
            listed.append((datetime.strptime(stamp, "%d/%m/%y %H:%M:%S"), float(value)))
        except ValueError:
            continue
    return max(listed)[1] if listed else None


class _AlarmModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class AlarmDimension(_AlarmModel):
    # SNS alarm messages spell dimension keys in lower case; DescribeAlarms in PascalCase.
    name: str = Field(validation_alias=AliasChoices("name", "Name"))
    value: str = Field(validation_alias=AliasChoices("value", "Value"))


class AlarmMetric(_AlarmModel):
    namespace: str | None = Field(default=None, alias="Namespace")
    metric_name: str | None = Field(default=None, alias="MetricName")
    dimensions: tuple[AlarmDimension, ...] = Field(default=(), alias="Dimensions")


class AlarmMetricStat(_AlarmModel):
    metric: AlarmMetric = Field(alias="Metric")
    period: int | None = Field(default=None, alias="Period")
    stat: str | None = Field(default=None, alias="Stat")


class AlarmQuery(_AlarmModel):
    """One item of a metric-math alarm's ``Metrics``: a metric to fetch or an expression."""

    id: str = Field(alias="Id")
    expression: str | None = Field(default=None, alias="Expression")
    metric_stat: AlarmMetricStat | None = Field(default=None, alias="MetricStat")
    label: str | None = Field(default=None, alias="Label")
    return_data: bool | None = Field(default=None, alias="ReturnData")


class AlarmTrigger(_AlarmModel):
    """A metric alarm's configuration as the notification repeats it: single metric or metric math."""

    metric_name: str | None = Field(default=None, alias="MetricName")
    namespace: str | None = Field(default=None, alias="Namespace")
    statistic: str | None = Field(default=None, alias="Statistic")
    dimensions: tuple[AlarmDimension, ...] = Field(default=(), alias="Dimensions")
    metrics: tuple[AlarmQuery, ...] = Field(default=(), alias="Metrics")
    period: int | None = Field(default=None, alias="Period")
    evaluation_periods: int | None = Field(default=None, alias="EvaluationPeriods")
    datapoints_to_alarm: int | None = Field(default=None, alias="DatapointsToAlarm")
    comparison_operator: str | None = Field(default=None, alias="ComparisonOperator")
    threshold: float | None = Field(default=None, alias="Threshold")
    treat_missing_data: str | None = Field(default=None, alias="TreatMissingData")

    @field_validator("treat_missing_data", mode="before")
    @classmethod
    def _setting(cls, value: Any) -> Any:
        """CloudWatch's notifications spell it as a padded line (``"- TreatMissingData:   notBreaching"``,
        public captures 2019-2024), not the bare setting ``PutMetricAlarm`` takes: its last word."""
        if isinstance(value, str) and value.split():
            return value.split()[-1]
        return value

    @property
    def is_metric_math(self) -> bool:
        return bool(self.metrics)

    def hosts(self) -> tuple[str, ...]:
        """The ``Host`` dimension values the alarm watches."""
        dims = list(self.dimensions)
        for query in self.metrics:
            if query.metric_stat is not None:
                dims += query.metric_stat.metric.dimensions
        return tuple(d.value for d in dims if d.name == "Host")

    def as_alarm(self) -> dict[str, Any]:
        """The alarm's terms and metric(s) as a ``PutMetricAlarm`` request (or ``DescribeAlarms``) spells them, what
        ``domain/alarm_compare.py`` ``alarm_definition`` reads: a notification's alarm compared with a planned one."""

        def metric(
            namespace: str | None, name: str | None, dimensions: tuple[AlarmDimension, ...]
        ) -> dict[str, Any]:
            shown = [{"Name": d.name, "Value": d.value} for d in dimensions]
            return {"Namespace": namespace, "MetricName": name, "Dimensions": shown}

        out: dict[str, Any] = {
            "Threshold": self.threshold,
            "ComparisonOperator": self.comparison_operator,
            "EvaluationPeriods": self.evaluation_periods,
            "DatapointsToAlarm": self.datapoints_to_alarm,
            "TreatMissingData": self.treat_missing_data,
        }
        if not self.metrics:
            return {
                **out,
                **metric(self.namespace, self.metric_name, self.dimensions),
                "Period": self.period,
                "Statistic": self.statistic,
            }
        queries: list[dict[str, Any]] = []
        for query in self.metrics:
            item: dict[str, Any] = {"Id": query.id, "ReturnData": query.return_data is not False}
            stat = query.metric_stat
            if stat is not None:
                item["MetricStat"] = {
                    "Metric": metric(stat.metric.namespace, stat.metric.metric_name, stat.metric.dimensions),
                    "Period": stat.period,
                    "Stat": stat.stat,
                }
            else:
                item["Expression"] = query.expression
            queries.append(item)
        return {**out, "Metrics": queries}

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "threshold": self.threshold,
            "comparison": self.comparison_operator,
            "period_seconds": self.period
            or next((q.metric_stat.period for q in self.metrics if q.metric_stat is not None), None),
            "evaluation_periods": self.evaluation_periods,
            "datapoints_to_alarm": self.datapoints_to_alarm,
            "treat_missing_data": self.treat_missing_data,
            "hosts": list(self.hosts()),
        }
        expression = next((q.expression for q in self.metrics if q.return_data and q.expression), None)
        if expression:
            out["expression"] = expression
        return {k: v for k, v in out.items() if v is not None}


class TriggeringChild(_AlarmModel):
    arn: str = Field(alias="Arn")
    state: dict[str, Any] | None = Field(default=None, alias="State")


class AlarmNotification(_AlarmModel):
    """The JSON CloudWatch publishes to SNS when an alarm changes state (metric or composite alarm)."""

    alarm_name: str = Field(alias="AlarmName", min_length=1, max_length=255)  # CloudWatch's limit
    alarm_arn: str | None = Field(default=None, alias="AlarmArn")
    account_id: str = Field(alias="AWSAccountId", min_length=1)
    new_state: Literal["ALARM", "OK", "INSUFFICIENT_DATA"] = Field(alias="NewStateValue")
    old_state: Literal["ALARM", "OK", "INSUFFICIENT_DATA"] | None = Field(default=None, alias="OldStateValue")
    reason: str = Field(default="", alias="NewStateReason")
    state_change_time: str | None = Field(default=None, alias="StateChangeTime")
    region: str | None = Field(default=None, alias="Region")
    trigger: AlarmTrigger | None = Field(default=None, alias="Trigger")
    alarm_rule: str | None = Field(default=None, alias="AlarmRule")
    triggering_children: tuple[TriggeringChild | str, ...] = Field(default=(), alias="TriggeringChildren")
    description: str | None = Field(default=None, alias="AlarmDescription")

    def triggering_child_names(self) -> tuple[str, ...]:
        """The names of a composite's triggering children (CloudWatch gives their ARNs, ``...:alarm:<name>``)."""
        arns = (c.arn if isinstance(c, TriggeringChild) else c for c in self.triggering_children)
        return tuple(arn.split(":alarm:", 1)[1] if ":alarm:" in arn else arn for arn in arns if arn)

    @property
    def is_composite(self) -> bool:
        return self.alarm_rule is not None

    @property
    def changed_at(self) -> datetime | None:
        """``StateChangeTime`` (``2025-11-21T11:20:00.123+0000``); ``None`` when absent or unreadable."""
        if not self.state_change_time:
            return None
        for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
            try:
                return datetime.strptime(self.state_change_time, fmt)
            except ValueError:
                continue
        return None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "alarm": self.alarm_name,
            "state_change_time": self.state_change_time,
            "state_reason": self.reason[:2000],
        }
        newest = newest_listed_datapoint(self.reason)
        if newest is not None:
            out["newest_value"] = newest  # the alarm's metric (or expression) in its newest period
        if self.trigger is not None:
            out.update(self.trigger.evidence())
        if self.alarm_rule is not None:
            out["alarm_rule"] = self.alarm_rule[:2000]
        return out


def alarm_notifications(raw_event: Mapping[str, Any]) -> list[tuple[str | None, AlarmNotification]]:
    """An SNS Lambda event to ``(SNS message id, alarm notification)`` pairs.

    Raises ``pydantic.ValidationError`` for an event that is not SNS, and for a message that is not
    JSON or not an alarm notification (the invocation fails and ends in the dead-letter queue)."""
    envelope = SnsModel.model_validate(raw_event)
    out: list[tuple[str | None, AlarmNotification]] = []
    for record in envelope.Records:
        text = record.Sns.Message
        out.append(
            (record.Sns.MessageId, AlarmNotification.model_validate_json(text if isinstance(text, str) else ""))
        )
    return out


def queued_alarm_notification(body: str) -> tuple[str, AlarmNotification]:
    """An SNS notification delivered to SQS (raw delivery off: the body is the SNS JSON envelope) to
    ``(SNS message id, alarm notification)``. Raises ``pydantic.ValidationError`` when it is not one."""
    notification = SnsNotificationModel.model_validate_json(body)
    text = notification.Message
    return notification.MessageId, AlarmNotification.model_validate_json(text if isinstance(text, str) else "")
