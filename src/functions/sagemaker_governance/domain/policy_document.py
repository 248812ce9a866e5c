"""Reading a policy document (YAML or JSON text) into a validated ``Policy``, with precise errors."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sagemaker_governance.domain.policy import Policy, merge_documents

if TYPE_CHECKING:
    import yaml

MAX_DOCUMENT_BYTES = 64 * 1024


class PolicyDocumentError(ValueError):
    """A policy document that cannot be used; ``errors`` lists each problem with its location."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid policy document:\n" + "\n".join(f"  - {e}" for e in errors))
        self.errors = errors


@cache
def _strict_loader() -> type[yaml.SafeLoader]:
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping (YAML and JSON loaders keep the
    last silently: a second ``rules:`` would drop the first list). Merge keys (``<<``) still work.

    PyYAML is imported here, at the first document parsed, not with this module: a deployment without a
    policy document never parses one, and its functions do not load PyYAML at cold start (BENCHMARKS.md)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # an unhashable key: the base constructor reports it
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"duplicate key {key!r}",
                        key_node.start_mark,
                    )
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def parse_document(text: str) -> dict[str, Any]:
    """YAML (a superset of JSON) to a mapping; an empty document is an empty mapping."""
    if len(text.encode()) > MAX_DOCUMENT_BYTES:
        raise PolicyDocumentError([f"document is larger than {MAX_DOCUMENT_BYTES} bytes"])
    import yaml  # at the first document parsed (_strict_loader says why)

    try:
        loaded = yaml.load(text, Loader=_strict_loader())
    except RecursionError as exc:
        raise PolicyDocumentError(["the document is nested too deeply"]) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyDocumentError([f"{where}not valid YAML/JSON: {problem}"]) from exc
    except ValueError as exc:  # a scalar YAML resolves but cannot build: 2026-02-30, a 5000-digit integer
        raise PolicyDocumentError([f"not valid YAML/JSON: {exc}"]) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise PolicyDocumentError([f"the document must be a mapping, got {type(loaded).__name__}"])
    return {str(k): v for k, v in loaded.items()}


def build_policy(base: Mapping[str, Any], document: Mapping[str, Any] | None = None) -> Policy:
    """Validate ``base`` with ``document`` merged on top; raise ``PolicyDocumentError`` listing every error."""
    merged = merge_documents(base, document or {})
    try:
        return Policy.model_validate(merged)
    except ValidationError as exc:
        raise PolicyDocumentError(format_errors(exc)) from exc


def load_policy_text(text: str, base: Mapping[str, Any] | None = None) -> Policy:
    return build_policy(base or {}, parse_document(text))


def format_errors(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors():
        location = ".".join(str(part) for part in err["loc"]) or "<document>"
        value = err.get("input")
        shown = f" (got {value!r})" if isinstance(value, str | int | float | bool) else ""
        out.append(f"{location}: {err['msg']}{shown}")
    return out
