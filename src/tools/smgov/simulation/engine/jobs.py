"""The simulator's side of a training job: its run state, the ``CreateTrainingJob`` request a scenario
job becomes, and how a job the service created (a clone) is recognised."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from smgov.simulation.harness import ACCOUNT, REGION
from smgov.simulation.scenario import JobSpec, MetricSpec, Scenario, Script, gpus_of, on_demand_price, vcpus_of


@dataclass(frozen=True)
class Host:
    """One instance of a job: ``algo-<number>``, its GPUs and vCPUs, its instance group."""

    name: str  # <job>/algo-<number>, the metrics' Host dimension
    number: int
    gpus: int
    vcpus: int
    group: str


@dataclass
class StallEpisode:
    """A stretch during which the training loop made no progress (for recoverable waste)."""

    start: int
    billable_at_start: int
    end: int | None = None
    billable_at_end: int | None = None
    recovered: bool = False  # it ended by itself and training went on


@dataclass
class JobRun:
    """The simulator's side of one training job."""

    name: str
    script: Script
    hosts: list[Host]
    cluster_price_per_hour: float
    instance_count: int
    created: int
    spot: bool
    max_runtime: int  # minutes
    max_wait: int | None
    checkpoint_uri: str | None
    expect_stop: bool = False
    source: str | None = None
    spec_name: str | None = None
    phase: str = "starting"
    phase_since: int = 0
    progress: int = 0
    stalled_at: int | None = None
    first_stall: int | None = None
    stopping_billable: bool = True
    # The SecondaryStatus its Stopping ends with: Stopped (a StopTrainingJob), MaxRuntimeExceeded or
    # MaxWaitTimeExceeded (a time limit SageMaker enforced; ``Lifecycle._limit``)
    stopping_for: str = "Stopped"
    accrued_at: int = 0
    billable: int = 0
    billed_from: int | None = None  # the minute it began to bill (None: never billed)
    # Before it first bills, the minute it last entered an unbilled state (Starting, Pending): its last
    # event before it bills, the one a move before billing is decided from (None: its creation's Starting).
    last_wait_at: int | None = None
    interruptions: int = 0
    stopped_by_service_at: int | None = None
    final_status: str | None = None
    final_secondary: str | None = None
    ended_at: int | None = None
    attempts: int = 0  # RetryStrategy retries used
    retry_attempts: int = 0  # RetryStrategy.MaximumRetryAttempts
    stint_started: int = 0  # the minute the current Training stint began
    stall_ends_at: int | None = None  # a recovering stall ends here
    stall_recovered: bool = False  # its stall ended by itself: it does not stall again
    host_died: bool = False  # its failure_host's process died ahead of the job (failure_host_silent_minutes)
    host_died_at: int | None = None  # the minute it died (on progress: not the failure minus the silence)
    # The training minute its faults count from: 0, or where a clone or a retry resumed (set when it
    # enters Training; None until then).
    fault_origin: int | None = 0
    spot_type: str | None = None  # a Spot job's (first) instance type: the market that interrupts it
    instance_types: tuple[str, ...] = ()  # of its request (a clone may run on another type than its source)
    market_due: int | None = None  # the market's next interruption of this stint (None: none drawn)
    stalls: list[StallEpisode] = field(default_factory=list)
    token: int = 0
    metrics: tuple[MetricSpec, ...] = ()  # training metrics whose regex matches the log
    activity: Any = None  # what its hosts are doing (``telemetry.Activity``; None: nothing yet)
    disk_base: float | None = None  # DiskUtilization before the phase that writes now (None: the script's)
    disk_phase: Any = None  # the script phase writing to the disk now (None: none)
    disk_since: int = 0  # the minute that phase began
    disk_level: float | None = None  # DiskUtilization its hosts publish now
    published: dict[str, bool] = field(default_factory=dict)  # training metric -> being published
    series: list[list[Any]] = field(default_factory=list)  # [start, end, busiest host's percent per GPU]
    host_series: dict[str, list[list[Any]]] = field(default_factory=dict)  # per host: [start, end, per GPU]

    @property
    def cost(self) -> float:
        return self.billable * self.cluster_price_per_hour / 60

    @property
    def ended(self) -> bool:
        return self.final_status is not None

    @property
    def gpu_hosts(self) -> list[Host]:
        return [h for h in self.hosts if h.gpus > 0]


