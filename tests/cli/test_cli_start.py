"""`smgov`'s start imports what every command needs and no AWS SDK: a command that calls AWS imports boto3 itself,
so `smgov preflight`, `explain`, `policy validate` and the rest start in about half the time (and the tests that run
the CLI as a process with them)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_the_cli_starts_without_boto3_botocore_or_moto() -> None:
    # When the CLI's entry module is imported in a fresh interpreter (as `smgov` does before parsing its arguments)
    probe = "import sys, smgov.cli.main; print(sorted({m.split('.')[0] for m in sys.modules} & {'boto3', 'botocore', 'moto'}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    # Then none of them is loaded
    assert done.stdout.strip() == "[]", done.stdout
