"""ReconcilerFunction: repair orphan, missing and drifted alarms and never-evaluated jobs, on a schedule."""

from __future__ import annotations

from functools import partial

from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
from sagemaker_governance.adapters.checkpoints import CheckpointStore
from sagemaker_governance.adapters.cloudwatch import (
    CloudWatchAlarmEnabling,
    CloudWatchAlarmInventory,
    CloudWatchAlarmLifecycle,
    CloudWatchAlarmWindows,
)
from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.adapters.idempotency import DeliveryLedger
from sagemaker_governance.adapters.metric_data import CloudWatchMetricData
from sagemaker_governance.adapters.policy_store import PolicyStore
from sagemaker_governance.adapters.sagemaker import SageMakerJobInventory, SageMakerJobMarks, SageMakerJobs
from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.adapters.sns import SnsNotifier
from sagemaker_governance.adapters.training_logs import TrainingLogTails
from sagemaker_governance.composition.governance import (
    Ports,
    alarm_guards,
    clone_reactions,
    compliance_service,
)
from sagemaker_governance.composition.root import LazyClient, Root, freeze_imports
from sagemaker_governance.service.efficiency import EfficiencyReaction
from sagemaker_governance.service.reconciler import ReconcilerService

ADAPTERS: tuple[type, ...] = (
    SageMakerJobs,
    SnsNotifier,
    PolicyStore,
    CloudWatchAlarmLifecycle,
    Ec2InstanceCatalog,
    SageMakerJobInventory,
    CloudWatchAlarmInventory,
    CloudWatchAlarmEnabling,  # a guard alarm the stopper muted: on again (its stretch over, or it can act)
    CloudWatchAlarmWindows,  # a guard alarm planned under an earlier policy: put again as planned now
    SageMakerJobMarks,
    AuditForwarder,  # granted only when CentralAuditBusArn is set (the template's condition)
    CloudWatchMetricData,  # the efficiency record of a lost end event; a repair: was the guard armed
    DeliveryLedger,  # ... written once: the same ledger key as the job-events function's
    # deferred resumes (auto-resume's backoff): the same clone and evidence reads as the job-events function
    SageMakerLauncher,
    TrainingLogTails,
    CheckpointStore,  # granted only when CheckpointBucketPattern is set (the template's condition)
)


def build(root: Root) -> ReconcilerService:
    ports = Ports.of(root)
    sagemaker = root.client("sagemaker")
    pattern = root.settings.checkpoint_bucket_pattern
    resume, _ = clone_reactions(  # evidence clients are built at the first due resume, not at cold start
        ports,
        launcher=SageMakerLauncher(sagemaker),
        shape=partial(create_training_job_shape, sagemaker.meta.service_model),  # read at the first due resume
        role_patterns=(root.settings.clone_role_pattern,),
        logs=TrainingLogTails(LazyClient(root, "logs"), metrics=root.metrics),
        checkpoints=CheckpointStore(LazyClient(root, "s3"), pattern, root.metrics) if pattern else None,
    )
    return ReconcilerService(
        jobs=SageMakerJobs(root.client("sagemaker")),
        inventory=SageMakerJobInventory(root.client("sagemaker")),
        alarm_inventory=CloudWatchAlarmInventory(root.client("cloudwatch")),
        alarms=CloudWatchAlarmLifecycle(root.client("cloudwatch")),
        guards=alarm_guards(ports),
        compliance=compliance_service(ports),
        policies=root.policy_store,
        audit=root.audit,
        metrics=root.metrics,
        clock=root.now,
        interval_minutes=root.settings.reconcile_interval_minutes,
        lost_ends=EfficiencyReaction(
            ports.jobs,
            CloudWatchMetricData(root.client("cloudwatch"), root.metrics),
            ports.policies,
            ports.audit,
            ports.clock,
            ledger=ports.ledger,
        ),
        failed=SageMakerJobInventory(sagemaker),
        resume=resume,
        arming=CloudWatchAlarmEnabling(root.client("cloudwatch")),
        notices=ports.notices,
        marks=ports.marks,
        updates=CloudWatchAlarmWindows(root.client("cloudwatch")),
    )


def reconciler_service(root: Root) -> ReconcilerService:
    """The function's service (built on its first invocation, then kept by the root)."""
    return root.service(build)


freeze_imports()
