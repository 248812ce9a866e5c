"""Template Parameters CloudFormation accepts one by one but the policy rejects together never switch
governance off: the functions judge with the rest of the stack's parameters and the rejected part's
defaults, and say so (an error log naming the parameters, ``PolicyLoadErrors``)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from sagemaker_governance.business_metrics import BusinessMetric, MemoryBusinessMetrics
from sagemaker_governance.domain.compliance import ComplianceCode
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.handlers.reconciler import handler as reconciler
from smgov.local_policy import template_environment
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request
from tests.conftest import load_event
from tests.handlers.conftest import NOW

ALARM = "sagemaker-governance-idle-gpu-job"


@pytest.fixture
def deployed(request: pytest.FixtureRequest) -> Iterator[LocalAccount]:
    """The functions of a stack deployed in enforce mode with the test's parameter overrides (every other
    Parameter at the template's default)."""
    parameters = {"GovernanceMode": "enforce", **request.param}
    with local_account(lambda: NOW, template_environment(parameters), metrics=MemoryBusinessMetrics()) as account:
        yield account


def idle_window(account: LocalAccount) -> tuple[int, int, int]:
    """(period seconds, evaluation periods, datapoints to alarm) of the idle guard the functions govern with."""
    idle = IDLE.config(account.root.policy_store.current())
    return idle.period_seconds, idle.evaluation_periods, idle.datapoints_to_alarm


def rejections(account: LocalAccount) -> int:
    return len(account.metrics.of(BusinessMetric.POLICY_LOAD_ERRORS))


@pytest.mark.parametrize("deployed", [{"IdleEvaluationPeriods": "20"}], indirect=True)
def test_idle_evaluation_periods_alone_sets_the_whole_window(deployed: LocalAccount) -> None:
    # Given a stack deployed with IdleEvaluationPeriods=20 and IdleDatapointsToAlarm at its default
    acct = deployed
    acct.sagemaker.launch(create_request("gpu-job"), secondary="Training")
    # When the job enters Training
    acct.invoke(job_events, acct.sagemaker.event("gpu-job"))
    # Then it is watched (its idle alarm) and judged idle after 20 idle minutes out of 20: the whole window
    assert ALARM in acct.cloudwatch.alarms
    assert idle_window(acct) == (60, 20, 20)
    assert rejections(acct) == 0


@pytest.mark.parametrize(
    "deployed",
    [
        {"IdlePeriodSeconds": "3600"},  # x 30 periods: 30 hours, CloudWatch allows one day
        {"IdlePeriodSeconds": "120", "IdleEvaluationPeriods": "1440"},
        {"IdleEvaluationPeriods": "10", "IdleDatapointsToAlarm": "20"},  # 20 idle periods of 10
    ],
    indirect=True,
)
def test_an_idle_window_cloudformation_accepts_and_the_policy_rejects_keeps_governance_on(
    deployed: LocalAccount, log_output: io.StringIO
) -> None:
    # Given a stack whose idle parameters are each within bounds and together invalid; an untagged job starting
    # and a GPU job in Training
    acct = deployed
    acct.sagemaker.launch(create_request("untagged", tags={}))
    acct.sagemaker.launch(create_request("gpu-job"), secondary="Training")
    # When their events reach the job-events function and the reconciler runs
    decisions = acct.invoke(job_events, acct.sagemaker.event("untagged"))["decisions"]
    acct.invoke(job_events, acct.sagemaker.event("gpu-job"))
    acct.invoke(reconciler, load_event("scheduled-reconcile.json"))
    # Then compliance is enforced (the untagged job is stopped) and the GPU job is watched, with the calibrated
    # window
    assert ComplianceCode.STOP.value in [d["code"] for d in decisions]
    assert acct.sagemaker.stop_requests == ["untagged"]
    assert ALARM in acct.cloudwatch.alarms
    assert idle_window(acct) == (60, 30, 30)
    # and the rejection is said: counted (PolicyRejectedAlarm) and logged with the parameters behind it
    assert rejections(acct) >= 1
    logged = [
        json.loads(line) for line in log_output.getvalue().splitlines() if "template parameters rejected" in line
    ]
    (fallback,) = logged[0]["fallbacks"]
    assert fallback["part"] == "idle"
    assert {"IdlePeriodSeconds", "IdleEvaluationPeriods", "IdleDatapointsToAlarm"} <= set(fallback["parameters"])
    assert fallback["applied"]["evaluation_periods"] == 30
