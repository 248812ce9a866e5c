"""EventBridge ``SageMaker Training Job State Change`` -> governance decisions.

The events arrive through ``JobEventsQueue`` (EventBridge rules -> SQS -> the event source mapping, whose
``ScalingConfig.MaximumConcurrency`` bounds a burst): a batch of SQS records, each body one EventBridge
event. The answer is a partial batch response: only the records that failed go back to the queue (and,
after the queue's ``maxReceiveCount``, to the dead-letter queue), visible again in a minute, then five, then
the queue's timeout (``handlers/_batch.py``); when every record failed the invocation fails (same effect). A plain EventBridge event (``sam local invoke -e events/...``, a redrive by
``Invoke``) is handled as a single delivery.
"""

from __future__ import annotations

from sagemaker_governance.handlers import _imports  # first: the collector pauses during the imports

# isort: split
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from sagemaker_governance.composition.job_events import job_events_service as service
from sagemaker_governance.composition.root import Root, current
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.events.queue import sqs_records
from sagemaker_governance.handlers._batch import partial_batch, sooner
from sagemaker_governance.observability import logger, metrics
from sagemaker_governance.service.idempotency import Duplicate, job_delivery_key

_imports.imports_done()


def _deliver(
    root: Root, event: TrainingJobStateChange, owner: str | None, context: LambdaContext
) -> dict[str, Any]:
    """One event (``owner``: the SQS record's delivery owner, ``events/queue.py``; ``None``: a direct event)."""
    logger.append_keys(job=event.detail.name, event_id=event.id)
    governance = service(root)
    said = governance.said(event)  # transitions left out: read again before the delivery is keyed on them

    def process() -> dict[str, Any]:
        decisions = governance.handle(said)
        return {"job": said.detail.name, "decisions": [d.explain() for d in decisions]}

    result = root.process_once(job_delivery_key(said.detail), owner, context, process)
    return result.as_dict() if isinstance(result, Duplicate) else result


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    root = current()
    records = sqs_records(event)
    if records is None:
        return _deliver(root, TrainingJobStateChange.model_validate(event), None, context)
    owners = {r.message_id: r.owner for r in records}

    def deliver(message_id: str, body: str) -> None:
        logger.append_keys(message_id=message_id)
        _deliver(root, TrainingJobStateChange.model_validate_json(body), owners[message_id], context)

    bodies = [(r.message_id, r.body) for r in records]
    return partial_batch(
        bodies,
        deliver,
        failed="job event failed",
        key="message_id",
        context=context,
        going_back=sooner(records, lambda: root.queue_visibility, context),
    )
