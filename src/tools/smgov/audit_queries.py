"""CloudWatch Logs Insights over the audit records: the queries `smgov audit` / `smgov report` send,
the fields they may reference, and the pure shaping of what comes back. No AWS calls here.

Insights discovers the JSON keys of each Powertools log line, nested keys joined by dots, so an audit
record's fields are ``audit.<field>`` and its evidence ``audit.evidence.<key>``. Only fields of
:class:`~sagemaker_governance.audit.AuditRecord` (by their serialized name) may be referenced, and only
the evidence keys listed in :data:`EVIDENCE_KEYS`; a test checks every query (here and in the
template's saved queries) against both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.audit import AUDIT_MESSAGE, AuditRecord, Outcome
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.domain.job import is_valid_job_name
from sagemaker_governance.domain.rules.base import RULE_ID_PATTERN

# Evidence keys the queries and reports read. Evidence is free-form per rule; these are the keys the
# capabilities promise to write (the integrator keeps them in step with the code that writes them).
EVIDENCE_KEYS: Final[Mapping[str, str]] = {
    "estimated_savings_usd": "idle guard stop: remaining allowed runtime x instances x hourly price",
    # lineage of a clone (auto-resume, Spot fallback); the record's job_name is the source job
    "clone_name": "the job started in place of this one",
    "root_job": "the first job of the lineage",
    "attempt": "the clone's attempt number in the lineage",
    "on_demand": "true when the clone runs On-Demand (a Spot fallback)",
    # the efficiency record of an ended job (rule efficiency-record; chargeback: smgov report --by)
    "cost_usd": "efficiency record: billable time x instances x hourly price",
    "idle_cost_usd": "efficiency record: idle host-time x hourly price",
    "idle_gpu_hours": "efficiency record: GPU-hours of datapoints under the idle percent",
    "gpu_utilization_mean_percent": "efficiency record: mean GPU utilization per GPU over the job's life",
    "instance_type": "efficiency record: the job's instance type (none for a heterogeneous cluster)",
    "project": "efficiency record: the job's project tag (policy project_tag)",
    # the fleet's Spot health as a Spot decision read it (rule spot-fallback; the deciding job excluded)
    "fleet_instance_type": "Spot decision: the instance type whose ledger was read",
    "fleet_interruptions": "Spot decision: interruptions of other jobs of the type in the window",
    "fleet_interrupted_jobs": "Spot decision: distinct other jobs of the type interrupted in the window",
    "fleet_max_wait_jobs": "Spot decision: other jobs of the type that ran out of Spot wait time in the window",
    "fleet_mean_capacity_wait_minutes": "Spot decision: mean capacity wait of the type in the window",
}

MAX_ROWS: Final = 10_000  # Logs Insights returns at most this many rows
_FIELD_RE = re.compile(r"\baudit(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_CODE_RE = re.compile(r"[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*){2,}")
_DURATION_RE = re.compile(r"^\s*([0-9]+)\s*([mhd])\s*$", re.ASCII)
_UNIT_SECONDS: Final = {"m": 60, "h": 3600, "d": 86_400}
MAX_LOOKBACK: Final = timedelta(days=3653)  # the longest log retention CloudWatch offers


def audit_fields() -> frozenset[str]:
    """The top-level keys of a logged audit record (serialized names: ``schema``, not ``schema_version``)."""
    return frozenset(
        info.serialization_alias or info.alias or name for name, info in AuditRecord.model_fields.items()
    )


def referenced_fields(query: str) -> set[str]:
    """Every ``audit.x`` or ``audit.evidence.y`` path a query mentions."""
    return set(_FIELD_RE.findall(query))


def unknown_fields(query: str) -> set[str]:
    """Paths a query mentions that an audit record cannot have (empty when the query is sound)."""
    known = audit_fields()
    bad: set[str] = set()
    for path in referenced_fields(query):
        parts = path.split(".")[1:]
        if parts[0] not in known:
            bad.add(path)
        elif parts[0] == "evidence":
            if len(parts) != 2 or parts[1] not in EVIDENCE_KEYS:
                bad.add(path)
        elif len(parts) != 1:
            bad.add(path)  # only evidence is nested
    return bad


# ---- durations ----------------------------------------------------------------------------------


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> timedelta:
    """``30m``, ``12h``, ``7d``: a positive whole number and a unit, at most ten years."""
    match = _DURATION_RE.match(text)
    if not match:
        raise DurationError(f"not a duration: {text!r} (use a whole number and m, h or d: 30m, 12h, 7d)")
    amount, unit = int(match.group(1)), match.group(2)
    if amount <= 0:
        raise DurationError(f"not a duration: {text!r} (must be more than zero)")
    seconds = amount * _UNIT_SECONDS[unit]
    if seconds > MAX_LOOKBACK.total_seconds():
        raise DurationError(f"duration too long: {text!r} (at most {MAX_LOOKBACK.days}d)")
    return timedelta(seconds=seconds)


# ---- queries ------------------------------------------------------------------------------------


def _literal(value: str) -> str:
    return '"' + value + '"'


def _is_audit_record() -> str:
    return f"message = {_literal(AUDIT_MESSAGE)}"


DECISION_COLUMNS: Final = (
    "@timestamp",
    "audit.job_name",
    "audit.team",
    "audit.rule",
    "audit.code",
    "audit.action",
    "audit.mode",
    "audit.outcome",
    "audit.reason",
)


def decisions_query(
    *,
    rule: str | None = None,
    job: str | None = None,
    code: str | None = None,
    include_no_action: bool = False,
    limit: int = 200,
) -> str:
    """The `smgov audit` query: newest decisions first, optionally one rule and/or one job.

    Decisions that did nothing (action ``none``) are left out unless asked for or a job is named (a
    person looking at one job wants its whole story).
    """
    if rule is not None and not re.fullmatch(RULE_ID_PATTERN.strip("^$"), rule):
        raise ValueError(f"not a rule id: {rule!r} (lower-case letters, digits and dashes)")
    if job is not None and not is_valid_job_name(job):
        raise ValueError(f"not a training job name: {job!r}")
    if code is not None and not _CODE_RE.fullmatch(code):
        raise ValueError(f"not a decision code: {code!r} (e.g. idle.stop.idle; see the README)")
    if not 1 <= limit <= MAX_ROWS:
        raise ValueError(f"limit must be between 1 and {MAX_ROWS}")
    conditions = [_is_audit_record()]
    if not include_no_action and job is None:
        conditions.append(f"audit.action != {_literal(Action.NONE.value)}")
    if rule is not None:
        conditions.append(f"audit.rule = {_literal(rule)}")
    if job is not None:
        conditions.append(f"audit.job_name = {_literal(job)}")
    if code is not None:
        conditions.append(f"audit.code = {_literal(code)}")
    return "\n".join(
        [
            "fields " + ", ".join(DECISION_COLUMNS),
            "| filter " + " and ".join(conditions),
            "| sort @timestamp desc",
            f"| limit {limit}",
        ]
    )


# The report queries count per job first (a job is the last field of the first ``stats``' ``by``, which
# central_query widens to the member's account and region), then per team or code: Logs Insights allows two
# ``stats`` in a query, the second over the first's fields ("Use multiple stats commands in a single query").
# A job's saving is the largest estimate among its records, not their sum: records arrive at least once (a
# forwarded event delivered twice, a dead letter redriven after a PutEvents that had succeeded, a retried
# delivery that records its decision again) and a job is stopped once; the first estimate is the largest
# (the remaining allowed runtime only shrinks). ``dedup`` cannot do it: only ``limit`` may follow it
# (CWL_QuerySyntax-Dedup), and a duplicate re-recorded by a retry carries another time anyway.


def governed_jobs_query() -> str:
    """Per team, how many distinct jobs governance decided anything about."""
    return "\n".join(
        [
            f"filter {_is_audit_record()}",
            "| stats count(*) as records by audit.team, audit.job_name",
            "| stats count(*) as jobs by audit.team",
        ]
    )


REPORTED_ACTIONS: Final = (Action.STOP, Action.CLONE)
REPORTED_OUTCOMES: Final = (Outcome.DONE, Outcome.AUDIT_ONLY)


def actions_query() -> str:
    """Per team, action and outcome: distinct jobs stopped / cloned (done or audit-only) and savings (per job
    first, its largest estimate; then the jobs counted and their savings added per team)."""
    actions = " or ".join(f"audit.action = {_literal(a.value)}" for a in REPORTED_ACTIONS)
    outcomes = " or ".join(f"audit.outcome = {_literal(o.value)}" for o in REPORTED_OUTCOMES)
    group = "audit.team, audit.action, audit.outcome"
    return "\n".join(
        [
            f"filter {_is_audit_record()} and ({actions}) and ({outcomes})",
            f"| stats max(audit.evidence.estimated_savings_usd) as job_saved by {group}, audit.job_name",
            f"| stats count(*) as jobs, sum(job_saved) as saved by {group}",
        ]
    )


def stops_by_code_query() -> str:
    """Stops (done or audit-only) by decision code: why jobs were stopped, and what that saved (per job
    first)."""
    outcomes = " or ".join(f"audit.outcome = {_literal(o.value)}" for o in REPORTED_OUTCOMES)
    group = "audit.code, audit.outcome"
    return "\n".join(
        [
            f"filter {_is_audit_record()} and audit.action = {_literal(Action.STOP.value)} and ({outcomes})",
            f"| stats max(audit.evidence.estimated_savings_usd) as job_saved by {group}, audit.job_name",
            f"| stats count(*) as jobs, sum(job_saved) as saved by {group}",
        ]
    )


class CodeLine(BaseModel):
    """One line of `smgov report`'s stops by decision code (records of smgov.audit/1 have no code)."""

    model_config = ConfigDict(frozen=True)

    code: str
    outcome: str
    jobs: int
    saved_usd: float


