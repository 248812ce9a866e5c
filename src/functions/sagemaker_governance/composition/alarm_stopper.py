"""IdleStopperFunction: act on the alarm guards' notifications (verify, re-read, judge, act)."""

from __future__ import annotations

from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
from sagemaker_governance.adapters.checkpoints import CheckpointStore
from sagemaker_governance.adapters.cloudwatch import (
    CloudWatchAlarmArming,
    CloudWatchAlarmOwnership,
    CloudWatchAlarmWindows,
)
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.adapters.queue import EventSourceMappingPoller, QueueVisibility
from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.adapters.training_logs import TrainingLogs
from sagemaker_governance.composition.root import LazyClient, Root, freeze_imports
from sagemaker_governance.service.guard_stopper import GuardStopper
from sagemaker_governance.service.stall_judge import StallJudge

ADAPTERS: tuple[type, ...] = (
    SageMakerJobs,
    SnsNotifier,
    PolicyStore,
    CloudWatchAlarmOwnership,
    CloudWatchAlarmArming,
    CloudWatchAlarmWindows,  # the stall judge widens a vetoed alarm's window
    DeliveryLedger,
    EventSourceMappingPoller,  # Lambda polls the function's queue with its role
    QueueVisibility,  # a record going back to the queue, visible again sooner: only when one fails
    CloudWatchMetricData,  # the stall judge's evidence: only when an alarm fired
    TrainingLogs,
    AuditForwarder,  # granted only when CentralAuditBusArn is set (the template's condition)
    CheckpointStore,  # the stall judge, before a stop; granted only when CheckpointBucketPattern is set
    Ec2InstanceCatalog,  # the plan of a job on a type our table lacks, as its alarms were created
)


def build(root: Root) -> GuardStopper:
    root.idempotency  # noqa: B018  (the delivery ledger its handler claims deliveries in: built with the service)
    cloudwatch = root.client("cloudwatch")
    pattern = root.settings.checkpoint_bucket_pattern
    alarms = CloudWatchAlarmOwnership(cloudwatch, root.settings.alarm_arn)
    metric_data = CloudWatchMetricData(cloudwatch, root.metrics)
    return GuardStopper(
        guards=root.guards,
        jobs=SageMakerJobs(root.client("sagemaker")),
        alarms=alarms,
        arming=CloudWatchAlarmArming(cloudwatch),
        notifier=root.notifier(),
        policies=root.policy_store,
        audit=root.audit,
        metrics=root.metrics,
        clock=root.now,
        naming=root.alarm_naming,
        account_id=root.settings.account_id,
        review=StallJudge(
            metric_data,
            TrainingLogs(root.client("logs"), root.metrics),
            # listed only before a stop: the client is built then, not at cold start
            CheckpointStore(LazyClient(root, "s3"), pattern, root.metrics) if pattern else None,
        ),
        windows=CloudWatchAlarmWindows(cloudwatch),
        transitions=alarms,  # a notification superseded by a newer state change of its alarm resets nothing
        # a type our table lacks: EC2's facts, as the job's alarms were planned (client built on first use)
        instances=Ec2InstanceCatalog(lambda: root.client("ec2"), root.metrics),
        # a heterogeneous composite's stop or notice: its hosts' GPU data is read first (only when one fired)
        gpu_data=metric_data,
        # an efficiency notice told once per stretch, and a stop only after its owner was told (the ledger's table)
        notices=root.guard_notices,
    )


def stopper_service(root: Root) -> GuardStopper:
    """The function's service (built on its first invocation, then kept by the root)."""
    return root.service(build)


freeze_imports()
