"""The doubles hold every request to what AWS checks and botocore does not (``simulation/model_rules.py``): the
service model's ``max``, ``enum`` and ``pattern``. Without it moto and our doubles accept what AWS refuses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError
from pydantic import ValidationError

from sagemaker_governance.domain.job import TrainingJob
from smgov.simulation import model_rules
from smgov.simulation.harness import local_account
from tests.builders import describe

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


def client(service: str) -> Any:
    session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    model_rules.install(session.events)
    made: Any = session.client(service)  # type: ignore[call-overload]
    empty = AWSResponse("https://example.invalid", 200, HTTPHeaders(), None)
    made.meta.events.register("before-call", lambda **_: (empty, {}))  # never sent: answered empty
    return made


@pytest.mark.parametrize(
    ("call", "params", "fragment"),
    [
        ("describe_training_job", {"TrainingJobName": "under_score"}, "does not match the pattern"),
        ("describe_training_job", {"TrainingJobName": "a" * 64}, "64 characters, at most 63"),
        ("list_training_jobs", {"StatusEquals": "Running"}, "is not one of InProgress"),
        ("add_tags", {"ResourceArn": "arn:aws:sagemaker:us-east-1:1:training-job/x", "Tags": [{"Key": "k", "Value": "v"}] * 51}, "51 items, at most 50"),
    ],
)  # fmt: skip
def test_what_aws_refuses_is_refused_with_the_services_validation_code(
    call: str, params: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ClientError) as raised:
        getattr(client("sagemaker"), call)(**params)
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert fragment in raised.value.response["Error"]["Message"]


def test_a_query_protocol_service_answers_validation_error() -> None:
    # CloudWatch: a value outside the AlarmType enum
    with pytest.raises(ClientError) as raised:
        client("cloudwatch").describe_alarms(AlarmTypes=["MetricAlarm", "Composite"])
    assert raised.value.response["Error"]["Code"] == "ValidationError"


def test_a_valid_request_passes() -> None:
    sagemaker = client("sagemaker")
    sagemaker.describe_training_job(TrainingJobName="llm-7b-run-2")
    sagemaker.list_training_jobs(StatusEquals="InProgress")


def test_a_pattern_the_regex_engine_cannot_compile_is_skipped_not_guessed() -> None:
    assert model_rules._compiled("[\\uD800\\uDC00-\\uDBFF\\uDFFF]*") is None
    assert model_rules._compiled("[a-z]+") is not None


def test_the_local_account_holds_the_handlers_requests_to_the_rules() -> None:
    with local_account(lambda: NOW, {}, log_audit=False) as account, pytest.raises(ClientError, match="pattern"):
        account.root.client("sagemaker").describe_training_job(TrainingJobName="not a name")


def test_an_event_naming_a_job_sagemaker_would_refuse_is_malformed() -> None:
    # rejected when parsed (the event goes to the dead-letter queue), never sent to AWS
    with pytest.raises(ValidationError, match="TrainingJobName"):
        TrainingJob.model_validate({**describe("job name with spaces"), "Tags": {}})
