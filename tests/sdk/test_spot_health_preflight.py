"""The SDK preflight reads the fleet's Spot health ledger (moto DynamoDB, read-only) before a Managed Spot
launch: a type in a storm is warned about, or switched to On-Demand when the policy says so."""

from __future__ import annotations

import warnings
from datetime import timedelta
from typing import Any

import boto3
import pytest

from sagemaker_governance.adapters.spot_health import SpotHealthLedger
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.spot_health import SignalKind, SpotSignal
from smgov.sdk import GovernanceWarning, install_preflight, spot_health_reader
from tests.sdk.conftest import NOW, SentRequests, request_file
from tests.spot_builders import create_spot_health_table

TABLE = "spot-health"
TYPE = "ml.g5.12xlarge"


def ledger(session: boto3.Session, jobs: int) -> None:
    """The deployed table's key schema, with ``jobs`` other jobs of TYPE interrupted minutes ago."""
    client = session.client("dynamodb")
    create_spot_health_table(client, TABLE)
    SpotHealthLedger(client, TABLE).record(
        SpotSignal(TYPE, SignalKind.INTERRUPTION, NOW - timedelta(minutes=5 + n), f"other-{n}", 1.2)
        for n in range(jobs)
    )


def spot_request() -> dict[str, Any]:
    request = request_file("compliant.json")
    request["EnableManagedSpotTraining"] = True
    request["StoppingCondition"] = {"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 100_000}
    return request


def with_storm_preflight(policy: Policy, action: str) -> Policy:
    return policy.overlay({"spot": {"storm": {"preflight": action}}})


def test_a_spot_launch_of_a_stormy_type_is_warned_about_and_sent_as_asked(
    aws: boto3.Session, policy: Policy
) -> None:
    # Given three other jobs of the type interrupted in the last hour (a storm by default)
    ledger(aws, jobs=3)
    hook = install_preflight(
        aws, policy, user="carol", clock=lambda: NOW, spot_health=spot_health_reader(aws, table=TABLE)
    )
    sent = SentRequests().attach(aws)
    # When the developer launches a Spot job of that type
    with pytest.warns(GovernanceWarning, match="Spot storm"):
        aws.client("sagemaker").create_training_job(**spot_request())
    # Then it is sent on Spot, and the outcome carries the ledger's figures
    (body,) = sent.bodies
    assert body["EnableManagedSpotTraining"] is True
    assert hook.last_outcome is not None and hook.last_outcome.spot_health is not None
    assert hook.last_outcome.spot_health["action"] == "warn"
    assert hook.last_outcome.spot_health["fleet_interrupted_jobs"] == 3
    assert hook.last_outcome.report()["verdict"] == "warnings"


def test_the_policy_may_switch_it_to_on_demand_before_it_is_sent(aws: boto3.Session, policy: Policy) -> None:
    ledger(aws, jobs=3)
    install_preflight(
        aws,
        with_storm_preflight(policy, "on-demand"),
        user="carol",
        clock=lambda: NOW,
        spot_health=spot_health_reader(aws, table=TABLE),
    )
    sent = SentRequests().attach(aws)
    with pytest.warns(GovernanceWarning, match="launched On-Demand"):
        aws.client("sagemaker").create_training_job(**spot_request())
    (body,) = sent.bodies
    assert body["EnableManagedSpotTraining"] is False
    assert "MaxWaitTimeInSeconds" not in body["StoppingCondition"]  # valid with Managed Spot only


def test_a_calm_type_an_on_demand_launch_or_an_unreadable_ledger_launch_as_asked(
    aws: boto3.Session, policy: Policy
) -> None:
    # Given two interrupted jobs only (no storm)
    ledger(aws, jobs=2)
    hook = install_preflight(
        aws, policy, user="carol", clock=lambda: NOW, spot_health=spot_health_reader(aws, table=TABLE)
    )
    sent = SentRequests().attach(aws)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GovernanceWarning)
        aws.client("sagemaker").create_training_job(**spot_request())
    assert hook.last_outcome is not None and hook.last_outcome.spot_health is not None
    assert hook.last_outcome.spot_health["action"] == "none"
    # an On-Demand request never reads the ledger
    request = request_file("compliant.json")
    request["TrainingJobName"] = "on-demand-1"
    aws.client("sagemaker").create_training_job(**request)
    assert hook.last_outcome.spot_health is None
    # a ledger that cannot be read never blocks the launch, and says so
    install_preflight(
        aws, policy, user="carol", clock=lambda: NOW, spot_health=spot_health_reader(aws, table="gone")
    )
    spot = spot_request()
    spot["TrainingJobName"] = "spot-2"
    aws.client("sagemaker").create_training_job(**spot)
    assert [b["EnableManagedSpotTraining"] for b in sent.bodies] == [True, False, True]
