"""The simulation report: per job what happened and what it cost with and without the service.

``simulate`` runs a scenario twice with the same seed: governed (the real service) and baseline (the
same fleet with no governance), and joins the two. ``build_report`` is the ``--json`` document;
``render`` the terminal table.

**Recoverable waste** (per job, from the baseline run): what the ungoverned job spends on stalls that do
not end by themselves, beyond a perfect governor's detection delay (the scenario's
``detection_minutes``): for each such stall, the billed minutes from its start plus the detection delay
to its end (the job's end, its limit, or a Spot interruption that restarts the process) x the cluster's
price. A stall that recovers by itself is not recoverable (stopping it would lose the work it goes on to
do). **Recovered**: what governance saved on such a job, its clones' cost included, between 0 and its
recoverable waste; ``recovered_fraction`` = recovered / recoverable (None when nothing was recoverable).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from statistics import median
from typing import Any

import yaml

from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID
from sagemaker_governance.domain.guards.efficiency import EfficiencyGuardCode
from sagemaker_governance.domain.resume import INTERRUPTED, MAX_WAIT_EXCEEDED
from smgov.cfn_template import TEMPLATE_PATH
from smgov.simulation.engine import JobRun, RunResult, Simulation
from smgov.simulation.faults import FaultSpec
from smgov.simulation.scenario import Expect, JobSpec, Scenario

ACTED = {"done", "already-done", "audit-only"}
INVARIANTS = ("orphan_alarms", "missing_alarms", "duplicate_clones", "missed_stops", "false_stops", "lost_events")


def _usd(value: float) -> float:
    return round(value, 2) + 0.0  # never -0.0


def _fraction(recovered: float, recoverable: float) -> float | None:
    return round(recovered / recoverable, 3) if recoverable > 0 else None


def _minute(epoch: datetime, at: datetime) -> int:
    return int((at - epoch).total_seconds() // 60)


def _host_alarms(job: JobRun, alarms: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The alarms watching one of the job's hosts (what a chart draws as the threshold)."""
    hosts = {h.name for h in job.hosts}
    out = []
    for alarm in alarms.values():
        dims = [d for d in alarm.get("Dimensions", [])]
        for item in alarm.get("Metrics", []):
            dims += item.get("MetricStat", {}).get("Metric", {}).get("Dimensions", [])
        if any(d.get("Value") in hosts for d in dims):
            period = alarm.get("Period") or next(
                (m["MetricStat"]["Period"] for m in alarm.get("Metrics", []) if "MetricStat" in m), 60
            )
            out.append(
                {
                    "name": alarm["AlarmName"],
                    "threshold": alarm["Threshold"],
                    "comparison": alarm["ComparisonOperator"],
                    "period_seconds": period,
                    "evaluation_periods": alarm["EvaluationPeriods"],
                    "datapoints_to_alarm": alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"],
                    "treat_missing_data": alarm.get("TreatMissingData", "missing"),
                }
            )
    return out


def stop_outcomes(result: RunResult) -> dict[str, tuple[bool, bool]]:
    """Per job: (false stop, missed stall). A false stop is a stop of a job that was not stalled, not
    marked ``expect_stop`` (or ``expect: {stop: true}``) by the scenario and not continued by the service
    as a clone; a missed stall a job whose script stalled (a stall that did not end by itself) and that
    the service never stopped."""
    cloned_from = {j.source for j in result.jobs.values() if j.source}
    out: dict[str, tuple[bool, bool]] = {}
    for name, job in result.jobs.items():
        stopped = job.stopped_by_service_at
        false_stop = (
            stopped is not None and job.stalled_at is None and not job.expect_stop and name not in cloned_from
        )
        unrecovered = any(not episode.recovered for episode in job.stalls)
        out[name] = (false_stop, unrecovered and stopped is None)
    return out


def recoverable_usd(job: JobRun, detection_minutes: int) -> float:
    """The baseline job's spend on stalls that do not end by themselves, beyond the detection delay."""
    minutes = 0
    for episode in job.stalls:
        if episode.recovered:
            continue
        end = episode.billable_at_end if episode.billable_at_end is not None else job.billable
        minutes += max(0, end - episode.billable_at_start - detection_minutes)
    return minutes * job.cluster_price_per_hour / 60


