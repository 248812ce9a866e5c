"""Deploying ``template.yaml`` into the offline account, the way CloudFormation and SAM would.

Parameters (defaults plus overrides) and CloudFormation's intrinsic functions are resolved; SNS
topics, SQS queues, SSM parameters and DynamoDB tables are created in moto; every serverless function becomes a
``DeployedFunction``: its handler (imported from the ``Handler`` property), its environment (Globals
merged with its own) and its triggers: EventBridge rule patterns (SAM ``EventBridgeRule`` /
``CloudWatchEvent`` events and ``AWS::Events::Rule`` targets), SNS subscriptions (SAM ``SNS`` events and
``AWS::SNS::Subscription`` with protocol ``lambda``, filter policies included) and ``rate(...)``
schedules. Routing therefore follows the template itself: a wrong content filter is a wrong route.

A queue between a source and a function (an ``AWS::Events::Rule`` target or an ``AWS::SNS::Subscription``
with protocol ``sqs`` whose queue an ``AWS::Lambda::EventSourceMapping`` reads) becomes a route with a
``QueueDelivery``: the function receives SQS batches, a record it fails (an exception, or its id in the
partial batch response) is received again until the queue's ``maxReceiveCount``, then moved to the
redrive target. A failed record is received again when the queue's ``VisibilityTimeout`` has passed, as
SQS makes it visible again, or when the visibility the function gave it while in flight has
(``ChangeMessageVisibility``: ``engine/delivery.py``, ``InFlight``). The simulator delivers one record per invocation (it does not model batching
nor ``MaximumConcurrency``: invocations run one at a time anyway).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from moto.events.models import EventPattern
from moto.sns.utils import FilterPolicyMatcher

PSEUDO = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": None}
_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")


# CreateQueue's default VisibilityTimeout (the SQS API reference, CreateQueue attributes: 30 seconds).
DEFAULT_VISIBILITY_TIMEOUT = 30


class DeploymentError(ValueError):
    """The simulator cannot deploy the template as written."""


@dataclass(frozen=True)
class QueueDelivery:
    """An SQS queue an event source mapping reads for a function."""

    queue_arn: str
    max_receive_count: int | None  # the queue's redrive policy (None: no redrive, retried until expiry)
    dead_letter_arn: str | None
    batch_size: int = 10
    reports_item_failures: bool = False  # FunctionResponseTypes: [ReportBatchItemFailures]
    raw_message_delivery: bool = False  # SNS subscriptions only
    # A failed record is received again when its visibility timeout expires (the queue's VisibilityTimeout,
    # unless the function changed it while the record was in flight: ChangeMessageVisibility)
    visibility_timeout_seconds: int = 30
    queue_url: str = ""  # what SQS (moto) answered CreateQueue: a visibility change is addressed to it


@dataclass
class EventRoute:
    name: str
    pattern: dict[str, Any]
    matcher: EventPattern
    queue: QueueDelivery | None = None

    def matches(self, event: Mapping[str, Any], flat: Mapping[str, Any] | None = None) -> bool:
        """moto's EventBridge pattern engine; ``flat`` (see ``flatten``) saves re-flattening per route."""
        if flat is not None:
            try:
                return bool(self.matcher._does_event_match(dict(flat), self.matcher.get_pattern()))
            except AttributeError:  # pragma: no cover - moto changed its internals: use the public call
                pass
        return bool(self.matcher.matches_event(dict(event)))  # type: ignore[arg-type]


