"""`smgov`: the command-line tool for platform teams and ML developers."""

from __future__ import annotations

import argparse
import json
import os
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
from smgov.cli import dlq, spot_health
from smgov.cli.output import (
    EXIT_BROKEN_PIPE,
    EXIT_OK,
    EXIT_USAGE,
    command_policy,
    fail,
    stack_option,
    stack_settings,
)
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
        policy = load_policy(args.file, stack_settings(args))
    except PolicyDocumentError as exc:
        return fail(f"{args.file}: invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    teams = ", ".join(sorted(policy.teams)) or "none"
    print(
        f"{args.file}: ok (mode {policy.mode.value}, {len(policy.rules)} rule(s), "
        f"{len(policy.exemptions)} exemption(s), team overrides: {teams})"
    )
    for warning in policy.warnings():
        print(f"  warning: {warning}")
    return EXIT_OK


def cmd_policy_show(args: argparse.Namespace) -> int:
    try:
        policy = command_policy(args, args.file, stack_settings(args))
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


def _event_kind(raw: Any) -> str:
    """``state-change``, ``alarm`` or ``schedule``: which function the event is for."""
    if isinstance(raw, dict) and raw.get("detail-type") == "Scheduled Event":
        return "schedule"
    records = raw.get("Records") if isinstance(raw, dict) else None
    if isinstance(records, list) and records and isinstance(records[0], dict):
        first = records[0]
        if first.get("EventSource") == "aws:sns":
            return "alarm"
        body = first.get("body")
        if (
            first.get("eventSource") == "aws:sqs"
            and isinstance(body, str)
            and '"Type"' in body
            and '"Notification"' in body
        ):
            return "alarm"
    return "state-change"


def cmd_explain(args: argparse.Namespace) -> int:
    from smgov.explain import ExplainError, SavedReads, explain_alarm, explain_event, explain_schedule

    raw_event = _read_json(args.event_file)
    describe = _read_json(args.describe) if args.describe else None
    settings = stack_settings(args)
    try:
        policy = command_policy(args, args.policy, settings)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    kind, now, naming = _event_kind(raw_event), datetime.now(UTC), _naming(settings)
    logs = Path(args.logs) if args.logs else None
    if logs is not None and not logs.exists():
        return fail(f"--logs {logs}: no such file or folder", EXIT_USAGE)
    checkpoints = Path(args.checkpoints) if args.checkpoints else None
    if checkpoints is not None and not checkpoints.is_file():
        return fail(f"--checkpoints {checkpoints}: no such file", EXIT_USAGE)
    try:
        now, evidence = _when_and_evidence(args, kind, raw_event, now)
    except SystemExit as exc:  # its message is printed: the exit code is the answer
        return int(exc.code or 0)
    try:
        if kind == "alarm":
            result = explain_alarm(raw_event, policy, now=now, describe=describe, naming=naming, evidence=evidence)
        elif kind == "schedule":
            result = explain_schedule(
                raw_event,
                policy,
                now=now,
                describe=describe,
                naming=naming,
                interval_minutes=settings.reconcile_interval_minutes,
            )
        else:
            results = [
                explain_event(
                    event,
                    policy,
                    now=now,
                    describe=describe,
                    naming=naming,
                    saved=SavedReads(
                        logs=logs,
                        checkpoints=checkpoints,
                        spot_health=Path(args.spot_health) if args.spot_health else None,
                    ),
                )
                for event in _state_changes(raw_event)
            ]
            result = results[0] if len(results) == 1 else {"batch": results}
    except ExplainError as exc:
        return fail(f"{args.event_file}: {exc}", EXIT_USAGE)
    except ValidationError as exc:
        what = {"alarm": "an alarm notification", "schedule": "a scheduled event"}.get(
            kind, "a training job state change event"
        )
        return fail(f"{args.event_file}: not {what}:\n  - " + "\n  - ".join(format_errors(exc)))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return EXIT_OK
    for one in result.get("batch", [result]):
        _print_explained(one)
    return EXIT_OK


def _when_and_evidence(
    args: argparse.Namespace, kind: str, raw_event: Any, now: datetime
) -> tuple[datetime, dict[str, Any] | None]:
    """When to decide (``--at``; with ``--evidence`` the alarm's StateChangeTime, as the judge reads the
    window before the alarm fired; else now) and the stall judge's reads, checked against their shape."""
    from sagemaker_governance.domain.job import parse_timestamp
    from smgov.explain import alarm_time
    from smgov.stall_evidence import load_evidence

    if args.at:
        try:
            now = parse_timestamp(args.at) or now
        except ValueError as exc:
            raise SystemExit(fail(f"--at: {exc}", EXIT_USAGE)) from exc
    if not args.evidence:
        return now, None
    if kind != "alarm":
        raise SystemExit(
            fail("--evidence is the stall judge's reads: give it with an alarm notification", EXIT_USAGE)
        )
    raw = _read_json(args.evidence)
    try:
        load_evidence(raw)
    except ValidationError as exc:
        errors = "\n  - ".join(format_errors(exc))
        raise SystemExit(fail(f"{args.evidence}: not the stall judge's evidence:\n  - {errors}")) from exc
    try:
        at = None if args.at else alarm_time(raw_event)
    except ValidationError as exc:
        errors = "\n  - ".join(format_errors(exc))
        raise SystemExit(fail(f"{args.event_file}: not an alarm notification:\n  - {errors}")) from exc
    return at or now, raw


def _state_changes(raw: Any) -> list[Any]:
    """The events of an SQS batch from the job-events queue, or the event itself."""
    from sagemaker_governance.events.queue import sqs_bodies

    bodies = sqs_bodies(raw) if isinstance(raw, dict) else None
    return [raw] if bodies is None else [json.loads(body) for _, body in bodies]


SPOT_NUMBERS = (
    "interruption_rate_per_hour",
    "lost_work_per_interruption_hours",
    "capacity_wait_per_interruption_hours",
    "spot_efficiency",
    "remaining_work_hours",
    "spot_cost_usd",
    "on_demand_cost_usd",
    "spot_cost_cluster_hours",
    "on_demand_cost_cluster_hours",
    "spot_hours_to_finish",
    "on_demand_hours_to_finish",
    "max_wait_finishable_work_hours",
)


def _print_explained(result: dict[str, Any]) -> None:
    print(f"job: {result['job']}  ({result['status']})")
    if result.get("assumed"):
        print(f"  (assumed: {result['assumed']})")
    for decision in result["decisions"]:
        print(f"  [{decision['rule']}] {decision['action']} ({decision['mode']}): {decision['reason']}")
        if decision.get("remedy"):
            print(f"      fix: {decision['remedy']}")
        if decision.get("exempted_by"):
            print(f"      exempted by: {decision['exempted_by']}")
        numbers = decision.get("evidence") or {}
        if numbers.get("economics") == "computed":
            print(
                "      numbers: "
                + ", ".join(f"{key} {numbers[key]}" for key in SPOT_NUMBERS if numbers.get(key) is not None)
            )
        elif numbers.get("economics") == "unavailable":
            print(f"      count rule: {numbers.get('economics_note')}")
        for alternative in numbers.get("alternatives") or ():
            print(
                f"      alternative {alternative['instance_type']}: {alternative['verdict']}, {alternative['note']}"
            )
        if numbers.get("alternatives_not_tried"):
            print(f"      alternatives not tried: {numbers['alternatives_not_tried']}")
        diagnosis = decision.get("evidence", {}).get("diagnosis")
        if diagnosis:
            _print_diagnosis(diagnosis)
        if decision.get("judge"):
            _print_judge(decision["judge"])
        if decision.get("alarm"):
            names = decision.get("evidence", {}).get("alarms") or decision["alarm"].get("AlarmNames", [])
            print(f"      alarm(s): {', '.join(names)} (the exact requests: --json)")


def _print_judge(judge: dict[str, Any]) -> None:
    """The stall judge's verdict and its inputs, one line per host and signal."""
    verdicts = {
        "stop": "stop confirmed",
        "veto": "vetoed",
        "insufficient-evidence": "insufficient evidence",
        "wait": "waits for the window",
    }
    signals = judge["signals"]
    window = signals.get("window", {})
    print(
        f"      stall judge: {verdicts.get(judge['verdict'], judge['verdict'])} ({judge['code']}; "
        f"{signals.get('kind', '?')}, window {window.get('start')} .. {window.get('end')}, "
        f"{window.get('minutes')} min)"
    )
    for host, series in signals.get("hosts", {}).items():
        print(f"        {host}: " + "; ".join(_signal_summaries(series)))
    metrics = signals.get("training_metrics") or {}
    if metrics:
        named = ", ".join(f"{name} {'unread' if n is None else n}" for name, n in metrics.items())
        print(f"        training metrics (datapoints): {named}")
    else:
        print("        training metrics: none counted (the job defines none the judge reads)")
    logs = signals.get("logs")
    if logs is None:
        print("        logs: not read")
    elif logs.get("line_in_window_at"):
        print(
            f"        logs: {logs['streams']} stream(s), a line at {logs['line_in_window_at']} ({logs['line_stream']})"
        )
    else:
        print(f"        logs: {logs['streams']} stream(s), no line in the window")
    for line in _writes(signals):
        print(f"        {line}")
    for missing in signals.get("missing", []):
        print(f"        missing: {missing}")
    rejudge = judge.get("rejudge") or {}
    if "quiet_minutes" in rejudge:
        print(
            f"        quiet for {rejudge['quiet_minutes']} min: judged again after {rejudge['window_minutes']} min"
        )
    elif "trigger_minutes" in rejudge:
        print(
            f"        fired on its {rejudge['trigger_minutes']}-min trigger: judged again after "
            f"{rejudge['window_minutes']} min"
        )


def _writes(signals: dict[str, Any]) -> list[str]:
    """What the judge read last, before a stop: the checkpoint location's new objects, the disk's moves."""
    lines = []
    saved = signals.get("checkpoints")
    if saved and saved.get("unread"):
        lines.append(f"checkpoints: {saved['location']} not read ({saved['unread']})")
    elif saved:
        latest = f", the latest at {saved['latest_written_at']}" if saved.get("latest_written_at") else ""
        lines.append(f"checkpoints: {saved['written']} object(s) written since {saved['since']}{latest}")
    disk = signals.get("disk")
    if disk and disk.get("largest_changes"):
        moved = ", ".join(f"{host} {change:g}" for host, change in disk["largest_changes"].items())
        lines.append(f"disk: moved since {disk['since']} (points): {moved}")
    elif disk and not disk.get("unread"):
        lines.append(f"disk: moved since {disk['since']} (points): no host with two datapoints")
    if disk and disk.get("unread"):  # beside what the hosts read said (records before 2026-11-27: alone)
        lines.append(f"disk: not read ({disk['unread']})")
    return lines


def _signal_summaries(series: dict[str, Any]) -> list[str]:
    """One host's signals as the judge summarized them (mean, max, datapoints; busy vCPUs)."""
    shown = []
    for metric, summary in series.items():
        if isinstance(summary, dict):
            points = summary.get("datapoints", 0)
            level = f" mean {summary['mean']:g} max {summary['max']:g}" if points else ""
            shown.append(f"{metric}{level} ({points} points)")
        elif summary is None:
            shown.append(f"{metric} unread")
        elif metric == "busy_vcpus":
            shown.append(f"busy vCPUs {summary:g}")
        elif metric == "cpu_percent_per_vcpu":
            shown.append(f"CPU {summary:g}% per vCPU")
    return shown


def _print_diagnosis(diagnosis: dict[str, Any]) -> None:
    where = f" on {diagnosis['host']}" if diagnosis.get("host") else ""
    signature = diagnosis.get("signature") or "no signature"
    print(
        f"      failure class: {diagnosis['class']} ({signature}{where}; verdict {diagnosis['verdict']}, from {diagnosis['basis']})"
    )
    for line in diagnosis.get("lines", []):
        print(f"        {line['host']}: {line['line']}")
    for note in diagnosis.get("notes", []):
        print(f"      note: {note}")


def _naming(cfg: Settings | None = None) -> Any:
    """The alarm names and topic the deployed stack would use (from the same settings)."""
    from sagemaker_governance.domain.guards.base import AlarmNaming

    cfg = cfg or Settings.from_env()
    # Offline there is no stack: name the topic the way CloudFormation names it (less its random suffix).
    topic = (
        cfg.alarm_topic_arn or f"arn:{cfg.partition}:sns:{cfg.region}:{cfg.account_id}:{cfg.stack_name}-AlarmTopic"
    )
    return AlarmNaming(prefix=cfg.idle_alarm_prefix, managed_by=cfg.stack_name, alarm_topic_arn=topic)


# ---- diagnose -----------------------------------------------------------------------------------


def cmd_diagnose(args: argparse.Namespace) -> int:
    import boto3

    from sagemaker_governance.domain.errors import AdapterError
    from smgov.diagnose import diagnose_job

    settings = stack_settings(args)
    try:
        policy = command_policy(args, args.policy, settings)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors))
    pattern = settings.checkpoint_bucket_pattern if args.checkpoint_buckets is None else args.checkpoint_buckets
    try:
        result = diagnose_job(
            args.job_name,
            policy,
            sagemaker=boto3.client("sagemaker"),
            logs=boto3.client("logs"),
            s3=boto3.client("s3") if pattern else None,
            bucket_pattern=pattern,
            now=datetime.now(UTC),
            role_patterns=(settings.clone_role_pattern,),
        )
    except AdapterError as exc:
        return fail(f"{args.job_name}: {exc}")
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        _print_explained(result)
    return EXIT_OK


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
    stack_option(validate)
    validate.set_defaults(func=cmd_policy_validate)
    show = policy_sub.add_parser("show", help="print the effective policy (defaults + document)")
    show.add_argument("file", nargs="?")
    show.add_argument("--team", help="resolve this team's override")
    show.add_argument("--json", action="store_true")
    stack_option(show)
    show.set_defaults(func=cmd_policy_show)

    explain = sub.add_parser(
        "explain",
        help="what the service would do with an event (offline): a job state change, an alarm notification "
        "or the reconciler's schedule, directly or as an SQS batch",
    )
    explain.add_argument("event_file")
    stack_option(explain)
    explain.add_argument("--describe", metavar="DESCRIBE_FILE", help="DescribeTrainingJob response (JSON)")
    explain.add_argument("--policy", metavar="POLICY_FILE", help="policy document (YAML or JSON)")
    explain.add_argument(
        "--logs",
        metavar="PATH",
        help="a failed job's log lines: a file (one host) or a folder with one file per stream (auto-resume's evidence)",
    )
    explain.add_argument(
        "--checkpoints",
        metavar="FILE",
        help="the job's checkpoint writes: a saved ListObjectsV2 answer (JSON) or ISO 8601 times, one per line "
        "(Spot fallback's economics)",
    )
    explain.add_argument(
        "--spot-health",
        metavar="FILE",
        help="the fleet's Spot health: a saved DynamoDB Query answer of the ledger (JSON; Spot fallback's storm "
        "and alternatives)",
    )
    explain.add_argument(
        "--evidence",
        metavar="FILE",
        help="with an alarm notification: the stall judge's reads (JSON: metric series per host and signal, "
        "training metric datapoints, log streams and lines); the stop is judged as deployed, as at the alarm's "
        "StateChangeTime unless --at",
    )
    explain.add_argument("--at", metavar="TIME", help="decide at this time (ISO 8601; default: now)")
    explain.add_argument("--json", action="store_true")
    explain.set_defaults(func=cmd_explain)

    diagnose = sub.add_parser(
        "diagnose",
        help="why a failed job would (not) be resumed, against the account (read-only: DescribeTrainingJob, "
        "ListTags, its hosts' log tails, its checkpoint listing)",
    )
    diagnose.add_argument("job_name")
    stack_option(diagnose)
    diagnose.add_argument("--policy", metavar="POLICY_FILE", help="policy document (YAML or JSON)")
    diagnose.add_argument(
        "--checkpoint-buckets",
        metavar="GLOB",
        help="bucket-name glob whose checkpoint listing may be read (default: the stack's CheckpointBucketPattern)",
    )
    diagnose.add_argument("--json", action="store_true")
    diagnose.set_defaults(func=cmd_diagnose)

    dlq.register(sub)
    spot_health.register(sub)
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
    from smgov.cli import calibrate, doctor, org

    calibrate.register(sub)
    doctor.register(sub)
    org.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a reader that leaves early (`smgov ... | head`) ends it quietly, as SIGPIPE would."""
    try:
        return _run(argv)
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)  # argparse ignores a failed write of --help or usage
    code: int = args.func(args)
    sys.stdout.flush()  # a reader that left is found here, not at the interpreter's exit
    return code


def _stdout_to_devnull() -> None:
    """Send what is still buffered for stdout to /dev/null, so the interpreter's exit does not fail on it."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
