"""Forwarding audit records to the organization's central audit bus (issue 21, README "One audit view").

Each record goes, as one EventBridge event, to this stack's own audit bus (``PutEvents``, same account and
region); the stack's forwarding rule on that bus sends it to the audit account's central bus. EventBridge
retries a rule target's failed deliveries (by default for 24 hours and up to 185 times) and then hands
the event to the target's dead-letter queue (EventBridge user guide, "How EventBridge retries delivering
events"): the member's dead-letter queue. What this adapter adds is the first hop: when ``PutEvents``
itself fails (an error, or a failed entry in a 200 response: PutEvents reports failures per entry, API
reference ``PutEventsResultEntry``), the event is sent to the same dead-letter queue with the error as
message attributes. Only when that fails too is the record left in the function's log group alone (its
local audit record is written before forwarding), logged as an error and counted
(``AuditRecordsNotForwarded``): nothing is lost silently.

The detail is the member's log line (``message`` and ``audit``, so the central Logs Insights queries are
the member's, under ``detail.``) plus ``member``: account, region, stack and version of the sender.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Final

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.audit import AUDIT_MESSAGE, AuditRecord

SOURCE: Final = "sagemaker-governance"
DETAIL_TYPE: Final = "Governance Decision"
# A forwarding failure in the dead-letter queue: this attribute holds the error (README "Dead letters").
FORWARD_ERROR_ATTRIBUTE: Final = "SMGOV_AUDIT_FORWARD_ERROR"
FORWARD_BUS_ATTRIBUTE: Final = "SMGOV_AUDIT_BUS"


class AuditForwarder:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"events:PutEvents", "sqs:SendMessage"})
    # Its clients are built at the first audit record, and only when the stack forwards: not at cold start.
    LAZY_CLIENT: ClassVar[bool] = True

    def __init__(
        self,
        events_client: Any,
        sqs_client: Any,
        *,
        bus_name: str,
        dead_letter_queue_url: str | None,
        member: dict[str, str],
        on_lost: Any = None,
    ) -> None:
        self._events = events_client
        self._sqs = sqs_client
        self._bus = bus_name
        self._dlq = dead_letter_queue_url
        self._member = dict(member)
        self._on_lost = (
            on_lost  # called with (record, error) when a record could not be forwarded nor dead-lettered
        )

    def entry(self, record: AuditRecord) -> dict[str, Any]:
        """The ``PutEvents`` entry of one record."""
        detail = {"message": AUDIT_MESSAGE, "audit": record.as_log(), "member": self._member}
        return {
            "Source": SOURCE,
            "DetailType": DETAIL_TYPE,
            "Detail": json.dumps(detail, sort_keys=True, separators=(",", ":")),
            "EventBusName": self._bus,
            "Time": record.at,
            "Resources": [record.job_arn] if record.job_arn else [],
        }

    def forward(self, record: AuditRecord) -> None:
        entry = self.entry(record)
        error = self._put(entry)
        if error is None:
            return
        if self._dead_letter(entry, error):
            return
        if self._on_lost is not None:
            self._on_lost(record, error)

    def _put(self, entry: dict[str, Any]) -> str | None:
        """None when EventBridge accepted the entry, else why not."""
        try:
            response = self._events.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            return f"PutEvents failed: {exc}"
        if not response.get("FailedEntryCount"):
            return None
        (result,) = response.get("Entries") or [{}]
        return (
            f"PutEvents entry failed: {result.get('ErrorCode', 'Error')}: {result.get('ErrorMessage', '')}".strip()
        )

    def _dead_letter(self, entry: dict[str, Any], error: str) -> bool:
        if not self._dlq:
            return False
        body = {**entry, "Time": entry["Time"].isoformat()}
        try:
            self._sqs.send_message(
                QueueUrl=self._dlq,
                MessageBody=json.dumps(body, sort_keys=True),
                MessageAttributes={
                    FORWARD_ERROR_ATTRIBUTE: {"DataType": "String", "StringValue": error[:1024]},
                    FORWARD_BUS_ATTRIBUTE: {"DataType": "String", "StringValue": self._bus},
                },
            )
        except (ClientError, BotoCoreError):
            return False
        return True
