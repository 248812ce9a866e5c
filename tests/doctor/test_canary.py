"""`smgov doctor --canary` (issue 21 item 4): one tiny non-compliant CPU job, a bounded wait for the
service's audit record about it, and a clean-up that always runs. SageMaker is the simulator's double
(requests validated against botocore's model), CloudWatch Logs is moto's; the clock is injected."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from smgov.cli.doctor import cmd_doctor
from smgov.doctor.canary import (
    INSTANCE_TYPE,
    MAX_RUNTIME_SECONDS,
    CanarySpec,
    NoDefaultImage,
    canary_name,
    canary_request,
    default_image,
    run_canary,
)
from smgov.doctor.deployment import Deployment
from smgov.doctor.findings import Status
from smgov.simulation.fake_sagemaker import FakeSageMaker

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
GROUP = "/aws/lambda/gov-job-events"
SPEC = CanarySpec(
    role_arn="arn:aws:iam::123456789012:role/SageMakerCanary",
    image="123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest",
    output_s3="s3://canary-bucket/out",
    timeout_seconds=60,
    poll_seconds=15,
)
NAME = canary_name(NOW)


@dataclass
class World:
    """The account the canary runs in, and a stand-in for the deployed service: on each wait it may
    record a decision about the canary (and stop it, as enforce mode does)."""

    sagemaker: FakeSageMaker
    logs: Any
    clients: dict[str, Any]
    elapsed: float = 0.0
    sleeps: list[float] = field(default_factory=list)
    service: Any = None  # called on each sleep: the service acting while the canary waits

    def deployment(self, **parameters: str) -> Deployment:
        return Deployment(
            stack_name="gov",
            region="us-east-1",
            account="123456789012",
            partition="aws",
            status="UPDATE_COMPLETE",
            parameters={"RequiredTags": "team,cost-center", "GovernanceMode": "enforce", **parameters},
            resources={"JobEventsLogGroup": GROUP},
            resource_types={"JobEventsLogGroup": "AWS::Logs::LogGroup"},
            version="0.1.0",
            client=lambda service: self.clients[service],
        )

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds
        if self.service is not None:
            self.service(self)

    def monotonic(self) -> float:
        return self.elapsed

    def record(self, code: str, outcome: str, job: str = NAME) -> None:
        """The service's audit record, as the job-events function logs it."""
        line = {
            "level": "INFO",
            "message": "governance decision",
            "audit": {"job_name": job, "code": code, "outcome": outcome},
        }
        self.logs.put_log_events(
            logGroupName=GROUP,
            logStreamName="s",
            logEvents=[{"timestamp": int(NOW.timestamp() * 1000) + 1000, "message": json.dumps(line)}],
        )


@pytest.fixture
def world() -> Iterator[World]:
    with mock_aws():
        fake = FakeSageMaker(clock=lambda: NOW)
        sagemaker = fake.attach(boto3.client("sagemaker", region_name="us-east-1"))
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName=GROUP)
        logs.create_log_stream(logGroupName=GROUP, logStreamName="s")
        yield World(fake, logs, {"sagemaker": sagemaker, "logs": logs})


def status(world: World) -> str:
    return str(world.clients["sagemaker"].describe_training_job(TrainingJobName=NAME)["TrainingJobStatus"])


def test_the_canary_is_tiny_bounded_and_non_compliant_by_its_tags() -> None:
    request = canary_request(NAME, SPEC)
    assert request["ResourceConfig"] == {"InstanceType": INSTANCE_TYPE, "InstanceCount": 1, "VolumeSizeInGB": 1}
    assert (
        request["StoppingCondition"] == {"MaxRuntimeInSeconds": MAX_RUNTIME_SECONDS} and MAX_RUNTIME_SECONDS <= 600
    )
    assert [t["Key"] for t in request["Tags"]] == ["smgov:canary"]  # none of any stack's RequiredTags
    assert "InputDataConfig" not in request  # nothing read


def test_enforce_mode_the_service_stops_the_canary_and_records_it(world: World) -> None:
    # Given the service records the violation and stops the job while the canary waits
    def service(w: World) -> None:
        if len(w.sleeps) == 1:
            w.record("compliance.stop.violation", "done")
            w.clients["sagemaker"].stop_training_job(TrainingJobName=NAME)

    world.service = service
    # When the canary runs
    findings = run_canary(world.deployment(), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic)
    # Then the record is found after one wait and the clean-up finds the job already stopping
    (recorded, cleaned) = findings
    assert (recorded.status, recorded.detail) == (Status.OK, "recorded compliance.stop.violation done after 15s")
    assert cleaned.status is Status.OK and cleaned.detail.startswith("already Stopp")
    assert world.sleeps == [15]


