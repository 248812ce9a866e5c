"""The SageMaker Python SDK v3 path: ``ModelTrainer.train()`` builds the request itself and calls
``TrainingJob.create`` (sagemaker-core), which sends it through the governed boto3 session."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sagemaker_governance.domain.policy import Policy
from smgov.sdk import GovernanceViolation, governed_sagemaker_session
from tests.sdk.conftest import IMAGE, NOW, ROLE, SentRequests, require_sagemaker_sdk


@pytest.fixture(autouse=True)
def _offline_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK checks the role with iam:SimulatePrincipalPolicy, which moto lacks; governance is not
    # about the role, so that client-side check is switched off the SDK's documented way.
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")


def trainer(session: Any, *, instance_type: str, count: int = 1, runtime: int = 3600, tags: dict[str, str]) -> Any:
    train = require_sagemaker_sdk()
    from sagemaker.core.shapes import Tag
    from sagemaker.core.training.configs import Compute, OutputDataConfig, StoppingCondition

    return train.ModelTrainer(
        training_image=IMAGE,
        role=ROLE,
        compute=Compute(instance_type=instance_type, instance_count=count),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=runtime),
        output_data_config=OutputDataConfig(s3_output_path="s3://ml-artifacts/models/"),
        base_job_name="governed",
        tags=[Tag(key=k, value=v) for k, v in tags.items()],
        sagemaker_session=session,
    )


def test_model_trainer_refuses_a_non_compliant_job(aws: boto3.Session, policy: Policy) -> None:
    require_sagemaker_sdk()
    # Given a governed SDK session and a trainer asking for a disallowed instance type
    session = governed_sagemaker_session(policy, boto_session=aws, user="carol", clock=lambda: NOW)
    sent = SentRequests().attach(aws)
    model_trainer = trainer(
        session, instance_type="ml.p5.48xlarge", tags={"team": "nlp", "cost-center": "cc-1234"}
    )
    # When it trains
    with pytest.raises(GovernanceViolation) as refused:
        model_trainer.train(wait=False, logs=False)
    # Then the SDK never sent CreateTrainingJob, and the developer reads why and how to fix it
    assert sent.bodies == []
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert [d.rule for d in refused.value.violations] == ["instance-types"]
    assert "ml.p5.48xlarge" in str(refused.value)
    assert "fix: Use one of ml.m5.*" in str(refused.value)


def test_model_trainer_launches_a_compliant_job_with_the_owner_filled(aws: boto3.Session, policy: Policy) -> None:
    require_sagemaker_sdk()
    session = governed_sagemaker_session(policy, boto_session=aws, user="carol", clock=lambda: NOW)
    sent = SentRequests().attach(aws)
    model_trainer = trainer(session, instance_type="ml.g5.2xlarge", tags={"team": "nlp", "cost-center": "cc-1234"})

    model_trainer.train(wait=False, logs=False)

    (body,) = sent.bodies  # the request the SDK built, as it left botocore
    assert body["ResourceConfig"]["InstanceType"] == "ml.g5.2xlarge"
    assert {"Key": "owner", "Value": "carol"} in body["Tags"]
    (summary,) = aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert summary["TrainingJobName"] == body["TrainingJobName"]


def test_model_trainer_respects_team_overrides(aws: boto3.Session, policy: Policy) -> None:
    require_sagemaker_sdk()
    session = governed_sagemaker_session(policy, boto_session=aws, user="carol", clock=lambda: NOW)
    model_trainer = trainer(
        session, instance_type="ml.p5.48xlarge", tags={"team": "vision", "cost-center": "cc-1234"}
    )
    model_trainer.train(wait=False, logs=False)  # vision may use ml.p5.*
    assert len(aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 1
