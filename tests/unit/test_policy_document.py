"""What a policy document's text may cost to read: a few hundred bytes must never cost a function its memory or
its timeout (every function reads the policy, so that would switch governance off)."""

from __future__ import annotations

import textwrap
import time

import pytest

from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.policy_document import (
    MAX_DOCUMENT_VALUES,
    PolicyDocumentError,
    load_policy_text,
    parse_document,
)
from sagemaker_governance.settings import Settings


def nested_aliases(levels: int, width: int = 9) -> str:
    """``mode: [&a0 [x, ...], &a1 [*a0, ...], ...]``: each level repeats the one before ``width`` times."""
    items = ["&a0 [" + ", ".join(["x"] * width) + "]"]
    items += [f"&a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]" for level in range(1, levels)]
    return f"mode: [{', '.join(items)}]\n"


def test_a_small_document_of_nested_aliases_is_rejected_while_it_is_read() -> None:
    # Given 351 bytes whose aliases expand to about 48 million values (9 to the 8th), a Standard parameter
    text = nested_aliases(8)
    assert len(text.encode()) < 400
    # When it is read over the deployed defaults
    started = time.monotonic()
    with pytest.raises(PolicyDocumentError) as caught:
        parse_document(text)
    with pytest.raises(PolicyDocumentError):
        load_policy_text(text, Settings().base_policy().document)
    # Then it is refused before anything is built or validated (about 10 s and 550 MB before), with one
    # short error, never a rendering of the expanded value
    assert time.monotonic() - started < 2
    assert len(caught.value.errors) == 1 and len(caught.value.errors[0]) < 200
    assert str(MAX_DOCUMENT_VALUES) in caught.value.errors[0]


def test_an_alias_that_contains_itself_is_rejected() -> None:
    for text in ("rules: &r [*r]\n", "teams: &t {vision: *t}\n"):
        with pytest.raises(PolicyDocumentError, match="contains it"):
            parse_document(text)


def test_aliases_and_merge_keys_within_the_bound_still_load() -> None:
    # Given a document that shares a section and a rule through anchors and merge keys
    text = textwrap.dedent(
        """
        idle: &idle {threshold_percent: 2, grace_minutes: 10}
        rules:
          - &cap {id: cap-a, type: max-instance-count, max: 2}
          - {<<: *cap, id: cap-b, max: 3}
        teams:
          vision:
            idle: {<<: *idle, grace_minutes: 30}
        """
    )
    # When it is read, Then each alias and merge key is expanded as YAML defines
    policy = load_policy_text(text)
    assert [(rule.id, rule.max) for rule in policy.rules] == [("cap-a", 2), ("cap-b", 3)]  # type: ignore[union-attr]
    assert IDLE.config(policy.for_team("vision")).grace_minutes == 30
    assert IDLE.config(policy.for_team("vision")).threshold_percent == 2
    # and nested aliases that stay within the bound of expanded values are read (the schema judges them)
    assert parse_document(nested_aliases(4))["mode"][3][0][0][0] == ["x"] * 9
