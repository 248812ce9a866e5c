"""The botocore hook on raw boto3: what every SDK (v2, v3, other tools) ends up calling."""

from __future__ import annotations

import warnings
from typing import Any

import boto3
import pytest
from botocore.exceptions import ParamValidationError

from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.settings import Settings
from smgov.sdk import (
    GovernanceViolation,
    GovernanceWarning,
    install_preflight,
    uninstall_preflight,
)
from tests.sdk.conftest import NOW, REPO, SentRequests, request_file


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


def test_a_request_carrying_a_copied_governance_mark_warns_and_launches(
    aws: boto3.Session, policy: Policy
) -> None:
    # Given a compliant request whose tags were pasted from an evaluated job's ListTags output
    install_preflight(aws, policy, user="carol", clock=lambda: NOW)
    request = request_file("compliant.json")
    request["Tags"].append({"Key": "smgov:compliance-evaluated", "Value": "2026-11-20T09:15:00Z"})
    # When it is created, then the developer is warned of the mark (as smgov preflight warns) and it launches
    with pytest.warns(GovernanceWarning, match="smgov:compliance-evaluated"):
        aws.client("sagemaker").create_training_job(**request)
    assert job_names(aws) == [request["TrainingJobName"]]


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


# ---- the base policy: the deployed stack's parameters, not the template's defaults --------------------


