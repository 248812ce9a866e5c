"""`smgov`: the command-line tool for platform teams and ML developers."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sagemaker_governance.domain.policy_document import (
    PolicyDocumentError,
    format_errors,
)
from sagemaker_governance.settings import Settings
from smgov.cli import dlq
from smgov.cli.output import EXIT_OK, EXIT_USAGE, fail
from smgov.cli.resume import add_parser as add_resume_parser
from smgov.local_policy import load_policy


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (ValueError, RecursionError) as exc:  # ValueError: not JSON, not UTF-8, huge integers
        raise SystemExit(fail(f"{path}: not valid JSON: {exc}", EXIT_USAGE)) from exc


# ---- policy -------------------------------------------------------------------------------------


def cmd_policy_validate(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyDocumentError as exc:
        return fail(f"{args.file}: invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    teams = ", ".join(sorted(policy.teams)) or "none"
    print(
        f"{args.file}: ok (mode {policy.mode.value}, {len(policy.rules)} rule(s), "
        f"{len(policy.exemptions)} exemption(s), team overrides: {teams})"
    )
    return EXIT_OK


def cmd_policy_show(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.file)
        if args.team:
            policy = policy.for_team(args.team)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    document = policy.model_dump(mode="json", exclude_defaults=False)
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=False))
    else:
        print(yaml.safe_dump(document, sort_keys=False), end="")
    return EXIT_OK


# ---- explain ------------------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    from smgov.explain import explain_event

    raw_event = _read_json(args.event_file)
    describe = _read_json(args.describe) if args.describe else None
    try:
        policy = load_policy(args.policy)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    try:
        result = explain_event(raw_event, policy, now=datetime.now(UTC), describe=describe, naming=_naming())
    except ValidationError as exc:
        return fail(
            f"{args.event_file}: not a training job state change event:\n  - " + "\n  - ".join(format_errors(exc))
        )
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return EXIT_OK
    print(f"job: {result['job']}  ({result['status']})")
    for decision in result["decisions"]:
        print(f"  [{decision['rule']}] {decision['action']} ({decision['mode']}): {decision['reason']}")
        if decision.get("remedy"):
            print(f"      fix: {decision['remedy']}")
        if decision.get("exempted_by"):
            print(f"      exempted by: {decision['exempted_by']}")
        if decision.get("alarm"):
            names = decision.get("evidence", {}).get("alarms") or decision["alarm"].get("AlarmNames", [])
            print(f"      alarm(s): {', '.join(names)} (the exact requests: --json)")
    return EXIT_OK


def _naming() -> Any:
    """The alarm names and topic the deployed stack would use (from the same environment)."""
    from sagemaker_governance.domain.idle import AlarmNaming

    cfg = Settings.from_env()
    # Offline there is no stack: name the topic the way CloudFormation names it (less its random suffix).
    topic = (
        cfg.alarm_topic_arn or f"arn:{cfg.partition}:sns:{cfg.region}:{cfg.account_id}:{cfg.stack_name}-AlarmTopic"
    )
    return AlarmNaming(prefix=cfg.idle_alarm_prefix, managed_by=cfg.stack_name, alarm_topic_arn=topic)


# ---- demo ---------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from smgov.simulation.demo import run_demo

    return run_demo(json_output=args.json)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="smgov", description="SageMaker training governance tooling.")
    sub = parser.add_subparsers(dest="command", required=True)

    policy = sub.add_parser("policy", help="check and show governance policy documents")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    validate = policy_sub.add_parser("validate", help="validate a policy document (exit 1 on errors)")
    validate.add_argument("file")
    validate.set_defaults(func=cmd_policy_validate)
    show = policy_sub.add_parser("show", help="print the effective policy (defaults + document)")
    show.add_argument("file", nargs="?")
    show.add_argument("--team", help="resolve this team's override")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_policy_show)

    explain = sub.add_parser("explain", help="what the service would do with an event (offline)")
    explain.add_argument("event_file")
    explain.add_argument("--describe", metavar="DESCRIBE_FILE", help="DescribeTrainingJob response (JSON)")
    explain.add_argument("--policy", metavar="POLICY_FILE", help="policy document (YAML or JSON)")
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(func=cmd_explain)

    dlq.register(sub)
    add_resume_parser(sub)
    from smgov.cli import iam_policy, preflight

    preflight.register(sub)
    iam_policy.register(sub)

    demo = sub.add_parser("demo", help="run the service locally over sample jobs (no AWS account)")
    demo.add_argument("--json", action="store_true")
    demo.set_defaults(func=cmd_demo)

    from smgov.cli import visibility

    visibility.register(sub)  # audit, report, report-html
    from smgov.cli.simulate import add_parser as add_simulate

    add_simulate(sub)
    from smgov.cli import calibrate

    calibrate.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
