"""`smgov simulate`: run the real service over simulated training jobs on a virtual clock (offline)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_CHECK_FAILED, EXIT_USAGE = 0, 1, 2
# A sentence ends at a period (not an ellipsis's), maybe closing a quote or bracket, before a space or the end.
SENTENCE_END = re.compile(r"(?<!\.)\.[\"')\]]?(?=\s|$)")


def first_sentence(text: str) -> str:
    """The first sentence of `text` on one line: a period inside a token (`ml.p4d`, `spot.storm`) goes on."""
    flat = " ".join(text.split())
    end = SENTENCE_END.search(flat)
    return flat[: end.end()] if end else flat


def add_parser(sub: Any) -> None:
    from smgov.simulation.faults import DEFAULT_RATES, FAULTS
    from smgov.simulation.scenario import DEFAULT_SET

    parser = sub.add_parser(
        "simulate",
        help="run the service over a simulated fleet of training jobs (no AWS account)",
        description=(
            "Simulate training jobs on a virtual clock against the real handlers (moto + a SageMaker double), "
            "routed by template.yaml, with and without governance. Default scenarios: " + ", ".join(DEFAULT_SET)
        ),
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME_OR_FILE",
        help="a built-in scenario name or a scenario YAML file (repeatable; default: the default set)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fleet mix and all ids (default 0)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--series", action="store_true", help="include per-job GPU series and alarms in --json")
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML report (GPU utilization, threshold, actions)",
    )
    parser.add_argument("--template", metavar="TEMPLATE", help="route by this template instead of template.yaml")
    parser.add_argument(
        "--check",
        action="store_true",
        help=(
            "exit 1 when an invariant is broken (a job stopped by mistake, a stall missed, an orphan or "
            "missing alarm, a duplicate clone, a lost event), an outcome differs from the scenario's "
            "expect (with --faults a stop may come one reconciler interval after its stop_within_minutes, "
            "and a move before billing whose deciding event was dropped is reported out of reach), "
            "or, without --faults, a function failed"
        ),
    )
    parser.add_argument(
        "--faults",
        metavar="SPEC",
        help=(
            "inject faults into the governed run: a comma list of "
            + ", ".join(FAULTS)
            + " (or all), each optionally =RATE, e.g. duplicate=0.2,drop=0.05 (bare names: "
            + ", ".join(f"{k} {v:g}" for k, v in DEFAULT_RATES.items())
            + ")"
        ),
    )
    parser.add_argument("--list", action="store_true", help="list the built-in scenarios and exit")
    parser.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from smgov.cfn_template import TEMPLATE_PATH, load_template
    from smgov.simulation.deploy import DeploymentError
    from smgov.simulation.faults import FaultSpec
    from smgov.simulation.report import recovery_line, render, simulate, stall_to_stop_line, summarize
    from smgov.simulation.scenario import (
        DEFAULT_SET,
        builtin_names,
        builtin_scenario,
        load_scenario,
    )

    if args.list:
        names = builtin_names()
        width = max(map(len, names), default=0)
        for name in names:
            print(f"{name:<{width}}  {first_sentence(builtin_scenario(name).description)}")
        return EXIT_OK
    try:
        scenarios = [load_scenario(s) for s in (args.scenario or DEFAULT_SET)]
        template = load_template(args.template or TEMPLATE_PATH)
        faults = FaultSpec.parse(args.faults) if args.faults else None
    except (ValidationError, ValueError, OSError) as exc:
        print(f"smgov simulate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reports: list[dict[str, Any]] = []
    started = time.perf_counter()
    for scenario in scenarios:
        try:
            report = simulate(
                scenario,
                seed=args.seed,
                template=template,
                include_series=args.series or bool(args.html),
                faults=faults,
            )
        except DeploymentError as exc:
            print(f"smgov simulate: cannot deploy the template: {exc}", file=sys.stderr)
            return EXIT_USAGE
        reports.append(report)
        if not args.json:
            print(render(report), end="\n\n", flush=True)
    document: Any = reports[0] if len(reports) == 1 else {"scenarios": reports, "totals": summarize(reports)}
    if args.html:
        from smgov.report_html import render_html

        Path(args.html).write_text(render_html(json.loads(json.dumps(document, default=str))))
        if not args.json:
            print(f"HTML report: {args.html}")
    if args.json:
        if args.html and not args.series:  # the series were computed for the page only
            for report in reports:
                for job in report["jobs"]:
                    job.pop("series", None)
        print(json.dumps(document, indent=2, default=str))
    else:
        if len(reports) > 1:
            totals = summarize(reports)
            print(
                f"all scenarios: cost ${totals['cost_usd']:,.2f} vs ${totals['baseline_cost_usd']:,.2f} without "
                f"governance (saved ${totals['saved_usd']:,.2f}); false stops {totals['false_stops']}, "
                f"missed stalls {totals['missed_stalls']}"
            )
            print(recovery_line(totals))
            if totals.get("stall_to_stop_minutes"):
                print(stall_to_stop_line(totals["stall_to_stop_minutes"]))
        print(f"(simulated in {time.perf_counter() - started:.1f}s wall time, seed {args.seed})")
    if args.check and any(check_failed(r, faulty=faults is not None and faults.enabled) for r in reports):
        return EXIT_CHECK_FAILED
    return EXIT_OK


def check_failed(report: dict[str, Any], *, faulty: bool) -> bool:
    """``--check``: an invariant broken (a false stop or missed stall included), an outcome other than
    the one the scenario expects (unless the scenario marks it as a known gap of the service of today:
    the report shows those), an org scenario's member decision missing from the central view, or, without
    injected faults (crashes and throttling make function errors
    expected), any function error."""
    if any(report["invariants"].values()):
        return True
    if report["totals"].get("unexpected_outcomes"):
        return True
    org = report.get("org")  # one audit view: every member decision reached the central log group, or,
    if org is not None:  # with injected faults, is in its member's dead-letter queue (never lost silently)
        lost = org["missing_from_central"] - (org["dead_lettered_audit_records"] if faulty else 0)
        if lost > 0:
            return True
    return not faulty and bool(report["counters"]["lambda_errors"])