def _lineage(jobs: dict[str, JobRun], name: str) -> list[JobRun]:
    """The job and every clone descending from it."""
    out, frontier, seen = [jobs[name]], [name], {name}
    while frontier:
        parent = frontier.pop()
        children = [j for j in jobs.values() if j.source == parent and j.name not in seen]
        seen.update(c.name for c in children)
        out += children
        frontier += [c.name for c in children]
    return out


def unexpected(
    expect: Expect, job: JobRun, jobs: dict[str, JobRun], notices: int = 0, late_allowance: int = 0
) -> list[str]:
    """How the run differs from the outcome the scenario wrote down for the job (``notices``: the
    minimum-utilization notices its owner got; ``late_allowance``: minutes a stop may come after
    ``stop_within_minutes``, one reconciler interval under injected faults: a crashed or lost delivery, or a
    crashed reconciler run, is repaired by the next run, by design)."""
    out: list[str] = []
    if expect.notices_min is not None and notices < expect.notices_min:
        out.append(f"{notices} efficiency notice(s), expected at least {expect.notices_min}")
    if expect.notices_max is not None and notices > expect.notices_max:
        out.append(f"{notices} efficiency notice(s), expected at most {expect.notices_max}")
    if expect.billed_max_minutes is not None and job.billable > expect.billed_max_minutes:
        out.append(f"billed {job.billable} minutes (expected at most {expect.billed_max_minutes})")
    return out + _stop_differences(expect, job, late_allowance) + _lineage_differences(expect, job, jobs)


def _stop_differences(expect: Expect, job: JobRun, late_allowance: int) -> list[str]:
    out: list[str] = []
    stopped = job.stopped_by_service_at
    if expect.stop is True and stopped is None:
        out.append("not stopped")
    if expect.stop is False and stopped is not None:
        out.append(f"stopped at minute {stopped}")
    if expect.stop_within_minutes is not None and stopped is not None and job.first_stall is not None:
        late = stopped - job.first_stall
        if late > expect.stop_within_minutes + late_allowance:
            allowed = f" + {late_allowance} under faults" if late_allowance else ""
            out.append(
                f"stopped {late} minutes after the stall (expected within {expect.stop_within_minutes}{allowed})"
            )
    return out


def _lineage_differences(expect: Expect, job: JobRun, jobs: dict[str, JobRun]) -> list[str]:
    out: list[str] = []
    clones = [j for j in jobs.values() if j.source == job.name]
    if expect.resume is True and not clones:
        out.append("not resumed")
    if expect.resume is False and clones:
        out.append(f"resumed as {clones[0].name}")
    lineage = _lineage(jobs, job.name)
    if expect.clones is not None and len(lineage) - 1 != expect.clones:
        out.append(f"{len(lineage) - 1} clone(s) in its lineage (expected {expect.clones})")
    if expect.complete is not None:
        completed = any(j.final_status == "Completed" for j in lineage)
        if completed != expect.complete:
            out.append("completed" if completed else "did not complete")
    return out


# What a move before the job bills (``expect.billed_max_minutes``) is decided from, besides the job's own
# events: the Spot signals of its instance type, a Spot storm being a count of jobs interrupted or out of
# Spot wait time (``domain/spot_health.py``).
SPOT_SIGNALS = frozenset({INTERRUPTED, MAX_WAIT_EXCEEDED})
MOVE_EXPECTATIONS = ("stop", "resume", "clones", "billed_max_minutes")


