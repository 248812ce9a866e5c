"""What a SageMaker tag can hold, as botocore's SageMaker model states it (shapes ``TagKey`` and ``TagValue``;
a test pins these against the model): a key of 1-128 characters, a value of 0-256, both made of letters,
separators (spaces), numbers and ``_.:/=+-@`` (pattern ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*``). The policy uses
it to reject a required tag no job can carry: such a rule would stop every job, however tagged.

The pattern's classes are Unicode general categories, read here with ``unicodedata`` (Python's ``re`` has no
``\\p{...}``; a test compares the two over the Basic Multilingual Plane). A character Python's Unicode database
does not know yet (category ``Cn``) may be a letter in AWS's newer one: it is allowed, so that no value a job can
carry is refused.
"""

from __future__ import annotations

import unicodedata
from typing import Final

TAG_KEY_MAX: Final = 128
TAG_VALUE_MAX: Final = 256
TAG_PUNCTUATION: Final = "_.:/=+-@"


def allowed_in_tag(char: str) -> bool:
    """Whether ``char`` may appear in a tag key or value: ``\\p{L}``, ``\\p{Z}``, ``\\p{N}`` or ``_.:/=+-@`` (or
    a character unassigned in Python's Unicode database: unknown, not refused)."""
    category = unicodedata.category(char)
    return category[0] in "LZN" or category == "Cn" or char in TAG_PUNCTUATION


def _outside(text: str) -> str:
    bad = sorted({char for char in text if not allowed_in_tag(char)})
    return ", ".join(repr(char) for char in bad)


def tag_key_problem(key: str) -> str | None:
    """Why no SageMaker job can carry the tag key ``key``; None when one can."""
    if not 1 <= len(key) <= TAG_KEY_MAX:
        return f"a SageMaker tag key has 1-{TAG_KEY_MAX} characters (this one {len(key)})"
    bad = _outside(key)
    if bad:
        return f"{bad} cannot appear in a SageMaker tag key (letters, numbers, spaces and {TAG_PUNCTUATION} only)"
    return None


def tag_value_problem(value: str) -> str | None:
    """Why ``value`` is no tag value a job can meet a required tag with (an empty or blank tag counts as
    missing); None when it is one."""
    if not value.strip():
        return "an empty tag counts as missing"
    if len(value) > TAG_VALUE_MAX:
        return f"a SageMaker tag value has at most {TAG_VALUE_MAX} characters (this one {len(value)})"
    bad = _outside(value)
    if bad:
        return (
            f"{bad} cannot appear in a SageMaker tag value (letters, numbers, spaces and {TAG_PUNCTUATION} only)"
        )
    return None
