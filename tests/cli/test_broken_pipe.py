"""`smgov ... | head`: a reader that leaves early ends the command quietly (exit 141, as SIGPIPE would)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from smgov.cli.output import EXIT_BROKEN_PIPE
from tests.conftest import REPO


@pytest.mark.parametrize(
    "args",
    [
        ["preflight", "examples/requests/non-compliant.json", "--policy", "examples/policy.yaml", "--json"],
        ["simulate", "--list"],
    ],
)
def test_a_closed_stdout_exits_quietly(args: list[str]) -> None:
    # Given a stdout whose reader has already gone (as `| head` leaves it)
    read_end, write_end = os.pipe()
    os.close(read_end)
    # When a command writes to it
    try:
        done = subprocess.run(
            [sys.executable, "-m", "smgov.cli.main", *args],
            cwd=REPO,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        os.close(write_end)
    # Then it ends with SIGPIPE's exit code and no traceback (stderr holds at most the command's notes,
    # e.g. which template defaults it judged with)
    errors = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
    assert (done.returncode, errors) == (EXIT_BROKEN_PIPE, [])
