"""Inbound contracts: the events our functions accept, modelled with Powertools' parser models.

A malformed event raises ``pydantic.ValidationError``: the invocation fails, Lambda retries it and then
sends it to the dead-letter queue. Nothing is silently dropped.
"""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import Field

from sagemaker_governance.domain.job import TrainingJob

TRAINING_JOB_STATE_CHANGE = "SageMaker Training Job State Change"


class TrainingJobStateChange(EventBridgeModel):  # type: ignore[misc]
    """``SageMaker Training Job State Change`` from EventBridge; ``detail`` mirrors DescribeTrainingJob."""

    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker Training Job State Change"] = Field(alias="detail-type")
    detail: TrainingJob
