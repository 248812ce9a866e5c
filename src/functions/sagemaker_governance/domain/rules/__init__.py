"""Compliance rules: one class per rule, joined in the discriminated union ``Rule``.

Adding a rule = one class (with a YAML example in its docstring) + one test file + one union member.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.rules.max_instances import MaxInstanceCount
from sagemaker_governance.domain.rules.max_runtime import MaxRuntime
from sagemaker_governance.domain.rules.required_tags import RequiredTags, TagConstraint
from sagemaker_governance.domain.rules.spot_checkpoint import SpotCheckpoint

Rule = Annotated[
    RequiredTags | AllowedInstanceTypes | MaxInstanceCount | MaxRuntime | SpotCheckpoint,
    Field(discriminator="type"),
]

RULE_CLASSES: tuple[type[RuleBase], ...] = (
    RequiredTags,
    AllowedInstanceTypes,
    MaxInstanceCount,
    MaxRuntime,
    SpotCheckpoint,
)

__all__ = [
    "RULE_CLASSES",
    "AllowedInstanceTypes",
    "EvaluationContext",
    "Finding",
    "MaxInstanceCount",
    "MaxRuntime",
    "RequiredTags",
    "Rule",
    "RuleBase",
    "SpotCheckpoint",
    "TagConstraint",
]