def code_lines(rows: Iterable[Row]) -> list[CodeLine]:
    lines = [
        CodeLine(
            code=row.get("audit.code") or NO_CODE,
            outcome=row.get("audit.outcome", ""),
            jobs=int(_number(row.get("jobs"))),
            saved_usd=round(_number(row.get("saved")), 2),
        )
        for row in rows
    ]
    return sorted(lines, key=lambda line: (-line.jobs, line.code, line.outcome))


# ---- the organization's central view (README "One audit view") -----------------------------------
#
# In the audit account each record is the EventBridge event a member forwarded, written whole by the
# central rule's CloudWatch Logs target: the member's log line is its ``detail`` (``detail.message``,
# ``detail.audit.<field>``) and ``detail.member`` names the sender (account, region, stack, version).
# The central queries are the member's, every field under ``detail.``.

CENTRAL_PREFIX: Final = "detail."
_CENTRAL_FIELD_RE = re.compile(r"(?<![\w.@])(audit\.|message\b)")
MEMBER_COLUMNS: Final = ("detail.member.account", "detail.member.region")
# One training job: its name is unique only within an account and region (CreateTrainingJob
# ``TrainingJobName``). A member's log groups are one account's in one region, so there the name tells jobs
# apart; centrally the member's account and region do with it. Not ``job_arn``: a record may lack it (None).
CENTRAL_JOB_KEY: Final = (*MEMBER_COLUMNS, "detail.audit.job_name")
# a stats grouping by job: ``audit.job_name`` last in its ``by`` (rewritten already, under ``detail.``)
_JOB_GROUP_RE = re.compile(
    r"(\bstats [^|\n]* by [^|\n]*?)\bdetail\.audit\.job_name(?=[ \t]*(?:\||$))", re.MULTILINE
)


