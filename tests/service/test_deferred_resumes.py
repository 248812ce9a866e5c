"""The reconciler carries out the resumes auto-resume deferred for their backoff (service/reconciler.py) on
in-memory ports: list recently failed jobs -> read their tags -> only a due job whose clone does not exist
is handed to auto-resume (which re-reads and decides again). Order and branches."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from sagemaker_governance.audit import MemoryAuditSink
from sagemaker_governance.business_metrics import BusinessMetric, MemoryBusinessMetrics
from sagemaker_governance.domain.clone import (
    TAG_ATTEMPT,
    TAG_RESUME_AFTER,
    TAG_RESUME_SETTLED,
    TAG_ROOT,
    TAG_SOURCE,
)
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.errors import AdapterError, JobNotFound, StopOutcome
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.reconcile import IN_PROGRESS_HORIZON, AlarmListing, JobListing, JobSummary
from sagemaker_governance.service.reconciler import RESUME_HOLD_PASSES, ReconcileDefect, ReconcilerService
from sagemaker_governance.service.recording import Trigger
from tests.service.conftest import NOW, Calls, FixedPolicies

ACCOUNT = "123456789012"
RUN = Trigger(kind="reconciler", event_id="run-1")


def arn(name: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/{name}"


def due_tag(minutes_from_now: int) -> str:
    return (NOW + timedelta(minutes=minutes_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def clone_tags(due: str | None, attempt: int = 1) -> dict[str, str]:
    tags = {TAG_ROOT: "llm-sft-1", TAG_ATTEMPT: str(attempt)}
    if due is not None:
        tags[TAG_RESUME_AFTER] = due
    return tags


class FakeNotices:
    """``CloneNotices``: the clones whose owner was told."""

    def __init__(self, calls: Calls, told: set[str]) -> None:
        self.calls = calls
        self.done = told

    def told(self, clone: str) -> bool:
        self.calls(f"told? {clone}")
        return clone in self.done


class World:
    """The reconciler with no job in progress and no alarm: only its deferred-resume step has work."""

    def __init__(
        self, policy: dict[str, Any] | None = None, told: set[str] | None = None, alarm_prefix: str | None = None
    ) -> None:
        self.calls = Calls()
        self.failed: dict[str, dict[str, str]] = {}  # name -> tags
        self.existing: set[str] = set()
        self.others: dict[str, dict[str, str]] = {}  # name -> tags, of existing jobs that are not listed as failed
        self.asked_since: list[datetime] = []
        self.list_error: AdapterError | None = None
        self.alarm_error: AdapterError | None = None
        self.asked_created_after: list[datetime] = []
        self.listed_all = True  # False: the listings stop after their first page (the run's time ran out)
        self.failed_all = True  # False: the listing of the failed jobs stops after its first page
        # When a failed job failed (its LastModifiedTime): a job given one is listed only within the look-back
        self.failed_at: dict[str, datetime] = {}
        self.created_at: dict[str, datetime] = {}  # a failed job's CreationTime, when given
        self.tag_cost = 0.0  # seconds of the run each ListTags takes
        self.spent = 0.0  # seconds of the run ListTags took
        self.on_listing: Callable[[], None] = lambda: None  # what listing the jobs in progress costs
        self.now = NOW
        self.resumed: list[str] = []
        self.react_error: AdapterError | None = None
        self.defective: set[str] = set()  # jobs whose auto-resume raises a defect of ours (not an AdapterError)
        self.throttled_once: set[str] = set()  # jobs whose next auto-resume meets an AdapterError (then succeeds)
        self.erring: set[str] = set()  # jobs whose every auto-resume meets an AdapterError (a quota, a denial)
        self.metrics = MemoryBusinessMetrics()
        self.service = ReconcilerService(
            jobs=self,
            inventory=self,
            alarm_inventory=self,
            alarms=self,
            # a guard's alarm prefix, for a listing of the alarms to fail (nothing else of it is asked then)
            guards=(SimpleNamespace(alarm_prefix=alarm_prefix),) if alarm_prefix is not None else (),
            compliance=self,
            policies=FixedPolicies(Policy.model_validate(policy or {"mode": "enforce"})),
            audit=MemoryAuditSink(),
            metrics=self.metrics,
            clock=lambda: self.now,
            interval_minutes=10,
            failed=self,
            resume=self,
            notices=FakeNotices(self.calls, told) if told is not None else None,
        )

    def run(self, remaining: float = 300.0) -> Any:
        return self.run_with(lambda: remaining)

    def run_with(self, remaining: Callable[[], float]) -> Any:
        return self.service.run(RUN, remaining=remaining)

    # ---- ports (this world answers them all) -------------------------------------------------------

    def in_progress(
        self, created_after: datetime, more: Callable[[], bool], created_before: datetime | None = None
    ) -> JobListing:
        self.asked_created_after.append(created_after)
        self.on_listing()
        return JobListing(complete=self.listed_all, pages=1)

    def alarm_states(self, prefix: str) -> list[AlarmListing]:
        if self.alarm_error is not None:
            raise self.alarm_error
        return []

    def delete(self, names: Any) -> list[str]:
        return []

    def reset(self, names: Any, reason: str) -> None:
        raise AssertionError("no alarm to reset")

    def evaluate(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        raise AssertionError("no job to evaluate")

    def failed_since(self, since: datetime, more: Callable[[], bool]) -> JobListing:
        self.calls("list-failed")
        self.asked_since.append(since)
        if self.list_error is not None:
            raise self.list_error
        listed = [n for n in self.failed if n not in self.failed_at or since <= self.failed_at[n] <= self.now]
        return JobListing(
            jobs=tuple(
                JobSummary.model_validate(
                    {
                        "TrainingJobName": n,
                        "TrainingJobArn": arn(n),
                        "TrainingJobStatus": "Failed",
                        "LastModifiedTime": self.failed_at.get(n),
                        "CreationTime": self.created_at.get(n),
                    }
                )
                for n in listed
            ),
            complete=self.failed_all,
        )

    def list_tags(self, job_arn: str) -> dict[str, str]:
        name = job_arn.rsplit("/", 1)[-1]
        self.calls(f"list-tags {name}")
        self.spent += self.tag_cost
        return dict(self.failed.get(name, self.others.get(name, {})))

    def describe(self, name: str) -> dict[str, Any]:
        self.calls(f"describe {name}")
        if name not in self.existing:
            raise JobNotFound(name)
        return {"TrainingJobName": name, "TrainingJobArn": arn(name)}

    def get_job(self, name: str, tags: Any = None) -> TrainingJob:
        raise AssertionError("not read for a deferred resume")

    def stop(self, name: str) -> StopOutcome:
        raise AssertionError("never stops")

    def react(self, job: TrainingJob, trigger: Trigger) -> list[Decision]:
        self.calls(f"resume {job.name}")
        if self.react_error is not None:
            raise self.react_error
        if job.name in self.throttled_once:
            self.throttled_once.discard(job.name)
            raise AdapterError("CreateTrainingJob throttled")
        if job.name in self.erring:
            raise AdapterError("CreateTrainingJob: ResourceLimitExceeded")
        if job.name in self.defective:
            raise KeyError("FailureReason")
        self.resumed.append(job.name)
        assert trigger == RUN and job.arn == arn(job.name)
        clone = Decision(
            rule="auto-resume", code="resume.clone.transient", action=Action.CLONE, mode=Mode.ENFORCE, reason="r"
        )
        return [clone]


def test_a_due_job_without_its_clone_is_handed_to_auto_resume() -> None:
    # Given a failed clone tagged to be resumed 1 minute ago, whose next clone does not exist
    world = World()
    world.failed["llm-sft-1-r1"] = clone_tags(due_tag(-1))
    report = world.run()
    # Then its tags are read, the clone's name looked up, and auto-resume runs it
    assert world.calls.log == [
        "list-failed",
        "list-tags llm-sft-1-r1",
        "describe llm-sft-1-r2",
        "resume llm-sft-1-r1",
    ]
    assert report.repairs == {"deferred-resume": 1}
    assert [e.dimensions for e in world.metrics.of(BusinessMetric.RECONCILER_REPAIRS)] == [
        {"kind": "deferred-resume"}
    ]


def test_a_job_not_yet_due_untagged_or_already_resumed_is_left_alone() -> None:
    world = World()
    world.failed["early-r1"] = {**clone_tags(due_tag(5)), TAG_ROOT: "early"}
    world.failed["never-deferred"] = {}
    world.failed["done-r1"] = {**clone_tags(due_tag(-30)), TAG_ROOT: "done"}
    world.existing.add("done-r2")
    report = world.run()
    assert world.resumed == []
    assert "describe early-r2" not in world.calls.log  # not due: no further read
    assert report.repairs == {}


def test_a_deferred_job_whose_resume_was_settled_is_left_alone() -> None:
    # Given a due job whose deferred resume auto-resume settled for good (its source stopped by its owner:
    # resume.skip.source-stopped), its resume-after tag kept (the service cannot delete tags), the mark written
    # before marks named their job (a bare code: still governance's)
    world = World(told=set())
    world.failed["stopped-r1"] = {
        **clone_tags(due_tag(-30)),
        TAG_ROOT: "stopped",
        TAG_RESUME_SETTLED: "resume.skip.source-stopped",
    }
    # When the reconciler runs
    world.run()
    # Then it is not decided again (one record, not one per run within the look-back), and nothing more is read
    assert world.resumed == []
    assert world.calls.log == ["list-failed", "list-tags stopped-r1"]


def test_a_settled_mark_copied_from_another_job_does_not_keep_a_due_job_from_its_resume() -> None:
    # Given a due job deferred for its last log lines that was launched with an earlier job's tags pasted in, that
    # job's settling among them (smgov:resume-settled naming it), and a due job settled by governance (naming
    # itself)
    world = World(told=set())
    world.failed["relaunched"] = {
        TAG_RESUME_AFTER: due_tag(-5),
        TAG_RESUME_SETTLED: "resume.skip.user-code@earlier-1",
    }
    world.failed["stopped-r1"] = {
        **clone_tags(due_tag(-30)),
        TAG_ROOT: "stopped",
        TAG_RESUME_SETTLED: "resume.skip.source-stopped@stopped-r1",
    }
    # When the reconciler runs
    report = world.run()
    # Then the copied mark does not count: the relaunched job's own deferred resume is made; the settled one is not
    # decided again
    assert world.resumed == ["relaunched"]
    assert report.repairs == {"deferred-resume": 1}
    assert "list-tags stopped-r1" in world.calls.log and "describe stopped-r2" not in world.calls.log


def test_a_due_job_launched_with_another_lineage_s_tags_is_not_taken_for_that_lineage_s_done_resume() -> None:
    # Given a due job launched with the tags of llm-sft-1's first clone (its lineage copied), while that lineage's
    # next clone, llm-sft-1-r2, exists and its owner was told
    world = World(told={"llm-sft-1-r2"})
    world.failed["relaunched"] = clone_tags(due_tag(-5))
    world.existing.add("llm-sft-1-r2")
    world.others["llm-sft-1-r2"] = {**clone_tags(None, attempt=2), TAG_SOURCE: "llm-sft-1-r1"}
    # When the reconciler runs
    world.run()
    # Then its own clone is looked up, and the other lineage's, made from another job, is not taken for its resume:
    # its deferred resume is made
    assert world.resumed == ["relaunched"]
    assert "describe relaunched-r1" in world.calls.log and "list-tags llm-sft-1-r2" in world.calls.log


def test_a_resume_after_dated_before_the_job_was_created_came_with_its_request_and_is_left_alone() -> None:
    # Given a job launched from a console Clone of a deferred failed job, that job's smgov:resume-after among its
    # tags (dated a day before the relaunch was created), and a job deferred after it was created
    world = World(told=set())
    world.failed["relaunched"] = {TAG_RESUME_AFTER: due_tag(-26 * 60)}
    world.created_at["relaunched"] = NOW - timedelta(hours=25)
    world.failed["deferred"] = {TAG_RESUME_AFTER: due_tag(-5)}
    world.created_at["deferred"] = NOW - timedelta(hours=25)
    # When the reconciler runs
    report = world.run()
    # Then the copied date is not the relaunched job's deferral (its event decided it): only the other is resumed
    assert world.resumed == ["deferred"]
    assert report.repairs == {"deferred-resume": 1}
    assert "describe relaunched-r1" not in world.calls.log


def test_a_due_job_of_a_team_in_audit_mode_is_not_decided_again_at_every_run() -> None:
    # Given a team in audit mode (which defers nothing and writes no tag) whose job carries a smgov:resume-after
    # dated after its creation (copied from a job deferred after the relaunch was created, or tagged before the
    # team's switch to audit mode), and an enforcing team's due job
    world = World({"mode": "enforce", "teams": {"vision": {"mode": "audit"}}}, told=set())
    world.failed["audited"] = {TAG_RESUME_AFTER: due_tag(-5), "team": "vision"}
    world.created_at["audited"] = NOW - timedelta(hours=2)
    world.failed["enforced"] = {TAG_RESUME_AFTER: due_tag(-5)}
    # When the reconciler runs three times
    for minutes in (0, 10, 20):
        world.now = NOW + timedelta(minutes=minutes)
        world.run()
    # Then the audit-mode job is never handed to auto-resume (a decision there could neither act nor be settled,
    # and would be recorded and told at every run); the enforcing team's job is, at each run (its fake clone is
    # never made)
    assert world.resumed == ["enforced"] * 3


def test_a_due_job_an_earlier_deployment_resumed_under_its_copied_lineage_is_left_alone() -> None:
    # Given a due job launched with the tags of llm-sft-1's first clone, which the deployment before lineage tags
    # were dated to their job resumed under them as llm-sft-1-r2 (smgov:resumed-from naming it), its owner told
    world = World(told={"llm-sft-1-r2"})
    world.failed["relaunched"] = clone_tags(due_tag(-5))
    world.existing.add("llm-sft-1-r2")
    world.others["llm-sft-1-r2"] = {**clone_tags(None, attempt=2), TAG_SOURCE: "relaunched"}
    # When the reconciler runs
    world.run()
    # Then its own lineage's clone is looked up, then the copied lineage's, which is its clone: not handed over
    assert world.resumed == []
    assert "describe relaunched-r1" in world.calls.log and "list-tags llm-sft-1-r2" in world.calls.log


def test_a_due_job_whose_clone_exists_but_whose_owner_was_never_told_is_handed_to_auto_resume() -> None:
    # Given two due jobs whose clones exist: one's owner was told, the other's Publish failed
    world = World(told={"told-r2"})
    for root in ("told", "untold"):
        world.failed[f"{root}-r1"] = {**clone_tags(due_tag(-30)), TAG_ROOT: root}
        world.existing.add(f"{root}-r2")
    # When the reconciler runs
    world.run()
    # Then only the untold one is handed to auto-resume (which meets "already exists" and tells)
    assert world.resumed == ["untold-r1"]
    # and a job whose clone does not exist asks nothing of the ledger
    assert all(not line.startswith("told?") or "-r2" in line for line in world.calls.log)


def test_the_look_back_covers_the_longest_backoff_of_any_team_and_three_runs() -> None:
    world = World({"mode": "enforce", "teams": {"nlp": {"resume": {"backoff_minutes": [0, 30, 240]}}}})
    world.run()
    assert world.asked_since == [NOW - timedelta(minutes=240 + 3 * 10)]


def test_the_look_back_covers_a_team_s_logs_settle_period_when_longer_than_its_backoffs() -> None:
    # Given a team that resumes at once but waits 45 minutes for a failure's last log lines
    world = World(
        {"mode": "enforce", "teams": {"nlp": {"resume": {"backoff_minutes": [0], "logs_settle_minutes": 45}}}}
    )
    # When the reconciler runs
    world.run()
    # Then it looks back far enough to find that team's failures deferred for their logs when they are due
    assert world.asked_since == [NOW - timedelta(minutes=60 + 3 * 10)]
    world = World({"mode": "enforce", "resume": {"backoff_minutes": [0], "logs_settle_minutes": 45}})
    world.run()
    assert world.asked_since == [NOW - timedelta(minutes=45 + 3 * 10)]


def test_a_listing_that_fails_is_an_error_of_the_run_not_a_crash() -> None:
    world = World()
    world.list_error = AdapterError("ListTrainingJobs throttled")
    report = world.run()
    assert report.errors == 1 and world.resumed == []


def test_a_failed_listing_of_the_alarms_still_runs_the_deferred_resumes() -> None:
    # Given a deferred resume that is due, and the alarms' listing failing past the client's retries
    world = World(alarm_prefix="gov-idle-")
    world.failed["llm-sft-1-r1"] = clone_tags(due_tag(-1))
    world.alarm_error = AdapterError("DescribeAlarms throttled")
    # When the reconciler runs
    report = world.run()
    # Then the alarm repairs wait for a run that sees every alarm, the resume (which reads neither listing) is
    # made, and the failed listing is an error of the run, not a crash
    assert report.visited == [] and report.unlisted == ["alarms"] and report.errors == 1
    assert world.resumed == ["llm-sft-1-r1"] and report.repairs == {"deferred-resume": 1}


def test_one_resume_that_fails_does_not_stop_the_others() -> None:
    world = World()
    world.failed["a-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "a"}
    world.failed["b-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "b"}
    world.react_error = AdapterError("CreateTrainingJob throttled")
    report = world.run()
    assert report.errors == 2
    assert [c for c in world.calls.log if c.startswith("resume")] == ["resume a-r1", "resume b-r1"]


def test_one_deferred_resume_s_defect_fails_the_run_only_after_the_others_and_the_repairs() -> None:
    # Given two due deferred resumes, the first of which makes auto-resume raise a defect of ours
    world = World()
    world.failed["poison-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "poison"}
    world.failed["ok-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "ok"}
    world.defective = {"poison-r1"}
    # When the reconciler runs
    with pytest.raises(ReconcileDefect, match="poison-r1") as raised:
        world.run()
    # Then the other job is resumed and the run goes on to list the jobs in progress (its repairs) before the
    # invocation fails on the defect (the dead-letter queue and its alarm)
    assert world.resumed == ["ok-r1"] and world.asked_created_after != []
    assert isinstance(raised.value.__cause__, KeyError)


def test_a_deferred_resume_s_defect_does_not_hold_the_look_back_open() -> None:
    # Given a container whose pass decided every failed job at NOW, then a due job whose resume raises a defect
    world = World()
    world.run()
    world.failed["poison-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "poison"}
    world.defective = {"poison-r1"}
    # When the reconciler runs every interval (10 minutes) for six hours, each run failing on that job
    for run in range(1, 37):
        world.now = NOW + timedelta(minutes=10 * run)
        with pytest.raises(ReconcileDefect):
            world.run()
        # Then each pass looks back as usual (the longest backoff and three runs), not to the last pass before
        # the defect: a wider window would only meet the same defect, at a ListTags per failed job
        assert world.asked_since[-1] == world.now - timedelta(minutes=60 + 30)


def test_a_run_without_time_makes_no_call_not_even_for_the_deferred_resumes() -> None:
    # Given a due deferred resume and a run started with less time than its safety margin
    world = World()
    world.failed["llm-sft-1-r1"] = clone_tags(due_tag(-1))
    # When it runs
    report = world.run(remaining=1.0)
    # Then it stops cleanly before any call: the resume is the next run's
    assert report.stopped_early and world.calls.log == []


def test_a_listing_of_the_jobs_in_progress_cut_short_no_longer_delays_the_deferred_resumes() -> None:
    # Given a deferred resume that is due, and a run whose listing of the jobs in progress is cut short
    world = World()
    world.failed["llm-sft-1-r1"] = clone_tags(due_tag(-1))
    world.listed_all = False
    # When it runs
    report = world.run()
    # Then it listed from the horizon and said it stopped early, and the deferred resume was made all the same
    assert world.asked_created_after == [NOW - IN_PROGRESS_HORIZON]
    assert report.stopped_early and world.resumed == ["llm-sft-1-r1"]


def test_the_deferred_resumes_are_made_before_a_listing_that_takes_the_rest_of_the_run() -> None:
    # Given a due deferred resume, and a listing of the jobs in progress that takes every second left
    world = World()
    world.failed["llm-sft-1-r1"] = clone_tags(due_tag(-1))
    left = [300.0]
    world.on_listing = lambda: left.__setitem__(0, 0.0)
    # When the reconciler runs
    report = world.run_with(lambda: left[0])
    # Then the resume was made first, within its share of the run's time
    assert world.resumed == ["llm-sft-1-r1"] and report.repairs == {"deferred-resume": 1}
    assert world.calls.log[0] == "list-failed"


def test_a_pass_that_missed_runs_looks_back_far_enough_to_make_them_up() -> None:
    # Given a container whose deferred-resume pass decided every failed job at NOW (default backoffs: 60 at most)
    world = World()
    world.run()
    # When its next passes fail (their listing of the failed jobs throttled) for 100 minutes
    world.list_error = AdapterError("ListTrainingJobs throttled")
    for minutes in range(10, 110, 10):
        world.now = NOW + timedelta(minutes=minutes)
        world.run()
    # Then each looks back to the last complete pass less the longest backoff (a job due since then failed at
    # most that long before it), not just the longest backoff and three runs
    assert world.asked_since[-1] == NOW - timedelta(minutes=60) < world.now - timedelta(minutes=60 + 30)
    # And once a pass decides them all, the next looks back as usual
    world.list_error = None
    world.run()
    world.now += timedelta(minutes=10)
    world.run()
    assert world.asked_since[-1] == world.now - timedelta(minutes=60 + 30)


def test_the_make_up_reaches_back_no_further_than_a_resume_can_be_late() -> None:
    # Given a container whose last complete pass was three days ago (resume.late_after_hours: 48)
    world = World()
    world.run()
    world.failed_all = False
    world.now = NOW + timedelta(days=3)
    # When its pass runs
    world.run()
    # Then it looks back 48 hours: a resume decided later is skipped as too late anyway
    assert world.asked_since[-1] == world.now - timedelta(hours=48)


def test_a_due_job_is_decided_before_newer_failed_jobs_that_are_not_due_yet() -> None:
    # Given 80 failed jobs not due yet, listed first (the listing is newest created first), and a due job created
    # before them all, listed last; each ListTags takes a second, so a pass of a 300 s run reads some 70 tags
    world = World()
    for i in range(80):
        world.failed[f"new{i}-r1"] = {**clone_tags(due_tag(50)), TAG_ROOT: f"new{i}"}
        world.failed_at[f"new{i}-r1"] = NOW - timedelta(minutes=10)
    world.failed["old-r1"] = {**clone_tags(due_tag(-10)), TAG_ROOT: "old"}
    world.failed_at["old-r1"] = NOW - timedelta(minutes=70)
    world.tag_cost = 1.0
    # When the reconciler runs
    report = world.run_with(lambda: 300.0 - world.spent)
    # Then the pass, cut short for time, has resumed the due job first: the oldest failure is read first
    assert report.stopped_early and world.resumed == ["old-r1"]
    assert world.calls.log.index("list-tags old-r1") == 1


def test_a_pass_cut_short_for_time_leaves_the_next_no_wider_window_than_it_handled() -> None:
    # Given a container whose pass decided every failed job at NOW, in an account where a job fails every 90 s
    # (60 within the usual look-back of 90 minutes) and each ListTags takes a second (some 70 a pass), and a job
    # that ran two days and fails at NOW + 2 h 05 (created before all the others: listed last), due an hour on
    world = World()
    world.run()
    at = NOW + timedelta(hours=6)
    while at >= NOW - timedelta(hours=48):
        world.failed[f"j{int(at.timestamp())}-r1"] = {}  # failed, not deferred
        world.failed_at[f"j{int(at.timestamp())}-r1"] = at
        at -= timedelta(seconds=90)
    world.failed["long-r1"] = {
        **clone_tags((NOW + timedelta(hours=3, minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        TAG_ROOT: "long",
    }
    world.failed_at["long-r1"] = NOW + timedelta(hours=2, minutes=5)
    world.tag_cost = 1.0
    # When its passes fail for four runs (the listing throttled), then it runs every 10 minutes for six hours
    starts = []
    for run in range(1, 37):
        world.now = NOW + timedelta(minutes=10 * run)
        world.list_error = AdapterError("ListTrainingJobs throttled") if run <= 4 else None
        world.spent = 0.0
        world.run_with(lambda: 300.0 - world.spent)
        starts.append(world.asked_since[-1])
    # Then the first pass after them makes up from the last complete pass, and each pass cut short leaves the next
    # to start where it stopped, never further back, until the look-back is the usual one again
    assert starts[4] == NOW - timedelta(minutes=60)
    assert starts[4:] == sorted(starts[4:])
    assert starts[-1] == world.now - timedelta(minutes=60 + 30)
    # And the long job, due at NOW + 3 h 05, is resumed
    assert "long-r1" in world.resumed


def test_a_pass_whose_listing_is_cut_short_for_time_leaves_the_next_the_usual_look_back() -> None:
    # Given a container whose pass decided every failed job at NOW, and whose next five passes failed
    world = World()
    world.run()
    world.list_error = AdapterError("ListTrainingJobs throttled")
    for minutes in range(10, 60, 10):
        world.now = NOW + timedelta(minutes=minutes)
        world.run()
    # When the next pass makes them up but its listing of the failed jobs is cut short for time
    world.list_error = None
    world.failed_all = False
    world.now = NOW + timedelta(minutes=60)
    world.run()
    assert world.asked_since[-1] == NOW - timedelta(minutes=60)
    # Then the pass after it looks back as usual: a window whose listing alone took a pass's time is not widened
    world.now += timedelta(minutes=10)
    world.run()
    assert world.asked_since[-1] == world.now - timedelta(minutes=60 + 30)


def test_a_due_job_whose_resume_met_an_error_in_a_pass_cut_short_is_tried_again() -> None:
    # Given a container whose pass decided every failed job at NOW and whose next 18 passes (three hours) failed
    world = World()
    world.run()
    world.list_error = AdapterError("ListTrainingJobs throttled")
    for run in range(1, 19):
        world.now = NOW + timedelta(minutes=10 * run)
        world.run()
    world.list_error = None
    # and a deferred job that failed at NOW, due five minutes on, before a job failing every minute for three
    # hours after it, with a ListTags a second: a pass reads far fewer of them than its window holds
    world.failed["due-r1"] = {
        **clone_tags((NOW + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        TAG_ROOT: "due",
    }
    world.failed_at["due-r1"] = NOW
    at = NOW + timedelta(minutes=1)
    while at < NOW + timedelta(hours=3):
        world.failed[f"j{int(at.timestamp())}-r1"] = {}  # failed, not deferred
        world.failed_at[f"j{int(at.timestamp())}-r1"] = at
        at += timedelta(minutes=1)
    world.tag_cost = 1.0
    # When the passes run again every 10 minutes, the first one's resume of the due job is throttled and that
    # pass is then cut short for time among the newer failures
    world.throttled_once = {"due-r1"}
    starts = []
    for run in range(19, 25):
        world.now = NOW + timedelta(minutes=10 * run)
        world.spent = 0.0
        report = world.run_with(lambda: 300.0 - world.spent)
        starts.append(world.asked_since[-1])
        if run == 19:
            assert report.errors == 1 and report.stopped_early
    # Then the next pass still looks back to the due job's failure, not to where the first one stopped, and
    # resumes it: tried twice, resumed once
    assert starts[1] == NOW
    assert [c for c in world.calls.log if c == "resume due-r1"] == ["resume due-r1", "resume due-r1"]
    assert world.resumed == ["due-r1"]
    # And once it is resumed the window moves on again
    assert starts[2] > NOW


def test_a_due_job_whose_resume_met_an_error_in_a_pass_whose_listing_was_cut_short_is_tried_again() -> None:
    # Given a container whose pass decided every failed job at NOW and whose next five passes failed, and a
    # deferred job that failed at NOW, due five minutes on
    world = World()
    world.run()
    world.list_error = AdapterError("ListTrainingJobs throttled")
    for minutes in range(10, 60, 10):
        world.now = NOW + timedelta(minutes=minutes)
        world.run()
    world.list_error = None
    world.failed["due-r1"] = {
        **clone_tags((NOW + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        TAG_ROOT: "due",
    }
    world.failed_at["due-r1"] = NOW
    # When the next pass makes them up, its listing of the failed jobs is cut short for time and its resume of
    # the due job is throttled
    world.failed_all = False
    world.throttled_once = {"due-r1"}
    world.now = NOW + timedelta(minutes=60)
    world.run()
    # Then the pass after it looks back to the due job's failure (further than the usual look-back, which no
    # longer reaches it) and resumes it
    world.failed_all = True
    world.now += timedelta(minutes=40)
    world.run()
    assert world.asked_since[-1] == NOW
    assert world.resumed == ["due-r1"]


def test_a_due_job_whose_resume_always_meets_an_error_holds_a_pass_cut_short_only_a_few_passes() -> None:
    # Given a container whose pass decided every failed job at NOW and whose next 18 passes (three hours) failed
    world = World()
    world.run()
    world.list_error = AdapterError("ListTrainingJobs throttled")
    for run in range(1, 19):
        world.now = NOW + timedelta(minutes=10 * run)
        world.run()
    world.list_error = None
    # and a deferred job that failed at NOW, due five minutes on, whose every resume is refused (an instance
    # quota), before a job failing every minute for three hours after it, with a ListTags a second: a pass reads
    # far fewer of them than its window holds; and a second deferred job that failed at NOW + 2 h 50, due five
    # minutes on
    world.failed["due-r1"] = {
        **clone_tags((NOW + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        TAG_ROOT: "due",
    }
    world.failed_at["due-r1"] = NOW
    world.erring = {"due-r1"}
    at = NOW + timedelta(minutes=1)
    while at < NOW + timedelta(hours=3):
        world.failed[f"j{int(at.timestamp())}-r1"] = {}  # failed, not deferred
        world.failed_at[f"j{int(at.timestamp())}-r1"] = at
        at += timedelta(minutes=1)
    later = NOW + timedelta(hours=2, minutes=50)
    world.failed["later-r1"] = {
        **clone_tags((later + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")),
        TAG_ROOT: "later",
    }
    world.failed_at["later-r1"] = later
    world.tag_cost = 1.0
    # When the passes run again every 10 minutes for six hours, each cut short for time while its window is wide
    starts, tries, cut = [], [], []
    for run in range(19, 19 + 36):
        world.now = NOW + timedelta(minutes=10 * run)
        world.spent = 0.0
        before = len(world.calls.log)
        cut.append(world.run_with(lambda: 300.0 - world.spent).stopped_early)
        starts.append(world.asked_since[-1])
        tries.append(world.calls.log[before:].count("resume due-r1"))
    # Then the passes after the first look back to the refused job's failure only for the first passes in a row
    # that met the error, trying it again at each, and then move on by what a pass reads, never further back
    assert starts[1 : 1 + RESUME_HOLD_PASSES] == [NOW] * RESUME_HOLD_PASSES
    assert starts[1 + RESUME_HOLD_PASSES] > NOW and starts[1:] == sorted(starts[1:])
    assert tries[: 1 + RESUME_HOLD_PASSES] == [1] * (1 + RESUME_HOLD_PASSES)
    # And the pass cut short after them does not reach the refused job by name (the jobs its window lists come
    # first), and every later pass that reads its whole window tries it again by name
    assert cut[1 + RESUME_HOLD_PASSES] and tries[1 + RESUME_HOLD_PASSES] == 0
    assert all(tries[run] == 1 for run in range(2 + RESUME_HOLD_PASSES, 36) if not cut[run])
    assert not any(cut[-10:])
    # And the due job beyond it is resumed, and the look-back is the usual one again within the six hours
    assert "later-r1" in world.resumed
    assert starts[-1] == world.now - timedelta(minutes=60 + 30)


def test_a_due_job_whose_resume_always_meets_an_error_does_not_hold_a_complete_pass_s_window_open() -> None:
    # Given a due deferred job that failed at NOW, whose every resume is denied (iam:PassRole on the clone's role)
    world = World()
    world.failed["due-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "due"}
    world.failed_at["due-r1"] = NOW
    world.erring = {"due-r1"}
    # When the reconciler runs every 10 minutes for six hours, each pass deciding every other failed job
    for run in range(37):
        world.now = NOW + timedelta(minutes=10 * run)
        world.run()
    # Then every pass looks back as usual: an error met at every pass no longer holds the window at the job once
    # the usual look-back has left it, rather than widen the window at every run up to resume.late_after_hours
    usual = timedelta(minutes=60 + 30)
    assert world.asked_since == [NOW + timedelta(minutes=10 * run) - usual for run in range(37)]
    # And the job is tried at every pass all the same: by name once no window lists it
    assert world.calls.log.count("resume due-r1") == 37


def test_a_due_job_whose_resume_meets_an_error_after_the_window_left_it_is_resumed_once_the_error_passes() -> None:
    # Given the default backoff [0, 15, 60]: a third clone that failed at NOW is due an hour on
    world = World()
    world.failed["due-r3"] = {**clone_tags(due_tag(60), attempt=3), TAG_ROOT: "due"}
    world.failed_at["due-r3"] = NOW
    # and its every resume is refused for the 40 minutes after it is due (ResourceLimitExceeded: the instance
    # quota is full until other jobs end), one pass more than hold the window at it
    world.erring = {"due-r3"}
    # When the reconciler runs every 10 minutes, the quota freeing after the pass at NOW + 90 min
    for run in range(19):
        world.now = NOW + timedelta(minutes=10 * run)
        if run == 10:
            world.erring = set()
        world.run()
    # Then the window moves on as usual once the error has held it for its passes
    assert world.asked_since[-1] == world.now - timedelta(minutes=60 + 30)
    assert world.asked_since[10] > NOW
    # And the job, no longer listed, is tried again by name and resumed once, at the first pass after the error
    assert world.calls.log.count("resume due-r3") == 1 + RESUME_HOLD_PASSES + 1
    assert world.resumed == ["due-r3"]


def test_a_due_job_tried_by_name_whose_resume_meets_a_defect_once_is_tried_again() -> None:
    # Given the third clone due an hour after it failed at NOW, whose resume is refused until the window has left
    # it, so that it is tried by name
    world = World()
    world.failed["due-r3"] = {**clone_tags(due_tag(60), attempt=3), TAG_ROOT: "due"}
    world.failed_at["due-r3"] = NOW
    world.erring = {"due-r3"}
    # When one of those tries by name meets a defect of ours (an odd answer: not an AdapterError), gone at the next
    for run in range(19):
        world.now = NOW + timedelta(minutes=10 * run)
        world.erring = {"due-r3"} if run < 12 else set()
        world.defective = {"due-r3"} if run == 12 else set()
        with contextlib.suppress(ReconcileDefect):
            world.run()
    # Then the job stays on the list of those tried by name and is resumed at the next pass
    assert world.resumed == ["due-r3"]


def test_a_listed_job_whose_resume_met_errors_and_meets_a_defect_at_its_last_listed_pass_is_tried_again() -> None:
    # Given the third clone due an hour after it failed at NOW, whose resume is refused at the passes at +60, +70
    # and +80 (those that hold the window), so that it is on the list of those tried by name
    world = World()
    world.failed["due-r3"] = {**clone_tags(due_tag(60), attempt=3), TAG_ROOT: "due"}
    world.failed_at["due-r3"] = NOW
    # When, at +90, the last pass whose window lists it, its resume meets a defect of ours once
    for run in range(19):
        world.now = NOW + timedelta(minutes=10 * run)
        world.erring = {"due-r3"} if run < 9 else set()
        world.defective = {"due-r3"} if run == 9 else set()
        with contextlib.suppress(ReconcileDefect):
            world.run()
    # Then it stays on that list, is tried by name at the next pass (the window has moved past it) and resumed
    assert world.resumed == ["due-r3"]
    assert world.calls.log.count("resume due-r3") == 5


def test_a_due_job_whose_resume_meets_an_error_until_it_is_too_late_is_tried_no_longer() -> None:
    # Given a due deferred job that failed at NOW, whose every resume is refused, resumes being made up to 5 h
    # after a failure
    world = World({"mode": "enforce", "resume": {"late_after_hours": 5}})
    world.failed["due-r1"] = {**clone_tags(due_tag(-1)), TAG_ROOT: "due"}
    world.failed_at["due-r1"] = NOW
    world.erring = {"due-r1"}
    # When the reconciler runs every 10 minutes for six hours
    for run in range(37):
        world.now = NOW + timedelta(minutes=10 * run)
        world.run()
    # Then the job is tried at every pass up to the first one after those 5 h (where auto-resume decides it too
    # late), and no longer after it
    assert world.calls.log.count("resume due-r1") == 32
    assert world.calls.log[-1] == "list-failed"
