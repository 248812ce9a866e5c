"""`smgov resume`: resume a training job by hand with the same planner the service uses.

    smgov resume JOB_NAME [--on-demand] [--dry-run] [--describe-file FILE --tags-file FILE] [--json]

Lineage tags copied from another job (a console Clone of a clone, a pasted ``ListTags`` output: ``copied_lineage``)
are ignored, as the service ignores them: the clone is ``<job>-r1``, the first of the job's own lineage; online, a
clone those tags name that was made from this job (by a deployment before the service dated them) keeps them.

With ``--describe-file`` (a DescribeTrainingJob response) and ``--tags-file`` (a ListTags response, a
Key/Value list or a tag map) the job is read offline; with ``--dry-run`` nothing is created and
``--json`` prints ``{"request": {...}}``, the exact CreateTrainingJob request (validated by botocore), plus
``fields_not_carried`` and ``fields_unknown_to_botocore`` when the clone cannot carry something of the job
(the second: fields AWS returned that this botocore's model does not know; upgrade botocore).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sagemaker_governance.domain.clone import (
    LINEAGE_TAGS,
    ClonePlanError,
    InvalidCloneRequest,
    ResumeReason,
    copied_lineage,
    own_lineage,
    plan_clone,
)
from sagemaker_governance.domain.job import TERMINAL_STATUSES, parse_tags
from sagemaker_governance.domain.orchestrators import orchestrator_of
from sagemaker_governance.domain.resume import next_clone_name

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    print(message, file=sys.stderr)
    return code


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not JSON, not UTF-8, huge integers
        raise _UsageError(f"{path}: cannot read JSON: {exc}") from exc


class _UsageError(Exception):
    pass


def _tags_from(document: Any, path: str) -> dict[str, str]:
    """A ListTags response (``{"Tags": [...]}``), a Key/Value list or a plain tag map."""
    if isinstance(document, dict) and isinstance(document.get("Tags"), list):
        document = document["Tags"]
    try:
        tags = parse_tags(document)
    except ValueError as exc:
        raise _UsageError(f"{path}: {exc}") from exc
    return tags or {}


def _read_job(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str], Any]:
    """The description, the tags and (online only) the SageMaker client."""
    if args.describe_file:
        description = _read_json(args.describe_file)
        if not isinstance(description, dict):
            raise _UsageError(f"{args.describe_file}: not a DescribeTrainingJob response")
        description.pop("ResponseMetadata", None)
        from sagemaker_governance.adapters.sagemaker_model import unmodelled_paths
        from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY

        unmodelled = unmodelled_paths(description)  # what botocore would drop when parsing this answer
        if unmodelled:
            description[UNMODELLED_FIELDS_KEY] = unmodelled
        return description, _tags_from(_read_json(args.tags_file), args.tags_file), None
    from sagemaker_governance.adapters.sagemaker import SageMakerJobs

    client = _sagemaker_client()
    jobs = SageMakerJobs(client)
    description = jobs.describe(args.job_name)
    return description, jobs.list_tags(str(description["TrainingJobArn"])), client


class _NoClient(Exception):
    """No SageMaker client can be made (no region configured): botocore's reason."""


def _sagemaker_client() -> Any:
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        return boto3.client("sagemaker")
    except (BotoCoreError, ValueError) as exc:  # ValueError: an endpoint botocore cannot form (an empty region)
        raise _NoClient(f"cannot reach SageMaker: {exc}") from exc


def _own_lineage(name: str, tags: dict[str, str], client: Any) -> dict[str, str]:
    """The job's tags without lineage tags copied from another job (``own_lineage``: its clone is ``<name>-r1``, as
    the service plans it), said on stderr; kept when the clone those tags name exists and names this job as its
    source (a deployment before lineage tags were dated to their job resumed it under them), which is read whenever
    a client is at hand (online, or a clone created for real from files; not a dry run from files:
    ``DescribeTrainingJob``, ``ListTags``): the request then meets that clone as "already exists"."""
    if not copied_lineage(name, tags):
        return tags
    earlier = next_clone_name(name, tags)
    if client is not None and earlier is not None:
        from sagemaker_governance.adapters.sagemaker import SageMakerJobs
        from sagemaker_governance.service.resume import cloned_from

        if cloned_from(SageMakerJobs(client), earlier, name):
            print(
                f"{name}: lineage tags copied from another job kept: it was resumed under them as {earlier}",
                file=sys.stderr,
            )
            return tags
    copied = ", ".join(f"{key}={tags[key]}" for key in LINEAGE_TAGS if key in tags)
    print(f"{name}: lineage tags copied from another job ignored ({copied})", file=sys.stderr)
    return own_lineage(name, tags)


def _unusable(name: str, description: dict[str, Any]) -> str | None:
    """Why a description (a file written by hand, perhaps) cannot be the job's: another job's, or a status that is
    not a string (SageMaker's always is; none at all is judged as before)."""
    described = description.get("TrainingJobName")
    if described != name:
        shown = repr(described[:80]) if isinstance(described, str) else f"a {type(described).__name__}"
        return f"the description is of {shown}, not {name!r}"
    status = description.get("TrainingJobStatus")
    if status is not None and not isinstance(status, str):
        return f"the description's TrainingJobStatus is {type(status).__name__}, not a status"
    return None


