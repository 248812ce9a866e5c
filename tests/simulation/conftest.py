from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
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


# A built-in scenario as `smgov simulate --scenario NAME` runs it (seed 0, template.yaml as it is) is run by
# several files: each asserts its own part of the same report (tests/simulation/test_outcomes.py on the
# capabilities, test_what_goes_wrong.py on every default scenario's expected outcomes). The run is the
# same: it is made once per worker, and each test gets a copy of its report to read.
SimulatedReport = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def _builtin_reports() -> dict[tuple[str, bool], dict[str, Any]]:
    return {}


@pytest.fixture
def builtin_report(
    template: dict[str, Any], _builtin_reports: dict[tuple[str, bool], dict[str, Any]]
) -> SimulatedReport:
    """``builtin_report(name, include_series=False)``: ``simulate(builtin_scenario(name), template=template)``'s
    report, run once per worker (the simulator is deterministic: the same seed, scenario and template give
    the same report), a copy for each test."""
    from smgov.simulation.report import simulate
    from smgov.simulation.scenario import builtin_scenario

    def report(name: str, *, include_series: bool = False) -> dict[str, Any]:
        key = (name, include_series)
        if key not in _builtin_reports:
            _builtin_reports[key] = simulate(
                builtin_scenario(name), template=template, include_series=include_series
            )
        return copy.deepcopy(_builtin_reports[key])

    return report
