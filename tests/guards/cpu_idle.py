"""A tiny alarm guard that is not the product's: it proves that a guard is one module.

It stops a training job whose first host's CPUs stayed below a threshold for a window. Everything it
needs is declared here on the shared shape (``domain/guards/base.py``); plugged into a composition root
(``Root(..., guards=(*GUARDS, CPU_IDLE))``, the test's stand-in for the registration line in
``domain/guards/registry.py``) it gets its alarms created, judged, acted on, deleted and repaired by the
service's one lifecycle, stopper and reconciler. It has no policy section: its defaults always apply.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from pydantic import Field

from sagemaker_governance.domain.guards.base import (
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Combined,
    Guard,
    GuardConfig,
    GuardVerdict,
    Judgement,
    MetricQuery,
    NoAlarm,
    Notice,
    PlannedAlarm,
    Stale,
    Verdict,
    metric_alarm_request,
    preconditions,
)
from sagemaker_governance.domain.job import TrainingJob

MARK: Final = ".cpu"
RESET_REASON: Final = "cpu guard: reset (stale notification)"


class CpuPolicy(GuardConfig):
    threshold_percent: float = Field(default=5.0, gt=0, le=100)
    window_minutes: int = Field(default=30, ge=1, le=1440)


class CpuRole(StrEnum):
    WATCH = "watch"


class CpuCode(StrEnum):
    STOP = "cpu.stop.idle"
    ALREADY_ENDED = "cpu.skip.already-ended"
    DISABLED = "cpu.skip.disabled"
    NOT_TRAINING = "cpu.skip.not-training"
    STALE = "cpu.skip.stale"
    EXEMPTED = "cpu.skip.exempted"


_CODES: Final = {
    Verdict.ALREADY_ENDED: CpuCode.ALREADY_ENDED,
    Verdict.DISABLED: CpuCode.DISABLED,
    Verdict.NOT_TRAINING: CpuCode.NOT_TRAINING,
    Verdict.STALE: CpuCode.STALE,
}


class CpuIdleGuard(Guard[CpuPolicy]):
    name = "cpu"
    rule_id = "cpu-guard"
    section = None
    config_type = CpuPolicy
    title = "cpu guard"
    what = "cpu alarms"
    rearm_reason = "cpu guard: the job (re)entered Training"

    def plan(self, job: TrainingJob, config: CpuPolicy, naming: AlarmNaming) -> AlarmPlan | NoAlarm:
        name = naming.alarm_name(job.name, MARK)
        request = metric_alarm_request(
            name,
            description=naming.describe(f"cpu guard for {job.name}"),  # how the reconciler knows it
            actions=naming.actions,
            actions_enabled=True,
            evaluation_periods=config.window_minutes,
            datapoints_to_alarm=config.window_minutes,
            threshold=config.threshold_percent,
            comparison="LessThanThreshold",
            treat_missing_data="notBreaching",
            tags=naming.tags(job.name),
            queries=[
                MetricQuery(id="m1", metric_name="CPUUtilization", dimensions=(("Host", f"{job.name}/algo-1"),))
            ],
            stat="Average",
            period=60,
            combined=Combined(id="cpu", function="MAX", label="CPUUtilization"),
            single_metric=True,
        )
        alarm = PlannedAlarm(role=CpuRole.WATCH, kind=AlarmKind.METRIC, request=request)
        return AlarmPlan(job_name=job.name, what=self.what, alarms=(alarm,), evidence={"alarms": [name]})

    def watching(self, job: TrainingJob, config: CpuPolicy, plan: AlarmPlan) -> str:
        return f"watching the CPUs of {job.name}/algo-1"

    def owned_alarms(self, job_name: str, hosts: int, naming: AlarmNaming) -> tuple[str, ...]:
        return (naming.alarm_name(job_name, MARK),)

    def role_of(self, alarm_name: str, job_name: str, naming: AlarmNaming) -> str | None:
        return CpuRole.WATCH if alarm_name == naming.alarm_name(job_name, MARK) else None

    def judge(self, role: str, notice: Notice, config: CpuPolicy) -> GuardVerdict:
        judgement = Judgement(self.rule_id, notice.mode, {**notice.evidence, **notice.savings})
        name = notice.naming.alarm_name(notice.job.name, MARK)
        early = preconditions(
            judgement,
            notice,
            enabled=config.enabled,
            title=self.title,
            codes=_CODES,
            not_training="idle CPUs are expected",
            stale=Stale((name,), RESET_REASON, "idle"),
        )
        if early is not None:
            return early
        reason = (
            f"the CPUs of algo-1 stayed below {config.threshold_percent:g}% for {config.window_minutes} minutes"
        )
        return judgement.stop(CpuCode.STOP, CpuCode.EXEMPTED, reason, remedy=None, exempted_by=notice.exempted_by)

    def symptom(self, config: Any) -> tuple[str, str]:
        return "its CPUs were idle", "looks CPU-idle"


CPU_IDLE: Final = CpuIdleGuard()