def central_query(query: str) -> str:
    """The same query over the central log group: ``audit.x`` -> ``detail.audit.x``, ``message`` ->
    ``detail.message``, text inside double quotes (values) left alone; and a ``stats`` grouped by job
    (``audit.job_name`` last in its ``by``) is grouped by the member's account, region and job name."""
    parts = query.split('"')
    for i in range(0, len(parts), 2):  # even parts are outside string literals
        parts[i] = _CENTRAL_FIELD_RE.sub(lambda m: CENTRAL_PREFIX + m.group(1), parts[i])
        parts[i] = _JOB_GROUP_RE.sub(lambda m: m.group(1) + ", ".join(CENTRAL_JOB_KEY), parts[i])
    return '"'.join(parts)


def central_decisions_query(**filters: object) -> str:
    """`smgov audit --org`: the decisions query, with the member (account, region) of each decision."""
    query = central_query(decisions_query(**filters))  # type: ignore[arg-type]
    first, rest = query.split("\n", 1)
    return f"{first}, {', '.join(MEMBER_COLUMNS)}\n{rest}"


def members_query() -> str:
    """Per member (account, region), version and mode: decisions received, and the newest one's time (the
    mode each decision was made in, so a member running another mode than its StackSet deploys shows)."""
    return "\n".join(
        [
            f"filter {central_query(_is_audit_record())}",
            "| stats count(*) as decisions, max(@timestamp) as last_seen"
            " by detail.member.account, detail.member.region, detail.member.version, detail.audit.mode",
        ]
    )


