from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import boto3
import botocore.config
import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ParamValidationError, ReadTimeoutError
from botocore.stub import Stubber

from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.domain.errors import (
    AdapterError,
    JobNotFound,
    StopDenied,
    StopOutcome,
    StopRefused,
    StopUnanswered,
)
from smgov.simulation.backoff import virtual_backoff
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.adapters.conftest import CallRecorder
from tests.builders import create_request


@pytest.fixture(autouse=True)
def no_retry_sleep() -> Iterator[list[float]]:
    """botocore's retry backoff does not block: the clients in botocore's standard retry mode below would sleep
    about a second per test. The delays it chose are kept."""
    waited: list[float] = []
    with virtual_backoff(waited.append):
        yield waited


def test_get_job_reads_every_page_of_tags(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    # Given a job with 50 tags (SageMaker's limit per resource), three pages of ListTags of 20
    fake_sagemaker.tag_page_size = 20
    tags = {f"k{i:03d}": f"v{i}" for i in range(50)}
    fake_sagemaker.launch(create_request("many-tags", tags=tags))
    # When the adapter reads it
    job = SageMakerJobs(sagemaker_client).get_job("many-tags")
    # Then every tag is there
    assert job.tags == tags
    assert fake_sagemaker.calls["ListTags"] == 3


def test_get_job_with_the_events_tags_reads_no_tags(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    # Given a job whose state-change event carried its tags
    fake_sagemaker.launch(create_request("tagged", tags={"team": "nlp"}))
    recorder = CallRecorder().attach(sagemaker_client)
    # When it is re-read with those tags
    job = SageMakerJobs(sagemaker_client).get_job("tagged", {"team": "from-the-event"})
    # Then only DescribeTrainingJob is called and the job carries the given tags
    assert recorder.actions == {"sagemaker:DescribeTrainingJob"}
    assert job.status == "InProgress" and job.tags == {"team": "from-the-event"}


def test_stop_in_progress_job(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.launch(create_request("running"))
    assert SageMakerJobs(sagemaker_client).stop("running") is StopOutcome.STOPPED
    assert fake_sagemaker.jobs["running"]["TrainingJobStatus"] == "Stopping"


def test_stopping_an_ended_job_is_success(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    fake_sagemaker.launch(create_request("done"))
    fake_sagemaker.transition("done", "Completed", "Completed")
    assert SageMakerJobs(sagemaker_client).stop("done") is StopOutcome.ALREADY_ENDED


def test_the_modelled_stop_error_reads_the_jobs_status_like_sagemakers_validation_answer() -> None:
    # StopTrainingJob's one modelled error is ResourceNotFound (botocore's model); SageMaker answers with
    # ValidationException in practice: both are settled by the job's own status
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    model: Any = client.meta.service_model
    assert [e.name for e in model.operation_model("StopTrainingJob").error_shapes] == ["ResourceNotFound"]
    with Stubber(client) as stub:
        stub.add_client_error("stop_training_job", service_error_code="ResourceNotFound", http_status_code=400)
        stub.add_response(
            "describe_training_job",
            {
                "TrainingJobName": "done",
                "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/done",
                "TrainingJobStatus": "Stopped",
                "SecondaryStatus": "Stopped",
                "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
                "AlgorithmSpecification": {"TrainingInputMode": "File"},
                "ResourceConfig": {"VolumeSizeInGB": 1},
                "StoppingCondition": {},
                "CreationTime": "2026-01-01T00:00:00Z",
            },
        )
        assert SageMakerJobs(client).stop("done") is StopOutcome.ALREADY_ENDED


@pytest.mark.parametrize(
    ("code", "status", "raised_as"),
    [
        ("ThrottlingException", 400, AdapterError),
        ("AccessDeniedException", 400, StopDenied),
        ("InternalFailure", 500, StopUnanswered),
    ],
)
def test_a_denied_stop_is_told_apart_from_one_that_may_have_been_applied(
    code: str, status: int, raised_as: type[AdapterError]
) -> None:
    # Given StopTrainingJob answered with an error past botocore's retries
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_client_error("stop_training_job", service_error_code=code, http_status_code=status)
        # When the adapter stops the job
        with pytest.raises(AdapterError) as raised:
            SageMakerJobs(client).stop("job-1")
    # Then a refusal for want of permission (one attempt, not applied) is StopDenied, a server error after which
    # the stop may have been applied is StopUnanswered, and a throttled last attempt (an earlier one may have been
    # applied) is neither
    assert type(raised.value) is raised_as


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def test_a_stop_answered_5xx_then_throttled_by_botocores_retries_is_not_taken_for_denied() -> None:
    # Given a client in botocore's standard retry mode whose StopTrainingJob's first attempt is answered 500 (the
    # stop perhaps applied) and whose two retries are throttled
    client = boto3.client(
        "sagemaker",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=botocore.config.Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    answers = [(500, "InternalFailure"), (400, "ThrottlingException"), (400, "ThrottlingException")]
    sent: list[int] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        status, code = answers[len(sent)]
        sent.append(status)
        body = json.dumps({"__type": code, "message": "injected"}).encode()
        headers = HTTPHeaders()
        headers["content-type"] = "application/x-amz-json-1.1"
        return AWSResponse(request.url, status, headers, _Body(body))

    client.meta.events.register("before-send.sagemaker.StopTrainingJob", send)
    # When the adapter stops the job
    with pytest.raises(AdapterError) as raised:
        SageMakerJobs(client).stop("job-1")
    # Then every attempt was sent, and the error is not a denial: stop_noted notes such a stop as perhaps applied
    assert sent == [500, 400, 400]
    assert not isinstance(raised.value, StopDenied)


STOPPING_JOB = {
    "TrainingJobName": "job-1",
    "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
    "TrainingJobStatus": "Stopping",
    "SecondaryStatus": "Stopping",
    "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
    "AlgorithmSpecification": {"TrainingInputMode": "File"},
    "ResourceConfig": {"VolumeSizeInGB": 1},
    "StoppingCondition": {},
    "CreationTime": 0,
}
NOT_STOPPABLE = "The request was rejected because the training job is in status Stopping."
RetryMode = Literal["standard", "legacy"]


def wire(
    answers: dict[str, list[tuple[int | None, dict[str, Any]]]], attempts: int, mode: RetryMode = "standard"
) -> tuple[Any, list[str]]:
    """A client in botocore's ``mode`` of retries (standard unless told; ``attempts`` at most per call) whose
    SageMaker answers each operation's attempts in turn from ``answers`` (status, body; a status of None: no answer,
    a read timeout); returns it and the operations sent, in order."""
    client = boto3.client(
        "sagemaker",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=botocore.config.Config(retries={"mode": mode, "total_max_attempts": attempts}),
    )
    sent: list[str] = []

    def send(request: Any, **_: Any) -> AWSResponse:
        operation = request.headers["X-Amz-Target"].decode().rsplit(".", 1)[-1]
        status, body = answers[operation][sent.count(operation)]
        sent.append(operation)
        if status is None:
            raise ReadTimeoutError(endpoint_url=request.url)
        headers = HTTPHeaders()
        headers["content-type"] = "application/x-amz-json-1.1"
        return AWSResponse(request.url, status, headers, _Body(json.dumps(body).encode()))

    client.meta.events.register("before-send.sagemaker.*", send)
    return client, sent


THROTTLED = (400, {"__type": "ThrottlingException", "message": "Rate exceeded"})


def test_a_stop_applied_by_its_first_attempt_whose_retry_finds_the_job_stopping_is_this_calls_stop() -> None:
    # Given StopTrainingJob's first attempt applied and answered 500, and botocore's retry of it answered "not
    # stoppable" (the job is now Stopping: that attempt's own doing)
    client, sent = wire(
        {
            "StopTrainingJob": [
                (500, {"__type": "InternalFailure", "message": "injected"}),
                (400, {"__type": "ValidationException", "message": NOT_STOPPABLE}),
            ],
            "DescribeTrainingJob": [(200, STOPPING_JOB)],
        },
        attempts=3,
    )
    # When the adapter stops the job
    outcome = SageMakerJobs(client).stop("job-1")
    # Then the stop is this call's (stop_noted notes it; its callers record it done and tell its owner), not an
    # end that came before it
    assert sent == ["StopTrainingJob", "StopTrainingJob", "DescribeTrainingJob"]
    assert outcome is StopOutcome.STOPPED


def test_a_stop_answered_not_stoppable_on_its_only_attempt_is_an_earlier_end() -> None:
    # Given StopTrainingJob's only attempt answered "not stoppable" (someone else stopped the job first)
    client, sent = wire(
        {
            "StopTrainingJob": [(400, {"__type": "ValidationException", "message": NOT_STOPPABLE})],
            "DescribeTrainingJob": [(200, STOPPING_JOB)],
        },
        attempts=3,
    )
    # When the adapter stops the job
    outcome = SageMakerJobs(client).stop("job-1")
    # Then that answer is the call's whole truth: the job was stopping before it
    assert sent == ["StopTrainingJob", "DescribeTrainingJob"]
    assert outcome is StopOutcome.ALREADY_ENDED


@pytest.mark.parametrize("mode", ["standard", "legacy"])
def test_a_throttled_stop_whose_job_was_stopped_before_its_retry_is_an_earlier_end(mode: RetryMode) -> None:
    # Given StopTrainingJob's first attempt throttled (not applied), the job stopped by someone else (its owner,
    # another guard, its MaxRuntime) while botocore waited to retry, and the retry answered "not stoppable"
    client, sent = wire(
        {
            "StopTrainingJob": [THROTTLED, (400, {"__type": "ValidationException", "message": NOT_STOPPABLE})],
            "DescribeTrainingJob": [(200, STOPPING_JOB)],
        },
        attempts=3,
        mode=mode,
    )
    # When the adapter stops the job
    outcome = SageMakerJobs(client).stop("job-1")
    # Then no attempt of the call was applied: the job's stop came before the call's answer and is not the call's
    assert sent == ["StopTrainingJob", "StopTrainingJob", "DescribeTrainingJob"]
    assert outcome is StopOutcome.ALREADY_ENDED


def test_a_stop_whose_first_attempt_got_no_answer_and_whose_retry_finds_the_job_stopping_is_this_calls_stop() -> (
    None
):
    # Given StopTrainingJob's first attempt without an answer (a read timeout: perhaps applied), and botocore's
    # retry of it answered "not stoppable"
    client, sent = wire(
        {
            "StopTrainingJob": [(None, {}), (400, {"__type": "ValidationException", "message": NOT_STOPPABLE})],
            "DescribeTrainingJob": [(200, STOPPING_JOB)],
        },
        attempts=3,
    )
    # When the adapter stops the job
    outcome = SageMakerJobs(client).stop("job-1")
    # Then the stop is taken as this call's, as after a first attempt answered 500
    assert sent == ["StopTrainingJob", "StopTrainingJob", "DescribeTrainingJob"]
    assert outcome is StopOutcome.STOPPED


@pytest.mark.parametrize(
    ("stop_answers", "raised_as"),
    [
        ([(400, {"__type": "ValidationException", "message": NOT_STOPPABLE})], StopRefused),
        (
            [
                (500, {"__type": "InternalFailure", "message": "injected"}),
                (400, {"__type": "ValidationException", "message": NOT_STOPPABLE}),
            ],
            AdapterError,
        ),
        ([THROTTLED, (400, {"__type": "ValidationException", "message": NOT_STOPPABLE})], StopRefused),
    ],
    ids=["only-attempt-refused", "retry-refused", "throttled-then-refused"],
)
def test_a_stop_answered_not_stoppable_whose_status_cannot_be_read_is_refused_only_after_one_attempt(
    stop_answers: list[tuple[int | None, dict[str, Any]]], raised_as: type[AdapterError]
) -> None:
    # Given StopTrainingJob answered "not stoppable" (after a first attempt answered 500, or throttled), and
    # DescribeTrainingJob throttled past botocore's retries
    client, _ = wire({"StopTrainingJob": stop_answers, "DescribeTrainingJob": [THROTTLED, THROTTLED]}, attempts=2)
    # When the adapter stops the job
    with pytest.raises(AdapterError) as raised:
        SageMakerJobs(client).stop("job-1")
    # Then a refusal after no attempt that may have been applied is StopRefused (nothing of ours applied:
    # stop_noted notes nothing), and a refused retry, whose first attempt may have been applied, is not
    assert type(raised.value) is raised_as


@pytest.mark.parametrize(
    ("stop_answers", "raised_as"),
    [
        ([(400, {"__type": "ThrottlingException", "message": "Rate exceeded"})], StopRefused),
        ([(400, {"__type": "AccessDeniedException", "message": "explicit deny"})], StopDenied),
        (
            [
                (500, {"__type": "InternalFailure", "message": "injected"}),
                (400, {"__type": "AccessDeniedException", "message": "explicit deny"}),
            ],
            AdapterError,
        ),
        ([THROTTLED, THROTTLED, THROTTLED], StopRefused),
        ([THROTTLED, (400, {"__type": "AccessDeniedException", "message": "explicit deny"})], StopDenied),
        ([(None, {}), THROTTLED], AdapterError),
    ],
    ids=[
        "only-attempt-throttled",
        "only-attempt-denied",
        "retry-denied",
        "every-attempt-throttled",
        "throttled-then-denied",
        "unanswered-then-throttled",
    ],
)
def test_a_refusal_is_taken_as_not_applied_only_when_no_attempt_of_the_call_may_have_been(
    stop_answers: list[tuple[int | None, dict[str, Any]]], raised_as: type[AdapterError]
) -> None:
    # Given StopTrainingJob refused on its only attempt (botocore's retries spent, or its retry quota), on every
    # attempt, or on botocore's retry of a first attempt answered 500 or not at all
    client, _ = wire({"StopTrainingJob": stop_answers}, attempts=len(stop_answers))
    # When the adapter stops the job
    with pytest.raises(AdapterError) as raised:
        SageMakerJobs(client).stop("job-1")
    # Then a refusal says the stop was not made only when every attempt before it was refused too
    assert type(raised.value) is raised_as


def test_unknown_job_is_translated(sagemaker_client: Any) -> None:
    with pytest.raises(JobNotFound):
        SageMakerJobs(sagemaker_client).describe("nope")


def test_throttling_is_translated_to_our_error() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_training_job", service_error_code="ThrottlingException", http_status_code=400
        )
        with pytest.raises(AdapterError):
            SageMakerJobs(client).describe("job-1")


def test_botocore_still_validates_requests_behind_the_double(sagemaker_client: Any) -> None:
    with pytest.raises(ParamValidationError):
        sagemaker_client.stop_training_job(TrainingJobName=123)


def test_declared_iam_actions_cover_every_call(fake_sagemaker: FakeSageMaker, sagemaker_client: Any) -> None:
    recorder = CallRecorder().attach(sagemaker_client)
    fake_sagemaker.launch(create_request("j"))
    adapter = SageMakerJobs(sagemaker_client)
    adapter.get_job("j")
    adapter.stop("j")
    adapter.stop("j")
    assert recorder.actions <= SageMakerJobs.IAM_ACTIONS
    assert recorder.actions == SageMakerJobs.IAM_ACTIONS


# ---- issue 16 item 4: what botocore drops from DescribeTrainingJob is reported ------------------------


def answering_with(body: dict[str, Any]) -> Any:
    """A real client whose HTTP answer is ``body``: botocore parses it with its own model (the fields it
    does not model are dropped, as with the runtime's older botocore)."""
    import json

    from botocore.awsrequest import AWSResponse, HTTPHeaders

    client = boto3.client("sagemaker", region_name="us-east-1")

    class Raw:
        def __init__(self, data: bytes) -> None:
            self._data = data

        def stream(self, **_: Any) -> Any:
            yield self._data

    def send(**_: Any) -> AWSResponse:
        data = json.dumps(body).encode()
        headers = HTTPHeaders()
        headers["content-type"] = "application/x-amz-json-1.1"
        return AWSResponse("https://sagemaker", 200, headers, Raw(data))

    client.meta.events.register("before-send.sagemaker.DescribeTrainingJob", send)
    return client


def test_fields_the_model_does_not_know_are_reported_with_the_description() -> None:
    # Given AWS answering with a field this botocore's model lacks, at the top level and nested,
    from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY

    body = {
        "TrainingJobName": "job-1",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
        "TrainingJobStatus": "Failed",
        "SecondaryStatus": "Failed",
        "ResourceConfig": {
            "InstanceType": "ml.g5.2xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": 50,
            "NewKnob": 1,
        },
        "FutureConfig": {"Enabled": True},
        "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
        "CreationTime": 1_700_000_000,
    }
    # When the job is described, then botocore dropped them and the adapter says which.
    description = SageMakerJobs(answering_with(body)).describe("job-1")
    assert "FutureConfig" not in description and "NewKnob" not in description["ResourceConfig"]
    assert description[UNMODELLED_FIELDS_KEY] == ["ResourceConfig.NewKnob", "FutureConfig"]


def test_a_fully_modelled_answer_has_no_mark() -> None:
    from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY

    body = {"TrainingJobName": "job-1", "TrainingJobStatus": "Completed", "CreationTime": 1_700_000_000}
    assert UNMODELLED_FIELDS_KEY not in SageMakerJobs(answering_with(body)).describe("job-1")
