"""The organization's members as the central audit view sees them (`smgov audit --org`, `smgov report
--org`): who reported, with which version, and who should have but did not. Pure: no AWS calls.

A member is an account and region. Two sources name them: the central log group (each forwarded record
carries ``detail.member``: account, region, stack, version) and the StackSet's instances (where the
stack should run, with its status). A member is never left out silently: an instance that is not
``CURRENT`` (missing or outdated: the StackSet's own words), a version other than this release, a
member whose decisions are made in another mode than its StackSet deploys (org/stackset.yaml: one
StackSet per GovernanceMode, ``STACKSET_MODES``), a member that is an instance of both StackSets, an
instance with no record in the period and a reporting member the StackSet does not know each get a
``problem``; when the instances could not be read, the report says so (``instances_error``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from smgov.adapters.cloudformation import StackInstance
from smgov.audit_queries import Row

# org/stackset.yaml's StackSets and the GovernanceMode each deploys (its own value: no per-OU override)
STACKSET_MODES: dict[str, str] = {"sagemaker-governance": "enforce", "sagemaker-governance-audit-mode": "audit"}


class MemberLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    account: str
    region: str
    version: str | None = None  # the newest version it reported (None: it reported nothing)
    mode: str | None = None  # the mode of its newest decision (None: it reported nothing)
    stack_set: str | None = None  # the StackSet(s) it is an instance of
    decisions: int = 0
    last_seen: str | None = None
    instance_status: str | None = None  # the StackSet instance's Status (None: not an instance / not read)
    problem: str | None = None


class Members(BaseModel):
    model_config = ConfigDict(frozen=True)

    members: list[MemberLine]
    instances_read: bool
    instances_error: str | None = None

    @property
    def problems(self) -> list[MemberLine]:
        return [m for m in self.members if m.problem is not None]


def member_lines(
    rows: Iterable[Row],
    instances: Sequence[StackInstance] | None,
    *,
    release: str,
    since_text: str,
    instances_error: str | None = None,
) -> Members:
    """Combine the members query's rows (``member.account``, ``member.region``, ``member.version``,
    ``decisions``, ``last_seen``: central rows with ``detail.`` stripped) with the StackSet's instances."""
    seen: dict[tuple[str, str], _Seen] = {}
    for row in rows:
        acc = seen.setdefault((row.get("member.account", ""), row.get("member.region", "")), _Seen())
        acc.decisions += int(float(row.get("decisions") or 0))
        last = row.get("last_seen") or ""
        version = row.get("member.version") or "unknown"
        if version not in acc.versions or last > acc.versions[version]:
            acc.versions[version] = last
        decided_in = row.get("audit.mode") or "unknown"
        if decided_in not in acc.modes or last > acc.modes[decided_in]:
            acc.modes[decided_in] = last
    by_key: dict[tuple[str, str], list[StackInstance]] = {}
    for i in instances or ():
        by_key.setdefault((i.account, i.region), []).append(i)
    lines: list[MemberLine] = []
    for key in sorted(set(seen) | set(by_key)):
        account, region = key
        reported = seen.get(key)
        found = by_key.get(key, [])
        instance = found[0] if found else None
        newest = max(reported.versions.items(), key=lambda item: item[1]) if reported else None
        mode = max(reported.modes.items(), key=lambda item: item[1])[0] if reported and reported.modes else None
        problem = _problem(
            reported=reported is not None,
            version=newest[0] if newest else None,
            instance=instance,
            instances_read=instances is not None,
            release=release,
            since_text=since_text,
        ) or _placement_problem(found, mode)
        lines.append(
            MemberLine(
                account=account,
                region=region,
                version=newest[0] if newest else None,
                mode=mode,
                stack_set=", ".join(sorted({i.stack_set for i in found if i.stack_set})) or None,
                decisions=reported.decisions if reported else 0,
                last_seen=(newest[1] or None) if newest else None,
                instance_status=_status(instance),
                problem=problem,
            )
        )
    return Members(members=lines, instances_read=instances is not None, instances_error=instances_error)


def _status(instance: StackInstance | None) -> str | None:
    if instance is None:
        return None
    return f"{instance.status}/{instance.detailed_status}" if instance.detailed_status else instance.status


@dataclass
class _Seen:
    decisions: int = 0
    versions: dict[str, str] = field(default_factory=dict)  # version -> the newest time it was seen
    modes: dict[str, str] = field(default_factory=dict)  # mode -> the newest time a decision was made in it


def _placement_problem(found: Sequence[StackInstance], mode: str | None) -> str | None:
    """An instance of both StackSets, or decisions in another mode than its StackSet deploys."""
    names = sorted({i.stack_set for i in found if i.stack_set})
    if len(names) > 1:
        return (
            f"an instance of {' and '.join(names)}: two governance stacks run here (an OU in both ENFORCE_OUS "
            "and AUDIT_OUS, or nested in one of the other list; or an OU moving between them)"
        )
    expected = STACKSET_MODES.get(names[0]) if names else None
    if expected and mode and mode not in ("unknown", expected):
        return (
            f"decides in {mode} mode, its StackSet {names[0]} deploys {expected} (the mode of the policy "
            "document it reads, or a stack deployed with other parameters)"
        )
    return None


def _problem(
    *,
    reported: bool,
    version: str | None,
    instance: StackInstance | None,
    instances_read: bool,
    release: str,
    since_text: str,
) -> str | None:
    if instance is not None and instance.status != "CURRENT":
        why = f": {instance.reason}" if instance.reason else ""
        return f"stack instance {_status(instance)} (governance missing or outdated here){why}"
    if instance is not None and instance.detailed_status in ("FAILED", "CANCELLED", "INOPERABLE"):
        return f"stack instance {_status(instance)}: {instance.reason or 'the last operation did not succeed'}"
    if reported and version != release:
        return f"outdated: reports version {version}, this release is {release}"
    if not reported:
        return (
            f"no audit record in the last {since_text}: no training job there, or its records do not arrive "
            "(run `smgov doctor` in that account and region; check its dead-letter queue)"
        )
    if instances_read and instance is None:
        return "reports, but is no instance of the StackSet (deployed by hand?)"
    return None
