from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from smgov.cfn_template import load_template


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return load_template()


def compliance_only(template: dict[str, Any]) -> dict[str, Any]:
    """The template with only the compliance route deployed (no idle guard, no resume): the simulator's
    own mechanics are tested on it with exact counters, and the toy guard stands in for the idle guard."""
    out: dict[str, Any] = copy.deepcopy(template)
    resources = out["Resources"]
    for rule in (
        "TrainingStartedRule",
        "JobEndedRule",
        "JobInterruptedRule",
        "JobPendingSpotRule",
    ):  # JobStartingRule stays
        resources.pop(rule)
    resources.pop("IdleStopperFunction")
    resources.pop("AlarmQueueMapping")  # it invokes the stopper
    resources.pop("ReconcilerFunction")  # it repairs idle alarms: part of what the toy guard stands in for
    return out


@pytest.fixture(scope="session")
def compliance_template(template: dict[str, Any]) -> dict[str, Any]:
    return compliance_only(template)
