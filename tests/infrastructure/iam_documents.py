"""Every IAM policy document the stack deploys, as AWS would see it after CloudFormation resolved it.

The template's statements use intrinsic functions (``!Sub``, ``!Ref``, ``!GetAtt``, ``!If``); here they
are resolved with sample values for one stack (account, region, stack name, physical names in the
shapes AWS gives them) so the documents can be checked against AWS's authorization reference and
linted like any policy. Conditional statements (``!If``) are checked in both branches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PARTITION, REGION, ACCOUNT, STACK = "aws", "us-east-1", "123456789012", "sagemaker-governance"
PSEUDO = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::StackName": STACK,
    "AWS::URLSuffix": "amazonaws.com",
}
KEY_ID = "1234abcd-12ab-34cd-56ef-1234567890ab"
CENTRAL_BUS = "arn:aws:events:us-east-1:999999999999:event-bus/sagemaker-governance-audit"


@dataclass(frozen=True)
class Document:
    """One policy document: where it lives, whether it is identity- or resource-based, and its JSON."""

    where: str
    kind: str  # "identity" or "resource"
    policy: dict[str, Any]
    resource_arn: str | None = None  # what "*" means in a resource policy (the resource it is attached to)


def _physical(template: dict[str, Any], logical: str) -> dict[str, str]:
    """``Ref`` and ``Arn`` of a resource the way AWS names it (SAM-generated rules included)."""
    resource = template["Resources"].get(logical)
    kind = resource["Type"] if resource else "AWS::Events::Rule"  # <Function><Event> rules from SAM
    name = f"{STACK}-{logical}-ABCDEF123456"
    if kind == "AWS::SNS::Topic":
        arn = f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}"
        return {"Ref": arn, "Arn": arn, "TopicName": name}
    if kind == "AWS::SQS::Queue":
        arn = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}"
        return {"Ref": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}", "Arn": arn, "QueueName": name}
    if kind == "AWS::KMS::Key":
        return {"Ref": KEY_ID, "Arn": f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{KEY_ID}"}
    if kind == "AWS::DynamoDB::Table":
        return {"Ref": name, "Arn": f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{name}"}
    if kind == "AWS::Events::Rule":
        arn = f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:rule/{name}"
        return {"Ref": name, "Arn": arn}
    if kind == "AWS::Events::EventBus":
        bus = f"{STACK}-audit"
        return {"Ref": bus, "Arn": f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:event-bus/{bus}", "Name": bus}
    if kind == "AWS::IAM::Role":
        return {"Ref": name, "Arn": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}"}
    if kind == "AWS::Logs::LogGroup":
        group = resource["Properties"]["LogGroupName"] if resource else name
        return {"Ref": group, "Arn": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}:*"}
    raise KeyError(f"no sample physical id for {logical} ({kind})")


class Resolver:
    def __init__(self, template: dict[str, Any], conditions: dict[str, bool]) -> None:
        self.template = template
        self.conditions = conditions
        self.parameters = {k: str(v.get("Default", "")) for k, v in template.get("Parameters", {}).items()}
        # Resolve a placeholder in Sub text; the template's substitutions must be resolvable.

    def ref(self, name: str) -> str:
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters:
            return self.parameters[name]
        return _physical(self.template, name)["Ref"]

    def get_att(self, logical: str, attribute: str) -> str:
        return _physical(self.template, logical)[attribute]

    def sub(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            token = match[1]
            if "." in token:
                logical, attribute = token.split(".", 1)
                return self.get_att(logical, attribute)
            return self.ref(token)

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self(item) for item in value) if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return _NO_VALUE if arg == "AWS::NoValue" else self.ref(arg)
            if key == "Fn::Sub":
                return self.sub(arg) if isinstance(arg, str) else self.sub(arg[0])
            if key == "Fn::GetAtt":
                logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical, attribute)
            if key == "Fn::If":
                condition, yes, no = arg
                return self(yes if self.conditions[condition] else no)
        out = {k: self(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _NO_VALUE}


_NO_VALUE: Any = object()


def template_documents(template: dict[str, Any]) -> list[Document]:
    """Every policy document of the template, for each value of its conditions that changes them."""
    documents: list[Document] = []
    for use_key in (True, False):
        # The first variant also names checkpoint buckets (auto-resume's s3:ListBucket grant), the second not.
        # ... and forwards its audit records to a central bus (CentralAuditBusArn), the second not.
        conditions = {
            "UseCustomerKey": use_key,
            "HasNotificationEmail": True,
            "ChecksCheckpointProgress": use_key,
            "ForwardsAudit": use_key,
        }
        resolve = Resolver(template, conditions)
        if use_key:
            resolve.parameters["CheckpointBucketPattern"] = "example-checkpoints-*"
            resolve.parameters["CentralAuditBusArn"] = CENTRAL_BUS
        suffix = (
            ""
            if use_key
            else " (EncryptWithCustomerKey=false, CheckpointBucketPattern and CentralAuditBusArn empty)"
        )
        for logical, resource in template["Resources"].items():
            if resource.get("Condition") and not conditions[resource["Condition"]]:
                continue
            kind, props = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::Serverless::Function":
                statements = [s for p in props.get("Policies", []) for s in resolve(p["Statement"])]
                documents.append(
                    Document(logical + suffix, "identity", {"Version": "2012-10-17", "Statement": statements})
                )
            elif kind == "AWS::IAM::Role":
                for policy in props.get("Policies", []):
                    documents.append(
                        Document(
                            f"{logical}/{policy['PolicyName']}{suffix}",
                            "identity",
                            resolve(policy["PolicyDocument"]),
                        )
                    )
            elif kind == "AWS::KMS::Key":
                arn = resolve.get_att(logical, "Arn")
                documents.append(Document(logical + suffix, "resource", resolve(props["KeyPolicy"]), arn))
            elif kind in ("AWS::SNS::TopicPolicy", "AWS::SQS::QueuePolicy"):
                targets = props["Topics"] if kind == "AWS::SNS::TopicPolicy" else props["Queues"]
                (target,) = targets
                arn = resolve.get_att(target["Ref"], "Arn")
                documents.append(Document(logical + suffix, "resource", resolve(props["PolicyDocument"]), arn))
    return documents


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
