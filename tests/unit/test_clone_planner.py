"""The clone planner: faithful CreateTrainingJob requests, bounded deterministic names, lineage tags."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemaker_governance.adapters.sagemaker_model import (
    create_training_job_shape,
    name_constraints,
    validate_create_request,
)
from sagemaker_governance.domain.clone import (
    GOVERNANCE_MARKS,
    LATER_MARKS,
    MAX_TAGS,
    TAG_ATTEMPT,
    TAG_REASON,
    TAG_ROOT,
    TAG_SOURCE,
    ClonePlanError,
    RequestShape,
    ResumeReason,
    ShapeNode,
    TooManyTags,
    clone_name,
    plan_clone,
    role_allowed,
)
from sagemaker_governance.domain.job import NAME_MAX, is_valid_job_name
from tests.resume_builders import TAGS, failed_description, rich_description, spot_description

SHAPE = create_training_job_shape()


def tags_of(request: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in request["Tags"]}


def test_every_accepted_field_is_carried_and_read_only_ones_dropped() -> None:
    # Given a description with VPC, checkpoint, instance groups, warm pool, debugger and profiler rules
    # (with evaluation statuses, at the top level and nested), TensorBoard, experiment, retry strategy
    description = rich_description()
    # When a clone is planned
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED)
    request = plan.request
    # Then it passes botocore's validation for CreateTrainingJob
    validate_create_request(request)
    # and every field CreateTrainingJob accepts that the description holds is carried over unchanged
    for field in (
        "HyperParameters",
        "AlgorithmSpecification",
        "RoleArn",
        "InputDataConfig",
        "OutputDataConfig",
        "ResourceConfig",
        "VpcConfig",
        "StoppingCondition",
        "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption",
        "EnableManagedSpotTraining",
        "CheckpointConfig",
        "DebugHookConfig",
        "ProfilerConfig",
        "TensorBoardOutputConfig",
        "ExperimentConfig",
        "Environment",
        "RetryStrategy",
    ):
        assert request[field] == description[field], field
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800  # On-Demand keeps its warm pool
    # and read-only sub-fields are stripped from the rule configurations
    (debug_rule,) = request["DebugRuleConfigurations"]
    assert "RuleEvaluationStatus" not in debug_rule and "LastModifiedTime" not in debug_rule
    assert debug_rule["RuleParameters"] == {"rule_to_invoke": "LossNotDecreasing"}
    assert "RuleEvaluationStatus" not in request["ProfilerRuleConfigurations"][0]
    # and the description's own read-only fields are gone
    for read_only in (
        "TrainingJobArn",
        "TrainingJobStatus",
        "SecondaryStatus",
        "FailureReason",
        "CreationTime",
        "SecondaryStatusTransitions",
        "DebugRuleEvaluationStatuses",
        "ProfilerRuleEvaluationStatuses",
        "ProfilingStatus",
        "ModelArtifacts",
        "WarmPoolStatus",
        "FinalMetricDataList",
        "TrainingTimeInSeconds",
    ):
        assert read_only not in request, read_only
    # and only the nested stray fields are reported as not carried (top-level read-only fields are expected)
    assert set(plan.unexpected_drops) == {
        "DebugRuleConfigurations[0].RuleEvaluationStatus",
        "DebugRuleConfigurations[0].LastModifiedTime",
        "ProfilerRuleConfigurations[0].RuleEvaluationStatus",
    }


def test_a_clone_never_changes_role_image_vpc_or_network_isolation() -> None:
    description = rich_description()
    for on_demand in (False, True):
        request = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED, on_demand=on_demand).request
        assert request["RoleArn"] == description["RoleArn"]
        assert (
            request["AlgorithmSpecification"]["TrainingImage"]
            == description["AlgorithmSpecification"]["TrainingImage"]
        )
        assert request["VpcConfig"] == description["VpcConfig"]
        assert request["EnableNetworkIsolation"] is True


def test_fields_come_from_botocore_not_from_a_list() -> None:
    # A field the planner has never heard of is carried when the model accepts it, dropped when not.
    shape = RequestShape(
        root="Req",
        shapes={
            "Req": ShapeNode(kind="structure", members={"TrainingJobName": "S", "FutureConfig": "Future"}),
            "Future": ShapeNode(kind="structure", members={"Knob": "S"}),
            "S": ShapeNode(kind="scalar", min_length=1),
        },
    )
    description = {"TrainingJobName": "job-1", "FutureConfig": {"Knob": "on", "Status": "x"}, "Other": 1}
    plan = plan_clone(description, {}, shape, reason=ResumeReason.MANUAL)
    assert plan.request["FutureConfig"] == {"Knob": "on"}
    assert "Other" not in plan.request
    assert set(plan.unexpected_drops) == {"FutureConfig.Status", "Other"}


def test_empty_values_the_request_would_reject_are_dropped() -> None:
    description = failed_description(InputDataConfig=[], HyperParameters={})
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED)
    assert "InputDataConfig" not in plan.request  # min 1: an empty list is invalid
    assert plan.request["HyperParameters"] == {}  # min 0: kept
    validate_create_request(plan.request)


def test_spot_to_on_demand_keeps_checkpoints_and_drops_max_wait() -> None:
    # Given a Spot job with a checkpoint
    description = spot_description()
    # When an On-Demand clone is planned
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.SPOT_INTERRUPTED, on_demand=True)
    request = plan.request
    # Then it is not Spot, has no MaxWaitTimeInSeconds, keeps the runtime limit and the checkpoint
    assert request["EnableManagedSpotTraining"] is False
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 86_400}
    assert request["CheckpointConfig"] == description["CheckpointConfig"]
    assert "KeepAlivePeriodInSeconds" not in request["ResourceConfig"]  # no warm pool is invented
    assert plan.on_demand
    validate_create_request(request)


def test_a_spot_clone_never_carries_a_warm_pool() -> None:
    description = spot_description()
    description["ResourceConfig"] = {**description["ResourceConfig"], "KeepAlivePeriodInSeconds": 0}
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED)
    assert plan.request["EnableManagedSpotTraining"] is True
    assert plan.request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 172_800
    assert "KeepAlivePeriodInSeconds" not in plan.request["ResourceConfig"]
    assert not plan.on_demand


def test_aws_tags_are_not_copied_and_lineage_tags_are_added() -> None:
    tags = {
        **TAGS,
        "aws:cloudformation:stack-name": "ml",
        "AWS:Reserved": "x",
        "sagemaker:domain-arn": "arn:aws:sagemaker:us-east-1:123456789012:domain/d-1",
    }
    plan = plan_clone(failed_description("llm-sft-1"), tags, SHAPE, reason=ResumeReason.FAILED)
    assert tags_of(plan.request) == {
        **TAGS,
        "sagemaker:domain-arn": "arn:aws:sagemaker:us-east-1:123456789012:domain/d-1",
        TAG_ROOT: "llm-sft-1",
        TAG_SOURCE: "llm-sft-1",
        TAG_ATTEMPT: "1",
        TAG_REASON: "failed-transient",
    }


def test_too_many_tags_for_the_lineage_and_the_later_marks_is_refused_not_truncated() -> None:
    # Given the owner's tags, the 4 lineage tags and room for the 3 marks governance writes later: 51
    room = MAX_TAGS - 4 - len(LATER_MARKS)
    with pytest.raises(TooManyTags):
        plan_clone(
            failed_description(), {f"k{i}": "v" for i in range(room + 1)}, SHAPE, reason=ResumeReason.FAILED
        )
    # and one fewer fits: the clone has exactly the room its later marks take
    plan = plan_clone(failed_description(), {f"k{i}": "v" for i in range(room)}, SHAPE, reason=ResumeReason.FAILED)
    assert len(plan.request["Tags"]) + len(LATER_MARKS) == MAX_TAGS
    validate_create_request(plan.request)


DECLARED = {"smgov:idle-minutes": "90", "smgov:progress-minutes": "120"}


def test_the_owner_s_quiet_phase_declarations_are_carried_and_governance_s_marks_are_not() -> None:
    # Given a failed clone that carries its owner's declarations and every mark governance writes on a job
    marks = dict.fromkeys(GOVERNANCE_MARKS, "x") | {
        TAG_ROOT: "llm-sft-1",
        TAG_SOURCE: "llm-sft-1",
        TAG_ATTEMPT: "1",
    }
    source = {**TAGS, **DECLARED, **marks}
    # When the next clone is planned
    plan = plan_clone(failed_description("llm-sft-1-r1"), source, SHAPE, reason=ResumeReason.FAILED)
    # Then the declarations come along (the clone's guards keep the owner's windows), none of the old marks
    # does, and the lineage tags are the new generation's
    assert tags_of(plan.request) == {
        **TAGS,
        **DECLARED,
        TAG_ROOT: "llm-sft-1",
        TAG_SOURCE: "llm-sft-1-r1",
        TAG_ATTEMPT: "2",
        TAG_REASON: "failed-transient",
    }


def test_the_tag_limit_counts_the_carried_declarations() -> None:
    # Given the owner's tags, 2 of them declarations: with the 4 lineage tags and the later marks' room, 50
    fits = {f"k{i}": "v" for i in range(MAX_TAGS - 4 - len(LATER_MARKS) - len(DECLARED))} | DECLARED
    plan = plan_clone(failed_description(), fits, SHAPE, reason=ResumeReason.FAILED)
    assert len(plan.request["Tags"]) + len(LATER_MARKS) == MAX_TAGS
    # and one more is refused, not truncated (a declaration is never the tag silently lost)
    with pytest.raises(TooManyTags):
        plan_clone(failed_description(), {**fits, "one-more": "v"}, SHAPE, reason=ResumeReason.FAILED)


KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def keyed_spot_job(instance_type: str = "ml.p2.16xlarge", key: str | None = KEY) -> dict[str, Any]:
    description = spot_description("bert-spot-1")
    description["ResourceConfig"] = {"InstanceType": instance_type, "InstanceCount": 2, "VolumeSizeInGB": 200}
    if key:
        description["ResourceConfig"]["VolumeKmsKeyId"] = key
    return description


@pytest.mark.parametrize("target", ["ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.x9.48xlarge"])
def test_a_job_with_a_volume_key_never_moves_to_a_type_that_may_have_local_storage(target: str) -> None:
    # Given a Spot job whose volume is encrypted with the owner's KMS key, moved to a type with local
    # storage (or one not known to have none), on which SageMaker refuses a VolumeKmsKeyId
    with pytest.raises(ClonePlanError, match="VolumeKmsKeyId"):
        plan_clone(keyed_spot_job(), TAGS, SHAPE, reason=ResumeReason.SPOT_ALTERNATIVE, instance_type=target)


def test_a_job_with_a_volume_key_moves_to_an_ebs_only_type_keeping_its_key() -> None:
    plan = plan_clone(
        keyed_spot_job("ml.c5.18xlarge"),
        TAGS,
        SHAPE,
        reason=ResumeReason.SPOT_ALTERNATIVE,
        instance_type="ml.p2.16xlarge",
    )
    assert plan.request["ResourceConfig"] == {
        "InstanceType": "ml.p2.16xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 200,
        "VolumeKmsKeyId": KEY,
    }


def test_a_job_without_a_volume_key_moves_to_a_type_with_local_storage() -> None:
    plan = plan_clone(
        keyed_spot_job(key=None),
        TAGS,
        SHAPE,
        reason=ResumeReason.SPOT_ALTERNATIVE,
        instance_type="ml.p4d.24xlarge",
    )
    assert plan.request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert "VolumeKmsKeyId" not in plan.request["ResourceConfig"]


def test_a_63_character_name_gets_a_bounded_valid_clone_name() -> None:
    name = "a" * 30 + "-" + "b" * 32
    assert len(name) == 63
    plan = plan_clone(failed_description(name), TAGS, SHAPE, reason=ResumeReason.FAILED)
    assert len(plan.name) <= NAME_MAX and is_valid_job_name(plan.name)
    assert plan.name != name and plan.name.endswith("-r1")
    assert tags_of(plan.request)[TAG_ROOT] == name
    validate_create_request(plan.request)


def test_a_clone_of_a_clone_of_a_clone_stays_bounded_and_counts_attempts() -> None:
    # Given a root job with a long name
    description, tags = failed_description("x" * 63), dict(TAGS)
    names = []
    for expected_attempt in (1, 2, 3):
        # When each generation is cloned from the one before
        plan = plan_clone(description, tags, SHAPE, reason=ResumeReason.FAILED)
        # Then the attempt grows, the root stays, the name stays bounded
        assert plan.attempt == expected_attempt
        assert plan.lineage.root == "x" * 63
        assert len(plan.name) <= NAME_MAX
        names.append(plan.name)
        description, tags = failed_description(plan.name), tags_of(plan.request)
    assert len(set(names)) == 3 and [n[-3:] for n in names] == ["-r1", "-r2", "-r3"]


def test_the_same_source_always_yields_the_same_plan() -> None:
    first = plan_clone(rich_description(), TAGS, SHAPE, reason=ResumeReason.FAILED)
    second = plan_clone(rich_description(), TAGS, SHAPE, reason=ResumeReason.FAILED)
    assert first.request == second.request


def test_inconsistent_lineage_tags_are_refused() -> None:
    with pytest.raises(ClonePlanError, match="incomplete"):
        plan_clone(failed_description(), {TAG_ROOT: "root"}, SHAPE, reason=ResumeReason.FAILED)
    with pytest.raises(ClonePlanError, match="attempt number"):
        plan_clone(failed_description(), {TAG_ROOT: "root", TAG_ATTEMPT: "two"}, SHAPE, reason=ResumeReason.FAILED)
    # tags copied onto a job that would then name its clone after itself
    with pytest.raises(ClonePlanError, match="after itself"):
        plan_clone(
            failed_description("root-r2"), {TAG_ROOT: "root", TAG_ATTEMPT: "1"}, SHAPE, reason=ResumeReason.FAILED
        )


def test_planner_constraints_match_botocores_model() -> None:
    constraints = name_constraints()
    assert constraints["name"]["max"] == NAME_MAX
    assert constraints["name"]["pattern"] == "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    assert constraints["tags"]["max"] == MAX_TAGS


def test_role_allowed_matches_name_with_path() -> None:
    arn = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole-2024"
    assert role_allowed(arn, ("*SageMaker*",))
    assert role_allowed(arn, ("service-role/AmazonSageMaker-*",))
    assert not role_allowed(arn, ("ml-*",))
    assert not role_allowed(None, ("*",))


JOB_NAMES = st.from_regex(re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"), fullmatch=True).filter(
    lambda n: len(n) <= NAME_MAX
)


@given(root=JOB_NAMES, attempt=st.integers(min_value=1, max_value=9999))
def test_clone_names_are_valid_bounded_and_never_the_root(root: str, attempt: int) -> None:
    name = clone_name(root, attempt)
    assert is_valid_job_name(name)
    assert name != root
    assert clone_name(root, attempt) == name  # deterministic


@given(root=JOB_NAMES, first=st.integers(1, 9999), second=st.integers(1, 9999))
def test_attempts_of_one_lineage_never_share_a_name(root: str, first: int, second: int) -> None:
    if first != second:
        assert clone_name(root, first) != clone_name(root, second)


@given(a=JOB_NAMES, b=JOB_NAMES, attempt=st.integers(1, 50))
def test_different_roots_of_one_length_get_different_names(a: str, b: str, attempt: int) -> None:
    # Roots that fit keep their full name; long roots share at most a prefix and differ by a hash (a
    # 24-bit collision, or a crafted name equal to another's cut + hash, is caught at creation: the
    # existing job's lineage tag shows it is not our clone).
    if a != b and len(a) == len(b):
        assert clone_name(a, attempt) != clone_name(b, attempt)


# ---- issue 16 item 4: read-only members the model documents, algorithm jobs, fields botocore drops ----


def test_read_only_members_come_from_the_model_documentation() -> None:
    # Given botocore's SageMaker model, when its CreateTrainingJob shapes are read, then the members it
    # documents as "read-only and isn't accepted in CreateTrainingJob" are found (not a list of ours).
    from sagemaker_governance.adapters.sagemaker_model import read_only_members

    assert {"ResourceConfig.SelectedInstanceType", "ResourceConfig.SelectedInstanceCount"} <= read_only_members()


def test_selected_instance_type_is_dropped_as_expected() -> None:
    # Given a job launched from InstancePreferences (SageMaker reports what it selected),
    resources = {
        "InstancePreferences": [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.p4d.24xlarge"}],
        "InstanceCount": 2,
        "VolumeSizeInGB": 100,
        "SelectedInstanceType": "ml.p4d.24xlarge",
        "SelectedInstanceCount": 2,
    }
    description = failed_description(ResourceConfig=resources)
    model_accepts = SHAPE.shapes[SHAPE.shapes[SHAPE.root].members["ResourceConfig"]].members
    if "InstancePreferences" not in model_accepts:
        pytest.skip("this botocore has no InstancePreferences")
    # When a clone is planned, then the clone asks again with the preferences, the selection is not
    # carried (CreateTrainingJob refuses it) and that is not reported as a loss.
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED)
    assert "SelectedInstanceType" not in plan.request["ResourceConfig"]
    assert "SelectedInstanceCount" not in plan.request["ResourceConfig"]
    assert plan.request["ResourceConfig"]["InstancePreferences"] == resources["InstancePreferences"]
    assert plan.unexpected_drops == ()
    validate_create_request(plan.request)


@pytest.mark.parametrize("image", ["", "123456789012.dkr.ecr.us-east-1.amazonaws.com/algo:1"])
def test_an_algorithm_job_never_names_a_training_image(image: str) -> None:
    # AlgorithmName and TrainingImage are mutually exclusive (botocore's model); a description of an
    # algorithm job may carry TrainingImage (empty or resolved): the clone names the algorithm only.
    algorithm = {"AlgorithmName": "my-algo", "TrainingImage": image, "TrainingInputMode": "File"}
    plan = plan_clone(
        failed_description(AlgorithmSpecification=algorithm), TAGS, SHAPE, reason=ResumeReason.FAILED
    )
    assert plan.request["AlgorithmSpecification"] == {"AlgorithmName": "my-algo", "TrainingInputMode": "File"}
    assert "AlgorithmSpecification.TrainingImage" in plan.dropped and plan.unexpected_drops == ()
    validate_create_request(plan.request)


def test_fields_botocore_never_read_are_reported() -> None:
    # Given a description the adapter marked with fields botocore's model does not know (it dropped them),
    from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY

    description = {**failed_description(), UNMODELLED_FIELDS_KEY: ["FutureField", "ResourceConfig.NewKnob"]}
    plan = plan_clone(description, TAGS, SHAPE, reason=ResumeReason.FAILED)
    # then the plan reports them, the mark never reaches the request
    assert plan.unmodelled == ("FutureField", "ResourceConfig.NewKnob")
    assert plan.evidence()["fields_unknown_to_botocore"] == ["FutureField", "ResourceConfig.NewKnob"]
    assert UNMODELLED_FIELDS_KEY not in plan.request and plan.unexpected_drops == ()
    validate_create_request(plan.request)
