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
(1,800 s, counted from the event source mapping's receive) runs out. Before answering (and, when every
record failed, before raising) the records named are given a visibility of their own, in one call per batch
by the root's ``QueueVisibility`` (``adapters/queue.py``), made only when something goes back and the
invocation still has ``VISIBILITY_MIN_REMAINING_MS`` left:

- a record whose failed attempt released its delivery's claim in the ledger (or one returned unprocessed):
  the retry ladder's (``domain/redelivery.py``: 60 s after a first receive, 300 s after a second, the
  queue's own later). The retry claims the delivery again;
- a record whose error is marked ``unreleased`` (``service/idempotency.py``: its release failed, its claim
  raised with DynamoDB perhaps having applied it, or a clone notice's claim was left held): a claim may
  still be held, and a retry within its hold would be answered as a duplicate of itself and the record
  deleted, or find a clone's owner "told already". It gets ``HELD_VISIBILITY_SECONDS``, whatever its receive
  count: past the longest hold an attempt can leave (a ledger notice's ``NOTICE_HOLD_SECONDS``; a
  delivery's own claim is held for the invocation's remaining time, over when it ends), counted from this
  call, so from after the claim. The queue's own timeout would not do: it counts from the receive, and
  Lambda may invoke the function long after it (the poller retries a throttled invocation while the batch
  stays in flight), so a notice claimed 1,000 s after the receive was still held when the record came back.

Best effort: when the call fails or too little time is left for it (logged: ``visibility not changed``),
the records keep the queue's own timeout from the receive. For a held one that is past its holds when the
invocation started within 600 s of the receive (1,800 s less the 300 s Timeout and the notice's 900 s: a
template test keeps the queue's timeout above the function's Timeout plus every hold); the retry of one
invoked later may still meet the hold, the case the held visibility is there for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sagemaker_governance.domain.redelivery import VisibilityChange, held_visibility, retry_visibility
from sagemaker_governance.events.queue import QueuedRecord
from sagemaker_governance.observability import logger
from sagemaker_governance.service.idempotency import NOTICE_HOLD_SECONDS, delivery_batch, unreleased

# The time a record needs at worst: one AWS call through all of botocore's retries takes up to 31 s of backoff
# (docs/resilience.md, "Retries"), and a record makes a few calls besides. 40 s of a 300 s timeout: a batch of
# 5 records (BatchSize) is cut short only when its first records took about 4 minutes.
MIN_REMAINING_MS = 40_000
# The visibility call at the end: two attempts of at most 2 s to connect and 5 s to read
# (composition/root.py: VISIBILITY_CONFIG) and botocore's backoff between them fit in 20 s; with less left it
# is not made (the records come back after the queue's own timeout) rather than risk the invocation's timeout,
# which would return the whole batch, its completed records included.
VISIBILITY_MIN_REMAINING_MS = 20_000
# The visibility of a record whose attempt may have left a claim held: past the longest such hold, a clone
# notice's (a delivery's own claim is held only for the invocation's remaining time, at most its 300 s timeout).
HELD_VISIBILITY_SECONDS = held_visibility(NOTICE_HOLD_SECONDS)


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
    going_back: Callable[[Sequence[str], Sequence[str]], object] | None = None,
) -> dict[str, Any]:
    """``deliver(record_id, body)`` for each record while ``context`` (the Lambda context) has
    ``min_remaining_ms`` left; ``failed``: the log message of a failed record, with its id under ``key``;
    ``going_back(back, held)``: told the records named in the answer before the answer (or the error) goes
    back, when there are some (``sooner``): ``back`` those failed or unprocessed, ``held`` those whose error
    is marked ``unreleased`` (a claim may still be held); whatever it raises is logged."""
    failures: list[dict[str, str]] = []
    held: list[str] = []  # failed records whose attempt may have left a claim held (unreleased)
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
                    held.append(record_id)
    back = [f["itemIdentifier"] for f in failures if f["itemIdentifier"] not in held]
    if (back or held) and going_back is not None:
        try:
            going_back(back, held)
        except Exception:  # best effort: the answer stands, the records come back after the queue's timeout
            logger.exception("visibility not changed")
    if errors and len(errors) == len(bodies):
        raise errors[0]
    return {"batchItemFailures": failures}


def sooner(
    records: Sequence[QueuedRecord], visibility: Callable[[], VisibilityPort], context: Any
) -> Callable[[Sequence[str], Sequence[str]], int]:
    """``going_back`` for ``partial_batch``: the records ``back`` are given their retry visibility
    (``retry_visibility``), the records ``held`` ``HELD_VISIBILITY_SECONDS``, in one change through
    ``visibility()`` (called only when one has a visibility to change and ``context`` has
    ``VISIBILITY_MIN_REMAINING_MS`` left); how many were changed."""
    by_id = {r.message_id: r for r in records}

    def chosen(record_ids: Sequence[str], seconds: Callable[[QueuedRecord], int | None]) -> list[VisibilityChange]:
        return [
            VisibilityChange(record.queue_arn, record.receipt_handle, wait, record.message_id)
            for record in (by_id[rid] for rid in record_ids if rid in by_id)
            if record.receipt_handle and record.queue_arn
            for wait in [seconds(record)]
            if wait is not None
        ]

    def change(back: Sequence[str], held: Sequence[str]) -> int:
        changes = chosen(back, lambda r: retry_visibility(r.receive_count)) + chosen(
            held, lambda _: HELD_VISIBILITY_SECONDS
        )
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
