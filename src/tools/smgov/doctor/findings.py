"""What a doctor run found: one finding per thing checked, and the exit code they make."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"  # the check could not run (access denied, API error): the reason is the detail


@dataclass(frozen=True)
class Finding:
    check: str  # the check's name: stack, rules, queues, subscriptions, policies, iam, reconciler, ...
    subject: str  # what was checked: a logical id, a role, an action, a job
    status: Status
    detail: str

    @classmethod
    def from_problems(cls, check: str, subject: str, problems: list[str], ok_detail: str) -> Finding:
        """FAIL listing every problem found, or OK with ``ok_detail`` when there is none."""
        return cls(check, subject, Status.FAIL if problems else Status.OK, "; ".join(problems) or ok_detail)

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "subject": self.subject, "status": self.status.value, "detail": self.detail}


@dataclass
class DoctorReport:
    stack: str
    region: str
    account: str | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        counted = Counter(f.status.value for f in self.findings)
        return {status.value: counted.get(status.value, 0) for status in Status}

    @property
    def exit_code(self) -> int:
        """1 when anything is wrong; 2 when nothing is known wrong but something could not be checked."""
        statuses = {f.status for f in self.findings}
        if Status.FAIL in statuses:
            return 1
        return 2 if Status.UNKNOWN in statuses else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "region": self.region,
            "account": self.account,
            "counts": self.counts,
            "findings": [f.as_dict() for f in self.findings],
        }

    def render(self, verbose: bool = False) -> str:
        """Problems first, each on one line; the ok findings only with ``verbose``."""
        order = {Status.FAIL: 0, Status.UNKNOWN: 1, Status.WARN: 2, Status.OK: 3}
        shown = [f for f in self.findings if verbose or f.status is not Status.OK]
        lines = [f"smgov doctor: stack {self.stack} in {self.account or '?'} / {self.region}"]
        lines += [
            f"  {f.status.value.upper():7} [{f.check}] {f.subject}: {f.detail}"
            for f in sorted(shown, key=lambda f: order[f.status])
        ]
        counts = self.counts
        lines.append(
            f"{counts['fail']} failed, {counts['unknown']} not checked, {counts['warn']} warning(s), "
            f"{counts['ok']} ok"
        )
        return "\n".join(lines)