def deploy_stack(monkeypatch: pytest.MonkeyPatch, name: str, **parameters: str) -> list[str]:
    """CloudFormation answering DescribeStacks for stack ``name`` deployed with ``parameters`` (the
    governance template's names); the regions it was asked in are returned."""
    from smgov.adapters.cloudformation import StackOutputs

    asked: list[str] = []

    def described(self: StackOutputs, stack_name: str) -> dict[str, Any]:
        asked.append(self._client.meta.region_name)
        assert stack_name == name
        return {
            "StackName": name,
            "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        }

    monkeypatch.setattr(StackOutputs, "_stack", described)
    return asked


def long_request() -> dict[str, Any]:
    request = request_file("compliant.json")
    request["StoppingCondition"] = {"MaxRuntimeInSeconds": 48 * 3600}
    return request


def test_the_base_policy_is_the_named_stacks(
    aws: boto3.Session, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stack deployed with MaxRuntimeHours=24 (the template's default is 72) and a policy document
    # that leaves max-runtime to the stack
    monkeypatch.delenv("MAX_RUNTIME_HOURS", raising=False)
    asked = deploy_stack(monkeypatch, "gov", MaxRuntimeHours="24")
    # When the preflight is installed with that stack
    hook = install_preflight(aws, REPO / "examples" / "policy.yaml", stack="gov", user="carol", clock=lambda: NOW)
    # Then a 48-hour job is refused, as the deployed service would stop it, and nothing is said on stderr
    with pytest.raises(GovernanceViolation) as refused:
        aws.client("sagemaker").create_training_job(**long_request())
    assert {d.rule for d in refused.value.violations} == {"max-runtime"}
    assert "no stack named" not in capsys.readouterr().err
    assert asked == ["us-east-1"]  # read through the session's own credentials and region
    assert hook.policy.rules


def test_settings_are_accepted_in_place_of_a_stack(aws: boto3.Session, capsys: pytest.CaptureFixture[str]) -> None:
    settings = Settings.from_env({"GOVERNANCE_MODE": "enforce", "MAX_RUNTIME_HOURS": "24"})
    install_preflight(aws, REPO / "examples" / "policy.yaml", settings=settings, user="carol", clock=lambda: NOW)
    with pytest.raises(GovernanceViolation):
        aws.client("sagemaker").create_training_job(**long_request())
    assert "no stack named" not in capsys.readouterr().err


def test_without_a_stack_stderr_says_which_defaults_judged(
    aws: boto3.Session, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no stack: the template's defaults (72 h) judge, so a 48-hour job launches
    monkeypatch.delenv("MAX_RUNTIME_HOURS", raising=False)
    install_preflight(aws, REPO / "examples" / "policy.yaml", user="carol", clock=lambda: NOW)
    aws.client("sagemaker").create_training_job(**long_request())
    # and the developer is told which parameter values those were, and how to name the stack
    err = capsys.readouterr().err
    assert "no stack named" in err and "MaxRuntimeHours=72" in err and "stack=" in err


# ---- stack= and no document path: the stack's own document (its SSM parameter) ---------------------------

STACK_DOCUMENT = "teams:\n  vision:\n    rules:\n      - {id: instance-types, patterns: ['ml.g5.*', 'ml.p5.*']}\n"


def vision_p5() -> dict[str, Any]:
    request = request_file("compliant.json")
    request["ResourceConfig"] = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 200}
    request["Tags"] = [{"Key": "team", "Value": "vision"}]
    return request


def deploy_governed_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("GOVERNANCE_MODE", "REQUIRED_TAGS", "ALLOWED_INSTANCE_TYPES", "POLICY_PARAMETER_NAME"):
        monkeypatch.delenv(variable, raising=False)
    deploy_stack(
        monkeypatch,
        "gov",
        GovernanceMode="enforce",
        RequiredTags="team",
        AllowedInstanceTypes="ml.g5.*,ml.m5.*",
        PolicyParameterName="/gov/policy",
    )


def test_with_a_stack_and_no_document_path_the_stacks_document_judges(
    aws: boto3.Session, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stack whose SSM document lets team vision use ml.p5.* (its parameters allow ml.g5/ml.m5 only)
    deploy_governed_stack(monkeypatch)
    aws.client("ssm").put_parameter(Name="/gov/policy", Type="String", Value=STACK_DOCUMENT)
    # When the preflight is installed with the stack and no document path
    install_preflight(aws, stack="gov", user="carol", clock=lambda: NOW)
    # Then a vision job on ml.p5 launches, as the deployed service lets it run, and stderr says which
    # document judged
    aws.client("sagemaker").create_training_job(**vision_p5())
    assert job_names(aws) == [vision_p5()["TrainingJobName"]]
    assert "SSM parameter /gov/policy, version 1" in capsys.readouterr().err


def test_with_a_stack_an_unreadable_document_is_an_error_not_a_guess(
    aws: boto3.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    from smgov.sdk import StackPolicyUnreadable

    # Given a stack whose document the developer may not read
    deploy_governed_stack(monkeypatch)
    aws.client("ssm").put_parameter(Name="/gov/policy", Type="String", Value=STACK_DOCUMENT)

    def refused(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetParameter")

    aws.events.register("before-call.ssm.GetParameter", refused)
    # When the preflight is installed with the stack, then it is not: the error names the parameter
    with pytest.raises(StackPolicyUnreadable, match="/gov/policy"):
        install_preflight(aws, stack="gov", user="carol", clock=lambda: NOW)
    with pytest.raises(StackPolicyUnreadable):
        governed_sagemaker_session_or_skip(aws)


def governed_sagemaker_session_or_skip(session: boto3.Session) -> Any:
    """``governed_sagemaker_session(stack=)``: the SDK's own entry (its import needs the ``sdk`` extra)."""
    from tests.sdk.conftest import require_sagemaker_sdk

    require_sagemaker_sdk()
    from smgov.sdk import governed_sagemaker_session

    return governed_sagemaker_session(stack="gov", boto_session=session, user="carol", clock=lambda: NOW)


def test_a_stack_or_settings_with_a_ready_policy_is_a_usage_error(aws: boto3.Session, policy: Policy) -> None:
    with pytest.raises(ValueError, match="not a Policy"):
        install_preflight(aws, policy, stack="gov")
    with pytest.raises(ValueError, match="not both"):
        install_preflight(aws, None, stack="gov", settings=Settings.from_env({}))
