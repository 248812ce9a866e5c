"""The SQS partial batch response both queue-fed functions answer with.

Each record is delivered on its own: a record that fails goes back to the queue (and, after the queue's
``maxReceiveCount``, to its dead-letter queue) while the others are done. When every record failed the
invocation fails (same effect: the whole batch returns), so Lambda's error metrics and the function's
on-failure destination still see a function that cannot process anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sagemaker_governance.observability import logger


def partial_batch(
    bodies: Sequence[tuple[str, str]], deliver: Callable[[str, str], object], *, failed: str, key: str
) -> dict[str, Any]:
    """``deliver(record_id, body)`` for each record; ``failed``: the log message of a failed record, with
    its id under ``key``."""
    failures: list[dict[str, str]] = []
    errors: list[Exception] = []
    for record_id, body in bodies:
        try:
            deliver(record_id, body)
        except Exception as exc:  # the record goes back to the queue; the others are done
            logger.exception(failed, extra={key: record_id})
            failures.append({"itemIdentifier": record_id})
            errors.append(exc)
    if errors and len(errors) == len(bodies):
        raise errors[0]
    return {"batchItemFailures": failures}
