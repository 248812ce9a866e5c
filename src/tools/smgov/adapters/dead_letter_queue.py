"""The dead-letter queue, for operators (`smgov dlq`): peek, redrive (to the function, the source queue,
the stack's audit bus or, in the audit account, the central log group), delete."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from botocore.exceptions import ClientError

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.events.queue import DELIVERY_OWNER_ATTRIBUTE
from smgov.dead_letters import DeadLetter, log_group_name, parse_dead_letter

MAX_BATCH = 10
# The stream a redriven central audit record is written to (the rule's own streams are EventBridge's).
REDRIVE_LOG_STREAM: Final = "smgov-dlq-redrive"


def _owner_attribute(letter: DeadLetter) -> dict[str, Any]:
    if letter.owner is None:
        return {}
    return {"MessageAttributes": {DELIVERY_OWNER_ATTRIBUTE: {"DataType": "String", "StringValue": letter.owner}}}


class DeadLetterQueue:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:ChangeMessageVisibility",
            "lambda:InvokeFunction",
            "sqs:GetQueueUrl",  # redrive to a source queue
            "sqs:SendMessage",
            "events:PutEvents",  # redrive an audit record to the stack's audit bus (one audit view)
            "logs:CreateLogStream",  # redrive a record the central audit rule could not write (audit account)
            "logs:PutLogEvents",
        }
    )

    def __init__(
        self,
        sqs: Any,
        lambda_client: Any,
        queue_url: str,
        source_queues: Mapping[str, str] | None = None,
        events_client: Any = None,
        logs_client: Callable[[str], Any] | None = None,
        alarm_prefix: str | None = None,
    ) -> None:
        self._sqs = sqs
        self._lambda = lambda_client
        self._events = events_client
        self._logs = logs_client  # region -> a CloudWatch Logs client there
        self._queue_url = queue_url
        self._source_queues = dict(source_queues or {})  # body shape -> the queue it came from
        self._alarm_prefix = alarm_prefix  # the stack's idle alarm prefix: names an alarm notification's job

    def peek(self, limit: int = 100, visibility_seconds: int = 30) -> list[DeadLetter]:
        """Up to ``limit`` messages, hidden for ``visibility_seconds`` while we look, then visible again."""
        letters: dict[str, DeadLetter] = {}
        while len(letters) < limit:
            try:
                response = self._sqs.receive_message(
                    QueueUrl=self._queue_url,
                    MaxNumberOfMessages=min(MAX_BATCH, limit - len(letters)),
                    VisibilityTimeout=visibility_seconds,
                    MessageAttributeNames=["All"],
                    MessageSystemAttributeNames=["DeadLetterQueueSourceArn", "ApproximateReceiveCount"],
                    WaitTimeSeconds=0,
                )
            except ClientError as exc:
                raise AdapterError(f"ReceiveMessage failed: {exc}") from exc
            messages = response.get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in letters]
            if not fresh:
                break
            for message in fresh:
                letters[message["MessageId"]] = parse_dead_letter(message, self._source_queues, self._alarm_prefix)
        return list(letters.values())

    def release(self, letter: DeadLetter) -> None:
        """Make a peeked message visible again at once."""
        self._sqs.change_message_visibility(
            QueueUrl=self._queue_url, ReceiptHandle=letter.receipt_handle, VisibilityTimeout=0
        )

    def _put_event(self, letter: DeadLetter) -> None:
        if self._events is None:
            raise AdapterError(f"message {letter.message_id}: no EventBridge client to put it on {letter.bus}")
        try:
            response = self._events.put_events(Entries=[letter.entry])
        except ClientError as exc:
            raise AdapterError(f"PutEvents to {letter.bus} failed: {exc}") from exc
        if response.get("FailedEntryCount"):
            (result,) = response.get("Entries") or [{}]
            raise AdapterError(
                f"PutEvents to {letter.bus} failed: {result.get('ErrorCode')}: {result.get('ErrorMessage')}"
            )

    def _write_log(self, letter: DeadLetter) -> None:
        """Write the event into the log group as the central rule's target does: the whole event, its time as
        the timestamp (PutLogEvents refuses events more than 14 days old or older than the group's
        retention, and says so in ``rejectedLogEventsInfo``, not as an error)."""
        arn = str(letter.log_group)
        if self._logs is None:
            raise AdapterError(f"message {letter.message_id}: no CloudWatch Logs client to write it to {arn}")
        logs, group = self._logs(arn.split(":")[3]), log_group_name(arn)
        try:
            logs.create_log_stream(logGroupName=group, logStreamName=REDRIVE_LOG_STREAM)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceAlreadyExistsException":
                raise AdapterError(f"CreateLogStream in {group} failed: {exc}") from exc
        event = {"timestamp": letter.log_timestamp, "message": letter.body}
        try:
            response = logs.put_log_events(logGroupName=group, logStreamName=REDRIVE_LOG_STREAM, logEvents=[event])
        except ClientError as exc:
            raise AdapterError(f"PutLogEvents to {group} failed: {exc}") from exc
        rejected = response.get("rejectedLogEventsInfo")
        if rejected:
            raise AdapterError(
                f"{group} refused the record at its time ({json.dumps(rejected, sort_keys=True)}): CloudWatch Logs "
                "takes no event more than 14 days old or older than the group's retention; it stays in the queue "
                "(the member's own log group still has it: README, One audit view)"
            )

    def redrive(self, letter: DeadLetter) -> None:
        """Send the original message back to its queue, or invoke the function asynchronously with the
        original payload; then delete the message (only once the queue or Lambda accepted it). A record the
        function failed goes back with its delivery owner (``events/queue.py``): the copy's new message id
        would make it a duplicate of the claim its dead attempts left, dropped unprocessed."""
        if not letter.redrivable:
            raise AdapterError(f"message {letter.message_id} has no function, queue or payload to redrive")
        if letter.bus is not None and letter.entry is not None:
            self._put_event(letter)
        elif letter.log_group is not None:
            self._write_log(letter)
        elif letter.queue_arn is not None:
            name, account = letter.queue_arn.rsplit(":", 2)[-1], letter.queue_arn.split(":")[4]
            try:
                url = self._sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
                self._sqs.send_message(QueueUrl=url, MessageBody=letter.body, **_owner_attribute(letter))
            except ClientError as exc:
                raise AdapterError(f"SendMessage to {letter.queue_arn} failed: {exc}") from exc
        else:
            try:
                self._lambda.invoke(
                    FunctionName=letter.function_arn,
                    InvocationType="Event",
                    Payload=json.dumps(letter.payload).encode(),
                )
            except ClientError as exc:
                raise AdapterError(f"Invoke {letter.function_arn} failed: {exc}") from exc
        self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=letter.receipt_handle)
