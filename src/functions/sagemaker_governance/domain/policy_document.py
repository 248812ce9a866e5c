"""Reading a policy document (YAML or JSON text) into a validated ``Policy``, with precise errors; and the
deploy-time layer (the template's Parameters as a document), whose parts that fail validation are replaced
by the schema's defaults rather than failing the whole (``build_base_policy``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from sagemaker_governance.domain.policy import Policy, merge_documents

if TYPE_CHECKING:
    import yaml

MAX_DOCUMENT_BYTES = 64 * 1024
# The most values (scalars, lists, mappings) a document may hold once its aliases are expanded: as many as
# its size limit in bytes, more than any document without aliases can write (each value takes a byte or more).
MAX_DOCUMENT_VALUES = MAX_DOCUMENT_BYTES


class PolicyDocumentError(ValueError):
    """A policy document that cannot be used; ``errors`` lists each problem with its location."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("invalid policy document:\n" + "\n".join(f"  - {e}" for e in errors))
        self.errors = errors


@cache
def _strict_loader() -> type[yaml.SafeLoader]:
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping (YAML and JSON loaders keep the
    last silently: a second ``rules:`` would drop the first list). Merge keys (``<<``) still work.

    It also rejects, before building anything, a document that expands through its aliases to more than
    ``MAX_DOCUMENT_VALUES`` values or refers to itself (``_expanded_values``): an alias is a shared reference
    while loading, but validation walks (and an error's repr writes out) every expansion, so 351 bytes of
    nested aliases took about 10 s and 550 MB to reject, beyond a function's memory and timeout.

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

        def construct_document(self, node: yaml.Node) -> Any:
            problem = _expanded_values_problem(node)
            if problem is not None:
                raise _TooLarge(problem)
            return super().construct_document(node)

    return StrictLoader


class _TooLarge(Exception):
    """A composed document refused before it is built (``_expanded_values_problem``)."""


def _expanded_values_problem(root: yaml.Node) -> str | None:
    """Why the document composed as ``root`` is refused: its values counted with every alias expanded (a
    mapping's keys and values, a merge key's mapping at each ``<<``) exceed ``MAX_DOCUMENT_VALUES``, or an
    alias refers to a node that contains it. None: it is not. Linear in the composed nodes (each node's
    expanded count is computed once) and iterative (no recursion limit)."""
    import yaml

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    counts: dict[int, int] = {}
    ancestors: set[int] = set()  # the nodes whose count is being computed: the path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted = stack.pop()
        if counted:
            ancestors.discard(id(node))
            count = 1 + sum(counts[id(child)] for child in children(node))
            if count > MAX_DOCUMENT_VALUES:
                return (
                    f"the document expands to more than {MAX_DOCUMENT_VALUES} values through its aliases "
                    f"(*name), from line {node.start_mark.line + 1}"
                )
            counts[id(node)] = count
        elif id(node) in ancestors:
            return f"line {node.start_mark.line + 1}: an alias refers to a value that contains it"
        elif id(node) not in counts:
            ancestors.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children(node))
    return None


def parse_document(text: str) -> dict[str, Any]:
    """YAML (a superset of JSON) to a mapping; an empty document is an empty mapping."""
    if len(text.encode()) > MAX_DOCUMENT_BYTES:
        raise PolicyDocumentError([f"document is larger than {MAX_DOCUMENT_BYTES} bytes"])
    import yaml  # at the first document parsed (_strict_loader says why)

    try:
        loaded = yaml.load(text, Loader=_strict_loader())
    except RecursionError as exc:
        raise PolicyDocumentError(["the document is nested too deeply"]) from exc
    except _TooLarge as exc:
        raise PolicyDocumentError([str(exc)]) from exc
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
    return [_error_text(err) for err in exc.errors()]


def _error_text(err: ErrorDetails) -> str:
    location = ".".join(str(part) for part in err["loc"]) or "<document>"
    value = err.get("input")
    shown = f" (got {value!r})" if isinstance(value, str | int | float | bool) else ""
    return f"{location}: {err['msg']}{shown}"


# ---- the deploy-time layer ------------------------------------------------------------------------

