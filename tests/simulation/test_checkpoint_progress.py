"""Simulated jobs write their checkpoints where S3 lists them (virtual times), and auto-resume reads the
listing: a failed attempt that wrote a checkpoint is resumed, one that wrote none is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from smgov.simulation.engine.simulation import Simulation
from smgov.simulation.scenario import Scenario, builtin_scenario

TAGS = {"team": "t", "cost-center": "c", "owner": "o"}
FAULT = "AlgorithmError: ExecuteUserScriptError: RuntimeError: CUDA error: uncorrectable ECC error encountered"


def scenario(*jobs: dict[str, Any], pattern: str = "sim-checkpoints") -> Scenario:
    parameters = {"GovernanceMode": "enforce", "CheckpointBucketPattern": pattern, "ResumeMinTrainingHours": "1"}
    return Scenario.model_validate({"name": "test", "parameters": parameters, "jobs": jobs})


def job(name: str, **script: Any) -> dict[str, Any]:
    return {
        "name": name,
        "instance_type": "ml.g5.12xlarge",
        "instance_count": 1,
        "price_per_hour": 10,
        "tags": TAGS,
        "script": {"train_hours": 6, "failure_reason": FAULT, **script},
    }


def resume_codes(simulation: Simulation, name: str) -> list[str]:
    audit = simulation.account.audit
    assert audit is not None
    return [r.code for r in audit.records if r.rule == "auto-resume" and r.job_name == name]


def test_checkpoints_are_written_at_their_cadence_with_virtual_times() -> None:
    # Given a job that trains 2 hours, checkpointing every 30 minutes (not governed)
    simulation = Simulation(scenario(job("ckpt", train_hours=2)), governed=False)
    run = simulation.run().jobs["ckpt"]
    # Then 4 objects exist, written 30 training minutes apart (Starting 4 + Downloading 3 before training)
    objects = simulation.checkpoint_objects.objects["sim-checkpoints"]
    assert sorted(objects) == [f"ckpt/step-{m:07d}.pt" for m in (30, 60, 90, 120)]
    start = simulation.clock.at(7)
    assert [objects[k] - start for k in sorted(objects)] == [timedelta(minutes=m) for m in (30, 60, 90, 120)]
    assert run.final_status == "Completed"


def test_a_save_phase_writes_its_files_while_it_lasts() -> None:
    # Given a job whose 20-minute save (training minutes 30-50) writes a shard every 4 minutes
    save = {"name": "save", "gpu_percent": 0, "duration_minutes": 20, "start_minute": 30}
    simulation = Simulation(
        scenario(job("saver", train_hours=2, phases=[{**save, "checkpoint_files_every_minutes": 4}])),
        governed=False,
    )
    simulation.run()
    simulation.checkpoint_objects.complete()
    objects = simulation.checkpoint_objects.objects["sim-checkpoints"]
    # Then the shards land every 4 minutes of the phase (it begins at minute 37: Starting 4 + Downloading 3),
    # in the save's own folder, stamped with their virtual times, and none after it ends
    shards = sorted(k for k in objects if "/save-" in k)
    assert shards == [f"saver/save-0000037/{m:07d}.distcp" for m in (41, 45, 49, 53, 57)]
    assert [objects[k] for k in shards] == [simulation.clock.at(m) for m in (41, 45, 49, 53, 57)]


def test_a_failed_attempt_with_a_new_checkpoint_is_resumed_and_one_without_is_not() -> None:
    # Given two jobs failing with a GPU fault after 2.5 h: one checkpoints every 30 min, one every 4 h
    simulation = Simulation(
        scenario(
            job("writes", fail_after_hours=2.5),
            job("writes-none", fail_after_hours=2.5, checkpoint_every_minutes=240),
        )
    )
    simulation.run()
    # Then the first is resumed from its checkpoint, the second is not (a clone would redo the work)
    assert resume_codes(simulation, "writes")[0] == "resume.clone.transient"
    assert resume_codes(simulation, "writes-none") == ["resume.skip.no-checkpoint-progress"]
    assert simulation.checkpoint_objects.listings >= 2


def test_without_a_checkpoint_bucket_pattern_nothing_is_listed() -> None:
    simulation = Simulation(
        scenario(job("writes-none", fail_after_hours=2.5, checkpoint_every_minutes=240), pattern="")
    )
    simulation.run()
    assert resume_codes(simulation, "writes-none")[0] == "resume.clone.transient"
    assert simulation.checkpoint_objects.listings == 0


# ---- the failure-classes scenario: the targets ------------------------------------------------

EXPECTED = {  # job -> (class, resumed)
    "gpu-ecc-fault": ("hardware", True),
    "gpu-fell-off-the-bus": ("hardware", True),
    "efa-transport-error": ("interconnect", True),
    "code-bug-peer-exit": ("user-code", False),
    "code-bug-late-traceback": ("user-code", False),
    "cuda-out-of-memory": ("user-code", False),
    "shape-mismatch": ("user-code", False),
    "nccl-misuse": ("user-code", False),
    "unexplained-crash": ("unknown", False),
    "failed-before-any-checkpoint": ("hardware", False),
}


def test_failure_classes_every_fault_resumed_and_completed_no_code_bug_resumed() -> None:
    # Given the built-in failure-classes scenario (one job per class)
    simulation = Simulation(builtin_scenario("failure-classes"))
    result = simulation.run()
    audit = simulation.account.audit
    assert audit is not None
    first = {}
    deferred = []
    for record in audit.records:
        if record.rule == "auto-resume" and record.code == "resume.defer.logs-pending":
            deferred.append(record.job_name)
        elif record.rule == "auto-resume" and record.job_name in EXPECTED and record.job_name not in first:
            first[record.job_name] = record
    # Then the failures whose logs leave the cause open waited for their last lines, the reconciler deciding them
    # once due: the crash nothing explains, and the EFA errors on algo-1 of jobs whose other hosts' logs say
    # nothing of their end (a code bug there would explain it): three hosts silent for good, and one whose
    # KeyError reaches CloudWatch Logs 3 minutes after the Failed event, which the decision once due finds
    assert sorted(deferred) == ["code-bug-late-traceback", "efa-transport-error", "unexplained-crash"]
    # and each failure is classified as expected: every hardware/interconnect fault with progress is
    # resumed and its work completes (100%); no code bug or unknown failure is resumed (0%)
    assert set(first) == set(EXPECTED)
    for name, (failure_class, resumed) in EXPECTED.items():
        record = first[name]
        assert record.evidence["diagnosis"]["class"] == failure_class, name
        assert (record.action == "clone") == resumed, (name, record.code)
    assert first["failed-before-any-checkpoint"].code == "resume.skip.no-checkpoint-progress"
    clones = {r["TrainingJobName"]: r for r in simulation.fake.created}
    for name, (_, resumed) in EXPECTED.items():
        clone = f"{name}-r1"
        assert (clone in clones) == resumed, name
        if resumed:
            assert result.jobs[clone].final_status == "Completed", name


def test_a_gpu_fault_that_recurs_on_the_same_host_is_charged_double_and_resumed_once() -> None:
    # Given the failure-classes scenario's lemon: an ECC error on algo-1 in the job and again in its clone
    simulation = Simulation(builtin_scenario("failure-classes"))
    result = simulation.run()
    audit = simulation.account.audit
    assert audit is not None
    first = resume_codes(simulation, "ecc-fault-recurs")
    clone = [r for r in audit.records if r.rule == "auto-resume" and r.job_name == "ecc-fault-recurs-r1"]
    # Then the job is resumed once, the host named by its failing log stream
    assert first[0] == "resume.clone.transient"
    # and the clone's identical fault (class and host position) spends the rest of the budget of 2
    (record,) = clone
    assert record.code == "resume.skip.budget-spent"
    assert record.evidence["diagnosis"]["host"] == "algo-1"
    assert record.evidence["repeated_fault"] == "hardware@algo-1"
    assert record.evidence["repeat_faults"] == 1
    assert "ecc-fault-recurs-r2" not in result.jobs


def test_a_second_attempt_waits_its_backoff_and_the_reconciler_resumes_it() -> None:
    # Given the failures scenario's fault that recurs in every clone (default backoff: 0, 15, 60 minutes)
    simulation = Simulation(builtin_scenario("failures"))
    result = simulation.run()
    audit = simulation.account.audit
    assert audit is not None
    first = result.jobs["fault-repeats-in-clones-r1"]
    second = result.jobs["fault-repeats-in-clones-r2"]
    records = [r for r in audit.records if r.rule == "auto-resume" and r.job_name == first.name]
    # Then the first clone's failure is deferred by its event (nothing cloned at once) ...
    assert (records[0].code, records[0].outcome) == ("resume.defer.backoff", "deferred")
    assert records[0].trigger == "job-state-change"
    # ... and the reconciler clones it once the 15 minutes have passed, within one of its runs (10 min)
    assert (records[-1].code, records[-1].trigger) == ("resume.clone.transient", "reconciler")
    assert first.ended_at is not None
    assert 15 <= second.created - first.ended_at <= 15 + 10
    # and the source's own first clone did not wait
    source = result.jobs["fault-repeats-in-clones"]
    assert source.ended_at is not None and first.created - source.ended_at <= 1


def test_the_double_lists_keys_and_folders_as_s3_does() -> None:
    # Given the same keys in moto's S3 (stamped with the wall clock) and in the simulator's double (which
    # answers the listing on the virtual clock), when both are listed page by page, with and without a
    # delimiter, then they answer the same keys, common prefixes and pages (S3's binary order; a page
    # counts keys and prefixes together)
    import boto3
    from moto import mock_aws

    from smgov.simulation.fake_s3 import CheckpointObjects

    keys = [
        "llm/checkpoint-100/0.distcp",
        "llm/checkpoint-100/1.distcp",
        "llm/checkpoint-1500/0.distcp",
        "llm/checkpoint-900/0.distcp",
        "llm/latest",
        "llm/z/deep/er.pt",
        "other/x.pt",
    ]

    def pages(client: Any, **params: Any) -> list[tuple[list[str], list[str]]]:
        out = []
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket="sim-checkpoints", Prefix="llm/", PaginationConfig={"PageSize": 2}, **params
        ):
            out.append(
                (
                    [c["Key"] for c in page.get("Contents", [])],
                    [p["Prefix"] for p in page.get("CommonPrefixes", [])],
                )
            )
        return out

    with mock_aws():
        real = boto3.client("s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        real.create_bucket(Bucket="sim-checkpoints")
        for key in keys:
            real.put_object(Bucket="sim-checkpoints", Key=key, Body=b"x")
        fake = CheckpointObjects(lambda minute: datetime(2026, 11, 21, tzinfo=UTC))
        fake.objects["sim-checkpoints"] = dict.fromkeys(keys, datetime(2026, 11, 21, tzinfo=UTC))
        double = fake.attach(
            boto3.client("s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
        )
        for params in ({}, {"Delimiter": "/"}):
            assert pages(double, **params) == pages(real, **params), params
        assert fake.listings == 6  # the double answered every page: 3 with the delimiter and 3 without
