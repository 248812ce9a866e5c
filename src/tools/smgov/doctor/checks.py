"""The checks: each reads one aspect of the deployed stack and returns findings. Read-only: every call is
a ``Describe``/``Get``/``List`` (or ``iam:SimulatePrincipalPolicy``, which evaluates, never changes).

What each expects comes from this release's ``template.yaml`` (rules and their targets, subscriptions,
policy statements by ``Sid``, the version) and from the composition root's IAM contract.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from smgov.cfn_template import referenced_id, resources_of_type
from smgov.doctor.deployment import Deployment, error_text
from smgov.doctor.findings import Finding, Status
from smgov.doctor.iam import check_function_roles

MAX_JOBS = 500  # jobs in progress read by the drift check (each costs a DescribeTrainingJob and a ListTags)
AWS_ERRORS = (ClientError, BotoCoreError)


@dataclass
class CheckContext:
    template: Mapping[str, Any]  # this release's template.yaml
    now: datetime
    cache: dict[str, Any] = field(default_factory=dict)


Check = Callable[[Deployment, CheckContext], list[Finding]]


def _queue_arn(d: Deployment, logical_id: str) -> str | None:
    url = d.physical(logical_id)
    return d.arn("sqs", url.rstrip("/").rsplit("/", 1)[-1]) if url else None


def _function_arn(d: Deployment, logical_id: str) -> str | None:
    name = d.physical(logical_id)
    return d.arn("lambda", f"function:{name}") if name else None


def _target_arn(d: Deployment, template: Mapping[str, Any], logical_id: str) -> str | None:
    if logical_id in template.get("Parameters", {}):  # a target given as a parameter (the central audit bus)
        return d.parameter(logical_id) or None
    kind = template["Resources"].get(logical_id, {}).get("Type")
    if kind == "AWS::SQS::Queue":
        return _queue_arn(d, logical_id)
    if kind == "AWS::Serverless::Function":
        return _function_arn(d, logical_id)
    return d.physical(logical_id)


def _local_version(template: Mapping[str, Any]) -> str | None:
    app = template.get("Metadata", {}).get("AWS::ServerlessRepo::Application", {})
    return str(app["SemanticVersion"]) if "SemanticVersion" in app else None


# ---- stack ----------------------------------------------------------------------------------------


def check_stack(d: Deployment, ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    healthy = d.status.endswith("_COMPLETE") and "ROLLBACK" not in d.status and "DELETE" not in d.status
    out.append(Finding("stack", d.stack_name, Status.OK if healthy else Status.FAIL, f"status {d.status}"))
    local = _local_version(ctx.template)
    if d.version is None:
        out.append(
            Finding(
                "stack",
                "version",
                Status.FAIL,
                f"outdated: the deployed template has no version (this release is {local})",
            )
        )
    elif local is not None and d.version != local:
        out.append(
            Finding("stack", "version", Status.FAIL, f"outdated: deployed {d.version}, this release {local}")
        )
    else:
        out.append(Finding("stack", "version", Status.OK, f"{d.version}"))
    for logical_id, spec in ctx.template.get("Resources", {}).items():
        if "Condition" in spec or logical_id in d.resources:
            continue
        out.append(
            Finding("stack", logical_id, Status.FAIL, "missing from the stack (outdated or partly deployed)")
        )
    return out


# ---- rules, schedule and queues --------------------------------------------------------------------


def _expected_rules(template: Mapping[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """Rule logical id -> [(target logical id, dead-letter queue logical id)], SAM schedules included."""
    rules: dict[str, list[tuple[str, str | None]]] = {}
    for logical_id, spec in resources_of_type(template, "AWS::Events::Rule").items():
        targets = []
        for target in spec.get("Properties", {}).get("Targets", []):
            dlq = referenced_id(target.get("DeadLetterConfig", {}).get("Arn"))
            targets.append((referenced_id(target.get("Arn")) or "?", dlq))
        rules[logical_id] = targets
    for fn, spec in resources_of_type(template, "AWS::Serverless::Function").items():
        for event, source in spec.get("Properties", {}).get("Events", {}).items():
            if source.get("Type") == "Schedule":
                dlq = referenced_id(source.get("Properties", {}).get("DeadLetterConfig", {}).get("Arn"))
                rules[f"{fn}{event}"] = [(fn, dlq)]
    return rules


def _declared_rule(template: Mapping[str, Any], logical_id: str) -> tuple[Any, dict[str, Mapping[str, Any]]]:
    """The EventPattern a rule of the template declares (None: a SAM schedule) and each target's declared
    settings by the target's logical id, as ``_expected_rules`` names it."""
    spec = template.get("Resources", {}).get(logical_id, {})
    if spec.get("Type") == "AWS::Events::Rule":
        props = spec.get("Properties", {})
        targets = {referenced_id(t.get("Arn")) or "?": t for t in props.get("Targets", [])}
        return props.get("EventPattern"), targets
    for fn, function in resources_of_type(template, "AWS::Serverless::Function").items():
        for event, source in function.get("Properties", {}).get("Events", {}).items():
            if f"{fn}{event}" == logical_id:
                return None, {fn: source.get("Properties", {})}
    return None, {}


