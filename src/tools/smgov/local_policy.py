"""The policy and the user as the developer tools see them (the CLI, the SDK preflight hook)."""

from __future__ import annotations

import getpass
from pathlib import Path

from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import build_policy, parse_document
from sagemaker_governance.settings import Settings


def load_policy(path: str | None, settings: Settings | None = None) -> Policy:
    """Deploy-time defaults (from the environment, as the functions read them) plus an optional document."""
    base = (settings or Settings.from_env()).base_policy_document()
    if path is None:
        return build_policy(base)
    return build_policy(base, parse_document(Path(path).read_text()))


def current_user() -> str | None:
    """The login name (fills a ``${user}`` tag default), if the environment has one."""
    try:
        return getpass.getuser()
    except Exception:  # no login name (some containers): a ${user} default is then not filled
        return None
