"""Reading a CloudFormation/SAM template as data: a YAML loader that understands the short tags
(``!Ref``, ``!GetAtt``, ...), and the questions every reader of a template asks (which resources of a type,
which logical id a reference names). Used by ``doctor``, the simulator, the bench and the tests alike."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
TEMPLATE_PATH = REPO_ROOT / "template.yaml"

_SHORT_TAGS = (
    "Ref",
    "Sub",
    "GetAtt",
    "If",
    "Equals",
    "Not",
    "And",
    "Or",
    "Join",
    "Select",
    "Split",
    "FindInMap",
    "ImportValue",
    "GetAZs",
    "Base64",
    "Cidr",
    "Condition",
)


class _CfnLoader(yaml.SafeLoader):
    pass


def _make_constructor(tag: str) -> Any:
    key = tag if tag in ("Ref", "Condition") else f"Fn::{tag}"

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {key: value}

    return construct


for _tag in _SHORT_TAGS:
    _CfnLoader.add_constructor(f"!{_tag}", _make_constructor(_tag))


def load_template(path: Path | str = TEMPLATE_PATH) -> dict[str, Any]:
    """The template at ``path`` as data, the caller's own to change: a deep copy of its text's parse.

    The file is read on every call; the parse of a text is kept (the last few texts): PyYAML's pure-Python
    loader takes about 0.2 s of CPU for template.yaml, which every ``smgov`` command, simulator run and
    many tests read again, and a deep copy (shared anchors stay shared, as in a parse) takes 2 ms."""
    loaded: dict[str, Any] = copy.deepcopy(_parsed(Path(path).read_text()))
    return loaded


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Any:
    return yaml.load(text, Loader=_CfnLoader)


def resources_of_type(template: Mapping[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every resource of ``resource_type``."""
    return {k: v for k, v in template.get("Resources", {}).items() if v.get("Type") == resource_type}


def referenced_id(node: Any) -> str | None:
    """The logical id a ``!Ref X`` / ``!GetAtt X.Arn`` names."""
    if isinstance(node, Mapping):
        if "Ref" in node:
            return str(node["Ref"])
        if "Fn::GetAtt" in node:
            target = node["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else str(target).split(".", 1)[0])
    return None
