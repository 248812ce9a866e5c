"""Chargeback: spend, idle cost, savings and GPU efficiency per team, owner, project or instance type.

Both sources give one ``JobCost`` per job; ``group`` adds them up by the chosen key, the same way for
both:

* a simulation report (``smgov simulate --json``): ``jobs[]`` with their ``efficiency`` (the record the
  service wrote when the job ended) and the simulator's measured ``saved_usd``;
* the deployed stack's audit records (Logs Insights, ``jobs_query``/``savings_query``): per job its
  efficiency record (``efficiency-record``) and its stops' ``estimated_savings_usd``.

Deployed, ``spend_usd`` and ``idle_cost_usd`` are the service's figures at each job's team's prices (the
efficiency record: billable time x instances x price; idle host-time x price). Offline, ``spend_usd`` is
the simulator's billed cost of the job and ``idle_cost_usd`` the record's idle share of its cost applied
to it, so that spend, idle cost and saved are all at the scenario's prices. A job without a cost (an
unpriced type) counts in ``jobs_unpriced``, one with no utilization figure in ``jobs_without_metrics``:
nothing is filled in. ``gpu_utilization_mean_percent`` of a group is the mean of its jobs' means,
weighted by their spend. ``saved_usd`` is, offline, the simulator's measured saving (baseline minus
governed cost); deployed, the stops' estimates (remaining allowed runtime x price).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.audit import AUDIT_MESSAGE, Outcome
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID
from smgov.audit_queries import CENTRAL_JOB_KEY, CENTRAL_PREFIX

NO_VALUE: Final = "(none)"


class GroupBy(StrEnum):
    TEAM = "team"
    OWNER = "owner"
    PROJECT = "project"
    INSTANCE_TYPE = "instance-type"


class JobCost(BaseModel):
    """One job's share of the chargeback (``None``: the source does not know it)."""

    model_config = ConfigDict(frozen=True)

    job: str
    team: str | None = None
    owner: str | None = None
    project: str | None = None
    instance_type: str | None = None
    spend_usd: float | None = None
    idle_cost_usd: float | None = None
    saved_usd: float = 0.0
    idle_gpu_hours: float | None = None
    gpu_utilization_mean_percent: float | None = None

    def key(self, by: GroupBy) -> str:
        value = {
            GroupBy.TEAM: self.team,
            GroupBy.OWNER: self.owner,
            GroupBy.PROJECT: self.project,
            GroupBy.INSTANCE_TYPE: self.instance_type,
        }[by]
        return value or NO_VALUE


class ChargebackLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    jobs: int
    spend_usd: float
    idle_cost_usd: float
    saved_usd: float
    idle_gpu_hours: float
    gpu_utilization_mean_percent: float | None
    jobs_without_metrics: int
    jobs_unpriced: int


class ChargebackSource(Protocol):
    """Where the per-job figures come from (a simulation report, a stack's audit records, ...)."""

    def job_costs(self) -> list[JobCost]: ...


def _usd(value: float) -> float:
    return round(value, 2) + 0.0


def group(costs: Iterable[JobCost], by: GroupBy) -> list[ChargebackLine]:
    """One line per value of ``by``, the biggest spenders first."""
    buckets: dict[str, list[JobCost]] = {}
    for cost in costs:
        buckets.setdefault(cost.key(by), []).append(cost)
    lines = []
    for key, jobs in buckets.items():
        measured = [j for j in jobs if j.gpu_utilization_mean_percent is not None]
        weight = sum(j.spend_usd or 0.0 for j in measured)
        mean = (
            sum((j.gpu_utilization_mean_percent or 0.0) * (j.spend_usd or 0.0) for j in measured) / weight
            if weight > 0
            else (
                sum(j.gpu_utilization_mean_percent or 0.0 for j in measured) / len(measured) if measured else None
            )
        )
        lines.append(
            ChargebackLine(
                key=key,
                jobs=len(jobs),
                spend_usd=_usd(sum(j.spend_usd or 0.0 for j in jobs)),
                idle_cost_usd=_usd(sum(j.idle_cost_usd or 0.0 for j in jobs)),
                saved_usd=_usd(sum(j.saved_usd for j in jobs)),
                idle_gpu_hours=round(sum(j.idle_gpu_hours or 0.0 for j in jobs), 3),
                gpu_utilization_mean_percent=None if mean is None else round(mean, 1),
                jobs_without_metrics=len(jobs) - len(measured),
                jobs_unpriced=sum(1 for j in jobs if j.spend_usd is None),
            )
        )
    return sorted(lines, key=lambda line: (-line.spend_usd, line.key))


# ---- rendering ----------------------------------------------------------------------------------