def flatten(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """An event flattened the way moto's matcher does, once for every route (None: not available)."""
    flattener = getattr(EventPattern, "_flatten_dict", None)
    if flattener is None:  # pragma: no cover
        return None
    flat: dict[str, Any] = flattener(json.loads(json.dumps(event)))
    return flat


@dataclass
class SnsRoute:
    topic_arn: str
    filter_policy: dict[str, Any] | None = None
    scope: str | None = None
    queue: QueueDelivery | None = None

    def matches(self, attributes: Mapping[str, Any], message: str) -> bool:
        if not self.filter_policy:
            return True
        return bool(FilterPolicyMatcher(self.filter_policy, self.scope).matches(dict(attributes), message))


@dataclass
class DeployedFunction:
    logical_id: str
    function_name: str
    handler_path: str
    environment: dict[str, str]
    event_routes: list[EventRoute] = field(default_factory=list)
    sns_routes: list[SnsRoute] = field(default_factory=list)
    schedules: list[tuple[str, int]] = field(default_factory=list)  # (name, every N minutes)
    retries: int = 2
    on_failure: str | None = None  # where an event goes after the last failed attempt (None: it is lost)
    _handler: Callable[[Any, Any], Any] | None = None

    @property
    def handler(self) -> Callable[[Any, Any], Any]:
        if self._handler is None:
            module_name, _, attribute = self.handler_path.rpartition(".")
            try:
                self._handler = getattr(importlib.import_module(module_name), attribute)
            except (ImportError, AttributeError) as exc:
                raise DeploymentError(
                    f"{self.logical_id}: cannot import handler {self.handler_path}: {exc}"
                ) from exc
        return self._handler


@dataclass
class Deployment:
    stack_name: str
    parameters: dict[str, str]
    functions: dict[str, DeployedFunction]
    physical: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def topic_arn(self, logical_id: str) -> str | None:
        return self.physical.get(logical_id, {}).get("Ref")

    def environment(self) -> dict[str, str]:
        """The union of the functions' environments (all run in one process here)."""
        merged: dict[str, str] = {}
        for function in self.functions.values():
            for key, value in function.environment.items():
                merged.setdefault(key, value)
        return merged


class Resolver:
    """CloudFormation intrinsic functions over parameters, pseudo parameters and created resources."""

    def __init__(self, template: Mapping[str, Any], parameters: Mapping[str, str], pseudo: Mapping[str, Any]):
        self.template = template
        self.parameters = dict(parameters)
        self.pseudo = {**PSEUDO, **pseudo}
        self.physical: dict[str, dict[str, Any]] = {}
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.resolve(self.template.get("Conditions", {})[name]))
        return self._conditions[name]

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.resolve(item) for item in node) if v is not None]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return self._ref(value)
            if key == "Condition":
                return self.condition(value)
            if key.startswith("Fn::"):
                return self._function(key[4:], value)
        return {k: v for k, v in ((k, self.resolve(v)) for k, v in node.items()) if v is not None}

    def _ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name in self.physical:
            return self.physical[name]["Ref"]
        raise DeploymentError(f"Ref {name}: no such parameter or (created) resource")

    def _get_att(self, resource: str, attribute: str) -> Any:
        attrs = self.physical.get(resource)
        if attrs is None:
            raise DeploymentError(f"GetAtt {resource}.{attribute}: no such (created) resource")
        if attribute not in attrs:
            return f"arn:aws:simulated:::{resource}.{attribute}"
        return attrs[attribute]

    def _function(self, name: str, value: Any) -> Any:
        if name == "GetAtt":
            resource, attribute = value if isinstance(value, list) else value.split(".", 1)
            return self._get_att(resource, attribute)
        if name == "Sub":
            text, variables = (value, {}) if isinstance(value, str) else (value[0], self.resolve(value[1]))
            return re.sub(r"\$\{([^}!]+)\}", lambda m: str(self._sub_var(m.group(1), variables)), text)
        if name == "If":
            condition, yes, no = value
            return self.resolve(yes if self.condition(condition) else no)
        if name == "Equals":
            left, right = (self.resolve(v) for v in value)
            return str(left) == str(right)
        if name == "Not":
            return not self.resolve(value[0])
        if name == "And":
            return all(self.resolve(v) for v in value)
        if name == "Or":
            return any(self.resolve(v) for v in value)
        if name == "Join":
            separator, items = value
            return separator.join(str(v) for v in self.resolve(items))
        if name == "Select":
            index, items = value
            return self.resolve(items)[int(self.resolve(index))]
        if name == "Split":
            separator, text = value
            return str(self.resolve(text)).split(separator)
        if name == "FindInMap":
            table, key, item = (self.resolve(v) for v in value)
            return self.template["Mappings"][table][key][item]
        raise DeploymentError(f"Fn::{name} is not supported by the simulator")

    def _sub_var(self, name: str, variables: Mapping[str, Any]) -> Any:
        if name in variables:
            return variables[name]
        if "." in name:
            resource, attribute = name.split(".", 1)
            return self._get_att(resource, attribute)
        return self._ref(name)


def _as_env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parameter_values(template: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, str]:
    declared = template.get("Parameters", {})
    unknown = set(overrides) - set(declared)
    if unknown:
        raise DeploymentError(f"unknown template parameter(s): {', '.join(sorted(unknown))}")
    values: dict[str, str] = {}
    for name, spec in declared.items():
        value = overrides.get(name, spec.get("Default"))
        if value is None:
            raise DeploymentError(f"parameter {name} has no default: give it in the scenario's parameters")
        value = _as_env_value(value)
        allowed = spec.get("AllowedValues")
        if allowed is not None and value not in [_as_env_value(a) for a in allowed]:
            raise DeploymentError(f"parameter {name}={value!r} is not one of {allowed}")
        values[name] = value
    return values


