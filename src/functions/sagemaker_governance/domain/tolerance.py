"""Declared tolerance (issue 17 item 3): a developer who knows a job has long quiet phases says so on the job.

Two tags, named like the service's other ``smgov:`` tags (kebab-case, the unit in the name):

* ``smgov:idle-minutes``: the idle guard's window for this job (minutes of idle GPUs before the judge is
  asked), instead of the team's ``idle`` window;
* ``smgov:progress-minutes``: the progress guard's window for this job (minutes without a datapoint of
  the progress metric), instead of the team's ``progress.window_minutes``.

The stall judge reads its evidence over the guard's window, so the declared value is also the judge's
silence threshold, and the base from which a vetoed alarm is widened.

A declaration is bounded by the team's ``judge.max_declared_minutes``: a value is applied only when it
is a whole number of minutes from ``MIN_DECLARED_MINUTES`` to that cap. Anything else (not a number,
negative, zero, a fraction, below the floor, over the cap, or any value when the cap is 0) is *ignored*:
the team's window stays, so a bad tag never loosens beyond the cap and never causes a stop, and the owner
is told (code ``judge.tolerance.ignored``). An applied one is recorded (``judge.tolerance.applied``).

Tag keys are read exactly as written, as the service reads every tag key (README, "Tag keys: IAM ignores
their case, the service does not"): ``SMGOV:idle-minutes`` is not the declaration. Such a key (the
declaration's in another capitalization) is a malformed declaration: ignored and told like a bad value,
so an owner who believes the job protected learns that it is not.

The tags come with the job: the state-change event carries them, and the stopper's re-read lists them
already (``ListTags``): a job without them costs no call and no record.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.decisions import Action, Decision, Mode
from sagemaker_governance.domain.guards.idle import IDLE_RULE_ID, IdlePolicy
from sagemaker_governance.domain.guards.progress import PROGRESS_RULE_ID, ProgressPolicy
from sagemaker_governance.domain.stall_judge import MIN_DECLARED_MINUTES, TAG_IDLE_MINUTES, TAG_PROGRESS_MINUTES

# guard section -> the tag that declares its window
DECLARATION_TAGS: Final = {"idle": TAG_IDLE_MINUTES, "progress": TAG_PROGRESS_MINUTES}
RULE_IDS: Final = {"idle": IDLE_RULE_ID, "progress": PROGRESS_RULE_ID}  # whose window a tag declares
_WHOLE_MINUTES = re.compile(r"[0-9]{1,6}")


class ToleranceCode(StrEnum):
    """The decision codes of a job's declared tolerance (recorded when its alarms are created)."""

    APPLIED = "judge.tolerance.applied"
    IGNORED = "judge.tolerance.ignored"


class Declaration(BaseModel):
    """One tag as read and judged: ``minutes`` is the window applied (None: ignored, ``reason`` says why)."""

    model_config = ConfigDict(frozen=True)

    section: str
    tag: str
    value: str
    cap: int
    minutes: int | None
    reason: str

    @property
    def applied(self) -> bool:
        return self.minutes is not None

    @property
    def code(self) -> ToleranceCode:
        return ToleranceCode.APPLIED if self.applied else ToleranceCode.IGNORED

    def evidence(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "value": self.value,
            "declared_minutes": self.minutes,
            "max_declared_minutes": self.cap,
            "min_declared_minutes": MIN_DECLARED_MINUTES,
        }

    def decision(self, mode: Mode, team_window_minutes: float | None = None) -> Decision:
        """The record of this declaration under its guard's rule: applied (nothing to do) or ignored (tell
        the owner how to fix it)."""
        evidence = {**self.evidence(), "guard": self.section, "team_window_minutes": team_window_minutes}
        if self.applied:
            return Decision(
                rule=RULE_IDS[self.section],
                code=self.code.value,
                action=Action.NONE,
                mode=mode,
                reason=self.reason,
                evidence=evidence,
            )
        key = DECLARATION_TAGS[self.section]
        rename = (
            f"Tag keys are read exactly as written: replace {self.tag} with {key}. " if self.tag != key else ""
        )
        return Decision(
            rule=RULE_IDS[self.section],
            code=self.code.value,
            action=Action.NOTIFY,
            mode=mode,
            reason=self.reason,
            remedy=f"{rename}Tag the job {key} with a whole number of minutes from {MIN_DECLARED_MINUTES} to "
            f"{self.cap}, or ask the platform team for a longer judge.max_declared_minutes.",
            evidence=evidence,
        )