def _canonical(value: Any) -> str:
    """An event pattern as JSON in one spelling (keys and list members sorted: their order matches nothing)."""

    def sort(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {k: sort(v) for k, v in node.items()}
        if isinstance(node, list):
            return sorted((sort(v) for v in node), key=lambda v: json.dumps(v, sort_keys=True))
        return node

    return json.dumps(sort(value), sort_keys=True)


def _rule_problems(
    d: Deployment, ctx: CheckContext, logical_id: str, rule: Mapping[str, Any], deployed: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[str]]:
    """What a deployed rule and its targets do otherwise than the template declares: problems and warnings; and
    notes naming what was not checked (a declared value the doctor cannot resolve: ``UNRESOLVED``)."""
    state = rule.get("State")
    problems = [] if state == "ENABLED" else [f"state {state}"]
    warnings: list[str] = []
    notes: list[str] = []
    pattern, declared_targets = _declared_rule(ctx.template, logical_id)
    if pattern is not None and _holds_intrinsic(pattern):
        notes.append(f"EventPattern {NOT_CHECKED}")
    elif pattern is not None:
        try:
            deployed_pattern = json.loads(str(rule.get("EventPattern") or "null"))
        except ValueError:
            deployed_pattern = None
        if _canonical(deployed_pattern) != _canonical(pattern):
            problems.append(
                f"EventPattern differs from the template's (deployed {str(rule.get('EventPattern'))[:300]}): the "
                "events it no longer matches are dropped, in silence; update the stack to put it back"
            )
    by_arn = {t.get("Arn"): t for t in deployed}
    for target, dlq in _expected_rules(ctx.template)[logical_id]:
        arn = _target_arn(d, ctx.template, target)
        if arn not in by_arn:
            problems.append(f"does not target {target} ({arn})")
            continue
        settings, declared = by_arn[arn], declared_targets.get(target, {})
        dlq_arn = _queue_arn(d, dlq) if dlq else None
        if dlq_arn and settings.get("DeadLetterConfig", {}).get("Arn") != dlq_arn:
            problems.append(f"delivery failures to {target} do not go to {dlq}")
        for key in ("Input", "InputPath", "InputTransformer"):
            if _holds_intrinsic(declared.get(key)):
                notes.append(f"the {key} of its target {target} {NOT_CHECKED}")
            elif settings.get(key) != declared.get(key):
                problems.append(
                    f"its target {target} has {key} {json.dumps(settings.get(key))[:200]}, the template's "
                    f"{json.dumps(declared.get(key))[:200]}: {target} receives another body than the event its "
                    "function reads; update the stack to put it back"
                )
        warnings += _retry_policy_warnings(d, ctx.template, target, declared.get("RetryPolicy"), settings, notes)
    return problems, warnings, notes


def _retry_policy_warnings(
    d: Deployment,
    template: Mapping[str, Any],
    target: str,
    declared: Any,
    settings: Mapping[str, Any],
    notes: list[str],
) -> list[str]:
    """A warning when the target's deployed RetryPolicy differs from the one ``declared``, in each setting the
    template resolves to a value; one it does not (an intrinsic) is not checked and added to ``notes``."""
    if _intrinsic(declared):
        notes.append(f"the RetryPolicy of its target {target} {NOT_CHECKED}")
        return []
    want = {k: _declared(d, template, v) for k, v in (declared or {}).items()}
    notes += [
        f"the RetryPolicy.{k} of its target {target} {NOT_CHECKED}" for k, v in want.items() if v is UNRESOLVED
    ]
    want = {k: v for k, v in want.items() if v is not UNRESOLVED}
    have = settings.get("RetryPolicy") or {}
    if not want or all(_same_number(have.get(k), v) for k, v in want.items()):
        return []
    return [
        f"the RetryPolicy of its target {target} is {have or 'EventBridge default'}, the template's {want}: "
        "events it cannot deliver are retried otherwise before they go to the dead-letter queue; "
        "update the stack to put it back"
    ]


def check_rules(d: Deployment, ctx: CheckContext) -> list[Finding]:
    events = d.client("events")
    out: list[Finding] = []
    for logical_id in _expected_rules(ctx.template):
        name = d.physical(logical_id)
        spec = ctx.template.get("Resources", {}).get(logical_id, {})
        if name is None and "Condition" in spec:  # e.g. the audit forwarder without CentralAuditBusArn
            continue
        if name is None:
            out.append(Finding("rules", logical_id, Status.FAIL, "no such rule in the stack"))
            continue
        # A rule on a bus of the stack (the audit forwarder) is named as <bus>|<rule> by CloudFormation.
        bus_ref = referenced_id(spec.get("Properties", {}).get("EventBusName"))
        on_bus = {"EventBusName": d.physical(bus_ref) or ""} if bus_ref else {}
        rule_name = name.split("|")[-1]
        try:
            rule = events.describe_rule(Name=rule_name, **on_bus)
            deployed = events.list_targets_by_rule(Rule=rule_name, **on_bus).get("Targets", [])
        except AWS_ERRORS as exc:
            out.append(
                Finding("rules", logical_id, Status.UNKNOWN, f"could not read rule {name}: {error_text(exc)}")
            )
            continue
        problems, warnings, notes = _rule_problems(d, ctx, logical_id, rule, deployed)
        out.append(_graded("rules", logical_id, problems, warnings, f"{name} enabled", notes))
    return out


# A declared value the doctor cannot know offline: any intrinsic but a Ref to a Parameter (!If, !Sub, !FindInMap,
# a Ref to AWS::NoValue or to a resource). It is not checked, and the finding says so: never a difference.
UNRESOLVED: Any = type("Unresolved", (), {"__repr__": lambda self: "UNRESOLVED"})()
NOT_CHECKED = "not checked: the template declares it through an intrinsic the doctor does not resolve"


def _intrinsic(value: Any) -> bool:
    """Whether ``value`` is one CloudFormation intrinsic (``{"Ref": ...}``, ``{"Fn::If": ...}``, ...)."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return False
    (key,) = value
    return key == "Ref" or str(key).startswith("Fn::")


def _holds_intrinsic(value: Any) -> bool:
    """Whether ``value`` is an intrinsic or holds one anywhere (an event pattern, a target's input)."""
    if _intrinsic(value):
        return True
    if isinstance(value, Mapping):
        return any(_holds_intrinsic(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_intrinsic(v) for v in value)
    return False


def _declared(d: Deployment, template: Mapping[str, Any], value: Any) -> Any:
    """A template property as deployed: a ``!Ref`` to a Parameter is the stack's value of it (its default when
    the stack does not list it); a literal is itself; any other intrinsic, or a literal holding one, is
    ``UNRESOLVED`` (not known here: the caller leaves it unchecked)."""
    if _intrinsic(value):
        name = value.get("Ref")
        parameter = template.get("Parameters", {}).get(name) if isinstance(name, str) else None
        if parameter is None:
            return UNRESOLVED
        return d.parameter(str(name)) or parameter.get("Default")
    return UNRESOLVED if _holds_intrinsic(value) else value


def _same_number(deployed: Any, declared: Any) -> bool:
    try:
        return int(deployed) == int(declared)
    except (TypeError, ValueError):
        return False


def _graded(
    check: str, subject: str, problems: list[str], warnings: list[str], ok_detail: str, notes: Iterable[str] = ()
) -> Finding:
    """FAIL naming every problem (and warning), else WARN naming every warning, else OK with ``ok_detail``; the
    ``notes`` (what was not checked) follow in every case."""
    if problems:
        return Finding(check, subject, Status.FAIL, "; ".join([*problems, *warnings, *notes]))
    if warnings:
        return Finding(check, subject, Status.WARN, "; ".join([*warnings, *notes]))
    return Finding(check, subject, Status.OK, "; ".join([ok_detail, *notes]))


def _mapping_problems(d: Deployment, props: Mapping[str, Any], mapping: Mapping[str, Any]) -> list[str]:
    queue, function = referenced_id(props.get("EventSourceArn")), referenced_id(props.get("FunctionName"))
    problems = []
    if mapping.get("State") != "Enabled":
        problems.append(f"state {mapping.get('State')} (the function does not read {queue})")
    if queue and mapping.get("EventSourceArn") != _queue_arn(d, queue):
        problems.append(f"reads {mapping.get('EventSourceArn')}, not {queue}")
    name = d.physical(function) if function else None
    if name and not str(mapping.get("FunctionArn", "")).endswith(f":function:{name}"):
        problems.append(f"invokes {mapping.get('FunctionArn')}, not {function}")
    # Without ReportBatchItemFailures Lambda ignores the handlers' batchItemFailures: a batch with one failed
    # record counts as processed and SQS deletes the failed record (never retried, never dead-lettered)
    for kind in props.get("FunctionResponseTypes", []):
        if kind not in (mapping.get("FunctionResponseTypes") or []):
            problems.append(
                f"FunctionResponseTypes lacks {kind}: a record the function fails in a batch that partly "
                f"succeeds is deleted from {queue}, never retried; update the stack to set it back"
            )
    return problems


def _mapping_warnings(
    d: Deployment, template: Mapping[str, Any], props: Mapping[str, Any], mapping: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """Batching and concurrency changed outside the stack: records are still processed and retried. And notes
    naming the settings not checked (declared through an intrinsic the doctor does not resolve)."""
    warnings: list[str] = []
    scaling = props.get("ScalingConfig", {})
    declared = {
        "BatchSize": _declared(d, template, props.get("BatchSize")),
        "MaximumBatchingWindowInSeconds": _declared(d, template, props.get("MaximumBatchingWindowInSeconds", 0)),
        "ScalingConfig.MaximumConcurrency": (
            UNRESOLVED if _intrinsic(scaling) else _declared(d, template, scaling.get("MaximumConcurrency"))
        ),
    }
    notes = [f"{key} {NOT_CHECKED}" for key, value in declared.items() if value is UNRESOLVED]
    declared_batch = declared["BatchSize"]
    if declared_batch not in (None, UNRESOLVED) and not _same_number(mapping.get("BatchSize"), declared_batch):
        warnings.append(f"BatchSize {mapping.get('BatchSize')}, the template's {declared_batch}")
    declared_window = declared["MaximumBatchingWindowInSeconds"]
    deployed_window = mapping.get("MaximumBatchingWindowInSeconds") or 0
    if declared_window is not UNRESOLVED and not _same_number(deployed_window, declared_window):
        warnings.append(
            f"MaximumBatchingWindowInSeconds {mapping.get('MaximumBatchingWindowInSeconds')}, the template's "
            f"{declared_window} (records wait that long before the function sees them)"
        )
    declared_cap = declared["ScalingConfig.MaximumConcurrency"]
    deployed_cap = (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
    if declared_cap not in (None, UNRESOLVED) and not _same_number(deployed_cap, declared_cap):
        warnings.append(
            f"ScalingConfig.MaximumConcurrency {deployed_cap}, the template's {declared_cap} "
            "(JobEventsConcurrency: the request rate a burst of jobs puts on SageMaker and CloudWatch)"
        )
    if warnings:
        warnings[-1] += ": changed outside the stack; update the stack to restore it"
    return warnings, notes


def check_queue_mappings(d: Deployment, ctx: CheckContext) -> list[Finding]:
    lam = d.client("lambda")
    out: list[Finding] = []
    for logical_id, spec in resources_of_type(ctx.template, "AWS::Lambda::EventSourceMapping").items():
        uuid = d.physical(logical_id)
        props = spec.get("Properties", {})
        queue, function = referenced_id(props.get("EventSourceArn")), referenced_id(props.get("FunctionName"))
        if uuid is None:
            out.append(Finding("queues", logical_id, Status.FAIL, "no such event source mapping in the stack"))
            continue
        try:
            mapping = lam.get_event_source_mapping(UUID=uuid)
        except AWS_ERRORS as exc:
            out.append(
                Finding("queues", logical_id, Status.UNKNOWN, f"could not read mapping {uuid}: {error_text(exc)}")
            )
            continue
        problems = _mapping_problems(d, props, mapping)
        warnings, notes = _mapping_warnings(d, ctx.template, props, mapping)
        out.append(_graded("queues", logical_id, problems, warnings, f"{queue} -> {function}", notes))
    return out


# ---- functions: can they run ----------------------------------------------------------------------

QUEUE_AGE_WINDOW = timedelta(minutes=15)
# A record the function takes waits seconds; one older than this has been received and not deleted (the
# function failed, timed out or was throttled), or was never received. Each of the stack's source queues
# dead-letters a record after maxReceiveCount receives of VisibilityTimeout (30 minutes) each.
QUEUE_AGE_WARN_SECONDS = 900


def _source_queues(template: Mapping[str, Any]) -> dict[str, str]:
    """Function logical id -> the queue its event source mapping reads (template.yaml)."""
    out = {}
    for spec in resources_of_type(template, "AWS::Lambda::EventSourceMapping").values():
        props = spec.get("Properties", {})
        function, queue = referenced_id(props.get("FunctionName")), referenced_id(props.get("EventSourceArn"))
        if function and queue:
            out[function] = queue
    return out


def _function_problems(lam: Any, name: str, queue: str | None) -> tuple[list[str], list[str]]:
    """Why the function cannot run (``GetFunctionConcurrency``, ``GetFunctionConfiguration``), and warnings."""
    problems, warnings = [], []
    waits = f"records wait in {queue}, then go to the dead-letter queue" if queue else "its invocations fail"
    reserved = lam.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
    if reserved == 0:
        problems.append(
            f"reserved concurrency 0 (the console's Throttle): it never runs and {waits}; remove the "
            "function's reserved concurrency (Lambda console: Concurrency, or DeleteFunctionConcurrency)"
        )
    configuration = lam.get_function_configuration(FunctionName=name)
    state, update = configuration.get("State"), configuration.get("LastUpdateStatus")
    reason = configuration.get("StateReason") or configuration.get("StateReasonCode") or ""
    if state == "Failed":
        problems.append(f"state Failed {reason}".rstrip() + f": it does not run and {waits}; update the stack")
    elif state is not None and state != "Active":  # Pending, or Inactive (reactivated by its next invocation)
        warnings.append(f"state {state} {reason}".rstrip() + ": its next invocations may fail until it is Active")
    if update == "Failed":
        reason = configuration.get("LastUpdateStatusReason") or ""
        problems.append(f"last update Failed {reason}".rstrip() + "; update the stack again")
    elif update is not None and update != "Successful":
        warnings.append(f"last update {update} (a deployment in progress: check again when it ends)")
    return problems, warnings


def _queue_ages(d: Deployment, ctx: CheckContext, queues: Iterable[str]) -> dict[str, float] | None:
    """The oldest message's age (seconds, the maximum of the last 15 minutes) per source queue, from SQS's
    ``ApproximateAgeOfOldestMessage`` metric; a queue without datapoints is left out; None: not read."""
    names = {f"q{i}": queue for i, queue in enumerate(sorted(queues))}
    queries = []
    for query_id, queue in names.items():
        url = d.physical(queue)
        if url is None:
            continue
        dimension = {"Name": "QueueName", "Value": url.rstrip("/").rsplit("/", 1)[-1]}
        metric = {"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage", "Dimensions": [dimension]}
        queries.append({"Id": query_id, "MetricStat": {"Metric": metric, "Period": 300, "Stat": "Maximum"}})
    if not queries:
        return {}
    try:
        answer = d.client("cloudwatch").get_metric_data(
            MetricDataQueries=queries, StartTime=ctx.now - QUEUE_AGE_WINDOW, EndTime=ctx.now
        )
    except AWS_ERRORS:
        return None
    return {
        names[result["Id"]]: max(result["Values"])
        for result in answer.get("MetricDataResults", [])
        if result.get("Id") in names and result.get("Values")
    }


def check_functions(d: Deployment, ctx: CheckContext) -> list[Finding]:
    lam = d.client("lambda")
    sources = _source_queues(ctx.template)
    ages = _queue_ages(d, ctx, sources.values())
    out: list[Finding] = []
    if ages is None:
        detail = "could not read the source queues' ApproximateAgeOfOldestMessage (cloudwatch:GetMetricData)"
        out.append(Finding("functions", "source queues", Status.UNKNOWN, detail))
    for logical_id in resources_of_type(ctx.template, "AWS::Serverless::Function"):
        name = d.physical(logical_id)
        if name is None:  # missing: the stack check says so (or its condition is off)
            continue
        queue = sources.get(logical_id)
        try:
            problems, warnings = _function_problems(lam, name, queue)
        except AWS_ERRORS as exc:
            detail = f"could not read the function {name}: {error_text(exc)}"
            out.append(Finding("functions", logical_id, Status.UNKNOWN, detail))
            continue
        age = (ages or {}).get(queue or "")
        if age is not None and age > QUEUE_AGE_WARN_SECONDS:
            warnings.append(
                f"the oldest message in {queue} is {age / 60:.0f} minutes old: the function is not keeping up, "
                "failing or throttled (see its log and Throttles metric)"
            )
        out.append(_graded("functions", logical_id, problems, warnings, f"{name} can run"))
    return out


# ---- topics: subscriptions and policies ------------------------------------------------------------


def _delivery_problems(
    d: Deployment, queue: str, declared: Mapping[str, Any], attributes: Mapping[str, Any]
) -> list[str]:
    """What a subscription to one of the stack's queues does otherwise than the template declares
    (``GetSubscriptionAttributes``): a filter policy, raw delivery, its redrive policy."""
    problems = []
    filter_policy = attributes.get("FilterPolicy")
    if filter_policy and "FilterPolicy" not in declared:
        problems.append(
            f"a FilterPolicy ({str(filter_policy)[:200]}): SNS silently drops every message it does not match "
            f"(nothing reaches {queue} or any dead-letter queue); remove it or update the stack"
        )
    raw = str(attributes.get("RawMessageDelivery", "false")).lower() == "true"
    if raw != (str(declared.get("RawMessageDelivery", "false")).lower() == "true"):
        body = "the bare message, not the SNS envelope" if raw else "the SNS envelope, not the bare message"
        problems.append(
            f"RawMessageDelivery {str(raw).lower()}: {queue} receives {body} its function reads, which it "
            "rejects (every message dead-lettered after maxReceiveCount); set it back (update the stack)"
        )
    dlq = referenced_id((declared.get("RedrivePolicy") or {}).get("deadLetterTargetArn"))
    if dlq:
        try:
            target = json.loads(str(attributes.get("RedrivePolicy") or "{}")).get("deadLetterTargetArn")
        except (ValueError, AttributeError):
            target = None
        if target != _queue_arn(d, dlq):
            problems.append(
                f"messages SNS cannot deliver to {queue} go to {target or 'no dead-letter queue (dropped)'}, "
                f"not {dlq}; set the subscription's RedrivePolicy back (update the stack)"
            )
    return problems


def check_subscriptions(d: Deployment, ctx: CheckContext) -> list[Finding]:
    sns = d.client("sns")
    out: list[Finding] = []
    expected_sqs: dict[str, dict[str, Mapping[str, Any]]] = {}  # topic -> queue -> the subscription's properties
    for spec in resources_of_type(ctx.template, "AWS::SNS::Subscription").values():
        props = spec.get("Properties", {})
        topic, endpoint = referenced_id(props.get("TopicArn")), referenced_id(props.get("Endpoint"))
        if props.get("Protocol") == "sqs" and topic and endpoint:
            expected_sqs.setdefault(topic, {})[endpoint] = props
    for topic in resources_of_type(ctx.template, "AWS::SNS::Topic"):
        arn = d.physical(topic)
        if arn is None:
            out.append(Finding("subscriptions", topic, Status.FAIL, "no such topic in the stack"))
            continue
        try:
            subs = [
                s
                for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn)
                for s in page.get("Subscriptions", [])
            ]
        except AWS_ERRORS as exc:
            out.append(
                Finding("subscriptions", topic, Status.UNKNOWN, f"could not list subscriptions: {error_text(exc)}")
            )
            continue
        for sub in subs:
            if sub.get("SubscriptionArn") == "PendingConfirmation":
                out.append(
                    Finding(
                        "subscriptions",
                        f"{topic} {sub.get('Protocol')}:{sub.get('Endpoint')}",
                        Status.FAIL,
                        "pending confirmation: nothing is delivered until the recipient confirms",
                    )
                )
        confirmed_sqs = {
            s.get("Endpoint"): str(s.get("SubscriptionArn"))
            for s in subs
            if s.get("Protocol") == "sqs" and s.get("SubscriptionArn") != "PendingConfirmation"
        }
        for queue, props in sorted(expected_sqs.get(topic, {}).items()):
            subscription = confirmed_sqs.get(_queue_arn(d, queue))
            if subscription is None:
                out.append(Finding("subscriptions", topic, Status.FAIL, f"no confirmed subscription of {queue}"))
                continue
            try:
                attributes = sns.get_subscription_attributes(SubscriptionArn=subscription).get("Attributes", {})
            except AWS_ERRORS as exc:
                detail = f"could not read the subscription of {queue}: {error_text(exc)}"
                out.append(Finding("subscriptions", topic, Status.UNKNOWN, detail))
                continue
            problems = _delivery_problems(d, queue, props, attributes)
            out.append(Finding.from_problems("subscriptions", topic, problems, f"delivers to {queue}"))
        if not subs:
            out.append(
                Finding("subscriptions", topic, Status.WARN, "no subscriptions: nobody receives what it publishes")
            )
    return out


def _actions(statement: Mapping[str, Any]) -> frozenset[str]:
    action = statement.get("Action", [])
    return frozenset([action] if isinstance(action, str) else action)


def _signatures(statements: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, frozenset[str]]]:
    return {str(s.get("Sid")): (str(s.get("Effect")), _actions(s)) for s in statements if s.get("Sid")}


def _compare_policy(
    check: str, subject: str, expected: Iterable[Mapping[str, Any]], deployed_json: str | None
) -> Finding:
    if not deployed_json:
        return Finding(check, subject, Status.FAIL, "no policy")
    try:
        deployed = json.loads(deployed_json).get("Statement", [])
    except ValueError as exc:
        return Finding(check, subject, Status.FAIL, f"unreadable policy: {exc}")
    want, have = _signatures(expected), _signatures(deployed if isinstance(deployed, list) else [deployed])
    problems = []
    for sid, (effect, actions) in sorted(want.items()):
        if sid not in have:
            problems.append(f"statement {sid} missing")
        elif have[sid] != (effect, actions):
            problems.append(f"statement {sid} differs ({have[sid][0]} {sorted(have[sid][1])})")
    return Finding.from_problems(check, subject, problems, f"{len(want)} statement(s) in place")


def check_policies(d: Deployment, ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    sns = d.client("sns")
    key_logical = next(iter(resources_of_type(ctx.template, "AWS::KMS::Key")), None)
    key_id = d.physical(key_logical) if key_logical else None
    for spec in resources_of_type(ctx.template, "AWS::SNS::TopicPolicy").values():
        props = spec.get("Properties", {})
        for topic in [referenced_id(t) for t in props.get("Topics", [])]:
            arn = d.physical(topic) if topic else None
            if arn is None:
                out.append(Finding("policies", f"{topic}", Status.FAIL, "no such topic in the stack"))
                continue
            try:
                attributes = sns.get_topic_attributes(TopicArn=arn).get("Attributes", {})
            except AWS_ERRORS as exc:
                out.append(
                    Finding("policies", f"{topic}", Status.UNKNOWN, f"could not read the topic: {error_text(exc)}")
                )
                continue
            out.append(
                _compare_policy(
                    "policies", f"{topic} policy", props["PolicyDocument"]["Statement"], attributes.get("Policy")
                )
            )
            if key_id and not str(attributes.get("KmsMasterKeyId", "")).endswith(key_id):
                out.append(
                    Finding(
                        "policies",
                        f"{topic} encryption",
                        Status.FAIL,
                        f"not encrypted with the stack's key ({attributes.get('KmsMasterKeyId')})",
                    )
                )
    if key_logical and key_id is None and d.parameter("EncryptWithCustomerKey", "true") == "true":
        out.append(
            Finding(
                "policies", key_logical, Status.FAIL, "EncryptWithCustomerKey is true but the stack has no key"
            )
        )
    if key_logical and key_id:
        kms = d.client("kms")
        try:
            state = kms.describe_key(KeyId=key_id)["KeyMetadata"].get("KeyState")
            policy = kms.get_key_policy(KeyId=key_id, PolicyName="default").get("Policy")
        except AWS_ERRORS as exc:
            out.append(
                Finding("policies", key_logical, Status.UNKNOWN, f"could not read the key: {error_text(exc)}")
            )
            return out
        if state != "Enabled":
            out.append(
                Finding(
                    "policies",
                    key_logical,
                    Status.FAIL,
                    f"key state {state}: encrypted topics and log groups fail",
                )
            )
        statements = ctx.template["Resources"][key_logical]["Properties"]["KeyPolicy"]["Statement"]
        out.append(_compare_policy("policies", f"{key_logical} key policy", statements, policy))
    return out


# ---- IAM -------------------------------------------------------------------------------------------


def check_iam(d: Deployment, ctx: CheckContext) -> list[Finding]:
    customer_key = d.parameter("EncryptWithCustomerKey", "true") == "true"
    return check_function_roles(d, ctx.template, customer_key=customer_key)


# ---- operations: reconciler, dead letters ---------------------------------------------------------


def _log_events(d: Deployment, group: str, since: datetime, pattern: str) -> Iterator[dict[str, Any]]:
    """Every event of ``group`` since ``since`` that matches ``pattern`` (every page; raises AWS errors)."""
    pages = (
        d.client("logs")
        .get_paginator("filter_log_events")
        .paginate(logGroupName=group, startTime=int(since.timestamp() * 1000), filterPattern=pattern)
    )
    for page in pages:
        yield from page.get("events", [])


def check_reconciler(d: Deployment, ctx: CheckContext) -> list[Finding]:
    group = next(
        (
            d.physical(k)
            for k, v in resources_of_type(ctx.template, "AWS::Logs::LogGroup").items()
            if "Reconciler" in k
        ),
        None,
    )
    if group is None:
        return [Finding("reconciler", "ReconcilerLogGroup", Status.FAIL, "no reconciler log group in the stack")]
    interval = int(d.parameter("ReconcileIntervalMinutes", "10") or 10)
    window = timedelta(minutes=3 * interval)
    since = ctx.now - window
    latest: tuple[int, str] | None = None
    try:
        for event in _log_events(d, group, since, '"reconcile run"'):
            if latest is None or event["timestamp"] >= latest[0]:
                latest = (event["timestamp"], event.get("message", ""))
    except AWS_ERRORS as exc:
        return [Finding("reconciler", group, Status.UNKNOWN, f"could not read its log: {error_text(exc)}")]
    if latest is None:
        return [
            Finding(
                "reconciler",
                group,
                Status.FAIL,
                f"no run in the last {int(window.total_seconds() // 60)} minutes (its schedule is every {interval})",
            )
        ]
    at = datetime.fromtimestamp(latest[0] / 1000, tz=ctx.now.tzinfo).isoformat(timespec="seconds")
    try:
        summary = json.loads(latest[1]).get("reconcile", {})
    except ValueError:
        return [Finding("reconciler", group, Status.WARN, f"last run at {at}; its summary is unreadable")]
    errors = int(summary.get("errors", 0) or 0)
    repairs = summary.get("repairs", {})
    detail = (
        f"last run at {at}: {summary.get('visited', '?')} visited, repairs {repairs or 'none'}, {errors} error(s)"
    )
    if errors:
        return [Finding("reconciler", group, Status.FAIL, detail)]
    if summary.get("stopped_early"):
        return [
            Finding(
                "reconciler",
                group,
                Status.WARN,
                detail + "; stopped early (more than one run to visit everything)",
            )
        ]
    return [Finding("reconciler", group, Status.OK, detail)]


def check_dead_letters(d: Deployment, ctx: CheckContext) -> list[Finding]:
    sqs = d.client("sqs")
    url = d.physical("DeadLetterQueue")
    if url is None:
        return [Finding("dead-letters", "DeadLetterQueue", Status.FAIL, "no dead-letter queue in the stack")]
    try:
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        ).get("Attributes", {})
    except AWS_ERRORS as exc:
        return [
            Finding(
                "dead-letters", "DeadLetterQueue", Status.UNKNOWN, f"could not read the queue: {error_text(exc)}"
            )
        ]
    depth = int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
        attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
    )
    if depth:
        return [
            Finding(
                "dead-letters",
                "DeadLetterQueue",
                Status.FAIL,
                f"{depth} message(s): inspect with `smgov dlq list --stack {d.stack_name}`",
            )
        ]
    return [Finding("dead-letters", "DeadLetterQueue", Status.OK, "empty")]


EVENT_SHAPE_WINDOW = timedelta(hours=24)


def check_event_shape(d: Deployment, ctx: CheckContext) -> list[Finding]:
    """Whether the account's SageMaker events leave out what the service reads (README "After deploy":
    no AWS source documents the whole event). The job-events function logs each such event; a
    section left out costs a re-read of the job, never a decision, so this is a `warn` at most."""
    from sagemaker_governance.domain.job import EVENT_SECTIONS_MISSING

    group = d.physical("JobEventsLogGroup")
    if group is None:
        return [Finding("events", "JobEventsLogGroup", Status.FAIL, "no job-events log group in the stack")]
    level = d.parameter("LogLevel", "INFO").upper()
    if level not in ("DEBUG", "INFO"):  # the function writes these lines at INFO
        return [
            Finding("events", group, Status.UNKNOWN, f"the functions log at {level}: the lines are not written")
        ]
    counts: dict[str, int] = {}
    events = 0
    try:
        for event in _log_events(d, group, ctx.now - EVENT_SHAPE_WINDOW, f'"{EVENT_SECTIONS_MISSING}"'):
            try:
                sections = json.loads(event.get("message", "")).get("sections", [])
            except ValueError:
                continue
            events += 1
            for section in sections:
                counts[section] = counts.get(section, 0) + 1
    except AWS_ERRORS as exc:
        return [Finding("events", group, Status.UNKNOWN, f"could not read its log: {error_text(exc)}")]
    if not events:
        return [
            Finding(
                "events", group, Status.OK, "no event of the last 24 hours left out a section the service reads"
            )
        ]
    left_out = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items()))
    detail = f"{events} event(s) of the last 24 hours left out {left_out}: each such job is read again (DescribeTrainingJob)"
    return [Finding("events", group, Status.WARN, detail)]


