"""`smgov doctor --alarm-canary`: does CloudWatch in this account accept every alarm the guards create?

The offline tests and the simulator check our alarms against our reading of CloudWatch. This check asks
CloudWatch itself. The alarm guards' planners (``domain/guards``, the same code the job-events function
runs) plan the alarms of a few synthetic training jobs under the stack's effective policy (its default and
every team override that changes a guard's configuration):
- one GPU host;
- four hosts, whose idle alarm carries the multi-host stuck-host expression (``MIN``/``MAX``/``AVG`` over
  the hosts inside ``IF``, checked offline only until now);
- twelve hosts (child alarms under a composite alarm);
- twelve hosts of which two have no GPU (the composite's rule for hosts that publish no data).

Each job defines a training metric, so the progress guard plans its alarms too. Every request is sent as
the service would send it, with two changes: ``ActionsEnabled`` is false, so no state change notifies
anyone, and the names use their own prefix (``CANARY_PREFIX``), so neither the reconciler nor the drift
check takes them for the stack's. Every alarm created is deleted again, whatever happened.

A refused request (``ValidationError``, ``InvalidParameterCombination``, a limit) fails. The service's own
``PutMetricAlarm`` would be refused the same way for such jobs: they would get no alarm, and their
``Training`` event would land in the dead-letter queue. The caller's credentials are used, not the
functions' roles: the ``iam`` check covers the roles. Cost: alarms that exist for seconds (CloudWatch bills
alarms by the hour, prorated) and about 30 requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from smgov.doctor.deployment import Deployment, error_text
from smgov.doctor.findings import Finding, Status

CHECK: Final = "alarm-canary"
CANARY_PREFIX: Final = "smgov-canary-alarm-"
IAM_ACTIONS: Final = frozenset(
    {
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:PutCompositeAlarm",
        "cloudwatch:TagResource",  # the guards tag their alarms on creation
        "cloudwatch:DeleteAlarms",
    }
)
DENIED: Final = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
METRIC: Final = {"Name": "train:loss", "Regex": "loss=([0-9.]+)"}


@dataclass(frozen=True)
class Shape:
    """A synthetic training job: its label and the instance groups of its ``ResourceConfig``."""

    label: str
    groups: tuple[tuple[str, int], ...]  # (instance type, count)

    def job(self, name: str, region: str, account: str) -> Any:
        from sagemaker_governance.domain.job import TrainingJob

        if len(self.groups) == 1:
            kind, count = self.groups[0]
            resources: dict[str, Any] = {"InstanceType": kind, "InstanceCount": count, "VolumeSizeInGB": 50}
        else:
            resources = {
                "InstanceGroups": [
                    {"InstanceGroupName": f"group-{n}", "InstanceType": kind, "InstanceCount": count}
                    for n, (kind, count) in enumerate(self.groups, start=1)
                ],
                "VolumeSizeInGB": 50,
            }
        return TrainingJob.model_validate(
            {
                "TrainingJobName": name,
                "TrainingJobArn": f"arn:aws:sagemaker:{region}:{account}:training-job/{name}",
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Training",
                "AlgorithmSpecification": {
                    "TrainingImage": "canary",
                    "TrainingInputMode": "File",
                    "MetricDefinitions": [METRIC],
                },
                "ResourceConfig": resources,
                "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
                "Tags": {},
            }
        )


SHAPES: Final = (
    Shape("1 GPU host", (("ml.g5.xlarge", 1),)),
    Shape("4 GPU hosts", (("ml.p4d.24xlarge", 4),)),
    Shape("12 GPU hosts", (("ml.p4d.24xlarge", 12),)),
    Shape("12 hosts, 2 without GPUs", (("ml.p4d.24xlarge", 10), ("ml.c5.xlarge", 2))),
)


def canary_job_name(now: datetime, index: int) -> str:
    return f"c{now:%Y%m%d-%H%M%S}-{index}"


def run_alarm_canary(d: Deployment, policy: Any, *, now: datetime) -> list[Finding]:
    """Create and delete every alarm the guards plan for ``SHAPES`` under ``policy``; one finding per
    shape, guard and configuration, and one per clean-up that failed."""
    from sagemaker_governance.domain.guards.base import AlarmNaming, AlarmPlan
    from sagemaker_governance.domain.guards.registry import GUARDS

    naming = AlarmNaming(
        prefix=CANARY_PREFIX,
        managed_by=f"{d.stack_name} (smgov doctor --alarm-canary)",
        alarm_topic_arn=d.physical("AlarmTopic"),
    )
    cloudwatch = d.client("cloudwatch")
    findings: list[Finding] = []
    for index, shape in enumerate(SHAPES, start=1):
        job = shape.job(canary_job_name(now, index), d.region, d.account)
        for guard in GUARDS:
            for scope, config in _configs(guard, policy):
                plan = guard.plan(job, config, naming)
                if isinstance(plan, AlarmPlan):
                    findings += _try(cloudwatch, f"{shape.label}: {guard.rule_id}{scope}", plan)
    if not findings:
        findings.append(Finding(CHECK, "alarms", Status.UNKNOWN, "no guard is enabled: no alarm to try"))
    return findings


def _configs(guard: Any, policy: Any) -> list[tuple[str, Any]]:
    """The guard's enabled configurations: the stack's default, then each team override that differs from
    every one before it (a team may turn a guard on, or change its thresholds and window)."""
    found: list[tuple[str, Any]] = []
    for team in (None, *sorted(policy.teams)):
        config = guard.config(policy.for_team(team))
        if config.enabled and all(config != seen for _, seen in found):
            found.append(("" if team is None else f" (team {team})", config))
    return found


def _try(cloudwatch: Any, subject: str, plan: Any) -> list[Finding]:
    """Send the plan's requests in order (children before their composite), with the actions off; then
    delete what was created."""
    created: list[str] = []
    try:
        result = _send(cloudwatch, subject, plan, created)
    finally:  # even when interrupted (the exception goes on after it): nothing created stays behind
        cleanup = _delete(cloudwatch, subject, plan, created)
    return [result, *cleanup]


def _send(cloudwatch: Any, subject: str, plan: Any, created: list[str]) -> Finding:
    """The finding of sending the plan; ``created`` collects the names CloudWatch accepted."""
    from sagemaker_governance.domain.guards.base import AlarmKind

    calls = {"PutMetricAlarm": 0, "PutCompositeAlarm": 0}
    call, name = "", ""
    try:
        for alarm in plan.alarms:
            call, name = (
                ("PutCompositeAlarm" if alarm.kind is AlarmKind.COMPOSITE else "PutMetricAlarm"),
                alarm.name,
            )
            request = {**alarm.request, "ActionsEnabled": False}
            if alarm.kind is AlarmKind.COMPOSITE:
                cloudwatch.put_composite_alarm(**request)
            else:
                cloudwatch.put_metric_alarm(**request)
            created.append(name)
            calls[call] += 1
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in DENIED:
            result = Finding(CHECK, subject, Status.UNKNOWN, f"not tried: {call} {error_text(exc)}")
        else:
            result = Finding(
                CHECK,
                subject,
                Status.FAIL,
                f"CloudWatch refused {call} {name}: {error_text(exc)}. The service's request is the same "
                f"(actions aside): such jobs get no {plan.what} and their Training event goes to the "
                "dead-letter queue",
            )
    except BotoCoreError as exc:
        result = Finding(CHECK, subject, Status.UNKNOWN, f"not tried: {exc}")
    else:
        shown = ", ".join(f"{n} {call}" for call, n in calls.items() if n)
        result = Finding(CHECK, subject, Status.OK, f"CloudWatch accepted the {plan.what} ({shown})")
    return result


def _delete(cloudwatch: Any, subject: str, plan: Any, created: list[str]) -> list[Finding]:
    """Delete the created alarms as the service deletes a job's (a composite before its children, at most
    one composite a request); a missing alarm is success."""
    if not created:
        return []
    from sagemaker_governance.adapters.cloudwatch import CloudWatchAlarmLifecycle
    from sagemaker_governance.domain.alarm_deletion import deletion_requests
    from sagemaker_governance.domain.errors import AdapterError
    from sagemaker_governance.domain.guards.base import deletion_units

    alarms = CloudWatchAlarmLifecycle(cloudwatch)
    try:
        for request in deletion_requests(deletion_units([name for name in plan.names if name in created])):
            alarms.delete(request)
    except (AdapterError, ClientError, BotoCoreError) as exc:
        return [
            Finding(
                CHECK,
                f"{subject} clean-up",
                Status.WARN,
                f"could not delete {', '.join(created)} ({exc}): delete them by hand (their actions are off)",
            )
        ]
    return []
