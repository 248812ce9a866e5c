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

**Sooner.** A record named in the answer would be received again only when the queue's visibility timeout
(1,800 s) runs out. Before answering (and, when every record failed, before raising) the records named are
given the retry ladder's visibility instead (``domain/redelivery.py``: 60 s after a first receive, 300 s
after a second, the queue's own later), by the root's ``QueueVisibility`` (``adapters/queue.py``): best
effort, in one call per batch, made only when something goes back and the invocation still has
``VISIBILITY_MIN_REMAINING_MS`` left. A failed attempt has released its delivery's claim in the ledger, so
the retry claims it again. Not one whose release failed too, nor one whose claim raised (DynamoDB may have
applied it, its answer lost): its error is marked ``unreleased`` (``service/idempotency.py``), its claim
may stay held for the invocation's time (at most the 300 s timeout), and a retry within it would be
answered as a duplicate of itself and the record deleted. Such a record is
named in the answer but left out of ``going_back``: it keeps the queue's own visibility (1,800 s), longer
than any hold, and its retry takes the claim over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sagemaker_governance.domain.redelivery import VisibilityChange, retry_visibility
from sagemaker_governance.events.queue import QueuedRecord
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import delivery_batch, unreleased

# The time a record needs at worst: one AWS call through all of botocore's retries takes up to 31 s of backoff
# (docs/resilience.md, "Retries"), and a record makes a few calls besides. 40 s of a 300 s timeout: a batch of
# 5 records (BatchSize) is cut short only when its first records took about 4 minutes.
MIN_REMAINING_MS = 40_000
# The visibility call at the end: two attempts of at most 2 s to connect and 5 s to read
# (composition/root.py: VISIBILITY_CONFIG) and botocore's backoff between them fit in 20 s; with less left it
# is not made (the records come back after the queue's own timeout) rather than risk the invocation's timeout,
# which would return the whole batch, its completed records included.
VISIBILITY_MIN_REMAINING_MS = 20_000


class VisibilityPort(Protocol):
    def change(self, changes: Sequence[VisibilityChange]) -> int:
        """Change each record's visibility (best effort, never raises); how many were changed."""
        ...


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
    going_back: Callable[[Sequence[str]], object] | None = None,
) -> dict[str, Any]:
    """``deliver(record_id, body)`` for each record while ``context`` (the Lambda context) has
    ``min_remaining_ms`` left; ``failed``: the log message of a failed record, with its id under ``key``;
    ``going_back(record_ids)``: told the records named in the answer (failed or unprocessed) before the
    answer (or the error) goes back, when there are some (``sooner``), but those whose error is marked
    ``unreleased`` (their claim still held: they keep the queue's visibility); whatever it raises is logged."""
    failures: list[dict[str, str]] = []
    held: set[str] = set()  # failed records whose delivery claim may still be held (unreleased)
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
                if unreleased(exc):
                    held.add(record_id)
    back = [f["itemIdentifier"] for f in failures if f["itemIdentifier"] not in held]
    if back and going_back is not None:
        try:
            going_back(back)
        except Exception:  # best effort: the answer stands, the records come back after the queue's timeout
            logger.exception("visibility not changed")
    if errors and len(errors) == len(bodies):
        raise errors[0]
    return {"batchItemFailures": failures}


def sooner(
    records: Sequence[QueuedRecord], visibility: Callable[[], VisibilityPort], context: Any
) -> Callable[[Sequence[str]], int]:
    """``going_back`` for ``partial_batch``: the records named are given their retry visibility
    (``retry_visibility``) through ``visibility()`` (called only when one has a visibility to change and
    ``context`` has ``VISIBILITY_MIN_REMAINING_MS`` left); how many were changed."""
    by_id = {r.message_id: r for r in records}

    def change(record_ids: Sequence[str]) -> int:
        changes = [
            VisibilityChange(record.queue_arn, record.receipt_handle, seconds, record.message_id)
            for record in (by_id[rid] for rid in record_ids if rid in by_id)
            if record.receipt_handle and record.queue_arn
            for seconds in [retry_visibility(record.receive_count)]
            if seconds is not None
        ]
        if not changes:
            return 0
        remaining = _remaining_ms(context)
        if remaining is not None and remaining < VISIBILITY_MIN_REMAINING_MS:
            logger.warning(
                "too little time left: visibility not changed",
                records=[c.record_id for c in changes],
                remaining_ms=remaining,
            )
            return 0
        return visibility().change(changes)

    return change