# The stack's alarms on what fails quietly by design (README "When the service cannot see"): the
# dead-letter queue's has its own check above.
QUIET_FAILURE_ALARMS = ("EvidenceReadsAlarm", "PolicyRejectedAlarm")


def check_service_alarms(d: Deployment, ctx: CheckContext) -> list[Finding]:
    """The service's own alarms on quiet failures: one in ``ALARM`` is a failure, with what it means."""
    names = {logical: name for logical in QUIET_FAILURE_ALARMS if (name := d.physical(logical))}
    if not names:
        return []  # an older stack: its missing resources are the `stack` check's findings
    try:
        alarms = d.client("cloudwatch").describe_alarms(AlarmNames=sorted(names.values())).get("MetricAlarms", [])
    except AWS_ERRORS as exc:
        return [Finding("alarms", "service alarms", Status.UNKNOWN, f"could not read them: {error_text(exc)}")]
    by_name = {a.get("AlarmName"): a for a in alarms}
    out: list[Finding] = []
    for logical, name in names.items():
        alarm = by_name.get(name)
        if alarm is None:
            out.append(Finding("alarms", logical, Status.FAIL, f"{name} does not exist in CloudWatch"))
        elif alarm.get("StateValue") == "ALARM":
            since = alarm.get("StateTransitionedTimestamp") or alarm.get("StateUpdatedTimestamp")
            meaning = str(alarm.get("AlarmDescription", "")).split(". ", 1)[0]
            out.append(Finding("alarms", logical, Status.FAIL, f"in ALARM since {since}: {meaning}"))
        else:
            out.append(Finding("alarms", logical, Status.OK, str(alarm.get("StateValue"))))
    return out


