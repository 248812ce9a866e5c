"""Compliance rules: one class per rule, joined in the discriminated union ``Rule``.

Adding a rule = one class (with a YAML example in its docstring) + one test file + one union member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, get_args

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from sagemaker_governance.domain.rules.base import EvaluationContext, Finding, RuleBase
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.rules.max_instances import MaxInstanceCount
from sagemaker_governance.domain.rules.max_runtime import MaxRuntime
from sagemaker_governance.domain.rules.required_tags import RequiredTags, TagConstraint
from sagemaker_governance.domain.rules.spot_checkpoint import SpotCheckpoint

RULE_CLASSES: tuple[type[RuleBase], ...] = (
    RequiredTags,
    AllowedInstanceTypes,
    MaxInstanceCount,
    MaxRuntime,
    SpotCheckpoint,
)
RULE_TYPES: tuple[str, ...] = tuple(get_args(cls.model_fields["type"].annotation)[0] for cls in RULE_CLASSES)


def _has_type(rule: Any) -> Any:
    """A rule without ``type`` is an override whose ``id`` names no rule of the policy it is merged onto
    (an override changes a rule by its id and takes its type from it): say so, not the union's tag error."""
    if isinstance(rule, Mapping) and "type" not in rule:
        new_rule = f"a new rule needs its type (one of {', '.join(RULE_TYPES)})"
        if "id" not in rule:
            raise PydanticCustomError("rule_type_missing", f"the rule has neither id nor type: {new_rule}")
        raise PydanticCustomError(
            "rule_type_missing",
            "rule id '{id}' is not in the base policy (an override changes an existing rule by its id): "
            + new_rule,
            {"id": str(rule["id"])},
        )
    return rule


Rule = Annotated[
    RequiredTags | AllowedInstanceTypes | MaxInstanceCount | MaxRuntime | SpotCheckpoint,
    Field(discriminator="type"),
    BeforeValidator(_has_type),
]

__all__ = [
    "RULE_CLASSES",
    "RULE_TYPES",
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
