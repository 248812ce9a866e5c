"""What every `smgov` command shares: exit codes and error output."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagemaker_governance.domain.policy import Policy
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
        help="use a deployed stack's parameters (CloudFormation DescribeStacks) instead of the template's defaults, "
        "and, without a policy document path, the stack's own document (the SSM parameter its PolicyParameterName "
        "names), as its functions read it",
    )


def stack_settings(args: argparse.Namespace, *, say_defaults: bool = False) -> Settings:
    """The deploy-time settings: ``--stack``'s parameters, or the template's Parameter defaults. With
    ``say_defaults``, a command that judges what the deployed service will do says on stderr which
    defaults it used when no stack was named (the deployed stack's may differ). Parameters the functions
    reject (a part of the base policy that falls back to the defaults) are said on stderr, always."""
    from smgov.local_policy import base_notes, defaults_note

    stack = getattr(args, "stack", None)
    settings: Settings = deployed_settings_or_exit(stack)
    if say_defaults and not stack:
        print(f"note: {defaults_note(settings, '--stack NAME')}", file=sys.stderr)
    for note in base_notes(settings):  # parameters the functions reject: the command judges as they do
        print(note, file=sys.stderr)
    return settings


def command_policy(
    args: argparse.Namespace, path: str | None, settings: Settings, *, unreadable_code: int = EXIT_VIOLATION
) -> Policy:
    """The policy a command judges with: the document at ``path`` over ``settings``' base policy; without
    one and with ``--stack``, the stack's own document in SSM, as its functions read it (which version
    judged, or why none did, said on stderr; unreadable: exit ``unreadable_code``, nothing is judged on a
    guess); with neither, the base policy alone. An invalid document at ``path`` raises
    ``PolicyDocumentError`` (each command words it)."""
    from smgov.local_policy import StackPolicyUnreadable, connect_ssm, load_policy, reading_notes, stack_policy

    stack = getattr(args, "stack", None)
    if path is not None or not stack:
        return load_policy(path, settings)
    from botocore.exceptions import BotoCoreError

    try:
        reading = stack_policy(stack, settings, connect_ssm())
    except (StackPolicyUnreadable, BotoCoreError) as exc:  # BotoCoreError: no client (no region, ...)
        raise SystemExit(
            fail(
                f"--stack {stack}: {exc}; nothing was judged (give --policy FILE to judge by a file)",
                unreadable_code,
            )
        ) from exc
    for loud, text in reading_notes(reading):
        print(text if loud else f"note: {text}", file=sys.stderr)
    return reading.policy
