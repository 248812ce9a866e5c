"""`smgov preflight REQUEST.json`: check a raw ``CreateTrainingJob`` request before it is sent (CI
pipelines, other SDKs), with the rules the Lambdas run. Exit 0 when it may launch, 1 when refused,
2 when the request or the policy is unusable.

The verdict is on the request that will be sent: with ``--write-request FILE`` the request with the
policy's tag defaults filled in (written to FILE, to send instead), else the file as written (the tags
the defaults would add are named, not assumed: a pipeline that sends the file unchanged sends them not).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def validate_request_shape(request: Any) -> list[str]:
    """Problems botocore's SageMaker service model finds in ``request`` (the list of fields
    ``CreateTrainingJob`` accepts lives there, not here)."""
    import botocore.session
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    if not isinstance(request, dict):
        return [f"the request must be a JSON object, got {type(request).__name__}"]
    operation = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob")
    assert operation.input_shape is not None  # CreateTrainingJob has an input
    try:
        validate_parameters(request, operation.input_shape)
    except ParamValidationError as exc:
        report = str(exc.kwargs.get("report", exc))
        return [line.strip() for line in report.splitlines() if line.strip()]
    return []


def cmd_preflight(args: argparse.Namespace) -> int:
    from sagemaker_governance.domain.policy_document import PolicyDocumentError, format_errors
    from smgov.cli.output import command_policy, fail, stack_settings
    from smgov.local_policy import current_user
    from smgov.preflight import preflight_request

    try:
        request = json.loads(Path(args.request).read_text())
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not JSON, not UTF-8, huge integers
        return fail(f"{args.request}: cannot read a JSON request: {exc}", EXIT_USAGE)
    problems = validate_request_shape(request)
    if problems:
        return fail(
            f"{args.request}: not a valid CreateTrainingJob request:\n  - " + "\n  - ".join(problems), EXIT_USAGE
        )
    settings = stack_settings(args, say_defaults=True)
    try:
        policy = command_policy(args, args.policy, settings, unreadable_code=EXIT_USAGE)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors), EXIT_USAGE)
    now, user = datetime.now(UTC), args.user if args.user is not None else current_user()
    try:
        outcome = preflight_request(
            request, policy, now, user=user, fill_defaults=not args.no_defaults, strict=args.strict
        )
    except ValidationError as exc:
        return fail(f"{args.request}: cannot evaluate:\n  - " + "\n  - ".join(format_errors(exc)), EXIT_USAGE)
    unwritten: dict[str, str] = {}
    if outcome.filled_tags and not args.write_request:
        # Nothing will send the filled request: judge the file as it is, and say what to add
        unwritten = outcome.filled_tags
        tags = ", ".join(f"{key}={value!r}" for key, value in unwritten.items())
        outcome = preflight_request(request, policy, now, user=user, fill_defaults=False, strict=args.strict)
        advice = (
            f"judged as written: the policy's tag defaults would add {tags}, which this file lacks; add them "
            "to its Tags, or give --write-request FILE and send that file"
        )
        outcome = outcome.model_copy(update={"notes": (*outcome.notes, advice)})
    if args.json:
        extra = {"tag_defaults_not_written": unwritten} if unwritten else {}
        print(json.dumps({**outcome.report(), **extra, "request": outcome.request}, indent=2, default=str))
    else:
        print(outcome.render_text())
    if args.write_request:
        Path(args.write_request).write_text(json.dumps(outcome.request, indent=2, default=str) + "\n")
    return EXIT_REFUSED if outcome.refused else EXIT_OK


def register(sub: Any) -> None:
    from smgov.cli.output import stack_option

    parser = sub.add_parser(
        "preflight",
        help="check a CreateTrainingJob request before launch (exit 1 when refused)",
        description="Evaluate a CreateTrainingJob request (JSON, as boto3 or `aws sagemaker create-training-job "
        "--cli-input-json` take it) with the governance rules, before anything is launched.",
    )
    parser.add_argument("request", metavar="REQUEST.json")
    parser.add_argument("--policy", metavar="POLICY_FILE", help="policy document (YAML or JSON)")
    stack_option(parser)
    parser.add_argument("--user", help="value of ${user} in tag defaults (default: your login name)")
    parser.add_argument("--strict", action="store_true", help="refuse on any violation, audit mode included")
    parser.add_argument("--no-defaults", action="store_true", help="do not fill policy tag defaults")
    parser.add_argument(
        "--write-request",
        metavar="FILE",
        help="fill the policy's tag defaults, judge that request and write it to FILE (send FILE); without it "
        "the request is judged as written",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=cmd_preflight)
