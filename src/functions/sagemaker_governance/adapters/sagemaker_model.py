"""What SageMaker's API accepts, read from botocore's service model (never a hand-written copy).

``create_training_job_shape`` turns the ``CreateTrainingJob`` input shape into the plain
``RequestShape`` the clone planner walks; ``validate_create_request`` runs botocore's own parameter
validation on a planned request (the CLI's dry run, tests, and the launcher before it calls AWS).

The clone planner's types are imported by the functions that build or check a request: the guard
stopper reads ``unmodelled_paths`` only and never imports the planner (cold start, BENCHMARKS.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import botocore.session
from botocore.exceptions import ParamValidationError
from botocore.model import ServiceModel, Shape, StructureShape
from botocore.validate import validate_parameters

if TYPE_CHECKING:
    from sagemaker_governance.domain.clone import RequestShape, ShapeNode

CREATE_OPERATION = "CreateTrainingJob"
DESCRIBE_OPERATION = "DescribeTrainingJob"
# How the model documents a member that the shared shape has but CreateTrainingJob refuses, e.g.
# ResourceConfig.SelectedInstanceType: "This field is read-only and isn't accepted in CreateTrainingJob
# requests." (a test lists what this finds in the installed model).
_NOT_ACCEPTED = re.compile(
    r"(?:is|are)n[\u2019']t accepted in CreateTrainingJob|not accepted in CreateTrainingJob"
)


def _text(documentation: str | None) -> str:
    return re.sub(r"<[^>]+>", "", documentation or "")


@cache
def sagemaker_model() -> ServiceModel:
    """The SageMaker service model of the installed botocore (loaded once)."""
    return botocore.session.get_session().get_service_model("sagemaker")


def _collect(shape: Shape, shapes: dict[str, ShapeNode]) -> str:
    from sagemaker_governance.domain.clone import ShapeNode

    name = shape.name
    if name in shapes:
        return name
    kind = shape.type_name
    minimum = shape.metadata.get("min")
    min_length = int(minimum) if isinstance(minimum, int | float) and kind in ("string", "list", "map") else None
    if kind == "structure":
        shapes[name] = ShapeNode(kind="structure")  # placeholder first: recursive shapes terminate
        members = {member: _collect(sub, shapes) for member, sub in shape.members.items()}  # type: ignore[attr-defined]
        read_only = frozenset(
            member
            for member, sub in shape.members.items()  # type: ignore[attr-defined]
            if _NOT_ACCEPTED.search(_text(sub.documentation))
        )
        shapes[name] = ShapeNode(kind="structure", members=members, read_only_members=read_only)
    elif kind == "list":
        shapes[name] = ShapeNode(kind="list")
        item = _collect(shape.member, shapes)  # type: ignore[attr-defined]
        shapes[name] = ShapeNode(kind="list", item=item, min_length=min_length)
    elif kind == "map":
        shapes[name] = ShapeNode(kind="map")
        item = _collect(shape.value, shapes)  # type: ignore[attr-defined]
        shapes[name] = ShapeNode(kind="map", item=item, min_length=min_length)
    else:
        shapes[name] = ShapeNode(kind="scalar", min_length=min_length)
    return name


def create_training_job_shape(model: ServiceModel | None = None) -> RequestShape:
    """``CreateTrainingJob``'s input shape, recursively, plus the read-only fields of the description."""
    model = model or sagemaker_model()
    return _shape_of(model)


def _structure(shape: StructureShape | None, what: str) -> StructureShape:
    if shape is None:
        raise RuntimeError(f"botocore's SageMaker model has no {what} shape")
    return shape


def _create_input(model: ServiceModel) -> StructureShape:
    return _structure(model.operation_model(CREATE_OPERATION).input_shape, f"{CREATE_OPERATION} input")


@cache
def _shape_of(model: ServiceModel) -> RequestShape:
    from sagemaker_governance.domain.clone import RequestShape

    create = _create_input(model)
    describe = _structure(model.operation_model(DESCRIBE_OPERATION).output_shape, f"{DESCRIBE_OPERATION} output")
    shapes: dict[str, ShapeNode] = {}
    root = _collect(create, shapes)
    read_only = frozenset(describe.members) - frozenset(create.members)
    return RequestShape(root=root, shapes=shapes, read_only=read_only)


def name_constraints(model: ServiceModel | None = None) -> dict[str, Any]:
    """The model's constraints on ``TrainingJobName`` and ``Tags`` (a test checks the planner agrees)."""
    members = _create_input(model or sagemaker_model()).members
    return {"name": dict(members["TrainingJobName"].metadata), "tags": dict(members["Tags"].metadata)}


def validate_create_request(request: dict[str, Any], model: ServiceModel | None = None) -> None:
    """Raise ``InvalidCloneRequest`` unless botocore would send ``request`` as a CreateTrainingJob."""
    from sagemaker_governance.domain.clone import InvalidCloneRequest

    shape = _create_input(model or sagemaker_model())
    try:
        validate_parameters(request, shape)
    except ParamValidationError as exc:
        raise InvalidCloneRequest(f"{CREATE_OPERATION} request is invalid: {exc}") from exc


def read_only_members(model: ServiceModel | None = None) -> set[str]:
    """``Shape.Member`` of every member the model documents as not accepted by CreateTrainingJob."""
    shape = create_training_job_shape(model)
    return {f"{name}.{member}" for name, node in shape.shapes.items() for member in node.read_only_members}


def unmodelled_paths(value: Any, model: ServiceModel | None = None) -> list[str]:
    """Paths of a raw ``DescribeTrainingJob`` answer (the JSON AWS sent) that botocore's model of the answer
    does not know: what botocore drops while parsing, so no clone can carry it."""
    model = model or sagemaker_model()
    out: list[str] = []
    _walk(value, _structure(model.operation_model(DESCRIBE_OPERATION).output_shape, "output"), "", out)
    return out


def _walk(value: Any, shape: Shape, path: str, out: list[str]) -> None:
    if shape.type_name == "structure" and isinstance(value, Mapping):
        members = shape.members  # type: ignore[attr-defined]
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in members:
                out.append(where)
            else:
                _walk(item, members[key], where, out)
    elif shape.type_name == "list" and isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, shape.member, f"{path}[{index}]", out)  # type: ignore[attr-defined]
    elif shape.type_name == "map" and isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, shape.value, f"{path}.{key}", out)  # type: ignore[attr-defined]
