"""A deployed stack built in moto from template.yaml's own definitions (rules and targets, mappings,
subscriptions, topic and key policies, roles granting the contracted actions), so `smgov doctor` has a
healthy account to find nothing wrong in; each test then breaks one thing. moto has no
``iam:SimulatePrincipalPolicy``: a botocore ``Stubber`` answers it, for exactly the contracted actions."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from smgov.cfn_template import load_template, referenced_id, resources_of_type
from smgov.doctor.checks import CheckContext, _expected_rules
from smgov.doctor.deployment import Deployment
from smgov.doctor.iam import contracted_actions
from smgov.simulation.fake_sagemaker import FakeSageMaker

ACCOUNT, REGION, STACK = "123456789012", "us-east-1", "gov"
FUNCTIONS = ("JobEventsFunction", "IdleStopperFunction", "ReconcilerFunction")
CENTRAL_BUS = "arn:aws:events:us-east-1:999999999999:event-bus/sagemaker-governance-audit"


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


class IamWithSimulator:
    """moto's IAM, with ``SimulatePrincipalPolicy`` answered by a stubbed client."""

    def __init__(self, iam: Any, simulator: Any) -> None:
        self._iam, self.simulator = iam, simulator

    def __getattr__(self, name: str) -> Any:
        if name == "simulate_principal_policy":
            return self.simulator.simulate_principal_policy
        return getattr(self._iam, name)


@dataclass
class Account:
    deployment: Deployment
    template: dict[str, Any]
    now: datetime
    clients: dict[str, Any]
    stubber: Stubber
    sagemaker: FakeSageMaker
    roles: dict[str, str] = field(default_factory=dict)  # function logical id -> role name
    decisions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (function, action) -> result

    def context(self) -> CheckContext:
        return CheckContext(template=self.template, now=self.now)

    def arm_simulator(self) -> None:
        """Queue one answer per contracted action, in the order the check asks (functions, then actions)."""
        for function in FUNCTIONS:
            for action in sorted(contracted_actions(function, True, self.template["Resources"][function])):
                result = self.decisions.get(
                    (function, action), {"EvalActionName": action, "EvalDecision": "allowed"}
                )
                self.stubber.add_response(
                    "simulate_principal_policy",
                    {"EvaluationResults": [result]},
                    {
                        "PolicySourceArn": f"arn:aws:iam::{ACCOUNT}:role/{self.roles[function]}",
                        "ActionNames": [action],
                        "ResourceArns": ANY,
                        "ContextEntries": ANY,
                    },
                )


