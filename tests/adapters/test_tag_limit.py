"""SageMaker's 50 tags per resource: the double refuses a resource beyond it (CreateTrainingJob and AddTags, the
tags already there counted), and a clone is planned with room for every tag the service writes on it later
(``smgov:compliance-evaluated``, ``smgov:resume-after``, ``smgov:resume-settled``): a mark that cannot be
written would lose a deferred resume (its AddTags refused, the delivery retried to the dead-letter queue)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest

from sagemaker_governance.adapters.sagemaker import SageMakerJobMarks
from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.domain.clone import LATER_MARKS, MAX_TAGS, ClonePlanError, ResumeReason, plan_clone
from sagemaker_governance.domain.errors import AdapterError
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.builders import create_request
from tests.resume_builders import failed_description

SERVICE = Path(__file__).resolve().parents[2] / "src/functions/sagemaker_governance/service"


def marks_the_service_writes() -> set[str]:
    """Every tag key the service passes to ``JobMarksPort.mark`` (its only ``AddTags``), read from the code: the
    second argument of each ``.mark(...)`` call, resolved in the module that makes it."""
    keys: set[str] = set()
    for path in sorted(SERVICE.glob("*.py")):
        module = importlib.import_module(f"sagemaker_governance.service.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "mark":
                key = node.args[1]
                assert isinstance(key, ast.Name), f"{path.name}:{node.lineno}: a mark's key is a named constant"
                keys.add(getattr(module, key.id))
    return keys


def fullest_plan(**marks: str) -> Any:
    """The clone of a failed job carrying as many of its owner's tags as the planner accepts."""
    for count in range(MAX_TAGS, -1, -1):
        try:
            return plan_clone(
                failed_description(),
                {f"cost-{i}": "v" for i in range(count)},
                create_training_job_shape(),
                reason=ResumeReason.FAILED,
                marks=marks,
            )
        except ClonePlanError:
            continue
    raise AssertionError("no plan at all")


def test_the_double_refuses_a_51st_tag_but_overwrites_a_50th(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    # Given a job created with 50 tags (SageMaker's limit per resource), one of them reserved to AWS
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(MAX_TAGS)] + [{"Key": "aws:x", "Value": "v"}]
    SageMakerLauncher(sagemaker_client).create_training_job({**create_request("full-1"), "Tags": tags})
    arn = fake_sagemaker.jobs["full-1"]["TrainingJobArn"]
    marks = SageMakerJobMarks(sagemaker_client)
    # When an existing key is written again: an overwrite, accepted
    marks.mark(arn, "k0", "w")
    # Then a new key is refused (51 tags), and the job keeps its 50 (and the aws: one)
    with pytest.raises(AdapterError, match="ValidationException"):
        marks.mark(arn, "smgov:resume-after", "2026-01-01T00:15:00Z")
    assert len(fake_sagemaker.tags[arn]) == MAX_TAGS + 1


def test_the_double_refuses_a_job_created_with_51_tags(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(MAX_TAGS + 1)]
    with pytest.raises(AdapterError):
        SageMakerLauncher(sagemaker_client).create_training_job({**create_request("full-1"), "Tags": tags})
    assert fake_sagemaker.jobs == {}


def test_the_fullest_clone_still_takes_every_mark_the_service_writes_on_a_job(
    fake_sagemaker: FakeSageMaker, sagemaker_client: Any
) -> None:
    # Given the clone with the most tags the planner plans (the lineage's fault marks too), created
    plan = fullest_plan(
        **{"smgov:failure": "gpu@algo-1", "smgov:repeat-faults": "1", "smgov:sagemaker-retries": "2"}
    )
    SageMakerLauncher(sagemaker_client).create_training_job(plan.request)
    arn = fake_sagemaker.jobs[plan.name]["TrainingJobArn"]
    # When the service writes each of its marks on it (compliance's, a deferred resume's, its settling)
    written = marks_the_service_writes()
    assert len(written) >= 3  # the scan finds the calls at all
    for key in sorted(written):
        SageMakerJobMarks(sagemaker_client).mark(arn, key, "x")
    # Then every one was accepted: the clone holds them all within SageMaker's limit
    assert written <= {tag["Key"] for tag in fake_sagemaker.tags[arn]}
    assert len(fake_sagemaker.tags[arn]) <= MAX_TAGS


def test_every_mark_the_service_writes_has_its_room_reserved_in_a_clone() -> None:
    assert marks_the_service_writes() <= set(LATER_MARKS)
