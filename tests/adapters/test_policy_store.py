from __future__ import annotations

import io
import json
from typing import Any

import boto3
import pytest

from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.domain.decisions import Mode
from tests.adapters.conftest import CallRecorder

BASE = {"mode": "audit", "rules": [{"type": "max-instance-count", "max": 4}]}
NAME = "/sagemaker-governance/policy"


@pytest.fixture
def ssm(aws: None) -> Any:
    return boto3.client("ssm", region_name="us-east-1")


def store(ssm: Any) -> PolicyStore:
    return PolicyStore(BASE, NAME, ssm, cache_seconds=0)


def test_no_document_means_deploy_time_defaults(ssm: Any) -> None:
    policy = store(ssm).current()
    assert policy.mode is Mode.AUDIT and policy.rules[0].max == 4  # type: ignore[union-attr]


def test_document_is_merged_over_defaults(ssm: Any) -> None:
    ssm.put_parameter(
        Name=NAME, Type="String", Value="mode: enforce\nrules:\n  - {id: max-instance-count, max: 8}\n"
    )
    recorder = CallRecorder().attach(ssm)
    policy = store(ssm).current()
    assert policy.mode is Mode.ENFORCE and policy.rules[0].max == 8  # type: ignore[union-attr]
    assert recorder.actions == PolicyStore.IAM_ACTIONS


def test_json_documents_work_too(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value=json.dumps({"mode": "enforce"}))
    assert store(ssm).current().mode is Mode.ENFORCE


def test_a_broken_document_keeps_the_last_good_policy(
    ssm: Any, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    # Given a store that has read a good document
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    policies = store(ssm)
    assert policies.current().mode is Mode.ENFORCE
    # When somebody uploads a broken one
    ssm.put_parameter(
        Name=NAME,
        Type="String",
        Value="mode: enforce\nrules: [{type: max-instance-count, max: 0}]\n",
        Overwrite=True,
    )
    # Then governance stays on with the last good policy, and the error is logged and counted
    assert policies.current().mode is Mode.ENFORCE
    assert "policy document rejected" in log_output.getvalue()
    assert '"PolicyLoadErrors":[1.0]' in capsys.readouterr().out


def test_a_broken_document_at_cold_start_falls_back_to_defaults(ssm: Any) -> None:
    ssm.put_parameter(Name=NAME, Type="String", Value="{not: [valid")
    assert store(ssm).current().mode is Mode.AUDIT


def test_no_parameter_configured_never_calls_ssm() -> None:
    assert PolicyStore(BASE, None, None).current().mode is Mode.AUDIT


def test_invalid_defaults_fail_at_start_up() -> None:
    with pytest.raises(ValueError, match="max"):
        PolicyStore({"rules": [{"type": "max-instance-count", "max": 0}]}, None, None)


def test_the_cache_runs_on_the_injected_clock(ssm: Any) -> None:
    # Given a store with a 60 s cache on a clock we control
    from datetime import UTC, datetime, timedelta

    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    policies.current()
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: audit\n", Overwrite=True)
    # When less than the cache time passes, the old document is still used (no new read)
    now[0] += timedelta(seconds=59)
    assert policies.current().mode is Mode.ENFORCE
    # and once it has passed, the new document is read
    now[0] += timedelta(seconds=2)
    assert policies.current().mode is Mode.AUDIT
    assert len(reads) == 2


def test_a_missing_document_is_cached_too(ssm: Any) -> None:
    # Given no policy document and a 60 s cache (the default deployment until a document is put)
    from datetime import UTC, datetime, timedelta

    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    # When every reaction of an invocation asks for the policy, SSM is read once
    for _ in range(4):
        assert policies.current().rules[0].max == 4  # type: ignore[union-attr]
    assert len(reads) == 1
    # and a document put later is picked up once the cache expires
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now[0] += timedelta(seconds=61)
    assert policies.current().mode is Mode.ENFORCE
    assert len(reads) == 2


def test_a_caller_may_accept_an_older_document(ssm: Any) -> None:
    # Given a store with a 60 s cache, read at minute 0 (a job's Starting event)
    from datetime import UTC, datetime, timedelta

    ssm.put_parameter(Name=NAME, Type="String", Value="mode: enforce\n")
    now = [datetime(2026, 11, 21, tzinfo=UTC)]
    policies = PolicyStore(BASE, NAME, ssm, cache_seconds=60, clock=lambda: now[0])
    reads: list[str] = []
    ssm.meta.events.register("before-call.ssm.GetParameter", lambda **_: reads.append("read"))
    policies.current()
    ssm.put_parameter(Name=NAME, Type="String", Value="mode: audit\n", Overwrite=True)
    # When a caller that accepts a 10-minute-old document asks 7 minutes later (its Training event)
    now[0] += timedelta(minutes=7)
    # Then it gets the cached document without a read, while a caller with the cache time gets the new one
    assert policies.current(max_age_seconds=600).mode is Mode.ENFORCE
    assert len(reads) == 1
    assert policies.current().mode is Mode.AUDIT
    assert len(reads) == 2
    # and a longer cache time wins over a shorter acceptance
    now[0] += timedelta(seconds=30)
    assert policies.current(max_age_seconds=10).mode is Mode.AUDIT
    assert len(reads) == 2
