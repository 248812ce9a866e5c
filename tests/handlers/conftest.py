from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from smgov.simulation.harness import LocalAccount, local_account

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ENFORCE = {
    "GOVERNANCE_MODE": "enforce",
    "REQUIRED_TAGS": "team,cost-center",
    "POLICY_PARAMETER_NAME": "/gov/policy",
}


@pytest.fixture
def account() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as acct:
        yield acct


@pytest.fixture
def audit_account() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, {**ENFORCE, "GOVERNANCE_MODE": "audit"}) as acct:
        yield acct
