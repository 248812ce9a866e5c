"""`smgov org member-template`: the StackSet member template from a `sam package` output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from smgov.cli.output import EXIT_OK, EXIT_USAGE, fail


def cmd_member_template(args: argparse.Namespace) -> int:
    from samcli.yamlhelper import yaml_parse

    from smgov.org_member import code_keys, expand

    packaged = yaml_parse(Path(args.packaged).read_text())
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
    member.add_argument("--region", default="us-east-1", help="region the translator assumes (partition only)")
    member.set_defaults(func=cmd_member_template)
