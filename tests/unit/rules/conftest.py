from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sagemaker_governance.domain.rules import EvaluationContext


@pytest.fixture
def ctx() -> EvaluationContext:
    return EvaluationContext(now=datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