def training_request(spec: JobSpec) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request of a scenario job."""
    resources: dict[str, Any] = {"VolumeSizeInGB": 100}
    if spec.instance_groups is not None:
        resources["InstanceGroups"] = [
            {"InstanceGroupName": g.name, "InstanceType": g.instance_type, "InstanceCount": g.instance_count}
            for g in spec.instance_groups
        ]
    else:
        resources.update({"InstanceType": spec.instance_type, "InstanceCount": spec.instance_count})
    stopping: dict[str, int] = {"MaxRuntimeInSeconds": round(spec.max_runtime_hours * 3600)}
    if spec.spot:
        wait = spec.max_wait_hours or spec.max_runtime_hours + 24
        stopping["MaxWaitTimeInSeconds"] = round(wait * 3600)
    request: dict[str, Any] = {
        "TrainingJobName": spec.name,
        "AlgorithmSpecification": {
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/train:latest",
            "TrainingInputMode": "File",
        },
        "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole",
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://sim-datasets/{spec.name}/"}
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://sim-artifacts/models/"},
        "ResourceConfig": resources,
        "StoppingCondition": stopping,
        "EnableManagedSpotTraining": spec.spot,
        "Tags": [{"Key": k, "Value": v} for k, v in spec.tags.items()],
    }
    if spec.metric_definitions:
        request["AlgorithmSpecification"]["MetricDefinitions"] = [
            {"Name": m.name, "Regex": m.regex} for m in spec.metric_definitions
        ]
    if spec.checkpoint:
        request["CheckpointConfig"] = {"S3Uri": f"s3://sim-checkpoints/{spec.name}/"}
    if spec.retry_attempts is not None:
        request["RetryStrategy"] = {"MaximumRetryAttempts": spec.retry_attempts}
    return request


def job_from_request(
    request: Mapping[str, Any],
    script: Script,
    *,
    scenario: Scenario,
    seed: int,
    now: int,
    price_source: JobSpec | None,
    expect_stop: bool,
) -> JobRun:
    """A job's run state from its ``CreateTrainingJob`` request. SageMaker assigns host names
    (``algo-N``) randomly across instance groups: seeded by the run's seed and the job's name."""
    resources = request["ResourceConfig"]
    if resources.get("InstanceGroups"):
        groups = [
            (g["InstanceType"], int(g["InstanceCount"]), g["InstanceGroupName"])
            for g in resources["InstanceGroups"]
        ]
    else:
        groups = [(resources["InstanceType"], int(resources.get("InstanceCount", 1)), "main")]
    instances = [(t, group) for t, n, group in groups for _ in range(n)]
    order = list(range(len(instances)))
    if len(groups) > 1:
        random.Random(f"{seed}-{request['TrainingJobName']}").shuffle(order)
    name = request["TrainingJobName"]
    hosts = [
        Host(f"{name}/algo-{i + 1}", i + 1, gpus_of(instances[k][0]), vcpus_of(instances[k][0]), instances[k][1])
        for i, k in enumerate(order)
    ]
    spot = bool(request.get("EnableManagedSpotTraining"))
    factor = scenario.spot_price_factor if spot else 1.0
    price = sum(on_demand_price(t, scenario, price_source) * n for t, n, _ in groups) * factor
    stopping = request.get("StoppingCondition", {})
    wait = stopping.get("MaxWaitTimeInSeconds")
    return JobRun(
        name=name,
        script=script,
        hosts=hosts,
        cluster_price_per_hour=price,
        instance_count=len(instances),
        created=now,
        spot=spot,
        max_runtime=max(1, int(stopping.get("MaxRuntimeInSeconds", 86_400)) // 60),
        max_wait=int(wait) // 60 if (spot and wait) else None,
        checkpoint_uri=(request.get("CheckpointConfig") or {}).get("S3Uri"),
        expect_stop=expect_stop,
        retry_attempts=int((request.get("RetryStrategy") or {}).get("MaximumRetryAttempts", 0)),
        spot_type=groups[0][0] if spot else None,
        instance_types=tuple(t for t, _, _ in groups),
        phase_since=now,
        accrued_at=now,
    )


def source_of(request: Mapping[str, Any], jobs: Mapping[str, JobRun]) -> str | None:
    """The job a clone was made from: named in its tags (lineage), else same checkpoint location, else
    the longest job name its name starts with."""
    values = {t.get("Value") for t in request.get("Tags", [])}
    named = [n for n in jobs if n in values]
    if named:
        return max(named, key=lambda n: jobs[n].created)
    uri = (request.get("CheckpointConfig") or {}).get("S3Uri")
    same = [n for n, j in jobs.items() if uri and j.checkpoint_uri == uri]
    if same:
        return max(same, key=lambda n: jobs[n].created)
    prefix = [n for n in jobs if request["TrainingJobName"].startswith(n)]
    return max(prefix, key=len) if prefix else None
