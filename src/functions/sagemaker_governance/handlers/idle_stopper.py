"""CloudWatch idle- and progress-alarm notifications -> stop idle or stalled training jobs.

The notifications arrive through ``AlarmQueue`` (AlarmTopic -> SQS -> the event source mapping, whose
``ScalingConfig.MaximumConcurrency`` bounds a burst): a batch of SQS records, each body one SNS
notification (raw delivery off). The answer is a partial batch response (only failed records return to
the queue, visible again in a minute, then five, then the queue's timeout: ``handlers/_batch.py``; when every
record failed the invocation fails). A plain SNS event (``sam local invoke -e
events/idle-alarm-*.json``) is handled as before.
"""

from __future__ import annotations

from sagemaker_governance.handlers import _imports  # first: the collector pauses during the imports

# isort: split
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sagemaker_governance.composition.alarm_stopper import stopper_service as service
from sagemaker_governance.composition.root import Root, current
from sagemaker_governance.events.alarms import AlarmNotification, alarm_notifications, queued_alarm_notification
from sagemaker_governance.events.queue import sqs_records
from sagemaker_governance.handlers._batch import partial_batch, sooner
from sagemaker_governance.observability import logger, metrics
from sagemaker_governance.service.idempotency import Duplicate, alarm_delivery_key

_imports.imports_done()


def _deliver(
    root: Root,
    message: AlarmNotification,
    message_id: str | None,
    context: LambdaContext,
    owner: str | None = None,
) -> dict[str, Any]:
    """One alarm notification (``message_id``: its SNS id; ``owner``: the delivery owner of the SQS record
    carrying it, ``events/queue.py``)."""
    logger.append_keys(alarm=message.alarm_name, message_id=message_id)
    stopper = service(root)

    def process() -> dict[str, Any]:
        return stopper.handle(message, message_id).as_dict()

    result = root.process_once(alarm_delivery_key(message, message_id), owner, context, process)
    return result.as_dict() if isinstance(result, Duplicate) else result


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    root = current()
    records = sqs_records(event)
    if records is None:
        return {"results": [_deliver(root, message, mid, context) for mid, message in alarm_notifications(event)]}
    owners = {r.message_id: r.owner for r in records}

    def deliver(record_id: str, body: str) -> None:
        message_id, message = queued_alarm_notification(body)
        _deliver(root, message, message_id, context, owners[record_id])

    bodies = [(r.message_id, r.body) for r in records]
    return partial_batch(
        bodies,
        deliver,
        failed="alarm notification failed",
        key="record_id",
        context=context,
        going_back=sooner(records, lambda: root.queue_visibility, context),
    )