# ---- results ------------------------------------------------------------------------------------

Row = dict[str, str]


def rows_from_results(results: Iterable[Sequence[Mapping[str, str]]], *, strip: str = "") -> list[Row]:
    """GetQueryResults' ``[[{"field", "value"}, ...], ...]`` to plain rows, without Insights' ``@ptr``;
    ``strip``: a prefix removed from field names (``detail.``: central rows read like a member's)."""
    return [
        {
            cell["field"].removeprefix(strip): cell.get("value", "")
            for cell in result
            if cell.get("field") != "@ptr"
        }
        for result in results
    ]


NO_TEAM: Final = "(no team tag)"
NO_CODE: Final = "(no code: smgov.audit/1)"


class TeamReport(BaseModel):
    """One line of `smgov report`."""

    model_config = ConfigDict(frozen=True)

    team: str
    governed: int = 0
    stopped: int = 0
    resumed: int = 0
    saved_usd: float = 0.0
    would_stop: int = 0  # audit mode: stops recorded but not carried out
    would_save_usd: float = 0.0


def _number(text: str | None) -> float:
    if text is None or text.strip() == "":
        return 0.0
    try:
        return float(text)
    except ValueError as exc:
        raise ValueError(f"Logs Insights returned a non-numeric statistic: {text!r}") from exc


@dataclass
class _Acc:
    governed: int = 0
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    saved: dict[tuple[str, str], float] = field(default_factory=dict)


def team_report(governed_rows: Iterable[Row], action_rows: Iterable[Row]) -> list[TeamReport]:
    """Combine the two report queries' rows into one line per team, biggest savings first."""
    teams: dict[str, _Acc] = {}

    def team_of(row: Row) -> _Acc:
        return teams.setdefault(row.get("audit.team") or NO_TEAM, _Acc())

    for row in governed_rows:
        team_of(row).governed += int(_number(row.get("jobs")))
    for row in action_rows:
        key = (row.get("audit.action", ""), row.get("audit.outcome", ""))
        acc = team_of(row)
        acc.counts[key] = acc.counts.get(key, 0) + int(_number(row.get("jobs")))
        acc.saved[key] = acc.saved.get(key, 0.0) + _number(row.get("saved"))

    # string keys: rows hold plain text (a StrEnum member hashes by its name, not its value)
    stop, clone = Action.STOP.value, Action.CLONE.value
    done, audit_only = Outcome.DONE.value, Outcome.AUDIT_ONLY.value
    lines = [
        TeamReport(
            team=team,
            governed=acc.governed,
            stopped=acc.counts.get((stop, done), 0),
            resumed=acc.counts.get((clone, done), 0),
            saved_usd=round(acc.saved.get((stop, done), 0.0), 2),
            would_stop=acc.counts.get((stop, audit_only), 0),
            would_save_usd=round(acc.saved.get((stop, audit_only), 0.0), 2),
        )
        for team, acc in teams.items()
    ]
    return sorted(lines, key=lambda line: (-line.saved_usd, -line.governed, line.team))
