"""`smgov iam-policy`: IAM (or SCP) deny statements for ``sagemaker:CreateTrainingJob`` from the policy.

The document goes to stdout (ready for ``aws iam create-policy --policy-document file://...``); what IAM
cannot express, and stays with the deployed service, goes to stderr (or into ``--json``)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def cmd_iam_policy(args: argparse.Namespace) -> int:
    from sagemaker_governance.domain.policy_document import PolicyDocumentError
    from smgov.cli.output import command_policy, fail, stack_settings
    from smgov.iam_policy import IamPolicyTooLarge, NothingToExpress, derive_iam_policy, split_document

    settings = stack_settings(args, say_defaults=True)
    try:
        policy = command_policy(args, args.policy, settings, unreadable_code=EXIT_FAILED)
    except PolicyDocumentError as exc:
        return fail("invalid policy document\n" + "\n".join(f"  - {e}" for e in exc.errors), EXIT_USAGE)
    if args.team is not None and args.team not in policy.teams:
        known = ", ".join(sorted(policy.teams)) or "none"
        print(f"note: team {args.team!r} has no override (known: {known}); using the base policy", file=sys.stderr)
    try:
        derivation = derive_iam_policy(
            policy,
            datetime.now(UTC),
            team=args.team,
            target="scp" if args.scp else "iam",
            partition=args.partition,
            region=args.region,
            account=args.account,
        )
    except IamPolicyTooLarge as exc:
        if not args.split:
            return fail(f"smgov iam-policy: {exc}", EXIT_FAILED)
        derivation = exc.derivation
    except NothingToExpress as exc:
        return fail(f"smgov iam-policy: {exc}", EXIT_FAILED)
    try:
        documents = split_document(derivation) if args.split else [derivation.document]
    except ValueError as exc:
        return fail(f"smgov iam-policy: {exc}", EXIT_FAILED)

    kind = "SCP" if args.scp else "IAM policy"
    if args.json:
        print(json.dumps({**derivation.report(), **({"documents": documents} if args.split else {})}, indent=2))
        return EXIT_OK
    compact = args.minify or args.scp or args.split
    for document in documents:  # with --split: one minified document per line
        print(json.dumps(document, separators=(",", ":")) if compact else json.dumps(document, indent=2))
        size = len(json.dumps(document, separators=(",", ":")))
        print(f"{kind}: {size} of {derivation.limit} characters (minified)", file=sys.stderr)
    if derivation.not_expressible:
        print("Not expressible in IAM (the deployed service still enforces these after launch):", file=sys.stderr)
        for gap in derivation.not_expressible:
            scope = "" if gap.scope == "all" else f" ({gap.scope})"
            print(f"  - [{gap.rule}]{scope} {gap.reason}", file=sys.stderr)
    for note in derivation.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    from smgov.cli.output import stack_option

    parser = sub.add_parser(
        "iam-policy",
        help="IAM/SCP deny statements for CreateTrainingJob derived from the policy",
        description="Emit deny statements for what IAM condition keys can express of the governance policy; "
        "list what they cannot (the deployed service keeps enforcing it after launch).",
    )
    parser.add_argument("--policy", metavar="POLICY_FILE", help="policy document (YAML or JSON)")
    stack_option(parser)
    parser.add_argument(
        "--team",
        help="the statements of this team's effective policy, for its jobs only (selected by the team tag)",
    )
    parser.add_argument("--scp", action="store_true", help="a Service Control Policy (5,120 characters, minified)")
    parser.add_argument("--partition", default="aws", help="ARN partition (aws, aws-cn, aws-us-gov)")
    parser.add_argument(
        "--region", default="*", help="apply the statements in one region (aws:RequestedRegion; a glob may do)"
    )
    parser.add_argument(
        "--account", default="*", help="apply the statements in one account id (aws:PrincipalAccount)"
    )
    parser.add_argument("--minify", action="store_true", help="print the document without white space")
    parser.add_argument(
        "--split",
        action="store_true",
        help="over the size limit: the statements as several documents, each within it, to attach side by side "
        "(SCPs: at most 4, beside FullAWSAccess)",
    )
    parser.add_argument("--json", action="store_true", help="document, size, limit and gaps as one JSON object")
    parser.set_defaults(func=cmd_iam_policy)
