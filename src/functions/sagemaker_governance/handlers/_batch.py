"""The SQS partial batch response both queue-fed functions answer with.

Each record is delivered on its own: a record that fails goes back to the queue (and, after the queue's
``maxReceiveCount``, to its dead-letter queue) while the others are done. When every record failed the
invocation fails (same effect: the whole batch returns), so Lambda's error metrics and the function's
on-failure destination still see a function that cannot process anything.

A record is started only while the invocation has ``MIN_REMAINING_MS`` left. An invocation that times out
mid-record returns the whole batch to the queue, the records it completed included, and leaves the record
it was on half done; the records it has no time for are named in the answer instead (unprocessed, they
return to the queue and count one receive). Their delivery keys are never claimed, so the next receive
processes them as new. The deliveries of one batch run in one ``delivery_batch``: a completed record is
marked completed in the ledger before the next is claimed (``service/idempotency.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import delivery_batch

# The time a record needs at worst: one AWS call through all of botocore's retries takes up to 31 s of backoff
# (docs/resilience.md, "Retries"), and a record makes a few calls besides. 40 s of a 300 s timeout: a batch of
# 5 records (BatchSize) is cut short only when its first records took about 4 minutes.
MIN_REMAINING_MS = 40_000


def _remaining_ms(context: Any) -> int | None:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return int(remaining()) if callable(remaining) else None


def partial_batch(
    bodies: Sequence[tuple[str, str]],
    deliver: Callable[[str, str], object],
    *,
    failed: str,
    key: str,
    context: Any,
    min_remaining_ms: int = MIN_REMAINING_MS,
) -> dict[str, Any]:
    """``deliver(record_id, body)`` for each record while ``context`` (the Lambda context) has
    ``min_remaining_ms`` left; ``failed``: the log message of a failed record, with its id under ``key``."""
    failures: list[dict[str, str]] = []
    errors: list[Exception] = []
    with delivery_batch():
        for index, (record_id, body) in enumerate(bodies):
            remaining = _remaining_ms(context)
            if remaining is not None and remaining < min_remaining_ms:
                left = [rid for rid, _ in bodies[index:]]
                logger.warning(
                    "too little time left: records returned unprocessed", records=left, remaining_ms=remaining
                )
                failures += [{"itemIdentifier": rid} for rid in left]
                break
            try:
                deliver(record_id, body)
            except Exception as exc:  # the record goes back to the queue; the others are done
                logger.exception(failed, extra={key: record_id})
                failures.append({"itemIdentifier": record_id})
                errors.append(exc)
    if errors and len(errors) == len(bodies):
        raise errors[0]
    return {"batchItemFailures": failures}
