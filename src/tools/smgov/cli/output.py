"""What every `smgov` command shares: exit codes and error output."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2


def fail(message: str, code: int = EXIT_VIOLATION) -> int:
    """Print ``message`` to stderr; return the exit code to end the command with."""
    print(message, file=sys.stderr)
    return code