# ---- the policy document and drift ----------------------------------------------------------------


def _settings(d: Deployment) -> Any:
    from sagemaker_governance.settings import Settings
    from smgov.local_policy import template_environment

    env = template_environment(d.parameters, stack_name=d.stack_name)
    env.setdefault("AWS_REGION", d.region)
    return Settings.from_env(env)


def _policy(d: Deployment, ctx: CheckContext) -> tuple[Any, Finding]:
    """The effective policy (stack parameters + the SSM document, read as the CLI's ``--stack`` reads it:
    ``smgov.local_policy.stack_policy``) and the finding about the document. A rejected document gives no
    policy (drift then says it cannot judge)."""
    if "policy" in ctx.cache:
        cached: tuple[Any, Finding] = ctx.cache["policy"]
        return cached
    from smgov.local_policy import StackPolicyUnreadable, stack_policy

    settings = _settings(d)
    name = settings.policy_parameter_name or d.parameter("PolicyParameterName", "/sagemaker-governance/policy")
    result: tuple[Any, Finding]
    try:
        reading = stack_policy(d.stack_name, settings, d.client("ssm"))
    except StackPolicyUnreadable as exc:
        if exc.rejected:
            detail = (
                "invalid, the functions keep the last good policy: "
                + "; ".join(exc.rejected)
                + " (its history, where a new container finds that policy, could not be read)"
            )
            result = (None, Finding("policy", name, Status.FAIL, detail))
        else:
            result = (None, Finding("policy", name, Status.UNKNOWN, f"could not read it: {exc.__cause__ or exc}"))
    else:
        policy = reading.policy
        if reading.current_version is None:
            result = (policy, Finding("policy", name, Status.OK, "no document: the stack's parameters apply"))
        elif reading.rejected:
            kept = (
                f"version {reading.version} of its history"
                if reading.version is not None
                else "no valid version in its history: the stack's parameters"
            )
            detail = f"invalid, the functions keep the last good policy (a new container: {kept}): " + "; ".join(
                reading.rejected
            )
            result = (None, Finding("policy", name, Status.FAIL, detail))
        else:
            result = (
                policy,
                Finding(
                    "policy",
                    name,
                    Status.OK,
                    f"valid (version {reading.version}, mode {policy.mode.value}, {len(policy.rules)} rule(s))",
                ),
            )
    ctx.cache["policy"] = result
    return result


