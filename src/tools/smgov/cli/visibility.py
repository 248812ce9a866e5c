"""`smgov audit`, `smgov report`, `smgov report-html`: reading what governance did.

``audit`` and ``report`` find the deployed stack's log groups from its outputs and run Logs Insights
queries over the audit records. With ``--org`` the source is the organization's central log group (the
audit account's stack, org/audit-account.yaml): the same queries under ``detail.``, each decision with
its member account and region, and a members section (who reported, with which version, and every
StackSet instance that is missing, outdated or silent: smgov/org_view.py). ``report-html`` renders a simulation report (``smgov simulate --json``)
as one self-contained HTML file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sagemaker_governance.domain.errors import AdapterError
from smgov.audit_queries import (
    CENTRAL_PREFIX,
    DECISION_COLUMNS,
    MEMBER_COLUMNS,
    CodeLine,
    DurationError,
    Row,
    TeamReport,
    actions_query,
    central_decisions_query,
    central_query,
    code_lines,
    decisions_query,
    governed_jobs_query,
    members_query,
    parse_duration,
    rows_from_results,
    stops_by_code_query,
    team_report,
)
from smgov.chargeback import (
    ChargebackSource,
    GroupBy,
    JobCost,
    SimulationReportSource,
    group,
    job_costs_from_rows,
    jobs_query,
    savings_query,
    to_csv,
    to_json,
)
from smgov.org_view import STACKSET_MODES, Members, member_lines

if TYPE_CHECKING:
    from smgov.adapters.cloudformation import StackInstance, StackOutputs, StackSetInstances
    from smgov.adapters.logs_insights import LogsInsights

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
DEFAULT_STACK = "sagemaker-governance"
DEFAULT_ORG_STACK = "sagemaker-governance-audit"  # the audit account's stack (org/audit-account.yaml)
DEFAULT_STACK_SET = ",".join(STACKSET_MODES)  # org/stackset.yaml's StackSetNames, one per GovernanceMode
CENTRAL_LOG_GROUP_OUTPUT = "CentralAuditLogGroupName"


@dataclass
class Dependencies:
    """What the commands need from outside: the AWS adapters and the time."""

    stacks: StackOutputs
    insights: LogsInsights
    now: Callable[[], datetime]
    stack_sets: StackSetInstances | None = None  # --org: the StackSet's instances (who should report)


def aws_dependencies(region: str | None) -> Dependencies:
    from smgov.adapters.cloudformation import StackOutputs, StackSetInstances
    from smgov.adapters.logs_insights import LogsInsights

    return Dependencies(
        stacks=StackOutputs.connect(region),
        insights=LogsInsights.connect(region),
        now=lambda: datetime.now(UTC),
        stack_sets=StackSetInstances.connect(region),
    )


# Tests replace this to answer AWS locally.
make_dependencies: Callable[[str | None], Dependencies] = aws_dependencies


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _fail(message: str, code: int = EXIT_ERROR) -> int:
    print(message, file=sys.stderr)
    return code


def format_table(rows: Sequence[Sequence[str]], headers: Sequence[str], numeric: Sequence[int] = ()) -> str:
    """A plain aligned text table; ``numeric`` columns are right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


@dataclass(frozen=True)
class Source:
    """Where the audit records are read: one stack's function log groups, or (``org``) the central log
    group of the audit account's stack, where every field is under ``detail.``. The queries are the same;
    ``query`` hands back rows that read like a member's."""

    stack: str
    org: bool = False

    def log_groups(self, deps: Dependencies) -> list[str]:
        if not self.org:
            return deps.stacks.audit_log_groups(self.stack)
        group = deps.stacks.outputs(self.stack).get(CENTRAL_LOG_GROUP_OUTPUT)
        if not group:
            raise AdapterError(
                f"stack {self.stack!r} has no {CENTRAL_LOG_GROUP_OUTPUT} output: is it org/audit-account.yaml?"
            )
        return [group]

    def rewrite(self, query: str) -> str:
        return central_query(query) if self.org else query


def _source(args: argparse.Namespace) -> Source:
    return Source(args.org_stack, org=True) if args.org else Source(args.stack)


