"""One audit view (issue 21 item 2): the member's forwarding (template.yaml) and the audit account's
central bus, log group, queries and dashboard (org/audit-account.yaml), as templates: lint clean, scoped to
the organization, every failure path in a dead-letter queue, the central queries the members' own, every
policy document checked against AWS's authorization reference."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from smgov.audit_queries import central_query, unknown_fields
from smgov.cfn_template import load_template
from tests.infrastructure.conftest import cfn_lint
from tests.infrastructure.iam_documents import ACCOUNT, PARTITION, REGION, Document
from tests.infrastructure.iam_reference import check_document
from tests.insights_subset import execute, flatten

ROOT = Path(__file__).resolve().parents[2]
AUDIT_ACCOUNT = ROOT / "org" / "audit-account.yaml"
MEMBER_QUERIES = {
    "CentralActionsByRuleQuery": "AuditActionsByRuleQuery",
    "CentralStoppedJobsQuery": "AuditStoppedJobsQuery",
    "CentralResumesQuery": "AuditResumesQuery",
    "CentralWouldHaveStoppedQuery": "AuditWouldHaveStoppedQuery",
}


@pytest.fixture(scope="module")
def central() -> dict[str, Any]:
    return load_template(AUDIT_ACCOUNT)


@pytest.fixture(scope="module")
def member() -> dict[str, Any]:
    return load_template()


def test_the_audit_account_template_lints_clean() -> None:
    result = cfn_lint(AUDIT_ACCOUNT)
    assert (result.returncode, result.stdout) == (0, "")


def test_the_central_bus_admits_only_the_organizations_governance_decisions(central: dict[str, Any]) -> None:
    policy = central["Resources"]["CentralAuditBusPolicy"]["Properties"]
    statement = policy["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == "events:PutEvents"
    assert statement["Condition"]["StringEquals"] == {
        "aws:PrincipalOrgID": {"Ref": "OrganizationId"},
        "events:source": "sagemaker-governance",
        "events:detail-type": "Governance Decision",
    }


def test_the_bus_policy_agrees_with_the_authorization_reference() -> None:
    bus = f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/sagemaker-governance-audit"
    statement = {
        **load_template(AUDIT_ACCOUNT)["Resources"]["CentralAuditBusPolicy"]["Properties"]["Statement"],
        "Resource": bus,
        "Sid": "OrganizationMembersForwardGovernanceDecisions",
    }
    statement["Condition"]["StringEquals"]["aws:PrincipalOrgID"] = "o-a1b2c3d4e5"
    assert check_document(Document("CentralAuditBusPolicy", "resource", {"Statement": [statement]}, bus)) == []


def test_the_log_group_policy_admits_only_the_central_rule(central: dict[str, Any]) -> None:
    text = central["Resources"]["CentralAuditLogGroupPolicy"]["Properties"]["PolicyDocument"]["Fn::Sub"]
    streams, statement = json.loads(text)["Statement"]
    # EventBridge's CreateLogStream carries no aws:SourceArn: a condition on it would refuse every stream
    assert streams["Action"] == "logs:CreateLogStream" and "Condition" not in streams
    assert streams["Resource"] == statement["Resource"] and streams["Principal"] == statement["Principal"]
    # the writes only from the central rule
    assert statement["Action"] == "logs:PutLogEvents"
    rule_arn = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    rule = central["Resources"]["CentralAuditRule"]["Properties"]
    assert rule_arn.endswith("rule/${BusName}/" + rule["Name"]["Fn::Sub"])  # the rule on the central bus
    assert statement["Resource"].endswith(":log-group:${CentralAuditLogGroup}:log-stream:*")
    group = (
        f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:/aws/events/sagemaker-governance-audit:log-stream:*"
    )
    resolved = {
        **statement,
        "Resource": group,
        "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/b/r"}},
    }
    both = {"Statement": [{**streams, "Resource": group}, resolved]}
    assert check_document(Document("CentralAuditLogGroupPolicy", "resource", both, group)) == []


def test_every_failure_path_ends_in_a_dead_letter_queue(central: dict[str, Any], member: dict[str, Any]) -> None:
    # central: the rule into the log group; member: the forwarding rule to the central bus
    target = central["Resources"]["CentralAuditRule"]["Properties"]["Targets"][0]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["CentralDeadLetterQueue", "Arn"]}}
    assert "RoleArn" not in target  # a CloudWatch Logs target is authorized by the log group's policy
    forward = member["Resources"]["AuditForwardRule"]
    assert forward["Condition"] == "ForwardsAudit"
    (target,) = forward["Properties"]["Targets"]
    assert target["Arn"] == {"Ref": "CentralAuditBusArn"}
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
    assert target["RoleArn"] == {"Fn::GetAtt": ["AuditForwardRole", "Arn"]}  # cross-account bus: a role
    role = member["Resources"]["AuditForwardRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    assert role == [
        {
            "Sid": "PutOnTheCentralAuditBus",
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": {"Ref": "CentralAuditBusArn"},
        }
    ]


def test_the_central_dead_letter_alarms_notify_the_operators_topic_when_given(central: dict[str, Any]) -> None:
    resources = central["Resources"]
    arrivals = resources["CentralDeadLetterQueueAlarm"]["Properties"]
    age = resources["CentralDeadLetterAgeAlarm"]["Properties"]
    for alarm in (arrivals, age):
        assert alarm["AlarmActions"] == {
            "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }
        assert alarm["Dimensions"] == [
            {"Name": "QueueName", "Value": {"Fn::GetAtt": ["CentralDeadLetterQueue", "QueueName"]}}
        ]
    # each arrival raises it (the queue's only feed sends, so it counts in NumberOfMessagesSent), not only the first
    assert (arrivals["MetricName"], arrivals["Statistic"], arrivals["Threshold"]) == (
        "NumberOfMessagesSent",
        "Sum",
        1,
    )
    assert not any("RedrivePolicy" in r.get("Properties", {}) for r in resources.values())
    # and a record waiting a week raises the other, before SQS deletes it at the queue's retention
    retention = resources["CentralDeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]
    assert age["MetricName"] == "ApproximateAgeOfOldestMessage" and age["Threshold"] == 7 * 86_400 < retention
    assert central["Conditions"]["HasAlarmTopic"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}
    pattern = re.compile(central["Parameters"]["AlarmTopicArn"]["AllowedPattern"])
    assert pattern.fullmatch("") and pattern.fullmatch("arn:aws:sns:eu-west-1:123456789012:platform-oncall")
    assert not pattern.fullmatch("arn:aws:sqs:eu-west-1:123456789012:queue")  # an alarm action here is a topic


def test_members_forward_what_the_central_rule_and_bus_policy_accept(
    central: dict[str, Any], member: dict[str, Any]
) -> None:
    from sagemaker_governance.adapters.audit_forwarder import DETAIL_TYPE, SOURCE

    pattern = {"source": [SOURCE], "detail-type": [DETAIL_TYPE]}
    assert member["Resources"]["AuditForwardRule"]["Properties"]["EventPattern"] == pattern
    assert central["Resources"]["CentralAuditRule"]["Properties"]["EventPattern"] == pattern


def test_the_stackset_passes_the_central_bus_to_every_member(member: dict[str, Any]) -> None:
    stackset = load_template(ROOT / "org" / "stackset.yaml")
    parameters = stackset["Resources"]["GovernanceStackSet"]["Properties"]["Parameters"]
    assert {"ParameterKey": "CentralAuditBusArn", "ParameterValue": {"Ref": "CentralAuditBusArn"}} in parameters
    assert (
        stackset["Parameters"]["CentralAuditBusArn"]["AllowedPattern"]
        == member["Parameters"]["CentralAuditBusArn"]["AllowedPattern"]
    )


def test_members_report_this_releases_version(member: dict[str, Any]) -> None:
    version = member["Metadata"]["AWS::ServerlessRepo::Application"]["SemanticVersion"]
    assert member["Globals"]["Function"]["Environment"]["Variables"]["STACK_VERSION"] == version


def test_the_central_queries_are_the_members_queries(central: dict[str, Any], member: dict[str, Any]) -> None:
    for central_name, member_name in MEMBER_QUERIES.items():
        got = central["Resources"][central_name]["Properties"]["QueryString"]
        want = member["Resources"][member_name]["Properties"]["QueryString"]
        assert got == central_query(want), central_name


def _central_queries(central: dict[str, Any]) -> dict[str, str]:
    queries = {
        name: props["Properties"]["QueryString"]
        for name, props in central["Resources"].items()
        if props["Type"] == "AWS::Logs::QueryDefinition"
    }
    body = json.loads(central["Resources"]["CentralDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"])
    for widget in body["widgets"]:
        if widget["type"] == "log":
            queries[widget["properties"]["title"]] = widget["properties"]["query"].split(" | ", 1)[1]
    return queries


def test_central_queries_reference_only_real_fields(central: dict[str, Any]) -> None:
    for name, query in _central_queries(central).items():
        assert unknown_fields(query) == set(), name
        assert "detail.message" in query, name


def test_central_queries_find_a_forwarded_record(central: dict[str, Any], log_output: Any) -> None:
    # Given the event a member forwarded, written whole into the central log group
    from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
    from tests.audit_records import MEMBER_INFO, record

    entry = AuditForwarder(None, None, bus_name="b", dead_letter_queue_url=None, member=MEMBER_INFO).entry(
        record()
    )
    event = {
        "version": "0",
        "source": entry["Source"],
        "detail-type": entry["DetailType"],
        "account": MEMBER_INFO["account"],
        "region": "us-east-1",
        "detail": json.loads(entry["Detail"]),
    }
    assert flatten(event)["detail.audit.job_name"] == "llm-pretrain"
    # When the central "stopped jobs" and "members" queries run over it, then each finds it
    stopped = execute(central["Resources"]["CentralStoppedJobsQuery"]["Properties"]["QueryString"], [(0, event)])
    assert len(stopped) == 1
    (members,) = execute(central["Resources"]["CentralMembersQuery"]["Properties"]["QueryString"], [(0, event)])
    cells = {cell["field"]: cell["value"] for cell in members}
    assert cells["detail.member.account"] == MEMBER_INFO["account"] and cells["decisions"] == "1"
    # and the sender check pairs the sending account with the member the record names
    senders = central["Resources"]["CentralSenderQuery"]["Properties"]["QueryString"]
    forged = {**event, "account": "222222222222"}
    pairs = {
        (cells["account"], cells["detail.member.account"])
        for row in execute(senders, [(0, event), (1, forged)])
        for cells in [{c["field"]: c["value"] for c in row}]
    }
    assert pairs == {(MEMBER_INFO["account"], MEMBER_INFO["account"]), ("222222222222", MEMBER_INFO["account"])}


def _forwarded_event(region: str, **overrides: Any) -> dict[str, Any]:
    """What the central rule writes for a member record of ``region`` (the member's real entry)."""
    from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
    from tests.audit_records import MEMBER_INFO, record

    member = {**MEMBER_INFO, "region": region}
    entry = AuditForwarder(None, None, bus_name="b", dead_letter_queue_url=None, member=member).entry(
        record(**overrides)
    )
    return {
        "version": "0",
        "source": entry["Source"],
        "detail-type": entry["DetailType"],
        "account": member["account"],
        "region": region,
        "detail": json.loads(entry["Detail"]),
    }


def _stops_widget(central: dict[str, Any]) -> str:
    return _central_queries(central)["Stops by member and decision code"]


def test_the_stops_widget_counts_jobs_of_one_name_in_two_regions_apart(central: dict[str, Any]) -> None:
    # A job's name is unique only per account and region: one name in two regions is two jobs
    events = [
        (0, _forwarded_event("us-east-1", evidence={"estimated_savings_usd": 10.0})),
        (1, _forwarded_event("eu-west-1", evidence={"estimated_savings_usd": 10.0})),
    ]
    (row,) = execute(_stops_widget(central), events)
    cells = {cell["field"]: cell["value"] for cell in row}
    assert (cells["jobs"], cells["saved"]) == ("2", "20")


def test_the_actions_by_rule_query_counts_jobs_of_one_name_in_two_regions_apart(central: dict[str, Any]) -> None:
    query = central["Resources"]["CentralActionsByRuleQuery"]["Properties"]["QueryString"]
    events = [(0, _forwarded_event("us-east-1")), (1, _forwarded_event("eu-west-1"))]
    (row,) = execute(query, events)
    cells = {cell["field"]: cell["value"] for cell in row}
    assert (cells["decisions"], cells["jobs"]) == ("2", "2")


def test_the_stops_widget_counts_a_duplicated_record_once(central: dict[str, Any]) -> None:
    event = _forwarded_event("us-east-1", evidence={"estimated_savings_usd": 10.0})
    (row,) = execute(_stops_widget(central), [(0, event), (1, event)])
    cells = {cell["field"]: cell["value"] for cell in row}
    assert (cells["jobs"], cells["saved"]) == ("1", "10")
