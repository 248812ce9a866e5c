"""When a queued record that goes back to its queue is received again: the retry ladder.

A record named in a partial batch response (``batchItemFailures``) "becomes visible again" only "after your
queue's visibility timeout runs out" (Lambda developer guide, "Handling errors for an SQS event source in
Lambda"): 1,800 s for both queues (template.yaml), sized for a whole batch's worst case, not for a retry.
Most failures are short-lived (a DescribeTrainingJob that lags the event by seconds: ``DescriptionBehind``;
the policy unreadable for a moment: ``PolicyUnavailable``; throttling through botocore's retries:
``AdapterError``), so the handlers shorten the visibility of such a record (SQS ``ChangeMessageVisibility``
on the receipt handle of this receive; the new timeout counts from the call, 0 to 43,200 s: SQS API
reference) by how many times it has been received (its ``ApproximateReceiveCount``):

- the first receive failed: again in ``FIRST_RETRY_SECONDS`` (60 s: long enough for a lagging read to catch
  up, short enough that a violating job keeps its instances one minute, not thirty);
- the second failed: again in ``SECOND_RETRY_SECONDS`` (300 s: a throttling storm or an SSM outage gets
  some minutes to pass);
- later receives: no change; the queue's own timeout (1,800 s) spaces the last receives before the
  redrive policy's ``maxReceiveCount`` (5) dead-letters the record. The ladder only shortens the span a
  record lives in the queue (60 + 300 + 2 x 1,800 s before its fifth receive instead of 4 x 1,800 s).

A record returned unprocessed (the invocation had too little time left for it: ``handlers/_batch.py``)
follows the same ladder. It was not tried, but its receive counts toward ``maxReceiveCount`` like a failed
one, and it was cut short because the records before it were slow: AWS throttled or answered late. A 60 s
pause lets that pass rather than sending it at once into the same storm, and the ladder keeps the
record's five receives spread over an hour, as for a failure, rather than burning them within minutes.

**A record whose attempt left a claim held** (its error marked ``unreleased``: ``service/idempotency.py``)
must not come back while that claim is held: its retry would meet it and be answered as a duplicate of
itself (deleted, the event lost), or find a clone's owner "told already" (never told). It is not left to
the queue's own timeout either: that counts from the event source mapping's *receive*, the hold from the
*claim*, and Lambda may invoke the function well after the receive (the poller retries an invocation that
was throttled while the batch stays in flight), so a claim made 1,000 s into a 1,800 s window is still
held when the record comes back. Such a record is given ``held_visibility(longest hold)`` instead, counted
from the call at the end of the failed invocation, whatever its receive count: the longest hold an attempt
can leave (a clone notice's; a delivery's own claim is held only for the invocation's remaining time, over
by its end) plus ``HELD_MARGIN_SECONDS`` (the ledger rounds a hold's end up to the second; the clocks of
Lambda, DynamoDB's writer and SQS are not one).
"""

from __future__ import annotations

import math
from typing import NamedTuple

FIRST_RETRY_SECONDS = 60
SECOND_RETRY_SECONDS = 300
# ChangeMessageVisibility's VisibilityTimeout: "Values range: 0 to 43200" (botocore's SQS model).
MAX_VISIBILITY_SECONDS = 43_200
# How long past the longest hold a held record stays invisible (module docstring).
HELD_MARGIN_SECONDS = 60


def retry_visibility(receive_count: int | None) -> int | None:
    """The visibility timeout (seconds from now) to give a record going back to its queue after its
    ``receive_count``-th receive; ``None``: leave the queue's own timeout (later receives, or a count
    unknown)."""
    if receive_count == 1:
        return FIRST_RETRY_SECONDS
    if receive_count == 2:
        return SECOND_RETRY_SECONDS
    return None


def held_visibility(longest_hold_seconds: float) -> int:
    """The visibility timeout (seconds from now) to give a record whose attempt, made before now, may have
    left a claim held in the ledger for up to ``longest_hold_seconds`` from when it was made: past that
    hold by ``HELD_MARGIN_SECONDS``. Raises ``ValueError`` for a negative hold, or one SQS could not wait
    out (over ``MAX_VISIBILITY_SECONDS`` with the margin)."""
    if not (math.isfinite(longest_hold_seconds) and longest_hold_seconds >= 0):
        raise ValueError(f"a hold is a duration: {longest_hold_seconds!r}")
    seconds = math.ceil(longest_hold_seconds) + HELD_MARGIN_SECONDS
    if seconds > MAX_VISIBILITY_SECONDS:
        raise ValueError(f"a hold of {longest_hold_seconds} s outlasts any visibility SQS accepts")
    return seconds


class VisibilityChange(NamedTuple):
    """Make the record received with ``receipt_handle`` from ``queue_arn`` visible in ``seconds``."""

    queue_arn: str
    receipt_handle: str
    seconds: int
    record_id: str  # its message id, for the log