def dropped_before_move(
    job: JobRun, jobs: dict[str, JobRun], dropped: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The dropped events a move of ``job`` before it bills was to be decided from, when governance left the
    job untouched (not stopped, no clone): its last event before it bills (``Pending``, else ``Starting``),
    and the Spot interruptions and wait-outs of jobs of its instance type dropped up to that event.

    Such a move is made from that event, and only the event stream tells the service of a Spot
    interruption. A dropped event is one EventBridge never delivers (it retries for 24 hours, then gives the
    event to a dead-letter queue): the move it would have decided is out of reach, not wrong, as nothing
    brings the event back while the job still waits. An earlier event of the job that was dropped does not
    count (its last one still decides), nor a Spot signal dropped after the decision."""
    if job.stopped_by_service_at is not None or any(j.source == job.name for j in jobs.values()):
        return []
    decided = job.last_wait_at if job.last_wait_at is not None else job.created
    until = job.billed_from if job.billed_from is not None else job.ended_at
    types = set(job.instance_types)
    out = []
    for event in dropped:
        other = jobs.get(event["job"])
        if event["job"] == job.name:
            deciding = decided <= event["minute"] and (until is None or event["minute"] < until)
        else:
            deciding = (
                event["minute"] <= decided
                and event["secondary_status"] in SPOT_SIGNALS
                and other is not None
                and other.spot_type in types
            )
        if deciding:
            out.append(event)
    return out


def _out_of_reach(
    expect: Expect, job: JobRun, governed: RunResult, wrong: list[str], notices: int, late_allowance: int
) -> tuple[list[str], dict[str, Any] | None]:
    """The job's differences once those of an expected move before it bills that a dropped event put out
    of reach are set apart, and those (the dropped events and the move's differences; None: none was)."""
    dropped: list[dict[str, Any]] = governed.faults.get("dropped", [])
    if not wrong or expect.billed_max_minutes is None or not dropped:
        return wrong, None
    lost = dropped_before_move(job, governed.jobs, dropped)
    if not lost:
        return wrong, None
    relaxed = expect.model_copy(update=dict.fromkeys(MOVE_EXPECTATIONS))
    rest = unexpected(relaxed, job, governed.jobs, notices, late_allowance)
    return rest, {"dropped": lost, "differences": [d for d in wrong if d not in rest]}


def invariants(result: RunResult, known_gaps: Collection[str] = ()) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The reliability invariants of a governed run (all must be 0) and the names behind each.

    ``orphan_alarms``: this stack's alarms still in CloudWatch at the end whose job has ended (the clock
    runs ``settle_minutes`` past the last job's end, two runs of every schedule at least).
    ``missing_alarms``: GPU jobs that were still in the same Training stint ``alarm_settle_minutes``
    after entering it with no alarm of this stack watching their hosts (unless the service recorded a
    deliberate policy decision not to watch them). ``duplicate_clones``: source jobs with more than one
    clone. ``missed_stops`` / ``false_stops``: see ``stop_outcomes``. ``lost_events``: deliveries to a
    function that neither succeeded nor reached its on-failure destination / dead-letter queue (an event
    EventBridge dropped before delivery is a fault counted in ``faults``, not a lost event).
    A job in ``known_gaps`` (its scenario marks the service's wrong decision as a known gap) counts in
    neither ``missed_stops`` nor ``false_stops``: the report lists it under ``known_gaps``.
    """
    outcomes = stop_outcomes(result)
    names = dict(result.ground_truth)
    names["missed_stops"] = [n for n, (_, missed) in outcomes.items() if missed and n not in known_gaps]
    names["false_stops"] = [n for n, (false, _) in outcomes.items() if false and n not in known_gaps]
    clones: Counter[str] = Counter(j.source for j in result.jobs.values() if j.source)
    names["duplicate_clones"] = [f"{source} ({n} clones)" for source, n in clones.items() if n > 1]
    counts = {name: len(names.get(name, [])) for name in INVARIANTS}
    counts["duplicate_clones"] = sum(n - 1 for n in clones.values() if n > 1)
    counts["lost_events"] = result.deliveries["lost"]
    return counts, {k: v for k, v in names.items() if v}


EFFICIENCY_FIGURES = (
    "gpu_utilization_mean_percent",
    "gpu_utilization_median_percent",
    "gpu_under_idle_share",
    "gpu_memory_utilization_mean_percent",
    "idle_gpu_hours",
    "cost_usd",
    "idle_cost_usd",
    "spot_savings_usd",
    "coverage",
    "period_seconds",
)


def efficiency_by_job(result: RunResult) -> dict[str, dict[str, Any]]:
    """Each ended job's efficiency record as the service wrote it (its code, figures, what was missing):
    a figure the record does not have is ``None``, never filled in."""
    out: dict[str, dict[str, Any]] = {}
    for record in result.audit:
        if record.rule != EFFICIENCY_RULE_ID:
            continue
        evidence = record.evidence
        out[record.job_name] = {
            "code": record.code,
            **{key: evidence.get(key) for key in EFFICIENCY_FIGURES},
            "missing": list(evidence.get("missing", [])),
        }
    return out


def notices_by_job(result: RunResult) -> Counter[str]:
    """How many minimum-utilization notices each job's owner got (the efficiency guard's notify decisions)."""
    return Counter(r.job_name for r in result.audit if r.code == EfficiencyGuardCode.NOTIFY)


def owners_by_job(result: RunResult) -> dict[str, dict[str, str | None]]:
    """Team, owner and project of each job, as its audit records name them (the chargeback's keys)."""
    out: dict[str, dict[str, str | None]] = {}
    for record in result.audit:
        entry = out.setdefault(record.job_name, {"team": None, "owner": None, "project": None})
        entry["team"] = entry["team"] or record.team
        entry["owner"] = entry["owner"] or record.owner
        entry["project"] = entry["project"] or record.evidence.get("project")
    return out


def _instance_type(spec: JobSpec | None) -> str | None:
    """The job's instance type (a heterogeneous cluster: its types joined by '+')."""
    if spec is None:
        return None
    return spec.instance_type or "+".join(sorted({g.instance_type for g in spec.instance_groups or ()}))


def build_report(governed: RunResult, baseline: RunResult, *, include_series: bool = False) -> dict[str, Any]:
    epoch = governed.epoch
    actions: dict[str, list[dict[str, Any]]] = {}
    for record in governed.audit:
        if record.action == "none" or record.outcome.value not in ACTED:
            continue
        actions.setdefault(record.job_name, []).append(
            {
                "minute": _minute(epoch, record.at),
                "action": record.action,
                "rule": record.rule,
                "outcome": record.outcome.value,
            }
        )
    efficiency = efficiency_by_job(governed)
    notices = notices_by_job(governed)
    owners = owners_by_job(governed)
    outcomes = stop_outcomes(governed)
    specs: dict[str, JobSpec] = {spec.name: spec for spec in governed.scenario.expand(governed.seed)}
    detection = governed.scenario.detection_minutes
    late_allowance = governed.repair_minutes if governed.faults else 0
    jobs: list[dict[str, Any]] = []
    false_stops = missed = 0
    recoverable_total = recovered_total = 0.0
    surprises = 0
    gaps: dict[str, dict[str, Any]] = {}  # job -> its known gap, open or closed
    for name, job in governed.jobs.items():
        base = baseline.jobs.get(name)
        baseline_cost = base.cost if base is not None and job.source is None else 0.0
        stopped = job.stopped_by_service_at
        false_stop, missed_stall = outcomes[name]
        false_stops += false_stop
        missed += missed_stall
        recoverable = recoverable_usd(base, detection) if base is not None and job.source is None else 0.0
        lineage_cost = sum(j.cost for j in _lineage(governed.jobs, name))
        recovered = min(recoverable, max(0.0, baseline_cost - lineage_cost)) if recoverable > 0 else 0.0
        recoverable_total += recoverable
        recovered_total += recovered
        spec = specs.get(name) if job.source is None else None
        expect = spec.expect if spec is not None else Expect()
        wrong = unexpected(expect, job, governed.jobs, notices.get(name, 0), late_allowance)
        if expect.known_gap is not None:  # the service of today gets it wrong: reported, not a surprise
            gaps[name] = {**expect.known_gap.model_dump(), "open": bool(wrong), "differences": wrong}
            wrong = []
        wrong, lost = _out_of_reach(expect, job, governed, wrong, notices.get(name, 0), late_allowance)
        surprises += bool(wrong)
        entry: dict[str, Any] = {
            "name": name,
            "final_status": job.final_status or "InProgress",
            "secondary_status": job.final_secondary or job.phase,
            "actions": actions.get(name, []),
            "cost_usd": _usd(job.cost),
            "baseline_cost_usd": _usd(baseline_cost),
            "saved_usd": _usd(baseline_cost - job.cost),
            "stalled_at_minute": job.first_stall,
            "stopped_at_minute": stopped,
            "stall_kind": stall_kind(spec) if job.first_stall is not None else None,
            "baseline_final_status": (base.final_secondary if base is not None and job.source is None else None),
            "resumed_from": job.source,
            "instances": job.instance_count,
            "spot": job.spot,
            "interruptions": job.interruptions,
            "false_stop": false_stop,
            "missed_stall": missed_stall,
            "recoverable_waste_usd": _usd(recoverable),
            "recovered_usd": _usd(recovered),
            "expect": expect.model_dump(exclude_defaults=True, exclude={"known_gap"}),
            "unexpected": wrong,
            "known_gap": gaps.get(name),
            **({"out_of_reach": lost} if lost is not None else {}),
            **owners.get(name, {"team": None, "owner": None, "project": None}),
            "instance_type": "+".join(sorted(set(job.instance_types)))
            if job.instance_types
            else _instance_type(specs.get(job.spec_name or name)),
            "efficiency": efficiency.get(name),
        }
        if notices.get(name):  # only where the minimum-utilization guard told the owner (others unchanged)
            entry["efficiency_notices"] = notices[name]
        if include_series:
            entry["series"] = {
                "unit": "GPUUtilization per GPU (percent) of the busiest GPU host; a host publishes its own "
                "times its GPU count",
                "gpus_per_host": {h.name.rsplit("/", 1)[-1]: h.gpus for h in job.hosts},
                "segments": [list(s) for s in job.series],
                "hosts": {h.rsplit("/", 1)[-1]: [list(s) for s in seg] for h, seg in job.host_series.items()},
                "alarms": _host_alarms(job, governed.alarms),
            }
        jobs.append(entry)
    cost = sum(job.cost for job in governed.jobs.values())
    baseline_cost = sum(j.cost for j in baseline.jobs.values())
    counts, violations = invariants(governed, {n for n, gap in gaps.items() if gap["open"]})
    return {
        "scenario": governed.scenario.name,
        "description": governed.scenario.description,
        "seed": governed.seed,
        "start": epoch.isoformat(),
        "virtual_minutes": governed.minutes,
        "jobs": jobs,
        "totals": {
            "jobs": len(jobs),
            "cost_usd": _usd(cost),
            "baseline_cost_usd": _usd(baseline_cost),
            "saved_usd": _usd(baseline_cost - cost),
            "false_stops": false_stops,
            "missed_stalls": missed,
            "recoverable_waste_usd": _usd(recoverable_total),
            "recovered_usd": _usd(recovered_total),
            "recovered_fraction": _fraction(recovered_total, recoverable_total),
            "unexpected_outcomes": surprises,
            "known_gaps": sum(gap["open"] for gap in gaps.values()),
            "known_gaps_closed": sum(not gap["open"] for gap in gaps.values()),
            **({"out_of_reach": sum("out_of_reach" in j for j in jobs)} if governed.faults else {}),
            "stall_to_stop_minutes": stall_to_stop(jobs),
        },
        "counters": {
            "lambda_invocations": dict(sorted(governed.invocations.items())),
            "aws_calls": dict(sorted(governed.aws_calls.items())),
            "lambda_errors": len(governed.errors),
            "notifications": dict(sorted(governed.notifications.items())),
            "alarm_transitions": len(governed.alarm_transitions),
            "alarm_evaluations": governed.evaluations,
        },
        "invariants": counts,
        "invariant_violations": {name: names[:20] for name, names in violations.items()},
        "deliveries": {
            key: governed.deliveries[key] for key in ("delivered", "processed", "dead_lettered", "lost")
        },
        "faults": governed.faults,
        "errors": [
            {"minute": e.minute, "function": e.function, "trigger": e.trigger, "error": e.error}
            for e in governed.errors[:50]
        ],
        "notes": list(governed.deployment_notes),
    }


STRATEGIES = ("always_spot", "always_on_demand", "count_fallback", "service")


def on_demand_variant(scenario: Scenario) -> Scenario:
    """The scenario with every Spot job launched On-Demand (``always_on_demand``)."""
    jobs = tuple(job.model_copy(update={"spot": False, "max_wait_hours": None}) for job in scenario.jobs)
    return scenario.model_copy(update={"jobs": jobs})


def count_rule_variant(scenario: Scenario) -> Scenario:
    """The scenario governed with the count rule alone (``count_fallback``: On-Demand at the third
    interruption, as before the economics)."""
    document = scenario.policy
    if isinstance(document, str):
        document = yaml.safe_load(document) or {}
    document = dict(document or {})
    document["spot"] = {**dict(document.get("spot") or {}), "economics": False, "count_rule_interruptions": 3}
    return scenario.model_copy(update={"policy": document})


def strategy_totals(result: RunResult) -> dict[str, Any]:
    """What one way of running the fleet cost, and how long each job's work took to complete (hours from
    its creation to the end of the run that completed it, itself or a clone; a lineage that never completed
    counts to its last end and in ``incomplete``)."""
    hours: list[float] = []
    incomplete = 0
    for name, job in result.jobs.items():
        if job.source is not None:
            continue
        lineage = _lineage(result.jobs, name)
        done = [j.ended_at for j in lineage if j.final_status == "Completed" and j.ended_at is not None]
        if done:
            end = min(done)
        else:
            incomplete += 1
            end = max((j.ended_at if j.ended_at is not None else result.minutes) for j in lineage)
        hours.append((end - job.created) / 60)
    return {
        "cost_usd": _usd(sum(j.cost for j in result.jobs.values())),
        "completion_hours": round(sum(hours) / len(hours), 2) if hours else 0.0,
        "last_completion_hours": round(max(hours), 2) if hours else 0.0,
        "incomplete": incomplete,
    }


def simulate(
    scenario: Scenario,
    *,
    seed: int = 0,
    template: dict[str, Any] | None = None,
    template_path: Path | str = TEMPLATE_PATH,
    include_series: bool = False,
    faults: FaultSpec | None = None,
) -> dict[str, Any]:
    """Run the scenario governed and ungoverned with the same seed; the joined report. ``faults`` are
    injected into the governed run only (the baseline has no service to disturb). An ``org`` scenario
    runs each member account on its own (simulation/org.py) and reports the organization's audit view."""
    if scenario.org is not None:
        return _simulate_org(scenario, seed, template, template_path, include_series=include_series, faults=faults)
    governed = Simulation(scenario, seed=seed, template=template, template_path=template_path, faults=faults).run()
    baseline = Simulation(
        scenario, seed=seed, governed=False, template=template, template_path=template_path
    ).run()
    report = build_report(governed, baseline, include_series=include_series)
    if scenario.compare_strategies:  # the same market, run four ways (faults only where the service runs)
        on_demand = Simulation(
            on_demand_variant(scenario), seed=seed, governed=False, template=template, template_path=template_path
        ).run()
        count = Simulation(
            count_rule_variant(scenario), seed=seed, template=template, template_path=template_path, faults=faults
        ).run()
        runs = {
            "always_spot": baseline,
            "always_on_demand": on_demand,
            "count_fallback": count,
            "service": governed,
        }
        report["totals"]["strategies"] = {name: strategy_totals(runs[name]) for name in STRATEGIES}
    return report


def _simulate_org(
    scenario: Scenario,
    seed: int,
    template: dict[str, Any] | None,
    template_path: Path | str,
    *,
    include_series: bool,
    faults: FaultSpec | None,
) -> dict[str, Any]:
    from smgov.simulation.org import merge, org_section

    assert scenario.org is not None
    governed: list[RunResult] = []
    baseline: list[RunResult] = []
    for member in scenario.org.members:
        own = scenario.member(member.account)
        common: dict[str, Any] = {"seed": seed, "template": template, "template_path": template_path}
        governed.append(
            Simulation(own, faults=faults, account=member.account, central=scenario.org, **common).run()
        )
        baseline.append(Simulation(own, governed=False, account=member.account, **common).run())
    report = build_report(merge(scenario, governed), merge(scenario, baseline), include_series=include_series)
    report["org"] = org_section(scenario, governed)
    return report


# ---- terminal ------------------------------------------------------------------------------------


def _money(value: float) -> str:
    value = _usd(value)
    return f"${value:,.2f}" if value >= 0 else f"-${-value:,.2f}"


def _happened(job: dict[str, Any]) -> str:
    parts = []
    if job["stalled_at_minute"] is not None:
        parts.append(f"stalled@{job['stalled_at_minute']}")
    for act in job["actions"]:
        if act["action"] in ("create-alarm", "delete-alarm", "arm-alarm") and act["outcome"] != "audit-only":
            continue
        mode = "" if act["outcome"] != "audit-only" else " (audit)"
        parts.append(f"{act['action']}@{act['minute']} [{act['rule']}]{mode}")
    if job["stopped_at_minute"] is not None and not any(a["action"] == "stop" for a in job["actions"]):
        parts.append(f"stopped@{job['stopped_at_minute']}")
    if job["resumed_from"]:
        parts.insert(0, f"clone of {job['resumed_from']}")
    if job["interruptions"]:
        parts.append(f"{job['interruptions']} interruption(s)")
    if job["false_stop"]:
        parts.append("FALSE STOP")
    if job["missed_stall"]:
        parts.append("MISSED STALL")
    return ", ".join(parts + _expectations(job)) or "-"


def _expectations(job: dict[str, Any]) -> list[str]:
    """How the job's outcome differs from its expectation: unexpected, out of reach, a known gap."""
    parts = []
    if job.get("unexpected"):
        parts.append("UNEXPECTED: " + "; ".join(job["unexpected"]))
    lost = job.get("out_of_reach")
    if lost:
        events = ", ".join(
            f"{e['job']} {e['secondary_status'] or e['status']}@{e['minute']}" for e in lost["dropped"]
        )
        parts.append(f"OUT OF REACH (dropped: {events}): " + "; ".join(lost["differences"]))
    gap = job.get("known_gap")
    if gap and gap["open"]:
        parts.append(f"KNOWN GAP (issue {gap['issue']}): " + "; ".join(gap["differences"]))
    elif gap:
        parts.append(f"known gap of issue {gap['issue']} CLOSED: expected outcome met, remove its known_gap")
    return parts


def render(report: dict[str, Any], *, max_rows: int = 20) -> str:
    lines = [f"scenario {report['scenario']}: {report['description']}".rstrip(": ")]
    jobs = report["jobs"]
    shown = jobs
    if len(jobs) > max_rows:
        interesting = sorted(jobs, key=lambda j: (-abs(j["saved_usd"]), j["name"]))
        shown = sorted(interesting[:max_rows], key=jobs.index)
    width = max([len(j["name"]) for j in shown] + [3])
    header = f"  {'job':<{width}}  {'final':<22}  {'cost':>11}  {'baseline':>11}  {'saved':>11}  what happened"
    lines += [header, "  " + "-" * (len(header) + 10)]
    for job in shown:
        final = job["final_status"]
        if job["secondary_status"] not in (final, None):
            final = f"{final}/{job['secondary_status']}"
        lines.append(
            f"  {job['name']:<{width}}  {final:<22}  {_money(job['cost_usd']):>11}  "
            f"{_money(job['baseline_cost_usd']):>11}  {_money(job['saved_usd']):>11}  {_happened(job)}"
        )
    if len(shown) < len(jobs):
        lines.append(f"  ... {len(jobs) - len(shown)} more job(s) (see --json)")
    totals = report["totals"]
    lines.append(
        f"  total: {totals['jobs']} job(s), cost {_money(totals['cost_usd'])} vs "
        f"{_money(totals['baseline_cost_usd'])} without governance: saved {_money(totals['saved_usd'])}; "
        f"false stops {totals['false_stops']}, missed stalls {totals['missed_stalls']}"
    )
    lines.append("  " + recovery_line(totals))
    if totals.get("stall_to_stop_minutes"):
        lines.append("  " + stall_to_stop_line(totals["stall_to_stop_minutes"]))
    for name, figures in (totals.get("strategies") or {}).items():
        unfinished = f", {figures['incomplete']} unfinished" if figures["incomplete"] else ""
        lines.append(
            f"  strategy {name:<17} cost {_money(figures['cost_usd']):>11}, work completed after "
            f"{figures['completion_hours']:.2f} h on average (last {figures['last_completion_hours']:.2f} h){unfinished}"
        )
    counters = report["counters"]
    invocations = ", ".join(f"{k} {v}" for k, v in counters["lambda_invocations"].items()) or "none"
    calls = ", ".join(f"{k} {v}" for k, v in counters["aws_calls"].items()) or "none"
    lines.append(f"  invocations: {invocations}; errors: {counters['lambda_errors']}")
    lines.append(f"  AWS calls by the service: {calls}")
    if report.get("faults"):
        injected = ", ".join(f"{k} {v}" for k, v in report["faults"]["injected"].items())
        lines.append(f"  faults injected: {injected}")
    invariants = report.get("invariants", {})
    broken = {k: v for k, v in invariants.items() if v}
    lines.append(
        "  invariants: " + (", ".join(f"{k} {v}" for k, v in broken.items()) + " VIOLATED" if broken else "all 0")
    )
    for error in report["errors"][:3]:
        lines.append(f"  ! minute {error['minute']} {error['function']} ({error['trigger']}): {error['error']}")
    return "\n".join(lines)


def recovery_line(totals: dict[str, Any]) -> str:
    """Recoverable waste, how much of it governance recovered, and the expectations."""
    fraction = totals.get("recovered_fraction")
    share = "n/a" if fraction is None else f"{fraction:.1%}"
    surprises = totals.get("unexpected_outcomes", 0)
    gaps, closed = totals.get("known_gaps", 0), totals.get("known_gaps_closed", 0)
    line = (
        f"recoverable waste {_money(totals.get('recoverable_waste_usd', 0.0))}, recovered "
        f"{_money(totals.get('recovered_usd', 0.0))} ({share}); "
        + (f"{surprises} job(s) with an UNEXPECTED outcome" if surprises else "every other expected outcome met")
    )
    unreachable = totals.get("out_of_reach", 0)
    if unreachable:
        line += f"; {unreachable} expected move(s) out of reach: an event it was decided from was dropped"
    if not gaps and not closed and not unreachable:
        return line.replace("every other expected", "every expected")
    if gaps:
        line += f"; {gaps} known gap(s): job(s) the service of today decides wrong (scenario known_gap)"
    if closed:
        line += f"; {closed} known gap(s) CLOSED (remove their known_gap)"
    return line


def stall_kind(spec: JobSpec | None) -> str | None:
    """What a job's scripted stall looks like: ``idle`` (GPUs below 5 %), ``hang`` (pinned at 90 % or more:
    a collective spinning), ``other`` in between (None: a clone, or no spec)."""
    if spec is None:
        return None
    level = spec.script.stall_gpu_percent
    return "idle" if level < 5 else "hang" if level >= 90 else "other"


def stall_to_stop_line(figures: dict[str, dict[str, Any]]) -> str:
    """``stall to stop: hang median 31 min (max 31, 1 job); idle ...``"""
    shown = "; ".join(
        f"{kind} median {f['median']:g} min (max {f['max']}, {f['jobs']} job{'s' if f['jobs'] != 1 else ''})"
        for kind, f in figures.items()
    )
    return f"stall to stop: {shown}"


def stall_to_stop(jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """From a job's first stall to the service's stop, by stall kind: the median and the jobs counted (each
    job the service stopped at or after its first stall)."""
    minutes: dict[str, list[int]] = {}
    for job in jobs:
        stalled, stopped, kind = job["stalled_at_minute"], job["stopped_at_minute"], job.get("stall_kind")
        if stalled is None or stopped is None or kind is None or stopped < stalled:
            continue
        minutes.setdefault(kind, []).append(stopped - stalled)
    return {
        kind: {"median": median(values), "max": max(values), "jobs": len(values)}
        for kind, values in sorted(minutes.items())
    }


def summarize(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over several scenarios (the default set)."""
    totals: Counter[str] = Counter()
    for report in reports:
        for key, value in report["totals"].items():
            if key != "recovered_fraction" and not isinstance(value, dict):
                totals[key] += value
    out: dict[str, Any] = {k: round(v, 2) if isinstance(v, float) else v for k, v in totals.items()}
    out["recovered_fraction"] = _fraction(totals["recovered_usd"], totals["recoverable_waste_usd"])
    out["stall_to_stop_minutes"] = stall_to_stop([job for report in reports for job in report["jobs"]])
    return out
