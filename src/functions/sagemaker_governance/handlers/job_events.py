"""EventBridge ``SageMaker Training Job State Change`` -> governance decisions."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from sagemaker_governance.composition.job_events import job_events_service as service
from sagemaker_governance.composition.root import current
from sagemaker_governance.events import TrainingJobStateChange
from sagemaker_governance.observability import logger, metrics
from sagemaker_governance.service.idempotency import job_delivery_key


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@event_parser(model=TrainingJobStateChange)
def handler(event: TrainingJobStateChange, context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(job=event.detail.name, event_id=event.id)
    root = current()

    def process() -> dict[str, Any]:
        decisions = service(root).handle(event)
        return {"job": event.detail.name, "decisions": [d.explain() for d in decisions]}

    return root.process_once(job_delivery_key(event.detail), context, process)