FIELDS: Final = (
    "spend_usd",
    "idle_cost_usd",
    "saved_usd",
    "idle_gpu_hours",
    "gpu_utilization_mean_percent",
    "jobs",
    "jobs_without_metrics",
    "jobs_unpriced",
)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def to_csv(lines: Sequence[ChargebackLine], by: GroupBy) -> str:
    """``<by>, spend_usd, idle_cost_usd, saved_usd, ...``: one row per group (an unknown figure is empty)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([by.value.replace("-", "_"), *FIELDS])
    for line in lines:
        writer.writerow([line.key, *(_cell(getattr(line, f)) for f in FIELDS)])
    return out.getvalue()


def to_json(lines: Sequence[ChargebackLine], by: GroupBy, source: str) -> dict[str, Any]:
    return {
        "by": by.value,
        "source": source,
        "groups": [line.model_dump() for line in lines],
        "totals": {
            "jobs": sum(line.jobs for line in lines),
            "spend_usd": _usd(sum(line.spend_usd for line in lines)),
            "idle_cost_usd": _usd(sum(line.idle_cost_usd for line in lines)),
            "saved_usd": _usd(sum(line.saved_usd for line in lines)),
        },
    }


# ---- source: a simulation report ------------------------------------------------------------------


class SimulationReportSource:
    """The jobs of one simulation report or a list of them (``smgov simulate --json``)."""

    def __init__(self, report: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        self._reports = [report] if isinstance(report, Mapping) else list(report)
        for item in self._reports:
            if not isinstance(item, Mapping) or not isinstance(item.get("jobs"), list):
                raise ValueError("not a simulation report: no jobs list")

    def job_costs(self) -> list[JobCost]:
        out = []
        for report in self._reports:
            for job in report["jobs"]:
                record = job.get("efficiency") or {}
                spend = job.get("cost_usd")
                out.append(
                    JobCost(
                        job=str(job["name"]),
                        team=job.get("team"),
                        owner=job.get("owner"),
                        project=job.get("project"),
                        instance_type=job.get("instance_type"),
                        spend_usd=spend,
                        idle_cost_usd=_repriced(record, spend),
                        saved_usd=float(job.get("saved_usd") or 0.0),
                        idle_gpu_hours=record.get("idle_gpu_hours"),
                        gpu_utilization_mean_percent=record.get("gpu_utilization_mean_percent"),
                    )
                )
        return out


def _repriced(record: Mapping[str, Any], spend: float | None) -> float | None:
    """The record's idle share of its cost, applied to the simulated cost (the simulator's prices)."""
    idle, cost = record.get("idle_cost_usd"), record.get("cost_usd")
    if idle is None or not cost or spend is None:
        return None
    return round(float(idle) / float(cost) * float(spend), 2)


# ---- source: the deployed stack's audit records (Logs Insights) -----------------------------------


def _literal(value: str) -> str:
    return '"' + value + '"'


def jobs_query() -> str:
    """Per job (centrally: per member account, region and job name, ``central_query``), its efficiency
    record's figures (a job ends once: ``max`` folds a duplicate record)."""
    return "\n".join(
        [
            f"filter message = {_literal(AUDIT_MESSAGE)} and audit.rule = {_literal(EFFICIENCY_RULE_ID)}",
            "| stats latest(audit.team) as team, latest(audit.owner) as owner,"
            " latest(audit.evidence.project) as project, latest(audit.evidence.instance_type) as instance_type,"
            " max(audit.evidence.cost_usd) as spend, max(audit.evidence.idle_cost_usd) as idle,"
            " max(audit.evidence.idle_gpu_hours) as idle_gpu_hours,"
            " max(audit.evidence.gpu_utilization_mean_percent) as gpu by audit.job_name",
        ]
    )


def savings_query() -> str:
    """Per job, what its stops (carried out) were estimated to save."""
    return "\n".join(
        [
            f"filter message = {_literal(AUDIT_MESSAGE)} and audit.action = {_literal(Action.STOP.value)}"
            f" and audit.outcome = {_literal(Outcome.DONE.value)}",
            "| stats max(audit.evidence.estimated_savings_usd) as saved, latest(audit.team) as team,"
            " latest(audit.owner) as owner by audit.job_name",
        ]
    )


# A row's job: its name, and in the central view its member's account and region (rows read like a
# member's, ``detail.`` stripped: ``member.account``); a member's rows have no member fields.
_JOB_COLUMNS: Final = tuple(column.removeprefix(CENTRAL_PREFIX) for column in CENTRAL_JOB_KEY)


def _job_of(row: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(row.get(column, "") for column in _JOB_COLUMNS)


def _float(text: str | None) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def job_costs_from_rows(
    job_rows: Iterable[Mapping[str, str]], saving_rows: Iterable[Mapping[str, str]]
) -> list[JobCost]:
    """The two queries' rows joined by job (a stopped job without an efficiency record still counts its
    saving)."""
    saved = {_job_of(row): row for row in saving_rows}
    out = []
    seen = set()
    for row in job_rows:
        job = _job_of(row)
        seen.add(job)
        out.append(
            JobCost(
                job=job[-1],
                team=row.get("team") or None,
                owner=row.get("owner") or None,
                project=row.get("project") or None,
                instance_type=row.get("instance_type") or None,
                spend_usd=_float(row.get("spend")),
                idle_cost_usd=_float(row.get("idle")),
                idle_gpu_hours=_float(row.get("idle_gpu_hours")),
                gpu_utilization_mean_percent=_float(row.get("gpu")),
                saved_usd=_float(saved.get(job, {}).get("saved")) or 0.0,
            )
        )
    for job, row in saved.items():
        if job not in seen:
            out.append(
                JobCost(
                    job=job[-1],
                    team=row.get("team") or None,
                    owner=row.get("owner") or None,
                    saved_usd=_float(row.get("saved")) or 0.0,
                )
            )
    return out
