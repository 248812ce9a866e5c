"""The idle guard's shipped defaults are the ones docs/calibration.md chose from real traces: the domain
model, the settings (environment defaults), the template's parameters and the README agree with it."""

from __future__ import annotations

from typing import Any

import pytest

from sagemaker_governance.domain.guards.idle import IdlePolicy
from sagemaker_governance.settings import Settings
from smgov.cfn_template import load_template
from smgov.simulation.calibration_report import (
    DEFAULT_FIELDS,
    CalibrationDocumentError,
    chosen_defaults,
)
from tests.conftest import REPO

DOC = REPO / "docs" / "calibration.md"
PARAMETERS = {
    "threshold_percent": "IdleThresholdPercent",
    "period_seconds": "IdlePeriodSeconds",
    "evaluation_periods": "IdleEvaluationPeriods",
    "datapoints_to_alarm": "IdleDatapointsToAlarm",
    "grace_minutes": "IdleGraceMinutes",
}


@pytest.fixture(scope="module")
def chosen() -> dict[str, Any]:
    return chosen_defaults(DOC.read_text())


def test_the_domain_defaults_are_the_calibrated_ones(chosen: dict[str, Any]) -> None:
    shipped = IdlePolicy()
    assert {f: getattr(shipped, f) for f in DEFAULT_FIELDS} == chosen


def whole_window(defaults: dict[str, Any]) -> dict[str, Any]:
    """The defaults with ``datapoints_to_alarm`` 0 read as the settings and the template read it: all the
    evaluation periods (idle for the whole window)."""
    return {**defaults, "datapoints_to_alarm": defaults["datapoints_to_alarm"] or defaults["evaluation_periods"]}


def test_the_environment_defaults_are_the_calibrated_ones(chosen: dict[str, Any]) -> None:
    fields = Settings.model_fields
    assert fields["idle_datapoints_to_alarm"].default == 0  # the whole window, however long it is set
    assert whole_window({f: fields[f"idle_{f}"].default for f in DEFAULT_FIELDS}) == chosen
    assert {f: v for f, v in Settings().base_policy_document()["idle"].items() if f in DEFAULT_FIELDS} == chosen


def test_the_template_parameter_defaults_are_the_calibrated_ones(chosen: dict[str, Any]) -> None:
    parameters = load_template()["Parameters"]
    assert parameters["IdleDatapointsToAlarm"]["Default"] == 0
    assert whole_window({f: float(parameters[p]["Default"]) for f, p in PARAMETERS.items()}) == chosen


def test_the_defaults_docs_cite_the_calibration() -> None:
    readme = REPO.joinpath("README.md").read_text()
    idle_section = readme.split("## Idle and stall guard", 1)[1].split("\n## ", 1)[0]
    assert "docs/calibration.md" in idle_section
    parameters = load_template()["Parameters"]
    assert all("docs/calibration.md" in parameters[p]["Description"] for p in PARAMETERS.values())
    assert "docs/calibration.md" in (IdlePolicy.__doc__ or "")


def test_a_document_without_the_block_is_rejected() -> None:
    with pytest.raises(CalibrationDocumentError):
        chosen_defaults("# no block here")
    with pytest.raises(CalibrationDocumentError, match="exactly"):
        chosen_defaults(
            "<!-- chosen-defaults:begin -->\n```yaml\nthreshold_percent: 1\n```\n<!-- chosen-defaults:end -->"
        )