def _query(
    deps: Dependencies, source: Source | str, query: str, since: timedelta, *, rewritten: bool = False
) -> list[Row]:
    """Run ``query`` (a member's query; rewritten for the central group unless ``rewritten``)."""
    from smgov.adapters.logs_insights import QueryTruncated

    src = source if isinstance(source, Source) else Source(source)
    text = query if rewritten else src.rewrite(query)
    end = deps.now()
    try:
        results = deps.insights.run(src.log_groups(deps), text, start=end - since, end=end)
    except QueryTruncated as exc:  # a total without the rows beyond the cap would be wrong, silently
        raise QueryTruncated(f"{exc}: ask for a shorter --since than {_describe(since)}") from exc
    return rows_from_results(results, strip=CENTRAL_PREFIX if src.org else "")


def org_members(deps: Dependencies, args: argparse.Namespace) -> Members:
    """Who reported to the central view, and every StackSet instance, with what is wrong with each."""
    from importlib.metadata import version

    rows = _query(deps, _source(args), members_query(), args.since, rewritten=True)
    instances: list[StackInstance] | None = None
    error = None
    names = [n.strip() for n in (args.stack_set or "").split(",") if n.strip()]
    if not names:
        error = "no --stack-set: members that never reported cannot be listed"
    elif deps.stack_sets is None:
        error = "the StackSet's instances cannot be read here"
    else:
        try:  # every StackSet, or none: a member of an unread StackSet would look deployed by hand
            instances = [
                i.model_copy(update={"stack_set": name})
                for name in names
                for i in deps.stack_sets.list(name, args.call_as)
            ]
        except AdapterError as exc:
            error = f"{exc}: members that never reported cannot be listed"
    return member_lines(
        rows, instances, release=version("sagemaker-governance"), since_text=args.since_text, instances_error=error
    )


_MEMBER_HEADERS = (
    "account",
    "region",
    "version",
    "mode",
    "decisions",
    "last seen (UTC)",
    "stack instance",
    "problem",
)


def print_members(members: Members) -> None:
    print("\nMembers (account and region; README: One audit view):")
    if members.instances_error:
        print(f"  note: the StackSet's instances were not read ({members.instances_error})")
    rows = [
        [
            m.account or "-",
            m.region or "-",
            m.version or "-",
            m.mode or "-",
            str(m.decisions),
            m.last_seen or "-",
            m.instance_status or "-",
            m.problem or "ok",
        ]
        for m in members.members
    ]
    if rows:
        print(format_table(rows, _MEMBER_HEADERS, numeric=(4,)))
    else:
        print("  no member reported and none is known")
    if members.problems:
        print(f"\n{len(members.problems)} member(s) need attention.")


# ---- audit --------------------------------------------------------------------------------------


def _key(column: str) -> str:
    """``audit.job_name`` -> ``job_name``, ``@timestamp`` -> ``timestamp``, ``member.account`` -> ``account``."""
    return column.removeprefix("audit.").removeprefix("member.").removeprefix("@")


_AUDIT_HEADERS = ("time (UTC)", "job", "team", "rule", "code", "action", "mode", "outcome", "reason")


def cmd_audit(args: argparse.Namespace) -> int:
    filters: dict[str, Any] = {
        "rule": args.rule,
        "job": args.job,
        "code": args.code,
        "include_no_action": args.all,
        "limit": args.limit,
    }
    try:
        query = central_decisions_query(**filters) if args.org else decisions_query(**filters)
    except ValueError as exc:
        return _fail(str(exc), EXIT_USAGE)
    deps = make_dependencies(args.region)
    columns = (
        DECISION_COLUMNS + tuple(c.removeprefix(CENTRAL_PREFIX) for c in MEMBER_COLUMNS)
        if args.org
        else DECISION_COLUMNS
    )
    try:
        rows = _query(deps, _source(args), query, args.since, rewritten=True)
        members = org_members(deps, args) if args.org else None
    except AdapterError as exc:
        return _fail(str(exc))
    records = [{_key(column): row.get(column, "") for column in columns} for row in rows]
    if args.json:
        if members is None:
            print(json.dumps(records, indent=2))
        else:
            print(json.dumps({"decisions": records, **members.model_dump()}, indent=2))
        return EXIT_OK
    if not records:
        print(f"no governance decisions in the last {args.since_text} matched")
    else:
        headers = _AUDIT_HEADERS + (("account", "region") if args.org else ())
        table = [[r[_key(c)] or "-" for c in columns] for r in records]
        print(format_table(table, headers))
    if members is not None:
        print_members(members)
    return EXIT_OK


# ---- report -------------------------------------------------------------------------------------

_REPORT_HEADERS = ("team", "governed", "stopped", "resumed", "saved USD", "would stop", "would save USD")