def effective_policy(d: Deployment, ctx: CheckContext) -> Any:
    """The effective policy the ``policy`` check read (None: the document is invalid or unreadable)."""
    return _policy(d, ctx)[0]


def check_policy_document(d: Deployment, ctx: CheckContext) -> list[Finding]:
    return [*_rejected_parameters(d, ctx), _policy(d, ctx)[1]]


def _rejected_parameters(d: Deployment, ctx: CheckContext) -> list[Finding]:
    """Each part of the base policy the stack's parameters build that fails validation: its functions govern with
    the part's defaults (and log and count it: ``PolicyRejectedAlarm``) until the parameters are corrected."""
    declared = ctx.template.get("Parameters", {})
    out = []
    for fallback in _settings(d).base_policy().fallbacks:
        values = ", ".join(
            f"{name}={d.parameter(name, str(declared.get(name, {}).get('Default', '')))}"
            for name in fallback.parameters
        )
        instead = "left out" if fallback.applied is None else "its defaults govern"
        detail = f"{values}: {'; '.join(fallback.errors)}; rejected by the functions, {instead}"
        out.append(Finding("policy", f"template parameters: {fallback.part}", Status.FAIL, detail))
    return out


def _jobs_in_progress(sagemaker: Any, now: datetime) -> list[str]:
    """The names of the account's training jobs in progress (``ListTrainingJobs``, every page), created within
    the reconciler's horizon: SageMaker pages jobs of every status before it filters by status, so a listing
    by status alone reads every job the account ever ran (domain/reconcile.py, ``IN_PROGRESS_HORIZON``)."""
    from sagemaker_governance.domain.reconcile import IN_PROGRESS_HORIZON

    pages = sagemaker.get_paginator("list_training_jobs").paginate(
        StatusEquals="InProgress", CreationTimeAfter=now - IN_PROGRESS_HORIZON, SortOrder="Descending"
    )
    return [s["TrainingJobName"] for page in pages for s in page.get("TrainingJobSummaries", [])]


