"""Hypothesis strategies for the parser fuzz tests: real-shaped documents with a few fields mutated.

Random text alone never gets past the first ``isinstance``; these start from the shapes AWS sends (the
``events/`` samples, the builders) and change one to three nodes anywhere in the tree: delete it,
replace it with a value of another type (huge, unicode, numeric strings, deeply nested), or wrap it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]


class _DeepList(list[Any]):
    """A deeply nested list that prints short (Hypothesis' reporter would recurse into it)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"nested_list({self.depth})")

    def __repr__(self) -> str:
        return f"nested_list({self.depth})"

    depth = 0


class _DeepDict(dict[str, Any]):
    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"nested_dict({self.depth})")

    def __repr__(self) -> str:
        return f"nested_dict({self.depth})"

    depth = 0


def nested_list(depth: int) -> list[Any]:
    """``[[[...]]]`` ``depth`` levels deep, built without recursion."""
    root = _DeepList()
    root.depth = depth
    current: list[Any] = root
    for _ in range(depth - 1):
        inner: list[Any] = []
        current.append(inner)
        current = inner
    return root


def nested_dict(depth: int) -> dict[str, Any]:
    root = _DeepDict()
    root.depth = depth
    current: dict[str, Any] = root
    for _ in range(depth - 1):
        inner: dict[str, Any] = {}
        current["a"] = inner
        current = inner
    return root


# Values that have broken parsers before, or sit on a boundary: epoch strings, ISO text, overflowing
# numbers, empty and whitespace text, NUL, tag-shaped fragments, very long and non-ASCII text.
INTERESTING: list[Any] = [
    "",
    " ",
    "\x00",
    "null",
    "nan",
    "inf",
    "-inf",
    "1e999",
    "-1",
    "1763719200000",
    "1763719200000.5",
    "2025-11-21T10:00:00Z",
    "2025-11-21T10:00:00.123+0000",
    "9999-12-31T23:59:59",
    "0001-01-01",
    "ml.p4d.24xlarge",
    "InProgress",
    "Training",
    "ALARM",
    "Host",
    "algo-1",
    "a" * 64,
    "x" * 5000,
    "日本語のジョブ🚀",
    "\u202e\ufeff",
    0,
    -1,
    1,
    2**63,
    10**400,
    -(10**400),
    1.5,
    1e308,
    float("inf"),
    float("nan"),
    True,
    False,
    None,
    [],
    {},
    [{"Key": "team"}],
    [{"Value": "x"}],
    [{"Key": ["x"], "Value": "v"}],
    {"Key": "team", "Value": None},
    {"team": {"nested": "map"}},
    {"S3Uri": ["s3://x"]},
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    # a fresh copy each time: a drawn list or dict is mutated later ("add" below, or by the code under
    # test), and a shared one would change what the next draw means (hypothesis: FlakyStrategyDefinition)
    st.sampled_from(INTERESTING).map(copy.deepcopy),
)

garbage: st.SearchStrategy[Any] = st.one_of(
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=10,
    ),
    st.integers(min_value=200, max_value=3000).map(nested_list),
    st.integers(min_value=200, max_value=3000).map(nested_dict),
)


def _paths(doc: Any) -> Iterator[Path]:
    """Every node's path (iteratively; an inserted deep value is one leaf, not 3000 levels)."""
    stack: list[tuple[Path, Any]] = [((), doc)]
    while stack:
        prefix, node = stack.pop()
        yield prefix
        if isinstance(node, _DeepList | _DeepDict):
            continue
        if isinstance(node, dict):
            stack.extend(((*prefix, key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend(((*prefix, index), value) for index, value in enumerate(node))


def _parent(doc: Any, path: Path) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: Any, *, max_mutations: int = 3) -> Any:
    """``base`` (a JSON document) with 1..``max_mutations`` nodes deleted, replaced or wrapped."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        path = draw(st.sampled_from(list(_paths(doc))))
        operation = draw(st.sampled_from(["delete", "replace", "replace", "wrap", "add"]))
        if not path:
            if operation in {"replace", "wrap"}:
                doc = draw(garbage) if operation == "replace" else [doc]
            continue
        parent, key = _parent(doc, path), path[-1]
        if operation == "delete":
            del parent[key]
        elif operation == "replace":
            parent[key] = draw(garbage)
        elif operation == "wrap":
            parent[key] = [parent[key]] if draw(st.booleans()) else {"value": parent[key]}
        elif isinstance(parent[key], dict):
            parent[key][draw(st.text(max_size=12))] = draw(garbage)
        elif isinstance(parent[key], list):
            parent[key].append(draw(garbage))
    return doc


def json_text(document: Any) -> str:
    """A document as JSON text; values JSON cannot spell (NaN) pass as Python writes them. A document
    too deep for the encoder becomes deep JSON text of the same kind (the reader must refuse it)."""
    try:
        return json.dumps(document)
    except RecursionError:
        return "[" * 3000 + "]" * 3000


# Raw text for the parsers that read text (SNS message bodies, SQS bodies, files, YAML documents).
raw_text = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "[" * 100_000,
            "{" * 50_000,
            '{"a":' * 20_000,
            "1" * 5000,
            "-" + "9" * 5000,
            "1e999999",
            "NaN",
            '{"a": 1, "a": 2}',
            "\ufeff{}",
            "\x00",
            "null",
            "[]",
            '"text"',
        ]
    ),
)