def report_lines(deps: Dependencies, source: Source | str, since: timedelta) -> list[TeamReport]:
    governed = _query(deps, source, governed_jobs_query(), since)
    actions = _query(deps, source, actions_query(), since)
    return team_report(governed, actions)


def report_codes(deps: Dependencies, source: Source | str, since: timedelta) -> list[CodeLine]:
    return code_lines(_query(deps, source, stops_by_code_query(), since))


class AuditRecordsSource:
    """Chargeback from a deployed stack's audit records (two Logs Insights queries over its log groups)."""

    def __init__(self, run: Callable[[str], list[Row]]) -> None:
        self._run = run

    def job_costs(self) -> list[JobCost]:
        return job_costs_from_rows(self._run(jobs_query()), self._run(savings_query()))


def chargeback_source(args: argparse.Namespace) -> tuple[ChargebackSource, str]:
    """The source of `smgov report --by`: a simulation report file, else the audit records of the stack
    (or, with ``--org``, of the organization's central log group: the same queries, rewritten)."""
    if args.from_simulation:
        report = json.loads(Path(args.from_simulation).read_text())
        return SimulationReportSource(report), f"simulation report {args.from_simulation}"
    deps = make_dependencies(args.region)
    source = _source(args)
    where = f"organization ({args.org_stack})" if getattr(args, "org", False) else f"stack {args.stack}"
    return (
        AuditRecordsSource(lambda query: _query(deps, source, query, args.since)),
        f"{where}, last {args.since_text}",
    )


_CHARGEBACK_HEADERS = (
    "spend USD",
    "idle USD",
    "saved USD",
    "idle GPU-h",
    "GPU %",
    "jobs",
    "no metrics",
    "unpriced",
)


