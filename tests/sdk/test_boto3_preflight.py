"""The botocore hook on raw boto3: what every SDK (v2, v3, other tools) ends up calling."""

from __future__ import annotations

import warnings

import boto3
import pytest
from botocore.exceptions import ParamValidationError

from sagemaker_governance.domain.policy import Policy
from smgov.sdk import (
    GovernanceViolation,
    GovernanceWarning,
    install_preflight,
    uninstall_preflight,
)
from tests.sdk.conftest import NOW, SentRequests, request_file


def job_names(session: boto3.Session) -> list[str]:
    summaries = session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    return [s["TrainingJobName"] for s in summaries]


def test_a_non_compliant_request_is_refused_before_it_is_sent(aws: boto3.Session, policy: Policy) -> None:
    # Given a session with the preflight and a request that breaks four rules
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    sent = SentRequests().attach(aws)
    # When the developer creates the job
    with pytest.raises(GovernanceViolation) as refused:
        aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))
    # Then nothing left the machine, and the error names each violation and its fix
    assert sent.bodies == []
    assert job_names(aws) == []
    assert {d.rule for d in refused.value.violations} == {
        "required-tags",
        "instance-types",
        "max-instances",
        "max-runtime",
    }
    message = str(refused.value)
    assert "ml.p5.48xlarge" in message
    assert "fix: Set StoppingCondition.MaxRuntimeInSeconds <= 259200" in message


def test_a_compliant_request_goes_through_with_tag_defaults_filled(aws: boto3.Session, policy: Policy) -> None:
    # Given a request without the owner tag, which the policy fills with the user name
    hook = install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    sent = SentRequests().attach(aws)
    request = request_file("compliant.json")
    request["Tags"] = [t for t in request["Tags"] if t["Key"] != "owner"]
    # When it is created
    aws.client("sagemaker").create_training_job(**request)
    # Then the job exists and the request that was sent carried the filled tag
    assert job_names(aws) == [request["TrainingJobName"]]
    (body,) = sent.bodies
    assert {"Key": "owner", "Value": "carol"} in body["Tags"]
    assert hook.last_outcome is not None and hook.last_outcome.filled_tags == {"owner": "carol"}


def test_audit_mode_violations_warn_and_launch(aws: boto3.Session, policy: Policy) -> None:
    install_preflight(aws, policy.overlay({"mode": "audit"}), user="carol", clock=lambda: NOW)
    with pytest.warns(GovernanceWarning, match="instance type"):
        aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))
    assert job_names(aws) == ["llm-finetune-2026-11-21-11-30-00"]


def test_strict_refuses_audit_mode_violations(aws: boto3.Session, policy: Policy) -> None:
    install_preflight(aws, policy.overlay({"mode": "audit"}), user="carol", strict=True, clock=lambda: NOW)
    with pytest.raises(GovernanceViolation):
        aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))


def test_the_hook_can_sit_on_one_client(aws: boto3.Session, policy: Policy) -> None:
    guarded = aws.client("sagemaker")
    install_preflight(guarded, policy, user="carol", clock=lambda: NOW)
    with pytest.raises(GovernanceViolation):
        guarded.create_training_job(**request_file("non-compliant.json"))
    # another client of the same session is not affected
    aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))


def test_installing_twice_keeps_one_hook_and_uninstall_removes_it(aws: boto3.Session, policy: Policy) -> None:
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    second = install_preflight(aws, policy, user="dana", clock=lambda: NOW)
    request = request_file("compliant.json")
    request["Tags"] = [t for t in request["Tags"] if t["Key"] != "owner"]
    sent = SentRequests().attach(aws)
    aws.client("sagemaker").create_training_job(**request)
    assert {"Key": "owner", "Value": "dana"} in sent.bodies[0]["Tags"]  # only the second hook ran
    assert second.last_outcome is not None
    uninstall_preflight(aws)
    aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))  # no longer checked


def test_a_malformed_request_gets_botocores_own_error(aws: boto3.Session, policy: Policy) -> None:
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    request = request_file("compliant.json")
    del request["TrainingJobName"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "could not evaluate" warning either: botocore speaks first
        with pytest.raises(ParamValidationError, match="TrainingJobName"):
            aws.client("sagemaker").create_training_job(**request)


def test_other_operations_are_not_touched(aws: boto3.Session, policy: Policy) -> None:
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_a_policy_file_path_is_accepted(aws: boto3.Session) -> None:
    from tests.sdk.conftest import REPO

    hook = install_preflight(aws, REPO / "examples" / "policy.yaml", user="carol", clock=lambda: NOW)
    assert hook.policy.preflight.tag_defaults == {"owner": "${user}"}
    with pytest.raises(GovernanceViolation):
        aws.client("sagemaker").create_training_job(**request_file("non-compliant.json"))


def test_only_sessions_and_clients_are_accepted(policy: Policy) -> None:
    with pytest.raises(TypeError, match="boto3 Session"):
        install_preflight(object(), policy)


def test_a_request_governance_cannot_read_is_let_through_with_a_warning(
    aws: boto3.Session, policy: Policy
) -> None:
    # botocore accepts a 70-character name (it checks no maximum); our job model does not. Preflight is
    # advisory here: it warns instead of blocking on its own gap, and the service still governs the job.
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    sent = SentRequests().attach(aws)
    request = {**request_file("compliant.json"), "TrainingJobName": "x" * 70}
    with pytest.warns(GovernanceWarning, match="could not evaluate"):
        try:
            aws.client("sagemaker").create_training_job(**request)
        except aws.client("sagemaker").exceptions.ClientError:
            pass  # whether the (fake) service accepts the name is not the point
    assert len(sent.bodies) == 1
