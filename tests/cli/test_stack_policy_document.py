"""`--stack NAME` with no document path: the stack's own policy document (the SSM parameter its
PolicyParameterName names) judges, as the deployed functions read it. Before, only the stack's Parameters
did: an SCP made with `--stack` denied, across an organization, jobs the deployed service lets run (a
team's wider instance types, an exemption), and said nothing about it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.domain.policy import Policy
from smgov.cli.main import main
from smgov.local_policy import deployed_settings
from smgov.preflight import preflight_request
from tests.iam_evaluator import may_deny, training_calls
from tests.iam_policy_samples import PROPERTY_POLICY, create_request
from tests.stacks import deployed_stack

STACK = "gov"
PARAMETER = "/gov/policy"
PARAMETERS = {
    "GovernanceMode": "enforce",
    "RequiredTags": "team",
    "AllowedInstanceTypes": "ml.g5.*,ml.m5.*",
    "MaxRuntimeHours": "72",
    "PolicyParameterName": PARAMETER,
}
# What the service runs with: team vision may use ml.p5.*; a job tagged approved=bench is exempt from it
DOCUMENT = """
teams:
  vision:
    rules:
      - id: instance-types
        patterns: ["ml.g5.*", "ml.p5.*"]
exemptions:
  - tag: {approved: bench}
    rules: [instance-types]
    expires: 2099-01-01
    reason: PLAT-1 approved benchmark
"""
BROKEN = "teams:\n  vision:\n    rules:\n      - id: no-such-rule\n        enabled: false\n"
VISION_P5 = create_request(tags={"team": "vision"}, instance_type="ml.p5.48xlarge")
BENCH_P4 = create_request(tags={"team": "nlp", "approved": "bench"}, instance_type="ml.p4d.24xlarge")
NLP_P5 = create_request(tags={"team": "nlp"}, instance_type="ml.p5.48xlarge")
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def put_document(*versions: str, name: str = PARAMETER) -> None:
    for text in versions:
        boto3.client("ssm").put_parameter(Name=name, Type="String", Value=text, Overwrite=True)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for variable in ("GOVERNANCE_MODE", "REQUIRED_TAGS", "ALLOWED_INSTANCE_TYPES", "POLICY_PARAMETER_NAME"):
        monkeypatch.delenv(variable, raising=False)
    with mock_aws(), deployed_stack(PARAMETERS, STACK):
        yield


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # what the installed `smgov` exits with
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def scp(out: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(out.splitlines()[0])
    return document


def denies(document: dict[str, Any], request: dict[str, Any]) -> list[str]:
    return may_deny(document, training_calls(request))


def ssm_refusing(monkeypatch: pytest.MonkeyPatch, operation: str, code: str = "AccessDeniedException") -> None:
    """The CLI's SSM client answers ``operation`` with ``code`` (an AccessDenied, a throttle)."""
    from smgov import local_policy

    def refused(**_: Any) -> None:
        raise ClientError({"Error": {"Code": code, "Message": "not for you"}}, operation)

    def connect(region: str | None = None) -> Any:
        client = boto3.client("ssm", region_name=region)
        client.meta.events.register(f"before-call.ssm.{operation}", refused)
        return client

    monkeypatch.setattr(local_policy, "connect_ssm", connect)


# ---- iam-policy --------------------------------------------------------------------------------------


