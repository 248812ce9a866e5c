"""The reconciler's trigger: the ``Scheduled Event`` of an EventBridge schedule rule."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import Field


class ScheduledEvent(EventBridgeModel):
    """The ``Scheduled Event`` an EventBridge schedule rule sends (the reconciler's trigger)."""

    source: Literal["aws.events"]
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    detail: dict[str, Any] = Field(default_factory=dict)
