"""Which ``smgov:`` tags of a job are governance's marks (never inherited by a clone) and which are the owner's
(carried): every ``smgov:`` tag the code names is one or the other, so a new mark cannot leak into clones
unnoticed, nor a new declaration be dropped from them."""

from __future__ import annotations

import re
from pathlib import Path

from sagemaker_governance.domain.clone import GOVERNANCE_MARKS, TAG_COMPLIANCE_EVALUATED, copyable_tags
from sagemaker_governance.domain.compliance import EVALUATED_TAG
from sagemaker_governance.domain.guards.base import TAG_JOB, TAG_MANAGED_BY
from sagemaker_governance.domain.job import UNMODELLED_FIELDS_KEY
from sagemaker_governance.domain.tolerance import DECLARATION_TAGS

SOURCES = Path(__file__).resolve().parents[2] / "src"
_TAG = re.compile(r"""["'](smgov:[a-z][a-z0-9-]*)["']""")

# Tags the owner puts on a job, carried by its clones: the quiet phases it declares, and the doctor's canary
# mark (what the job is, not what governance did to it).
OWNERS = frozenset(DECLARATION_TAGS.values()) | {"smgov:canary"}
# Named like tags but never on a training job: the tags of the guards' alarms, a key of the parsed description.
NOT_ON_JOBS = frozenset({TAG_JOB, TAG_MANAGED_BY, UNMODELLED_FIELDS_KEY})


def named_tags() -> set[str]:
    found: set[str] = set()
    for path in SOURCES.rglob("*.py"):
        found |= set(_TAG.findall(path.read_text()))
    return found


def test_every_smgov_tag_the_code_names_is_a_governance_mark_or_the_owner_s() -> None:
    named = named_tags()
    assert len(named) >= 10  # the scan finds the tags at all
    unclassified = named - GOVERNANCE_MARKS - OWNERS - NOT_ON_JOBS
    assert not unclassified, f"classify these tags (clone.GOVERNANCE_MARKS or the owner's): {sorted(unclassified)}"
    assert not GOVERNANCE_MARKS & OWNERS


def test_the_compliance_mark_the_planner_drops_is_the_one_compliance_writes() -> None:
    assert TAG_COMPLIANCE_EVALUATED == EVALUATED_TAG


def test_a_clone_inherits_the_owner_s_tags_and_none_of_governance_s_marks() -> None:
    owner = {tag: "60" for tag in OWNERS} | {"team": "vision"}
    assert copyable_tags({**owner, **dict.fromkeys(GOVERNANCE_MARKS, "x"), "aws:reserved": "y"}) == owner