def test_an_scp_from_a_stack_is_judged_by_the_stacks_document(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stack whose SSM document lets team vision use ml.p5.* and exempts approved=bench jobs
    put_document(DOCUMENT)
    # When an SCP is made from the stack with no document path
    code, out, err = run(capsys, "iam-policy", "--stack", STACK, "--scp")
    # Then it denies neither job the deployed service lets run, still denies what it stops, and says which
    # document (parameter, version) judged
    assert code == 0
    document = scp(out)
    assert denies(document, VISION_P5) == [] and denies(document, BENCH_P4) == []
    assert denies(document, NLP_P5) == ["DenyInstanceTypes"]
    assert f"SSM parameter {PARAMETER}, version 1" in err


def test_a_missing_document_means_the_stacks_parameters_and_is_said(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "iam-policy", "--stack", STACK, "--scp")
    assert code == 0
    assert denies(scp(out), VISION_P5) == ["DenyInstanceTypes"]
    assert PARAMETER in err and "does not exist" in err


def test_a_rejected_document_falls_back_to_its_newest_valid_version_loudly(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a good document (version 1), then a bad edit the service rejects (version 2)
    put_document(DOCUMENT, BROKEN)
    # When an SCP is made from the stack
    code, out, err = run(capsys, "iam-policy", "--stack", STACK, "--scp")
    # Then version 1 judges, as a new container of the functions would, and stderr says so loudly
    assert code == 0
    assert denies(scp(out), VISION_P5) == []
    assert "WARNING" in err and "(version 2) is rejected" in err and "version 1 (the newest valid" in err


def test_a_rejected_document_with_no_valid_version_means_the_parameters_loudly(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    put_document(BROKEN)
    code, out, err = run(capsys, "iam-policy", "--stack", STACK, "--scp")
    assert code == 0
    assert denies(scp(out), VISION_P5) == ["DenyInstanceTypes"]
    assert "WARNING" in err and "no earlier version" in err


@pytest.mark.parametrize(
    ("documents", "operation", "error"),
    [
        ((DOCUMENT,), "GetParameter", "AccessDeniedException"),
        ((DOCUMENT,), "GetParameter", "ThrottlingException"),
        ((DOCUMENT, BROKEN), "GetParameterHistory", "AccessDeniedException"),
    ],
)
def test_an_unreadable_document_produces_no_scp(
    aws: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    documents: tuple[str, ...],
    operation: str,
    error: str,
) -> None:
    # Given a stack document the caller cannot read (or, rejected, whose history it cannot read)
    put_document(*documents)
    ssm_refusing(monkeypatch, operation, error)
    # When an SCP is made from the stack, then none is: a non-zero exit naming the parameter
    code, out, err = run(capsys, "iam-policy", "--stack", STACK, "--scp")
    assert code != 0 and out == ""
    assert PARAMETER in err and error in err


def test_an_explicit_document_still_wins_and_ssm_is_not_read(
    aws: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the stack's document lets vision use ml.p5.*, and a file that does not
    put_document(DOCUMENT)
    ssm_refusing(monkeypatch, "GetParameter")
    path = tmp_path / "policy.yaml"
    path.write_text("teams:\n  vision:\n    mode: enforce\n")
    # When the SCP is made from the stack with --policy FILE, then the file judges
    code, out, _ = run(capsys, "iam-policy", "--stack", STACK, "--policy", str(path), "--scp")
    assert code == 0
    assert denies(scp(out), VISION_P5) == ["DenyInstanceTypes"]


# ---- preflight ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("request_", "verdict", "exit_code"), [(VISION_P5, "ok", 0), (NLP_P5, "refused", 1)])
def test_preflight_with_a_stack_judges_by_its_document(
    aws: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    request_: dict[str, Any],
    verdict: str,
    exit_code: int,
) -> None:
    # Given the stack's document lets team vision (only) use ml.p5.*
    put_document(DOCUMENT)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request_))
    # When a request is preflighted with the stack, then the document judges, and stderr says which
    code, out, err = run(capsys, "preflight", str(path), "--stack", STACK, "--user", "dana", "--json")
    report = json.loads(out)
    assert (code, report["verdict"]) == (exit_code, verdict)
    assert [v["rule"] for v in report["violations"]] == (["instance-types"] if exit_code else [])
    assert f"SSM parameter {PARAMETER}, version 1" in err


def test_preflight_with_an_unreadable_document_is_unusable_not_refused(
    aws: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_document(DOCUMENT)
    ssm_refusing(monkeypatch, "GetParameter")
    request = tmp_path / "request.json"
    request.write_text(json.dumps(VISION_P5))
    code, out, err = run(capsys, "preflight", str(request), "--stack", STACK, "--user", "dana")
    assert code == 2 and out == ""
    assert PARAMETER in err


def test_policy_show_with_a_stack_shows_what_its_functions_run_with(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    put_document(DOCUMENT)
    code, out, _ = run(capsys, "policy", "show", "--stack", STACK, "--json")
    assert code == 0
    shown = json.loads(out)
    assert list(shown["teams"]) == ["vision"] and len(shown["exemptions"]) == 1


# ---- the SCP from a stack never denies a job its deployed functions let run ----------------------------


@pytest.fixture
def stack_scp_and_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, Any], Policy]]:
    """The SCP `smgov iam-policy --stack` makes from a stack whose SSM document is the property policy,
    and the policy the stack's functions run with (their own reader, ``PolicyStore.current``). Made once
    per test: hypothesis reuses it for every example."""
    import contextlib
    import io

    for variable in ("GOVERNANCE_MODE", "REQUIRED_TAGS", "ALLOWED_INSTANCE_TYPES", "POLICY_PARAMETER_NAME"):
        monkeypatch.delenv(variable, raising=False)
    with mock_aws(), deployed_stack({**PARAMETERS, "RequiredTags": "team,cost-center"}, STACK, reads=2):
        put_document(yaml.safe_dump(PROPERTY_POLICY))
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert main(["iam-policy", "--stack", STACK, "--scp"]) == 0
        functions = deployed_settings(STACK)
        service = PolicyStore(
            functions.base_policy_document(), functions.policy_parameter_name, boto3.client("ssm")
        ).current()
        yield scp(out.getvalue()), service


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["job-1", "bench-1", "Bench-2", "Scale-1"]),
    tags=st.fixed_dictionaries(
        {},
        optional={
            "team": st.sampled_from(["vision", "lab", "nlp", ""]),
            "cost-center": st.sampled_from(["cc-1234", "cc-12"]),
            "env": st.sampled_from(["dev", "prod", "x"]),
            "project": st.sampled_from(["legacy", "ml"]),
        },
    ),
    instance_type=st.sampled_from(["ml.g5.2xlarge", "ml.m5.large", "ml.p4d.24xlarge", "ml.p5.48xlarge"]),
    count=st.integers(1, 12),
    runtime=st.sampled_from([3600, 259_200, 259_201, 360_000, 360_001]),
)
def test_the_scp_from_a_stack_never_denies_a_job_its_functions_let_run(
    stack_scp_and_service: tuple[dict[str, Any], Policy],
    *,
    name: str,
    tags: dict[str, str],
    instance_type: str,
    count: int,
    runtime: int,
) -> None:
    document, service = stack_scp_and_service
    request = create_request(name=name, tags=tags, instance_type=instance_type, count=count, runtime=runtime)
    denied = denies(document, request)
    if denied:
        outcome = preflight_request(request, service, NOW, fill_defaults=False)
        assert outcome.refused, (denied, outcome.render_text())


def test_the_property_sees_the_document(stack_scp_and_service: tuple[dict[str, Any], Policy]) -> None:
    # The property above is about the stack's document: a vision job on ml.p5 (its team's override) and a
    # bench- job on ml.p4d (its exemption) are let run by the functions and not denied by the SCP
    document, service = stack_scp_and_service
    for request in (
        create_request(
            tags={"team": "vision", "cost-center": "cc-1234", "env": "dev"}, instance_type="ml.p5.48xlarge"
        ),
        create_request(
            name="bench-1",
            tags={"team": "nlp", "cost-center": "cc-1234", "env": "dev"},
            instance_type="ml.p4d.24xlarge",
        ),
    ):
        assert not preflight_request(request, service, NOW, fill_defaults=False).refused
        assert denies(document, request) == []
