"""The ``preflight`` section of the governance policy: what the developer-side check may do before a
training job is created (the SDK hook and ``smgov preflight``). The Lambdas ignore it.

Kept apart from ``domain/preflight.py`` (which evaluates requests against a ``Policy``) so that
``domain/policy.py`` can hold this section without an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemaker_governance.domain.tags import TAG_KEY_MAX, TAG_VALUE_MAX

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
# What a tag default may refer to. Small on purpose: every placeholder is something the preflight knows
# without calling AWS.
PLACEHOLDERS: Mapping[str, str] = {
    "user": "the developer's user name (the SDK hook's `user=` argument, else the operating-system login)",
}
MAX_TAG_KEY_LENGTH = TAG_KEY_MAX  # botocore's SageMaker TagKey and TagValue (domain/tags.py)
MAX_TAG_VALUE_LENGTH = TAG_VALUE_MAX


class PreflightPolicy(BaseModel):
    """What the preflight does before a job is created.

    ``refuse_on``: ``enforced`` (default) refuses the launch only for violations the deployed service
    would stop the job for (rule ``on_violation: stop`` in ``enforce`` mode); the other violations are
    reported as warnings. ``any`` refuses every violation, in audit mode too (shift-left during roll-out).

    ``tag_defaults``: tags filled in when the request lacks them (or has them empty); never overwrites a
    value the developer set. Values may use ``${user}``.

    Example:
        preflight:
          refuse_on: enforced
          tag_defaults:
            owner: "${user}"
            env: dev
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    refuse_on: Literal["enforced", "any"] = "enforced"
    tag_defaults: dict[str, str] = Field(
        default_factory=dict, description="Tag key -> default value; `${user}` is the developer's user name."
    )

    @field_validator("tag_defaults")
    @classmethod
    def _valid_defaults(cls, defaults: dict[str, str]) -> dict[str, str]:
        for key, value in defaults.items():
            if not 1 <= len(key) <= MAX_TAG_KEY_LENGTH or key.lower().startswith("aws:"):
                raise ValueError(f"tag key {key!r}: 1-{MAX_TAG_KEY_LENGTH} characters, not starting with 'aws:'")
            unknown = sorted({name for name in PLACEHOLDER.findall(value) if name not in PLACEHOLDERS})
            if unknown:
                raise ValueError(
                    f"tag_defaults.{key}: unknown placeholder(s) {', '.join('${' + n + '}' for n in unknown)}; "
                    f"known: {', '.join('${' + n + '}' for n in PLACEHOLDERS)}"
                )
            if "${" in PLACEHOLDER.sub("", value):
                raise ValueError(f"tag_defaults.{key}: unterminated placeholder in {value!r}")
            if len(PLACEHOLDER.sub("", value)) > MAX_TAG_VALUE_LENGTH:
                raise ValueError(f"tag_defaults.{key}: longer than {MAX_TAG_VALUE_LENGTH} characters")
        return defaults

    def render_default(self, key: str, user: str | None) -> str | None:
        """The default for ``key`` with placeholders filled; None when it needs a value we don't have."""
        template = self.tag_defaults.get(key)
        if template is None:
            return None
        values = {"user": (user or "").strip()}
        if any(not values[name] for name in PLACEHOLDER.findall(template)):
            return None
        rendered = PLACEHOLDER.sub(lambda m: _tag_safe(values[m.group(1)]), template).strip()
        return rendered[:MAX_TAG_VALUE_LENGTH] or None


def _tag_safe(text: str) -> str:
    """SageMaker tag values allow letters, digits, spaces and ``_.:/=+-@``; anything else becomes ``-``
    (a Windows ``DOMAIN\\user`` login would otherwise make CreateTrainingJob fail)."""
    return "".join(c if c.isalnum() or c.isspace() or c in "_.:/=+-@" else "-" for c in text)