def test_no_record_within_the_bound_fails_and_the_canary_is_still_stopped(world: World) -> None:
    # Given a service that never records anything (its rule is broken, say)
    findings = run_canary(world.deployment(), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic)
    recorded, cleaned = findings
    # Then the wait ends at the bound (60 s, polled every 15 s), it fails, and the canary stops the job
    assert recorded.status is Status.FAIL and "no compliance record" in recorded.detail
    assert world.sleeps == [15, 15, 15, 15]
    assert (cleaned.status, cleaned.detail) == (Status.OK, "stopped by the canary")
    assert status(world) in ("Stopping", "Stopped")


def test_a_record_that_is_not_the_expected_violation_fails(world: World) -> None:
    # Given audit mode, but the service says the canary is compliant (its RequiredTags are not applied)
    world.service = lambda w: w.record("compliance.pass.compliant", "no-action")
    world.record("compliance.stop.violation", "done", job="someone-elses-job")  # not the canary's
    findings = run_canary(
        world.deployment(GovernanceMode="audit"), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic
    )
    recorded, cleaned = findings
    assert recorded.status is Status.FAIL and "expected a violation audit-only in audit mode" in recorded.detail
    assert cleaned.detail == "stopped by the canary"  # audit mode: nobody else stops it


def test_the_clean_up_runs_even_when_the_wait_breaks(world: World) -> None:
    def service(w: World) -> None:
        raise KeyboardInterrupt  # the operator gives up while waiting

    world.service = service
    with pytest.raises(KeyboardInterrupt):
        run_canary(world.deployment(), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic)
    assert status(world) in ("Stopping", "Stopped")


def test_a_stack_without_required_tags_is_not_probed(world: World) -> None:
    (finding,) = run_canary(
        world.deployment(RequiredTags=""), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic
    )
    assert finding.status is Status.UNKNOWN and "requires no tags" in finding.detail
    assert world.clients["sagemaker"].list_training_jobs()["TrainingJobSummaries"] == []


def test_a_refused_launch_is_reported_not_raised(world: World) -> None:
    # Given the caller may not pass the canary's role (CreateTrainingJob refused)
    from botocore.stub import Stubber

    refusing = boto3.client("sagemaker", region_name="us-east-1")
    world.clients["sagemaker"] = refusing
    with Stubber(refusing) as stub:
        stub.add_client_error("create_training_job", "AccessDeniedException", "not authorized to iam:PassRole")
        findings = run_canary(world.deployment(), SPEC, now=NOW, sleep=world.sleep, monotonic=world.monotonic)
    # Then one unknown finding says why, and nothing was waited for or stopped
    assert [f.status for f in findings] == [Status.UNKNOWN]
    assert (
        findings[0].detail
        == "not launched: CreateTrainingJob AccessDeniedException: not authorized to iam:PassRole"
    )
    assert world.sleeps == []


def test_the_cli_wants_everything_the_canary_needs(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(
        canary=True, canary_role=None, canary_image="i", canary_output="s3://b/o", stack="gov", region="us-east-1"
    )
    assert cmd_doctor(args) == 2
    assert "--canary-role" in capsys.readouterr().err


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1", "ap-southeast-2"])
def test_the_default_image_is_sagemakers_own_cpu_image_in_the_region(region: str) -> None:
    # The SDK's image table, read offline: the scikit-learn training image of the region's ECR
    image = default_image(region)
    assert f".dkr.ecr.{region}.amazonaws.com/sagemaker-scikit-learn:" in image and image.endswith("-cpu-py3")


def test_a_region_without_a_default_image_asks_for_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(NoDefaultImage, match="mars-1"):
        default_image("mars-1")

    class Session:
        region_name = "mars-1"

    args = argparse.Namespace(
        canary=True, canary_role="arn:aws:iam::1:role/r", canary_image=None, canary_output="s3://b/o", stack="gov"
    )
    # Then nothing is launched and the usage error names the option (exit 2)
    assert cmd_doctor(args, session=Session()) == 2
    assert "--canary-image" in capsys.readouterr().err


def test_without_an_image_the_canary_runs_sagemakers_own(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a deployed stack (its checks stubbed out: only the canary is under test) and no --canary-image
    import smgov.doctor.checks
    import smgov.doctor.deployment

    monkeypatch.setattr(smgov.doctor.deployment, "load_deployment", lambda session, stack: world.deployment())
    monkeypatch.setattr(smgov.doctor.checks, "run_checks", lambda deployment, context: [])

    class Session:
        region_name = "us-east-1"

    args = argparse.Namespace(
        canary=True,
        canary_role=SPEC.role_arn,
        canary_image=None,
        canary_output=SPEC.output_s3,
        canary_timeout=0.0,
        stack="gov",
        json=True,
        verbose=False,
    )
    cmd_doctor(args, session=Session(), now=NOW, sleep=world.sleep, monotonic=world.monotonic)
    # Then the canary was launched with the region's scikit-learn image, and stopped
    job = world.clients["sagemaker"].describe_training_job(TrainingJobName=NAME)
    assert job["AlgorithmSpecification"]["TrainingImage"] == default_image("us-east-1")
    assert job["TrainingJobStatus"] in ("Stopping", "Stopped")
