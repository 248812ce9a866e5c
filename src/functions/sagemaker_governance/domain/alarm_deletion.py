"""Deleting an ended job's alarms: in which order, and packed into which ``DeleteAlarms`` requests.

Pure. Used by the job-events function when a job ends (``service/guard_alarms.py``) and by the reconciler
(``service/reconciler.py``); its own module so that the job-events function does not import the
reconciler's models (cold start, BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final


def deletion_order(job_name: str, prefix: str, observed: Iterable[str]) -> list[str]:
    """Every alarm of an ended job, the notifying one first: above 10 hosts it is a composite alarm
    (which a child cannot be deleted before; listed by the reconciler, and included even when the listing
    missed it); a missing alarm is success. One composite per job: DeleteAlarms takes at most one per call."""
    head = f"{prefix}{job_name}"
    return [head, *sorted(set(observed) - {head})]


DELETE_BATCH_NAMES: Final = 100  # DeleteAlarms: "up to 100 alarms in one operation" (its API reference)


def deletion_batches(groups: Iterable[Iterable[str]], *, size: int = DELETE_BATCH_NAMES) -> list[list[int]]:
    """Pack ended jobs' alarm groups (each in ``deletion_order``) into ``DeleteAlarms`` requests, as the
    indexes of the groups each request deletes. The API reference allows up to 100 names per request, "no
    more than one composite alarm" among them; only a group of several alarms can hold a composite (its
    head, over the others), so a request takes at most one such group, and any number of single alarms.
    A group is never split between requests (its composite goes before its children), unless it alone is
    larger than ``size`` (then it is a request of its own, which the adapter splits in order)."""
    batches: list[list[int]] = []
    current: list[int] = []
    names = 0
    composite = False
    for index, group in enumerate(groups):
        count = len(list(group))
        several = count > 1
        if current and (names + count > size or (several and composite)):
            batches.append(current)
            current, names, composite = [], 0, False
        current.append(index)
        names += count
        composite = composite or several
    if current:
        batches.append(current)
    return batches


def deletion_requests(units: Sequence[Sequence[str]]) -> list[list[str]]:
    """One job's alarm units (``guards.base.deletion_units``) as the names of each ``DeleteAlarms`` request,
    in order (``deletion_batches``: at most one composite per request)."""
    return [[name for index in batch for name in units[index]] for batch in deletion_batches(units)]
