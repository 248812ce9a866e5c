"""A new container that cannot read the policy document acts on nothing: its policy is unknown.

The deploy-time defaults are not the document: taking them for it drops the document's exemptions (an
exempt job stopped) and its mode (a violation reported in audit mode and the job marked evaluated, so
the reconciler never judges it again). A queue-fed delivery fails and comes back; the reconciler's run
fails (its dead-letter queue) and the next run does the work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagemaker_governance.business_metrics import MemoryBusinessMetrics
from sagemaker_governance.composition.alarm_stopper import build as stopper_build
from sagemaker_governance.domain.compliance import EVALUATED_TAG, ComplianceCode
from sagemaker_governance.domain.errors import PolicyUnavailable
from sagemaker_governance.domain.guards.idle import IdleCode
from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from sagemaker_governance.handlers.reconciler import handler as reconciler
from smgov.simulation.harness import LocalAccount, local_account
from smgov.simulation.job_signals import log_stream
from tests.builders import create_request
from tests.conftest import load_event
from tests.handlers.conftest import (
    ENFORCE,
    NOW,
    PREFIX,
    MovableClock,
    judged_account,
    sns_notification_body,
    sqs_batch,
)

POLICY = "/gov/policy"
EXEMPT_BENCH = (
    "exemptions:\n  - {job_name_prefix: bench-, rules: [required-tags, idle-guard], expires: 2099-12-31, "
    "reason: INC-1}\n"
)
EXEMPTED, STOP = ComplianceCode.EXEMPTED.value, ComplianceCode.STOP.value
BROKEN = "rules: [{type: max-instance-count, max: 0}]\n"


def refuse(account: LocalAccount, operation: str, code: str, times: int = 1) -> None:
    """The functions' SSM client gets ``code`` for ``operation`` (after botocore's retries) ``times`` times."""
    answers = iter([ClientError({"Error": {"Code": code, "Message": "no"}}, operation)] * times)

    def answer(**_: Any) -> None:
        error = next(answers, None)
        if error is not None:
            raise error

    account.root.client("ssm").meta.events.register(f"before-call.ssm.{operation}", answer)


def marked(account: LocalAccount, name: str) -> bool:
    arn = account.sagemaker.jobs[name]["TrainingJobArn"]
    return EVALUATED_TAG in {t["Key"] for t in account.sagemaker.tags[arn]}


def compliance_records(account: LocalAccount, name: str) -> list[tuple[str | None, str]]:
    return [
        (r.code, r.outcome.value)
        for r in account.audit.records
        if r.job_name == name and r.rule == "required-tags"
    ]


@pytest.fixture
def acct() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, ENFORCE) as account:
        yield account


@pytest.fixture
def audit_acct() -> Iterator[LocalAccount]:
    with local_account(lambda: NOW, {**ENFORCE, "GOVERNANCE_MODE": "audit"}) as account:
        yield account


def test_a_throttled_read_at_cold_start_never_stops_a_job_the_document_exempts(acct: LocalAccount) -> None:
    # Given a document that exempts bench- jobs from the required tags, and two jobs starting: an exempt one
    # without its cost-center tag, and a well-tagged one
    acct.ssm.put_parameter(Name=POLICY, Type="String", Value=EXEMPT_BENCH)
    acct.sagemaker.launch(create_request("bench-1", tags={"team": "vision", "owner": "alice"}))
    acct.sagemaker.launch(create_request("job-ok"))
    batch = sqs_batch(*(json.dumps(acct.sagemaker.event(name)) for name in ("bench-1", "job-ok")))
    # When a new container's first GetParameter is throttled past botocore's retries
    refuse(acct, "GetParameter", "ThrottlingException")
    result = acct.invoke(job_events, batch)
    # Then the first record returns to the queue: nothing stopped, recorded or marked on the defaults,
    # while the next record (the read answered) is governed by the document
    assert result == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}
    assert acct.sagemaker.stop_requests == []
    assert compliance_records(acct, "bench-1") == [] and not marked(acct, "bench-1")
    assert marked(acct, "job-ok")
    # and its redelivery is governed by the document: exempt, not stopped, evaluated
    assert acct.invoke(job_events, sqs_batch(json.dumps(acct.sagemaker.event("bench-1")))) == {
        "batchItemFailures": []
    }
    assert acct.sagemaker.stop_requests == []
    assert compliance_records(acct, "bench-1") == [(EXEMPTED, "exempted")] and marked(acct, "bench-1")


@pytest.mark.parametrize(
    ("operation", "code"),
    [("GetParameter", "AccessDeniedException"), ("GetParameterHistory", "AccessDeniedException")],
)
def test_an_unreadable_policy_at_cold_start_never_loses_the_documents_enforce_mode(
    audit_acct: LocalAccount, operation: str, code: str
) -> None:
    # Given a stack deployed in audit mode whose document enforces (for the history case: then a bad edit)
    acct = audit_acct
    acct.ssm.put_parameter(Name=POLICY, Type="String", Value="mode: enforce\n")
    if operation == "GetParameterHistory":
        acct.ssm.put_parameter(Name=POLICY, Type="String", Value=BROKEN, Overwrite=True)
    acct.sagemaker.launch(create_request("untagged", tags={}))
    event = json.dumps(acct.sagemaker.event("untagged"))
    # When a new container cannot read the document (or the history that would replace the bad edit)
    refuse(acct, operation, code)
    with pytest.raises(PolicyUnavailable):  # the batch's only record failed: the invocation fails
        acct.invoke(job_events, sqs_batch(event))
    # Then no audit-mode "would stop" is recorded and the job is not marked evaluated
    assert compliance_records(acct, "untagged") == [] and not marked(acct, "untagged")
    # and the redelivery enforces the document: the job is stopped
    acct.invoke(job_events, sqs_batch(event))
    assert acct.sagemaker.stop_requests == ["untagged"]
    assert compliance_records(acct, "untagged") == [(STOP, "done")] and marked(acct, "untagged")


@pytest.fixture
def judged(clock: MovableClock, savings: MemoryBusinessMetrics) -> Iterator[LocalAccount]:
    yield from judged_account(clock, savings, ENFORCE)


def test_a_new_stopper_container_that_cannot_read_the_policy_stops_nothing(
    judged: LocalAccount, clock: MovableClock
) -> None:
    # Given an idle job whose alarm was made before the document exempted it from the idle guard
    acct = judged
    acct.sagemaker.launch(create_request("bench-1"), secondary="Training")
    acct.invoke(job_events, acct.sagemaker.event("bench-1"))
    acct.signals.idle("bench-1", hosts=16)  # type: ignore[attr-defined]
    log_stream("bench-1")
    alarm = f"{PREFIX}bench-1"
    acct.ssm.put_parameter(
        Name=POLICY, Type="String", Value="judge: {enabled: true}\n" + EXEMPT_BENCH, Overwrite=True
    )
    clock.advance(minutes=50)
    # When its alarm fires into a new stopper container whose first GetParameter is throttled
    acct.root.__dict__.pop("policy_store", None)
    acct.root.forget(stopper_build)
    refuse(acct, "GetParameter", "ThrottlingException")
    acct.cloudwatch.set_state(alarm, "ALARM")
    batch = sqs_batch(sns_notification_body(acct, alarm), queue="AlarmQueue")
    with pytest.raises(PolicyUnavailable):
        acct.invoke(stopper, batch)
    # Then the job is not stopped on the defaults and nothing is recorded; the redelivery finds it exempt
    assert acct.sagemaker.stop_requests == []
    assert [r for r in acct.audit.records if r.trigger == "idle-alarm"] == []
    assert acct.invoke(stopper, batch) == {"batchItemFailures": []}
    assert acct.sagemaker.stop_requests == []
    records = [(r.code, r.outcome.value) for r in acct.audit.records if r.trigger == "idle-alarm"]
    assert records == [(IdleCode.EXEMPTED.value, "exempted")]


def test_a_reconciler_run_that_cannot_read_the_policy_acts_on_nothing(
    clock: MovableClock, savings: MemoryBusinessMetrics
) -> None:
    with local_account(clock, ENFORCE, metrics=savings) as acct:
        # Given a job the document exempts whose Starting event was lost, past the evaluation grace
        acct.ssm.put_parameter(Name=POLICY, Type="String", Value=EXEMPT_BENCH)
        acct.sagemaker.launch(create_request("bench-1", tags={}))
        clock.advance(minutes=20)
        # When a new reconciler container cannot read the document
        refuse(acct, "GetParameter", "ThrottlingException")
        with pytest.raises(PolicyUnavailable):  # the run fails: its on-failure destination, the DLQ
            acct.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then nothing is stopped, recorded or marked on the defaults
        assert acct.sagemaker.stop_requests == []
        assert acct.audit.records == [] and not marked(acct, "bench-1")
        assert savings.repairs == []
        # and the next run evaluates the job under the document: exempt
        acct.invoke(reconciler, load_event("scheduled-reconcile.json"))
        assert acct.sagemaker.stop_requests == []
        assert compliance_records(acct, "bench-1") == [(EXEMPTED, "exempted")] and marked(acct, "bench-1")
