"""EventBridge schedule -> the reconciler: repair orphan alarms, missing alarms, unevaluated jobs."""

from __future__ import annotations

from sagemaker_governance.handlers import _imports  # first: the collector pauses during the imports

# isort: split
from typing import Any

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from sagemaker_governance.composition.reconciler import reconciler_service as service
from sagemaker_governance.composition.root import current
from sagemaker_governance.events.schedule import ScheduledEvent
from sagemaker_governance.observability import logger, metrics
from sagemaker_governance.service.reconciler import RECONCILER_TRIGGER
from sagemaker_governance.service.recording import Trigger

_imports.imports_done()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@event_parser(model=ScheduledEvent)
def handler(event: ScheduledEvent, context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(event_id=event.id)
    report = service(current()).run(
        Trigger(kind=RECONCILER_TRIGGER, event_id=event.id),
        remaining=lambda: context.get_remaining_time_in_millis() / 1000,
    )
    return report.as_dict()
