"""The governance policy: one pydantic model, the same schema for the deploy-time defaults and the
optional policy document in SSM Parameter Store.

Layering (each a plain mapping deep-merged onto the one before, then validated once):

1. the base policy built from the template's Parameters (``settings.base_policy_document``; a part of it
   that fails validation takes the schema's defaults: ``policy_document.build_base_policy``);
2. the policy document from SSM (optional; a broken one is rejected and the last good policy kept);
3. the job's team override (``teams.<value of team_tag>``), chosen per job.

Merging rules: mappings merge key by key; ``rules`` merge by ``id`` (an override may change a single
field of a rule), and so do ``resume.signatures`` (a team adds to the global ones); ``exemptions``
concatenate; any other list or scalar is replaced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.progress import PROGRESS
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.preflight_policy import PreflightPolicy
from sagemaker_governance.domain.recovery_policy import ResumePolicy, SpotPolicy
from sagemaker_governance.domain.rules import Rule
from sagemaker_governance.domain.stall_judge import JudgePolicy
from sagemaker_governance.domain.tolerance import Declaration, read_declarations, window_overlay

POLICY_VERSION = 1
MINIMUM_UTILIZATION_PERCENT = 5  # per GPU: from here the calibration traces show healthy jobs stopped


class Exemption(BaseModel):
    """A platform-approved exception: matching jobs are not acted on by the listed rules until it expires.

    Exemptions live in the policy (owned by the platform team), never in tags a developer could add.
    A job matches when every matcher given matches (``job_name_prefix``, ``tag``).

    Example:
        exemptions:
          - job_name_prefix: "bench-"
            rules: [max-instances]
            expires: 2026-12-31
            reason: "INC-1234: scale benchmark approved by the platform team"
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(min_length=3)
    expires: date = Field(description="Last day (UTC) on which the exemption applies.")
    job_name_prefix: str | None = Field(default=None, min_length=1)
    tag: dict[str, str] | None = Field(default=None, description="Tag key -> exact value.")
    rules: tuple[str, ...] | None = Field(default=None, description="Rule ids; omitted means every rule.")

    @model_validator(mode="after")
    def _has_matcher(self) -> Exemption:
        if self.job_name_prefix is None and not self.tag:
            raise ValueError("an exemption needs job_name_prefix or tag (it must not match every job)")
        return self

    def matches(self, job: TrainingJob) -> bool:
        if self.job_name_prefix is not None and not job.name.startswith(self.job_name_prefix):
            return False
        return not self.tag or all(job.tag(key) == value for key, value in self.tag.items())

    def covers(self, rule_id: str) -> bool:
        return self.rules is None or rule_id in self.rules

    def expired(self, now: datetime) -> bool:
        return now > datetime.combine(self.expires, time.max, tzinfo=UTC)

    def label(self) -> str:
        return f"{self.reason} (until {self.expires.isoformat()})"