def cmd_chargeback(args: argparse.Namespace) -> int:
    by = GroupBy(args.by or GroupBy.TEAM.value)
    try:
        source, described = chargeback_source(args)
        lines = group(source.job_costs(), by)
    except (OSError, json.JSONDecodeError) as exc:
        return _fail(f"{args.from_simulation}: cannot read a JSON simulation report: {exc}", EXIT_USAGE)
    except (AdapterError, ValueError) as exc:
        return _fail(str(exc))
    form = "json" if args.json else args.format or "table"
    if form == "csv":
        sys.stdout.write(to_csv(lines, by))
        return EXIT_OK
    if form == "json":
        print(json.dumps(to_json(lines, by, described), indent=2))
        return EXIT_OK
    if not lines:
        print(f"no ended jobs in {described}")
        return EXIT_OK
    table = [
        [
            line.key,
            f"{line.spend_usd:,.2f}",
            f"{line.idle_cost_usd:,.2f}",
            f"{line.saved_usd:,.2f}",
            f"{line.idle_gpu_hours:,.1f}",
            "-" if line.gpu_utilization_mean_percent is None else f"{line.gpu_utilization_mean_percent:.1f}",
            str(line.jobs),
            str(line.jobs_without_metrics),
            str(line.jobs_unpriced),
        ]
        for line in lines
    ]
    print(f"Chargeback by {by.value} ({described}):")
    print(format_table(table, (by.value, *_CHARGEBACK_HEADERS), numeric=range(1, len(_CHARGEBACK_HEADERS) + 1)))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    if args.by or args.from_simulation or args.format:
        return cmd_chargeback(args)
    deps = make_dependencies(args.region)
    source = _source(args)
    try:
        lines = report_lines(deps, source, args.since)
        codes = report_codes(deps, source, args.since)
        members = org_members(deps, args) if args.org else None
    except (AdapterError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        report: dict[str, Any] = {
            "since": args.since_text,
            "teams": [line.model_dump() for line in lines],
            "stops_by_code": [line.model_dump() for line in codes],
        }
        if members is not None:
            report["org"] = members.model_dump()
        print(json.dumps(report, indent=2))
        return EXIT_OK
    if not lines:
        print(f"no governance decisions in the last {args.since_text}")
        if members is not None:
            print_members(members)
        return EXIT_OK
    table = [
        [
            line.team,
            str(line.governed),
            str(line.stopped),
            str(line.resumed),
            f"{line.saved_usd:,.2f}",
            str(line.would_stop),
            f"{line.would_save_usd:,.2f}",
        ]
        for line in lines
    ]
    total_saved = sum(line.saved_usd for line in lines)
    print(f"Governance over the last {args.since_text}, per team (the cost tag):")
    print(format_table(table, _REPORT_HEADERS, numeric=range(1, len(_REPORT_HEADERS))))
    print(f"\nEstimated savings: ${total_saved:,.2f}")
    if codes:
        rows = [[c.code, c.outcome, str(c.jobs), f"{c.saved_usd:,.2f}"] for c in codes]
        print("\nStops by decision code (README: Decision codes):")
        print(format_table(rows, ("code", "outcome", "jobs", "saved USD"), numeric=(2, 3)))
    if members is not None:
        print_members(members)
    return EXIT_OK


# ---- report-html --------------------------------------------------------------------------------


def cmd_report_html(args: argparse.Namespace) -> int:
    from smgov.report_html import render_html

    try:
        report = json.loads(Path(args.input).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return _fail(f"{args.input}: cannot read a JSON simulation report: {exc}", EXIT_USAGE)
    try:
        page = render_html(report)
    except ValidationError as exc:
        return _fail(f"{args.input}: not a simulation report:\n{exc}", EXIT_USAGE)
    Path(args.output).write_text(page, encoding="utf-8")
    print(f"wrote {args.output}")
    return EXIT_OK


# ---- registration -------------------------------------------------------------------------------


def _add_common(parser: argparse.ArgumentParser, default_since: str) -> None:
    parser.add_argument(
        "--since",
        type=_duration,
        default=parse_duration(default_since),
        metavar="DURATION",
        help=f"how far back to look: 30m, 12h, 7d (default {default_since})",
    )
    parser.add_argument("--stack", default=DEFAULT_STACK, help=f"the deployed stack (default {DEFAULT_STACK})")
    parser.add_argument("--region", help="AWS region (default: your AWS configuration)")
    parser.add_argument("--json", action="store_true")
    org = parser.add_argument_group("across an organization (README: One audit view)")
    org.add_argument(
        "--org", action="store_true", help="read every member's records from the audit account's central log group"
    )
    org.add_argument(
        "--org-stack",
        default=DEFAULT_ORG_STACK,
        help=f"the audit account's stack, org/audit-account.yaml (default {DEFAULT_ORG_STACK})",
    )
    org.add_argument(
        "--stack-set",
        default=DEFAULT_STACK_SET,
        help="the StackSets (comma-separated) whose instances should all report, each in its mode; empty to skip "
        f"(default {DEFAULT_STACK_SET})",
    )
    org.add_argument(
        "--call-as",
        default="DELEGATED_ADMIN",
        choices=("SELF", "DELEGATED_ADMIN"),
        help="how the StackSet is read: SELF in the management account (default DELEGATED_ADMIN)",
    )


def register(sub: Any) -> None:
    """Add the commands to the `smgov` sub-command parser."""
    audit = sub.add_parser("audit", help="governance decisions from the deployed stack's audit records")
    _add_common(audit, "7d")
    audit.add_argument("--rule", help="only this rule id")
    audit.add_argument("--job", help="only this training job (all its decisions)")
    audit.add_argument(
        "--code", help="only decisions with this code (e.g. idle.stop.idle; README: Decision codes)"
    )
    audit.add_argument("--all", action="store_true", help="include decisions that did nothing")
    audit.add_argument("--limit", type=int, default=200, help="most rows to show (default 200, at most 10000)")
    audit.set_defaults(func=_with_since_text(cmd_audit))

    report = sub.add_parser(
        "report",
        help="per team: jobs governed, stopped, resumed, estimated savings; with --by: chargeback (spend, "
        "idle cost, saved, GPU efficiency) per team, owner, project or instance type",
    )
    _add_common(report, "30d")
    report.add_argument(
        "--by",
        choices=[g.value for g in GroupBy],
        help="chargeback: group the ended jobs' efficiency records by this (default team)",
    )
    report.add_argument("--format", choices=("table", "csv", "json"), help="chargeback output (default table)")
    report.add_argument(
        "--from-simulation",
        metavar="FILE",
        help="chargeback from a simulation report (`smgov simulate --json`) instead of the stack's audit records",
    )
    report.set_defaults(func=_with_since_text(cmd_report))

    html = sub.add_parser("report-html", help="render a simulation report (JSON) as a self-contained HTML page")
    html.add_argument("input", metavar="INPUT.json", help="the output of `smgov simulate --json`")
    html.add_argument("output", metavar="OUTPUT.html")
    html.set_defaults(func=cmd_report_html)


def _with_since_text(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        args.since_text = _describe(args.since)
        return command(args)

    return run


def _describe(duration: timedelta) -> str:
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