def _statements(statements: list[dict[str, Any]], resource: str) -> str:
    """The template's statements as deployed (Sid, Effect, Action; principal and resource simplified)."""
    out = [
        {"Sid": s["Sid"], "Effect": s["Effect"], "Principal": "*", "Action": s["Action"], "Resource": resource}
        for s in statements
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": out})


def _create_alarms(cloudwatch: Any, template: dict[str, Any]) -> None:
    """The stack's own alarms, by name and description (their state is what the checks read)."""
    for logical, spec in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
        cloudwatch.put_metric_alarm(
            AlarmName=f"{STACK}-{logical}",
            AlarmDescription=spec["Properties"]["AlarmDescription"],
            MetricName="m",
            Namespace="n",
            Statistic="Sum",
            Period=900,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
        )


def _declared_targets(template: dict[str, Any], rule: str) -> dict[str, dict[str, Any]]:
    """Each target's declared settings by the target's logical id (a SAM schedule: its event's Properties)."""
    spec = template["Resources"].get(rule)
    if spec is not None:
        return {referenced_id(t["Arn"]) or "?": t for t in spec["Properties"]["Targets"]}
    for function, fspec in resources_of_type(template, "AWS::Serverless::Function").items():
        for event, source in fspec["Properties"].get("Events", {}).items():
            if f"{function}{event}" == rule:
                return {function: source.get("Properties", {})}
    return {}


def _rule_targets(
    template: dict[str, Any],
    rule: str,
    targets: list[tuple[str, str | None]],
    queues: dict[str, str],
    resources: dict[str, str],
) -> list[dict[str, Any]]:
    """A rule's targets as the template declares them (ARN, dead-letter queue, retry policy)."""
    declared = _declared_targets(template, rule)
    deployed = []
    for index, (target, dlq) in enumerate(targets):
        if target == "CentralAuditBusArn":
            arn = CENTRAL_BUS
        else:
            arn = queues.get(target) or f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{resources[target]}"
        entry: dict[str, Any] = {"Id": str(index), "Arn": arn}
        if dlq:
            entry["DeadLetterConfig"] = {"Arn": queues[dlq]}
        if "RetryPolicy" in declared.get(target, {}):
            entry["RetryPolicy"] = declared[target]["RetryPolicy"]
        deployed.append(entry)
    return deployed


@pytest.fixture
def account() -> Iterator[Account]:
    now = datetime.now(UTC).replace(microsecond=0)  # moto's logs refuse events far from its own clock
    template = load_template()
    with mock_aws():
        clients: dict[str, Any] = {
            s: boto3.client(s, region_name=REGION)
            for s in ("sqs", "sns", "events", "lambda", "iam", "kms", "logs", "ssm", "cloudwatch", "sagemaker")
        }
        simulator = boto3.client("iam", region_name=REGION)
        stubber = Stubber(simulator)
        stubber.activate()
        fake = FakeSageMaker(clock=lambda: now, region=REGION, account=ACCOUNT)
        fake.attach(clients["sagemaker"])
        resources = {logical: f"{STACK}-{logical}" for logical in template["Resources"]}
        queues = {}
        for logical in resources_of_type(template, "AWS::SQS::Queue"):
            url = clients["sqs"].create_queue(QueueName=f"{STACK}-{logical}")["QueueUrl"]
            resources[logical], queues[logical] = url, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-{logical}"
        key_id = clients["kms"].create_key(
            Policy=_statements(template["Resources"]["GovernanceKey"]["Properties"]["KeyPolicy"]["Statement"], "*")
        )["KeyMetadata"]["KeyId"]
        resources["GovernanceKey"] = key_id
        for logical in resources_of_type(template, "AWS::SNS::Topic"):
            arn = clients["sns"].create_topic(Name=f"{STACK}-{logical}", Attributes={"KmsMasterKeyId": key_id})[
                "TopicArn"
            ]
            resources[logical] = arn
        for spec in resources_of_type(template, "AWS::SNS::TopicPolicy").values():
            for topic in spec["Properties"]["Topics"]:
                arn = resources[referenced_id(topic) or ""]
                policy = _statements(spec["Properties"]["PolicyDocument"]["Statement"], arn)
                clients["sns"].set_topic_attributes(TopicArn=arn, AttributeName="Policy", AttributeValue=policy)
        clients["sns"].subscribe(
            TopicArn=resources["AlarmTopic"],
            Protocol="sqs",
            Endpoint=queues["AlarmQueue"],
            Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": queues["DeadLetterQueue"]})},
        )
        clients["sns"].subscribe(
            TopicArn=resources["NotificationsTopic"], Protocol="email", Endpoint="platform@example.com"
        )
        _create_alarms(clients["cloudwatch"], template)
        roles = {}
        for function in FUNCTIONS:
            role = f"{STACK}-{function}Role"
            clients["iam"].create_role(
                RoleName=role,
                AssumeRolePolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "lambda.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                ),
            )
            actions = sorted(contracted_actions(function, True, template["Resources"][function]))
            clients["iam"].put_role_policy(
                RoleName=role,
                PolicyName=f"{function}RolePolicy0",
                PolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
                    }
                ),
            )
            name = f"{STACK}-{function}"
            clients["lambda"].create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=f"arn:aws:iam::{ACCOUNT}:role/{role}",
                Handler="index.handler",
                Code={"ZipFile": _zip()},
            )
            resources[function], roles[function] = name, role
        for logical, spec in resources_of_type(template, "AWS::Lambda::EventSourceMapping").items():
            props = spec["Properties"]
            mapping = clients["lambda"].create_event_source_mapping(
                EventSourceArn=queues[referenced_id(props["EventSourceArn"]) or ""],
                FunctionName=resources[referenced_id(props["FunctionName"]) or ""],
                BatchSize=props["BatchSize"],
                FunctionResponseTypes=props["FunctionResponseTypes"],
                ScalingConfig={
                    "MaximumConcurrency": int(template["Parameters"]["JobEventsConcurrency"]["Default"])
                },
            )
            resources[logical] = mapping["UUID"]
        for logical, targets in _expected_rules(template).items():
            name = f"{STACK}-{logical}"
            on_bus: dict[str, str] = {}
            if "EventBusName" in template["Resources"].get(logical, {}).get("Properties", {}):
                # the audit forwarder: a rule on the stack's own bus (physical id <bus>|<rule>)
                bus = f"{STACK}-audit"
                clients["events"].create_event_bus(Name=bus)
                resources["AuditBus"], on_bus = bus, {"EventBusName": bus}
            pattern = template["Resources"].get(logical, {}).get("Properties", {}).get("EventPattern")
            if pattern is not None:  # the job-event rules and the audit forwarder, as the template declares them
                clients["events"].put_rule(Name=name, EventPattern=json.dumps(pattern), State="ENABLED", **on_bus)
            else:
                clients["events"].put_rule(Name=name, ScheduleExpression="rate(10 minutes)", State="ENABLED")
            deployed = _rule_targets(template, logical, targets, queues, resources)
            clients["events"].put_targets(Rule=name, Targets=deployed, **on_bus)
            resources[logical] = f"{on_bus['EventBusName']}|{name}" if on_bus else name
        group = f"/aws/lambda/{STACK}-reconciler"
        clients["logs"].create_log_group(logGroupName=group)
        clients["logs"].create_log_stream(logGroupName=group, logStreamName="run")
        resources["ReconcilerLogGroup"] = group
        events_group = f"/aws/lambda/{STACK}-job-events"
        clients["logs"].create_log_group(logGroupName=events_group)
        clients["logs"].create_log_stream(logGroupName=events_group, logStreamName="events")
        resources["JobEventsLogGroup"] = events_group
        deployment = Deployment(
            stack_name=STACK,
            region=REGION,
            account=ACCOUNT,
            partition="aws",
            status="UPDATE_COMPLETE",
            parameters={
                "EncryptWithCustomerKey": "true",
                "ReconcileIntervalMinutes": "10",
                "PolicyParameterName": f"/{STACK}/policy",
                # the roles grant every contracted action, the conditional ones included
                "CheckpointBucketPattern": "example-checkpoints-*",
                "CentralAuditBusArn": CENTRAL_BUS,
            },
            resources=resources,
            resource_types={},
            version=template["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"],
            client=lambda service: (
                IamWithSimulator(clients["iam"], simulator) if service == "iam" else clients[service]
            ),
        )
        yield Account(deployment, template, now, clients, stubber, fake, roles)


def reconcile_run(account: Account, minutes_ago: int, errors: int = 0) -> None:
    message = {
        "level": "INFO",
        "message": "reconcile run",
        "reconcile": {"visited": 3, "repairs": {}, "errors": errors, "stopped_early": False},
    }
    account.clients["logs"].put_log_events(
        logGroupName=account.deployment.resources["ReconcilerLogGroup"],
        logStreamName="run",
        logEvents=[
            {
                "timestamp": int((account.now - timedelta(minutes=minutes_ago)).timestamp() * 1000),
                "message": json.dumps(message),
            }
        ],
    )


Breaker = Callable[[Account], None]
