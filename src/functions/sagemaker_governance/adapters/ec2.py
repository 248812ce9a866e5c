"""EC2's catalogue of instance types: the GPU count of a SageMaker type our table does not know yet.

``DescribeInstanceTypes`` of the type without ``ml.`` (``IncludeUnsupportedInRegion``: SageMaker may offer
a type EC2 does not sell in this region; its hardware is the same). Answers are cached for the life of the
container (a type's hardware never changes), "EC2 does not know it" included; a failure is not cached.

``ec2:DescribeInstanceTypes`` has no resource-level permission: the Service Authorization Reference lists
no resource type for it (only ``*``), so the template grants it on ``Resource: "*"``. It reads public
hardware specifications, nothing of the account.

Never raises: when EC2 cannot answer (throttled, denied, unreachable) the type stays ``unknown`` with the
reason, marked ``lookup_failed``, and the idle guard creates no alarm (do no harm: no threshold from a guessed
GPU count) but says that this is no settled answer: the reconciler asks again at its next run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from sagemaker_governance.adapters.read_failures import ReadFailures, error_code
from sagemaker_governance.business_metrics import BusinessMetricsPort
from sagemaker_governance.domain.instances import (
    Accelerator,
    InstanceFacts,
    ec2_instance_type,
    facts_from_ec2,
    instance_facts,
)
from sagemaker_governance.observability import logger

_UNKNOWN_TYPE_CODES = frozenset({"InvalidInstanceType", "InvalidParameterValue"})


class Ec2InstanceCatalog:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset({"ec2:DescribeInstanceTypes"})
    UNSCOPED_ACTIONS: ClassVar[frozenset[str]] = frozenset({"ec2:DescribeInstanceTypes"})
    LAZY_CLIENT: ClassVar[bool] = True  # the client is built on the first unknown type, not at cold start

    def __init__(self, client_factory: Callable[[], Any], metrics: BusinessMetricsPort | None = None) -> None:
        self._client_factory = client_factory
        self._answers: dict[str, dict[str, Any] | None] = {}
        self._failures = ReadFailures(metrics)

    def facts(self, instance_type: str) -> InstanceFacts:
        """Our table's facts, or EC2's when the table does not know the type."""
        known = instance_facts(instance_type)
        name = ec2_instance_type(instance_type)
        if known.accelerator is not Accelerator.UNKNOWN or name is None:
            return known
        if name not in self._answers:
            try:
                response = self._client_factory().describe_instance_types(
                    InstanceTypes=[name], IncludeUnsupportedInRegion=True
                )
            except ClientError as exc:
                if error_code(exc) not in _UNKNOWN_TYPE_CODES:
                    return self._unanswered(instance_type, self._failures.failed("DescribeInstanceTypes", exc))
                self._answers[name] = None
            except BotoCoreError as exc:  # connection, timeout, parameter the client's model lacks
                return self._unanswered(instance_type, self._failures.failed("DescribeInstanceTypes", exc))
            else:
                items = [i for i in response.get("InstanceTypes", []) if i.get("InstanceType") == name]
                self._answers[name] = items[0] if items else None
        return facts_from_ec2(instance_type, self._answers[name])

    @staticmethod
    def _unanswered(instance_type: str, reason: str) -> InstanceFacts:
        logger.warning("instance type not resolved", instance_type=instance_type, error=reason)
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.UNKNOWN,
            note=f"not in our table and EC2 DescribeInstanceTypes could not answer ({reason}); "
            "no alarm rather than a guessed GPU count",
            lookup_failed=True,
        )
