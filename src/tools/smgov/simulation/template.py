"""Reading ``template.yaml`` as data: a YAML loader that understands CloudFormation's short tags, and
helpers the tests and the simulator use to route events the way the deployed template does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[4]
TEMPLATE_PATH = REPO_ROOT / "template.yaml"

_SHORT_TAGS = (
    "Ref",
    "Sub",
    "GetAtt",
    "If",
    "Equals",
    "Not",
    "And",
    "Or",
    "Join",
    "Select",
    "Split",
    "FindInMap",
    "ImportValue",
    "GetAZs",
    "Base64",
    "Cidr",
    "Condition",
)


class _CfnLoader(yaml.SafeLoader):
    pass


def _make_constructor(tag: str) -> Any:
    key = tag if tag in ("Ref", "Condition") else f"Fn::{tag}"

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {key: value}

    return construct


for _tag in _SHORT_TAGS:
    _CfnLoader.add_constructor(f"!{_tag}", _make_constructor(_tag))


def load_template(path: Path | str = TEMPLATE_PATH) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load(Path(path).read_text(), Loader=_CfnLoader)
    return loaded


def function_event_sources(template: dict[str, Any], function: str) -> dict[str, dict[str, Any]]:
    """The ``Events`` of a serverless function, by name."""
    events: dict[str, dict[str, Any]] = template["Resources"][function]["Properties"].get("Events", {})
    return events


def logical_id(node: Any) -> str | None:
    """The logical id a ``!Ref X`` / ``!GetAtt X.Arn`` names."""
    if isinstance(node, dict):
        if "Ref" in node:
            return str(node["Ref"])
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else str(target).split(".", 1)[0])
    return None


def queue_consumers(template: dict[str, Any]) -> dict[str, str]:
    """Queue logical id -> the function an ``AWS::Lambda::EventSourceMapping`` invokes with its records."""
    out: dict[str, str] = {}
    for resource in template["Resources"].values():
        if resource.get("Type") == "AWS::Lambda::EventSourceMapping":
            props = resource.get("Properties", {})
            queue, function = logical_id(props.get("EventSourceArn")), logical_id(props.get("FunctionName"))
            if queue and function:
                out[queue] = function
    return out


def eventbridge_patterns(template: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every EventBridge rule pattern routed to a function: ``(function, event or rule name) -> pattern``.

    A SAM ``EventBridgeRule`` event on the function, or an ``AWS::Events::Rule`` whose target is the
    function or a queue an event source mapping reads for it."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    consumers = queue_consumers(template)
    for name, resource in template["Resources"].items():
        if resource.get("Type") == "AWS::Serverless::Function":
            for event_name, source in resource["Properties"].get("Events", {}).items():
                if source.get("Type") == "EventBridgeRule":
                    out[(name, event_name)] = source["Properties"]["Pattern"]
        elif resource.get("Type") == "AWS::Events::Rule":
            for target in resource.get("Properties", {}).get("Targets", []):
                logical = logical_id(target.get("Arn")) or ""
                function = consumers.get(logical, logical)
                if template["Resources"].get(function, {}).get("Type") == "AWS::Serverless::Function":
                    out[(function, name)] = resource["Properties"]["EventPattern"]
    return out
