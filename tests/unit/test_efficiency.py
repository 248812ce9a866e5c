"""The efficiency record of an ended job: figures from what was read, never a made-up number."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.audit import AuditRecord, MemoryAuditSink, Outcome
from sagemaker_governance.domain import efficiency
from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID, EfficiencyCode, EfficiencyPlan, read_period
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.stall_judge import MetricReadResult
from sagemaker_governance.service.efficiency import RECONCILER_HOLD_SECONDS, EfficiencyReaction
from sagemaker_governance.service.idempotency import (
    OnceAuditSink,
    audit_effect,
    delivering,
    job_delivery_key,
    once,
)
from sagemaker_governance.service.recording import Trigger
from smgov.cfn_template import load_template
from tests.builders import job as build_job
from tests.service.conftest import Calls, MemoryLedger

START = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
PRICES = {"ml.g5.12xlarge": 6.0, "ml.m5.xlarge": 0.25}  # 4 GPUs per g5.12xlarge host


def ended(hours: float = 2, *, instance_type: str = "ml.g5.12xlarge", count: int = 1, **extra: Any) -> Any:
    end = START + timedelta(hours=hours)
    fields: dict[str, Any] = {
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 50},
        "TrainingStartTime": START.isoformat(),
        "TrainingEndTime": end.isoformat(),
        "BillableTimeInSeconds": round(hours * 3600),
        "TrainingTimeInSeconds": round(hours * 3600),
    }
    tags = extra.pop("Tags", None)
    return build_job("train-1", tags, **{**fields, **extra})


def read(
    plan: EfficiencyPlan, values: dict[int, list[float] | None], errors: tuple[str, ...] = ()
) -> MetricReadResult:
    """Host index -> GPUUtilization series (sum over the host's 4 GPUs); memory at half of it."""
    out: dict[str, tuple[float, ...] | None] = {}
    for i in range(len(plan.hosts)):
        series = values.get(i, [])
        out[f"h{i}_0"] = None if series is None else tuple(series)
        out[f"h{i}_1"] = None if series is None else tuple(v / 2 for v in series)
    return MetricReadResult(values=out, errors=errors)


def planned(job: Any) -> EfficiencyPlan:
    result = efficiency.plan(job, START + timedelta(days=1), PRICES)
    assert isinstance(result, EfficiencyPlan)
    return result


def test_a_gpu_job_is_read_once_per_host_and_series_and_measured_per_gpu() -> None:
    # Given a 2-hour job on one 4-GPU host, busy (320 = 80% per GPU) for 90 minutes, idle for 30
    job = ended(2)
    plan = planned(job)
    assert [q.metric for q in plan.queries] == ["GPUUtilization", "GPUMemoryUtilization"]
    assert plan.queries[0].dimensions == (("Host", "train-1/algo-1"),) and plan.period_seconds == 60
    # When the record is made
    record = efficiency.record(job, plan, read(plan, {0: [320.0] * 90 + [8.0] * 30}), PRICES)
    # Then the figures are per GPU, idle minutes count 4 GPUs each, and idle cost is their host-time
    assert record.code is EfficiencyCode.MEASURED
    assert record.gpu_utilization_mean_percent == pytest.approx((80 * 90 + 2 * 30) / 120, abs=0.01)
    assert record.gpu_utilization_median_percent == 80.0
    assert record.gpu_under_idle_share == 0.25
    assert record.gpu_memory_utilization_mean_percent == pytest.approx((40 * 90 + 1 * 30) / 120, abs=0.01)
    assert record.idle_gpu_hours == 2.0  # 30 minutes x 4 GPUs
    assert record.cost_usd == 12.0  # 2 h x 1 host x $6
    assert record.idle_cost_usd == 3.0  # 0.5 host-hours x $6
    assert record.coverage == 1.0 and record.missing == ()


def test_a_cpu_job_costs_no_read_and_says_what_is_missing() -> None:
    job = ended(1, instance_type="ml.m5.xlarge")
    record = efficiency.plan(job, START + timedelta(days=1), PRICES)
    assert not isinstance(record, EfficiencyPlan)
    assert record.code is EfficiencyCode.NO_GPU
    assert record.gpu_utilization_mean_percent is None and record.idle_gpu_hours is None
    assert record.cost_usd == 0.25
    assert any("GPUUtilization" in m for m in record.missing)


def test_no_datapoint_at_all_gives_no_figure() -> None:
    job = ended(1)
    plan = planned(job)
    record = efficiency.record(job, plan, read(plan, {0: []}), PRICES)
    assert record.code is EfficiencyCode.NO_METRICS
    assert record.gpu_utilization_mean_percent is None
    assert record.idle_gpu_hours is None and record.idle_cost_usd is None
    assert record.cost_usd == 6.0  # the cost comes from SageMaker's billable time, not from metrics


def test_a_failed_read_is_unread_not_idle() -> None:
    job = ended(1)
    plan = planned(job)
    record = efficiency.record(job, plan, read(plan, {0: None}, ("GetMetricData failed (Throttling)",)), PRICES)
    assert record.code is EfficiencyCode.UNREAD
    assert record.idle_gpu_hours is None
    assert "GetMetricData failed (Throttling)" in record.missing


def test_a_host_without_datapoints_makes_the_record_partial_and_is_not_counted_idle() -> None:
    job = ended(1, count=2)
    plan = planned(job)
    record = efficiency.record(job, plan, read(plan, {0: [400.0] * 60, 1: []}), PRICES)
    assert record.code is EfficiencyCode.PARTIAL
    assert record.gpu_utilization_mean_percent == 100.0 and record.idle_gpu_hours == 0.0
    assert record.coverage == 0.5
    assert any("1 of 2 GPU hosts" in m for m in record.missing)


def test_spot_savings_and_idle_cost_follow_the_billable_share() -> None:
    # Given a Spot job trained 2 h, billed 1 h (50% savings), idle for half its datapoints
    job = ended(2, EnableManagedSpotTraining=True, BillableTimeInSeconds=3600, TrainingTimeInSeconds=7200)
    plan = planned(job)
    record = efficiency.record(job, plan, read(plan, {0: [400.0] * 60 + [0.0] * 60}), PRICES)
    assert record.cost_usd == 6.0
    assert record.spot_savings_usd == 6.0
    assert record.idle_cost_usd == 3.0  # 1 idle host-hour x $6 x 1/2 billed


def test_an_unpriced_type_has_no_cost_and_is_named() -> None:
    job = ended(1)
    plan = planned(job)
    record = efficiency.record(job, plan, read(plan, {0: [0.0] * 60}), {})
    assert record.cost_usd is None and record.idle_cost_usd is None
    assert record.unpriced_instance_types == ("ml.g5.12xlarge",)
    assert record.idle_gpu_hours == 4.0


def test_the_period_follows_cloudwatch_retention_and_the_datapoint_budget() -> None:
    now = START + timedelta(hours=3)
    assert read_period(START, START + timedelta(hours=2), now, 2) == 60
    assert read_period(START, START + timedelta(hours=2), START + timedelta(days=20), 2) == 300
    assert read_period(START, START + timedelta(hours=2), START + timedelta(days=70), 2) == 3600
    # 64 hosts x 2 series x 10 days of minutes = 1.8 M datapoints: coarser than a minute, within budget
    period = read_period(START, START + timedelta(days=10), START + timedelta(days=10), 128)
    assert period % 60 == 0 and period > 60
    assert 128 * 10 * 86_400 / period <= efficiency.DATAPOINT_BUDGET


@pytest.mark.parametrize(("hosts", "days"), [(50, 20), (100, 28), (200, 16), (400, 70), (8, 60)])
def test_a_coarser_period_stays_a_multiple_of_what_cloudwatch_keeps_for_the_start(hosts: int, days: int) -> None:
    # A start 15-63 days back is answered only for a period that is a multiple of 300 s, an older one of 3600 s
    # (CloudWatch's MetricStat.Period): a large job's period raised for the datapoint budget must stay one.
    now = START + timedelta(days=days)
    period = read_period(START, START + timedelta(days=min(days, 14)), now, 2 * hosts)
    assert period % (3600 if days > 63 else 300) == 0, period
    assert 2 * hosts * min(days, 14) * 86_400 / period <= efficiency.DATAPOINT_BUDGET


def test_the_retention_rule_the_period_follows_is_the_models() -> None:
    import botocore.session

    model: Any = botocore.session.get_session().get_service_model("cloudwatch")
    text = model.shape_for("MetricStat").members["Period"].documentation
    assert "multiple of 300" in text and "multiple of 3600" in text, text


def test_a_job_that_never_trained_has_no_read() -> None:
    job = build_job("train-1", TrainingJobStatus="Failed", SecondaryStatus="Failed")
    record = efficiency.plan(job, START, PRICES)
    assert not isinstance(record, EfficiencyPlan) and record.code is EfficiencyCode.NOT_TRAINED


# ---- the reaction: one audit record per ended job ---------------------------------------------------


class Reads:
    def __init__(self, values: dict[str, tuple[float, ...] | None]) -> None:
        self.calls: list[tuple[int, int]] = []
        self._values = values

    def read(self, queries: Any, start: datetime, end: datetime, period: int = 60) -> MetricReadResult:
        self.calls.append((len(queries), period))
        return MetricReadResult(values={q.id: self._values.get(q.id, ()) for q in queries}, errors=())


class Jobs:
    def __init__(self, job: Any) -> None:
        self.job = job
        self.reads = 0

    def get_job(self, name: str, tags: Any = None) -> Any:
        self.reads += 1
        return self.job


class Policies:
    def current(self, max_age_seconds: float | None = None) -> Policy:
        return Policy.model_validate({"idle": {"prices": PRICES}})


def react(job: Any, reads: Reads, jobs: Jobs | None = None) -> MemoryAuditSink:
    audit = MemoryAuditSink()
    reaction = EfficiencyReaction(jobs or Jobs(job), reads, Policies(), audit, lambda: START + timedelta(days=1))  # type: ignore[arg-type]
    assert reaction.applies(job)
    reaction.react(job, Trigger(kind="job-state-change", event_id="e-1"))
    return audit


def test_an_ended_gpu_job_gets_one_record_from_one_read() -> None:
    job = ended(1, Tags={"team": "vision", "owner": "alice", "project": "imagenet"})
    reads = Reads({"h0_0": (36.0,) * 60, "h0_1": (100.0,) * 60})  # 9% per GPU: idle
    audit = react(job, reads)
    assert reads.calls == [(2, 60)]
    [record] = audit.records
    assert (record.rule, record.code, record.action) == (EFFICIENCY_RULE_ID, "efficiency.record.measured", "none")
    assert record.outcome is Outcome.NO_ACTION and record.team == "vision"
    assert record.evidence["idle_gpu_hours"] == 4.0 and record.evidence["project"] == "imagenet"


def test_an_ended_cpu_job_gets_a_record_without_any_read() -> None:
    reads = Reads({})
    audit = react(ended(1, instance_type="ml.m5.xlarge"), reads)
    assert reads.calls == []
    assert [r.code for r in audit.records] == ["efficiency.record.no-gpu"]


MIXED_PRICES = {**PRICES, "ml.p4d.24xlarge": 37.688, "ml.g5.xlarge": 1.408}


def mixed_gpus(hours: float = 4) -> Any:
    """GPU groups of 8 and 1 GPUs per host (SageMaker does not say which host is in which group)."""
    groups = [
        {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "aux", "InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
    ]
    return ended(hours, ResourceConfig={"InstanceGroups": groups, "VolumeSizeInGB": 50})


def test_gpu_groups_of_different_sizes_get_a_record_with_their_cost_and_no_read() -> None:
    # Given an ended job on GPU groups of different GPU counts (a host's sum cannot be read per GPU)
    record = efficiency.plan(mixed_gpus(4), START + timedelta(days=1), MIXED_PRICES)
    # Then nothing is planned to read, and its record has its cost but no utilization figure
    assert not isinstance(record, EfficiencyPlan) and record.code is EfficiencyCode.MIXED_GPUS
    assert record.cost_usd == round(4 * (37.688 + 2 * 1.408), 2) and record.gpu_utilization_mean_percent is None
    assert record.missing and "no efficiency figures" in record.reason()


def test_a_record_without_figures_states_why_whatever_its_code() -> None:
    for code in EfficiencyCode:
        bare = efficiency.EfficiencyRecord(
            code=code, instance_type=None, instances=1, gpu_hosts=1, spot=False, missing=("why",)
        )
        assert bare.reason().endswith("why")


def test_an_ended_job_on_gpu_groups_of_different_sizes_is_recorded_by_either_path_without_a_read() -> None:
    class Refuses(Reads):
        def read(self, queries: Any, start: datetime, end: datetime, period: int = 60) -> MetricReadResult:
            raise AssertionError("a read whose values cannot be put per GPU")

    class MixedPolicies:
        def current(self, max_age_seconds: float | None = None) -> Policy:
            return Policy.model_validate({"idle": {"prices": MIXED_PRICES}})

    job = mixed_gpus()
    jobs: Any = Jobs(job)
    # The end event's path
    audit = MemoryAuditSink()
    reaction = EfficiencyReaction(jobs, Refuses({}), MixedPolicies(), audit, lambda: START + timedelta(days=1))
    reaction.react(job, Trigger(kind="job-state-change", event_id="e-1"))
    [record] = audit.records
    assert (record.code, record.outcome) == ("efficiency.record.mixed-gpus", Outcome.NO_ACTION)
    assert record.evidence["cost_usd"] == round(4 * (37.688 + 2 * 1.408), 2)
    # The reconciler's path (a lost end event)
    audit = MemoryAuditSink()
    lost = EfficiencyReaction(
        jobs, Refuses({}), MixedPolicies(), audit, lambda: START + timedelta(days=1), MemoryLedger(Calls())
    )
    (decision,) = lost.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1"))
    assert decision.code == "efficiency.record.mixed-gpus" and [r.code for r in audit.records] == [decision.code]


def test_a_job_is_priced_at_its_teams_prices_by_either_path() -> None:
    # Given an org price of $6/h and the vision team's own price of $4/h for ml.g5.12xlarge, and a type
    # only the team prices (the stopper's savings estimate reads the team's table too)
    class TeamPolicies:
        def current(self, max_age_seconds: float | None = None) -> Policy:
            team = {"idle": {"prices": {"ml.g5.12xlarge": 4.0, "ml.g6.12xlarge": 3.0}}}
            return Policy.model_validate({"idle": {"prices": PRICES}, "teams": {"vision": team}})

    values: dict[str, tuple[float, ...] | None] = {"h0_0": (200.0,) * 120, "h0_1": (100.0,) * 120}
    for instance_type, hourly in (("ml.g5.12xlarge", 4.0), ("ml.g6.12xlarge", 3.0)):
        job = ended(2, instance_type=instance_type, Tags={"team": "vision"})
        jobs: Any = Jobs(job)
        # When its record is written by the end event's path and by the reconciler's
        audit = MemoryAuditSink()
        EfficiencyReaction(jobs, Reads(values), TeamPolicies(), audit, lambda: START + timedelta(days=1)).react(
            job, Trigger(kind="job-state-change", event_id="e-1")
        )
        lost_audit = MemoryAuditSink()
        EfficiencyReaction(
            jobs,
            Reads(values),
            TeamPolicies(),
            lost_audit,
            lambda: START + timedelta(days=1),
            MemoryLedger(Calls()),
        ).record_lost_end(job, Trigger(kind="reconciler", event_id="run-1"))
        # Then both cost it at the team's price
        for [record] in (audit.records, lost_audit.records):
            assert record.code == "efficiency.record.measured"
            assert record.evidence["cost_usd"] == 2 * hourly and not record.evidence.get("unpriced_instance_types")


def test_an_event_without_training_times_is_completed_from_describe() -> None:
    event_job = build_job("train-1", TrainingJobStatus="Completed", SecondaryStatus="Completed")
    jobs = Jobs(ended(1))
    audit = react(event_job, Reads({"h0_0": (400.0,) * 60}), jobs)
    assert jobs.reads == 1
    assert [r.code for r in audit.records] == ["efficiency.record.measured"]


def test_metrics_not_arrived_give_a_skipped_record_saying_so() -> None:
    audit = react(ended(1), Reads({}))
    [record] = audit.records
    assert record.code == "efficiency.record.no-metrics" and record.outcome is Outcome.SKIPPED
    assert "gpu_utilization_mean_percent" not in record.evidence
    assert record.evidence["missing"]


class CrashingAudit(MemoryAuditSink):
    """The reconciler died at its first audit write (after its ledger claim, before the release)."""

    def __init__(self) -> None:
        super().__init__()
        self.crashes = 1

    def write(self, record: Any) -> None:
        if self.crashes:
            self.crashes -= 1
            raise RuntimeError("the function died")
        super().write(record)


def test_a_reconciler_run_that_died_before_writing_leaves_the_lost_end_record_to_the_next_run() -> None:
    # Given the reconciler's first run claimed a lost end's record and died before writing it
    ledger, audit = MemoryLedger(Calls()), CrashingAudit()
    now = [START + timedelta(days=1)]
    reaction = EfficiencyReaction(Jobs(None), Reads({}), Policies(), audit, lambda: now[0], ledger)  # type: ignore[arg-type]
    job = ended(1, instance_type="ml.m5.xlarge")
    run = Trigger(kind="reconciler", event_id="run-1")
    with pytest.raises(RuntimeError):
        reaction.record_lost_end(job, run)
    # When its next run (10 minutes later) finds the job again, the claim is its own to take over
    now[0] += timedelta(minutes=10)
    (decision,) = reaction.record_lost_end(job, run)
    assert [r.code for r in audit.records] == [decision.code]
    # And a run within the first one's length (an overlapping run) could not have taken it
    audit2, ledger2 = CrashingAudit(), MemoryLedger(Calls())
    overlapping = EfficiencyReaction(Jobs(None), Reads({}), Policies(), audit2, lambda: now[0], ledger2)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        overlapping.record_lost_end(job, run)
    now[0] += timedelta(seconds=60)
    assert overlapping.record_lost_end(job, run) == [] and audit2.records == []


def test_a_skipped_record_an_end_events_failed_attempt_wrote_is_not_written_again_by_the_reconciler() -> None:
    # Given an end event's attempt that wrote the job's record (skipped: no metrics yet), then failed and
    # released its delivery with the record among its done effects
    ledger = MemoryLedger(Calls())
    job = ended(1)
    key = job_delivery_key(job)
    ledger.claim(key, "m-1", START, 60)
    ledger.release(key, "m-1", START, [audit_effect(job.name, EFFICIENCY_RULE_ID, "none", Outcome.SKIPPED)])
    # When the reconciler finds the job's alarms left behind and reads no metrics either
    audit = MemoryAuditSink()
    reaction = EfficiencyReaction(Jobs(None), Reads({}), Policies(), audit, lambda: START, ledger)  # type: ignore[arg-type]
    # Then it leaves the record to that delivery: no second one
    assert reaction.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1")) == []
    assert audit.records == []


def resume_recorded(job: Any, mode: Mode, outcome: Outcome) -> tuple[Decision, Callable[[], list[Decision]]]:
    """A failed job's auto-resume decision, and a ``then`` that records it through the once-guard (as deployed)."""
    resumed = Decision(
        rule="auto-resume", code="resume.clone.transient", action=Action.CLONE, mode=mode, reason="r"
    )
    audit = OnceAuditSink(MemoryAuditSink())

    def then() -> list[Decision]:
        audit.write(
            AuditRecord.of(
                resumed,
                job=job,
                outcome=outcome,
                at=START,
                trigger="reconcile",
                event_id="run-1",
                team_tag="team",
                owner_tag="owner",
                policy_digest=None,
            )
        )
        return [resumed]

    return resumed, then


def test_what_the_end_event_would_also_have_done_is_released_done_with_the_record() -> None:
    # Given the reconciler writes a lost end's record and then a failed job's auto-resume (the clone made)
    ledger = MemoryLedger(Calls())
    reaction = EfficiencyReaction(Jobs(None), Reads({}), Policies(), MemoryAuditSink(), lambda: START, ledger)  # type: ignore[arg-type]
    job = ended(1, instance_type="ml.m5.xlarge")
    _, then = resume_recorded(job, Mode.ENFORCE, Outcome.DONE)
    decisions = reaction.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1"), then)
    # Then both are returned, and the end event's delivery key is released with both effects done: a late
    # end event skips the resume's record as it skips the efficiency record
    assert [d.rule for d in decisions] == ["efficiency-record", "auto-resume"]
    claim = ledger.claim(job_delivery_key(job), "late-event", START, 0)
    assert {
        audit_effect(job.name, "auto-resume", "clone"),
        audit_effect(job.name, "efficiency-record", "none", Outcome.NO_ACTION),
    } <= set(claim.done)


def test_an_auto_resume_the_reconciler_only_planned_does_not_hide_the_late_end_events_clone() -> None:
    # Given the reconciler's auto-resume of a lost end event in audit mode: recorded audit-only, no clone
    ledger = MemoryLedger(Calls())
    reaction = EfficiencyReaction(Jobs(None), Reads({}), Policies(), MemoryAuditSink(), lambda: START, ledger)  # type: ignore[arg-type]
    job = ended(1, instance_type="ml.m5.xlarge")
    _, then = resume_recorded(job, Mode.AUDIT, Outcome.AUDIT_ONLY)
    reaction.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1"), then)
    # When the late end event claims the delivery (the policy switched to enforce meanwhile)
    claim = ledger.claim(job_delivery_key(job), "late-event", START, 0)
    # Then only the audit-only record is done: the clone the late event makes is recorded
    assert audit_effect(job.name, "auto-resume", "clone", Outcome.AUDIT_ONLY) in claim.done
    assert audit_effect(job.name, "auto-resume", "clone") not in claim.done


def test_the_owner_told_by_the_reconciler_s_auto_resume_is_not_told_again_by_a_late_end_event() -> None:
    # Given the reconciler's auto-resume of a failed job whose end event was lost clones it and tells the
    # owner (through the notifier's once-guard, as deployed)
    ledger = MemoryLedger(Calls())
    reaction = EfficiencyReaction(Jobs(None), Reads({}), Policies(), MemoryAuditSink(), lambda: START, ledger)  # type: ignore[arg-type]
    job = ended(1, instance_type="ml.m5.xlarge")
    told: list[str] = []
    notify = f"notify|resume|{job.name}"

    def resume() -> list[Decision]:
        once(notify, lambda: told.append(job.name))
        return []

    reaction.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1"), resume)
    # Then the notification is among the delivery's done effects: the late end event, which now tells the
    # owner of a clone that already exists, finds it done and does not tell them twice
    claim = ledger.claim(job_delivery_key(job), "late-event", START, 0)
    assert told == [job.name] and notify in claim.done


def test_the_reconcilers_claim_is_held_for_its_functions_timeout() -> None:

    timeout = load_template()["Resources"]["ReconcilerFunction"]["Properties"]["Timeout"]
    assert timeout == RECONCILER_HOLD_SECONDS


def test_a_large_clusters_record_keeps_the_hosts_that_idled_most_and_sums_up_the_rest() -> None:
    def host(n: int, idle: float) -> efficiency.HostEfficiency:
        return efficiency.HostEfficiency(
            host=f"j/algo-{n}", gpus=8, datapoints=60, gpu_mean_percent=90.0 - idle, gpu_median_percent=90.0,
            gpu_under_idle_share=0.0, gpu_memory_mean_percent=50.0, gpu_memory_median_percent=50.0,
            idle_gpu_hours=idle,
        )  # fmt: skip

    hosts = tuple(host(n, 5.0 if n == 90 else 1.0) for n in range(1, 101))
    record = efficiency.EfficiencyRecord(
        code=EfficiencyCode.MEASURED,
        instance_type="ml.p4d.24xlarge",
        instances=100,
        gpu_hosts=100,
        spot=False,
        hosts=hosts,
    )
    shown = record.evidence()
    assert len(shown["hosts"]) == 64 and shown["hosts"][0]["host"] == "j/algo-90"
    assert shown["hosts_omitted"] == {
        "count": 36, "kept": "the 64 with the most idle GPU-hours", "idle_gpu_hours": 36.0,
        "gpu_mean_percent_range": [89.0, 89.0],
    }  # fmt: skip
    small = efficiency.EfficiencyRecord(
        code=EfficiencyCode.MEASURED, instance_type=None, instances=3, gpu_hosts=3, spot=False, hosts=hosts[:3]
    )
    assert [h["host"] for h in small.evidence()["hosts"]] == ["j/algo-1", "j/algo-2", "j/algo-3"]
    assert "hosts_omitted" not in small.evidence()


class TaggedJobs(Jobs):
    """``Jobs`` whose ``ListTags`` answers ``tags`` (None: the read fails)."""

    def __init__(self, job: Any, tags: dict[str, str] | None) -> None:
        super().__init__(job)
        self.tags = tags
        self.listed = 0

    def list_tags(self, arn: str) -> dict[str, str]:
        self.listed += 1
        if self.tags is None:
            raise AdapterError(f"ListTags {arn} failed: Rate exceeded")
        return dict(self.tags)


def test_an_end_event_that_does_not_say_the_tags_is_recorded_under_the_teams_read() -> None:
    # Given an ended vision job whose end event carried an empty Tags map (read as not said: no tags known)
    job = ended(1, Tags={"team": "vision", "owner": "alice"})
    jobs = TaggedJobs(job, {"team": "vision", "owner": "alice"})
    # When its record is written
    audit = react(job.model_copy(update={"tags": None}), Reads({"h0_0": (400.0,) * 60}), jobs)
    # Then its tags are read (ListTags, once): the record is the vision team's and names the owner
    [record] = audit.records
    assert jobs.listed == 1 and (record.code, record.team, record.owner) == (
        "efficiency.record.measured",
        "vision",
        "alice",
    )


def test_an_end_event_with_its_tags_reads_none_and_a_failed_read_records_nothing() -> None:
    job = ended(1, Tags={"team": "vision"})
    # Given an end event that carries the job's tags: nothing is listed
    jobs = TaggedJobs(job, None)
    assert [r.team for r in react(job, Reads({"h0_0": (400.0,) * 60}), jobs).records] == ["vision"]
    assert jobs.listed == 0
    # Given one that does not say them, and ListTags fails: the delivery fails (retried), no record without a team
    with pytest.raises(AdapterError):
        react(job.model_copy(update={"tags": None}), Reads({"h0_0": (400.0,) * 60}), jobs)


class Throttled(Reads):
    """GetMetricData throttled past botocore's retries: every series unread."""

    def read(self, queries: Any, start: datetime, end: datetime, period: int = 60) -> MetricReadResult:
        self.calls.append((len(queries), period))
        return MetricReadResult(
            values={q.id: None for q in queries}, errors=("GetMetricData failed (Throttling)",)
        )


def test_a_late_end_event_whose_read_fails_writes_no_second_record_beside_the_reconcilers_measured_one() -> None:
    # Given the reconciler wrote a lost end's measured record under the end event's delivery key and released it
    job = ended(1)
    measured = audit_effect(job.name, EFFICIENCY_RULE_ID, "none", Outcome.NO_ACTION)
    # When the late end event claims the released key, as a retry does, and its GetMetricData is throttled
    audit = MemoryAuditSink()
    reaction = EfficiencyReaction(Jobs(job), Throttled({}), Policies(), OnceAuditSink(audit), lambda: START)  # type: ignore[arg-type]
    with delivering(job_delivery_key(job), frozenset({measured})):
        reaction.react(job, Trigger(kind="job-state-change", event_id="e-1"))
    # Then it writes no "unread" record beside the measured one
    assert audit.records == []


def test_a_measured_record_an_end_events_failed_attempt_wrote_is_not_followed_by_the_reconcilers_unread_one() -> (
    None
):
    # Given an end event's attempt that measured the job's record, then failed and released its delivery with the
    # record among its done effects
    ledger = MemoryLedger(Calls())
    job = ended(1)
    key = job_delivery_key(job)
    ledger.claim(key, "m-1", START, 60)
    ledger.release(key, "m-1", START, [audit_effect(job.name, EFFICIENCY_RULE_ID, "none", Outcome.NO_ACTION)])
    # When the reconciler finds the job's alarms left behind and its GetMetricData is throttled
    audit = MemoryAuditSink()
    reaction = EfficiencyReaction(Jobs(None), Throttled({}), Policies(), audit, lambda: START, ledger)  # type: ignore[arg-type]
    # Then it writes no second record
    assert reaction.record_lost_end(job, Trigger(kind="reconciler", event_id="run-1")) == []
    assert audit.records == []
