"""Routing as the deployed template does it: which function an event, a queue or a rule reaches. The
simulator and the tests use these to deliver events the way ``template.yaml`` wires them."""

from __future__ import annotations

from typing import Any

from smgov.cfn_template import referenced_id


def function_event_sources(template: dict[str, Any], function: str) -> dict[str, dict[str, Any]]:
    """The ``Events`` of a serverless function, by name."""
    events: dict[str, dict[str, Any]] = template["Resources"][function]["Properties"].get("Events", {})
    return events


def queue_consumers(template: dict[str, Any]) -> dict[str, str]:
    """Queue logical id -> the function an ``AWS::Lambda::EventSourceMapping`` invokes with its records."""
    out: dict[str, str] = {}
    for resource in template["Resources"].values():
        if resource.get("Type") == "AWS::Lambda::EventSourceMapping":
            props = resource.get("Properties", {})
            queue, function = referenced_id(props.get("EventSourceArn")), referenced_id(props.get("FunctionName"))
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
                logical = referenced_id(target.get("Arn")) or ""
                function = consumers.get(logical, logical)
                if template["Resources"].get(function, {}).get("Type") == "AWS::Serverless::Function":
                    out[(function, name)] = resource["Properties"]["EventPattern"]
    return out
