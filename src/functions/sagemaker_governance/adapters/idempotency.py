"""Idempotency records in DynamoDB, through Powertools' Idempotency utility.

Two kinds of record, each its own Powertools persistence layer (key prefix) on the same table:

- a *delivery*: one per state change delivered (``deliver``): a duplicate of a completed delivery gets
  the first result back without running again; a delivery that raised is forgotten (its record is
  deleted) so the retry runs; one left ``INPROGRESS`` by a function that died expires with the
  invocation's remaining time (the Lambda context is registered);
- a *step*: one per side effect of a delivery (``once``: an audit record, a notification). A retry of
  a delivery that crashed half-way repeats only the steps that had not completed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

R = TypeVar("R")
DEFAULT_TTL_SECONDS = 7200  # EventBridge retries for 1 h, Lambda's async queue keeps events 1 h more


def _run_delivery(delivery: dict[str, str], process: Callable[[], Any]) -> Any:
    return process()


def _run_step(step: dict[str, str], effect: Callable[[], None]) -> bool:
    effect()
    return True


class IdempotencyTable:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    )
    # The table is encrypted with the stack's customer key when EncryptWithCustomerKey is true.
    KMS_ACTIONS: ClassVar[frozenset[str]] = frozenset({"kms:Decrypt", "kms:GenerateDataKey"})

    def __init__(self, client: Any, table_name: str, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self._config = IdempotencyConfig(expires_after_seconds=ttl_seconds)
        deliveries = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
        steps = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
        self._deliver = idempotent_function(
            data_keyword_argument="delivery",
            persistence_store=deliveries,
            config=self._config,
            key_prefix="smgov-delivery",
        )(_run_delivery)
        self._step = idempotent_function(
            data_keyword_argument="step", persistence_store=steps, config=self._config, key_prefix="smgov-step"
        )(_run_step)

    def register_context(self, context: Any) -> None:
        """In-progress records expire when this invocation would have timed out."""
        self._config.register_lambda_context(context)

    def deliver(self, key: str, process: Callable[[], R]) -> R:
        result: R = self._deliver(delivery={"key": key}, process=process)
        return result

    def once(self, key: str, effect: Callable[[], None]) -> None:
        self._step(step={"key": key}, effect=effect)