class _PolicyHead(BaseModel):
    """The policy's fields before the guards' sections (``Policy`` has the whole schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(default=POLICY_VERSION, ge=1, le=POLICY_VERSION)
    mode: Mode = Mode.AUDIT
    notify_in_audit_mode: bool = Field(
        default=False, description="Also tell owners what enforce mode would have done."
    )
    team_tag: str = Field(default="team", min_length=1)
    owner_tag: str = Field(default="owner", min_length=1)
    project_tag: str = Field(
        default="project",
        min_length=1,
        description="The tag chargeback groups by project (`smgov report --by project`).",
    )
    rules: tuple[Rule, ...] = ()
    exemptions: tuple[Exemption, ...] = ()
    resume: ResumePolicy = Field(default_factory=ResumePolicy, description="Auto-resume of failed jobs.")
    spot: SpotPolicy = Field(default_factory=SpotPolicy, description="Spot to On-Demand fallback.")
    judge: JudgePolicy = Field(
        default_factory=JudgePolicy, description="The stall judge: every signal must agree before a guard stops."
    )


# One section per registered guard (``idle``, ``progress``: domain/guards/registry.py), validated by the
# guard's config model: registering a guard is all it takes to give it a policy section.
if TYPE_CHECKING:
    _WithGuardSections = _PolicyHead
else:
    _WithGuardSections = create_model(
        "_WithGuardSections",
        __base__=_PolicyHead,
        **{
            guard.section: (
                guard.config_type,
                Field(
                    default_factory=guard.config_type,
                    description=f"The {guard.title} (domain/guards/{guard.name}.py).",
                ),
            )
            for guard in GUARDS
            if guard.section is not None
        },
    )


class Policy(_WithGuardSections):
    """The effective governance policy.

    Example:
        version: 1
        mode: enforce
        team_tag: team
        owner_tag: owner
        rules:
          - id: required-tags
            type: required-tags
            tags: {team: {}, cost-center: {pattern: "cc-[0-9]{4}"}}
          - id: instance-types
            type: allowed-instance-types
            patterns: ["ml.g5.*", "ml.m5.*"]
        teams:
          vision:
            rules:
              - id: instance-types
                patterns: ["ml.g5.*", "ml.p5.*"]
    """

    teams: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-team overrides: any policy field except teams and exemptions."
    )
    preflight: PreflightPolicy = Field(
        default_factory=PreflightPolicy, description="Developer-side checks before launch (SDK hook, CLI)."
    )

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, rules: tuple[Any, ...]) -> tuple[Any, ...]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"duplicate rule id {rule.id!r}")
            seen.add(rule.id)
        return rules

    @model_validator(mode="after")
    def _teams_are_valid_overrides(self) -> Policy:
        base = self.model_dump(mode="json", exclude={"teams"})
        for team, override in self.teams.items():
            forbidden = {"teams", "exemptions", "team_tag", "version"} & set(override)
            if forbidden:
                raise ValueError(f"teams.{team}: {', '.join(sorted(forbidden))} cannot be overridden per team")
            try:
                Policy.model_validate(merge_documents(base, override))
            except ValidationError as exc:
                raise ValueError(f"teams.{team}: {_first_errors(exc)}") from exc
        return self

    # ---- resolution --------------------------------------------------------------------------

    def overlay(self, document: Mapping[str, Any]) -> Policy:
        """This policy with ``document`` merged on top (validated)."""
        return Policy.model_validate(merge_documents(self.model_dump(mode="json"), document))

    def for_team(self, team: str | None) -> Policy:
        """The policy of a job whose team tag says ``team``: that team's override merged on the rest, or the
        rest alone when it has none. Either way without ``teams``: a job is under one team, and another team's
        override has no say in its policy (``for_job`` validates the job's declared windows on top of this;
        re-validating every team's override on them failed a valid document for a valid tag)."""
        if not team or team not in self.teams:
            return self.model_copy(update={"teams": {}}) if self.teams else self
        merged = merge_documents(self.model_dump(mode="json", exclude={"teams"}), self.teams[team])
        return Policy.model_validate(merged)

    def for_job(self, job: TrainingJob) -> Policy:
        """The job's team policy, with the guard windows the job declares within the team's cap
        (``smgov:idle-minutes``, ``smgov:progress-minutes``: domain/tolerance.py)."""
        team = self.for_team(job.tag(self.team_tag))
        document: dict[str, Any] = {}
        for declaration in team.declared_tolerance(job):
            document.update(window_overlay(declaration, getattr(team, declaration.section, None)))
        return team.overlay(document) if document else team

    def team_misspelled(self, job: TrainingJob) -> tuple[str, ...]:
        """The team overrides the job's team tag value names only in another capitalization or with spaces
        around it (``Vision``, ``"vision "`` for ``vision``; several when overrides differ only so): the job is
        not under them, as the value is read exactly (as IAM's ``StringEquals aws:RequestTag/team`` reads it), and
        compliance tells the owner (``compliance.notify.team-misspelled``). Empty when the value names an override
        exactly, or none in any spelling."""
        value = job.tag(self.team_tag)
        if value is None or value in self.teams or not value.strip():
            return ()
        wanted = value.strip().casefold()
        return tuple(sorted(team for team in self.teams if team.strip().casefold() == wanted))

    def possible_for(self, job: TrainingJob) -> tuple[Policy, ...]:
        """The policies ``job`` may be under: its own (``for_job``) when its tags are known; when they are not
        (an event that left them out or carried an empty map: ``TrainingJob.as_event_says``), the default and
        every team's, so that a check made before the tags are read ("no policy of this job wants anything
        here") holds whichever team the job turns out to be in."""
        if job.tags is not None:
            return (self.for_job(job),)
        return (self, *(self.for_team(team) for team in sorted(self.teams)))

    def declared_tolerance(self, job: TrainingJob) -> tuple[Declaration, ...]:
        """The job's declared windows judged against this policy's cap (call it on the team's policy)."""
        return read_declarations(job.tags, self.judge.max_declared_minutes)

    def mode_for(self, rule_id: str, rule_mode: Mode | None) -> Mode:
        return rule_mode or self.mode

    def exemption_for(
        self, job: TrainingJob, rule_id: str, now: datetime
    ) -> tuple[Exemption | None, list[Exemption]]:
        """The live exemption covering this job and rule, and any expired ones that would have."""
        expired: list[Exemption] = []
        for exemption in self.exemptions:
            if not (exemption.matches(job) and exemption.covers(rule_id)):
                continue
            if exemption.expired(now):
                expired.append(exemption)
                continue
            return exemption, expired
        return None, expired

    def price_table(self) -> dict[str, float]:
        """USD per instance-hour for every guard's savings estimate: the built-in table, extended or
        overridden by the idle section's ``prices`` (where the document has always kept them)."""
        return IDLE.config(self).price_table()

    def warnings(self) -> list[str]:
        """What is valid but probably not meant (``smgov policy validate`` prints them)."""
        out: list[str] = []
        told: set[tuple[str, ...]] = set()
        for team, policy in [(None, self), *((t, self.for_team(t)) for t in sorted(self.teams))]:
            out += _same_type_warnings(policy, "rules" if team is None else f"teams.{team}.rules", told)
            idle = IDLE.config(policy)
            where = "idle" if team is None else f"teams.{team}.idle"
            if idle.datapoints_to_alarm < idle.evaluation_periods:
                out.append(
                    f"{where}: datapoints_to_alarm {idle.datapoints_to_alarm} < evaluation_periods "
                    f"{idle.evaluation_periods}: M-of-N, a job idle for any {idle.datapoints_to_alarm} of "
                    f"{idle.evaluation_periods} periods (not consecutively) is judged idle"
                )
            if idle.threshold_percent >= MINIMUM_UTILIZATION_PERCENT:
                out.append(
                    f"{where}: threshold_percent {idle.threshold_percent:g} polices minimum utilization, which stops "
                    "healthy jobs (docs/calibration.md: from 5% per GPU a healthy CPU-bound evaluation is stopped; a "
                    "job using 1 of 4 GPUs counts as idle); the idle guard is for stalled jobs"
                )
            out += _tolerance_warnings(policy, "judge" if team is None else f"teams.{team}.judge")
            at = "" if team is None else f"teams.{team}."
            out += [w for g in GUARDS if g.section for w in g.warnings(g.config(policy), f"{at}{g.section}")]
        return out + self._exemption_warnings()

    def _exemption_warnings(self) -> list[str]:
        """An exemption's ``rules`` that name no rule of the policy or of a team, nor a guard: it exempts nothing
        from them; so does an empty list (``rules: []``, unlike leaving ``rules`` out, which exempts from every
        rule). Not rejected: a rule can leave the policy without the document changing (a stack deployed with
        RequiredTags=""), and a rejected document would take every other exemption with it."""
        types = {rule.id: rule.type for p in (self, *map(self.for_team, sorted(self.teams))) for rule in p.rules}
        sections = {guard.section: guard.rule_id for guard in GUARDS if guard.section is not None}
        known = {*types, *(guard.rule_id for guard in GUARDS)}
        out: list[str] = []
        for position, exemption in enumerate(self.exemptions):
            if exemption.rules == ():
                out.append(
                    f"exemptions[{position}] ({exemption.reason}): rules is empty, so it exempts nothing; leave "
                    "rules out to exempt the jobs from every rule, or name the rule ids"
                )
                continue
            unknown = [name for name in exemption.rules or () if name not in known]
            if not unknown:
                continue
            hints = [
                f"{name} is the type of rule {', '.join(i for i, t in types.items() if t == name)}"
                for name in unknown
                if name in types.values()
            ] + [
                f"{name} is a guard's section, its rule id is {sections[name]}"
                for name in unknown
                if name in sections
            ]
            out.append(
                f"exemptions[{position}] ({exemption.reason}): rules {', '.join(unknown)} name no rule id of the "
                f"policy, its teams or its guards, so it exempts nothing from them"
                + "".join(f"; {hint}" for hint in hints)
                + f" (rule ids: {', '.join(sorted(known))})"
            )
        return out

    def digest(self) -> str:
        """A short content hash: audit records name the exact policy that decided."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _same_type_warnings(policy: Policy, where: str, told: set[tuple[str, ...]]) -> list[str]:
    """Enabled rules of one type in one policy (``told``: the rule ids already warned about, so a global pair is
    not told again for every team). Each applies on its own, so a rule meant to change one of the base's does
    not: written without ``id``, a rule takes its type as id (``max-instance-count``), which the base's rule of
    that type does not have (``max-instances``), and both then decide. Not rejected: two rules of one type can be
    meant (a notify rule below a stop rule), and a rejected document would keep an older one or the defaults."""
    by_type: dict[str, list[str]] = {}
    for rule in policy.rules:
        if rule.enabled:
            by_type.setdefault(rule.type, []).append(rule.id)
    out: list[str] = []
    for kind, ids in by_type.items():
        if len(ids) < 2 or tuple(ids) in told:
            continue
        told.add(tuple(ids))
        warning = (
            f"{where}: {len(ids)} enabled rules of type {kind} ({', '.join(ids)}): each applies on its own (the "
            "strictest decides), none changes another"
        )
        if kind in ids[1:]:  # added after a rule of its type (a document's new rules follow the base's)
            others = [i for i in ids if i != kind]
            warning += (
                f"; rule {kind} has its type as id, as a rule written without id does, so it was added beside "
                f"{', '.join(others)} rather than changing it: to change a rule, give its id (id: {others[0]})"
            )
        out.append(warning)
    return out


def _tolerance_warnings(policy: Policy, where: str) -> list[str]:
    """What a team's cap on declared windows (domain/tolerance.py) probably does not mean."""
    judge = policy.judge
    cap = judge.max_declared_minutes
    if cap == 0:
        return []
    out: list[str] = []
    windows = {"idle": IDLE.config(policy).window_minutes, "progress": PROGRESS.config(policy).window_minutes}
    shorter = [f"{name} {window:g}" for name, window in windows.items() if window >= cap]
    if shorter:
        out.append(
            f"{where}.max_declared_minutes {cap} is not above the team's window ({', '.join(shorter)} minutes): a "
            "job's smgov:idle-minutes / smgov:progress-minutes can only shorten it"
        )
    if cap > judge.max_rejudge_minutes:
        out.append(
            f"{where}.max_declared_minutes {cap} exceeds max_rejudge_minutes {judge.max_rejudge_minutes}: a job "
            "that declares a longer window is not re-judged on a wider one after a veto"
        )
    return out


def merge_documents(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two policy documents (see the module docstring for the rules).

    An idle section that sets only one of ``evaluation_periods`` / ``datapoints_to_alarm`` sets both to
    that value: "idle for the whole window" stays the meaning unless a document says M-of-N explicitly
    (issue 17 item 5; ``smgov policy validate`` warns about M-of-N)."""
    merged: dict[str, Any] = dict(base)
    idle = overlay.get("idle")
    if isinstance(idle, Mapping):
        given = [k for k in ("evaluation_periods", "datapoints_to_alarm") if k in idle]
        if len(given) == 1:
            overlay = {
                **overlay,
                "idle": {**idle, "evaluation_periods": idle[given[0]], "datapoints_to_alarm": idle[given[0]]},
            }
    for key, value in overlay.items():
        current = merged.get(key)
        if (
            key in ("rules", "signatures")
            and isinstance(current, list | tuple)
            and isinstance(value, list | tuple)
        ):
            merged[key] = _merge_rules(current, value)
        elif key == "exemptions" and isinstance(current, list | tuple) and isinstance(value, list | tuple):
            merged[key] = [*current, *value]
        elif isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_documents(current, value)
        else:
            merged[key] = value
    return merged


def _merge_rules(base: list[Any] | tuple[Any, ...], overlay: list[Any] | tuple[Any, ...]) -> list[Any]:
    def rule_id(rule: Any) -> Any:
        key = rule.get("id", rule.get("type")) if isinstance(rule, Mapping) else None
        return key if isinstance(key, str) else None  # anything else is invalid: validation says why

    merged = [dict(rule) if isinstance(rule, Mapping) else rule for rule in base]
    index = {rule_id(rule): position for position, rule in enumerate(merged)}
    for rule in overlay:
        key = rule_id(rule)
        if key is not None and key in index and isinstance(rule, Mapping):
            previous = merged[index[key]]
            merged[index[key]] = (
                {**previous, **rule}
                if rule.get("type", previous.get("type")) == previous.get("type")
                else dict(rule)
            )
        else:
            index[key] = len(merged)
            merged.append(rule)
    return merged


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:limit]
    )
