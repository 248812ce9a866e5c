"""A stateful SageMaker training-job double that sits *behind* boto3.

moto cannot stop a training job and jumps every job straight to ``Completed``, so anything that needs
a job lifecycle uses this double instead. It plugs into a real boto3 client through botocore's event
system, like ``botocore.stub.Stubber``: botocore still validates every request against the real API
model (``ParamValidationError`` for a bad request) before the double answers, and our adapters run
unchanged.

Test and simulator code drive the lifecycle (``launch``, ``transition``) and read what the service did
(``calls``, ``stop_requests``, ``created``). With a ``lag`` (the simulator's lag fault), DescribeTrainingJob
may answer a job as it stood before its last transition for a moment after it (eventual consistency).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from botocore.awsrequest import AWSResponse, HTTPHeaders

from sagemaker_governance.domain.instances import has_local_storage
from smgov.simulation.copies import plain_copy
from smgov.simulation.messages import training_job_state_change

Clock = Callable[[], datetime]

TERMINAL = {"Completed", "Failed", "Stopped"}
READ_ONLY_KEYS = {"TrainingJobName", "TrainingJobArn"}
# At most 50 tags per resource, the ones already there and the ones a request adds counted together; a key
# already there is overwritten, not added; "aws:" tags do not count ("Tagging AWS resources", Tag naming
# limits and requirements: https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html). botocore's
# SageMaker model caps one request's TagList at 50 ("max": 50) but botocore does not check a "max", and the
# total on the resource is SageMaker's to check: CreateTrainingJob and AddTags alike.
MAX_TAGS_PER_RESOURCE = 50
# Some of SageMaker's built-in algorithm images: (registry account, repository) in us-east-1, from the SageMaker
# Python SDK's image_uri_config (xgboost.json "training", kmeans.json, linear-learner.json, blazingtext.json,
# forecasting-deepar.json). CreateTrainingJob refuses MetricDefinitions on them: "You can't override the metric
# definitions for Amazon SageMaker algorithms. Please retry the request without specifying metric definitions."
# (the message awslabs/mlspace handles). A partial list: the double's belief, enough for the service's tests.
ALGORITHM_IMAGES = frozenset(
    {
        ("683313688378", "sagemaker-xgboost"),
        ("382416733822", "kmeans"),
        ("382416733822", "linear-learner"),
        ("811284229777", "blazingtext"),
        ("522234722520", "forecasting-deepar"),
    }
)


class ReadLag(Protocol):
    """When DescribeTrainingJob lags a job's transitions (the simulator's lag fault, ``faults.LaggingReads``)."""

    def until(self, name: str) -> datetime | None:
        """Asked at each transition of job ``name``: until when (by the double's clock) its reads still answer
        the job as it stood before; None: they answer the new state at once."""
        ...

    def served(self, name: str) -> None:
        """A read of job ``name`` was answered with its state before its last transition."""
        ...


class SageMakerError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


def _check_tag_count(tags: dict[str, Any]) -> None:
    """SageMaker's refusal of a resource holding more than ``MAX_TAGS_PER_RESOURCE`` tags. The code is
    SageMaker's generic ValidationException (its model lists no tag-limit error); the message is ours."""
    counted = [key for key in tags if not key.lower().startswith("aws:")]
    if len(counted) > MAX_TAGS_PER_RESOURCE:
        raise SageMakerError(
            "ValidationException",
            f"The resource would have {len(counted)} tags; the maximum is {MAX_TAGS_PER_RESOURCE}.",
        )


class FakeSageMaker:
    def __init__(self, clock: Clock, region: str = "us-east-1", account: str = "123456789012") -> None:
        self.clock = clock
        self.region = region
        self.account = account
        self.jobs: dict[str, dict[str, Any]] = {}
        self.tags: dict[str, list[dict[str, str]]] = {}
        self.calls: Counter[str] = Counter()
        self.stop_requests: list[str] = []
        self.created: list[dict[str, Any]] = []
        self.tag_page_size = 50
        self.list_page_size = 100  # ListTrainingJobs page size (tests make it small)
        self.fail_next: dict[str, SageMakerError] = {}
        self._pending_params: dict[int, dict[str, Any]] = {}
        self.lag: ReadLag | None = None  # None: every read answers the job's current state
        self._stale: dict[str, tuple[datetime, dict[str, Any]]] = {}  # job -> (answered until, its snapshot)

    # ---- wiring --------------------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        """Answer every SageMaker call ``client`` makes (after botocore has validated it)."""
        client.meta.events.register("before-parameter-build.sagemaker.*", self._capture)
        client.meta.events.register("before-call.sagemaker.*", self._answer)
        return client

    def _capture(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending_params[id(model)] = plain_copy(params)

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        name = model.name
        api_params = self._pending_params.pop(id(model), None)
        if api_params is None:  # fall back to the serialized JSON body
            api_params = json.loads(params.get("body") or b"{}")
        self.calls[name] += 1
        handler = getattr(self, f"_op_{name}", None)
        try:
            if name in self.fail_next:
                raise self.fail_next.pop(name)
            if handler is None:
                raise SageMakerError("UnknownOperationException", f"the fake does not implement {name}")
            body = handler(api_params)
            status = 200
        except SageMakerError as err:
            body = {"Error": {"Code": err.code, "Message": err.message}}
            status = err.status
        body.setdefault("ResponseMetadata", {"HTTPStatusCode": status, "RequestId": "fake"})
        return AWSResponse("https://sagemaker.fake", status, HTTPHeaders(), None), body

    # ---- driving the lifecycle (tests, simulator) --------------------------------------------

    def arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account}:training-job/{name.lower()}"

    def launch(self, request: dict[str, Any], *, secondary: str = "Starting") -> dict[str, Any]:
        """Register a job as ``CreateTrainingJob`` would, already ``InProgress``."""
        self._op_CreateTrainingJob(plain_copy(request), record=False)
        if secondary != "Starting":
            self.transition(request["TrainingJobName"], "InProgress", secondary)
        return self.jobs[request["TrainingJobName"]]

    def transition(
        self,
        name: str,
        status: str,
        secondary: str,
        *,
        failure_reason: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        job = self.jobs[name]
        now = self.clock()
        before = self._described(name) if self.lag is not None else None  # what a read answers until now
        transitions = job.setdefault("SecondaryStatusTransitions", [])
        if transitions and "EndTime" not in transitions[-1]:
            transitions[-1]["EndTime"] = now
        entry: dict[str, Any] = {"Status": secondary, "StartTime": now}
        if message:
            entry["StatusMessage"] = message
        if status in TERMINAL:
            entry["EndTime"] = now
        transitions.append(entry)
        job["TrainingJobStatus"] = status
        job["SecondaryStatus"] = secondary
        job["LastModifiedTime"] = now
        if secondary == "Training" and "TrainingStartTime" not in job:
            job["TrainingStartTime"] = now
        if status in TERMINAL:
            job["TrainingEndTime"] = now
        if failure_reason:
            job["FailureReason"] = failure_reason
        until = self.lag.until(name) if self.lag is not None else None
        if until is not None and before is not None:
            self._stale[name] = (until, before)
        else:
            self._stale.pop(name, None)
        return job

    def event(self, name: str, *, event_id: str = "00000000-0000-0000-0000-000000000000") -> dict[str, Any]:
        """The EventBridge event SageMaker would emit for the job's current state (real shape)."""
        job = self.jobs[name]
        tags = {t["Key"]: t["Value"] for t in self.tags.get(job["TrainingJobArn"], [])}
        return training_job_state_change(
            job, tags, event_id=event_id, time=self.clock(), region=self.region, account=self.account
        )

    # ---- the API -------------------------------------------------------------------------------

    def _job(self, name: str) -> dict[str, Any]:
        job = self.jobs.get(name)
        if job is None:
            raise SageMakerError("ValidationException", "Requested resource not found.")
        return job

    def _described(self, name: str) -> dict[str, Any]:
        """The job as DescribeTrainingJob answers it now: its state before its last transition while that
        transition's lag lasts, else its current state."""
        job = self._job(name)
        stale = self._stale.get(name)
        if stale is not None and self.clock() < stale[0]:
            return plain_copy(stale[1])
        return plain_copy(job)

    def _op_DescribeTrainingJob(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["TrainingJobName"]
        answer = self._described(name)
        if self.lag is not None and answer != self.jobs[name]:
            self.lag.served(name)
        return answer

    def _op_StopTrainingJob(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["TrainingJobName"]
        job = self._job(name)
        self.stop_requests.append(name)
        if job["TrainingJobStatus"] != "InProgress":
            raise SageMakerError(
                "ValidationException",
                f"The request was rejected because the training job is in status {job['TrainingJobStatus']}.",
            )
        self.transition(name, "Stopping", "Stopping")
        return {}

    def _op_ListTags(self, params: dict[str, Any]) -> dict[str, Any]:
        tags = self.tags.get(params["ResourceArn"], [])
        start = int(params.get("NextToken") or 0)
        size = min(int(params.get("MaxResults") or self.tag_page_size), self.tag_page_size)
        page = tags[start : start + size]
        out: dict[str, Any] = {"Tags": plain_copy(page)}
        if start + size < len(tags):
            out["NextToken"] = str(start + size)
        return out

    def _op_AddTags(self, params: dict[str, Any]) -> dict[str, Any]:
        existing = {t["Key"]: t for t in self.tags.setdefault(params["ResourceArn"], [])}
        for tag in params.get("Tags", []):
            existing[tag["Key"]] = dict(tag)
        _check_tag_count(existing)
        self.tags[params["ResourceArn"]] = list(existing.values())
        return {"Tags": params.get("Tags", [])}

    def _op_CreateTrainingJob(self, params: dict[str, Any], *, record: bool = True) -> dict[str, Any]:
        name = params["TrainingJobName"]
        if name in self.jobs:
            raise SageMakerError(
                "ResourceInUse", f"Training job names must be unique within an AWS account and region: {name}"
            )
        _check_tag_count({t["Key"]: t for t in params.get("Tags", [])})
        algorithm = params.get("AlgorithmSpecification") or {}
        image = str(algorithm.get("TrainingImage") or "")
        registry, _, path = image.partition("/")
        if algorithm.get("MetricDefinitions") and (
            (registry.split(".", 1)[0], path.split(":", 1)[0].split("@", 1)[0]) in ALGORITHM_IMAGES
        ):
            raise SageMakerError(
                "ValidationException",
                "You can't override the metric definitions for Amazon SageMaker algorithms. Please retry the "
                "request without specifying metric definitions.",
            )
        resources = params.get("ResourceConfig") or {}
        types = [resources.get("InstanceType")] + [
            g.get("InstanceType") for g in resources.get("InstanceGroups", [])
        ]
        if resources.get("VolumeKmsKeyId") and any(t and has_local_storage(t) for t in types):
            # botocore's model, ResourceConfig.VolumeKmsKeyId: "You can't request a VolumeKmsKeyId when using
            # an instance type with local storage" (SageMaker checks it, botocore does not).
            raise SageMakerError(
                "ValidationException",
                "You can't request a VolumeKmsKeyId when using an instance type with local storage.",
            )
        now = self.clock()
        arn = self.arn(name)
        job = {k: v for k, v in plain_copy(params).items() if k != "Tags"}
        job.update(
            {
                "TrainingJobArn": arn,
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Starting",
                "CreationTime": now,
                "LastModifiedTime": now,
                "SecondaryStatusTransitions": [
                    {
                        "Status": "Starting",
                        "StartTime": now,
                        "StatusMessage": "Preparing the instances for training",
                    }
                ],
            }
        )
        job.setdefault("EnableManagedSpotTraining", False)
        self.jobs[name] = job
        self.tags[arn] = [dict(t) for t in params.get("Tags", [])]
        if record:
            self.created.append(plain_copy(params))
        return {"TrainingJobArn": arn}

    def _op_ListTrainingJobs(self, params: dict[str, Any]) -> dict[str, Any]:
        """As botocore's SageMaker model documents ListTrainingJobs: "the MaxResults number of training jobs are
        first retrieved ignoring the StatusEquals parameter and then they are filtered by the StatusEquals
        parameter", so a page may hold fewer jobs than asked, or none, and still have a NextToken. Sorted by
        SortBy (default CreationTime) in SortOrder (default Ascending: the model's defaults). The time filters
        are taken as applied before paging (the reference names StatusEquals alone as applied after)."""
        wanted = params.get("StatusEquals")
        bounds = {  # datetimes (boto3 serialises them; botocore's model)
            "CreationTime": (params.get("CreationTimeAfter"), params.get("CreationTimeBefore")),
            "LastModifiedTime": (params.get("LastModifiedTimeAfter"), params.get("LastModifiedTimeBefore")),
        }

        def within(job: dict[str, Any]) -> bool:
            for field, (after, before) in bounds.items():
                at = job.get(field, job["CreationTime"])
                if (after is not None and at <= after) or (before is not None and at >= before):
                    return False
            return True

        by = params.get("SortBy") or "CreationTime"
        field = {"Name": "TrainingJobName", "CreationTime": "CreationTime", "Status": "TrainingJobStatus"}[by]
        bounded = any(limit is not None for pair in bounds.values() for limit in pair)
        names = sorted(
            (n for n, j in self.jobs.items() if not bounded or within(j)),
            key=lambda n: (self.jobs[n].get(field, n), n),
            reverse=params.get("SortOrder") == "Descending",
        )
        start = int(params.get("NextToken") or 0)
        size = min(int(params.get("MaxResults") or 100), self.list_page_size)
        page = [
            n for n in names[start : start + size] if wanted is None or self.jobs[n]["TrainingJobStatus"] == wanted
        ]
        summaries = [
            {
                "TrainingJobName": n,
                "TrainingJobArn": self.jobs[n]["TrainingJobArn"],
                "CreationTime": self.jobs[n]["CreationTime"],
                "LastModifiedTime": self.jobs[n].get("LastModifiedTime", self.jobs[n]["CreationTime"]),
                "TrainingJobStatus": self.jobs[n]["TrainingJobStatus"],
                "SecondaryStatus": self.jobs[n].get("SecondaryStatus"),
            }
            for n in page
        ]
        out: dict[str, Any] = {"TrainingJobSummaries": summaries}
        if start + size < len(names):
            out["NextToken"] = str(start + size)
        return out
