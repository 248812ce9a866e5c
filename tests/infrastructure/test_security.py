"""Trust boundaries in the template: who may publish to our topics, send to our queue, use our key,
and which roles a clone may pass. Each test fails if the boundary is opened."""

from __future__ import annotations

from typing import Any

from tests.infrastructure.conftest import as_list, functions, policy_statements


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_topic_policies_admit_only_services_of_this_account(template: dict[str, Any]) -> None:
    policies = resources_of(template, "AWS::SNS::TopicPolicy")
    assert policies
    for name, policy in policies.items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            principal = statement["Principal"]
            assert principal != "*" and "AWS" not in principal, (name, principal)
            assert "Service" in principal, (name, principal)
            condition = statement.get("Condition", {})
            assert condition.get("StringEquals", {}).get("aws:SourceAccount") == {"Ref": "AWS::AccountId"}, name
            assert "aws:SourceArn" in condition.get("ArnLike", {}), name


def test_every_topic_has_a_policy_and_the_stack_key(template: dict[str, Any]) -> None:
    topics = resources_of(template, "AWS::SNS::Topic")
    governed = {
        ref["Ref"]
        for p in resources_of(template, "AWS::SNS::TopicPolicy").values()
        for ref in p["Properties"]["Topics"]
    }
    for name, topic in topics.items():
        assert name in governed, f"{name} has no topic policy"
        assert topic["Properties"]["KmsMasterKeyId"] == {
            "Fn::If": ["UseCustomerKey", {"Ref": "GovernanceKey"}, {"Ref": "AWS::NoValue"}]
        }, name


def test_key_lets_cloudwatch_publish_only_for_this_account(template: dict[str, Any]) -> None:
    statements = {
        s["Sid"]: s for s in template["Resources"]["GovernanceKey"]["Properties"]["KeyPolicy"]["Statement"]
    }
    cloudwatch = statements["CloudWatchAlarmsPublishToEncryptedTopics"]
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert set(cloudwatch["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert cloudwatch["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    for statement in statements.values():
        for action in as_list(statement["Action"]):
            assert "*" not in action, (statement["Sid"], action)


def test_dead_letter_queue_accepts_only_this_stacks_rules(template: dict[str, Any]) -> None:
    statements = template["Resources"]["DeadLetterQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    for statement in statements:
        if statement["Effect"] != "Allow":
            continue
        principal = statement["Principal"]
        assert principal in ({"Service": "events.amazonaws.com"}, {"Service": "sns.amazonaws.com"}), principal
        sources = as_list(statement["Condition"]["ArnEquals"]["aws:SourceArn"])
        for listed in sources:  # our own rules or topics, nothing else
            source = listed
            if "Fn::If" in listed:  # a conditional rule (the audit forwarder): its ARN, or nothing
                _, source, absent = listed["Fn::If"]
                assert absent == {"Ref": "AWS::NoValue"}
            target = source.get("Ref") or source["Fn::GetAtt"][0]
            assert any(target.startswith(f) for f in functions(template)) or target in template["Resources"], (
                source
            )


def test_pass_role_is_limited_to_allowed_roles_and_sagemaker(template: dict[str, Any]) -> None:
    for name, function in functions(template).items():
        for statement in policy_statements(function):
            if "iam:PassRole" not in as_list(statement["Action"]):
                continue
            assert as_list(statement["Action"]) == ["iam:PassRole"], f"{name}: PassRole must stand alone"
            assert statement["Resource"] != "*", name
            condition = statement["Condition"]["StringEquals"]
            assert condition == {"iam:PassedToService": "sagemaker.amazonaws.com"}, name
