"""The member template for a service-managed StackSet: ``template.yaml``, packaged by ``sam package``,
expanded from SAM to plain CloudFormation, its code read from a bucket in each member's region.

Why: "StackSets with service-managed permissions don't currently support the use of macros in templates
(this includes the AWS::Include and AWS::Serverless transforms)" (CloudFormation API reference,
``CreateStackSet``, ``Capabilities``). So the SAM transform runs here, with the same translator
``sam validate``/``sam deploy`` use (``samtranslator``), and the StackSet deploys its output. And a Lambda
function's ``Code.S3Bucket`` must be in the function's own region (Lambda API reference,
``FunctionCode.S3Bucket``: "An Amazon S3 bucket in the same Amazon Web Services Region as your
function"): every code location becomes ``${ArtifactBucketPrefix}-${AWS::Region}``, one bucket per region
holding the same keys (``make org-package`` copies them).

Developer-side only (``samtranslator`` comes with the SAM CLI, a dev dependency).
"""

from __future__ import annotations

import copy
import re
from typing import Any

BUCKET_PARAMETER = "ArtifactBucketPrefix"
REGIONAL_BUCKET = {"Fn::Sub": "${" + BUCKET_PARAMETER + "}-${AWS::Region}"}
# Where each expanded resource type keeps its S3 location (CloudFormation resource reference).
CODE_LOCATIONS = {
    "AWS::Lambda::Function": ("Code", "S3Bucket", "S3Key"),
    "AWS::Lambda::LayerVersion": ("Content", "S3Bucket", "S3Key"),
}


class _NoManagedPolicies:
    """SAM asks for a managed-policy map only for policies named in ``Policies``: this template names none
    (a test checks every policy is inline); the basic execution role's ARN SAM builds itself."""

    def load(self) -> dict[str, str]:
        return {}


def expand(packaged: dict[str, Any], region: str = "us-east-1") -> dict[str, Any]:
    """The plain CloudFormation of a packaged SAM template (``CodeUri``/``ContentUri`` already ``s3://``)."""
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region))
    expanded: dict[str, Any] = translator.translate(
        copy.deepcopy(packaged),
        parameter_values={},
        passthrough_metadata=False,
        get_managed_policy_map=_NoManagedPolicies().load,
    )
    return partition_neutral(regional_code(expanded))


LITERAL_PARTITION = re.compile(r"^arn:aws(?:-[a-z-]+)?:")  # aws, aws-cn, aws-us-gov, aws-iso...


def partition_neutral(expanded: dict[str, Any]) -> dict[str, Any]:
    """Every literal ``arn:aws:...`` (or another partition's) becomes ``{"Fn::Sub": "arn:${AWS::Partition}:..."}``.

    The translator writes the ARNs it builds itself (the basic execution role's managed policy,
    ``arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole``) for the partition of the region it
    is given, once, where `make org-package` runs; the StackSet deploys the same template to every member
    region, and in aws-cn or aws-us-gov the role would name a policy that does not exist there. The
    template's own ARNs already use ``${AWS::Partition}``. A string that is itself the argument of an
    ``Fn::Sub``, or holds ``${``, is left alone (wrapping it again would change its meaning)."""

    def walk(node: Any) -> Any:
        if isinstance(node, str) and LITERAL_PARTITION.match(node) and "${" not in node:
            return {"Fn::Sub": LITERAL_PARTITION.sub("arn:${AWS::Partition}:", node, count=1)}
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            return {k: (v if k == "Fn::Sub" else walk(v)) for k, v in node.items()}
        return node

    out: dict[str, Any] = walk(expanded)
    return out


def regional_code(expanded: dict[str, Any]) -> dict[str, Any]:
    """Point every function's and layer's code at ``${ArtifactBucketPrefix}-${AWS::Region}``."""
    out = copy.deepcopy(expanded)
    out.pop("Transform", None)
    out.setdefault("Parameters", {})[BUCKET_PARAMETER] = {
        "Type": "String",
        "AllowedPattern": "^[a-z0-9][a-z0-9.-]{1,40}$",
        "Description": "Artifact buckets are <prefix>-<region>: one per member region, holding the packaged code",
    }
    for resource in out.get("Resources", {}).values():
        where = CODE_LOCATIONS.get(resource.get("Type", ""))
        if where:
            resource["Properties"][where[0]][where[1]] = copy.deepcopy(REGIONAL_BUCKET)
    return out


def code_keys(expanded: dict[str, Any]) -> list[str]:
    """The S3 keys each regional bucket must hold."""
    keys = []
    for resource in expanded.get("Resources", {}).values():
        where = CODE_LOCATIONS.get(resource.get("Type", ""))
        if where:
            keys.append(str(resource["Properties"][where[0]][where[2]]))
    return sorted(set(keys))