def deploy(
    template: Mapping[str, Any],
    overrides: Mapping[str, Any],
    *,
    stack_name: str,
    region: str,
    account: str,
    sns: Any,
    sqs: Any,
    ssm: Any,
    dynamodb: Any = None,
    events: Any = None,
) -> Deployment:
    """Create the template's topics, queues and parameters in moto and wire its functions; with
    ``events``, its own event buses and the rules on them that forward to another bus (one audit view)."""
    parameters = parameter_values(template, overrides)
    resolver = Resolver(
        template,
        parameters,
        {"AWS::Region": region, "AWS::AccountId": account, "AWS::StackName": stack_name},
    )
    resources: dict[str, Any] = template.get("Resources", {})
    active = {
        name: res
        for name, res in resources.items()
        if "Condition" not in res or resolver.condition(res["Condition"])
    }
    notes: list[str] = []
    prefix = f"arn:aws:{{}}:{region}:{account}"

    # Physical ids that need no API call first, so later resources can refer to them.
    for name, res in active.items():
        kind = res["Type"]
        if kind == "AWS::Serverless::Function":
            function_name = f"{stack_name}-{name}"
            arn = f"{prefix.format('lambda')}:function:{function_name}"
            resolver.physical[name] = {"Ref": function_name, "Arn": arn}
        elif kind == "AWS::DynamoDB::Table" and dynamodb is not None:
            pass  # created below (its name and ARN come from moto)
        elif kind not in ("AWS::SNS::Topic", "AWS::SQS::Queue"):
            resolver.physical[name] = {"Ref": f"{stack_name}-{name}", "Arn": f"arn:aws:simulated:::{name}"}
        for event_name in (
            res.get("Properties", {}).get("Events", {}) if kind == "AWS::Serverless::Function" else ()
        ):
            rule = f"{stack_name}-{name}{event_name}"
            resolver.physical[f"{name}{event_name}"] = {
                "Ref": rule,
                "Arn": f"{prefix.format('events')}:rule/{rule}",
            }

    _create_resources(active, resolver, stack_name=stack_name, prefix=prefix, sns=sns, sqs=sqs, ssm=ssm)
    if dynamodb is not None:
        _create_tables(active, resolver, stack_name=stack_name, dynamodb=dynamodb)
    if events is not None:
        _create_buses(active, resolver, stack_name=stack_name, events=events)

    globals_ = template.get("Globals", {}).get("Function", {})
    functions: dict[str, DeployedFunction] = {}
    for name, res in active.items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        props = res.get("Properties", {})
        handler = props.get("Handler", globals_.get("Handler"))
        if not handler:
            raise DeploymentError(f"{name}: no Handler")
        variables = {
            **(globals_.get("Environment", {}).get("Variables", {})),
            **(props.get("Environment", {}).get("Variables", {})),
        }
        environment = {k: _as_env_value(v) for k, v in resolver.resolve(variables).items()}
        retries = int(props.get("EventInvokeConfig", {}).get("MaximumRetryAttempts", 2))
        function = DeployedFunction(
            name,
            resolver.physical[name]["Ref"],
            handler,
            environment,
            retries=retries,
            on_failure=_failure_destination(props, globals_, resolver),
        )
        for event_name, source in props.get("Events", {}).items():
            _wire_event(function, event_name, source, resolver, notes)
        functions[name] = function

    _wire_sources(active, functions, resolver)
    return Deployment(stack_name, parameters, functions, resolver.physical, notes)


