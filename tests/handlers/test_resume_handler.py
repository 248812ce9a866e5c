"""Auto-resume and Spot fallback through the real job-events handler, moto and the SageMaker double
(botocore validates every CreateTrainingJob the service sends)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.business_metrics import BusinessMetric
from sagemaker_governance.composition import job_events as job_events_builder
from sagemaker_governance.composition import reconciler as reconciler_builder
from sagemaker_governance.domain.clone import (
    TAG_ATTEMPT,
    TAG_REASON,
    TAG_RESUME_AFTER,
    TAG_RESUME_SETTLED,
    TAG_ROOT,
    TAG_SOURCE,
)
from sagemaker_governance.domain.errors import AdapterError, DescriptionBehind
from sagemaker_governance.domain.notifications import NotificationOutcome
from sagemaker_governance.handlers.job_events import handler
from sagemaker_governance.handlers.reconciler import handler as reconciler
from smgov.simulation.fake_cloudwatch import CloudWatchError
from smgov.simulation.fake_sagemaker import SageMakerError
from smgov.simulation.harness import LocalAccount, local_account
from tests.builders import create_request
from tests.conftest import load_event
from tests.handlers.conftest import interrupt, sqs_batch

ENFORCE = {
    "GOVERNANCE_MODE": "enforce",
    "REQUIRED_TAGS": "team,cost-center",
    "RESUME_MIN_TRAINING_HOURS": "24",
    "RESUME_MAX_ATTEMPTS": "2",
    "SPOT_MAX_INTERRUPTIONS": "3",
}
TRANSIENT = "InternalServerError: We encountered an internal error. Please try again."


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def account(clock: Clock) -> Iterator[LocalAccount]:
    with local_account(clock, ENFORCE, log_audit=False) as acct:
        yield acct


def resume_records(account: LocalAccount) -> list[Any]:
    """The audit records of auto-resume and the Spot fallback (the idle guard and the efficiency record
    also act on ended jobs)."""
    return [r for r in account.audit.records if r.rule not in ("idle-guard", "efficiency-record")]


def messages(account: LocalAccount, queue_url: str) -> list[dict[str, Any]]:
    answer = account.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in answer.get("Messages", [])]


def launch(account: LocalAccount, name: str, *, spot: bool = False, checkpoint: bool = True, **extra: Any) -> None:
    request = create_request(name, **extra)
    if checkpoint:
        request["CheckpointConfig"] = {"S3Uri": f"s3://bucket/checkpoints/{name}/"}
    if spot:
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"] = {"MaxRuntimeInSeconds": 86_400, "MaxWaitTimeInSeconds": 172_800}
    account.sagemaker.launch(request)


def fail_after(
    account: LocalAccount, clock: Clock, name: str, hours: float, reason: str = TRANSIENT
) -> dict[str, Any]:
    fake = account.sagemaker
    clock.advance(minutes=5)
    fake.transition(name, "InProgress", "Training")
    clock.advance(hours=hours)
    fake.transition(name, "Failed", "Failed", failure_reason=reason)
    return fake.event(name)


def tags_of(account: LocalAccount, name: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in account.sagemaker.tags[account.sagemaker.arn(name)]}


# ---- auto-resume ----------------------------------------------------------------------------------


def test_the_request_shape_a_clone_needs_is_read_at_the_first_clone_not_at_cold_start(
    account: LocalAccount, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the functions' reads of CreateTrainingJob's request shape from botocore's model, recorded
    read: list[str] = []

    def recorded(model: Any) -> Any:
        read.append(model.service_name)
        return create_training_job_shape(model)

    monkeypatch.setattr(job_events_builder, "create_training_job_shape", recorded)
    monkeypatch.setattr(reconciler_builder, "create_training_job_shape", recorded)
    # When a job starts and the reconciler runs: nothing to clone (each function's first invocation)
    launch(account, "llm-sft-9")
    account.invoke(handler, account.sagemaker.event("llm-sft-9"))
    account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    # Then neither function read it (a cold start pays for walking the model only when it clones)
    assert read == []
    # When the job fails transiently after 26 hours
    account.invoke(handler, fail_after(account, clock, "llm-sft-9", hours=26))
    # Then auto-resume planned its clone on the shape read then
    assert set(read) == {"sagemaker"}
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["llm-sft-9-r1"]


def test_a_long_job_that_failed_transiently_is_resumed_once_despite_duplicate_events(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a job with an aws: tag and more tags than one ListTags page, failed after 26 hours
    launch(account, "llm-sft-4")
    arn = account.sagemaker.arn("llm-sft-4")
    account.sagemaker.tags[arn].append({"Key": "aws:cloudformation:stack-name", "Value": "ml"})
    account.sagemaker.tag_page_size = 2
    queue = account.notification_inbox()
    event = fail_after(account, clock, "llm-sft-4", hours=26)
    # When its Failed event arrives twice
    first = account.invoke(handler, event)
    second = account.invoke(handler, event)
    # Then exactly one clone exists, named after the root and attempt, with the source's checkpoint
    (request,) = account.sagemaker.created
    assert request["TrainingJobName"] == "llm-sft-4-r1"
    assert request["CheckpointConfig"] == {"S3Uri": "s3://bucket/checkpoints/llm-sft-4/"}
    assert account.sagemaker.calls["CreateTrainingJob"] == 2  # the duplicate met "already exists"
    assert account.sagemaker.calls["ListTags"] > 2  # every page was read
    # and it carries the tags (not aws:) plus its lineage
    tags = tags_of(account, "llm-sft-4-r1")
    assert tags == {
        "team": "vision",
        "cost-center": "cc-1234",
        "owner": "alice",
        TAG_ROOT: "llm-sft-4",
        TAG_SOURCE: "llm-sft-4",
        TAG_ATTEMPT: "1",
        TAG_REASON: "failed-transient",
    }
    # and each decision is audited: done, then already-done; the explain shape carries the request
    assert [(r.rule, r.action, r.outcome.value) for r in resume_records(account)] == [
        ("auto-resume", "clone", "done"),
        ("auto-resume", "clone", "already-done"),
    ]
    assert resume_records(account)[0].evidence["diagnosis"]["signature"] == "internal-server-error"
    assert resume_records(account)[0].evidence["training_hours"] == pytest.approx(26)
    assert first["decisions"][0]["request"]["TrainingJobName"] == "llm-sft-4-r1"
    assert second["decisions"][0]["action"] == "clone"
    # and the owner was told once: old job, new job, why
    (message,) = messages(account, queue)
    assert (message["job_name"], message["related_job"], message["kind"]) == (
        "llm-sft-4",
        "llm-sft-4-r1",
        "resume",
    )
    assert message["items"][0]["code"] == "resume.clone.transient"
    assert "internal-server-error" in message["items"][0]["reason"]  # the signature, named to the owner
    assert message["diagnosis"]["class"] == "sagemaker-internal"


LEDGER = "smgov-idempotency"


def test_an_owner_whose_notification_failed_is_told_by_the_retry_once(clock: Clock) -> None:
    # Given the deployed wiring (the delivery ledger), and SNS refusing the first Publish after the clone
    with local_account(clock, {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": LEDGER}, log_audit=False) as account:
        account.root.client("dynamodb").create_table(
            TableName=LEDGER,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        refused: list[str] = []

        def throttle_first_publish(**_: Any) -> None:
            if not refused:
                refused.append("Publish")
                raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")

        account.root.client("sns").meta.events.register("before-call.sns.Publish", throttle_first_publish)
        launch(account, "llm-sft-9")
        queue = account.notification_inbox()
        event = fail_after(account, clock, "llm-sft-9", hours=26)
        # When the Failed event's delivery fails at the notification and is retried
        with pytest.raises(AdapterError, match="SNS Publish failed"):
            account.invoke(handler, event)
        account.invoke(handler, event)
        # Then one clone, one record of it, one notification and one JobsResumed
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["llm-sft-9-r1"]
        assert [(r.code, r.outcome.value) for r in resume_records(account)] == [("resume.clone.transient", "done")]
        (message,) = messages(account, queue)
        assert (message["job_name"], message["related_job"]) == ("llm-sft-9", "llm-sft-9-r1")
        assert len(account.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1
        # and the event delivered once more (a duplicate) changes nothing
        account.invoke(handler, event)
        assert messages(account, queue) == [] and len(account.metrics.of(BusinessMetric.JOBS_RESUMED)) == 1


def test_a_resume_the_audit_mode_attempt_only_planned_is_recorded_and_told_when_its_retry_acts(
    clock: Clock,
) -> None:
    # Given the deployed wiring in audit mode with notices (the README's first week), and CloudWatch refusing
    # the Failed job's alarm deletion once (a 400, not retried by botocore): the attempt records the clone
    # audit-only, tells the owner it would be resumed, then fails the delivery
    env = {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": LEDGER, "POLICY_PARAMETER_NAME": "/gov/policy"}
    with local_account(clock, env, log_audit=False) as account:
        account.root.client("dynamodb").create_table(
            TableName=LEDGER,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        account.ssm.put_parameter(
            Name="/gov/policy", Value="mode: audit\nnotify_in_audit_mode: true\n", Type="String"
        )
        launch(account, "llm-sft-9")
        queue = account.notification_inbox()
        batch = sqs_batch(json.dumps(fail_after(account, clock, "llm-sft-9", hours=26)))
        delete_alarms = account.cloudwatch._op_DeleteAlarms
        refused: list[str] = []

        def refuse_once(params: dict[str, Any]) -> dict[str, Any]:
            if not refused:
                refused.append("DeleteAlarms")
                raise CloudWatchError("InvalidParameterValue", "refused", 400)
            return delete_alarms(params)

        account.cloudwatch._op_DeleteAlarms = refuse_once  # type: ignore[method-assign]
        with pytest.raises(AdapterError):
            account.invoke(handler, batch)
        # When the team has switched to enforce by the time the queue delivers the record again
        account.ssm.put_parameter(
            Name="/gov/policy", Value="mode: enforce\nnotify_in_audit_mode: true\n", Type="String", Overwrite=True
        )
        clock.advance(minutes=31)
        assert account.invoke(handler, batch) == {"batchItemFailures": []}
        # Then the clone the retry created is recorded after the plan, and the owner is told it was resumed
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["llm-sft-9-r1"]
        assert [(r.code, r.outcome.value) for r in resume_records(account)] == [
            ("resume.clone.transient", "audit-only"),
            ("resume.clone.transient", "done"),
        ]
        assert [(m["kind"], m["outcome"]) for m in messages(account, queue)] == [
            ("resume", NotificationOutcome.WOULD_RESUME.value),
            ("resume", NotificationOutcome.RESUMED.value),
        ]
        # and the same state change in another message (a duplicate) records and tells nothing more
        duplicate = copy.deepcopy(batch)
        duplicate["Records"][0]["messageId"] = "m-duplicate"
        assert account.invoke(handler, duplicate) == {"batchItemFailures": []}
        assert len(resume_records(account)) == 2 and messages(account, queue) == []


def test_a_lineage_is_resumed_until_its_budget_is_spent(account: LocalAccount, clock: Clock) -> None:
    # Given a root job with a 63-character name that fails after 30 hours
    root = "resnet-" + "x" * 56
    assert len(root) == 63
    launch(account, root)
    account.invoke(handler, fail_after(account, clock, root, hours=30))
    # When each clone fails too (the first on capacity right away, the second after training)
    first = account.sagemaker.created[-1]["TrainingJobName"]
    account.sagemaker.transition(first, "Failed", "Failed", failure_reason="CapacityError: Unable to provision")
    clock.advance(minutes=15)  # the second attempt's backoff (the event arrives once it has elapsed)
    account.invoke(handler, account.sagemaker.event(first))
    second = account.sagemaker.created[-1]["TrainingJobName"]
    account.invoke(handler, fail_after(account, clock, second, hours=3))
    # Then attempts 1 and 2 were made (bounded names), and the budget of 2 stopped the third
    assert [r["TrainingJobName"][-3:] for r in account.sagemaker.created] == ["-r1", "-r2"]
    assert all(len(r["TrainingJobName"]) <= 63 for r in account.sagemaker.created)
    assert tags_of(account, second)[TAG_ROOT] == root and tags_of(account, second)[TAG_ATTEMPT] == "2"
    last = resume_records(account)[-1]
    assert (last.job_name, last.action, last.outcome.value) == (second, "none", "no-action")
    assert last.code == "resume.skip.budget-spent"


def test_failures_in_the_users_code_are_not_resumed(account: LocalAccount, clock: Clock) -> None:
    launch(account, "typo-job")
    account.invoke(
        handler,
        fail_after(
            account,
            clock,
            "typo-job",
            hours=30,
            reason="AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"KeyError: 'x'\"",
        ),
    )
    assert account.sagemaker.created == []
    (record,) = resume_records(account)
    assert (record.action, record.outcome.value, record.code) == ("none", "no-action", "resume.skip.user-code")
    assert record.evidence["diagnosis"]["signature"] == "python-exception"


def test_short_runs_are_not_resumed(account: LocalAccount, clock: Clock) -> None:
    launch(account, "short-job")
    account.invoke(handler, fail_after(account, clock, "short-job", hours=2))
    assert account.sagemaker.created == []
    assert resume_records(account)[0].code == "resume.skip.too-short"


def test_a_deferred_resume_whose_clone_sagemaker_refuses_is_settled_and_not_tried_again(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a clone auto-resume made that failed transiently after 26 h, its resume deferred for the second
    # attempt's backoff (tagged smgov:resume-after for the reconciler)
    lineage = {TAG_ROOT: "llm-sft-v", TAG_ATTEMPT: "1", TAG_SOURCE: "llm-sft-v", TAG_REASON: "failed-transient"}
    launch(account, "llm-sft-v-r1", tags={"team": "vision", "cost-center": "cc-1234", **lineage})
    account.invoke(handler, fail_after(account, clock, "llm-sft-v-r1", hours=26))
    assert resume_records(account)[-1].code == "resume.defer.backoff"
    refusal = SageMakerError("ValidationException", "The request is invalid for this account", 400)
    # When the reconciler runs once the backoff has elapsed and SageMaker refuses the clone's request, then
    # runs again (SageMaker would refuse it again)
    clock.advance(minutes=16)
    account.sagemaker.fail_next["CreateTrainingJob"] = refusal
    account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    clock.advance(minutes=10)
    account.sagemaker.fail_next["CreateTrainingJob"] = refusal
    account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    # Then the refusal is recorded once and settles the deferral: the second run neither asks SageMaker to
    # create the clone again nor records it again
    refused = [
        r for r in resume_records(account) if r.job_name == "llm-sft-v-r1" and r.code != "resume.defer.backoff"
    ]
    assert [(r.code, r.outcome.value) for r in refused] == [("resume.skip.not-clonable", "no-action")]
    assert account.sagemaker.calls["CreateTrainingJob"] == 1 and account.sagemaker.created == []
    assert tags_of(account, "llm-sft-v-r1")[TAG_RESUME_SETTLED] == "resume.skip.not-clonable@llm-sft-v-r1"


def test_a_failed_event_redriven_from_the_dead_letter_queue_days_later_clones_nothing(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a long job that failed transiently, its event left in the dead-letter queue by an outage
    launch(account, "llm-sft-late")
    event = fail_after(account, clock, "llm-sft-late", hours=26)
    # When the operator redrives it 10 days later (`smgov dlq redrive`), and again (a duplicate)
    clock.advance(days=10)
    account.invoke(handler, event)
    account.invoke(handler, event)
    # Then nothing is cloned (its owner has most likely relaunched it by hand), and the skip is recorded
    assert account.sagemaker.created == []
    assert {(r.code, r.outcome.value) for r in resume_records(account)} == {("resume.skip.too-late", "no-action")}


def test_audit_mode_records_the_plan_and_creates_nothing(clock: Clock) -> None:
    with local_account(clock, {**ENFORCE, "GOVERNANCE_MODE": "audit"}, log_audit=False) as account:
        launch(account, "llm-sft-5")
        result = account.invoke(handler, fail_after(account, clock, "llm-sft-5", hours=26))
        assert account.sagemaker.calls["CreateTrainingJob"] == 0
        (record,) = resume_records(account)
        assert (record.action, record.mode, record.outcome.value) == ("clone", "audit", "audit-only")
        assert result["decisions"][0]["request"]["TrainingJobName"] == "llm-sft-5-r1"


def test_a_name_taken_by_another_job_is_not_mistaken_for_our_clone(account: LocalAccount, clock: Clock) -> None:
    # Given someone already launched a job named like our clone
    launch(account, "llm-sft-6-r1")
    launch(account, "llm-sft-6")
    account.invoke(handler, fail_after(account, clock, "llm-sft-6", hours=26))
    # Then the clone is recorded as failed, not as already done
    (record,) = resume_records(account)
    assert (record.action, record.outcome.value) == ("clone", "failed")
    assert "exists and was resumed from None" in record.reason


def test_a_failed_create_is_recorded_and_the_invocation_fails_for_a_retry(
    account: LocalAccount, clock: Clock
) -> None:
    launch(account, "llm-sft-7")
    event = fail_after(account, clock, "llm-sft-7", hours=26)
    account.sagemaker.fail_next["CreateTrainingJob"] = SageMakerError("ResourceLimitExceeded", "quota", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    assert resume_records(account)[-1].outcome.value == "failed"
    # the retry succeeds
    account.invoke(handler, event)
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["llm-sft-7-r1"]


def test_roles_outside_the_allowed_pattern_are_skipped(clock: Clock) -> None:
    with local_account(clock, {**ENFORCE, "CLONE_PASS_ROLE_PATTERN": "ml-training-*"}, log_audit=False) as account:
        launch(account, "llm-sft-8")
        account.invoke(handler, fail_after(account, clock, "llm-sft-8", hours=26))
        assert account.sagemaker.calls["CreateTrainingJob"] == 0
        assert resume_records(account)[0].code == "resume.skip.role-not-allowed"


# ---- Spot fallback --------------------------------------------------------------------------------


def test_the_third_interruption_moves_the_job_on_demand_and_duplicates_change_nothing(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a Spot job with checkpoints, interrupted twice: nothing happens yet
    launch(account, "bert-spot-1", spot=True)
    account.invoke(handler, interrupt(account, clock, "bert-spot-1", 2))
    assert account.sagemaker.created == [] and account.sagemaker.stop_requests == []
    # When the third interruption arrives (twice)
    account.sagemaker.transition("bert-spot-1", "InProgress", "Starting")
    event = interrupt(account, clock, "bert-spot-1", 1)
    account.invoke(handler, event)
    account.invoke(handler, event)
    # Then one On-Demand clone was created and the Spot job was stopped once
    (request,) = account.sagemaker.created
    assert request["TrainingJobName"] == "bert-spot-1-r1"
    assert request["EnableManagedSpotTraining"] is False
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 86_400}
    assert request["CheckpointConfig"] == {"S3Uri": "s3://bucket/checkpoints/bert-spot-1/"}
    assert account.sagemaker.stop_requests == ["bert-spot-1"]
    assert tags_of(account, "bert-spot-1-r1")[TAG_REASON] == "spot-interrupted"
    outcomes = [(r.action, r.outcome.value) for r in resume_records(account)]
    assert outcomes == [
        ("none", "no-action"),  # two interruptions: below the threshold
        ("clone", "done"),
        ("stop", "done"),
        ("none", "no-action"),  # the duplicate: the job is stopping, nothing to fall back from
    ]


@pytest.mark.parametrize("waiting", ["Starting", "Pending"])
def test_an_interruption_read_while_the_job_waits_for_capacity_moves_it(clock: Clock, waiting: str) -> None:
    # Given a Spot job at its third interruption (the hard cap), re-read a minute later waiting for capacity
    # (AWS's lifecycle: Interrupted, then Starting/Pending until capacity comes back)
    with local_account(clock, ENFORCE, log_audit=False) as account:
        launch(account, "bert-spot-9", spot=True)
        event = interrupt(account, clock, "bert-spot-9", 3)
        clock.advance(minutes=1)
        account.sagemaker.transition("bert-spot-9", "InProgress", waiting)
        # When the Interrupted event is handled
        account.invoke(handler, event)
        # Then the job is moved: still the interruption the event reported
        assert [(r.code, r.outcome.value) for r in resume_records(account)] == [
            ("spot.clone.max-interruptions", "done"),
            ("spot.stop.max-interruptions", "done"),
        ]
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-9-r1"]
        assert account.sagemaker.stop_requests == ["bert-spot-9"]


def ledger_account(clock: Clock) -> Any:
    """The deployed wiring: the delivery ledger's table in moto. Its Spot jobs train 3 hours (``interrupt``)
    before they move, which is all the training their lineage has when a move's clone fails: resuming such a
    clone takes a ``min_training_hours`` they meet (3)."""
    env = {**ENFORCE, "IDEMPOTENCY_TABLE_NAME": LEDGER, "RESUME_MIN_TRAINING_HOURS": "3"}
    account = local_account(clock, env, log_audit=False)
    return account


def create_ledger(account: LocalAccount) -> None:
    account.root.client("dynamodb").create_table(
        TableName=LEDGER,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


def throttle_first_publish(account: LocalAccount) -> None:
    refused: list[str] = []

    def throttle(**_: Any) -> None:
        if not refused:
            refused.append("Publish")
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")

    account.root.client("sns").meta.events.register("before-call.sns.Publish", throttle)


def describe_lags(account: LocalAccount, name: str, stale: dict[str, Any], reads: set[int]) -> None:
    """DescribeTrainingJob of ``name`` answers ``stale`` (read before its last transition) on the given reads
    of it from now on (0-based), and the truth on every other."""
    describe = account.sagemaker._op_DescribeTrainingJob
    count = [0]

    def lag(params: dict[str, Any]) -> dict[str, Any]:
        if params["TrainingJobName"] != name:
            return describe(params)
        count[0] += 1
        return copy.deepcopy(stale) if count[0] - 1 in reads else describe(params)

    account.sagemaker._op_DescribeTrainingJob = lag  # type: ignore[method-assign]


def test_a_spot_move_whose_notification_failed_after_the_stop_is_told_by_the_retry(clock: Clock) -> None:
    # Given the deployed wiring, a Spot job at its third interruption, and SNS refusing the first Publish
    with ledger_account(clock) as account:
        create_ledger(account)
        throttle_first_publish(account)
        inbox = account.notification_inbox()
        launch(account, "bert-spot-n", spot=True)
        event = interrupt(account, clock, "bert-spot-n", 3)
        # When the move's delivery fails at the notification (the clone made, the Spot job stopped)
        with pytest.raises(AdapterError, match="SNS Publish failed"):
            account.invoke(handler, event)
        assert account.sagemaker.stop_requests == ["bert-spot-n"]
        # and is retried, the Spot job stopping by now
        clock.advance(minutes=5)
        account.invoke(handler, event)
        # Then the owner is told of the move once, it is counted once, and nothing more is created or stopped
        (message,) = messages(account, inbox)
        assert (message["job_name"], message["related_job"]) == ("bert-spot-n", "bert-spot-n-r1")
        assert len(account.metrics.of(BusinessMetric.SPOT_FALLBACKS)) == 1
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-n-r1"]
        assert account.sagemaker.stop_requests == ["bert-spot-n"]
        # and the move's records stay one clone and one stop done
        assert [(r.action, r.outcome.value) for r in resume_records(account)] == [
            ("clone", "done"),
            ("stop", "done"),
        ]


def test_a_spot_job_without_checkpoints_is_left_alone(account: LocalAccount, clock: Clock) -> None:
    launch(account, "bert-spot-2", spot=True, checkpoint=False)
    account.invoke(handler, interrupt(account, clock, "bert-spot-2", 3))
    assert account.sagemaker.created == [] and account.sagemaker.stop_requests == []
    assert resume_records(account)[-1].code == "spot.skip.no-checkpoint"


def test_when_the_clone_cannot_be_created_the_spot_job_keeps_running(account: LocalAccount, clock: Clock) -> None:
    launch(account, "bert-spot-3", spot=True)
    event = interrupt(account, clock, "bert-spot-3", 3)
    account.sagemaker.fail_next["CreateTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    assert account.sagemaker.stop_requests == []
    assert [(r.action, r.outcome.value) for r in resume_records(account)] == [
        ("clone", "failed"),
        ("stop", "skipped"),
    ]


def test_when_the_stop_fails_the_retry_finishes_the_move_though_the_job_trains_again(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a Spot job at its third interruption: the On-Demand clone is created, then StopTrainingJob is
    # throttled and the delivery fails
    inbox = account.notification_inbox()
    launch(account, "bert-spot-5", spot=True)
    event = interrupt(account, clock, "bert-spot-5", 3)
    account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-5-r1"]
    assert account.sagemaker.stop_requests == []
    # When the delivery is retried 30 minutes later (the queue's visibility timeout), the Spot job having
    # got capacity back and training again
    clock.advance(minutes=30)
    account.sagemaker.transition("bert-spot-5", "InProgress", "Starting")
    account.sagemaker.transition("bert-spot-5", "InProgress", "Training")
    account.invoke(handler, event)
    # Then the move is finished: the Spot job is stopped, no second clone, and the owner is told once
    assert account.sagemaker.stop_requests == ["bert-spot-5"]
    assert len(account.sagemaker.created) == 1
    assert [(r.code, r.outcome.value) for r in resume_records(account)][-1] == ("spot.stop.clone-exists", "done")
    (message,) = messages(account, inbox)
    assert (message["job_name"], message["related_job"]) == ("bert-spot-5", "bert-spot-5-r1")
    assert message["items"][0]["code"] == "spot.stop.clone-exists"
    # and a duplicate afterwards finds the job stopping: nothing more
    account.invoke(handler, event)
    assert account.sagemaker.stop_requests == ["bert-spot-5"]


def test_a_source_whose_clone_failed_is_not_stopped_by_a_later_move(account: LocalAccount, clock: Clock) -> None:
    # Given a Spot job at its third interruption whose clone was created but whose stop failed, and the
    # clone then failed while the Spot job got capacity back and trained on
    inbox = account.notification_inbox()
    launch(account, "bert-spot-6", spot=True)
    event = interrupt(account, clock, "bert-spot-6", 3)
    account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    account.sagemaker.transition("bert-spot-6-r1", "Failed", "Failed", failure_reason="ClientError: bad input")
    account.sagemaker.transition("bert-spot-6", "InProgress", "Starting")
    # When it is interrupted again and the verdict is again to move it (its next clone's name is taken)
    event = interrupt(account, clock, "bert-spot-6", 1)
    account.invoke(handler, event)
    # Then the Spot job is not stopped: stopping it would leave nothing running
    assert account.sagemaker.stop_requests == []
    assert len(account.sagemaker.created) == 1
    # and the record says the clone was not made (its name is the failed one's: the fallback is spent),
    # not that it was done already
    clone, stop = resume_records(account)[-2:]
    assert [(r.action, r.outcome.value) for r in (clone, stop)] == [("clone", "skipped"), ("stop", "skipped")]
    assert clone.evidence["clone_status"] == stop.evidence["clone_status"] == "Failed"
    assert clone.evidence["spot_fallback"] == "spent"
    # and the owner is told the job stays on Spot
    (message,) = [m for m in messages(account, inbox) if m["kind"] == "spot-fallback"]
    assert (message["job_name"], message["related_job"], message["outcome"]) == (
        "bert-spot-6",
        "bert-spot-6-r1",
        "notified",
    )


def test_a_spot_job_whose_fallback_is_spent_is_told_so_once_not_at_every_later_interruption(
    clock: Clock,
) -> None:
    # Given the deployed wiring, and a Spot job whose move's clone was created but whose stop failed, the clone
    # then failing while the Spot job got capacity back
    with ledger_account(clock) as account:
        create_ledger(account)
        inbox = account.notification_inbox()
        launch(account, "bert-spot-12", spot=True)
        event = interrupt(account, clock, "bert-spot-12", 3)
        account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
        with pytest.raises(AdapterError):
            account.invoke(handler, event)
        account.sagemaker.transition(
            "bert-spot-12-r1", "Failed", "Failed", failure_reason="ClientError: bad input"
        )
        # When it is interrupted again, twice (each interruption its own delivery), and each move meets the clone
        for _ in range(2):
            account.sagemaker.transition("bert-spot-12", "InProgress", "Starting")
            account.invoke(handler, interrupt(account, clock, "bert-spot-12", 1))
        # Then each move is recorded as skipped (the fallback spent), and the owner is told the job stays on Spot
        # once
        spent = [r for r in resume_records(account) if r.evidence.get("spot_fallback") == "spent"]
        assert [(r.action, r.outcome.value) for r in spent] == [("clone", "skipped"), ("stop", "skipped")] * 2
        told = [m for m in messages(account, inbox) if m["kind"] == "spot-fallback" and m["outcome"] == "notified"]
        assert len(told) == 1


def test_a_failed_clone_is_not_resumed_while_its_spot_source_still_trains(
    account: LocalAccount, clock: Clock
) -> None:
    # Given a move whose stop was throttled: the On-Demand clone runs beside the Spot job
    launch(account, "bert-spot-7", spot=True)
    event = interrupt(account, clock, "bert-spot-7", 3)
    account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    # and the clone fails transiently while the Spot job gets capacity back and trains on
    clock.advance(minutes=10)
    account.sagemaker.transition("bert-spot-7-r1", "Failed", "Failed", failure_reason=TRANSIENT)
    account.sagemaker.transition("bert-spot-7", "InProgress", "Starting")
    account.sagemaker.transition("bert-spot-7", "InProgress", "Training")
    failed = account.sagemaker.event("bert-spot-7-r1")
    # When the clone's Failed event is handled, first with the source unreadable, then readable
    original = account.sagemaker._op_DescribeTrainingJob

    def throttled(params: dict[str, Any]) -> dict[str, Any]:
        if params["TrainingJobName"] == "bert-spot-7":
            raise SageMakerError("ThrottlingException", "Rate exceeded", 400)
        return original(params)

    account.sagemaker._op_DescribeTrainingJob = throttled  # type: ignore[method-assign]
    before = len(resume_records(account))
    with pytest.raises(AdapterError):  # the source unreadable: not assumed ended, the record is retried
        account.invoke(handler, failed)
    assert len(resume_records(account)) == before
    account.sagemaker._op_DescribeTrainingJob = original  # type: ignore[method-assign]
    account.invoke(handler, failed)
    # Then no second clone bills beside the Spot job: the resume waits for the source to end (the clone is
    # tagged for the reconciler) and the record says why (the source's status)
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-7-r1"]
    running = resume_records(account)[-1]
    assert (running.code, running.outcome.value, running.evidence["source_status"]) == (
        "resume.defer.source-running",
        "deferred",
        "InProgress/Training",
    )
    assert TAG_RESUME_AFTER in tags_of(account, "bert-spot-7-r1")


def test_a_clone_deferred_while_its_source_ran_is_resumed_when_the_source_ends(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a move whose stop was throttled, and its clone failed transiently while the Spot job trains
        clone_failed_while_source_trains(account, clock, "bert-spot-d")
        account.invoke(handler, account.sagemaker.event("bert-spot-d-r1"))
        # When the reconciler runs while the source still trains
        clock.advance(minutes=10)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then it defers again (no clone beside the running source)
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-d-r1"]
        assert [r.code for r in resume_records(account) if r.job_name == "bert-spot-d-r1"] == [
            "resume.defer.source-running",
            "resume.defer.source-running",
        ]
        # When the Spot job is interrupted again and ends at MaxWaitTimeExceeded
        clock.advance(minutes=5)
        account.sagemaker.transition("bert-spot-d", "InProgress", "Interrupted")
        clock.advance(minutes=10)
        account.sagemaker.transition("bert-spot-d", "Stopped", "MaxWaitTimeExceeded")
        account.invoke(handler, account.sagemaker.event("bert-spot-d"))
        # Then its own resume meets the failed clone under the same name: not done (skipped, with the clone's
        # status), and the deferred clone's resume is decided there: -r2 made, its owner told once
        maxwait = [r for r in resume_records(account) if r.code == "spot.clone.max-wait"][-1]
        assert (maxwait.code, maxwait.outcome.value, maxwait.evidence["clone_status"]) == (
            "spot.clone.max-wait",
            "skipped",
            "Failed",
        )
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-d-r1", "bert-spot-d-r2"]
        # and the reconciler's next run neither makes nor tells anything more
        clock.advance(minutes=10)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-d-r1", "bert-spot-d-r2"]
        (told,) = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        assert (told["job_name"], told["related_job"]) == ("bert-spot-d-r1", "bert-spot-d-r2")


def clone_failed_while_source_trains(account: LocalAccount, clock: Clock, name: str) -> None:
    """A Spot move whose stop was throttled: its clone ``-r1`` failed transiently while the Spot job trains
    on (the clone's Failed event not yet handled)."""
    create_ledger(account)
    launch(account, name, spot=True)
    event = interrupt(account, clock, name, 3)
    account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
    with pytest.raises(AdapterError):
        account.invoke(handler, event)
    clock.advance(minutes=10)
    account.sagemaker.transition(f"{name}-r1", "Failed", "Failed", failure_reason=TRANSIENT)
    account.sagemaker.transition(name, "InProgress", "Starting")
    account.sagemaker.transition(name, "InProgress", "Training")


def clone_failed_beside_its_source(account: LocalAccount, clock: Clock, name: str) -> None:
    """``clone_failed_while_source_trains``, and auto-resume deferred the clone at its Failed event
    (``resume.defer.source-running``)."""
    clone_failed_while_source_trains(account, clock, name)
    account.invoke(handler, account.sagemaker.event(f"{name}-r1"))
    assert resume_records(account)[-1].code == "resume.defer.source-running"


def source_stopping_past_the_look_back(account: LocalAccount, clock: Clock, name: str) -> None:
    """``clone_failed_beside_its_source``, the reconciler deferring the clone again for 70 minutes, and the
    source starting to stop 82 minutes after the clone failed, still Stopping 12 minutes later: past the
    reconciler's look-back (60 min backoff + 3 runs, from the clone's failure) once it has stopped."""
    clone_failed_beside_its_source(account, clock, name)
    for _ in range(7):
        clock.advance(minutes=10)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    clock.advance(minutes=2)
    account.sagemaker.transition(name, "Stopping", "Stopping")
    for _ in range(2):
        clock.advance(minutes=6)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))