def _judge_value(section: str, tag: str, raw: str, cap: int) -> Declaration:
    text = raw.strip()

    def ignored(why: str) -> Declaration:
        return Declaration(
            section=section,
            tag=tag,
            value=raw,
            cap=cap,
            minutes=None,
            reason=f"tag {tag}={raw!r} ignored: {why}; the team's {section} window applies",
        )

    if cap == 0:
        return ignored("this team accepts no declared tolerance (judge.max_declared_minutes is 0)")
    if not _WHOLE_MINUTES.fullmatch(text):
        return ignored(f"not a whole number of minutes from {MIN_DECLARED_MINUTES} to {cap}")
    minutes = int(text)
    if minutes < MIN_DECLARED_MINUTES:
        return ignored(f"below the shortest declarable window, {MIN_DECLARED_MINUTES} minutes")
    if minutes > cap:
        return ignored(f"over the team's cap, judge.max_declared_minutes {cap}")
    return Declaration(
        section=section,
        tag=tag,
        value=raw,
        cap=cap,
        minutes=minutes,
        reason=f"tag {tag}={raw!r}: the {section} guard's window for this job is {minutes} minutes "
        f"(the team's cap is {cap})",
    )


def _miscased(section: str, tag: str, key: str, raw: str, cap: int) -> Declaration:
    """A declaration's key in another capitalization (``SMGOV:idle-minutes``): ignored, whatever its value."""
    return Declaration(
        section=section,
        tag=key,
        value=raw,
        cap=cap,
        minutes=None,
        reason=f"tag {key}={raw!r} ignored: tag keys are read exactly as written, and {key} is not {tag}; "
        f"the team's {section} window applies",
    )


def read_declarations(tags: Mapping[str, str] | None, cap: int) -> tuple[Declaration, ...]:
    """The job's declarations, each judged against the team's ``cap`` (in ``DECLARATION_TAGS`` order; per
    guard the exact key first, then any key that is it in another capitalization, ignored)."""
    if not tags:
        return ()
    declared: list[Declaration] = []
    for section, tag in DECLARATION_TAGS.items():
        if tag in tags:
            declared.append(_judge_value(section, tag, tags[tag], cap))
        declared += [
            _miscased(section, tag, key, tags[key], cap)
            for key in sorted(tags)
            if key != tag and key.casefold() == tag.casefold()
        ]
    return tuple(declared)


def window_overlay(declaration: Declaration, config: Any) -> dict[str, Any]:
    """The policy document fragment that gives the guard of ``declaration`` its declared window, from its
    current ``config``: the idle guard in whole periods (an M-of-N window keeps its ratio), the progress
    guard in minutes; the guard's alarm fires after that window too (no shorter trigger: the job said how
    long it may be quiet). Empty for an ignored declaration."""
    minutes = declaration.minutes
    if minutes is None:
        return {}
    if isinstance(config, IdlePolicy):
        periods = min(max(1, math.ceil(minutes * 60 / config.period_seconds)), 86_400 // config.period_seconds)
        ratio = config.datapoints_to_alarm / config.evaluation_periods
        wanted = max(1, min(periods, round(periods * ratio)))
        # The declared window is the alarm's too (no shorter trigger): the job said how long it may be quiet.
        return {"idle": {"evaluation_periods": periods, "datapoints_to_alarm": wanted, "trigger_minutes": minutes}}
    if isinstance(config, ProgressPolicy):
        return {"progress": {"window_minutes": minutes, "trigger_minutes": minutes}}
    return {}
