"""Orchestrator-owned jobs are never cloned; SageMaker's own retries count against the budget (issue 16 item 5)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import botocore.session
import pytest

from sagemaker_governance.domain.decisions import Action, Mode
from sagemaker_governance.domain.orchestrators import orchestrator_of, sagemaker_retries
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.resume import decide_resume, decide_spot
from tests.resume_builders import T0, TAGS, as_job, context, failed_description, spot_description, transitions

NOW = T0 + timedelta(hours=44)  # within late_after_hours of each failure here (resume.skip.too-late)
ARN = "arn:aws:sagemaker:us-east-1:123456789012"


def resume(description: dict[str, Any], tags: dict[str, str] | None = None, **policy: Any) -> Any:
    tags = TAGS if tags is None else tags
    return decide_resume(
        as_job(description, tags),
        description,
        tags,
        resume=ResumePolicy(**policy),
        default_mode=Mode.ENFORCE,
        ctx=context(NOW),
    )


OWNED = [
    ("tuning", {"TuningJobArn": f"{ARN}:hyper-parameter-tuning-job/hpo-1"}, {}, "hyperparameter tuning job"),
    ("automl", {"AutoMLJobArn": f"{ARN}:automl-job/auto-1"}, {}, "AutoML job"),
    ("labeling", {"LabelingJobArn": f"{ARN}:labeling-job/label-1"}, {}, "Ground Truth labeling job"),
    (
        "pipeline",
        {},
        {"sagemaker:pipeline-execution-arn": f"{ARN}:pipeline/p/execution/abc"},
        "SageMaker Pipelines execution",
    ),
]


def test_the_owner_fields_are_botocores() -> None:
    # The fields we read are members of DescribeTrainingJob's answer in botocore's model (AWS's own).
    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    members = model.operation_model("DescribeTrainingJob").output_shape.members
    assert {"TuningJobArn", "AutoMLJobArn", "LabelingJobArn", "RetryStrategy"} <= set(members)
    doc = model.shape_for("RetryStrategy").members["MaximumRetryAttempts"].documentation
    assert "STARTING" in doc  # how a retry shows: SecondaryStatus back to Starting


@pytest.mark.parametrize(("case", "fields", "tags", "kind"), OWNED, ids=[o[0] for o in OWNED])
def test_a_failed_job_an_orchestrator_owns_is_not_resumed(
    case: str, fields: dict[str, Any], tags: dict[str, str], kind: str
) -> None:
    # Given a job that would be resumed (transient failure after 26 h, checkpoint) but that an
    # orchestrator created, when auto-resume decides, then no clone, and the record names the owner.
    description = failed_description(**fields)
    (decision,) = resume(description, {**TAGS, **tags}).decisions
    assert decision.action is Action.NONE
    assert decision.evidence["orchestrator"] == kind
    assert "retries it itself" in decision.reason


def test_a_batch_service_job_is_recognised_by_its_name() -> None:
    # AWS Batch's service-linked role may only create training-job/AWSBatch* (its managed policy).
    description = failed_description("AWSBatch-train-7f3a")
    (decision,) = resume(description).decisions
    assert decision.action is Action.NONE and decision.evidence["orchestrator"] == "AWS Batch service job"


def test_without_an_owner_the_same_job_is_resumed() -> None:
    (decision,) = resume(failed_description()).decisions
    assert decision.action is Action.CLONE


def test_spot_fallback_leaves_an_orchestrated_job_alone() -> None:
    description = {**spot_description(), "TuningJobArn": f"{ARN}:hyper-parameter-tuning-job/hpo-1"}
    result = decide_spot(
        as_job(description, TAGS),
        description,
        TAGS,
        spot=SpotPolicy(),
        default_mode=Mode.ENFORCE,
        ctx=context(NOW),
    )
    (decision,) = result.decisions
    assert decision.action is Action.NONE and not result.stop_source
    assert decision.evidence["orchestrator"] == "hyperparameter tuning job"


def test_empty_owner_fields_are_no_owner() -> None:
    assert orchestrator_of({"TuningJobArn": "", "TrainingJobName": "x"}, {}) is None


# ---- retries inside SageMaker ------------------------------------------------------------------------


def retried(times: int, maximum: int) -> dict[str, Any]:
    steps: list[tuple[str, timedelta]] = []
    for _ in range(times):
        steps += [("Starting", timedelta(minutes=3)), ("Training", timedelta(hours=9))]
    steps += [("Starting", timedelta(minutes=3)), ("Training", timedelta(hours=9)), ("Failed", timedelta(0))]
    description = failed_description(RetryStrategy={"MaximumRetryAttempts": maximum})
    description["SecondaryStatusTransitions"] = transitions(*steps)
    return description


def test_sagemakers_retries_are_counted_from_the_transitions() -> None:
    description = retried(2, 3)
    counted = sagemaker_retries(as_job(description, TAGS), description)
    assert (counted.count, counted.known, counted.maximum) == (2, True, 3)


def test_spot_restarts_are_not_retries() -> None:
    description = {**spot_description(interruptions=3), "RetryStrategy": {"MaximumRetryAttempts": 5}}
    assert sagemaker_retries(as_job(description, TAGS), description).count == 0


def test_retries_made_inside_sagemaker_spend_the_budget() -> None:
    # Given a job SageMaker already retried twice (RetryStrategy) and a budget of 2 attempts,
    # when it fails again, then it is not resumed: 2 retries + this clone would exceed the budget.
    (decision,) = resume(retried(2, 2), max_attempts=2).decisions
    assert decision.action is Action.NONE and "inside SageMaker" in decision.reason
    assert decision.evidence["sagemaker_retries"] == 2
    # and with one retry made, one attempt is left
    (decision,) = resume(retried(1, 2), max_attempts=2).decisions
    assert decision.action is Action.CLONE


def test_unknown_retries_count_at_their_maximum() -> None:
    # Given a RetryStrategy of 3 and no transitions to count from, then the count is its maximum.
    description = failed_description(RetryStrategy={"MaximumRetryAttempts": 3})
    description["SecondaryStatusTransitions"] = []
    counted = sagemaker_retries(as_job(description, TAGS), description)
    assert (counted.count, counted.known) == (3, False)
    assert "sagemaker_retries_note" in counted.evidence()


def test_idle_and_compliance_still_apply_to_an_orchestrated_job() -> None:
    # An orchestrator owns the job's retries, not its cost: the idle guard still watches it and the
    # compliance rules still judge it.
    from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
    from sagemaker_governance.domain.guards.idle import IDLE, IdlePolicy
    from sagemaker_governance.domain.policy import Policy

    description = {**failed_description(), "TuningJobArn": f"{ARN}:hyper-parameter-tuning-job/hpo-1"}
    description.update(TrainingJobStatus="InProgress", SecondaryStatus="Training")
    job = as_job(description, {})  # no tags at all
    naming = AlarmNaming(prefix="gov-idle-", managed_by="gov", alarm_topic_arn="arn:aws:sns:us-east-1:1:t")
    assert isinstance(IDLE.plan(job, IdlePolicy(), naming), AlarmPlan)
    from sagemaker_governance.domain.compliance import evaluate_compliance

    policy = Policy.model_validate({"rules": [{"id": "tags", "type": "required-tags", "tags": {"team": {}}}]})
    result = evaluate_compliance(job, policy, NOW)
    assert [d.action for d in result.decisions] == [Action.STOP]
