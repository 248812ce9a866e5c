"""ListTrainingJobs as SageMaker pages it: MaxResults jobs of any status first, then filtered by StatusEquals
(botocore's SageMaker model, ListTrainingJobs). A listing of the jobs in progress that is not bounded in time
reads every job the account ever ran (SageMaker keeps them), a page per hundred; the reconciler's is bounded by
CreationTimeAfter (the longest a job can be InProgress), read newest first, and stops between pages when its
run's time is spent, saying so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from sagemaker_governance.adapters.sagemaker import SageMakerJobInventory
from sagemaker_governance.domain.reconcile import IN_PROGRESS_HORIZON
from smgov.simulation.fake_sagemaker import FakeSageMaker
from tests.builders import create_request

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def account(history: int, *, page: int = 100) -> tuple[FakeSageMaker, Any]:
    """An account that ran ``history`` jobs over the last year, one an hour, all Completed, and one job in
    progress started an hour ago and one started 20 days ago."""
    at = [NOW - timedelta(days=365)]
    fake = FakeSageMaker(clock=lambda: at[0])
    client = fake.attach(boto3.client("sagemaker", region_name="us-east-1"))
    fake.list_page_size = page
    for i in range(history):
        at[0] = NOW - timedelta(days=365) + timedelta(hours=i)
        fake.launch(create_request(f"old-{i}"))
        fake.transition(f"old-{i}", "Completed", "Completed")
    at[0] = NOW - timedelta(days=20)
    fake.launch(create_request("long-1"), secondary="Training")
    at[0] = NOW - timedelta(hours=1)
    fake.launch(create_request("live-1"), secondary="Training")
    at[0] = NOW
    return fake, client


def test_the_double_pages_before_it_filters_by_status_and_sorts_as_asked() -> None:
    # Given three jobs, the one in progress the newest, and pages of two
    fake, client = account(2, page=2)
    fake.jobs.pop("long-1")
    # When the jobs in progress are listed oldest first, one page at a time
    first = client.list_training_jobs(StatusEquals="InProgress", MaxResults=2)
    second = client.list_training_jobs(StatusEquals="InProgress", MaxResults=2, NextToken=first["NextToken"])
    # Then the first page holds two jobs of another status: nothing, and a token for more
    assert first["TrainingJobSummaries"] == [] and "NextToken" in first
    assert [j["TrainingJobName"] for j in second["TrainingJobSummaries"]] == ["live-1"]
    # and newest first, the job in progress is on the first page
    newest = client.list_training_jobs(StatusEquals="InProgress", MaxResults=2, SortOrder="Descending")
    assert [j["TrainingJobName"] for j in newest["TrainingJobSummaries"]] == ["live-1"]
    by_name = client.list_training_jobs(SortBy="Name", SortOrder="Descending")
    assert [j["TrainingJobName"] for j in by_name["TrainingJobSummaries"]] == ["old-1", "old-0"]


def test_the_jobs_in_progress_are_listed_from_the_horizon_not_the_account_s_history() -> None:
    # Given a year of finished jobs (8,760 of them) and two jobs in progress
    fake, client = account(24 * 365)
    # When the reconciler lists the jobs in progress
    listing = SageMakerJobInventory(client).in_progress(NOW - IN_PROGRESS_HORIZON, lambda: True)
    # Then it finds both, reading the jobs created within the horizon only (a page per hundred of them)
    assert sorted(j.name for j in listing.jobs) == ["live-1", "long-1"]
    assert listing.complete
    within = sum(1 for j in fake.jobs.values() if j["CreationTime"] > NOW - IN_PROGRESS_HORIZON)
    assert fake.calls["ListTrainingJobs"] == -(-within // 100) < 24 * 365 // 100


def test_a_listing_whose_time_runs_out_stops_between_pages_newest_first_and_says_so() -> None:
    # Given the run's time is spent once the first page is read
    fake, client = account(24 * 365)
    # When the jobs in progress are listed
    listing = SageMakerJobInventory(client).in_progress(NOW - IN_PROGRESS_HORIZON, lambda: False)
    # Then one page was read, the newest jobs' (the job started an hour ago is there), and the listing says it
    # is not complete (the job started 20 days ago is not listed)
    assert fake.calls["ListTrainingJobs"] == 1
    assert [j.name for j in listing.jobs] == ["live-1"] and not listing.complete


def test_the_failed_listing_stops_between_pages_too() -> None:
    fake, client = account(24 * 365, page=10)
    for name in ("live-1", "long-1"):
        fake.transition(name, "Failed", "Failed", failure_reason="InternalServerError")
    listing = SageMakerJobInventory(client).failed_since(NOW - timedelta(days=1), lambda: False)
    assert fake.calls["ListTrainingJobs"] == 1 and not listing.complete


def test_a_listing_cut_short_says_where_its_pages_stopped_and_a_later_one_continues_before_it() -> None:
    # Given a year of finished jobs, one an hour, and two jobs in progress (an hour and 20 days old)
    fake, client = account(24 * 365)
    inventory = SageMakerJobInventory(client)
    # When the jobs in progress are listed and the run's time is spent after the first page
    first = inventory.in_progress(NOW - IN_PROGRESS_HORIZON, lambda: False)
    # Then the listing says where its page stopped: the oldest job it held, finished ones included
    assert [j.name for j in first.jobs] == ["live-1"] and not first.complete
    assert first.reached is not None and NOW - timedelta(days=5) < first.reached < NOW - timedelta(days=3)
    # And a listing of the jobs created before that point reads on from there and finds the older job
    rest = inventory.in_progress(NOW - IN_PROGRESS_HORIZON, lambda: True, created_before=first.reached)
    assert [j.name for j in rest.jobs] == ["long-1"] and rest.complete
    assert fake.calls["ListTrainingJobs"] == 1 + rest.pages