def _wire_sources(
    active: Mapping[str, Any], functions: Mapping[str, DeployedFunction], resolver: Resolver
) -> None:
    """Routes declared outside the functions: ``AWS::Events::Rule`` targets and ``AWS::SNS::Subscription``s,
    to a function directly or through a queue an event source mapping reads for it."""
    by_arn = {resolver.physical[f]["Arn"]: f for f in functions}
    consumers = _queue_consumers(active, functions, resolver)
    for name, res in active.items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::Events::Rule" and props.get("State", "ENABLED") == "ENABLED":
            pattern = resolver.resolve(props.get("EventPattern"))
            for target in resolver.resolve(props.get("Targets", [])):
                if target.get("Arn") in by_arn and pattern:
                    functions[by_arn[target["Arn"]]].event_routes.append(_event_route(name, pattern))
                elif target.get("Arn") in consumers and pattern:
                    consumer, queue = consumers[target["Arn"]]
                    consumer.event_routes.append(_event_route(name, pattern, queue))
        elif res["Type"] == "AWS::SNS::Subscription":
            resolved = resolver.resolve(props)
            route = SnsRoute(resolved["TopicArn"], resolved.get("FilterPolicy"), resolved.get("FilterPolicyScope"))
            if resolved.get("Protocol") == "lambda" and resolved.get("Endpoint") in by_arn:
                functions[by_arn[resolved["Endpoint"]]].sns_routes.append(route)
            elif resolved.get("Protocol") == "sqs" and resolved.get("Endpoint") in consumers:
                consumer, queue = consumers[resolved["Endpoint"]]
                raw = str(resolved.get("RawMessageDelivery", "false")).lower() == "true"
                route.queue = replace(queue, raw_message_delivery=raw)
                consumer.sns_routes.append(route)


