"""Preventive IAM: deny statements for ``sagemaker:CreateTrainingJob`` (and tuning jobs) derived from the policy.

Pure: the policy and ``now`` in; an IAM (or Service Control Policy) document and the list of what IAM
cannot express out. The deployed service stays the reactive guard for everything on that list.

Principles:

- **Never stricter than the service.** A statement is emitted only for a rule the service would stop a
  job for (``on_violation: stop`` in ``enforce`` mode). Where IAM can express a rule only approximately,
  the approximation denies a subset of what the rule rejects (never a compliant job): a regular
  expression becomes a wider glob, a multi-tag exemption keeps one of its tags, and the rest is caught
  after launch.
- **Condition keys** (``sagemaker:CreateTrainingJob`` in the Service Authorization Reference):
  ``aws:RequestTag/${TagKey}``, ``aws:TagKeys``, ``sagemaker:InstanceTypes`` (every instance type of the
  request), ``sagemaker:MaxRuntimeInSeconds``; also file-system, KMS, VPC, network-isolation and
  inter-container-encryption keys our rules don't use. There is no key for the instance count, the Spot
  settings (``MaxWaitTimeInSeconds``, ``EnableManagedSpotTraining``) or ``CheckpointConfig``.
- **Hyperparameter tuning jobs** launch their training jobs themselves: IAM authorizes
  ``sagemaker:CreateHyperParameterTuningJob``, which documents the same four keys. Its request differs:
  ``TrainingJobDefinition(s)`` each with a ``ResourceConfig`` (or ``HyperParameterTuningResourceConfig``
  with alternative ``InstanceConfigs``) and ``StoppingCondition``, and the tuning job's own
  ``ResourceLimits.MaxRuntimeInSeconds``. A statement covers it only where the tuning job's keys say what
  each of its training jobs will be: its ``Tags`` "are also added to all training jobs that the tuning job
  launches" (botocore's SageMaker model), so the tag statements apply as they are; a training job may
  use one definition or instance config of several, so instance types deny only when every type the
  tuning job names is disallowed (``ForAllValues:StringNotLike``, with ``Null: false``: an absent key
  denies nothing); which runtime ``sagemaker:MaxRuntimeInSeconds`` carries for it is not documented (a
  definition's, or the tuning job's own limit), so max-runtime has no tuning statement; nor has a rule
  with a job-name-prefix exemption (a training job's name is the tuning job's plus a suffix, which IAM
  cannot compare).
- **Negated operators** (``StringNotLike``, ``StringNotEquals``) are true when the key is absent and,
  with several values, mean "none of them": one statement per tag denies a missing, empty or
  disallowed value at once.
- **Tag keys: IAM ignores their case, the service does not.** Condition key names are not
  case-sensitive, the tag key in ``aws:RequestTag/<key>`` included ("matches a resource tag key named
  either TagKey1 or tagkey1, but not both": IAM User Guide, IAM JSON policy elements: Condition), while the
  service reads the exact key (``team``, not ``Team``). ``aws:TagKeys`` lists the request's keys as written
  and its values compare as strings, case-sensitively. So a statement that reads ``aws:RequestTag/<key>``
  applies only when no other capitalization of the key is in the request
  (``ForAllValues:StringNotLike aws:TagKeys``: one glob per letter of the key, that letter's other case
  and ``?`` for the other letters; with no tags at all the key is absent and ``ForAllValues`` is true),
  so the value IAM reads is the exact key's; a required tag whose exact key is missing is denied by a
  statement of its own (``ForAllValues:StringNotEquals aws:TagKeys [<key>]``: true also when the request
  has no tags). A job carrying a key in two capitalizations is left to the service (listed as a gap).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.clone import LATER_MARKS
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.policy import Exemption, Policy
from sagemaker_governance.domain.rules import (
    AllowedInstanceTypes,
    MaxInstanceCount,
    MaxRuntime,
    RequiredTags,
    SpotCheckpoint,
    TagConstraint,
)
from sagemaker_governance.domain.rules.base import RuleBase

IAM_POLICY_VERSION = "2012-10-17"
CREATE_ACTION = "sagemaker:CreateTrainingJob"
TUNING_ACTION = "sagemaker:CreateHyperParameterTuningJob"
DELETE_TAGS_ACTION = "sagemaker:DeleteTags"
# Documented maximum sizes. IAM does not count white space in managed policies; Organizations counts
# every character of an SCP. We always measure the minified document.
SIZE_LIMITS: Mapping[str, int] = {"iam": 6144, "scp": 5120}
# An OU or account holds at most 5 SCPs, FullAWSAccess (or the allow list the organization uses) included
# (AWS Organizations quotas): at most 4 for these statements.
MAX_SCPS = 4
NON_EMPTY = "?*"
MAX_REPEAT = 256
TAG_KEYS = "aws:TagKeys"
INSTANCE_TYPES = "sagemaker:InstanceTypes"

Target = Literal["iam", "scp"]
Condition = dict[str, dict[str, Any]]


class IamPolicyTooLarge(ValueError):
    def __init__(self, derivation: IamDerivation) -> None:
        size, limit = derivation.size, derivation.limit
        if derivation.target == "scp":
            # SCPs attach to the root, OUs and accounts, never to a team's roles: a per-team document would
            # bind every team of the OU
            advice = (
                f"a Service Control Policy may hold at most {limit}. Split the statements across several SCPs "
                f"attached to the same OU or account (--split; at most {MAX_SCPS + 1} SCPs per target, "
                "FullAWSAccess included)"
            )
        else:
            advice = (
                f"an IAM managed policy may hold at most {limit}. Attach the statements as several managed "
                "policies (--split), or give each team's roles its own document (--team)"
            )
        super().__init__(f"the generated document is {size} characters (minified); {advice}")
        self.derivation = derivation
        self.size = size
        self.limit = limit


class NothingToExpress(ValueError):
    pass


class Gap(BaseModel):
    """Something the policy enforces that the generated document does not (or only partly)."""

    model_config = ConfigDict(frozen=True)

    rule: str
    scope: str  # "all" or "team <name>"
    reason: str


class IamDerivation(BaseModel):
    model_config = ConfigDict(frozen=True)

    target: Target
    document: dict[str, Any]
    not_expressible: tuple[Gap, ...]
    notes: tuple[str, ...]

    def minified(self) -> str:
        return json.dumps(self.document, separators=(",", ":"))

    @property
    def size(self) -> int:
        return len(self.minified())

    @property
    def limit(self) -> int:
        return SIZE_LIMITS[self.target]

    def report(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "document": self.document,
            "size": self.size,
            "limit": self.limit,
            "not_expressible": [g.model_dump() for g in self.not_expressible],
            "notes": list(self.notes),
        }


# ---- glob translation ---------------------------------------------------------------------------


def _glob_literal(char: str) -> str:
    # IAM wildcards are * and ?; "${" starts a policy variable. Such characters become "?" (any one
    # character): the glob then accepts more, never less.
    return "?" if char in "*?$[]{}" else char


def fnmatch_to_iam(pattern: str) -> str:
    """An fnmatch glob (the instance-type patterns) as an IAM glob that accepts at least as much."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "[":
            # as fnmatch reads a set: a "]" right after "[" or "[!" is a member, not the set's end
            start = i + 2 if pattern[i + 1 : i + 2] == "!" else i + 1
            start += pattern[start : start + 1] == "]"
            end = pattern.find("]", start)
            if end != -1:
                out.append("?")
                i = end + 1
                continue
        out.append(char if char in "*?" else _glob_literal(char))
        i += 1
    return _squash("".join(out))


def regex_to_globs(pattern: str) -> tuple[list[str], bool] | None:
    """IAM globs that together accept every string ``re.fullmatch(pattern, s)`` accepts, and whether
    they accept exactly those; None when the expression uses constructs we don't translate (groups,
    inner anchors, flags, back-references)."""
    body = pattern
    if body.startswith("^"):
        body = body[1:]
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    branches = _split_top_level(body)
    if branches is None:
        return None
    globs: list[str] = []
    exact = True
    for branch in branches:
        translated = _branch_to_glob(branch)
        if translated is None:
            return None
        glob, branch_exact = translated
        exact = exact and branch_exact
        if glob not in globs:
            globs.append(glob)
    return globs, exact


def _split_top_level(body: str) -> list[str] | None:
    branches, current, i, in_class = [], "", 0, False
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            current += body[i : i + 2]
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if body[i + 1 : i + 2] == "^":
                current += char
                i += 1
                char = body[i]
            if body[i + 1 : i + 2] == "]":
                current += char
                i += 1
                char = body[i]
        elif char in "()":
            return None
        elif char == "|":
            branches.append(current)
            current = ""
            i += 1
            continue
        current += char
        i += 1
    if in_class:
        return None
    branches.append(current)
    return branches


_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")


class _Atom(NamedTuple):
    glob: str  # one glob character
    exact: bool  # the glob accepts exactly what the atom accepts
    any_char: bool  # the atom is "." (so "*" and "?*" translate its repetitions exactly)
    end: int  # index after the atom


def _atom(branch: str, i: int) -> _Atom | None:
    char = branch[i]
    if char == "\\":
        if i + 1 >= len(branch):
            return None
        nxt = branch[i + 1]
        if nxt in "dwsDWS":
            return _Atom("?", False, False, i + 2)
        if nxt.isalnum():  # \b, \A, \Z, back-references, \n ...: not translated
            return None
        glob = _glob_literal(nxt)
        return _Atom(glob, glob == nxt, False, i + 2)
    if char == "[":
        end = i + 1
        if branch[end : end + 1] == "^":
            end += 1
        if branch[end : end + 1] == "]":
            end += 1
        while end < len(branch) and branch[end] != "]":
            end += 2 if branch[end] == "\\" else 1
        return None if end >= len(branch) else _Atom("?", False, False, end + 1)
    if char == ".":
        return _Atom("?", True, True, i + 1)
    if char in "()^$|*+?{}":
        return None
    glob = _glob_literal(char)
    return _Atom(glob, glob == char, False, i + 1)


def _quantified(branch: str, atom: _Atom) -> tuple[str, bool, int] | None:
    """The atom with its quantifier (if any) as a glob piece, whether exact, and the index after it."""
    i = atom.end
    if i >= len(branch) or branch[i] not in "*+?{":
        return atom.glob, atom.exact, i
    if branch[i] == "{":
        match = _QUANTIFIER.match(branch, i)
        if match is None:
            return None
        low = int(match.group(1))
        high = low if match.group(2) is None else (int(match.group(3)) if match.group(3) else None)
        if low > MAX_REPEAT or (high is not None and high < low):
            return None
        piece = atom.glob * low + ("" if high == low else "*")
        exact = atom.exact and (high == low or (atom.any_char and high is None))
        i = match.end()
    else:
        piece = {"*": "*", "?": "*", "+": atom.glob + "*"}[branch[i]]
        exact = atom.any_char and branch[i] != "?"
        i += 1
    if i < len(branch) and branch[i] in "?+":  # lazy / possessive: same language
        i += 1
    return piece, exact, i


def _branch_to_glob(branch: str) -> tuple[str, bool] | None:
    out: list[str] = []
    exact = True
    i = 0
    while i < len(branch):
        atom = _atom(branch, i)
        if atom is None:
            return None
        quantified = _quantified(branch, atom)
        if quantified is None:
            return None
        piece, piece_exact, i = quantified
        out.append(piece)
        exact = exact and piece_exact
    return _squash("".join(out)), exact


def _squash(glob: str) -> str:
    return re.sub(r"\*{2,}", "*", glob)


# ---- statements ---------------------------------------------------------------------------------


def _sid(*parts: str) -> str:
    words = re.split(r"[^A-Za-z0-9]+", " ".join(parts))
    return "".join(w[:1].upper() + w[1:] for w in words if w)


def other_spellings(key: str) -> list[str]:
    """Globs that together match every other capitalization of ``key`` and never ``key`` itself: per
    letter, that letter in its other case, with ``?`` for the other letters (wider: ``Tags`` matches
    ``T???``, the glob of ``team``'s first letter; a statement kept off such a job only denies less)."""
    globs: list[str] = []
    for i, char in enumerate(key):
        other = char.swapcase()
        if len(other) != 1 or other == char:
            continue
        globs.append(
            "".join(
                other if j == i else ("?" if c.swapcase() != c else _glob_literal(c)) for j, c in enumerate(key)
            )
        )
    return globs


def _one_spelling(*keys: str) -> Condition:
    """True when the request carries no other capitalization of ``keys``: ``aws:RequestTag/<key>`` then
    reads the exact key (or nothing)."""
    globs = [g for key in keys for g in other_spellings(key)]
    return {"ForAllValues:StringNotLike": {TAG_KEYS: globs}} if globs else {}


def _key_absent(key: str) -> Condition:
    """True when the request has no tag with exactly this key (no tags at all included)."""
    return {"ForAllValues:StringNotEquals": {TAG_KEYS: [key]}}


def _tag_condition(key: str, constraint: TagConstraint, scope: str, rule: str, gaps: list[Gap]) -> Condition:
    """The value check of a required tag; it applies only when ``key`` has no other capitalization."""
    return _merge(_tag_value_condition(key, constraint, scope, rule, gaps), _one_spelling(key))


def _tag_value_condition(key: str, constraint: TagConstraint, scope: str, rule: str, gaps: list[Gap]) -> Condition:
    context_key = f"aws:RequestTag/{key}"
    if constraint.values is not None:
        allowed = [v for v in constraint.values if v.strip()]
        if allowed:
            if constraint.pattern is not None:
                gaps.append(
                    Gap(
                        rule=rule,
                        scope=scope,
                        reason=f"tag {key}: pattern {constraint.pattern!r} on top of values",
                    )
                )
            return {"StringNotEquals": {context_key: allowed}}
    globs = [NON_EMPTY]
    if constraint.pattern is not None:
        translated = regex_to_globs(constraint.pattern)
        if translated is None:
            gaps.append(
                Gap(
                    rule=rule,
                    scope=scope,
                    reason=f"tag {key}: pattern {constraint.pattern!r} (IAM checks only that the tag is non-empty)",
                )
            )
        else:
            globs, exact = translated
            if not exact:
                gaps.append(
                    Gap(
                        rule=rule,
                        scope=scope,
                        reason=f"tag {key}: pattern {constraint.pattern!r} approximated by the glob(s) "
                        + ", ".join(globs),
                    )
                )
            globs = [NON_EMPTY if set(g) <= {"*"} else g for g in globs]
    if globs == [NON_EMPTY]:
        gaps.append(Gap(rule=rule, scope=scope, reason=f"tag {key}: a value of only spaces passes IAM"))
    return {"StringNotLike": {context_key: globs}}


class _Piece(NamedTuple):
    sid: str
    condition: Condition  # for CreateTrainingJob
    tuning: Condition | None  # for CreateHyperParameterTuningJob; None: no statement for tuning jobs


def _rule_statements(rule: RuleBase, scope: str, gaps: list[Gap]) -> list[_Piece]:
    """The statements of one enforced rule; gaps for what IAM can't say."""
    out: list[_Piece] = []
    if isinstance(rule, RequiredTags):
        for key, constraint in rule.tags.items():  # a tuning job's tags are its training jobs'
            value = _tag_condition(key, constraint, scope, rule.id, gaps)
            out.append(_Piece(_sid("Require", "Tag", key), value, value))
            out.append(_Piece(_sid("Require", "Tag", "Key", key), _key_absent(key), _key_absent(key)))
        cased = [key for key in rule.tags if other_spellings(key)]
        if cased:
            gaps.append(
                Gap(
                    rule=rule.id,
                    scope=scope,
                    reason=f"tag(s) {', '.join(cased)}: a job that also carries the key in another capitalization "
                    "(IAM reads tag keys case-insensitively, the service only the exact key) is checked for the "
                    "exact key's presence only",
                )
            )
    elif isinstance(rule, AllowedInstanceTypes):
        patterns = sorted({fnmatch_to_iam(p) for p in rule.patterns})
        # a training job uses every type it names (instance groups); a tuning job's training jobs may each
        # use one definition or instance config: denied only when none of its types is allowed
        every: Condition = {
            "ForAllValues:StringNotLike": {INSTANCE_TYPES: patterns},
            "Null": {INSTANCE_TYPES: "false"},
        }
        out.append(_Piece(_sid("Deny", rule.id), {"ForAnyValue:StringNotLike": {INSTANCE_TYPES: patterns}}, every))
        gaps.append(
            Gap(
                rule=rule.id,
                scope=scope,
                reason="tuning jobs: denied only when every instance type they name is disallowed (each of their "
                "training jobs may use one definition or instance config of several)",
            )
        )
    elif isinstance(rule, MaxRuntime):
        seconds = str(int(rule.max_hours * 3600))
        out.append(
            _Piece(_sid("Deny", rule.id), {"NumericGreaterThan": {"sagemaker:MaxRuntimeInSeconds": seconds}}, None)
        )
        gaps.append(
            Gap(
                rule=rule.id,
                scope=scope,
                reason="tuning jobs: which runtime sagemaker:MaxRuntimeInSeconds carries for "
                "CreateHyperParameterTuningJob is not documented (a definition's, or the tuning job's own "
                "ResourceLimits): no statement",
            )
        )
        if rule.max_wait_hours is not None:
            gaps.append(
                Gap(rule=rule.id, scope=scope, reason="MaxWaitTimeInSeconds (Spot) has no IAM condition key")
            )
    elif isinstance(rule, MaxInstanceCount):
        gaps.append(Gap(rule=rule.id, scope=scope, reason="the instance count has no IAM condition key"))
    elif isinstance(rule, SpotCheckpoint):
        gaps.append(
            Gap(rule=rule.id, scope=scope, reason="Spot training and CheckpointConfig have no IAM condition key")
        )
    else:  # a rule type added later: say so rather than guess
        gaps.append(
            Gap(rule=rule.id, scope=scope, reason=f"no IAM translation for rule type {type(rule).__name__}")
        )
    return out


def _exemption_exclusions(
    exemptions: Iterable[Exemption], rule_id: str, now: datetime
) -> tuple[list[str], Condition, list[str]]:
    """Job-name prefixes and tag conditions that keep a statement off exempt jobs, and notes. A tag
    condition also keeps the statement off a job carrying the tag's key in another capitalization (IAM
    could read that one's value): such a job is exempted by IAM, wider than the service."""
    prefixes: list[str] = []
    tags: dict[str, list[str]] = {}
    notes: list[str] = []
    for exemption in exemptions:
        if not exemption.covers(rule_id) or exemption.expired(now):
            continue
        if exemption.job_name_prefix is not None:
            # Whether the training-job ARN IAM authorizes carries the name as written or lower-cased is not
            # documented (AWS's managed policy AWSBatchServiceRolePolicyForSageMaker grants CreateTrainingJob
            # on training-job/AWSBatch*, mixed case): both, each only ever exempting more than the service.
            glob = "".join(_glob_literal(c) for c in exemption.job_name_prefix)
            prefixes.extend([glob, glob.lower()])
            if exemption.tag:
                notes.append(f"exemption {exemption.label()!r}: IAM matches the name prefix only (wider)")
        elif exemption.tag:
            key, value = sorted(exemption.tag.items())[0]
            tags.setdefault(f"aws:RequestTag/{key}", []).append(value)
            if len(exemption.tag) > 1:
                notes.append(f"exemption {exemption.label()!r}: IAM matches tag {key} only (wider)")
        notes.append(
            f"exemption for {rule_id} expires {exemption.expires.isoformat()}: regenerate the document after "
            "that day (until you do, IAM keeps allowing what the service then stops)"
        )
    condition: Condition = {"StringNotEquals": tags} if tags else {}
    spelled = sorted({key.removeprefix("aws:RequestTag/") for key in tags})
    if any(other_spellings(key) for key in spelled):
        notes.append(
            f"exemptions by tag {', '.join(spelled)} for {rule_id}: a job that also carries such a key in another "
            "capitalization is exempted by IAM (wider than the service)"
        )
    return sorted(set(prefixes)), _merge(condition, _one_spelling(*spelled)), notes


# Operators for which one key with the union of two value lists means both conditions at once: a single
# value that is none of either list, or every value of a multivalued key that is none of either list.
# (Not ``ForAnyValue:StringNotLike``: "some value is none of A or B" is not "some value is none of A and
# some value is none of B".)
_UNION_IS_AND = frozenset(
    f"{qualifier}{operator}"
    for qualifier in ("", "ForAllValues:")
    for operator in ("StringNotEquals", "StringNotLike", "StringNotEqualsIgnoreCase")
)


def _merge(*conditions: Condition) -> Condition:
    """AND of conditions. The same key under the same negated operator unions its values, which keeps
    the meaning ("none of these"); any other repeat is an error."""
    merged: Condition = {}
    for condition in conditions:
        for operator, keys in condition.items():
            target = merged.setdefault(operator, {})
            for key, value in keys.items():
                values = value if isinstance(value, list) else [value]
                if key in target:
                    if operator not in _UNION_IS_AND:
                        raise ValueError(f"cannot AND two {operator} conditions on {key}")
                    existing = target[key] if isinstance(target[key], list) else [target[key]]
                    target[key] = existing + [v for v in values if v not in existing]
                else:
                    target[key] = value
    return merged


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule: str
    condition: dict[str, dict[str, Any]]
    tuning: dict[str, dict[str, Any]] | None  # for CreateHyperParameterTuningJob (None: no statement)
    prefixes: tuple[str, ...]


def _policy_specs(
    policy: Policy, scope: str, now: datetime, gaps: list[Gap], notes: list[str]
) -> dict[str, _Spec]:
    specs: dict[str, _Spec] = {}
    for rule in policy.rules:
        if not rule.enabled:
            continue
        mode = policy.mode_for(rule.id, rule.mode)
        if rule.on_violation != "stop" or mode is not Mode.ENFORCE:
            gaps.append(
                Gap(
                    rule=rule.id,
                    scope=scope,
                    reason=f"not enforced by the service (mode {mode.value}, on_violation {rule.on_violation}): "
                    "a deny would be stricter than the policy",
                )
            )
            continue
        statements = _rule_statements(rule, scope, gaps)
        if not statements:
            continue
        prefixes, exempt_tags, exemption_notes = _exemption_exclusions(policy.exemptions, rule.id, now)
        notes.extend(n for n in exemption_notes if n not in notes)
        if prefixes and any(piece.tuning is not None for piece in statements):
            gaps.append(
                Gap(
                    rule=rule.id,
                    scope=scope,
                    reason="tuning jobs: a job-name-prefix exemption covers the training jobs whose name (the "
                    "tuning job's plus a suffix) starts with it, which IAM cannot tell from the tuning job: "
                    "no statement",
                )
            )
        for sid, condition, tuning in statements:
            unique, n = sid, 2
            while unique in specs:
                unique, n = f"{sid}{n}", n + 1
            specs[unique] = _Spec(
                rule=rule.id,
                condition=_merge(condition, exempt_tags),
                tuning=None if tuning is None or prefixes else _merge(tuning, exempt_tags),
                prefixes=tuple(prefixes),
            )
    return specs


class _Selected(NamedTuple):
    """One statement to emit: a rule's condition, for the jobs ``selector`` picks (by team)."""

    sid: str
    spec: _Spec
    selector: Condition


def _for_all_teams(policy: Policy, now: datetime, gaps: list[Gap], notes: list[str]) -> list[_Selected]:
    """The base policy's statements, and each team override's where it changes one. The service picks the
    override by the job's exact team tag: a statement that depends on the team applies only when IAM reads
    that exact key (no other capitalization in the request), and a base statement some override changes
    is repeated for jobs without the exact key (``Team=vision`` is judged by the base policy), unless a
    statement already denies every such job."""
    base = _policy_specs(policy, "all", now, gaps, notes)
    per_team = {
        name: _policy_specs(policy.for_team(name), f"team {name}", now, gaps, notes)
        for name in sorted(policy.teams)
    }
    team_tag = policy.team_tag
    team_key = f"aws:RequestTag/{team_tag}"
    teamless_denied = any(spec.condition == _key_absent(team_tag) and not spec.prefixes for spec in base.values())
    out: list[_Selected] = []
    by_team: list[str] = []
    for sid, spec in base.items():
        differing = [name for name, specs in per_team.items() if specs.get(sid) != spec]
        if not differing or _teamless_only(spec, team_tag):
            out.append(_Selected(sid, spec, {}))
            continue
        by_team.append(spec.rule)
        # the exact key names no override that changes it (and IAM reads that key), or there is no exact key
        out.append(
            _Selected(sid, spec, _merge({"StringNotEquals": {team_key: differing}}, _one_spelling(team_tag)))
        )
        if not teamless_denied:
            out.append(_Selected(_sid(sid, "No", "Team", "Tag"), spec, _key_absent(team_tag)))
    for name, specs in per_team.items():
        for sid, spec in specs.items():
            if base.get(sid) != spec and not _teamless_only(spec, team_tag):
                by_team.append(spec.rule)
                selector = _merge({"StringEquals": {team_key: name}}, _one_spelling(team_tag))
                out.append(_Selected(_sid(sid, "Team", name), spec, selector))
    if other_spellings(team_tag):
        gaps.extend(
            Gap(
                rule=rule,
                scope="all",
                reason=f"team overrides: a job tagged {team_tag!r} that also carries another capitalization of "
                "that key gets no statement that depends on its team (IAM reads tag keys case-insensitively)",
            )
            for rule in dict.fromkeys(by_team)
        )
    gaps[:] = _dedupe_team_gaps(gaps)
    return out


def _for_one_team(
    team_policy: Policy, team: str, now: datetime, gaps: list[Gap], notes: list[str]
) -> list[_Selected]:
    """One team's effective policy, for that team's jobs only: every statement selects them by the exact
    team tag, as the service picks the override (an SCP attaches to an OU or account, never to a team's
    roles, and a team's roles may launch jobs of other teams)."""
    team_tag = team_policy.team_tag
    selector = _merge({"StringEquals": {f"aws:RequestTag/{team_tag}": team}}, _one_spelling(team_tag))
    return [
        _Selected(sid, spec, selector)
        for sid, spec in _policy_specs(team_policy, f"team {team}", now, gaps, notes).items()
        if not _teamless_only(spec, team_tag)  # never a job of the team
    ]


def _teamless_only(spec: _Spec, team_tag: str) -> bool:
    """The statement can deny only a job without a team (the exact team key missing, or read exactly and
    empty), which the service judges by the base policy whatever the overrides say: it needs no team
    selector, and a team's version of it would never apply."""
    condition = spec.condition
    if team_tag in condition.get("ForAllValues:StringNotEquals", {}).get(TAG_KEYS, []):
        return True
    read_exactly = set(other_spellings(team_tag)) <= set(
        condition.get("ForAllValues:StringNotLike", {}).get(TAG_KEYS, [])
    )
    return read_exactly and condition.get("StringNotLike", {}).get(f"aws:RequestTag/{team_tag}") == [NON_EMPTY]


def derive_iam_policy(
    policy: Policy,
    now: datetime,
    *,
    team: str | None = None,
    target: Target = "iam",
    partition: str = "aws",
    region: str = "*",
    account: str = "*",
) -> IamDerivation:
    """Deny statements for what IAM can express of ``policy``.

    ``team``: the document for that team's effective policy, for that team's jobs only (every statement
    selects them: ``_for_one_team``). Without it, the base policy applies to jobs whose team tag names no
    override; each team override that changes a statement gets its own statement, selected by
    ``aws:RequestTag/<team_tag>`` (``_for_all_teams``).
    """
    arn_base = f"arn:{partition}:sagemaker:{region}:{account}:training-job/"
    scope = _scope(region, account)
    # A CreateTrainingJob on a training plan (ResourceConfig.TrainingPlanArn) is also authorized against
    # the plan and its reserved capacity (resource types training-plan, reserved-capacity of the
    # authorization reference; AWSBatchServiceRolePolicyForSageMaker grants them): a NotResource deny would
    # match those and deny the exempt job. The exempt names hold in every region and account; the
    # statement's scope is its condition.
    any_sagemaker = f"arn:{partition}:sagemaker:*:*:"
    not_resource_tail = [f"{any_sagemaker}training-plan/*", f"{any_sagemaker}reserved-capacity/*"]
    gaps: list[Gap] = []
    notes: list[str] = []

    def statements_of(selected: _Selected) -> list[dict[str, Any]]:
        sid, spec, selector = selected
        out: dict[str, Any] = {"Sid": sid, "Effect": "Deny", "Action": CREATE_ACTION}
        if spec.prefixes:
            out["NotResource"] = [f"{any_sagemaker}training-job/{p}*" for p in spec.prefixes] + not_resource_tail
        else:
            out["Resource"] = "*"
        out["Condition"] = _merge(spec.condition, selector, scope)
        if spec.tuning is None:
            return [out]
        if spec.tuning == spec.condition:  # one statement for both actions
            return [{**out, "Action": [CREATE_ACTION, TUNING_ACTION]}]
        tuning = {"Sid": _sid(sid, "Tuning"), "Effect": "Deny", "Action": TUNING_ACTION, "Resource": "*"}
        return [out, {**tuning, "Condition": _merge(spec.tuning, selector, scope)}]

    if team is not None:
        scoped = policy.for_team(team)
        selected = _for_one_team(scoped, team, now, gaps, notes)
        required = _required_keys(scoped)
    else:
        selected = _for_all_teams(policy, now, gaps, notes)
        required = _required_keys(policy)
        for name in policy.teams:
            required &= _required_keys(policy.for_team(name))
    statements = [statement for one in selected for statement in statements_of(one)]
    _unique_sids(statements)
    if not statements:
        raise NothingToExpress(
            "no enforced rule can be expressed as an IAM condition (rules in audit mode or on_violation "
            "notify are left to the service)"
        )
    # Marks governance writes on a job after its creation, in the request that creates it: copied from another
    # job (a console Clone copies its tags, a pasted ListTags). Governance's own clones never carry them
    # (domain/clone.py's copyable_tags leaves GOVERNANCE_MARKS out), so this never denies its CreateTrainingJob.
    # Every job's, whatever its team: in the document without --team only (a team's selects that team's jobs).
    if team is None:
        statements.append(
            {
                "Sid": "DenyGovernanceMarks",
                "Effect": "Deny",
                "Action": [CREATE_ACTION, TUNING_ACTION],
                "Resource": "*",
                "Condition": _merge({"ForAnyValue:StringEquals": {TAG_KEYS: list(LATER_MARKS)}}, scope),
            }
        )
    if required:
        removing: Condition = {"ForAnyValue:StringEquals": {TAG_KEYS: sorted(required)}}
        if team is not None:  # that team's jobs (DeleteTags has no aws:RequestTag: the job's own tag)
            removing["StringEquals"] = {f"aws:ResourceTag/{policy.team_tag}": team}
        statements.append(
            {
                "Sid": "DenyRemovingRequiredTags",
                "Effect": "Deny",
                "Action": DELETE_TAGS_ACTION,
                "Resource": f"{arn_base}*",
                "Condition": removing,
            }
        )
    if target == "scp":
        notes.append(
            "an SCP also binds the roles of this stack: jobs it launches (clones) must carry the required tags"
        )
        if any("NotResource" in s for s in statements):
            notes.append("exemptions by job-name prefix use NotResource, which SCPs accept in Deny statements")
    notes.append(
        "hyperparameter tuning jobs (sagemaker:CreateHyperParameterTuningJob) get the tag statements and, when "
        "every instance type they name is disallowed, the instance-type statements; the rest of their training "
        "jobs is governed by the service after launch (see the gaps)"
    )
    notes.append(
        "AWS Batch service jobs (SubmitServiceJob): Batch calls CreateTrainingJob with its service-linked role, "
        "which SCPs do not bind (nor do your roles' policies): no statement applies to them; the service "
        "governs them after launch"
    )
    derivation = IamDerivation(
        target=target,
        document={"Version": IAM_POLICY_VERSION, "Statement": statements},
        not_expressible=tuple(gaps),
        notes=tuple(notes),
    )
    if derivation.size > derivation.limit:
        raise IamPolicyTooLarge(derivation)
    return derivation


def split_document(derivation: IamDerivation) -> list[dict[str, Any]]:
    """The statements in as few documents within the size limit as first fit in order gives. Deny
    statements stand alone, so documents attached to the same OU, account or role deny what the whole
    would. Raises ``ValueError`` when one statement alone is too large, or an SCP needs more than
    ``MAX_SCPS`` documents."""
    documents: list[dict[str, Any]] = []
    for statement in derivation.document["Statement"]:
        for document in documents:
            candidate = {**document, "Statement": [*document["Statement"], statement]}
            if len(json.dumps(candidate, separators=(",", ":"))) <= derivation.limit:
                document["Statement"].append(statement)
                break
        else:
            alone = {"Version": IAM_POLICY_VERSION, "Statement": [statement]}
            if len(json.dumps(alone, separators=(",", ":"))) > derivation.limit:
                raise ValueError(f"statement {statement['Sid']} alone is over {derivation.limit} characters")
            documents.append(alone)
    if derivation.target == "scp" and len(documents) > MAX_SCPS:
        raise ValueError(
            f"the statements need {len(documents)} SCPs; an OU or account holds at most {MAX_SCPS + 1}, "
            "FullAWSAccess included"
        )
    return documents


def _scope(region: str, account: str) -> Condition:
    """The region and account the statements apply in. A deny of ``CreateTrainingJob`` names no ARN
    (``Resource: "*"``, as AWS's own SCP examples deny a create: the action and the conditions select;
    it keeps the SCP small): the scope is a condition on the request."""
    scope = {
        key: value
        for key, value in (("aws:RequestedRegion", region), ("aws:PrincipalAccount", account))
        if value != "*"
    }
    return {"StringLike": scope} if scope else {}


def _unique_sids(statements: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for statement in statements:
        sid, n = statement["Sid"], 2
        while sid in seen:
            sid, n = f"{statement['Sid']}{n}", n + 1
        statement["Sid"] = sid
        seen.add(sid)


def _required_keys(policy: Policy) -> set[str]:
    """Tag keys an enforced required-tags rule demands (removing them later is denied)."""
    keys: set[str] = set()
    for rule in policy.rules:
        if (
            isinstance(rule, RequiredTags)
            and rule.enabled
            and rule.on_violation == "stop"
            and policy.mode_for(rule.id, rule.mode) is Mode.ENFORCE
        ):
            keys.update(rule.tags)
    return keys


def _dedupe_team_gaps(gaps: list[Gap]) -> list[Gap]:
    """A team gap identical to the base one is noise."""
    base = {(g.rule, g.reason) for g in gaps if g.scope == "all"}
    out: list[Gap] = []
    for gap in gaps:
        if gap.scope != "all" and (gap.rule, gap.reason) in base:
            continue
        if gap not in out:
            out.append(gap)
    return out