SWITCH: Final = "enabled"  # a section's on/off switch: kept when the rest of the section is replaced
WHOLE: Final = "<document>"


class BaseFallback(BaseModel):
    """A part of the deploy-time layer that fails validation (a section such as ``idle``, a rule such as
    ``rules.max-instances``, a setting such as ``mode``), and what governs in its place: the policy schema's
    defaults (a guard section's calibrated ones, with the section's ``enabled`` kept; a rule left out)."""

    model_config = ConfigDict(frozen=True)

    part: str
    parameters: tuple[str, ...] = ()  # the template Parameters the part is built from (empty: not known)
    errors: tuple[str, ...]
    applied: Any = None  # the part as it governs instead (JSON); None: left out (a rule)


class BasePolicy(BaseModel):
    """The deploy-time layer as it governs: the document the SSM policy document is merged onto, its policy,
    and the parts of the given layer that failed validation and were replaced (empty: none)."""

    model_config = ConfigDict(frozen=True)

    document: dict[str, Any]
    policy: Policy
    fallbacks: tuple[BaseFallback, ...] = ()


def build_base_policy(
    base: Mapping[str, Any], parameters: Mapping[str, Sequence[str]] | None = None
) -> BasePolicy:
    """``base`` validated; each part of it that fails validation replaced by the schema's defaults, never
    failing the whole. A template accepts each Parameter within its own bounds but cannot compare two
    (``IdlePeriodSeconds`` x ``IdleEvaluationPeriods`` beyond a day), and a base that fails would fail every
    invocation of every function: governance off. ``parameters``: the template Parameters each part is
    built from (``settings.BASE_POLICY_PARAMETERS``), named in the fallbacks."""
    document = dict(base)
    rejected: dict[str, list[str]] = {}
    replaced: set[str] = set()
    # each round replaces at least one part, or the whole: a section's switch kept once, then the section
    for _ in range(2 * (len(document) + len(document.get("rules") or ())) + 2):
        try:
            policy = Policy.model_validate(document)
        except ValidationError as exc:
            document = _without_failed_parts(document, exc.errors(), rejected, replaced)
            continue
        dump = policy.model_dump(mode="json")
        fallbacks = tuple(
            BaseFallback(
                part=part,
                parameters=tuple((parameters or {}).get(part, ())),
                errors=tuple(errors),
                applied=None if part.startswith("rules.") else dump if part == WHOLE else dump.get(part),
            )
            for part, errors in rejected.items()
        )
        return BasePolicy(document=document, policy=policy, fallbacks=fallbacks)
    raise AssertionError("the policy schema's defaults do not validate")  # pragma: no cover


def _without_failed_parts(
    document: dict[str, Any], errors: list[ErrorDetails], rejected: dict[str, list[str]], replaced: set[str]
) -> dict[str, Any]:
    """``document`` with each part an error is in replaced (``rejected``: the errors, by part; ``replaced``:
    the sections already reduced to their switch, left out if they fail again)."""
    rules = list(document.get("rules") or ())
    dropped: set[int] = set()
    keys: set[str] = set()
    for err in errors:
        loc = err["loc"]
        if not loc:  # an error of the whole document: only the schema's defaults are left
            rejected.setdefault(WHOLE, []).append(_error_text(err))
            return {}
        if loc[0] == "rules" and len(loc) > 1 and isinstance(loc[1], int) and loc[1] < len(rules):
            rule = rules[loc[1]]
            name = rule.get("id", rule.get("type")) if isinstance(rule, Mapping) else None
            rejected.setdefault(f"rules.{name if isinstance(name, str) else loc[1]}", []).append(_error_text(err))
            dropped.add(loc[1])
        else:
            rejected.setdefault(str(loc[0]), []).append(_error_text(err))
            keys.add(str(loc[0]))
    out = dict(document)
    for key in keys:
        value = document.get(key)
        if isinstance(value, Mapping) and isinstance(value.get(SWITCH), bool) and key not in replaced:
            out[key] = {SWITCH: value[SWITCH]}  # the section's defaults, switched as the deployer switched it
            replaced.add(key)
        else:
            out.pop(key, None)
    if dropped:
        out["rules"] = [rule for index, rule in enumerate(rules) if index not in dropped]
    return out
