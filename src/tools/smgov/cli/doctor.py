"""`smgov doctor`: read-only checks of a deployed stack; exit 1 with the list of what is wrong.
``--canary`` (opt-in, writes) launches a tiny non-compliant job and checks the service records it
(smgov/doctor/canary.py); ``--alarm-canary`` (opt-in, writes) has CloudWatch accept or refuse every alarm
shape the guards create (smgov/doctor/alarm_canary.py)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from smgov.cli.output import EXIT_USAGE, fail
from smgov.local_policy import DEFAULT_STACK


def cmd_doctor(
    args: argparse.Namespace,
    session: Any = None,
    now: datetime | None = None,
    *,
    sleep: Callable[[float], None] | None = None,
    monotonic: Callable[[], float] | None = None,
) -> int:
    import boto3

    from smgov.cfn_template import TEMPLATE_PATH, load_template
    from smgov.doctor.checks import CheckContext, run_checks
    from smgov.doctor.deployment import DeploymentUnreadable, load_deployment
    from smgov.doctor.findings import DoctorReport, Finding, Status

    if args.canary and not (args.canary_role and args.canary_output):
        return fail("--canary needs --canary-role and --canary-output (README: smgov doctor)", EXIT_USAGE)
    session = session or boto3.Session(region_name=args.region)
    region = session.region_name or "?"
    image = args.canary_image if args.canary else None
    if args.canary and not image:
        from smgov.doctor.canary import NoDefaultImage, default_image

        try:
            image = default_image(region)
        except NoDefaultImage as exc:
            return fail(f"--canary: pass --canary-image ({exc})", EXIT_USAGE)
    try:
        deployment = load_deployment(session, args.stack)
    except DeploymentUnreadable as exc:
        report = DoctorReport(args.stack, region, None, [Finding("stack", args.stack, Status.FAIL, str(exc))])
    else:
        template = load_template() if TEMPLATE_PATH.exists() else {}
        context = CheckContext(template=template, now=now or datetime.now(UTC))
        findings = run_checks(deployment, context)
        if args.canary and image:
            findings += _canary(deployment, args, image, context.now, sleep, monotonic)
        if getattr(args, "alarm_canary", False):  # a Namespace built by hand may lack it
            findings += _alarm_canary(deployment, context)
        report = DoctorReport(args.stack, region, deployment.account, findings)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.render(verbose=args.verbose))
    return report.exit_code


def _canary(
    deployment: Any,
    args: argparse.Namespace,
    image: str,
    now: datetime,
    sleep: Callable[[float], None] | None,
    monotonic: Callable[[], float] | None,
) -> list[Any]:
    import time

    from smgov.doctor.canary import CanarySpec, run_canary

    spec = CanarySpec(
        role_arn=args.canary_role,
        image=image,
        output_s3=args.canary_output,
        timeout_seconds=args.canary_timeout,
    )
    return run_canary(deployment, spec, now=now, sleep=sleep or time.sleep, monotonic=monotonic or time.monotonic)


def _alarm_canary(deployment: Any, context: Any) -> list[Any]:
    from smgov.doctor.alarm_canary import CHECK, run_alarm_canary
    from smgov.doctor.checks import effective_policy
    from smgov.doctor.findings import Finding, Status

    policy = effective_policy(deployment, context)  # the `policy` check's own reading, cached
    if policy is None:
        return [Finding(CHECK, "alarms", Status.UNKNOWN, "not tried: no valid policy (see the policy finding)")]
    return run_alarm_canary(deployment, policy, now=context.now)


def register(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="read-only checks of a deployed stack (rules, queues, functions, subscriptions, policies, IAM, "
        "reconciler, dead letters, the service's alarms, event shape, disk metric, the policy document, drift); "
        "exit 1 when something is wrong, 2 when something could not be checked",
    )
    doctor.add_argument("--stack", default=DEFAULT_STACK, metavar="NAME")
    doctor.add_argument("--region", help="the stack's region (default: the AWS configuration's)")
    doctor.add_argument("--json", action="store_true")
    doctor.add_argument("--verbose", "-v", action="store_true", help="list the checks that passed too")
    canary = doctor.add_argument_group("canary (writes: launches one job; README: smgov doctor)")
    canary.add_argument(
        "--canary",
        action="store_true",
        help="also launch a tiny non-compliant CPU training job (ml.m5.large, at most 10 minutes), wait for the "
        "service's audit record about it and stop it",
    )
    canary.add_argument("--canary-role", metavar="ARN", help="the SageMaker execution role the canary runs with")
    canary.add_argument(
        "--canary-image",
        metavar="URI",
        help="any training image (it never needs to train; default: SageMaker's scikit-learn image in the region)",
    )
    canary.add_argument(
        "--canary-output", metavar="S3_URI", help="S3OutputPath for the canary (nothing is written)"
    )
    canary.add_argument(
        "--canary-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the record (default 600)",
    )
    alarms = doctor.add_argument_group(
        "alarm canary (writes: creates alarms and deletes them; README: smgov doctor)"
    )
    alarms.add_argument(
        "--alarm-canary",
        action="store_true",
        help="also send CloudWatch the alarms the guards would create for four synthetic jobs (1, 4 and 12 GPU "
        "hosts, 12 hosts with 2 without GPUs), with their actions off, and delete them: fails if CloudWatch "
        "refuses one",
    )
    doctor.set_defaults(func=cmd_doctor)
