"""The queue an event-driven function reads (issue 16 item 2): its permissions, for the IAM contract.

Lambda's event source mapping polls the queue with the function's role and invokes the function with the
records; our code makes none of these calls (it answers with a partial batch response). The template
grants them on the function's own queue only (SAM's ``SQS`` event would attach the managed policy
``AWSLambdaSQSQueueExecutionRole``, which grants them on ``Resource: "*"``).
"""

from __future__ import annotations

from typing import ClassVar


class EventSourceMappingPoller:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    )
    NEEDS_CLIENT: ClassVar[bool] = False  # Lambda's poller calls these, not the function
