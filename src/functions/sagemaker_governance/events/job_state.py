"""``SageMaker Training Job State Change`` from EventBridge: what the job-events function accepts (each
event the body of one record of its queue, or a plain EventBridge event)."""

from __future__ import annotations

from typing import Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import Field

from sagemaker_governance.domain.job import TrainingJob

TRAINING_JOB_STATE_CHANGE = "SageMaker Training Job State Change"


class TrainingJobStateChange(EventBridgeModel):
    """``SageMaker Training Job State Change`` from EventBridge; ``detail`` mirrors DescribeTrainingJob."""

    source: Literal["aws.sagemaker"]
    detail_type: Literal["SageMaker Training Job State Change"] = Field(alias="detail-type")
    detail: TrainingJob