def _queue_consumers(
    active: Mapping[str, Any], functions: Mapping[str, DeployedFunction], resolver: Resolver
) -> dict[str, tuple[DeployedFunction, QueueDelivery]]:
    """Queue ARN -> the function an ``AWS::Lambda::EventSourceMapping`` invokes with its records."""
    by_name = {f.function_name: f for f in functions.values()}
    by_name.update({resolver.physical[f.logical_id]["Arn"]: f for f in functions.values()})
    redrive: dict[str, Any] = {}
    visibility: dict[str, int] = {}
    urls: dict[str, str] = {}
    for name, res in active.items():
        if res["Type"] == "AWS::SQS::Queue":
            urls[resolver.physical[name]["Arn"]] = resolver.physical[name]["QueueUrl"]
            queue_props = resolver.resolve(res.get("Properties", {})) or {}
            redrive[resolver.physical[name]["Arn"]] = queue_props.get("RedrivePolicy")
            visibility[resolver.physical[name]["Arn"]] = int(
                queue_props.get("VisibilityTimeout", DEFAULT_VISIBILITY_TIMEOUT)
            )
    out: dict[str, tuple[DeployedFunction, QueueDelivery]] = {}
    for res in active.values():
        if res["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        props = resolver.resolve(res.get("Properties", {}))
        function = by_name.get(str(props.get("FunctionName")))
        arn = str(props.get("EventSourceArn", ""))
        if function is None or arn not in redrive or props.get("Enabled") is False:
            continue
        policy = redrive[arn] if isinstance(redrive[arn], Mapping) else {}
        count = policy.get("maxReceiveCount")
        out[arn] = (
            function,
            QueueDelivery(
                queue_arn=arn,
                max_receive_count=int(count) if count is not None else None,
                dead_letter_arn=policy.get("deadLetterTargetArn"),
                batch_size=int(props.get("BatchSize", 10)),
                reports_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                visibility_timeout_seconds=visibility[arn],
                queue_url=urls[arn],
            ),
        )
    return out


def _failure_destination(props: Mapping[str, Any], globals_: Mapping[str, Any], resolver: Resolver) -> str | None:
    """The asynchronous invocation's on-failure destination, else the function's dead-letter queue."""
    for source in (props, globals_):
        on_failure = source.get("EventInvokeConfig", {}).get("DestinationConfig", {}).get("OnFailure", {})
        if on_failure.get("Destination"):
            return str(resolver.resolve(on_failure["Destination"]))
        target = source.get("DeadLetterQueue", {}).get("TargetArn")
        if target:
            return str(resolver.resolve(target))
    return None


def _create_resources(
    active: Mapping[str, Any], resolver: Resolver, *, stack_name: str, prefix: str, sns: Any, sqs: Any, ssm: Any
) -> None:
    """SNS topics and SQS queues first (others refer to them), then SSM parameters."""
    for name, res in active.items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::SNS::Topic":
            topic = resolver.resolve(props.get("TopicName")) or f"{stack_name}-{name}"
            arn = sns.create_topic(Name=topic)["TopicArn"]
            resolver.physical[name] = {"Ref": arn, "TopicArn": arn, "TopicName": topic}
        elif res["Type"] == "AWS::SQS::Queue":
            queue = resolver.resolve(props.get("QueueName")) or f"{stack_name}-{name}"
            url = sqs.create_queue(QueueName=queue)["QueueUrl"]
            arn = f"{prefix.format('sqs')}:{queue}"
            resolver.physical[name] = {"Ref": url, "Arn": arn, "QueueName": queue, "QueueUrl": url}

    for name, res in active.items():
        if res["Type"] == "AWS::SSM::Parameter":
            props = resolver.resolve(res.get("Properties", {}))
            ssm.put_parameter(Name=props["Name"], Value=str(props["Value"]), Type=props.get("Type", "String"))
            resolver.physical[name] = {"Ref": props["Name"]}


def _create_buses(active: Mapping[str, Any], resolver: Resolver, *, stack_name: str, events: Any) -> None:
    """Custom event buses, and the rules on them whose targets are event buses (moto's EventBridge
    delivers to a bus of another account itself; retries and dead-letter queues are not simulated).
    Rules on the default bus stay simulator routes (``_wire_sources``)."""
    for name, res in active.items():
        if res["Type"] == "AWS::Events::EventBus":
            bus = resolver.resolve(res.get("Properties", {}).get("Name")) or f"{stack_name}-{name}"
            arn = events.create_event_bus(Name=bus)["EventBusArn"]
            resolver.physical[name] = {"Ref": bus, "Arn": arn, "Name": bus}
    for name, res in active.items():
        props = res.get("Properties", {})
        if res["Type"] != "AWS::Events::Rule" or "EventBusName" not in props:
            continue
        bus = resolver.resolve(props["EventBusName"])
        targets = [t for t in resolver.resolve(props.get("Targets", [])) if ":event-bus/" in str(t.get("Arn"))]
        if not targets:
            continue
        rule = f"{stack_name}-{name}"
        events.put_rule(
            Name=rule, EventBusName=bus, EventPattern=json.dumps(resolver.resolve(props["EventPattern"]))
        )
        events.put_targets(
            Rule=rule, EventBusName=bus, Targets=[{"Id": t["Id"], "Arn": t["Arn"]} for t in targets]
        )
        resolver.physical[name] = {"Ref": rule, "Arn": f"arn:aws:events:::rule/{bus}/{rule}"}


def _create_tables(active: Mapping[str, Any], resolver: Resolver, *, stack_name: str, dynamodb: Any) -> None:
    """DynamoDB tables (key schema and TTL as declared; billing and encryption are not simulated)."""
    for name, res in active.items():
        if res["Type"] != "AWS::DynamoDB::Table":
            continue
        props = res.get("Properties", {})
        table = resolver.resolve(props.get("TableName")) or f"{stack_name}-{name}"
        described = dynamodb.create_table(
            TableName=table,
            AttributeDefinitions=resolver.resolve(props["AttributeDefinitions"]),
            KeySchema=resolver.resolve(props["KeySchema"]),
            BillingMode="PAY_PER_REQUEST",
        )["TableDescription"]
        ttl = resolver.resolve(props.get("TimeToLiveSpecification"))
        if ttl:
            dynamodb.update_time_to_live(TableName=table, TimeToLiveSpecification=ttl)
        resolver.physical[name] = {"Ref": table, "Arn": described["TableArn"]}


def _event_route(name: str, pattern: dict[str, Any], queue: QueueDelivery | None = None) -> EventRoute:
    return EventRoute(name, pattern, EventPattern.load(json.dumps(pattern)), queue)


def _wire_event(
    function: DeployedFunction, event_name: str, source: Mapping[str, Any], resolver: Resolver, notes: list[str]
) -> None:
    kind = source.get("Type")
    props = resolver.resolve(source.get("Properties", {}))
    if props.get("Enabled") is False or props.get("State") == "DISABLED":
        return
    if kind in ("EventBridgeRule", "CloudWatchEvent"):
        function.event_routes.append(_event_route(event_name, props["Pattern"]))
    elif kind == "SNS":
        function.sns_routes.append(
            SnsRoute(props["Topic"], props.get("FilterPolicy"), props.get("FilterPolicyScope"))
        )
    elif kind in ("Schedule", "ScheduleV2"):
        expression = props.get("Schedule") or props.get("ScheduleExpression", "")
        match = _RATE.match(expression.strip())
        if match is None:
            notes.append(
                f"{function.logical_id}.{event_name}: schedule {expression!r} not simulated (rate() only)"
            )
            return
        amount, unit = int(match.group(1)), match.group(2)
        minutes = amount * {"minute": 1, "hour": 60, "day": 1440}[unit.rstrip("s")]
        function.schedules.append((event_name, minutes))
    else:
        notes.append(f"{function.logical_id}.{event_name}: event source {kind} is not simulated")
