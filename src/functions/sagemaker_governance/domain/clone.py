"""Planning a faithful clone of a training job: the ``CreateTrainingJob`` request that resumes it.

Pure. The fields ``CreateTrainingJob`` accepts are not written down here: an adapter reads them from
botocore's service model into a ``RequestShape`` (plain data) that the planner receives. The planner
walks the ``DescribeTrainingJob`` answer along that shape, member by member and recursively, so it
carries over every field the API accepts (including fields added after this code was written) and drops
every read-only one the description adds, at any depth (statuses, timestamps, ARNs).

Naming: a clone is named after the lineage's *root* job plus the attempt number, so names never grow
from generation to generation, the same source always yields the same clone name (a duplicate event
meets "already exists", which is success), and a clone never takes its source's name.

Lineage tags on the clone (``smgov:root-job``, ``smgov:resumed-from``, ``smgov:attempt``,
``smgov:resume-reason``) let the next generation find its root and attempt count (the retry budget). They
count only on the job their root and attempt name (``copied_lineage``): a job launched with another job's tags
is the first of its own lineage (``own_lineage``), unless a deployment before this rule already cloned it under
them (the service then keeps them: ``service/resume.py``, ``_CloneReaction._own_lineage``).
The clone carries the source's other tags, the owner's ``smgov:`` declarations included (the quiet phases
``smgov:idle-minutes`` and ``smgov:progress-minutes`` a job declares: ``domain/tolerance.py``); only the
marks governance left on the source (``GOVERNANCE_MARKS``) are not inherited.

A move to another instance type keeps the job's ``ResourceConfig.VolumeKmsKeyId``, the owner's key: it is
never dropped. SageMaker refuses one on an instance type with local storage, so a job with a key moves
only to a type known to have none (``volume_key_refusal``); otherwise the move is refused (Spot fallback
then goes On-Demand on the job's own type, which its key already runs on).

Warm pools (``ResourceConfig.KeepAlivePeriodInSeconds``) cannot be used with Managed Spot training. The
choice made here: a clone never gains a warm pool its source did not have, and a clone that runs on
Spot never carries one. A Spot source had none, so its On-Demand clone has none either; an On-Demand
source resumed On-Demand keeps its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, Final

from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.instances import has_local_storage
from sagemaker_governance.domain.job import NAME_MAX, UNMODELLED_FIELDS_KEY, is_valid_job_name

# ---- the accepted request shape (read from botocore by an adapter) ------------------------------


@dataclass(frozen=True)
class ShapeNode:
    """One shape of the API model: a structure's members, a list's item or a map's value, by shape name."""

    kind: str  # "structure" | "list" | "map" | "scalar"
    members: Mapping[str, str] = field(default_factory=dict)
    item: str | None = None
    min_length: int | None = None  # strings, lists and maps: the model's "min"
    # Members the model documents as returned by DescribeTrainingJob but not accepted by CreateTrainingJob
    # (e.g. ResourceConfig.SelectedInstanceType): dropped, as expected.
    read_only_members: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RequestShape:
    """The input shape of ``CreateTrainingJob`` as plain data (shapes by name: recursion is fine)."""

    root: str
    shapes: Mapping[str, ShapeNode]
    # Top-level fields DescribeTrainingJob returns that CreateTrainingJob does not accept (expected drops).
    read_only: frozenset[str] = frozenset()

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self.shapes[self.root].members)

    def prune(self, value: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """``value`` reduced to what the shape accepts, and the paths of everything dropped."""
        pruned, dropped, _ = self.prune_with_expected(value)
        return pruned, dropped

    def prune_with_expected(
        self, value: Mapping[str, Any]
    ) -> tuple[dict[str, Any], tuple[str, ...], frozenset[str]]:
        """Like :meth:`prune`, plus which dropped paths are documented read-only members."""
        dropped: list[str] = []
        expected: set[str] = set()
        pruned = self._prune(value, self.root, "", dropped, expected)
        return (pruned if isinstance(pruned, dict) else {}), tuple(dropped), frozenset(expected)

    def _prune(self, value: Any, shape_name: str, path: str, dropped: list[str], expected: set[str]) -> Any:
        node = self.shapes[shape_name]
        if value is None:
            return _MISSING
        out: Any
        if node.kind == "structure":
            if not isinstance(value, Mapping):
                dropped.append(path or "<root>")
                return _MISSING
            out = {}
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                member = node.members.get(key)
                if member is None or key in node.read_only_members:
                    dropped.append(where)
                    if member is not None:
                        expected.add(where)
                    continue
                kept = self._prune(item, member, where, dropped, expected)
                if kept is not _MISSING:
                    out[key] = kept
        elif node.kind == "list":
            if not isinstance(value, list | tuple) or node.item is None:
                dropped.append(path)
                return _MISSING
            out = []
            for index, item in enumerate(value):
                kept = self._prune(item, node.item, f"{path}[{index}]", dropped, expected)
                if kept is not _MISSING:
                    out.append(kept)
        elif node.kind == "map":
            if not isinstance(value, Mapping) or node.item is None:
                dropped.append(path)
                return _MISSING
            out = {}
            for key, item in value.items():
                kept = self._prune(item, node.item, f"{path}.{key}", dropped, expected)
                if kept is not _MISSING:
                    out[key] = kept
        elif isinstance(value, Mapping | list | tuple):
            dropped.append(path)  # a container where the model has a scalar: not carried over
            return _MISSING
        else:
            out = value  # scalars are immutable
        # Descriptions may hold empty values the request would reject (e.g. ``KmsKeyId: ""``).
        if node.min_length and isinstance(out, str | list | dict) and not out:
            dropped.append(path)
            return _MISSING
        return out


_MISSING: Final = object()

# ---- names --------------------------------------------------------------------------------------

_HASH_CHARS: Final = 6


def clone_name(root: str, attempt: int) -> str:
    """The name of attempt ``attempt`` (1, 2, ...) of the lineage rooted at job ``root``.

    ``<root>-r<attempt>`` when it fits in 63 characters; otherwise the root is cut and a short hash of
    the whole root keeps lineages with a common prefix apart: ``<root cut>-<hash>-r<attempt>``.
    """
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    if not is_valid_job_name(root):
        raise ValueError(f"not a valid training job name: {root!r}")
    suffix = f"-r{attempt}"
    if len(root) + len(suffix) <= NAME_MAX:
        return root + suffix
    digest = hashlib.sha256(root.encode()).hexdigest()[:_HASH_CHARS]
    keep = NAME_MAX - len(suffix) - _HASH_CHARS - 1
    # A valid name starts with an alphanumeric, so the cut keeps one; hyphens before "-" are allowed.
    return f"{root[:keep]}-{digest}{suffix}"


# ---- lineage ------------------------------------------------------------------------------------

TAG_PREFIX: Final = "smgov:"
TAG_ROOT: Final = "smgov:root-job"
TAG_SOURCE: Final = "smgov:resumed-from"
TAG_ATTEMPT: Final = "smgov:attempt"
TAG_REASON: Final = "smgov:resume-reason"
# Set on a clone when it is known: the source's fault ("<class>@<host>", the lemon rule) and the extra
# budget the lineage has spent on faults that recurred on the same host position (domain/resume.py).
TAG_FAILURE: Final = "smgov:failure"
TAG_STRIKES: Final = "smgov:repeat-faults"
# Set on a clone when SageMaker retried earlier generations inside themselves (``RetryStrategy``): how many
# times in all, so each generation's retries keep spending the lineage's budget (domain/resume.py).
TAG_RETRIES: Final = "smgov:sagemaker-retries"
# Set on a failed job whose resume waits for its backoff, or for its source to end (domain/resume.py): when
# the reconciler may resume it ("YYYY-MM-DDTHH:MM:SSZ", UTC). Not a lineage tag: a clone never inherits it
# (a governance mark).
TAG_RESUME_AFTER: Final = "smgov:resume-after"
# Set on such a job once its deferred resume was decided for good (the code of that decision and the job's name,
# e.g. resume.skip.source-stopped@llm-sft-1-r1; a bare code before marks named their job): the reconciler no
# longer decides it again at each run. One that names another job was copied with the job's request and does
# not count (domain/resume.py's is_settled). The service keeps
# smgov:resume-after (it has AddTags, not DeleteTags). Not a lineage tag either.
TAG_RESUME_SETTLED: Final = "smgov:resume-settled"
# Set on a job compliance has evaluated (domain/compliance.py's EVALUATED_TAG, written out here: the clone
# planner does not import the policy; a test keeps the two equal). A clone is a new job, evaluated afresh.
TAG_COMPLIANCE_EVALUATED: Final = "smgov:compliance-evaluated"
LINEAGE_TAGS: Final = (TAG_ROOT, TAG_SOURCE, TAG_ATTEMPT, TAG_REASON, TAG_FAILURE, TAG_STRIKES, TAG_RETRIES)
# Every tag governance writes on a training job: none is inherited by a clone (the lineage tags are written
# anew). Any other ``smgov:`` tag is the owner's (a declaration such as ``smgov:idle-minutes``) and is carried;
# a test finds every ``smgov:`` tag the code names and checks it is listed here or known as the owner's.
GOVERNANCE_MARKS: Final = frozenset(
    {*LINEAGE_TAGS, TAG_RESUME_AFTER, TAG_RESUME_SETTLED, TAG_COMPLIANCE_EVALUATED}
)
# The marks the service writes on a job after its creation (``AddTags``: compliance's, a deferred resume's and
# its settling). A clone is planned with room for each of them: SageMaker holds at most MAX_TAGS tags on a
# resource, and a mark refused at the limit would lose a deferred resume. A test reads every mark the service
# writes from its code and checks it is listed here.
LATER_MARKS: Final = (TAG_COMPLIANCE_EVALUATED, TAG_RESUME_AFTER, TAG_RESUME_SETTLED)
RESERVED_TAG_PREFIX: Final = "aws:"
# At most 50 tags per resource, those already there and those a request adds counted together, "aws:" tags
# not counted ("Tagging AWS resources", https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html;
# botocore's SageMaker model caps one request's TagList at 50).
MAX_TAGS: Final = 50
MAX_ATTEMPT: Final = 9999


class ResumeReason(StrEnum):
    """Why a clone was made: the value of its ``smgov:resume-reason`` tag (tag-value safe)."""

    FAILED = "failed-transient"
    SPOT_INTERRUPTED = "spot-interrupted"
    SPOT_MAX_WAIT = "spot-max-wait"
    SPOT_STORM = "spot-storm"
    SPOT_ALTERNATIVE = "spot-alternative"  # on Spot on another instance type (spot.fallbacks)
    MANUAL = "manual"


class LineageError(ValueError):
    """The lineage tags are present but inconsistent: do not clone, record why."""


@dataclass(frozen=True)
class Lineage:
    root: str
    attempt: int  # 0 for a job governance did not create

    @classmethod
    def of(cls, job_name: str, tags: Mapping[str, str]) -> Lineage:
        root, attempt = tags.get(TAG_ROOT), tags.get(TAG_ATTEMPT)
        if root is None and attempt is None:
            return cls(root=job_name, attempt=0)
        if root is None or attempt is None:
            raise LineageError(f"lineage tags incomplete: {TAG_ROOT}={root!r}, {TAG_ATTEMPT}={attempt!r}")
        if not is_valid_job_name(root):
            raise LineageError(f"{TAG_ROOT} is not a job name: {root!r}")
        # ASCII digits only ("²".isdigit() is true), and short: int() refuses 5000-digit text
        if not (attempt.isascii() and attempt.isdigit() and len(attempt) <= 4) or int(attempt) > MAX_ATTEMPT:
            raise LineageError(f"{TAG_ATTEMPT} is not an attempt number: {attempt!r}")
        return cls(root=root, attempt=int(attempt))

    @property
    def next_attempt(self) -> int:
        return self.attempt + 1


def copied_lineage(job_name: str, tags: Mapping[str, str]) -> bool:
    """Whether the lineage tags on ``tags`` (``job_name``'s) are not the job's own: governance names every clone
    it makes after its lineage (``clone_name(root, attempt)``, unchanged since clones were first made) and tags
    it then, so a job whose name is not the one its ``smgov:root-job`` and ``smgov:attempt`` give, or that
    carries other lineage tags without those two, was launched with another job's tags (SageMaker's console
    Clone copies them, a developer pastes a ``DescribeTrainingJob`` or ``ListTags`` output). Tags that cannot
    be read as a lineage (``LineageError``) are left to ``Lineage.of``'s refusal."""
    try:
        lineage = Lineage.of(job_name, tags)
    except LineageError:
        return False
    if lineage.attempt == 0:
        return any(key in tags for key in LINEAGE_TAGS)
    return clone_name(lineage.root, lineage.attempt) != job_name


def own_lineage(job_name: str, tags: Mapping[str, str]) -> dict[str, str]:
    """``tags`` without lineage tags that are not ``job_name``'s own (``copied_lineage``): the job is then a
    lineage's first job, judged on its own training, budget and source (none), and its clone is named after it."""
    if not copied_lineage(job_name, tags):
        return dict(tags)
    return {key: value for key, value in tags.items() if key not in LINEAGE_TAGS}


# ---- the plan -----------------------------------------------------------------------------------


class CreateOutcome(StrEnum):
    CREATED = "created"
    ALREADY_EXISTS = "already-exists"


class InvalidCloneRequest(AdapterError):
    """The planned request does not pass the API's parameter validation."""


class ClonePlanError(ValueError):
    """No faithful clone can be planned (the message says why); nothing is created."""


class TooManyTags(ClonePlanError):
    """The source's tags leave the clone no room for its lineage tags and the service's later marks. None of
    the owner's tags is dropped to make room (cost-allocation tags among them): no clone."""


def counted_tags(tags: Mapping[str, str]) -> int:
    """How many of ``tags`` count against SageMaker's limit per resource (``aws:`` ones do not)."""
    return sum(1 for key in tags if not key.lower().startswith(RESERVED_TAG_PREFIX))


def has_room_for(tags: Mapping[str, str], *keys: str) -> bool:
    """Whether a job holding ``tags`` can take tags ``keys`` (an existing key is overwritten, not added)."""
    return counted_tags(tags) + sum(1 for key in set(keys) if key not in tags) <= MAX_TAGS


@dataclass(frozen=True)
class ClonePlan:
    source: str
    name: str
    lineage: Lineage
    attempt: int
    reason: ResumeReason
    on_demand: bool
    request: dict[str, Any]
    dropped: tuple[str, ...] = ()  # paths the description held that the request cannot carry
    unexpected_drops: tuple[str, ...] = ()  # of those, the ones that are not known read-only fields
    # Paths AWS returned that the reading botocore's model does not know (it drops them when parsing):
    # the clone cannot carry what was never read (adapters/sagemaker.py finds them in the raw answer).
    unmodelled: tuple[str, ...] = ()

    @property
    def checkpoint_s3_uri(self) -> str | None:
        checkpoint = self.request.get("CheckpointConfig") or {}
        uri = checkpoint.get("S3Uri") if isinstance(checkpoint, Mapping) else None
        return str(uri) if uri else None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "clone_name": self.name,
            "root_job": self.lineage.root,
            "attempt": self.attempt,
            "on_demand": self.on_demand,
            "checkpoint": self.checkpoint_s3_uri,
        }
        if self.unexpected_drops:
            out["fields_not_carried"] = list(self.unexpected_drops)
        if self.unmodelled:
            out["fields_unknown_to_botocore"] = list(self.unmodelled)
        return out

    @property
    def not_carried(self) -> tuple[str, ...]:
        """Everything of the source the clone may lack: unexpected drops and fields botocore never read."""
        return self.unexpected_drops + self.unmodelled


