"""`smgov org member-template`: the StackSet member template from a `sam package` output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from smgov.cli.output import EXIT_OK, EXIT_USAGE, fail


def cmd_member_template(args: argparse.Namespace) -> int:
    from smgov.cfn_template import load_template
    from smgov.org_member import code_keys, expand

    # Our CloudFormation-aware loader: the SAM CLI's yaml helper re-registers PyYAML's SafeLoader mapping
    # constructor process-wide (which would let duplicate keys through the policy document's strict loader).
    packaged = load_template(Path(args.packaged))
    uris = [
        spec.get("Properties", {}).get(key)
        for spec in packaged.get("Resources", {}).values()
        for key in ("CodeUri", "ContentUri")
        if key in spec.get("Properties", {})
    ]
    if not uris or not all(isinstance(u, str) and u.startswith("s3://") for u in uris):
        return fail(
            f"{args.packaged}: not a `sam package` output (CodeUri/ContentUri must be s3:// URIs)", EXIT_USAGE
        )
    member = expand(packaged, region=args.region)
    Path(args.output).write_text(json.dumps(member, indent=1))
    print("\n".join(code_keys(member)))  # the keys every <prefix>-<region> bucket must hold
    return EXIT_OK


def cmd_policy_template(args: argparse.Namespace) -> int:
    import yaml

    from smgov.local_policy import deployed_settings
    from smgov.org_policy import MAX_TEMPLATE_BODY_BYTES, OrgPolicyError, effective_documents, stackset_template

    try:
        spec = yaml.safe_load(Path(args.spec).read_text())
    except (OSError, yaml.YAMLError) as exc:
        return fail(f"{args.spec}: {exc}", EXIT_USAGE)
    if not isinstance(spec, dict):
        return fail(f"{args.spec}: must be a mapping (regions, targets, policy, ous, accounts)", EXIT_USAGE)
    base = deployed_settings(environ={}).base_policy_document()
    try:
        documents = effective_documents(spec, base)
    except OrgPolicyError as exc:
        return fail(f"{args.spec}: not distributed\n" + "\n".join(f"  - {e}" for e in exc.errors))
    output = Path(args.output)
    output.write_text(json.dumps(stackset_template(spec, documents, args.parameter_name), indent=1))
    for name, text in documents.items():
        print(f"{name}: valid, {len(text.encode())} bytes")
    size = output.stat().st_size
    if size > MAX_TEMPLATE_BODY_BYTES:
        print(
            f"warning: {output} is {size:,} bytes, more than the {MAX_TEMPLATE_BODY_BYTES:,} a template sent in the "
            "request may be (TemplateBody): deploy it with `aws cloudformation deploy --s3-bucket BUCKET` "
            "(README: One policy for the organization)",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_deploy_check(args: argparse.Namespace) -> int:
    from smgov.org_deploy import DeployRefused, check, describe_output, given_parameters, previous_parameters

    try:
        previous = previous_parameters(describe_output(Path(args.previous).read_text()))
        lines = check(previous, given_parameters(args.parameters), confirm_remove=args.confirm_remove)
    except (OSError, ValueError) as exc:
        errors = exc.errors if isinstance(exc, DeployRefused) else [str(exc)]
        return fail("org-deploy refused, nothing deployed:\n" + "\n".join(f"  - {e}" for e in errors), EXIT_USAGE)
    print("first deploy" if previous is None else "upgrade (parameters not given keep their previous value)")
    for line in lines or ["no parameter changes"]:
        print(f"  {line}")
    return EXIT_OK


def register(sub: Any) -> None:
    org = sub.add_parser("org", help="deploy across an AWS Organization (StackSets)")
    org_sub = org.add_subparsers(dest="org_command", required=True)
    member = org_sub.add_parser(
        "member-template",
        help="expand a `sam package` output into the StackSet member template (plain CloudFormation, code "
        "read from <ArtifactBucketPrefix>-<region>); prints the S3 keys each regional bucket must hold",
    )
    member.add_argument("packaged", metavar="PACKAGED.yaml")
    member.add_argument("--output", "-o", required=True, metavar="MEMBER.json")
    member.add_argument(
        "--region",
        default="us-east-1",
        help="region the translator assumes; the ARNs it builds are rewritten to ${AWS::Partition}",
    )
    member.set_defaults(func=cmd_member_template)
    policy = org_sub.add_parser(
        "policy-template",
        help="validate the organization's policy and its per-OU/per-account overrides (every effective "
        "document), then write the StackSet template that puts each in its accounts' SSM parameter",
    )
    policy.add_argument("spec", metavar="ORG_POLICY.yaml")
    policy.add_argument("--output", "-o", required=True, metavar="POLICY_STACKSET.json")
    policy.add_argument(
        "--parameter-name", default="/sagemaker-governance/policy", help="PolicyParameterName of the members"
    )
    policy.set_defaults(func=cmd_policy_template)
    deploy = org_sub.add_parser(
        "deploy-check",
        help="`make org-deploy`'s guard: compare the parameters it passes with the stack's previous ones; refuse "
        "a first deploy without OUs, and removing OUs, regions or the central audit bus unless --confirm-remove",
    )
    deploy.add_argument(
        "previous", metavar="DESCRIBE_STACKS.json", help="describe-stacks output ({} for no stack)"
    )
    deploy.add_argument("parameters", nargs="*", metavar="Key=Value", help="the --parameter-overrides passed")
    deploy.add_argument(
        "--confirm-remove", action="store_true", help="allow removing OUs, regions, the central bus"
    )
    deploy.set_defaults(func=cmd_deploy_check)
