"""The template's Parameters and the base policy the functions build from them: which Parameters each part of
the base is built from (what a rejected part's log names), and which values CloudFormation accepts that the
policy rejects (the idle window, checked only by the functions, which fall back to its calibrated defaults)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.settings import BASE_POLICY_PARAMETERS, Settings
from smgov.local_policy import template_environment
from tests.cfn_parameters import parameter_problem

# A value other than the default for each String Parameter without AllowedValues
OTHER_STRINGS = {
    "RequiredTags": "team",
    "AllowedInstanceTypes": "ml.g5.*",
    "PolicyParameterName": "/other/policy",
    "TeamTagKey": "squad",
    "OwnerTagKey": "person",
    "NotificationEmail": "platform@example.com",
    "ProgressMetricNames": "loss",
    "CheckpointBucketPattern": "checkpoints-*",
    "ClonePassRolePattern": "*Training*",
    "CentralAuditBusArn": "arn:aws:events:us-east-1:999999999999:event-bus/audit",
}
ONE_DAY = 86_400


def other_value(name: str, spec: dict[str, Any]) -> str:
    if "AllowedValues" in spec:
        return next(str(v) for v in spec["AllowedValues"] if str(v) != str(spec["Default"]))
    if spec["Type"] == "Number":
        default = spec["Default"]
        return str(default + 1 if default + 1 <= spec.get("MaxValue", default + 1) else default - 1)
    return OTHER_STRINGS[name]


def base_parts(document: dict[str, Any]) -> dict[str, Any]:
    """The base policy document by part (``rules`` by rule id: ``rules.<id>``)."""
    parts = {key: value for key, value in document.items() if key != "rules"}
    parts.update({f"rules.{rule['id']}": rule for rule in document["rules"]})
    return parts


def settings_of(template: dict[str, Any], parameters: dict[str, str]) -> Settings:
    """What the functions of a stack deployed with ``parameters`` read (the rest at the template's defaults)."""
    return Settings.from_env(template_environment(parameters, template))


def test_each_part_of_the_base_names_exactly_the_parameters_it_is_built_from(template: dict[str, Any]) -> None:
    # Given the base policy of the template's defaults
    default = base_parts(settings_of(template, {}).base_policy_document())
    for name, spec in template["Parameters"].items():
        # When one Parameter takes another value CloudFormation accepts
        value = other_value(name, spec)
        assert parameter_problem(spec, value) is None, name
        changed = base_parts(settings_of(template, {name: value}).base_policy_document())
        # Then the parts that change are the ones BASE_POLICY_PARAMETERS lists it for
        parts = {part for part in default.keys() | changed.keys() if default.get(part) != changed.get(part)}
        assert parts == {part for part, names in BASE_POLICY_PARAMETERS.items() if name in names}, name


def single_values(spec: dict[str, Any]) -> list[str]:
    values = [str(v) for v in spec.get("AllowedValues", ())]
    values += [str(spec[bound]) for bound in ("MinValue", "MaxValue") if bound in spec]
    return values


def idle_window_invalid(settings: Settings) -> bool:
    """The idle combinations the policy rejects and CloudFormation cannot (it checks each Parameter alone)."""
    datapoints = settings.idle_datapoints_to_alarm or settings.idle_evaluation_periods
    return (
        settings.idle_period_seconds * settings.idle_evaluation_periods > ONE_DAY
        or datapoints > settings.idle_evaluation_periods
    )


def test_a_single_parameter_the_template_accepts_is_rejected_only_in_the_idle_window(
    template: dict[str, Any],
) -> None:
    for name, spec in template["Parameters"].items():
        for value in [*single_values(spec), other_value(name, spec)]:
            # Given a stack deployed with one Parameter at a value CloudFormation accepts (its bounds)
            settings = settings_of(template, {name: value})
            # When the functions build their base policy, then nothing falls back but the idle window when
            # it is beyond a day or asks for more idle periods than it has
            built = settings.base_policy()
            assert [f.part for f in built.fallbacks] == (["idle"] if idle_window_invalid(settings) else []), (
                name,
                value,
            )


@pytest.mark.parametrize(
    ("period", "periods", "datapoints"),
    list(itertools.product(["60", "120", "900", "3600"], ["1", "24", "96", "1440"], ["0", "1", "24", "1440"])),
)
def test_every_idle_window_the_template_accepts_builds_a_policy(
    template: dict[str, Any], period: str, periods: str, datapoints: str
) -> None:
    # Given an idle window of Parameters each within its bounds
    parameters = {
        "IdlePeriodSeconds": period,
        "IdleEvaluationPeriods": periods,
        "IdleDatapointsToAlarm": datapoints,
    }
    settings = settings_of(template, parameters)
    # When the functions build their base policy: a valid window governs as set; an invalid one falls back to the
    # calibrated window, named with the Parameters behind it
    built = settings.base_policy()
    idle = IDLE.config(built.policy)
    if idle_window_invalid(settings):
        (fallback,) = built.fallbacks
        assert set(parameters) <= set(fallback.parameters)
        assert (idle.period_seconds, idle.evaluation_periods, idle.datapoints_to_alarm) == (60, 30, 30)
    else:
        assert built.fallbacks == ()
        whole = int(datapoints) or int(periods)
        assert (idle.period_seconds, idle.evaluation_periods, idle.datapoints_to_alarm) == (
            int(period),
            int(periods),
            whole,
        )


def test_required_tags_refuses_at_deploy_time_a_key_no_job_can_carry(template: dict[str, Any]) -> None:
    # SageMaker tag keys have 1-128 characters: a longer one would fail the required-tags rule in every function
    spec = template["Parameters"]["RequiredTags"]
    assert parameter_problem(spec, "team," + "k" * 129) is not None
    for accepted in ("", "team,cost-center", "k" * 128, "team, cost-center"):
        assert parameter_problem(spec, accepted) is None, accepted
        assert settings_of(template, {"RequiredTags": accepted}).base_policy().fallbacks == (), accepted
