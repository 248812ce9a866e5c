"""Training jobs another AWS service created, and the retries SageMaker already made: what a clone must respect.

Pure. Auto-resume and Spot fallback never clone a job an orchestrator owns: the orchestrator retries it
itself (a tuning job starts another trial, a pipeline step retries by its own policy, AWS Batch requeues
its service job), and a clone behind its back would run twice, outside its bookkeeping. Idle, progress
and compliance rules still apply to such jobs. How each owner shows on a training job:

=====================  ==========================================  ===============================================
owner                  sign on the job                             source
=====================  ==========================================  ===============================================
hyperparameter tuning  ``TuningJobArn`` (DescribeTrainingJob)      botocore's SageMaker model: "the associated
                                                                   hyperparameter tuning job if the training job
                                                                   was launched by a hyperparameter tuning job"
AutoML (Autopilot)     ``AutoMLJobArn``                            botocore's SageMaker model
Ground Truth labeling  ``LabelingJobArn``                          botocore's SageMaker model: "the labeling job
                                                                   that created the transform or training job"
SageMaker Pipelines    tag ``sagemaker:pipeline-execution-arn``    the SageMaker Python SDK's lineage queries read
                                                                   it from a pipeline step's training job
                                                                   (aws/sagemaker-python-sdk, sagemaker/lineage)
AWS Batch service job  name starts with ``AWSBatch``               the managed policy of Batch's service-linked
                                                                   role, AWSBatchServiceRolePolicyForSageMaker,
                                                                   allows CreateTrainingJob only on
                                                                   ``training-job/AWSBatch*``
=====================  ==========================================  ===============================================

A job named ``AWSBatch...`` by a person is treated as Batch's too: the error is on the side of not cloning.

Retries inside SageMaker: ``RetryStrategy.MaximumRetryAttempts`` retries a job that failed with an
``InternalServerError`` inside the same job, and "when the job is retried, its SecondaryStatus is changed
to STARTING" (botocore's model, ``RetryStrategy``). Those restarts are counted from
``SecondaryStatusTransitions``: every ``Starting`` after the first that does not follow a Spot
``Interrupted``. Without transitions the count is unknown and taken at its most, the job's
``MaximumRetryAttempts`` (the budget is never overspent on a guess).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sagemaker_governance.domain.job import TrainingJob

PIPELINE_EXECUTION_TAG: Final = "sagemaker:pipeline-execution-arn"
BATCH_JOB_NAME_PREFIX: Final = "AWSBatch"
_OWNER_FIELDS: Final = (
    ("TuningJobArn", "hyperparameter tuning job"),
    ("AutoMLJobArn", "AutoML job"),
    ("LabelingJobArn", "Ground Truth labeling job"),
)


@dataclass(frozen=True)
class Orchestrator:
    kind: str  # e.g. "hyperparameter tuning job"
    identity: str  # the owner's ARN, or what identified it
    sign: str  # the field, tag or name rule that showed it

    def evidence(self) -> dict[str, str]:
        return {"orchestrator": self.kind, "orchestrator_id": self.identity, "identified_by": self.sign}


def orchestrator_of(description: Mapping[str, Any], tags: Mapping[str, str]) -> Orchestrator | None:
    """The service that created and retries this job, if any (see the module docstring)."""
    for field, kind in _OWNER_FIELDS:
        value = description.get(field)
        if isinstance(value, str) and value.strip():
            return Orchestrator(kind=kind, identity=value, sign=field)
    execution = tags.get(PIPELINE_EXECUTION_TAG)
    if execution:
        return Orchestrator(
            kind="SageMaker Pipelines execution", identity=execution, sign=f"tag {PIPELINE_EXECUTION_TAG}"
        )
    name = description.get("TrainingJobName")
    if isinstance(name, str) and name.startswith(BATCH_JOB_NAME_PREFIX):
        return Orchestrator(
            kind="AWS Batch service job", identity=name, sign=f"name prefix {BATCH_JOB_NAME_PREFIX}"
        )
    return None


@dataclass(frozen=True)
class SageMakerRetries:
    count: int  # retries SageMaker made inside this job (at most, when not known)
    known: bool
    maximum: int  # RetryStrategy.MaximumRetryAttempts (0: none)

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sagemaker_retries": self.count, "sagemaker_max_retries": self.maximum}
        if not self.known:
            out["sagemaker_retries_note"] = (
                "no SecondaryStatusTransitions to count SageMaker's own retries: counted at their maximum"
            )
        return out


def sagemaker_retries(job: TrainingJob, description: Mapping[str, Any]) -> SageMakerRetries:
    """How many times SageMaker already retried the job under its ``RetryStrategy``."""
    strategy = description.get("RetryStrategy")
    raw = strategy.get("MaximumRetryAttempts") if isinstance(strategy, Mapping) else None
    maximum = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0
    if maximum == 0:
        return SageMakerRetries(count=0, known=True, maximum=0)
    if not job.transitions:
        return SageMakerRetries(count=maximum, known=False, maximum=maximum)
    restarts = 0
    seen_start = False
    previous: str | None = None
    for transition in job.transitions:
        if transition.status == "Starting":
            if seen_start and previous != "Interrupted":
                restarts += 1
            seen_start = True
        previous = transition.status
    return SageMakerRetries(count=min(restarts, maximum), known=True, maximum=maximum)
