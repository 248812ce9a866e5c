"""JobEventsFunction: compliance, auto-resume, Spot fallback and the alarm guards' lifecycle."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
from sagemaker_governance.adapters.checkpoints import CheckpointStore
from sagemaker_governance.adapters.cloudwatch import CloudWatchAlarmLifecycle
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.adapters.queue import EventSourceMappingPoller, QueueVisibility
from sagemaker_governance.adapters.sagemaker import SageMakerJobMarks, SageMakerJobs
from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.adapters.spot_health import SpotHealthLedger
from sagemaker_governance.adapters.training_logs import TrainingLogTails
from sagemaker_governance.composition.governance import (
    Ports,
    alarm_guards,
    clone_reactions,
    compliance_service,
)
from sagemaker_governance.composition.root import LazyClient, Root, freeze_imports
from sagemaker_governance.domain.clone import RequestShape
from sagemaker_governance.service.efficiency import EfficiencyReaction
from sagemaker_governance.service.job_events import JobEventsService, Reaction
from sagemaker_governance.service.ports import CheckpointsPort, FailureLogsPort, SpotHealthPort
from sagemaker_governance.service.resume import LauncherPort

if TYPE_CHECKING:  # annotations only: this function never runs the stall judge (cold start)
    from sagemaker_governance.service.stall_judge import MetricReadPort

# The adapters this function uses: the template must grant it exactly their IAM actions (a test checks).
ADAPTERS: tuple[type, ...] = (
    SageMakerJobs,
    SnsNotifier,
    PolicyStore,
    SageMakerLauncher,
    CloudWatchAlarmLifecycle,
    Ec2InstanceCatalog,
    SageMakerJobMarks,
    DeliveryLedger,
    EventSourceMappingPoller,  # Lambda polls the function's queue with its role
    QueueVisibility,  # a record going back to the queue, visible again sooner: only when one fails
    TrainingLogTails,
    CheckpointStore,  # granted only when CheckpointBucketPattern is set (the template's condition)
    SpotHealthLedger,
    AuditForwarder,  # granted only when CentralAuditBusArn is set (the template's condition)
    CloudWatchMetricData,  # the efficiency record of a job that ended; a late Training put: was it armed
)


def assemble(
    ports: Ports,
    *,
    launcher: LauncherPort,
    shape: Callable[[], RequestShape],
    role_patterns: tuple[str, ...],
    logs: FailureLogsPort | None = None,
    checkpoints: CheckpointsPort | None = None,
    spot_health: SpotHealthPort | None = None,
    metric_data: MetricReadPort | None = None,
) -> JobEventsService:
    """The reactions to a training job's state change, in order, on ``ports``; auto-resume and Spot
    fallback launch clones through ``launcher`` (CreateTrainingJob requests of the shape ``shape`` gives
    when a clone is planned, roles matching ``role_patterns``); auto-resume reads failed jobs' ``logs`` and
    ``checkpoints`` (None: not read); the efficiency record of an ended job reads ``metric_data`` (None: no
    record)."""
    clones = clone_reactions(
        ports,
        launcher=launcher,
        shape=shape,
        role_patterns=role_patterns,
        logs=logs,
        checkpoints=checkpoints,
        spot_health=spot_health,
    )
    reactions: list[Reaction] = [compliance_service(ports), *clones, *alarm_guards(ports)]
    if metric_data is not None:
        reactions.append(EfficiencyReaction(ports.jobs, metric_data, ports.policies, ports.audit, ports.clock))
    return JobEventsService(
        reactions=reactions, policies=ports.policies, audit=ports.audit, clock=ports.clock, jobs=ports.jobs
    )


def evidence_readers(root: Root) -> dict[str, Any]:
    """Auto-resume's and Spot fallback's evidence readers (clients are created on first use: a healthy job
    pays nothing)."""
    pattern = root.settings.checkpoint_bucket_pattern
    table = root.settings.spot_health_table
    return {
        "logs": TrainingLogTails(LazyClient(root, "logs"), metrics=root.metrics),
        "checkpoints": CheckpointStore(LazyClient(root, "s3"), pattern, root.metrics) if pattern else None,
        "spot_health": SpotHealthLedger(LazyClient(root, "dynamodb"), table) if table else None,
        "metric_data": CloudWatchMetricData(LazyClient(root, "cloudwatch"), root.metrics),
    }


def build(root: Root) -> JobEventsService:
    root.idempotency  # noqa: B018  (the delivery ledger its handler claims deliveries in: built with the service)
    sagemaker = root.client("sagemaker")
    return assemble(
        Ports.of(root),
        launcher=SageMakerLauncher(sagemaker),
        # read from botocore's model at the first clone planned: walking it costs a cold start milliseconds
        shape=partial(create_training_job_shape, sagemaker.meta.service_model),
        role_patterns=(root.settings.clone_role_pattern,),
        **evidence_readers(root),
    )


def job_events_service(root: Root) -> JobEventsService:
    """The function's service (built on its first invocation, then kept by the root)."""
    return root.service(build)


freeze_imports()
