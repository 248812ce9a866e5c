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
        ``InvalidCloneRequest``: the same request would be refused again, so it is not for a retry."""
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
