"""`smgov doctor`: read-only checks of a deployed stack; exit 1 with the list of what is wrong."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from smgov.cli.output import EXIT_VIOLATION, fail
from smgov.local_policy import DEFAULT_STACK


def cmd_doctor(args: argparse.Namespace, session: Any = None, now: datetime | None = None) -> int:
    import boto3

    from smgov.doctor.checks import CheckContext, run_checks
    from smgov.doctor.deployment import DeploymentUnreadable, load_deployment
    from smgov.doctor.findings import DoctorReport, Finding, Status
    from smgov.simulation.template import TEMPLATE_PATH, load_template

    if args.canary:
        return fail("--canary is documented but not built yet (README: smgov doctor)", EXIT_VIOLATION)
    session = session or boto3.Session(region_name=args.region)
    region = session.region_name or "?"
    try:
        deployment = load_deployment(session, args.stack)
    except DeploymentUnreadable as exc:
        report = DoctorReport(args.stack, region, None, [Finding("stack", args.stack, Status.FAIL, str(exc))])
    else:
        template = load_template() if TEMPLATE_PATH.exists() else {}
        context = CheckContext(template=template, now=now or datetime.now(UTC))
        report = DoctorReport(args.stack, region, deployment.account, run_checks(deployment, context))
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.render(verbose=args.verbose))
    return report.exit_code


def register(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="read-only checks of a deployed stack (rules, queues, subscriptions, policies, IAM, reconciler, "
        "dead letters, drift, the policy document); exit 1 when something is wrong, 2 when something "
        "could not be checked",
    )
    doctor.add_argument("--stack", default=DEFAULT_STACK, metavar="NAME")
    doctor.add_argument("--region", help="the stack's region (default: the AWS configuration's)")
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument("--verbose", "-v", action="store_true", help="list the checks that passed too")
    doctor.add_argument(
        "--canary",
        action="store_true",
        help="launch a tiny non-compliant CPU job and check the service records it (not built yet)",
    )
    doctor.set_defaults(func=cmd_doctor)
