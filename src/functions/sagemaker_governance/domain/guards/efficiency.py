"""The minimum-utilization guard: a nudge first, a stop only after unheeded nudges (issue 20 item 3).

**Separate from the idle guard.** The idle guard stops a job whose GPUs do *nothing* (1 % per GPU by
default, calibrated on real traces): a stalled job. This guard is about jobs that run but *underuse*
what they pay for (say under 50 % per GPU for an hour): a data loader that starves the GPUs, a batch
too small, an instance too big. Raising the idle threshold to police that would stop healthy jobs; this
guard tells the owner instead, with the evidence and a suggestion, and stops only if the team's policy
says so, after ``stop_after_notices`` notices went unheeded. Off by default; per team
(``teams.<team>.efficiency``).

Alarms (``/aws/sagemaker/TrainingJobs`` ``GPUUtilization``, dimension ``Host``, published per host as
the sum over its GPUs):

* **notice** (``<prefix><job>.efficiency``): the **mean over the job's GPU hosts** (metric math ``AVG``)
  of 5-minute averages below ``min_gpu_percent`` x GPUs per host in every period of ``window_minutes``.
  Where the job's GPU groups differ in GPUs per host, x the **smallest** count (as the idle guard scales):
  SageMaker does not say which ``algo-n`` is in which group (its heterogeneous-cluster guide: "You need to
  figure out from the logs which nodes are in which group"), so no host's value can be divided by its own
  count; with every GPU at the minimum, every host publishes at least the minimum x the smallest count, and
  so does the mean of any of them. Scaled by the largest, a busy 1-GPU host (at most 100) pulled the mean
  of a fully busy cluster under the threshold. The sum over the hosts divided by the job's GPUs would be
  exact, but a host whose datapoint is late or missing would lower it (a notice, a stop on missing data),
  and a composite's child (10 hosts of unknown groups) has no GPU count to divide by. The cost: a job
  whose larger hosts underuse their GPUs while the smaller ones are busy may go untold.
  When it fires the owner gets a notice (audit rule ``efficiency``, ``efficiency.notify.below-minimum``)
  and the alarm stays in ``ALARM``: an alarm acts only when its state changes, so the owner is told once
  per stretch below the minimum, and again only after utilization recovered and then stayed low for
  another whole window. (A reset would not wait a window: after ``SetAlarmState`` an alarm "returns to
  its actual state quickly, often within seconds", its API reference, and would notify every period.)
* **stop** (``<prefix><job>.efficiency-stop``, only when ``stop_after_notices`` > 0): the same signal
  over ``(stop_after_notices + 1)`` windows in a row: the job stayed under the minimum for that long
  (its owner told after the first). The stall judge (the stopper's review) does not review it: it
  judges stalls (idle GPUs, no progress), and a job below a minimum is not stalled, so its evidence would
  veto every such stop. The stop stands on its alarm (every 5-minute mean of the stop window below the
  threshold; missing data never counts as below; above 10 hosts on a heterogeneous cluster, the hosts' data
  read to cover the window, see below) and the checks every verdict gets: the job re-read and in
  ``Training`` for its grace period plus the stop window, a notification at most 15 minutes old, the
  team's exemptions and audit mode, and a notice of the stretch actually sent to the owner (``notice_before_stop``:
  the stopper asks the ledger about the notice alarm's current ``ALARM``; a stop without one becomes that notice,
  ``efficiency.notify.before-stop``). A stop not made (audit mode), an exempt job or the guard off mutes the
  stop alarm for its stretch (``mutes``): recorded once, and turned on and reset by the reconciler once the
  guard can stop the job (a switch to enforce, the exemption lifted, the guard on again) while it stays
  below. Nothing re-arms either alarm (``rejudged`` is false: no stall judge vetoes these stops). A stop alarm
  created under an earlier ``stop_after_notices`` that the plan no longer has (the team set 0 since: "never a
  stop") never stops (``efficiency.skip.unplanned-alarm``, ``Guard.unplanned``: every guard's rule).

**Never on missing data, never in the grace period.** Both alarms treat missing data as not breaching (a
period without data is never "below the minimum"; a heterogeneous cluster's children above 10 hosts treat it
as missing, and their composite's firing is checked against the hosts' data, below), the judgement resets the alarms while the job is in
its grace period or has been in ``Training`` for less than the alarm's window, and a job that is not
``Training`` is not judged.

**A late notice is still sent.** A notice reports a window that ended when its alarm changed state, so it is
judged as of that moment (grace and window counted to the alarm's ``StateChangeTime``) and stays true however
late it is delivered: a notification that comes back after a failed delivery (the alarm queue redelivers
a minute later, then five, then after its 30-minute visibility timeout) tells the owner then, saying when
the window ended, instead of being reset as stale (the job may have recovered meanwhile, and the stretch would go untold). Only the stop
alarm's notifications are judged stale after 15 minutes (a stop acts on the job as it is now).

**More than 10 hosts** (one metric alarm reads at most 10 metrics; the alarm limits page: "a maximum of 10
metrics. This is a hard limit"): each role's alarm is a composite alarm over one child metric alarm per 10
hosts (``<alarm>.hosts-<first>-<last>``, no actions, the mean of its hosts below the same threshold for the
same window), ``ALARM(c1) AND ALARM(c2) ...``: every group of hosts below the minimum, so the job's mean
is below it too (a mean of values below a threshold is below it). The converse does not hold: a job with
one busy group of hosts is not told (a nudge may be missed, never sent wrongly). Where some hosts publish no
``GPUUtilization`` (a heterogeneous cluster) the rule is the idle guard's ``no child OK and at least one in
ALARM`` with children treating missing data as ``missing``; such a child also goes to ``ALARM`` on a few low
datapoints followed by none (CloudWatch's missing-data row ``X - - - -``: ten low minutes, then no data, fire
the stop composite once they are as old as its window), so before a notice or a stop on it the stopper reads
the hosts' ``GPUUtilization`` over the alarm's window and, when it does not cover that window, neither tells
nor stops and resets the children (``efficiency.skip.gpu-data-missing``; ``domain/gpu_coverage.py``). A notice
resets nothing here either (the composite stays in ``ALARM`` with its children). Why not one Metrics Insights query alarm over the job's hosts: its ``WHERE`` clause supports
``=``, ``!=`` and ``AND`` only (Metrics Insights query components and syntax), so one query cannot select
``<job>/algo-1`` .. ``<job>/algo-N``; and such alarms evaluate the latest 3 hours of data only, 200 per
Region by default (the alarm limits page), where a stop window may last a day. Beyond what a composite
rule allows (100 children: over 1,000 hosts) no alarm: ``efficiency.alarm.too-many-hosts``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import Field, model_validator

from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.guards.base import (
    CHILD_HOSTS_MARK,
    MAX_METRICS_PER_ALARM,
    STALE_AFTER,
    AlarmKind,
    AlarmNaming,
    AlarmPlan,
    Combined,
    CompositeRule,
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
    children_incomplete,
    composite_limits_exceeded,
    composite_rule,
    host_chunks,
    job_instance_facts,
    metric_alarm_request,
    preconditions,
    trained_less_than,
    unsized,
)
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts
from sagemaker_governance.domain.job import TrainingJob

EFFICIENCY_GUARD_RULE_ID: Final = "efficiency"
NOTICE_MARK: Final = ".efficiency"  # job names cannot contain ".": never another job's alarm
STOP_MARK: Final = ".efficiency-stop"
PERIOD_SECONDS: Final = 300
# The shortest stop window (``(stop_after_notices + 1) x window_minutes``) ``smgov policy validate`` lets pass without
# a warning: twice the longest stretch below 50 % per GPU (5-minute means) that a healthy job of the calibration
# traces (../shared/gpu_traces, docs/calibration.md) recovered from, 45 minutes (an 8B SFT job whose pass@k
# evaluation loads vLLM: 25 minutes at 0 % within it); a 22-minute scoring pass at 8-16 % is another. A 10-minute
# window with one notice stops such a job 20 minutes into its evaluation.
MIN_STOP_WINDOW_MINUTES: Final = 90
RESET_REASON: Final = "sagemaker-governance: efficiency guard (grace period or stale notification)"


class EfficiencyRole(StrEnum):
    NOTICE = "notice"
    STOP = "stop"
    NOTICE_CHILD = "notice-child"  # above 10 hosts: one per 10 hosts, no action, under the notice composite
    STOP_CHILD = "stop-child"  # ... under the stop composite


class EfficiencyGuardCode(StrEnum):
    """The minimum-utilization guard's codes (its lifecycle's: ``efficiency.alarm.*``)."""

    NOTIFY = "efficiency.notify.below-minimum"
    STOP = "efficiency.stop.below-minimum"
    ALREADY_ENDED = "efficiency.skip.already-ended"
    DISABLED = "efficiency.skip.disabled"
    NOT_TRAINING = "efficiency.skip.not-training"
    STALE = "efficiency.skip.stale"
    GRACE = "efficiency.skip.grace"
    EXEMPTED = "efficiency.skip.exempted"
    STRICTER_ALARM = "efficiency.skip.stricter-alarm"  # fired on stricter terms than planned now: re-plan
    NO_GPU = "efficiency.alarm.no-gpu"
    UNKNOWN_INSTANCE = "efficiency.alarm.unknown-instance"  # a type whose GPUs cannot be sized: no alarm
    TOO_MANY_HOSTS = "efficiency.alarm.too-many-hosts"


_JUDGED: Final = {
    Verdict.ALREADY_ENDED: EfficiencyGuardCode.ALREADY_ENDED,
    Verdict.DISABLED: EfficiencyGuardCode.DISABLED,
    Verdict.NOT_TRAINING: EfficiencyGuardCode.NOT_TRAINING,
    Verdict.STALE: EfficiencyGuardCode.STALE,
}


class EfficiencyPolicy(GuardConfig):
    """Minimum GPU utilization, nudging first: tell the owner when the job's GPUs stay below
    ``min_gpu_percent`` (per GPU, mean over its GPU hosts) for ``window_minutes`` after ``grace_minutes``
    of ``Training``; stop it only when it stays below for ``stop_after_notices`` + 1 windows in a row
    (0: never). Separate from the idle guard, which stops stalled jobs. Off by default: turn it on per team.

    Example:
        efficiency:
          enabled: true
          min_gpu_percent: 50
          window_minutes: 60
          grace_minutes: 30
          stop_after_notices: 3
    """

    enabled: bool = False
    min_gpu_percent: float = Field(default=50.0, gt=0, le=100, description="Per GPU, percent.")
    window_minutes: int = Field(default=60, ge=10, le=1440, multiple_of=5)
    grace_minutes: int = Field(default=30, ge=0, le=1440)
    stop_after_notices: int = Field(
        default=0, ge=0, le=23, description="N > 0: stop after N + 1 windows below in a row; 0: never a stop."
    )

    @model_validator(mode="after")
    def _stop_window_fits(self) -> EfficiencyPolicy:
        if self.stop_after_notices and (self.stop_after_notices + 1) * self.window_minutes > 1440:
            raise ValueError(
                "(stop_after_notices + 1) x window_minutes cannot exceed one day (a CloudWatch alarm's window)"
            )
        return self

    @property
    def stop_window_minutes(self) -> int:
        return (self.stop_after_notices + 1) * self.window_minutes


def _metric_alarms(name: str, hosts: int) -> tuple[str, ...]:
    """The metric alarms behind a role's alarm ``name`` (what a reset sets back to OK): itself, or above 10
    hosts its children (a composite alarm follows its children's states)."""
    if hosts > MAX_METRICS_PER_ALARM:
        return tuple(f"{name}{CHILD_HOSTS_MARK}{a}-{b}" for a, b in host_chunks(hosts))
    return (name,)


class EfficiencyGuard(Guard[EfficiencyPolicy]):
    """Tells the owner of a job that underuses its GPUs; stops it after unheeded notices if told to."""

    name = "efficiency"
    rule_id = EFFICIENCY_GUARD_RULE_ID
    section = "efficiency"
    config_type = EfficiencyPolicy
    title = "minimum-utilization guard"
    what = "efficiency alarms"
    rearm_reason = "sagemaker-governance: the training job (re)entered Training; utilization is judged afresh"
    sized_by_hosts = True  # above 10 hosts its alarms are a composite per role over one child per 10 hosts
    quiet_when_disabled = True  # off by default: no call at all for a job whose policy does not turn it on
    uses_instance_facts = (
        True  # its plan takes ``resolved`` facts (EC2's) for types the table lacks, as the idle guard's
    )

    def watchable(self, job: TrainingJob) -> bool:
        if not job.instance_groups:  # the event does not say what the job runs on: DescribeTrainingJob will
            return True
        return any(
            (facts := instance_facts(g.instance_type)).publishes_gpu_utilization
            or facts.accelerator is Accelerator.UNKNOWN  # EC2 may know it (the plan asks)
            for g in job.instance_groups
        )

    def warnings(self, config: EfficiencyPolicy, where: str) -> list[str]:
        """A stop window shorter than ``MIN_STOP_WINDOW_MINUTES`` (the notices may stay as quick as the team likes)."""
        if (
            not config.enabled
            or not config.stop_after_notices
            or config.stop_window_minutes >= MIN_STOP_WINDOW_MINUTES
        ):
            return []
        return [
            f"{where}: (stop_after_notices + 1) x window_minutes = {config.stop_window_minutes} minutes is shorter than "
            f"{MIN_STOP_WINDOW_MINUTES}: healthy jobs of the calibration traces stay below 50% per GPU for up to 45 "
            "minutes and recover (an evaluation phase, a scoring pass), and would be stopped; keep the window short for "
            "notices if you like, and give stops a longer one (more notices, or a longer window)"
        ]

    def plan(
        self,
        job: TrainingJob,
        config: EfficiencyPolicy,
        naming: AlarmNaming,
        resolved: Mapping[str, InstanceFacts] | None = None,
    ) -> AlarmPlan | NoAlarm:
        """The notice (and stop) alarms of ``job`` under ``config``, or why there are none. ``resolved``: EC2's
        facts of the instance types our table does not know (``domain/instances.py``): a type that stays unknown
        gets no alarm rather than a guessed GPU count (its hosts are averaged with the others, so a threshold
        scaled without them would be wrong: a 1-GPU host unknown to the table pulled the mean of a fully busy
        cluster scaled by its 8-GPU group under the minimum)."""
        facts = job_instance_facts(job, resolved)
        unknown = unsized(
            facts, EfficiencyGuardCode.UNKNOWN_INSTANCE, "no efficiency alarm rather than a wrong threshold"
        )
        if unknown is not None:
            return unknown
        groups = [g for g in job.instance_groups if facts[g.instance_type].publishes_gpu_utilization]
        if not groups:
            return NoAlarm(
                code=EfficiencyGuardCode.NO_GPU, reason="no instance of this job publishes GPUUtilization"
            )
        hosts = job.total_instance_count
        # GPU groups of different GPU counts: scale by the smallest (as the idle guard does). A host publishes
        # the sum over its GPUs and SageMaker does not say which algo-n is in which group, so a host's value
        # cannot be divided by its own GPU count; with every GPU at the minimum each host publishes at least
        # min_gpu_percent x the smallest count, and so does their mean: never below this threshold.
        gpu_counts = sorted({facts[g.instance_type].gpus for g in groups})
        gpus = gpu_counts[0]
        threshold = round(config.min_gpu_percent * gpus, 6)
        silent_hosts = len(groups) < len(job.instance_groups)  # CPU/Trainium groups publish no GPUUtilization
        rule_kind = CompositeRule.IDLE_WHERE_DATA if silent_hosts else CompositeRule.ALL_IDLE
        evidence: dict[str, Any] = {
            "min_gpu_percent": config.min_gpu_percent,
            "gpus_per_host_for_scaling": gpus,
            "threshold": threshold,
            "hosts": hosts,
            "window_minutes": config.window_minutes,
            "grace_minutes": config.grace_minutes,
        }
        if len(gpu_counts) > 1:
            evidence["scaling_note"] = (
                f"GPU groups of {', '.join(map(str, gpu_counts))} GPUs per host, and SageMaker does not say which host "
                "is in which group: the threshold is scaled by the smallest GPU count, so a job whose every GPU "
                "meets the minimum is never below it (a job whose larger hosts underuse their GPUs may go untold)"
            )
        roles = [(EfficiencyRole.NOTICE, NOTICE_MARK, config.window_minutes)]
        if config.stop_after_notices:
            roles.append((EfficiencyRole.STOP, STOP_MARK, config.stop_window_minutes))
            evidence["stop_after_notices"] = config.stop_after_notices
        composite = hosts > MAX_METRICS_PER_ALARM
        if composite:
            evidence["composite_rule"] = rule_kind.value
            evidence["hosts_note"] = (
                f"{hosts} hosts: one alarm per {MAX_METRICS_PER_ALARM} hosts (the mean of its hosts) under a "
                "composite alarm; it fires when every group of hosts is below the minimum, which means the "
                "job's mean is below it too (a job with one busy group is not told)"
            )
        alarms: list[PlannedAlarm] = []
        for role, mark, minutes in roles:
            name = naming.alarm_name(job.name, mark)
            periods = minutes * 60 // PERIOD_SECONDS
            description = naming.describe(
                f"sagemaker-governance minimum-utilization guard ({role.value}) for training job {job.name}: "
                f"mean GPUUtilization of its GPU hosts below {threshold:g} ({config.min_gpu_percent:g}% per GPU "
                f"x {gpus}) for {minutes} minutes"
            )

            def request(
                alarm: str,
                first: int,
                last: int,
                actions: list[str],
                *,
                description: str = description,
                periods: int = periods,
                missing: str = "notBreaching",
            ) -> dict[str, Any]:
                return metric_alarm_request(
                    alarm,
                    description=description,
                    actions=actions,
                    actions_enabled=True,
                    evaluation_periods=periods,
                    datapoints_to_alarm=periods,
                    threshold=threshold,
                    comparison="LessThanThreshold",
                    treat_missing_data=missing,  # a period without data is never below the minimum
                    tags=naming.tags(job.name),
                    queries=[
                        MetricQuery(
                            id=f"m{n}",
                            metric_name="GPUUtilization",
                            dimensions=(("Host", f"{job.name}/algo-{n}"),),
                        )
                        for n in range(first, last + 1)
                    ],
                    stat="Average",
                    period=PERIOD_SECONDS,
                    combined=Combined(
                        id="mean",
                        function="AVG",
                        label="mean GPUUtilization of the GPU hosts"
                        + (f" (algo-{first}..algo-{last})" if composite else ""),
                    ),
                    single_metric=first == last,
                )

            if not composite:
                alarms.append(
                    PlannedAlarm(role=role, kind=AlarmKind.METRIC, request=request(name, 1, hosts, naming.actions))
                )
                continue
            children = tuple(f"{name}{CHILD_HOSTS_MARK}{a}-{b}" for a, b in host_chunks(hosts))
            rule = composite_rule(children, rule_kind)
            exceeded = composite_limits_exceeded(children, rule)
            if exceeded:
                return NoAlarm(
                    code=EfficiencyGuardCode.TOO_MANY_HOSTS,
                    reason=f"{hosts} hosts need {len(children)} child alarms under one composite alarm, beyond what "
                    f"CloudWatch allows in a composite alarm rule ({', '.join(sorted(exceeded))}); no efficiency alarm",
                    evidence={
                        **evidence,
                        "child_alarms_needed": len(children),
                        "composite_limits_exceeded": exceeded,
                    },
                )
            # Some hosts publish no GPUUtilization (a heterogeneous cluster): a child of such hosts only has no
            # data at all (INSUFFICIENT_DATA under ``missing``) and never blocks the composite.
            missing = "missing" if rule_kind is CompositeRule.IDLE_WHERE_DATA else "notBreaching"
            child_role = (
                EfficiencyRole.NOTICE_CHILD if role == EfficiencyRole.NOTICE else EfficiencyRole.STOP_CHILD
            )
            alarms += [
                PlannedAlarm(
                    role=child_role, kind=AlarmKind.METRIC, request=request(child, a, b, [], missing=missing)
                )
                for child, (a, b) in zip(children, host_chunks(hosts), strict=True)
            ]
            top = {
                "AlarmName": name,
                "AlarmDescription": description,
                "ActionsEnabled": True,
                "AlarmActions": naming.actions,
                "AlarmRule": rule,
                "Tags": naming.tags(job.name),
            }
            alarms.append(PlannedAlarm(role=role, kind=AlarmKind.COMPOSITE, request=top))
        evidence["alarms"] = [a.name for a in alarms if a.kind is AlarmKind.COMPOSITE or not composite]
        return AlarmPlan(job_name=job.name, what=self.what, alarms=tuple(alarms), evidence=evidence)

    def plan_for(self, notice: Notice, config: EfficiencyPolicy) -> AlarmPlan | NoAlarm:
        return self.plan(notice.job, config, notice.naming, resolved=notice.resolved)

    def watching(self, job: TrainingJob, config: EfficiencyPolicy, plan: AlarmPlan) -> str:
        stop = (
            f"; a stop after {config.stop_after_notices} unheeded notice(s)" if config.stop_after_notices else ""
        )
        return (
            f"watching GPU utilization: below {config.min_gpu_percent:g}% per GPU for {config.window_minutes} "
            f"minutes after a {config.grace_minutes}-minute grace period sends the owner a notice{stop}"
        )

    def owned_alarms(self, job_name: str, hosts: int, naming: AlarmNaming) -> tuple[str, ...]:
        """Each role's alarm, then (above 10 hosts) its children: a composite before the alarms it watches."""
        names: list[str] = []
        for mark in (NOTICE_MARK, STOP_MARK):
            name = naming.alarm_name(job_name, mark)
            names.append(name)
            if hosts > MAX_METRICS_PER_ALARM:
                names += [f"{name}{CHILD_HOSTS_MARK}{a}-{b}" for a, b in host_chunks(hosts)]
        return tuple(names)

    def incomplete(self, job_name: str, observed: Any, naming: AlarmNaming) -> bool:
        """The notice alarm (with its children above 10 hosts) is always there; the stop alarm only when the
        policy asks for stops, and then complete too."""
        seen = set(observed)
        notice = naming.alarm_name(job_name, NOTICE_MARK)
        stop = naming.alarm_name(job_name, STOP_MARK)
        stop_seen = any(n == stop or n.startswith(f"{stop}{CHILD_HOSTS_MARK}") for n in seen)
        return children_incomplete(notice, seen) or (stop_seen and children_incomplete(stop, seen))

    def role_of(self, alarm_name: str, job_name: str, naming: AlarmNaming) -> str | None:
        notice = naming.alarm_name(job_name, NOTICE_MARK)
        stop = naming.alarm_name(job_name, STOP_MARK)
        if alarm_name == notice:
            return EfficiencyRole.NOTICE
        if alarm_name == stop:
            return EfficiencyRole.STOP
        if alarm_name.startswith(f"{notice}{CHILD_HOSTS_MARK}"):
            return EfficiencyRole.NOTICE_CHILD
        if alarm_name.startswith(f"{stop}{CHILD_HOSTS_MARK}"):
            return EfficiencyRole.STOP_CHILD
        return None

    def reset_on_entry(self, role: str) -> bool:
        """Never the notice alarm (nor its children): in ALARM it says the owner was told of this stretch, and a
        reset on a late or repeated ``Training`` event, a Spot restart or the reconciler's repair would have it fire
        again within a minute, a new state change, and tell the owner again of the same stretch. A pause in
        ``Training`` longer than a period sends it to OK by itself (no data is not below the minimum), so a new
        stretch after a restart is told as usual; one of a few minutes stays the stretch it was."""
        return role not in (EfficiencyRole.NOTICE, EfficiencyRole.NOTICE_CHILD)

    def notice_before_stop(self, job_name: str, naming: AlarmNaming) -> str | None:
        """The notice alarm: a stop comes only after unheeded notices, so its owner must have been sent the notice
        of the stretch (its ALARM state change) the stop ends; one only recorded (audit mode, the guard off) is
        none."""
        return naming.alarm_name(job_name, NOTICE_MARK)

    def acts_on(self, role: str) -> bool:
        return role in (EfficiencyRole.NOTICE, EfficiencyRole.STOP)

    def stops_from(self, role: str) -> bool:
        return role == EfficiencyRole.STOP

    def mutes(self, role: str) -> bool:
        """The stop alarm, after a stop not made (audit mode), an exempt job or the guard off: left in ALARM with
        its actions on it would never be judged again while the job stays below (nothing re-arms this guard's
        alarms: no stall judge vetoes its stops), not even once the guard can stop it; muted, the reconciler turns
        it on and resets it then (or turns it on when the stretch ends). Never the notice alarm: it stays in ALARM
        with its actions on by design (the owner told once per stretch)."""
        return role == EfficiencyRole.STOP

    def rearm_targets(
        self, alarm_name: str, job_name: str, observed: Collection[str], naming: AlarmNaming
    ) -> tuple[str, ...]:
        """A role's alarm; above 10 hosts its children instead (a composite reset alone stays in OK while its
        children stay in ALARM; a child reset returns to ALARM at its next evaluation and the composite notifies)."""
        role = self.role_of(alarm_name, job_name, naming)
        if role == EfficiencyRole.NOTICE:
            child = EfficiencyRole.NOTICE_CHILD
        elif role == EfficiencyRole.STOP:
            child = EfficiencyRole.STOP_CHILD
        else:
            return (alarm_name,)
        children = sorted(a for a in observed if self.role_of(a, job_name, naming) == child)
        return tuple(children) or (alarm_name,)

    def judge(self, role: str, notice: Notice, config: EfficiencyPolicy) -> GuardVerdict:
        job, now = notice.job, notice.now
        measured, per_gpu = _measured(job, notice.evidence.get("newest_value"), notice.resolved)
        judgement = Judgement(
            self.rule_id,
            notice.mode,
            {
                **notice.evidence,
                **notice.savings,
                **({"newest_percent_per_gpu": per_gpu} if per_gpu is not None else {}),
            },
        )
        name = notice.naming.alarm_name(job.name, STOP_MARK if role == EfficiencyRole.STOP else NOTICE_MARK)
        metric_alarms = _metric_alarms(name, job.total_instance_count)
        early = preconditions(
            judgement,
            notice,
            enabled=config.enabled,
            title=self.title,
            codes=_JUDGED,
            not_training="utilization is judged in Training only",
            ended=(Action.NONE, "nothing to tell"),
            stale=Stale(metric_alarms, RESET_REASON, "below the minimum") if role == EfficiencyRole.STOP else None,
        )
        if early is not None:
            return early
        window = config.stop_window_minutes if role == EfficiencyRole.STOP else config.window_minutes
        # Judged as of its alarm's state change (the end of the window it reports), a notice and a stop alike
        as_of = notice.as_of
        needed = timedelta(minutes=config.grace_minutes + window)
        if (since := trained_less_than(job, as_of, needed)) is not None:
            return judgement(
                Verdict.TOO_EARLY,
                Action.NONE,
                EfficiencyGuardCode.GRACE,
                f"the job (re)entered Training at {since}: within the {config.grace_minutes}-minute grace period "
                f"plus the {window}-minute window; the alarm is reset",
                reset=metric_alarms,
                reset_reason=RESET_REASON,
            )
        stricter = self.stricter_alarm(
            judgement,
            notice,
            config,
            code=EfficiencyGuardCode.STRICTER_ALARM,
            reset_reason=RESET_REASON,
            alarms=metric_alarms,
        )
        if stricter is not None:
            return stricter
        minimum = self._applied_minimum(notice, config)
        judgement.evidence["min_gpu_percent_applied"] = minimum
        suggestion = (
            "Check the input pipeline (more data-loader workers, prefetching, faster storage: FastFile or FSx), "
            "raise the batch size, or move to a smaller instance type; if this job's low utilization is expected, "
            "ask the platform team for a team override of efficiency.min_gpu_percent."
        )
        if role == EfficiencyRole.STOP:
            reason = (
                f"GPU utilization stayed below {minimum:g}% per GPU for {window} minutes "
                f"({config.stop_after_notices + 1} windows of {config.window_minutes} in a row; its owner was told "
                f"after the first){measured}"
            )
            return judgement.stop(
                EfficiencyGuardCode.STOP,
                EfficiencyGuardCode.EXEMPTED,
                reason,
                remedy=suggestion,
                exempted_by=notice.exempted_by,
            )
        later = (
            f"; it will be stopped if it stays below for {config.stop_window_minutes} minutes in a row"
            if config.stop_after_notices
            else ""
        )
        until = f" up to {as_of.isoformat()} (this notice comes late)" if now - as_of > STALE_AFTER else ""
        return judgement(
            Verdict.NOTIFY,
            Action.NOTIFY,
            EfficiencyGuardCode.NOTIFY,
            f"GPU utilization stayed below {minimum:g}% per GPU (mean over its GPU hosts) for "
            f"{config.window_minutes} minutes{until}{measured}{later}",
            remedy=suggestion,
        )

    def _applied_minimum(self, notice: Notice, config: EfficiencyPolicy) -> float:
        """The per-GPU minimum of the alarm that fired, as its notification says (one planned under a higher
        minimum than today's is judged on its own); the policy's when it does not (a composite alarm)."""
        threshold, plan = notice.evidence.get("threshold"), self.plan_for(notice, config)
        gpus = plan.evidence.get("gpus_per_host_for_scaling") if isinstance(plan, AlarmPlan) else None
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not isinstance(gpus, int):
            return config.min_gpu_percent
        return round(float(threshold) / gpus, 4) if gpus > 0 else config.min_gpu_percent

    def symptom(self, config: EfficiencyPolicy) -> tuple[str, str]:
        return (
            f"its GPUs stayed below {config.min_gpu_percent:g}% utilization for {config.stop_window_minutes} "
            "minutes in a row, after a notice to its owner",
            f"stayed below {config.min_gpu_percent:g}% GPU utilization",
        )


def _measured(
    job: TrainingJob, newest: Any, resolved: Mapping[str, InstanceFacts] | None = None
) -> tuple[str, float | None]:
    """What the owner is told of the alarm's newest 5-minute mean (``newest_value``, from its state reason:
    the mean over the GPU hosts of each host's sum over its GPUs), and that mean per GPU where the job's
    GPU hosts have one GPU count. Nothing when the reason listed no datapoint (a composite alarm)."""
    if isinstance(newest, bool) or not isinstance(newest, int | float):
        return "", None
    counts = {f.gpus for f in job_instance_facts(job, resolved).values() if f.publishes_gpu_utilization}
    if len(counts) == 1:
        per_gpu = round(float(newest) / next(iter(counts)), 1)
        return f" (its last 5-minute mean: {per_gpu:.0f}% per GPU)", per_gpu
    return (
        f" (its last 5-minute mean over its GPU hosts: {float(newest):g} GPUUtilization, each host's sum over its "
        "GPUs)",
        None,
    )


EFFICIENCY: Final = EfficiencyGuard()