def clone_deferred_past_the_look_back(account: LocalAccount, clock: Clock, name: str) -> None:
    """``clone_failed_beside_its_source``, and the source training on for 4 hours, the reconciler deferring the
    clone again at each run until the clone falls out of its look-back (the failed clone no longer listed)."""
    clone_failed_beside_its_source(account, clock, name)
    for _ in range(24):
        clock.advance(minutes=10)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == [f"{name}-r1"]


def test_a_clone_deferred_while_its_source_ran_is_not_resumed_once_the_source_completed(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a clone deferred while its Spot source trained on
        clone_failed_beside_its_source(account, clock, "bert-spot-c")
        # When the source completes on Spot, and the reconciler runs
        clock.advance(minutes=10)
        account.sagemaker.transition("bert-spot-c", "InProgress", "Uploading")
        account.sagemaker.transition("bert-spot-c", "Completed", "Completed")
        account.invoke(handler, account.sagemaker.event("bert-spot-c"))
        for _ in range(3):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then the finished lineage is not trained again On-Demand: no -r2, nobody told 'resumed', and the
        # record names the completed source
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-c-r1"]
        assert not [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        completed = resume_records(account)[-1]
        assert (completed.job_name, completed.code, completed.evidence["source_job"]) == (
            "bert-spot-c-r1",
            "resume.skip.source-completed",
            "bert-spot-c",
        )
        assert completed.evidence["source_status"] == "Completed/Completed"
        # recorded once: the clone's deferral is settled (tagged), so later runs do not decide it again
        assert [r.code for r in resume_records(account) if r.job_name == "bert-spot-c-r1"] == [
            "resume.defer.source-running",
            "resume.skip.source-completed",
        ]
        assert (
            tags_of(account, "bert-spot-c-r1")[TAG_RESUME_SETTLED] == "resume.skip.source-completed@bert-spot-c-r1"
        )


def test_a_clone_deferred_while_its_source_ran_is_not_resumed_while_its_owner_stops_the_source(
    clock: Clock,
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a clone deferred while its Spot source trained on
        clone_failed_beside_its_source(account, clock, "bert-spot-o")
        # When its owner stops the source 40 minutes later, and the reconciler runs while it is Stopping
        clock.advance(minutes=40)
        account.sagemaker.transition("bert-spot-o", "Stopping", "Stopping")
        clock.advance(minutes=2)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then no -r2 is made (it would have been denied once the source is Stopped), nobody is told 'resumed',
        # and the clone stays deferred (a stop at the runtime limit reads Stopping too until it has ended)
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-o-r1"]
        assert not [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        deferred = resume_records(account)[-1]
        assert (deferred.job_name, deferred.code, deferred.evidence["source_status"]) == (
            "bert-spot-o-r1",
            "resume.defer.source-stopping",
            "Stopping/Stopping",
        )
        # and once the source is Stopped, the skip is final: recorded once, then never again (the clone's
        # deferral is settled: tagged), however many runs its look-back still spans
        assert TAG_RESUME_SETTLED not in tags_of(account, "bert-spot-o-r1")  # Stopping: not final yet
        account.sagemaker.transition("bert-spot-o", "Stopped", "Stopped")
        for _ in range(6):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        assert [r.code for r in resume_records(account) if r.job_name == "bert-spot-o-r1"] == [
            "resume.defer.source-running",
            "resume.defer.source-stopping",
            "resume.skip.source-stopped",
        ]
        assert (
            tags_of(account, "bert-spot-o-r1")[TAG_RESUME_SETTLED] == "resume.skip.source-stopped@bert-spot-o-r1"
        )
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-o-r1"]


@pytest.mark.parametrize(
    ("ended", "resumed"), [("Stopped", False), ("MaxRuntimeExceeded", True)], ids=["owners-stop", "runtime-limit"]
)
def test_a_failed_clone_whose_source_is_stopping_is_decided_once_the_source_has_stopped(
    clock: Clock, ended: str, resumed: bool
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a Spot move whose stop was throttled, its clone failed transiently while the Spot job trains on
        clone_failed_while_source_trains(account, clock, "bert-spot-p")
        # and a minute later the source starts stopping (SecondaryStatus Stopping: its owner's stop, or its
        # runtime limit, cannot be told apart until it has ended)
        clock.advance(minutes=1)
        account.sagemaker.transition("bert-spot-p", "Stopping", "Stopping")
        # When the clone's own Failed event arrives while the source is Stopping (twice: a duplicate), and the
        # reconciler runs while it still stops
        clock.advance(minutes=1)
        failed = account.sagemaker.event("bert-spot-p-r1")
        account.invoke(handler, failed)
        account.invoke(handler, failed)
        clock.advance(minutes=2)
        account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then no clone is made while the source stops, and the clone is deferred (tagged for the reconciler),
        # not skipped for good
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-p-r1"]
        codes = {r.code for r in resume_records(account) if r.job_name == "bert-spot-p-r1"}
        assert codes == {"resume.defer.source-stopping"}
        assert TAG_RESUME_AFTER in tags_of(account, "bert-spot-p-r1")
        assert TAG_RESUME_SETTLED not in tags_of(account, "bert-spot-p-r1")
        # When the source has ended (its end event handled), and the reconciler runs on
        clock.advance(minutes=4)
        account.sagemaker.transition("bert-spot-p", "Stopped", ended)
        account.invoke(handler, account.sagemaker.event("bert-spot-p"))
        for _ in range(6):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        records = [r for r in resume_records(account) if r.job_name == "bert-spot-p-r1"]
        told = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        created = [r["TrainingJobName"] for r in account.sagemaker.created]
        if resumed:
            # Then a stop at the source's runtime limit was no owner's: the lineage goes on (-r2), told once
            assert created == ["bert-spot-p-r1", "bert-spot-p-r2"]
            assert "resume.clone.transient" in {r.code for r in records}
            assert "resume.skip.source-stopped" not in {r.code for r in records}
            (message,) = told
            assert (message["job_name"], message["related_job"]) == ("bert-spot-p-r1", "bert-spot-p-r2")
        else:
            # Then the owner's stop ends the lineage: no -r2, nobody told 'resumed', one final record, settled
            assert created == ["bert-spot-p-r1"]
            assert not told
            assert [r.code for r in records][-1] == "resume.skip.source-stopped"
            assert [r.code for r in records].count("resume.skip.source-stopped") == 1
            assert (
                tags_of(account, "bert-spot-p-r1")[TAG_RESUME_SETTLED]
                == "resume.skip.source-stopped@bert-spot-p-r1"
            )


@pytest.mark.parametrize(
    ("ended", "resumed"), [("Stopped", False), ("MaxRuntimeExceeded", True)], ids=["owners-stop", "runtime-limit"]
)
def test_a_clone_deferred_while_its_source_ran_is_decided_by_the_sources_late_stop(
    clock: Clock, ended: str, resumed: bool
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a clone deferred while its Spot source trained on, and the source stopping late: Stopped past the
        # reconciler's look-back
        source_stopping_past_the_look_back(account, clock, "bert-spot-l")
        account.sagemaker.transition("bert-spot-l", "Stopped", ended)
        # When the source's Stopped event arrives (twice: a duplicate), and the reconciler runs on
        stopped = account.sagemaker.event("bert-spot-l")
        account.invoke(handler, stopped)
        account.invoke(handler, stopped)
        for _ in range(6):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then the source's end decided the clone, once
        codes = [r.code for r in resume_records(account) if r.job_name == "bert-spot-l-r1"]
        told = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        created = [r["TrainingJobName"] for r in account.sagemaker.created]
        assert "resume.defer.source-stopping" in codes
        if resumed:
            # a stop at the runtime limit was no owner's: the lineage goes on (-r2), its owner told once
            assert created == ["bert-spot-l-r1", "bert-spot-l-r2"]
            assert codes.count("resume.clone.transient") == 1
            assert "resume.skip.source-stopped" not in codes
            (message,) = told
            assert (message["job_name"], message["related_job"]) == ("bert-spot-l-r1", "bert-spot-l-r2")
        else:
            # the owner's stop ends the lineage: one final skip, settled, nobody told
            assert created == ["bert-spot-l-r1"]
            assert not told
            assert codes[-1] == "resume.skip.source-stopped"
            assert codes.count("resume.skip.source-stopped") == 1
            assert (
                tags_of(account, "bert-spot-l-r1")[TAG_RESUME_SETTLED]
                == "resume.skip.source-stopped@bert-spot-l-r1"
            )


def test_a_stopped_sources_unreadable_clone_fails_the_delivery_for_its_retry(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        # Given a clone deferred while its Spot source trained on, and the source stopped by its owner
        clone_failed_beside_its_source(account, clock, "bert-spot-u")
        clock.advance(minutes=100)
        account.sagemaker.transition("bert-spot-u", "Stopping", "Stopping")
        account.sagemaker.transition("bert-spot-u", "Stopped", "Stopped")
        describe = account.sagemaker._op_DescribeTrainingJob
        throttled: list[str] = []

        def throttle_clone(params: dict[str, Any]) -> dict[str, Any]:
            if params["TrainingJobName"] == "bert-spot-u-r1" and not throttled:
                throttled.append("DescribeTrainingJob")
                raise SageMakerError("ThrottlingException", "Rate exceeded", 400)
            return describe(params)

        account.sagemaker._op_DescribeTrainingJob = throttle_clone  # type: ignore[method-assign]
        before = len(resume_records(account))
        # When its Stopped event meets the clone's read throttled
        stopped = account.sagemaker.event("bert-spot-u")
        with pytest.raises(AdapterError):
            account.invoke(handler, stopped)
        # Then nothing is decided and the delivery fails; its retry decides the clone, once
        assert len(resume_records(account)) == before
        account.invoke(handler, stopped)
        assert [r.code for r in resume_records(account)[before:] if r.job_name == "bert-spot-u-r1"] == [
            "resume.skip.source-stopped"
        ]
        assert (
            tags_of(account, "bert-spot-u-r1")[TAG_RESUME_SETTLED] == "resume.skip.source-stopped@bert-spot-u-r1"
        )


@pytest.mark.parametrize(
    ("ended", "resumed"), [("Stopped", False), ("MaxRuntimeExceeded", True)], ids=["owners-stop", "runtime-limit"]
)
def test_a_stopped_event_whose_source_read_lags_it_is_retried_not_spent(
    clock: Clock, ended: str, resumed: bool
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        # Given a clone deferred while its Spot source trained on, and the source stopping late: Stopped past the
        # reconciler's look-back
        source_stopping_past_the_look_back(account, clock, "bert-spot-g")
        describe = account.sagemaker._op_DescribeTrainingJob
        stale = copy.deepcopy(describe({"TrainingJobName": "bert-spot-g"}))  # the source still Stopping
        account.sagemaker.transition("bert-spot-g", "Stopped", ended)
        lagging = [True]

        def lag(params: dict[str, Any]) -> dict[str, Any]:
            if params["TrainingJobName"] == "bert-spot-g" and lagging[0]:
                return copy.deepcopy(stale)
            return describe(params)

        account.sagemaker._op_DescribeTrainingJob = lag  # type: ignore[method-assign]
        # When the source's Stopped event is handled while DescribeTrainingJob still answers Stopping
        stopped = account.sagemaker.event("bert-spot-g")
        with pytest.raises(DescriptionBehind):
            account.invoke(handler, stopped)
        # Then the delivery fails instead of being spent on a clone deferred again; its retry, once the read
        # has caught up, decides the clone
        lagging[0] = False
        account.invoke(handler, stopped)
        codes = [r.code for r in resume_records(account) if r.job_name == "bert-spot-g-r1"]
        created = [r["TrainingJobName"] for r in account.sagemaker.created]
        if resumed:
            assert created == ["bert-spot-g-r1", "bert-spot-g-r2"]
            assert codes.count("resume.clone.transient") == 1
        else:
            assert created == ["bert-spot-g-r1"]
            assert codes[-1] == "resume.skip.source-stopped"
            assert (
                tags_of(account, "bert-spot-g-r1")[TAG_RESUME_SETTLED]
                == "resume.skip.source-stopped@bert-spot-g-r1"
            )


def test_a_stopped_job_whose_next_clone_name_holds_another_sources_clone_hands_nothing_over(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        create_ledger(account)
        fake = account.sagemaker
        owner = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"}
        r1 = {TAG_ROOT: "bert-x", TAG_ATTEMPT: "1", TAG_SOURCE: "bert-x", TAG_REASON: "spot-interrupted"}
        r2 = {TAG_ROOT: "bert-x", TAG_ATTEMPT: "2", TAG_SOURCE: "bert-x-r1", TAG_REASON: "spot-interrupted"}
        # Given a Spot clone bert-x-r1 that trains on, and its move's clone bert-x-r2 that failed transiently
        # beside it: deferred for its running source
        launch(account, "bert-x-r1", spot=True, tags={**owner, **r1})
        clock.advance(minutes=5)
        fake.transition("bert-x-r1", "InProgress", "Training")
        launch(account, "bert-x-r2", tags={**owner, **r2})
        account.invoke(handler, fail_after(account, clock, "bert-x-r2", hours=1))
        assert resume_records(account)[-1].code == "resume.defer.source-running"
        # and a new Spot job launched with bert-x-r1's tags copied (its next clone's name is bert-x-r2) that
        # trains and is stopped by its owner
        launch(account, "bert-x-copy", spot=True, tags={**owner, **r1})
        clock.advance(minutes=5)
        fake.transition("bert-x-copy", "InProgress", "Training")
        clock.advance(hours=1)
        fake.transition("bert-x-copy", "Stopping", "Stopping")
        fake.transition("bert-x-copy", "Stopped", "Stopped")
        before = len(resume_records(account))
        # When the copy's Stopped event is handled
        account.invoke(handler, fake.event("bert-x-copy"))
        # Then the clone, not made from that job, is not handed over: nothing raised, nothing decided or tagged
        # (it waits for its own source's end, or the reconciler), nothing created
        assert resume_records(account)[before:] == []
        assert TAG_RESUME_SETTLED not in tags_of(account, "bert-x-r2")
        assert fake.created == []


def test_a_stopped_job_moved_under_its_copied_lineage_tags_hands_that_move_s_deferred_clone_over(
    clock: Clock,
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        create_ledger(account)
        fake = account.sagemaker
        owner = {"team": "vision", "cost-center": "cc-1234", "owner": "alice"}
        r1 = {TAG_ROOT: "bert-x", TAG_ATTEMPT: "1", TAG_SOURCE: "bert-x", TAG_REASON: "spot-interrupted"}
        moved = {TAG_ROOT: "bert-x", TAG_ATTEMPT: "2", TAG_SOURCE: "bert-x-copy", TAG_REASON: "spot-interrupted"}
        # Given a Spot job launched with bert-x-r1's tags copied, which the deployment before lineage tags were
        # dated to their job moved under them: its clone bert-x-r2 (smgov:resumed-from bert-x-copy) failed
        # transiently while the job trained on, deferred for its running source
        launch(account, "bert-x-copy", spot=True, tags={**owner, **r1})
        clock.advance(minutes=5)
        fake.transition("bert-x-copy", "InProgress", "Training")
        launch(account, "bert-x-r2", tags={**owner, **moved})
        account.invoke(handler, fail_after(account, clock, "bert-x-r2", hours=1))
        assert resume_records(account)[-1].code == "resume.defer.source-running"
        # and the job is stopped by its owner
        clock.advance(minutes=5)
        fake.transition("bert-x-copy", "Stopping", "Stopping")
        fake.transition("bert-x-copy", "Stopped", "Stopped")
        before = len(resume_records(account))
        # When its Stopped event is handled
        account.invoke(handler, fake.event("bert-x-copy"))
        # Then bert-x-r2 is its move's clone: handed over and decided (the owner's stop ends the lineage), settled
        assert [r.code for r in resume_records(account)[before:] if r.job_name == "bert-x-r2"] == [
            "resume.skip.source-stopped"
        ]
        assert tags_of(account, "bert-x-r2")[TAG_RESUME_SETTLED] == "resume.skip.source-stopped@bert-x-r2"
        assert fake.created == []


@pytest.mark.parametrize("spot", [True, False, None], ids=["spot", "on-demand", "spot-unsaid"])
def test_a_plain_stopped_job_costs_no_extra_call_and_no_record(clock: Clock, spot: bool | None) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        create_ledger(account)
        # Given a job (Spot, On-Demand, or one whose event does not say) that trained, never moved, and stopped
        launch(account, "plain-job", spot=bool(spot))
        clock.advance(minutes=5)
        account.sagemaker.transition("plain-job", "InProgress", "Training")
        clock.advance(hours=2)
        account.sagemaker.transition("plain-job", "Stopping", "Stopping")
        account.sagemaker.transition("plain-job", "Stopped", "Stopped")
        event = account.sagemaker.event("plain-job")
        if (
            spot is None
        ):  # nor carries its tags: ListTags is read for its lineage, the efficiency record's team, the idle
            # alarm's deletion record and compliance's look for a stop its owner is owed (the job was never marked)
            del event["detail"]["EnableManagedSpotTraining"]
            del event["detail"]["Tags"]
        described: list[str] = []
        describe = account.sagemaker._op_DescribeTrainingJob

        def spy(params: dict[str, Any]) -> dict[str, Any]:
            described.append(params["TrainingJobName"])
            return describe(params)

        account.sagemaker._op_DescribeTrainingJob = spy  # type: ignore[method-assign]
        before = account.sagemaker.calls.copy()
        # When its Stopped event arrives
        account.invoke(handler, event)
        # Then an On-Demand job costs no look for a clone; a Spot one (or one that may be) one DescribeTrainingJob
        # of its next clone's name, which does not exist: nothing more is read, written or recorded
        assert [n for n in described if n != "plain-job"] == ([] if spot is False else ["plain-job-r1"])
        assert (account.sagemaker.calls - before)["ListTags"] == (4 if spot is None else 0)
        assert not {"AddTags", "CreateTrainingJob", "StopTrainingJob"} & set(
            (account.sagemaker.calls - before).keys()
        )
        assert not [r for r in resume_records(account) if r.rule != "event-router"]
        assert account.sagemaker.created == []


def test_a_source_stopped_later_does_not_leave_the_resume_an_earlier_decision_made_untold(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a clone deferred while its Spot source trained on, whose owner then stops the source
        clone_failed_beside_its_source(account, clock, "bert-spot-s")
        clock.advance(minutes=40)
        account.sagemaker.transition("bert-spot-s", "Stopping", "Stopping")
        # and the clone's next clone -r2, made by an earlier decision that did not see the stop (one that
        # resumed a clone whose source was Stopping), whose owner was never told (its Publish failed)
        lineage = {
            TAG_ROOT: "bert-spot-s",
            TAG_ATTEMPT: "2",
            TAG_SOURCE: "bert-spot-s-r1",
            TAG_REASON: "failed-transient",
        }
        account.sagemaker.launch(
            create_request(
                "bert-spot-s-r2", tags={"team": "vision", "cost-center": "cc-1234", "owner": "alice", **lineage}
            )
        )
        clock.advance(minutes=5)
        account.sagemaker.transition("bert-spot-s", "Stopped", "Stopped")
        # When the reconciler runs, and hands the untold clone back to auto-resume, which now decides that
        # the source was stopped by its owner
        for _ in range(3):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        # Then the skip meets the running -r2 as "already exists": its owner is told once, and no "not
        # resumed" is recorded beside it
        records = [(r.code, r.outcome.value) for r in resume_records(account) if r.job_name == "bert-spot-s-r1"]
        assert records[-1] == ("resume.clone.transient", "already-done")
        assert "resume.skip.source-stopped" not in {code for code, _ in records}
        (told,) = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        assert (told["job_name"], told["related_job"]) == ("bert-spot-s-r1", "bert-spot-s-r2")
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-s-r1"]


def test_a_clone_deferred_beyond_the_reconcilers_look_back_is_resumed_when_its_source_ends(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        # Given a clone deferred while its Spot source trains on for hours, far beyond the reconciler's
        # look-back (the failed clone drops out of its listing)
        clone_deferred_past_the_look_back(account, clock, "bert-spot-l")
        # When the source ends at MaxWaitTimeExceeded: its own resume meets the failed, deferred clone
        account.sagemaker.transition("bert-spot-l", "InProgress", "Interrupted")
        clock.advance(minutes=30)
        account.sagemaker.transition("bert-spot-l", "Stopped", "MaxWaitTimeExceeded")
        account.invoke(handler, account.sagemaker.event("bert-spot-l"))
        # Then the clone's resume is decided there: the lineage goes on (-r2), the source's record says it
        # was handed over, and the owner is told once, also after more reconciler runs and a duplicate event
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-l-r1", "bert-spot-l-r2"]
        (maxwait,) = [r for r in resume_records(account) if r.code == "spot.clone.max-wait"]
        assert (maxwait.outcome.value, maxwait.evidence["clone_status"], maxwait.evidence["clone_resume"]) == (
            "skipped",
            "Failed",
            "resume.clone.transient",
        )
        account.invoke(handler, account.sagemaker.event("bert-spot-l"))
        for _ in range(3):
            clock.advance(minutes=10)
            account.invoke(reconciler, load_event("scheduled-reconcile.json"))
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-l-r1", "bert-spot-l-r2"]
        (told,) = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        assert (told["job_name"], told["related_job"]) == ("bert-spot-l-r1", "bert-spot-l-r2")


@pytest.mark.parametrize("end", ["MaxWaitTimeExceeded", "Failed"], ids=["max-wait", "failed"])
def test_a_sources_end_whose_hand_over_reads_it_lagging_is_retried_not_spent(clock: Clock, end: str) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        inbox = account.notification_inbox()
        fake = account.sagemaker
        # Given a clone deferred while its Spot source trained on, past the reconciler's look-back
        clone_deferred_past_the_look_back(account, clock, "bert-spot-h")
        # and the source ending: at MaxWaitTimeExceeded after an interruption, or failing transiently a day on
        if end == "Failed":
            clock.advance(hours=20)
        else:
            fake.transition("bert-spot-h", "InProgress", "Interrupted")
            clock.advance(minutes=30)
        stale = copy.deepcopy(fake._op_DescribeTrainingJob({"TrainingJobName": "bert-spot-h"}))
        fake.transition("bert-spot-h", "Failed" if end == "Failed" else "Stopped", end, failure_reason=TRANSIENT)
        # its own re-read up to date (read 0), the hand-over's read of it (the clone's source, read 1) lagging
        describe_lags(account, "bert-spot-h", stale, reads={1})
        event = fake.event("bert-spot-h")
        before = len(resume_records(account))
        # When the source's end event is handled: its resume meets the failed clone and hands it over
        with pytest.raises(DescriptionBehind):
            account.invoke(handler, event)
        # Then the delivery fails instead of being spent on a clone deferred again: no -r2 yet, and the
        # source's own decision not recorded
        assert [r["TrainingJobName"] for r in fake.created] == ["bert-spot-h-r1"]
        assert [r.job_name for r in resume_records(account)[before:]] == ["bert-spot-h-r1"]
        # and its retry a minute later decides the clone: -r2, the source's record says so, its owner told once
        clock.advance(minutes=1)
        account.invoke(handler, event)
        assert [r["TrainingJobName"] for r in fake.created] == ["bert-spot-h-r1", "bert-spot-h-r2"]
        (ended,) = [r for r in resume_records(account)[before:] if r.job_name == "bert-spot-h"]
        expected = "resume.clone.transient" if end == "Failed" else "spot.clone.max-wait"
        assert (ended.code, ended.outcome.value, ended.evidence["clone_resume"]) == (
            expected,
            "skipped",
            "resume.clone.transient",
        )
        (told,) = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        assert (told["job_name"], told["related_job"]) == ("bert-spot-h-r1", "bert-spot-h-r2")


def test_a_clone_whose_source_read_was_throttled_is_resumed_by_the_retry(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        # Given a finished move (the Spot job stopped) whose On-Demand clone later fails transiently
        create_ledger(account)
        launch(account, "bert-spot-u", spot=True)
        account.invoke(handler, interrupt(account, clock, "bert-spot-u", 3))
        account.sagemaker.transition("bert-spot-u", "Stopped", "Stopped")
        clock.advance(minutes=5)
        account.sagemaker.transition("bert-spot-u-r1", "InProgress", "Training")
        clock.advance(hours=30)
        account.sagemaker.transition("bert-spot-u-r1", "Failed", "Failed", failure_reason=TRANSIENT)
        failed = account.sagemaker.event("bert-spot-u-r1")
        original = account.sagemaker._op_DescribeTrainingJob

        def throttled(params: dict[str, Any]) -> dict[str, Any]:
            if params["TrainingJobName"] == "bert-spot-u":
                raise SageMakerError("ThrottlingException", "Rate exceeded", 400)
            return original(params)

        # When its Failed event meets a throttled read of the source
        account.sagemaker._op_DescribeTrainingJob = throttled  # type: ignore[method-assign]
        with pytest.raises(AdapterError):
            account.invoke(handler, failed)
        account.sagemaker._op_DescribeTrainingJob = original  # type: ignore[method-assign]
        # Then the delivery is not completed: its retry (after the visibility timeout) resumes the clone
        clock.advance(minutes=30)
        account.invoke(handler, failed)
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-u-r1", "bert-spot-u-r2"]
        assert (resume_records(account)[-1].code, resume_records(account)[-1].outcome.value) == (
            "resume.clone.transient",
            "done",
        )


def test_a_failed_lookup_of_the_clone_does_not_abort_the_move(account: LocalAccount, clock: Clock) -> None:
    # Given a Spot job at its third interruption (the hard cap), and DescribeTrainingJob of its next clone's
    # name throttled (the takeover's lookup)
    launch(account, "bert-spot-8", spot=True)
    event = interrupt(account, clock, "bert-spot-8", 3)
    original = account.sagemaker._op_DescribeTrainingJob

    def throttled(params: dict[str, Any]) -> dict[str, Any]:
        if params["TrainingJobName"] == "bert-spot-8-r1":
            raise SageMakerError("ThrottlingException", "Rate exceeded", 400)
        return original(params)

    account.sagemaker._op_DescribeTrainingJob = throttled  # type: ignore[method-assign]
    # When the Interrupted event is handled
    account.invoke(handler, event)
    # Then the ordinary decision is made and carried out (a planned clone would meet "already exists" if an
    # earlier move had made it), and the records say the lookup failed
    assert [(r.code, r.outcome.value) for r in resume_records(account)] == [
        ("spot.clone.max-interruptions", "done"),
        ("spot.stop.max-interruptions", "done"),
    ]
    assert all("ThrottlingException" in r.evidence["clone_lookup"] for r in resume_records(account))
    assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-8-r1"]
    assert account.sagemaker.stop_requests == ["bert-spot-8"]


def test_a_failed_lookup_of_the_clone_on_the_retry_of_a_move_fails_the_delivery(clock: Clock) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        # Given a move whose stop was throttled, retried half an hour later when the Spot job trains again
        create_ledger(account)
        launch(account, "bert-spot-t", spot=True)
        event = interrupt(account, clock, "bert-spot-t", 3)
        account.sagemaker.fail_next["StopTrainingJob"] = SageMakerError("ThrottlingException", "slow down", 400)
        with pytest.raises(AdapterError):
            account.invoke(handler, event)
        clock.advance(minutes=31)
        account.sagemaker.transition("bert-spot-t", "InProgress", "Starting")
        account.sagemaker.transition("bert-spot-t", "InProgress", "Training")
        account.sagemaker.transition("bert-spot-t-r1", "InProgress", "Training")
        original = account.sagemaker._op_DescribeTrainingJob

        def throttled(params: dict[str, Any]) -> dict[str, Any]:
            if params["TrainingJobName"] == "bert-spot-t-r1":
                raise SageMakerError("ThrottlingException", "Rate exceeded", 400)
            return dict(original(params))

        # When the retry's lookup of the clone is throttled (the ordinary decision would plan no clone)
        account.sagemaker._op_DescribeTrainingJob = throttled  # type: ignore[method-assign]
        with pytest.raises(AdapterError):
            account.invoke(handler, event)
        account.sagemaker._op_DescribeTrainingJob = original  # type: ignore[method-assign]
        # Then nothing is stopped on unknown data, but the delivery is not completed either: the next retry
        # finds the clone and finishes the move
        assert account.sagemaker.stop_requests == []
        account.invoke(handler, event)
        assert account.sagemaker.stop_requests == ["bert-spot-t"]
        assert [r["TrainingJobName"] for r in account.sagemaker.created] == ["bert-spot-t-r1"]
        assert (resume_records(account)[-1].code, resume_records(account)[-1].outcome.value) == (
            "spot.stop.clone-exists",
            "done",
        )


def test_max_wait_exceeded_is_resumed_on_demand(account: LocalAccount, clock: Clock) -> None:
    launch(account, "bert-spot-4", spot=True)
    interrupt(account, clock, "bert-spot-4", 1)
    clock.advance(hours=40)
    account.sagemaker.transition("bert-spot-4", "Stopped", "MaxWaitTimeExceeded")
    account.invoke(handler, account.sagemaker.event("bert-spot-4"))
    (request,) = account.sagemaker.created
    assert request["EnableManagedSpotTraining"] is False
    assert tags_of(account, "bert-spot-4-r1")[TAG_REASON] == "spot-max-wait"
    assert account.sagemaker.stop_requests == []
    (record,) = resume_records(account)
    assert (record.rule, record.action, record.outcome.value) == ("spot-fallback", "clone", "done")


@pytest.mark.parametrize(
    ("end", "stale_at"),
    [("Failed", "Training"), ("MaxWaitTimeExceeded", "Interrupted"), ("MaxWaitTimeExceeded", "Stopping")],
    ids=["failed", "max-wait", "max-wait-stopping"],
)
def test_an_end_event_whose_reread_still_says_the_job_runs_is_retried_not_spent(
    clock: Clock, end: str, stale_at: str
) -> None:
    with ledger_account(clock) as acct:
        account: LocalAccount = acct
        create_ledger(account)
        inbox = account.notification_inbox()
        fake = account.sagemaker
        # Given a job that trained 26 hours and fails transiently, or a Spot job that runs out of wait time
        # after an interruption (stopping first, in one case); DescribeTrainingJob read right after the end
        # still answers as before it (the job runs, or stops)
        name = f"lag-{end.lower()}-{stale_at.lower()}"
        launch(account, name, spot=end != "Failed")
        if end == "Failed":
            clock.advance(minutes=5)
            fake.transition(name, "InProgress", "Training")
            clock.advance(hours=26)
        else:
            interrupt(account, clock, name, 1)
            clock.advance(hours=40)
            if stale_at == "Stopping":
                fake.transition(name, "Stopping", "Stopping")
        stale = copy.deepcopy(fake._op_DescribeTrainingJob({"TrainingJobName": name}))
        fake.transition(name, "Failed" if end == "Failed" else "Stopped", end, failure_reason=TRANSIENT)
        describe_lags(account, name, stale, reads={0})
        event = fake.event(name)
        # When its end event is handled
        with pytest.raises(DescriptionBehind):
            account.invoke(handler, event)
        # Then nothing is decided on that read (no resume.skip.not-failed, no Spot verdict, no move, no stop):
        # the delivery fails
        assert resume_records(account) == []
        assert fake.created == [] and fake.stop_requests == []
        # and its retry a minute later, the read caught up, resumes the job once and tells its owner once
        clock.advance(minutes=1)
        account.invoke(handler, event)
        assert [r["TrainingJobName"] for r in fake.created] == [f"{name}-r1"]
        expected = "resume.clone.transient" if end == "Failed" else "spot.clone.max-wait"
        assert [(r.code, r.outcome.value) for r in resume_records(account)] == [(expected, "done")]
        assert fake.stop_requests == []
        (told,) = [m for m in messages(account, inbox) if m["outcome"] == "resumed"]
        assert (told["job_name"], told["related_job"]) == (name, f"{name}-r1")
