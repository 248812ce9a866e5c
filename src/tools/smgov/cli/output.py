"""What every `smgov` command shares: exit codes and error output."""

from __future__ import annotations

import sys
from typing import Any

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


def fail(message: str, code: int = EXIT_VIOLATION) -> int:
    """Print ``message`` to stderr; return the exit code to end the command with."""
    print(message, file=sys.stderr)
    return code


def deployed_settings_or_exit(stack: str | None) -> Any:
    """The deploy-time settings (the template's defaults, or ``stack``'s parameters); exit on AWS errors."""
    from sagemaker_governance.domain.errors import AdapterError
    from smgov.local_policy import deployed_settings

    try:
        return deployed_settings(stack)
    except AdapterError as exc:
        raise SystemExit(fail(f"--stack {stack}: {exc}")) from exc