def _refusal(name: str, description: dict[str, Any], tags: dict[str, str]) -> str | None:
    """Why a clone of the job is not made for real without ``--force``, judged on its description and tags alone,
    before any call (from files it needs no AWS configuration; lineage tags play no part in it): a job that runs
    still, or one an orchestrator owns."""
    status = description.get("TrainingJobStatus")
    if status not in TERMINAL_STATUSES:
        return f"{name} is {status}: stop it first (a clone would share its checkpoints while it runs), or --force"
    owner = orchestrator_of(description, tags)
    if owner is not None:
        return (
            f"{name} belongs to a {owner.kind} ({owner.identity}), which retries it itself: "
            "a clone would run outside its bookkeeping (--force to clone anyway)"
        )
    return None


def cmd_resume(args: argparse.Namespace) -> int:
    from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape, validate_create_request
    from sagemaker_governance.domain.errors import AdapterError

    if bool(args.describe_file) != bool(args.tags_file):
        return _fail("--describe-file and --tags-file go together (both make the command offline)", EXIT_USAGE)
    try:
        description, tags, client = _read_job(args)
    except _UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (AdapterError, _NoClient) as exc:
        return _fail(f"cannot read {args.job_name}: {exc}")
    unusable = _unusable(args.job_name, description)
    if unusable is not None:
        return _fail(unusable, EXIT_USAGE)
    refusal = None if args.dry_run or args.force else _refusal(args.job_name, description, tags)
    if refusal is not None:
        return _fail(refusal)
    if client is None and not args.dry_run and copied_lineage(args.job_name, tags):
        # read from files, created for real, with lineage tags copied from another job: the clone they name is
        # read as online, so a job an earlier deployment resumed under them meets that clone, not a second one
        try:
            client = _sagemaker_client()
        except _NoClient as exc:
            return _fail(f"cannot read the clone that {args.job_name}'s copied lineage tags name: {exc}")
    try:
        tags = _own_lineage(args.job_name, tags, client)
    except AdapterError as exc:
        return _fail(f"cannot read the clone that {args.job_name}'s copied lineage tags name: {exc}")
    try:
        plan = plan_clone(
            description, tags, create_training_job_shape(), reason=ResumeReason.MANUAL, on_demand=args.on_demand
        )
        validate_create_request(plan.request)
    except (ClonePlanError, InvalidCloneRequest) as exc:
        return _fail(f"cannot resume {args.job_name}: {exc}")

    outcome = "planned (dry run)"
    if not args.dry_run:
        from sagemaker_governance.adapters.sagemaker_launcher import SageMakerLauncher

        try:
            outcome = SageMakerLauncher(client or _sagemaker_client()).create_training_job(plan.request).value
        except (AdapterError, _NoClient) as exc:
            return _fail(f"CreateTrainingJob {plan.name} failed: {exc}")

    if args.json:
        out: dict[str, Any] = {"request": plan.request}
        if not args.dry_run:
            out["outcome"] = outcome
        if plan.unexpected_drops:
            out["fields_not_carried"] = list(plan.unexpected_drops)
        if plan.unmodelled:
            out["fields_unknown_to_botocore"] = list(plan.unmodelled)
        print(json.dumps(out, indent=2, default=str))
        return EXIT_OK
    print(f"{args.job_name} -> {plan.name}  (attempt {plan.attempt} of lineage {plan.lineage.root}): {outcome}")
    print(
        f"  on-demand: {'yes' if plan.on_demand else 'no (Spot)'}; checkpoint: {plan.checkpoint_s3_uri or 'none'}"
    )
    owner = orchestrator_of(description, tags)
    if owner is not None:
        print(f"  owned by a {owner.kind} ({owner.identity}, {owner.sign}): the service never clones it")
    if plan.unexpected_drops:
        print(f"  not carried over: {', '.join(plan.unexpected_drops)}")
    if plan.unmodelled:
        import botocore

        print(
            f"  not carried over (unknown to botocore {botocore.__version__}; upgrade it): {', '.join(plan.unmodelled)}"
        )
    return EXIT_OK


def add_parser(sub: Any) -> None:
    """Register `smgov resume` on the top-level sub-parsers."""
    resume = sub.add_parser("resume", help="resume a training job as a clone (same planner as the service)")
    resume.add_argument("job_name", metavar="JOB_NAME")
    resume.add_argument("--on-demand", action="store_true", help="run the clone On-Demand (not Spot)")
    resume.add_argument("--dry-run", action="store_true", help="plan and print; create nothing")
    resume.add_argument(
        "--force",
        action="store_true",
        help="clone even a job still in progress, or one an orchestrator (tuning, AutoML, Pipelines, Batch) owns",
    )
    resume.add_argument("--describe-file", metavar="FILE", help="DescribeTrainingJob response (JSON); offline")
    resume.add_argument("--tags-file", metavar="FILE", help="ListTags response or tag map (JSON); offline")
    resume.add_argument("--json", action="store_true")
    resume.set_defaults(func=cmd_resume)
