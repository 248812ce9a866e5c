"""The real template.yaml: content filters, failure paths, log groups, parameters, IAM contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from moto.events.models import EventPattern

from sagemaker_governance.composition.contract import FUNCTION_ADAPTERS
from smgov.simulation.template import eventbridge_patterns
from tests.conftest import EVENTS, REPO
from tests.infrastructure.conftest import as_list, functions, policy_statements

SAMPLES = sorted(p.name for p in EVENTS.glob("training-job-*.json"))
# Which samples each rule must receive; every other sample must not reach it.
EXPECTED_ROUTES = {
    ("JobEventsFunction", "JobStartingRule"): {
        "training-job-starting.json",
        "training-job-starting-untagged.json",
        "training-job-starting-heterogeneous.json",
        "training-job-starting-spot-no-checkpoint.json",
        "training-job-starting-instance-preferences.json",
        "training-job-starting-null-members.json",
    },
    ("JobEventsFunction", "JobEndedRule"): {
        "training-job-completed.json",
        *(name for name in SAMPLES if name.startswith("training-job-failed")),  # one per failure class
        "training-job-stopped.json",
        "training-job-stopped-max-wait.json",
    },
    ("JobEventsFunction", "JobInterruptedRule"): {
        "training-job-interrupted-spot.json",
        "training-job-interrupted-spot-null-transitions.json",
    },
    ("JobEventsFunction", "JobPendingSpotRule"): {
        "training-job-pending-spot.json",
        "training-job-pending-spot-field-absent.json",  # no AWS sample shows EnableManagedSpotTraining
    },
    ("JobEventsFunction", "TrainingStartedRule"): {"training-job-training.json"},
}


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    return bool(EventPattern.load(json.dumps(pattern)).matches_event(cast(Any, event)))


def test_every_rule_has_an_expected_route(template: dict[str, Any]) -> None:
    assert set(eventbridge_patterns(template)) == set(EXPECTED_ROUTES)


@pytest.mark.parametrize("sample", SAMPLES)
def test_content_filters_route_each_sample_where_it_belongs(template: dict[str, Any], sample: str) -> None:
    event = json.loads((EVENTS / sample).read_text())
    for route, pattern in eventbridge_patterns(template).items():
        assert matches(pattern, event) == (sample in EXPECTED_ROUTES[route]), (route, sample)


def test_filters_ignore_other_sagemaker_events(template: dict[str, Any]) -> None:
    event = json.loads((EVENTS / "training-job-starting.json").read_text())
    event["detail-type"] = "SageMaker Processing Job State Change"
    assert not any(matches(p, event) for p in eventbridge_patterns(template).values())


def _queue_of(template: dict[str, Any], function: str) -> tuple[str, dict[str, Any]] | None:
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            props = resource["Properties"]
            if props["FunctionName"] == {"Ref": function}:
                return props["EventSourceArn"]["Fn::GetAtt"][0], props
    return None


def test_both_failure_paths_lead_to_the_dead_letter_queue(template: dict[str, Any]) -> None:
    # A delivery that cannot reach its target, and an event the function keeps failing, both end in the
    # dead-letter queue, whichever way the function is invoked (issue 16 item 2).
    dlq = {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    resources = template["Resources"]
    allowed_sources = resources["DeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0][
        "Condition"
    ]["ArnEquals"]["aws:SourceArn"]
    for name, function in functions(template).items():
        props = function["Properties"]
        queued = _queue_of(template, name)
        if queued is None:  # invoked asynchronously: the on-failure destination
            assert props["EventInvokeConfig"]["DestinationConfig"]["OnFailure"] == {
                "Type": "SQS",
                "Destination": dlq,
            }, name
        else:  # through its queue: the queue's redrive policy; nothing asynchronous to configure
            queue, _ = queued
            assert resources[queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == dlq, name
            assert resources[queue]["Properties"]["RedrivePolicy"]["maxReceiveCount"] >= 5, name
            assert "EventInvokeConfig" not in props, name
        for event_name, source in props.get("Events", {}).items():
            if source["Type"] not in ("EventBridgeRule", "Schedule"):
                continue
            assert source["Properties"]["DeadLetterConfig"] == {"Arn": dlq}, event_name
            assert source["Properties"]["RetryPolicy"]["MaximumRetryAttempts"] >= 1
            assert {"Fn::GetAtt": [f"{name}{event_name}", "Arn"]} in allowed_sources, event_name
    rules = {k: v for k, v in resources.items() if v["Type"] == "AWS::Events::Rule"}
    assert rules, "the job-event rules"
    for rule_name, rule in rules.items():
        for target in rule["Properties"]["Targets"]:
            assert target["DeadLetterConfig"] == {"Arn": dlq}, rule_name
            assert target["RetryPolicy"]["MaximumRetryAttempts"] >= 1, rule_name
        allowed = {"Fn::GetAtt": [rule_name, "Arn"]}
        if "Condition" in rule:  # a conditional rule's source is allowed under the same condition
            allowed = {"Fn::If": [rule["Condition"], allowed, {"Ref": "AWS::NoValue"}]}
        assert allowed in allowed_sources, rule_name
    for sub_name, sub in resources.items():
        if sub["Type"] == "AWS::SNS::Subscription" and sub["Properties"]["Protocol"] == "sqs":
            assert sub["Properties"]["RedrivePolicy"] == {"deadLetterTargetArn": dlq}, sub_name


def test_no_reserved_concurrency_and_bounded_queues(template: dict[str, Any]) -> None:
    # Reserving any concurrency must leave 100 unreserved in the account: with a quota of 10 or 50 the
    # stack would not create. Bursts are bounded by the event source mappings instead.
    resources = template["Resources"]
    for name, function in functions(template).items():
        assert "ReservedConcurrentExecutions" not in function["Properties"], name
    assert "ReservedConcurrentExecutions" not in template["Globals"]["Function"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert {m["FunctionName"]["Ref"] for m in mappings} == {"JobEventsFunction", "IdleStopperFunction"}
    minimum = template["Parameters"]["JobEventsConcurrency"]["MinValue"]
    assert minimum >= 2  # Lambda's least MaximumConcurrency (botocore: ScalingConfig.MaximumConcurrency min 2)
    for mapping in mappings:
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "JobEventsConcurrency"}}
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        queue = resources[mapping["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function = resources[mapping["FunctionName"]["Ref"]]["Properties"]
        timeout = function.get("Timeout", template["Globals"]["Function"]["Timeout"])
        # "at least six times the timeout that you configure on your function" (Lambda developer guide)
        assert queue["VisibilityTimeout"] >= 6 * timeout


def test_the_delivery_ledgers_ttl_outlasts_every_copy_of_a_delivery(template: dict[str, Any]) -> None:
    # A ledger item must outlive every copy of its delivery: a record returned with its batch (or a duplicate
    # message returned with its own) is received at most every VisibilityTimeout up to maxReceiveCount times
    # (a failed record's first retries come sooner: domain/redelivery.py; the bound stands), and
    # EventBridge retries delivering a copy to the queue for MaximumEventAgeInSeconds. Expired earlier, the
    # copy is processed again from scratch (a second owner message, an already-done record).
    from sagemaker_governance.adapters.idempotency import DEFAULT_TTL_SECONDS
    from sagemaker_governance.settings import Settings

    resources = template["Resources"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    queues = {m["EventSourceArn"]["Fn::GetAtt"][0] for m in mappings}
    assert queues == {"JobEventsQueue", "AlarmQueue"}
    ttls = {DEFAULT_TTL_SECONDS, Settings.model_fields["idempotency_ttl_seconds"].default}
    for function in functions(template).values():  # a deployed override, if any
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "IDEMPOTENCY_TTL_SECONDS" in variables:
            ttls.add(int(variables["IDEMPOTENCY_TTL_SECONDS"]))
    for name in sorted(queues):
        queue = resources[name]["Properties"]
        receives = queue["RedrivePolicy"]["maxReceiveCount"] * queue["VisibilityTimeout"]
        ages = [
            target["RetryPolicy"]["MaximumEventAgeInSeconds"]
            for rule in resources.values()
            if rule["Type"] == "AWS::Events::Rule"
            for target in rule["Properties"]["Targets"]
            if target["Arn"] == {"Fn::GetAtt": [name, "Arn"]}
        ]
        assert all(ttl >= max(ages, default=0) + receives for ttl in ttls), (name, ttls, receives, ages)
    assert any(  # the job-events rules do retry into their queue: the window is counted
        target["Arn"] == {"Fn::GetAtt": ["JobEventsQueue", "Arn"]}
        for rule in resources.values()
        if rule["Type"] == "AWS::Events::Rule"
        for target in rule["Properties"]["Targets"]
    )


def ledger_holds() -> dict[str, float]:
    """Every fixed hold a claim in the delivery ledger is made with: each module-level ``*_HOLD_SECONDS``
    constant of the service's package, by name (a delivery's own claim is held for the invocation's remaining
    time instead: at most its function's Timeout)."""
    import ast

    import sagemaker_governance

    holds: dict[str, float] = {}
    for path in sorted(Path(sagemaker_governance.__file__).parent.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id.endswith("HOLD_SECONDS"):
                    holds[target.id] = float(ast.literal_eval(value))
    return holds


def test_every_ledger_hold_is_over_before_a_record_that_left_it_comes_back(template: dict[str, Any]) -> None:
    # An attempt that raised may leave a claim held in the ledger: its delivery's own (its release failed,
    # or its claim raised with its outcome unknown), held for the invocation's remaining time, at most the
    # function's Timeout; or a once-guard's within it (a ledger notice's, NOTICE_HOLD_SECONDS). Its error
    # is marked unreleased and its record given the held visibility (handlers/_batch.py; next test). When that
    # call fails, or too little time is left for it, the record keeps its queue's VisibilityTimeout, counted
    # from the receive: a claim is made at most the function's Timeout into that window (an invocation that
    # starts at the receive), so the timeout must outlast Timeout plus every hold, or the retry meets the
    # claim its own attempt left (a duplicate of itself, deleted: the event lost; a clone's owner found
    # "told already": never told).
    holds = ledger_holds()
    assert {"NOTICE_HOLD_SECONDS", "DEFAULT_HOLD_SECONDS", "RECONCILER_HOLD_SECONDS"} <= set(holds)
    resources = template["Resources"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert {m["FunctionName"]["Ref"] for m in mappings} == {"JobEventsFunction", "IdleStopperFunction"}
    for mapping in mappings:
        queue = resources[mapping["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        function = resources[mapping["FunctionName"]["Ref"]]["Properties"]
        timeout = function.get("Timeout", template["Globals"]["Function"]["Timeout"])
        assert queue["VisibilityTimeout"] > timeout, (mapping["FunctionName"], timeout)
        for name, hold in holds.items():
            assert queue["VisibilityTimeout"] > timeout + hold, (mapping["FunctionName"], name, timeout, hold)


def test_a_held_record_comes_back_after_every_hold_its_attempt_can_leave(template: dict[str, Any]) -> None:
    # A record whose attempt left a claim held is given HELD_VISIBILITY_SECONDS, counted from the call at the
    # end of its invocation (handlers/_batch.py): past every hold a queued record's attempt can leave, made
    # before that call (the clone notice's; the delivery's own, at most the remaining time of an invocation
    # whose Timeout the functions set, or DEFAULT_HOLD_SECONDS without a Lambda context), and within what
    # ChangeMessageVisibility accepts. The reconciler's claim (RECONCILER_HOLD_SECONDS) is made by scheduled
    # runs, never by a queued record.
    from sagemaker_governance.domain.redelivery import MAX_VISIBILITY_SECONDS
    from sagemaker_governance.handlers._batch import HELD_VISIBILITY_SECONDS

    holds = ledger_holds()
    queued = {name: hold for name, hold in holds.items() if name != "RECONCILER_HOLD_SECONDS"}
    assert {"NOTICE_HOLD_SECONDS", "DEFAULT_HOLD_SECONDS"} <= set(queued)
    resources = template["Resources"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    for mapping in mappings:
        function = resources[mapping["FunctionName"]["Ref"]]["Properties"]
        queued[f"{mapping['FunctionName']['Ref']}.Timeout"] = function.get(
            "Timeout", template["Globals"]["Function"]["Timeout"]
        )
    for name, hold in queued.items():
        assert hold < HELD_VISIBILITY_SECONDS, (name, hold)
    assert HELD_VISIBILITY_SECONDS <= MAX_VISIBILITY_SECONDS


def test_the_lambda_model_accepts_the_mapping_settings() -> None:
    import botocore.session

    model: Any = botocore.session.get_session().get_service_model("lambda")
    scaling = model.shape_for("ScalingConfig").members["MaximumConcurrency"]
    assert scaling.metadata["min"] == 2
    assert "ReportBatchItemFailures" in model.shape_for("FunctionResponseType").enum


DEAD_LETTER_QUEUE = [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}]


def _dead_letter_queue_metric(alarm: dict[str, Any], query_id: str) -> dict[str, Any]:
    (query,) = [q for q in alarm["Metrics"] if q["Id"] == query_id]
    stat: dict[str, Any] = query["MetricStat"]
    assert stat["Metric"]["Namespace"] == "AWS/SQS" and stat["Metric"]["Dimensions"] == DEAD_LETTER_QUEUE
    return stat


def test_every_dead_letter_is_announced_as_it_arrives(template: dict[str, Any]) -> None:
    # Given the dead-letter queue, fed both by SQS redrive policies (the job-events and alarm queues), which
    # NumberOfMessagesSent does not count, and by senders (rule DLQs, SNS, Lambda on-failure destinations),
    # which it counts
    resources = template["Resources"]
    redriven = sorted(
        name
        for name, r in resources.items()
        if r["Type"] == "AWS::SQS::Queue"
        and r["Properties"].get("RedrivePolicy", {}).get("deadLetterTargetArn")
        == {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
    )
    assert redriven == ["AlarmQueue", "JobEventsQueue"]
    # Then its alarm fires on arrivals, not on a depth that a letter left waiting keeps in ALARM: any sent
    # message, or any rise of the visible messages from one period to the next (a period without data as 0)
    alarm = resources["DeadLetterQueueAlarm"]["Properties"]
    sent, visible = _dead_letter_queue_metric(alarm, "sent"), _dead_letter_queue_metric(alarm, "visible")
    assert (sent["Metric"]["MetricName"], sent["Stat"]) == ("NumberOfMessagesSent", "Sum")
    assert (visible["Metric"]["MetricName"], visible["Stat"]) == ("ApproximateNumberOfMessagesVisible", "Maximum")
    expressions = {q["Id"]: q["Expression"] for q in alarm["Metrics"] if "Expression" in q}
    assert expressions == {
        "rise": "DIFF(FILL(visible, 0))",
        "direct": "FILL(sent, 0)",
        "arrivals": "MAX([direct, rise])",
    }
    assert [q["Id"] for q in alarm["Metrics"] if q.get("ReturnData", True)] == ["arrivals"]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    # over two periods, so that DIFF always has the period before the newest
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (2, 1)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": "NotificationsTopic"}]


def test_a_dead_letter_left_waiting_is_announced_well_before_it_expires(template: dict[str, Any]) -> None:
    # Given the dead-letter queue's retention (14 days)
    retention = template["Resources"]["DeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]
    # Then an alarm fires once its oldest letter has waited half of it, leaving a week to redrive or delete it
    alarm = template["Resources"]["DeadLetterAgeAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage")
    assert alarm["Dimensions"] == DEAD_LETTER_QUEUE and alarm["Statistic"] == "Maximum"
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] <= retention - 7 * 24 * 3600
    assert alarm["AlarmActions"] == [{"Ref": "NotificationsTopic"}]


def test_what_outlives_the_stack_is_documented_with_how_to_remove_it(template: dict[str, Any]) -> None:
    # Given the README's section on removing the stack
    readme = (REPO / "README.md").read_text()
    start = readme.index("**Removing the stack keeps the audit trail.**")
    section = readme[start : readme.index("\n### ", start)]
    # Then it names every resource the template retains on deletion (the log groups by their names)
    retained = [name for name, r in template["Resources"].items() if r.get("DeletionPolicy") == "Retain"]
    for name in retained:
        if template["Resources"][name]["Type"] == "AWS::Logs::LogGroup":
            assert "log groups" in section, name
        else:
            assert f"`{name}`" in section, name
    # and the per-job alarms the functions create at run time, with the command that deletes them
    prefix = template["Globals"]["Function"]["Environment"]["Variables"]["IDLE_ALARM_PREFIX"]
    assert prefix == {"Fn::Sub": "${AWS::StackName}-idle-"}
    assert "`<stack>-idle-<job>" in section and "aws cloudwatch delete-alarms" in section


def test_every_function_logs_to_its_own_group_with_retention(template: dict[str, Any]) -> None:
    for name, function in functions(template).items():
        group_ref = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        group = template["Resources"][group_ref]
        assert group["Type"] == "AWS::Logs::LogGroup", name
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_lambda_filters_no_log_level_of_its_own(template: dict[str, Any]) -> None:
    # LogLevel reaches the functions' logger only (POWERTOOLS_LOG_LEVEL), which writes audit records whatever it
    # is; Lambda's application log level (advanced logging controls) would drop those below it at the platform
    configs = [template["Globals"]["Function"].get("LoggingConfig", {})]
    configs += [f["Properties"].get("LoggingConfig", {}) for f in functions(template).values()]
    assert all("ApplicationLogLevel" not in config for config in configs)
    assert template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == {
        "Ref": "LogLevel"
    }


def test_numeric_and_choice_parameters_are_constrained(template: dict[str, Any]) -> None:
    for name, parameter in template["Parameters"].items():
        if parameter["Type"] == "Number":
            assert ("MinValue" in parameter and "MaxValue" in parameter) or "AllowedValues" in parameter, name
        else:
            assert "AllowedValues" in parameter or "AllowedPattern" in parameter, name


def test_runtime_and_layer_architecture_agree(template: dict[str, Any]) -> None:
    globals_ = template["Globals"]["Function"]
    layer = template["Resources"]["DependenciesLayer"]
    assert globals_["Runtime"] in ("python3.12", "python3.13")
    assert layer["Metadata"]["BuildMethod"] == globals_["Runtime"]
    assert [layer["Metadata"]["BuildArchitecture"]] == globals_["Architectures"]
    assert layer["Properties"]["CompatibleArchitectures"] == globals_["Architectures"]


def test_the_content_filter_covers_what_the_service_routes() -> None:
    # The compliance trigger in code and the template's filter describe the same transition.
    from sagemaker_governance.domain.job import TrainingJob
    from sagemaker_governance.service.compliance import is_first_in_progress

    detail = json.loads((EVENTS / "training-job-starting.json").read_text())["detail"]
    assert is_first_in_progress(TrainingJob.model_validate(detail))


def test_the_content_filters_cover_what_the_clone_reactions_handle(template: dict[str, Any]) -> None:
    # Every sample auto-resume or Spot fallback acts on reaches the job-events function.
    from sagemaker_governance.domain.job import TrainingJob
    from sagemaker_governance.domain.resume import is_resume_trigger, is_spot_stop, is_spot_trigger

    routed = set().union(*(samples for (fn, _), samples in EXPECTED_ROUTES.items() if fn == "JobEventsFunction"))
    handled = set()
    for sample in SAMPLES:
        job = TrainingJob.model_validate(json.loads((EVENTS / sample).read_text())["detail"])
        if is_resume_trigger(job) or is_spot_trigger(job):
            handled.add(sample)
    assert handled >= {
        "training-job-failed.json",
        "training-job-interrupted-spot.json",
        "training-job-stopped-max-wait.json",
    }
    assert handled <= routed
    # and a Spot job's plain stop (its end hands over a deferred clone) reaches it, an On-Demand one's concerns
    # no clone reaction
    event = json.loads((EVENTS / "training-job-stopped.json").read_text())
    spot = {**event, "detail": {**event["detail"], "EnableManagedSpotTraining": True}}
    patterns = eventbridge_patterns(template)
    assert is_spot_stop(TrainingJob.model_validate(spot["detail"]))
    assert not is_spot_stop(TrainingJob.model_validate(event["detail"]))
    assert matches(patterns[("JobEventsFunction", "JobEndedRule")], spot)


def test_a_spot_job_waiting_in_pending_reaches_the_storm_move_and_an_on_demand_one_does_not(
    template: dict[str, Any],
) -> None:
    # Given the Pending sample (a Spot job waiting for capacity, never billed) and its On-Demand twin
    from sagemaker_governance.domain.job import TrainingJob
    from sagemaker_governance.domain.resume import is_new_spot_start, may_be_new_spot_start

    event = json.loads((EVENTS / "training-job-pending-spot.json").read_text())
    on_demand = {**event, "detail": {**event["detail"], "EnableManagedSpotTraining": False}}
    unsaid = {**event, "detail": {k: v for k, v in event["detail"].items() if k != "EnableManagedSpotTraining"}}
    patterns = eventbridge_patterns(template)
    pending = patterns[("JobEventsFunction", "JobPendingSpotRule")]
    # Then the Spot job is a new start the storm move acts on, and only it is routed
    assert is_new_spot_start(TrainingJob.model_validate(event["detail"]))
    assert matches(pending, event)
    assert not any(matches(p, on_demand) for p in patterns.values())
    # And an event that does not say (no AWS sample shows the field) is routed, to be read again
    assert matches(pending, unsaid) and may_be_new_spot_start(TrainingJob.model_validate(unsaid["detail"]))


def test_pass_role_is_limited_to_sagemaker(template: dict[str, Any]) -> None:
    statements = policy_statements(template["Resources"]["JobEventsFunction"])
    (pass_role,) = [st for st in statements if "iam:PassRole" in as_list(st["Action"])]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "${ClonePassRolePattern}" in pass_role["Resource"]["Fn::Sub"]


# ---- IAM ----------------------------------------------------------------------------------------


def test_iam_actions_equal_what_the_adapters_declare(template: dict[str, Any]) -> None:
    for name, function in functions(template).items():
        granted = {action for st in policy_statements(function) for action in as_list(st["Action"])}
        declared = set().union(
            *(
                adapter.IAM_ACTIONS | getattr(adapter, "KMS_ACTIONS", frozenset())
                for adapter in cast(tuple[Any, ...], FUNCTION_ADAPTERS[name])
            )
        )
        assert granted == declared, name


def unscoped_actions(function: str) -> frozenset[str]:
    """Actions IAM grants only on Resource "*" (list calls), as the function's adapters declare them."""
    return frozenset().union(*(getattr(a, "UNSCOPED_ACTIONS", frozenset()) for a in FUNCTION_ADAPTERS[function]))


def test_no_wildcard_actions_and_no_managed_full_access(template: dict[str, Any]) -> None:
    for name, function in functions(template).items():
        for statement in policy_statements(function):
            for action in as_list(statement["Action"]):
                assert "*" not in action, (name, action)
            for resource in as_list(statement["Resource"]):
                if resource == "*":  # only for actions without resource-level permissions, alone
                    assert set(as_list(statement["Action"])) <= unscoped_actions(name), (name, statement)
        for policy in function["Properties"].get("Policies", []):
            assert not isinstance(policy, str), f"{name}: managed policy {policy}"


def test_resources_are_scoped_to_this_stack_account_and_region(template: dict[str, Any]) -> None:
    for function in functions(template).values():
        for statement in policy_statements(function):
            for resource in as_list(statement["Resource"]):
                if isinstance(resource, dict) and "Fn::Sub" in resource:
                    text = resource["Fn::Sub"]
                    if text.startswith("arn:${AWS::Partition}:s3:::"):
                        # S3 bucket ARNs carry no account: the statement names it in a condition instead.
                        condition = statement.get("Condition", {}).get("StringEquals", {})
                        assert condition.get("aws:ResourceAccount") == {"Ref": "AWS::AccountId"}, statement
                        continue
                    assert "${AWS::AccountId}" in text and "${AWS::Partition}" in text, text
                    # IAM is global: its ARNs carry an account but never a region.
                    assert ":iam::" in text or "${AWS::Region}" in text, text
                elif resource == "*":
                    continue  # checked by test_no_wildcard_actions_and_no_managed_full_access
                else:
                    assert isinstance(resource, dict) and ("Ref" in resource or "Fn::GetAtt" in resource), resource
                    target = resource.get("Ref") or resource.get("Fn::GetAtt", [None])[0]
                    assert target in template["Resources"], f"{resource} is not a resource of this stack"


# ---- idle guard ---------------------------------------------------------------------------------


def test_the_idle_filters_cover_what_the_idle_reaction_acts_on() -> None:
    from sagemaker_governance.domain.guards.base import is_training
    from sagemaker_governance.domain.job import TrainingJob

    for sample in ("training-job-completed.json", "training-job-failed.json", "training-job-stopped.json"):
        assert TrainingJob.model_validate(json.loads((EVENTS / sample).read_text())["detail"]).is_terminal
    detail = json.loads((EVENTS / "training-job-training.json").read_text())["detail"]
    assert is_training(TrainingJob.model_validate(detail))


def test_only_this_stacks_alarms_may_publish_to_the_alarm_topic(template: dict[str, Any]) -> None:
    statements = template["Resources"]["AlarmTopicPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    prefix = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:${AWS::StackName}-idle-*"
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert allows == [
        {
            "Sid": "IdleAlarmsOfThisStack",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": {"Ref": "AlarmTopic"},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {"aws:SourceArn": {"Fn::Sub": prefix}},
            },
        }
    ]
    denies = {json.dumps(s["Condition"], sort_keys=True) for s in statements if s["Effect"] == "Deny"}
    assert json.dumps({"Null": {"aws:SourceArn": "true"}}, sort_keys=True) in denies
    assert json.dumps({"ArnNotLike": {"aws:SourceArn": {"Fn::Sub": prefix}}}, sort_keys=True) in denies


def test_alarm_permissions_are_scoped_to_the_alarm_prefix(template: dict[str, Any]) -> None:
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["IDLE_ALARM_PREFIX"] == {"Fn::Sub": "${AWS::StackName}-idle-"}
    for function in functions(template).values():
        for statement in policy_statements(function):
            if any(a.startswith("cloudwatch:") for a in as_list(statement["Action"])):
                if as_list(statement["Action"]) in (["cloudwatch:DescribeAlarms"], ["cloudwatch:GetMetricData"]):
                    # Listing alone: AWS authorizes DescribeAlarms with a name prefix against alarm:*.
                    # Reading metrics: GetMetricData has no resource-level permission at all.
                    assert statement["Resource"] == "*"
                    continue
                if as_list(statement["Action"]) == ["cloudwatch:PutCompositeAlarm"]:
                    # Alone, on "*" (its API reference), held by its actions: present and the alarm topic only.
                    assert statement["Resource"] == "*"
                    assert statement["Condition"] == {
                        "ForAllValues:StringEquals": {"cloudwatch:AlarmActions": {"Ref": "AlarmTopic"}},
                        "Null": {"cloudwatch:AlarmActions": "false"},
                    }
                    continue
                assert statement["Resource"]["Fn::Sub"].endswith(":alarm:${AWS::StackName}-idle-*")


def test_the_stopper_is_subscribed_to_the_alarm_topic_only(template: dict[str, Any]) -> None:
    # Through AlarmQueue: the topic's only queue subscription, the stopper's only event source.
    resources = template["Resources"]
    assert "Events" not in resources["IdleStopperFunction"]["Properties"]
    subscriptions = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SNS::Subscription"]
    queued = [s for s in subscriptions if s["Protocol"] == "sqs"]
    assert [(s["TopicArn"], s["Endpoint"]) for s in queued] == [
        ({"Ref": "AlarmTopic"}, {"Fn::GetAtt": ["AlarmQueue", "Arn"]})
    ]
    assert resources["AlarmQueueMapping"]["Properties"]["FunctionName"] == {"Ref": "IdleStopperFunction"}
    alarms = [
        r["Properties"].get("AlarmActions")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    ]
    assert [{"Ref": "AlarmTopic"}] not in alarms  # people's alarms stay on the notifications topic


def test_idle_parameter_defaults_match_the_settings_defaults(template: dict[str, Any]) -> None:
    from sagemaker_governance.settings import Settings

    idle = Settings().base_policy_document()["idle"]
    params = template["Parameters"]
    assert params["IdleThresholdPercent"]["Default"] == idle["threshold_percent"]
    assert params["IdlePeriodSeconds"]["Default"] == idle["period_seconds"]
    assert params["IdleEvaluationPeriods"]["Default"] == idle["evaluation_periods"]
    # 0: as many as the evaluation periods, in the template as in the settings
    assert params["IdleDatapointsToAlarm"]["Default"] == Settings.model_fields["idle_datapoints_to_alarm"].default
    assert idle["datapoints_to_alarm"] == idle["evaluation_periods"]
    assert params["IdleGraceMinutes"]["Default"] == idle["grace_minutes"]


def test_each_queue_fed_function_may_change_visibility_on_its_own_queue_only(template: dict[str, Any]) -> None:
    # The function makes a failed record visible again sooner (handlers/_batch.py): sqs:ChangeMessageVisibility
    # (which also authorizes ChangeMessageVisibilityBatch; resource type queue in the Service Authorization
    # Reference) on the queue its event source mapping reads, and no other
    resources = template["Resources"]
    mappings = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    own = {m["FunctionName"]["Ref"]: m["EventSourceArn"] for m in mappings}
    assert set(own) == {"JobEventsFunction", "IdleStopperFunction"}
    for name, function in functions(template).items():
        resources_granted = [
            st["Resource"]
            for st in policy_statements(function)
            if "sqs:ChangeMessageVisibility" in as_list(st["Action"])
        ]
        assert resources_granted == ([own[name]] if name in own else []), name


PLUGIN_SCAN = """
import importlib.metadata

def listed():  # what pydantic's plugin loader reads: every distribution on sys.path, its entry points
    raise SystemExit("the distributions were scanned for pydantic plugins")

importlib.metadata.distributions = listed
from pydantic import BaseModel

class Built(BaseModel):  # the first validator built: where pydantic looks for plugins
    name: str

print(Built(name="x").name)
"""


def test_the_functions_skip_pydantic_s_plugin_scan(template: dict[str, Any]) -> None:
    # Given the environment the template gives every function (no function's own variables override it)
    deployed = template["Globals"]["Function"]["Environment"]["Variables"]
    for function in functions(template).values():
        assert "PYDANTIC_DISABLE_PLUGINS" not in function["Properties"].get("Environment", {}).get("Variables", {})
    inherited = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env = {**inherited, **{k: v for k, v in deployed.items() if isinstance(v, str)}}
    # When a fresh interpreter builds its first pydantic validator
    completed = subprocess.run(
        [sys.executable, "-c", PLUGIN_SCAN], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    # Then it listed no distribution: the functions use no pydantic plugin (the layer ships none:
    # tests/infrastructure/test_built_artifacts.py), and a cold start would pay for the scan
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "x"
