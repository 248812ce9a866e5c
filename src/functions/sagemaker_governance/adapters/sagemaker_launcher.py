"""Starting training jobs (clones of failed or interrupted ones).

Kept apart from ``SageMakerJobs`` so only the functions that launch jobs hold the permissions to.
``CreateTrainingJob`` with ``Tags`` is authorized as ``sagemaker:AddTags`` too (tag on create), and it
passes the job's execution role to SageMaker (``iam:PassRole``, scoped in the template).
"""

from __future__ import annotations

from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from sagemaker_governance.domain.clone import CreateOutcome, InvalidCloneRequest
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.observability import logger

# SageMaker's refusal of MetricDefinitions on a job of one of its own algorithms (built-in algorithm images, also
# in script mode): ValidationException "You can't override the metric definitions for Amazon SageMaker
# algorithms. Please retry the request without specifying metric definitions." DescribeTrainingJob of such a job
# lists the algorithm's definitions although the owner gave none, so a faithful clone carries them; awslabs/mlspace
# retries its CreateTrainingJob without them on this message. Matched lower-case, on its stable part.
ALGORITHM_METRICS_REFUSED = "can't override the metric definitions"


class SageMakerLauncher:
    IAM_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"sagemaker:CreateTrainingJob", "sagemaker:AddTags", "iam:PassRole"}
    )

    def __init__(self, client: Any) -> None:
        self._client = client

    def create_training_job(self, request: dict[str, Any]) -> CreateOutcome:
        """Create the job; a job of that name that already exists is ``ALREADY_EXISTS`` (the caller
        checks it is the same clone, e.g. by its lineage tags). A request refused as invalid, by botocore or
        by SageMaker (``ValidationException``, e.g. a VolumeKmsKeyId on a type with local storage), is
        ``InvalidCloneRequest``: the same request would be refused again, so it is not for a retry.

        One exception: the refusal of the metric definitions of a SageMaker algorithm
        (``ALGORITHM_METRICS_REFUSED``) is answered by the same request without them, once. The first request
        created nothing (a ValidationException), and the second has the same deterministic name, so a clone
        is never made twice; the algorithm publishes its own metrics. Recognising SageMaker's algorithm images
        beforehand would need a list of registry accounts per algorithm and region that grows with both."""
        try:
            return self._create(request)
        except InvalidCloneRequest as exc:
            algorithm = request.get("AlgorithmSpecification")
            if ALGORITHM_METRICS_REFUSED not in str(exc).lower() or not isinstance(algorithm, dict):
                raise
            if "MetricDefinitions" not in algorithm:
                raise
            logger.warning(
                "metric definitions of a SageMaker algorithm refused: created without them",
                job=request.get("TrainingJobName"),
                image=algorithm.get("TrainingImage"),
            )
            bare = {k: v for k, v in algorithm.items() if k != "MetricDefinitions"}
            return self._create({**request, "AlgorithmSpecification": bare})

    def _create(self, request: dict[str, Any]) -> CreateOutcome:
        name = request.get("TrainingJobName")
        try:
            self._client.create_training_job(**request)
        except ParamValidationError as exc:
            raise InvalidCloneRequest(f"CreateTrainingJob {name} rejected by validation: {exc}") from exc
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code"), str(error.get("Message", "")).lower()
            if code == "ResourceInUse" or (code == "ValidationException" and "already exists" in message):
                return CreateOutcome.ALREADY_EXISTS
            if code == "ValidationException":
                raise InvalidCloneRequest(f"CreateTrainingJob {name} refused by SageMaker: {exc}") from exc
            raise AdapterError(f"CreateTrainingJob {name} failed: {exc}") from exc
        except BotoCoreError as exc:
            # No answer (a connection error, a read timeout): the job may have been created; a retry meets
            # its deterministic name as ALREADY_EXISTS. (ParamValidationError, a BotoCoreError too, is above.)
            raise AdapterError(f"CreateTrainingJob {name} failed: {exc}") from exc
        return CreateOutcome.CREATED
