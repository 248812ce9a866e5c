"""The real handlers given fuzzed events: they process the event or raise our validation error.

A ``pydantic.ValidationError`` fails the invocation, so Lambda's asynchronous failure path sends the
event to the dead-letter queue with the error. Any other exception would be an unexplained crash.
One local account (moto + the doubles) serves every example of a test; the clock is fixed.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.handlers.idle_stopper import handler as stopper
from sagemaker_governance.handlers.job_events import handler as job_events
from smgov.simulation.harness import LocalContext, local_account
from tests.builders import create_request
from tests.fuzz_strategies import json_text, mutated, raw_text
from tests.handlers.conftest import ENFORCE, NOW

RUNS = settings(max_examples=30)
PREFIX = "sagemaker-governance-idle-"


def test_job_events_handler_processes_or_rejects_any_event() -> None:
    with local_account(lambda: NOW, ENFORCE, log_audit=False) as account:
        account.sagemaker.launch(create_request("job-1"), secondary="Training")
        sample = account.sagemaker.event("job-1")

        @RUNS
        @given(mutated(sample))
        @example({**sample, "detail": {**sample["detail"], "TrainingJobName": "job name with spaces"}})
        @example({**sample, "detail": {**sample["detail"], "CreationTime": 10**400}})
        @example([sample])
        def run(event: Any) -> None:
            try:
                result = job_events(event, LocalContext())  # any JSON value, as Lambda passes it
            except ValidationError:
                return
            assert isinstance(result["decisions"], list)

        run()


def test_idle_stopper_handler_processes_or_rejects_any_notification() -> None:
    with local_account(lambda: NOW, ENFORCE, log_audit=False) as account:
        account.sagemaker.launch(create_request("job-1"), secondary="Training")
        account.invoke(job_events, account.sagemaker.event("job-1"))
        alarm = f"{PREFIX}job-1"
        message = account.cloudwatch.notification(alarm)
        bodies = st.one_of(mutated(message).map(json_text), raw_text)
        events = st.one_of(
            bodies.map(lambda body: account.cloudwatch.sns_event([body])),  # the alarm message
            mutated(account.cloudwatch.sns_event([message])),  # the SNS envelope
        )
        long_name = account.cloudwatch.sns_event([json.dumps({**message, "AlarmName": PREFIX + "j" * 300})])

        @RUNS
        @given(events)
        @example(long_name)
        @example(account.cloudwatch.sns_event([json.dumps({**message, "AlarmName": PREFIX + "x" * 100})]))
        def run(event: Any) -> None:
            try:
                result = stopper(event, LocalContext())
            except ValidationError:
                return
            assert all(r["outcome"] for r in result["results"])

        run()


def test_idle_stopper_ignores_alarm_tags_that_name_no_job() -> None:
    # Given an alarm of this stack whose job tag was edited by hand into something that is not a job name
    with local_account(lambda: NOW, ENFORCE, log_audit=False) as account:
        account.sagemaker.launch(create_request("job-1"), secondary="Training")
        account.invoke(job_events, account.sagemaker.event("job-1"))
        alarm = f"{PREFIX}job-1"

        @RUNS
        @given(st.one_of(st.text(max_size=100), st.sampled_from(["", "job 1", "j" * 64, "job-1"])))
        @example("j" * 200)
        def run(job_tag: str) -> None:
            tags = account.cloudwatch.tags[alarm]
            for tag in tags:
                if tag["Key"] == "smgov:training-job":
                    tag["Value"] = job_tag
            account.cloudwatch.set_state(alarm, "ALARM")
            event = account.cloudwatch.sns_event([account.cloudwatch.notification(alarm)])
            # When the notification arrives
            (result,) = account.invoke(stopper, event)["results"]
            # Then only the real job's tag leads to a decision; anything else is ignored with the reason
            if job_tag != "job-1":
                assert result["outcome"] == "ignored", result

        run()


def test_idle_stopper_ignores_an_alarm_tagged_with_a_name_no_job_can_have() -> None:
    # Given an alarm of this stack, named and tagged for a "job" whose name is too long to be one
    # (SageMaker would answer a ValidationException about the name's length, not "not found": the
    # invocation would fail, be retried and land in the dead-letter queue; the double only says "not found")
    with local_account(lambda: NOW, ENFORCE, log_audit=False) as account:
        fake_job = "j" * 200
        account.root.client("cloudwatch").put_metric_alarm(
            AlarmName=f"{PREFIX}{fake_job}",
            MetricName="GPUUtilization",
            Namespace="/aws/sagemaker/TrainingJobs",
            Statistic="Average",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1.0,
            ComparisonOperator="LessThanThreshold",
            Tags=[
                {"Key": "smgov:training-job", "Value": fake_job},
                {"Key": "smgov:managed-by", "Value": "sagemaker-governance"},
            ],
        )
        account.cloudwatch.set_state(f"{PREFIX}{fake_job}", "ALARM")
        event = account.cloudwatch.sns_event([account.cloudwatch.notification(f"{PREFIX}{fake_job}")])
        # When its notification arrives
        (result,) = stopper(event, LocalContext())["results"]
        # Then it is ignored with the reason
        assert result["outcome"] == "ignored"
        assert "not tagged as managed by this stack" in result["reason"]
