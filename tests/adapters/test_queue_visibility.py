"""QueueVisibility (adapters/queue.py): one ChangeMessageVisibilityBatch per ten records of a queue, the
entries SQS rejects logged, every error swallowed (the record then comes back after the queue's timeout)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from sagemaker_governance.adapters.queue import QueueVisibility
from sagemaker_governance.domain.redelivery import VisibilityChange

ARN = "arn:aws:sqs:us-east-1:123456789012:q"
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"


class Client:
    def __init__(self, failed: tuple[str, ...] = (), error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.failed = failed
        self.error = error

    def change_message_visibility_batch(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.error is not None:
            raise self.error
        ids = [e["Id"] for e in params["Entries"]]
        return {
            "Successful": [{"Id": i} for i in ids if i not in self.failed],
            "Failed": [{"Id": i, "SenderFault": True, "Code": "ReceiptHandleIsInvalid"} for i in self.failed],
        }


def changes(count: int, arn: str = ARN) -> list[VisibilityChange]:
    return [VisibilityChange(arn, f"rh-{i}", 60, f"m-{i}") for i in range(count)]


def test_the_records_of_a_queue_are_changed_ten_at_a_time() -> None:
    client = Client()
    assert QueueVisibility(lambda: client).change(changes(12)) == 12
    assert [len(c["Entries"]) for c in client.calls] == [10, 2]
    assert {c["QueueUrl"] for c in client.calls} == {URL}
    assert client.calls[1]["Entries"][0] == {"Id": "0", "ReceiptHandle": "rh-10", "VisibilityTimeout": 60}


def test_entries_sqs_rejects_are_logged_and_not_counted(caplog: pytest.LogCaptureFixture) -> None:
    client = Client(failed=("1",))
    assert QueueVisibility(lambda: client).change(changes(2)) == 1
    assert "visibility not changed" in [r.getMessage() for r in caplog.records]


def test_no_answer_is_swallowed_and_no_client_is_built_for_nothing() -> None:
    built: list[Client] = []

    def factory() -> Client:
        built.append(Client(error=EndpointConnectionError(endpoint_url=URL)))
        return built[-1]

    visibility = QueueVisibility(factory)
    assert visibility.change([]) == 0 and built == []
    assert visibility.change(changes(1)) == 0
    assert visibility.change(changes(1, arn="arn:aws:sqs:us-east-1:123456789012")) == 0  # no URL: no call
    assert sum(len(c.calls) for c in built) == 1
