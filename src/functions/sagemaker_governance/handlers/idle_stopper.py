"""SNS (CloudWatch idle-alarm notifications) -> stop idle training jobs."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sagemaker_governance.composition.alarm_stopper import stopper_service as service
from sagemaker_governance.composition.root import current
from sagemaker_governance.events import AlarmNotification, alarm_notifications
from sagemaker_governance.observability import logger, metrics
from sagemaker_governance.service.idempotency import alarm_delivery_key


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    root = current()
    stopper = service(root)
    results = []
    for message_id, message in alarm_notifications(event):
        logger.append_keys(alarm=message.alarm_name, message_id=message_id)

        def process(message: AlarmNotification = message, message_id: str | None = message_id) -> dict[str, Any]:
            return stopper.handle(message, message_id).as_dict()

        results.append(root.process_once(alarm_delivery_key(message, message_id), context, process))
    return {"results": results}