def check_drift(d: Deployment, ctx: CheckContext) -> list[Finding]:
    """Alarms versus jobs in Training: a job the guards want watched has its alarms; no alarm outlives its
    job. Only differences older than two reconciler intervals count (the reconciler repairs the rest)."""
    from sagemaker_governance.adapters.sagemaker import SageMakerJobs
    from sagemaker_governance.domain.errors import AdapterError
    from sagemaker_governance.domain.guards.base import AlarmNaming
    from sagemaker_governance.domain.guards.registry import GUARDS
    from sagemaker_governance.service.guard_alarms import GuardAlarms

    policy, _ = _policy(d, ctx)
    if policy is None:
        return [Finding("drift", "alarms", Status.UNKNOWN, "no valid policy to judge which jobs need alarms")]
    settings = _settings(d)
    naming = AlarmNaming(
        prefix=settings.idle_alarm_prefix, managed_by=d.stack_name, alarm_topic_arn=d.physical("AlarmTopic")
    )
    grace = timedelta(minutes=2 * int(d.parameter("ReconcileIntervalMinutes", "10") or 10))
    sagemaker, cloudwatch = d.client("sagemaker"), d.client("cloudwatch")
    try:
        names = _jobs_in_progress(sagemaker, ctx.now)
        alarms = {
            a["AlarmName"]
            for page in cloudwatch.get_paginator("describe_alarms").paginate(
                AlarmNamePrefix=naming.prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
            )
            for kind in ("MetricAlarms", "CompositeAlarms")
            for a in page.get(kind, [])
            if naming.describes_ours(a.get("AlarmDescription"))  # not a stack's whose prefix starts with ours
        }
    except AWS_ERRORS as exc:
        return [Finding("drift", "alarms", Status.UNKNOWN, f"could not list jobs or alarms: {error_text(exc)}")]
    out: list[Finding] = []
    if len(names) > MAX_JOBS:
        out.append(
            Finding(
                "drift", "jobs", Status.WARN, f"{len(names)} jobs in progress: only the first {MAX_JOBS} checked"
            )
        )
    jobs_port = SageMakerJobs(sagemaker)
    unused: Any = None
    guards = [
        # Only its reconciler view is used (which alarms a job should have now): no alarm is written,
        # no policy re-read, nothing audited.
        GuardAlarms(
            g, jobs=jobs_port, alarms=unused, policies=unused, audit=unused, clock=lambda: ctx.now, naming=naming
        )
        for g in GUARDS
    ]
    in_progress = set(names)
    for name in names[:MAX_JOBS]:
        try:
            job = jobs_port.get_job(name)
        except AdapterError as exc:
            out.append(Finding("drift", name, Status.UNKNOWN, f"could not read the job: {exc}"))
            continue
        since = next((t.start_time for t in reversed(job.transitions) if t.status == "Training"), None)
        for guard in guards:
            wanted = set(guard.desired_alarms(job, policy).names)
            missing = wanted - alarms
            if missing and since is not None and ctx.now - since > grace:
                out.append(
                    Finding(
                        "drift",
                        name,
                        Status.FAIL,
                        f"in Training since {since.isoformat(timespec='seconds')} without {guard.guard.rule_id} alarm(s) {sorted(missing)}",
                    )
                )
    for alarm in sorted(alarms):
        job_name = alarm[len(naming.prefix) :].split(".", 1)[0]  # marks start with "." (never in a job name)
        if job_name in in_progress:
            continue
        out.append(
            Finding(
                "drift",
                alarm,
                Status.FAIL,
                f"orphan: its job {job_name} is not in progress (the reconciler deletes it)",
            )
        )
    if not out:
        out.append(
            Finding(
                "drift", "alarms", Status.OK, f"{len(names)} job(s) in progress, {len(alarms)} alarm(s), no drift"
            )
        )
    return out


