"""`smgov dlq list|redrive`: inspect and redrive what failed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.settings import Settings

if (
    TYPE_CHECKING
):  # imported where a queue is opened: every `smgov` command imports this module for its parser, and
    # boto3 (with botocore) is about half of the CLI's start-up
    from smgov.adapters.dead_letter_queue import DeadLetterQueue


def stack_outputs(stack: str) -> dict[str, str]:
    import boto3

    outputs = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    return {str(o["OutputKey"]): str(o["OutputValue"]) for o in outputs}


def open_queue(args: argparse.Namespace) -> DeadLetterQueue:
    import boto3

    from smgov.adapters.dead_letter_queue import DeadLetterQueue

    sources: dict[str, str] = {}
    url = args.queue_url
    prefix = None
    if url is None:
        outputs = stack_outputs(args.stack)
        # a member stack's queue, or the audit account's central one (org/audit-account.yaml)
        url = outputs.get("DeadLetterQueueUrl") or outputs.get("CentralDeadLetterQueueUrl")
        if url is None:
            raise SystemExit(f"stack {args.stack} has no DeadLetterQueueUrl or CentralDeadLetterQueueUrl output")
        # where a message without DeadLetterQueueSourceArn came from, by the shape of its body
        for shape, key in (("eventbridge", "JobEventsQueueArn"), ("sns", "AlarmQueueArn")):
            if key in outputs:
                sources[shape] = outputs[key]
        # the stack's idle alarm prefix, as its functions derive it, names a dead-lettered alarm's job
        prefix = Settings.model_validate({"STACK_NAME": args.stack}).idle_alarm_prefix
    return DeadLetterQueue(
        boto3.client("sqs"),
        boto3.client("lambda"),
        url,
        sources,
        boto3.client("events"),
        logs_client=lambda region: boto3.client("logs", region_name=region),  # the log group's region
        alarm_prefix=prefix,
    )


def cmd_dlq_list(args: argparse.Namespace, queue: DeadLetterQueue | None = None) -> int:
    queue = queue or open_queue(args)
    letters = queue.peek(limit=args.limit)
    for letter in letters:
        queue.release(letter)
    if args.json:
        print(
            json.dumps(
                [letter.model_dump(exclude={"receipt_handle"}) for letter in letters], indent=2, default=str
            )
        )
        return 0
    if not letters:
        print("the dead-letter queue is empty")
        return 0
    print(f"{'message':<38} {'source':<13} {'job':<32} error")
    for letter in letters:
        print(
            f"{letter.message_id:<38} {letter.source:<13} {(letter.job_name or '-')[:32]:<32} {letter.error[:100]}"
        )
    print(
        f"\n{len(letters)} message(s); `smgov dlq redrive` sends them back to their queue, function, audit bus"
        " or central log group."
    )
    return 0


def cmd_dlq_redrive(args: argparse.Namespace, queue: DeadLetterQueue | None = None) -> int:
    queue = queue or open_queue(args)
    letters = queue.peek(limit=args.limit, visibility_seconds=120)
    chosen = [letter for letter in letters if not args.message_id or letter.message_id in args.message_id]
    failures = 0
    for letter in letters:
        if letter not in chosen or args.dry_run or not letter.redrivable:
            queue.release(letter)
    for letter in chosen:
        if not letter.redrivable:
            print(f"skip {letter.message_id}: {letter.source} message with nothing to redrive (left in the queue)")
            continue
        if args.dry_run:
            print(f"would redrive {letter.message_id} ({letter.job_name or '-'}) to {letter.target}")
            continue
        try:
            queue.redrive(letter)
        except AdapterError as exc:
            failures += 1
            queue.release(letter)  # visible again at once for the next attempt
            print(f"failed {letter.message_id}: {exc}", file=sys.stderr)
            continue
        print(f"redrove {letter.message_id} ({letter.job_name or '-'}) to {letter.target}")
    return 1 if failures else 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    dlq = sub.add_parser("dlq", help="inspect and redrive the dead-letter queue")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    for name, func, text in (
        ("list", cmd_dlq_list, "show what failed, with the error (messages stay in the queue)"),
        (
            "redrive",
            cmd_dlq_redrive,
            "send each original event back to its queue, function, audit bus or log group, then delete it",
        ),
    ):
        command = dlq_sub.add_parser(name, help=text)
        where = command.add_mutually_exclusive_group()
        where.add_argument(
            "--stack", default="sagemaker-governance", help="stack name (its DeadLetterQueueUrl output)"
        )
        where.add_argument("--queue-url")
        command.add_argument("--limit", type=int, default=100)
        if name == "list":
            command.add_argument("--json", action="store_true")
        else:
            command.add_argument("--message-id", action="append", help="only these messages (repeatable)")
            command.add_argument("--dry-run", action="store_true")
        command.set_defaults(func=func)
