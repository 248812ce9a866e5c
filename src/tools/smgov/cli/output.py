"""What every `smgov` command shares: exit codes and error output."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagemaker_governance.settings import Settings

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


def stack_option(parser: argparse.ArgumentParser) -> None:
    """``--stack NAME``: judge with a deployed stack's parameters, not the template's defaults."""
    parser.add_argument(
        "--stack",
        metavar="NAME",
        help="use a deployed stack's parameters (CloudFormation DescribeStacks) instead of the template's defaults",
    )


def stack_settings(args: argparse.Namespace, *, say_defaults: bool = False) -> Settings:
    """The deploy-time settings: ``--stack``'s parameters, or the template's Parameter defaults. With
    ``say_defaults``, a command that judges what the deployed service will do says on stderr which
    defaults it used when no stack was named (the deployed stack's may differ)."""
    from smgov.local_policy import defaults_note

    stack = getattr(args, "stack", None)
    settings: Settings = deployed_settings_or_exit(stack)
    if say_defaults and not stack:
        print(f"note: {defaults_note(settings, '--stack NAME')}", file=sys.stderr)
    return settings
