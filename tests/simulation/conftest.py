from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from sagemaker_governance.simulation.template import load_template


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()