# How long a job must have trained for its DiskUtilization to say anything, how far back it is read, and
# how many jobs in progress the disk check looks through for one.
DISK_SAMPLE_MINUTES = 10
DISK_WINDOW = timedelta(minutes=30)
DISK_MAX_JOBS = 20


def check_disk_metric(d: Deployment, ctx: CheckContext) -> list[Finding]:
    """Whether SageMaker publishes ``DiskUtilization`` here, and how finely (README "How a stall is judged",
    disk writes): the stall judge reads it before a stop, and neither its presence on every instance type
    nor its resolution is documented. One job in Training is sampled (its first host, the last 30
    minutes). No datapoint is a ``warn``: a save or download that only fills the disk is then protected
    by the window alone. Whole points only is said in the detail: a smaller move is not seen."""
    from sagemaker_governance.adapters.sagemaker import SageMakerJobs
    from sagemaker_governance.domain.errors import AdapterError
    from sagemaker_governance.domain.guards.base import training_started_at
    from sagemaker_governance.domain.stall_judge import DISK, host_names

    sagemaker = d.client("sagemaker")
    window = int(DISK_WINDOW.total_seconds() // 60)
    try:
        names = _jobs_in_progress(sagemaker, ctx.now)
    except AWS_ERRORS as exc:
        return [Finding("disk", DISK, Status.UNKNOWN, f"could not list the jobs in progress: {error_text(exc)}")]
    jobs = SageMakerJobs(sagemaker)
    sampled = None
    unread: list[str] = []
    for name in names[:DISK_MAX_JOBS]:
        try:
            job = jobs.get_job(name)
        except AdapterError as exc:
            unread.append(f"{name} ({exc})")
            continue
        since = training_started_at(job)
        if (
            job.secondary_status == "Training"
            and since
            and ctx.now - since >= timedelta(minutes=DISK_SAMPLE_MINUTES)
        ):
            sampled = job
            break
    if sampled is None and unread:
        return [
            Finding(
                "disk",
                DISK,
                Status.UNKNOWN,
                f"could not describe {len(unread)} of the {min(len(names), DISK_MAX_JOBS)} job(s) in progress "
                f"looked at, so whether one has trained for {DISK_SAMPLE_MINUTES} minutes is unknown: "
                + "; ".join(unread[:3]),
            )
        ]
    if sampled is None:
        looked = f"of the first {DISK_MAX_JOBS} jobs in progress " if len(names) > DISK_MAX_JOBS else ""
        return [
            Finding(
                "disk",
                DISK,
                Status.OK,
                f"no job {looked}has been in Training for {DISK_SAMPLE_MINUTES} minutes: nothing to sample (run "
                "again while one trains)",
            )
        ]
    host = host_names(sampled.name, 1)[0]
    try:
        answer = d.client("cloudwatch").get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "disk",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "/aws/sagemaker/TrainingJobs",
                            "MetricName": DISK,
                            "Dimensions": [{"Name": "Host", "Value": host}],
                        },
                        "Period": 60,
                        "Stat": "Average",
                    },
                }
            ],
            StartTime=ctx.now - DISK_WINDOW,
            EndTime=ctx.now,
        )
    except AWS_ERRORS as exc:
        return [Finding("disk", host, Status.UNKNOWN, f"could not read {DISK}: {error_text(exc)}")]
    results = answer.get("MetricDataResults", [])
    values = [v for r in results for v in r.get("Values", [])]
    failed = sorted({str(r.get("StatusCode")) for r in results if r.get("StatusCode", "Complete") != "Complete"})
    if not values and (failed or not results):  # a read that did not complete says nothing of the metric
        return [
            Finding(
                "disk",
                host,
                Status.UNKNOWN,
                f"{DISK} was not read completely ({', '.join(failed) or 'no result returned'}), with this "
                "command's credentials: run again",
            )
        ]
    if not values:
        return [
            Finding(
                "disk",
                host,
                Status.WARN,
                f"no {DISK} datapoint in the last {window} minutes of a job in Training: the stall judge's disk read "
                "sees nothing here, so a save or download that only fills the disk is protected by the "
                "window alone (its checkpoint objects, log and CPU are still read)",
            )
        ]
    if any(not float(v).is_integer() for v in values):
        grain = f"with fractions of a point (e.g. {next(v for v in values if not float(v).is_integer()):g})"
    elif len(set(values)) > 1:
        grain = (
            "in whole points only: a move shows only when it crosses a whole point, so one under 1 point may "
            "not be seen whatever judge.disk_change_percent says"
        )
    else:
        grain = (
            f"all at {values[0]:g}: the disk did not move, which says nothing of how finely it is published "
            "(run again while a job writes to its disk)"
        )
    return [
        Finding(
            "disk", host, Status.OK, f"{len(values)} {DISK} datapoint(s) in the last {window} minutes, {grain}"
        )
    ]


CHECKS: tuple[Check, ...] = (
    check_stack,
    check_rules,
    check_queue_mappings,
    check_functions,
    check_subscriptions,
    check_policies,
    check_iam,
    check_reconciler,
    check_dead_letters,
    check_service_alarms,
    check_event_shape,
    check_disk_metric,
    check_policy_document,
    check_drift,
)


def run_checks(d: Deployment, ctx: CheckContext, checks: Iterable[Check] = CHECKS) -> list[Finding]:
    """Every check; one that fails unexpectedly is reported as not checked, and the others still run."""
    findings: list[Finding] = []
    for check in checks:
        try:
            findings += check(d, ctx)
        except Exception as exc:  # a bug or an unexpected answer must not hide the other checks' findings
            name = check.__name__.removeprefix("check_").replace("_", "-")
            findings.append(Finding(name, "check", Status.UNKNOWN, f"{type(exc).__name__}: {exc}"))
    return findings