def volume_key_refusal(instance_type: str) -> str | None:
    """Why a job with a ``VolumeKmsKeyId`` may not move to ``instance_type`` (None: it may). "You can't
    request a VolumeKmsKeyId when using an instance type with local storage" (botocore's SageMaker model,
    ResourceConfig.VolumeKmsKeyId); the key is the owner's choice, so the clone never drops it to move."""
    local = has_local_storage(instance_type)
    if local is False:
        return None
    if local:
        return (
            f"{instance_type} has local instance storage, on which SageMaker refuses the job's VolumeKmsKeyId "
            "(the owner's key is never dropped to move)"
        )
    return (
        f"{instance_type} is not known to be without local instance storage, on which SageMaker refuses the "
        "job's VolumeKmsKeyId"
    )


def copyable_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The source's tags a clone may carry: not ``aws:`` (reserved), not a mark governance left on the source
    (``GOVERNANCE_MARKS``: the old lineage, a deferred resume, compliance's evaluation; a clone is a new job,
    evaluated afresh). The owner's own ``smgov:`` declarations (its quiet phases) are carried: without them
    the clone's guards would judge it on the team's default windows."""
    return {
        key: value
        for key, value in tags.items()
        if not key.lower().startswith(RESERVED_TAG_PREFIX) and key not in GOVERNANCE_MARKS
    }


def plan_clone(
    description: Mapping[str, Any],
    tags: Mapping[str, str],
    shape: RequestShape,
    *,
    reason: ResumeReason,
    on_demand: bool = False,
    marks: Mapping[str, str] | None = None,
    instance_type: str | None = None,
) -> ClonePlan:
    """The ``CreateTrainingJob`` request resuming the described job (see the module docstring); ``marks``
    are further ``smgov:`` tags for the clone (what the next generation needs to know); ``instance_type``
    moves a single-type cluster to another type (the instance count as it is)."""
    source = description.get("TrainingJobName")
    if not isinstance(source, str) or not is_valid_job_name(source):
        shown = repr(source[:80]) if isinstance(source, str) else f"a {type(source).__name__}"
        raise ClonePlanError(f"the description has no valid TrainingJobName: {shown}")
    try:
        lineage = Lineage.of(source, tags)
    except LineageError as exc:
        raise ClonePlanError(str(exc)) from exc
    attempt = lineage.next_attempt
    if attempt > MAX_ATTEMPT:
        raise ClonePlanError(f"attempt {attempt} is beyond any retry budget")
    name = clone_name(lineage.root, attempt)
    if name == source:
        raise ClonePlanError(f"lineage tags of {source} would name the clone after itself")

    unmodelled = tuple(str(p) for p in description.get(UNMODELLED_FIELDS_KEY) or ())
    source_fields = {k: v for k, v in description.items() if k != UNMODELLED_FIELDS_KEY}
    request, dropped, expected = shape.prune_with_expected(source_fields)
    request["TrainingJobName"] = name
    # AlgorithmName and TrainingImage are mutually exclusive ("If you specify a value for the
    # AlgorithmName parameter, you can't specify a value for TrainingImage", botocore's SageMaker model);
    # a description of an algorithm job may still carry TrainingImage (empty, or the algorithm's image).
    # An algorithm resource defines its metrics (its TrainingSpecification.MetricDefinitions), which the
    # description lists and SageMaker refuses to have overridden: they are not carried either.
    algorithm = request.get("AlgorithmSpecification")
    if isinstance(algorithm, dict) and algorithm.get("AlgorithmName"):
        paths = [f"AlgorithmSpecification.{m}" for m in ("TrainingImage", "MetricDefinitions") if m in algorithm]
        request["AlgorithmSpecification"] = {
            k: v for k, v in algorithm.items() if k not in {"TrainingImage", "MetricDefinitions"}
        }
        dropped, expected = (*dropped, *paths), expected | set(paths)

    if instance_type is not None:
        resources = dict(request.get("ResourceConfig") or {})
        if resources.get("InstanceGroups") or not resources.get("InstanceType"):
            raise ClonePlanError("only a single-type cluster moves to another instance type")
        refusal = volume_key_refusal(instance_type) if resources.get("VolumeKmsKeyId") else None
        if refusal is not None and instance_type != resources["InstanceType"]:
            raise ClonePlanError(refusal)
        resources["InstanceType"] = instance_type
        request["ResourceConfig"] = resources
    spot = bool(request.get("EnableManagedSpotTraining"))
    if on_demand and spot:
        request["EnableManagedSpotTraining"] = False
        stopping = dict(request.get("StoppingCondition") or {})
        stopping.pop("MaxWaitTimeInSeconds", None)
        request["StoppingCondition"] = stopping
        spot = False
    if spot:
        # Warm pools cannot be used with Managed Spot training: a Spot clone never carries one.
        resources = dict(request.get("ResourceConfig") or {})
        resources.pop("KeepAlivePeriodInSeconds", None)
        request["ResourceConfig"] = resources

    clone_tags = copyable_tags(tags)
    lineage_tags = {
        TAG_ROOT: lineage.root,
        TAG_SOURCE: source,
        TAG_ATTEMPT: str(attempt),
        TAG_REASON: reason.value,
        **{key: value for key, value in (marks or {}).items() if key.startswith(TAG_PREFIX) and value},
    }
    if len(clone_tags) + len(lineage_tags) + len(LATER_MARKS) > MAX_TAGS:
        raise TooManyTags(
            f"{source} has {len(clone_tags)} tags of its owner's to carry; with the {len(lineage_tags)} lineage "
            f"tags and room for the {len(LATER_MARKS)} marks governance writes later, the clone would exceed "
            f"SageMaker's limit of {MAX_TAGS} tags per resource (no tag of the owner's is dropped)"
        )
    request["Tags"] = [{"Key": k, "Value": v} for k, v in {**clone_tags, **lineage_tags}.items()]

    unexpected = tuple(
        path
        for path in dropped
        if path not in expected
        and path not in unmodelled  # reported once, as unknown to botocore
        and path.split(".", 1)[0].split("[", 1)[0] not in shape.read_only
    )
    return ClonePlan(
        source=source,
        name=name,
        lineage=lineage,
        attempt=attempt,
        reason=reason,
        on_demand=on_demand or not bool(request.get("EnableManagedSpotTraining")),
        request=request,
        dropped=dropped,
        unexpected_drops=unexpected,
        unmodelled=unmodelled,
    )


def role_allowed(role_arn: str | None, patterns: tuple[str, ...]) -> bool:
    """Whether governance may pass ``role_arn`` to SageMaker: its name (with path) matches a glob.

    Mirrors the template's ``iam:PassRole`` grant so a disallowed role is recorded as skipped instead of
    failing with AccessDenied. ``*`` in a glob also matches ``/`` (as in IAM resource patterns).
    """
    if not role_arn or ":role/" not in role_arn:
        return False
    name = role_arn.split(":role/", 1)[1]
    return any(fnmatchcase(name, pattern) for pattern in patterns)
