"""`smgov doctor` from the command line and the stack as CloudFormation describes it. moto's CloudFormation
needs extras this project does not install: a botocore ``Stubber`` answers it with the API's shapes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from smgov.cli.doctor import cmd_doctor
from smgov.cli.main import build_parser
from smgov.doctor.deployment import DeploymentUnreadable, load_deployment

TINY_YAML = "Metadata:\n  AWS::ServerlessRepo::Application:\n    SemanticVersion: 0.0.1\nResources:\n  DeadLetterQueue:\n    Type: AWS::SQS::Queue\n"
WHEN = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class Session:
    """A session whose CloudFormation and STS clients are stubbed."""

    region_name = "us-east-1"

    def __init__(self) -> None:
        self.cfn = boto3.client("cloudformation", region_name="us-east-1")
        self.sts = boto3.client("sts", region_name="us-east-1")
        self.stubs = {"cloudformation": Stubber(self.cfn), "sts": Stubber(self.sts)}
        self.stubs["sts"].add_response(
            "get_caller_identity",
            {"UserId": "AIDA", "Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/ops"},
        )
        for stub in self.stubs.values():
            stub.activate()

    def client(self, service: str, **_: Any) -> Any:
        return {"cloudformation": self.cfn, "sts": self.sts}[service]


def missing(session: Session, name: str) -> None:
    session.stubs["cloudformation"].add_client_error(
        "describe_stacks", "ValidationError", f"Stack with id {name} does not exist", 400, {"StackName": name}
    )


def test_a_missing_stack_is_a_failure_never_silence(capsys: pytest.CaptureFixture[str]) -> None:
    # Given an account without the stack, When the doctor runs, Then it exits 1 and says so
    session = Session()
    missing(session, "not-deployed")
    args = build_parser().parse_args(["doctor", "--stack", "not-deployed", "--json"])
    assert cmd_doctor(args, session=session, now=WHEN) == 1
    report = json.loads(capsys.readouterr().out)
    (finding,) = report["findings"]
    assert finding["status"] == "fail" and "does not exist" in finding["detail"]


def test_a_stack_is_read_with_its_version_status_and_resources() -> None:
    # Given a stack deployed from an older template (CloudFormation returns YAML templates as text)
    session = Session()
    cfn = session.stubs["cloudformation"]
    cfn.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "old",
                    "CreationTime": WHEN,
                    "StackStatus": "UPDATE_ROLLBACK_COMPLETE",
                    "Parameters": [{"ParameterKey": "ReconcileIntervalMinutes", "ParameterValue": "15"}],
                }
            ]
        },
        {"StackName": "old"},
    )
    cfn.add_response(
        "list_stack_resources",
        {
            "StackResourceSummaries": [
                {
                    "LogicalResourceId": "DeadLetterQueue",
                    "PhysicalResourceId": "https://sqs.us-east-1.amazonaws.com/123456789012/old-dlq",
                    "ResourceType": "AWS::SQS::Queue",
                    "LastUpdatedTimestamp": WHEN,
                    "ResourceStatus": "CREATE_COMPLETE",
                }
            ]
        },
        {"StackName": "old"},
    )
    cfn.add_response(
        "get_template", {"TemplateBody": TINY_YAML}, {"StackName": "old", "TemplateStage": "Original"}
    )
    # When it is read
    deployment = load_deployment(session, "old")
    # Then its version, status, parameters and physical resources are what CloudFormation says
    assert deployment.version == "0.0.1"
    assert deployment.status == "UPDATE_ROLLBACK_COMPLETE"
    assert deployment.parameter("ReconcileIntervalMinutes") == "15"
    assert deployment.physical("DeadLetterQueue") == "https://sqs.us-east-1.amazonaws.com/123456789012/old-dlq"
    assert deployment.account == "123456789012"


def test_load_deployment_raises_for_a_missing_stack() -> None:
    session = Session()
    missing(session, "nope")
    with pytest.raises(DeploymentUnreadable, match="does not exist"):
        load_deployment(session, "nope")


def test_canary_needs_its_role_image_and_output(capsys: pytest.CaptureFixture[str]) -> None:
    # the canary is the one part of doctor that writes: without what it needs it launches nothing
    args = build_parser().parse_args(["doctor", "--canary", "--canary-image", "i"])
    assert cmd_doctor(args, session=Session()) == 2
    assert "--canary-role" in capsys.readouterr().err
