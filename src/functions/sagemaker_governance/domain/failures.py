"""Why a training job failed: the failure taxonomy (data) and the classification of a failure's evidence.

Pure. The taxonomy is a data file of this package (``data/failure_taxonomy.yaml``) validated by the
``Taxonomy`` model: classes with a default verdict (resume / skip) and signatures (regular expressions
over the ``FailureReason`` and the last lines of each host's log stream, each citing where its message
text comes from). A team adds signatures and changes a class's verdict in its policy
(``ResumePolicy.signatures`` / ``.classes``); it cannot remove a built-in signature, so a team's policy
never switches the defaults off, and a malformed team pattern is rejected when the policy is validated.
The schema of a signature and a verdict (``failure_signatures.py``) and the evidence read about a failure
(``failure_evidence.py``) have their own modules: every function validates the policy's signatures and
the guard stopper's log-rhythm reader reads the same log lines, but only a failed job is classified (cold
start, BENCHMARKS.md).

``classify(reason, evidence, taxonomy)`` finds the root cause:

1. every signature match over the ``FailureReason`` (one line at a time) and each host's tail;
2. *causes* first: the earliest by log timestamp; when a cause has no timestamp (the ``FailureReason``,
   an offline file without times), the taxonomy's ``precedence`` decides between classes. A user-code
   line that merely mentions NCCL matches no hardware signature (and ``ncclInvalidUsage`` is a user-code
   cause), so a code bug never reads as hardware. An interconnect cause (an EFA or InfiniBand completion
   error) written after a user-code exception on another host is explained by it (the peer's process
   exited): the job is ``user-code``; with no such exception it stands;
3. else *consequences* (a collective watchdog timeout, ``ncclRemoteError``, the older NCCL's
   ``ncclSystemError`` for the same, a connection reset by the peer: what every other rank reports when
   one goes away): a user-code exception (a generic match of class ``user-code``) written before the
   earliest one on a host other than the reporter's, or quoted in the ``FailureReason`` when no host's
   log holds it, explains it, and the job is ``user-code``. A line any consequence pattern matches
   (whatever its ``where``) and PyTorch's ``NCCL error`` line right before a consequence only report it
   and explain nothing. Else their class only when a peer's failure corroborates them (a peer whose log
   fell silent ``silent_peer_minutes`` before), else ``unknown`` (``Diagnosis.peer_unread`` when some
   hosts' logs were not read: the failing peer's may be among them). A consequence in the ``FailureReason``
   alone has no time, so it is never corroborated;
4. else *generic* matches (a Python exception line, a bare ``ClientError``), by precedence;
5. else ``unknown``.

The diagnosis carries the matched line(s) and host, what was read and what could not be, so the audit
record, the owner's notification and ``smgov explain`` show why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from sagemaker_governance.domain.errors import PatternTimeout
from sagemaker_governance.domain.failure_evidence import FailureEvidence, LogLine
from sagemaker_governance.domain.failure_signatures import Role, Signature, Verdict, Where, check_name

UNKNOWN: Final = "unknown"
USER_CODE: Final = "user-code"
INTERCONNECT: Final = "interconnect"
REQUIRED_CLASSES: Final = frozenset(
    {"hardware", INTERCONNECT, "capacity", "sagemaker-internal", USER_CODE, UNKNOWN}
)
# Classes whose repetition on the same host position marks a lemon (domain/resume.py).
HARDWARE_CLASSES: Final = frozenset({"hardware", INTERCONNECT})
REASON_HOST: Final = "FailureReason"  # the "host" of a match found in the FailureReason
MAX_LINE_CHARS: Final = 2_000  # a line longer than this is searched in its first 2,000 characters
_SHOWN_CHARS: Final = 300
_SHOWN_LINES: Final = 4
_NCCL_WRAPPER: Final = re.compile(
    r"\bNCCL error\b", re.IGNORECASE
)  # PyTorch's "NCCL error in: ..." / "NCCL error: ..."
_QUOTED: Final = re.compile(r'^ErrorMessage\s+"?|"$')  # how SageMaker's FailureReason quotes a line
_MIN_COPY_CHARS: Final = 8  # a log line this short is not taken for the source of a FailureReason line
_EXIT_CODE: Final = re.compile(r"\b(?:ExitCode|exit ?code|exitcode)\s*[:=]?\s*(-?\d{1,3})\b", re.IGNORECASE)


class FailureClass(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Verdict
    description: str = ""


class Taxonomy(BaseModel):
    """The failure classes, their verdicts and the signatures that recognise them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(ge=1, le=1)
    precedence: tuple[str, ...]
    silent_peer_minutes: float = Field(gt=0, le=120)
    classes: dict[str, FailureClass]
    signatures: tuple[Signature, ...]

    @model_validator(mode="after")
    def _consistent(self) -> Taxonomy:
        missing = REQUIRED_CLASSES - set(self.classes)
        if missing:
            raise ValueError(f"classes missing: {', '.join(sorted(missing))}")
        for name in self.classes:
            check_name(name, "class")
        if set(self.precedence) != set(self.classes) or len(self.precedence) != len(self.classes):
            raise ValueError("precedence must list every class once")
        seen: set[str] = set()
        for signature in self.signatures:
            if signature.id in seen:
                raise ValueError(f"duplicate signature id {signature.id!r}")
            seen.add(signature.id)
            if signature.failure_class not in self.classes:
                raise ValueError(f"signature {signature.id!r}: unknown class {signature.failure_class!r}")
        return self

    def verdict(self, failure_class: str) -> Verdict:
        found = self.classes.get(failure_class)
        return found.verdict if found is not None else Verdict.SKIP

    def rank(self, failure_class: str) -> int:
        return self.precedence.index(failure_class) if failure_class in self.precedence else len(self.precedence)

    def with_team(self, signatures: Sequence[Signature], verdicts: Mapping[str, Verdict]) -> Taxonomy:
        """This taxonomy plus a team's signatures (checked first among equals) and class verdicts."""
        if not signatures and not verdicts:
            return self
        classes = {
            name: (fc.model_copy(update={"verdict": verdicts[name]}) if name in verdicts else fc)
            for name, fc in self.classes.items()
        }
        return self.model_copy(update={"classes": classes, "signatures": (*signatures, *self.signatures)})


@cache
def builtin_taxonomy() -> Taxonomy:
    """The taxonomy shipped with the package (``data/failure_taxonomy.yaml``), validated once.

    PyYAML is imported here, not with this module: only a failed job's classification and a policy whose
    validation checks failure classes or signatures read the taxonomy (BENCHMARKS.md, cold start)."""
    import yaml

    text = resources.files("sagemaker_governance.domain").joinpath("data/failure_taxonomy.yaml").read_text()
    return Taxonomy.model_validate(yaml.safe_load(text))


# ---- the diagnosis ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    signature: Signature
    host: str  # REASON_HOST for the FailureReason
    text: str
    at: datetime | None
    order: int  # position: hosts in evidence order, lines oldest first

    def shown(self) -> dict[str, Any]:
        text = " ".join(self.text.split())
        out: dict[str, Any] = {
            "host": self.host,
            "line": text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…",
        }
        if self.at is not None:
            out["at"] = self.at.isoformat()
        return out


@dataclass(frozen=True)
class Diagnosis:
    failure_class: str
    verdict: Verdict
    basis: str  # "logs" | "failure-reason": what the diagnosis rests on
    signature: str | None = None
    role: Role | None = None
    source: str | None = None
    host: str | None = None  # the host of the root cause (None: the FailureReason or nothing)
    lines: tuple[Match, ...] = ()
    conflicts: tuple[str, ...] = ()  # other classes whose causes were seen
    notes: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    hosts_read: tuple[str, ...] = ()
    hosts_unread: int = 0  # the job's hosts whose log was found but not read (cut, or the read failed)
    # the hosts read whose tail no signature matches: nothing in it says why their process ended (their last
    # lines may not have reached CloudWatch Logs yet)
    hosts_silent: tuple[str, ...] = ()

    @property
    def peer_unread(self) -> bool:
        """Only a peer's failure was seen (an uncorroborated consequence: unknown) while some hosts' logs were
        not read: the failing peer's log may be among them, so the verdict rests on missing evidence."""
        return self.failure_class == UNKNOWN and self.role is Role.CONSEQUENCE and self.hosts_unread > 0

    @property
    def cause_unread(self) -> bool:
        """Nothing the logs read say explains the failure (``unknown``: a peer's report alone, ``peer_unread``,
        or no line at all) while some hosts' logs were not read: the failing host's may be among them, for the
        hosts read first are those whose stream's ``lastEventTimestamp`` is the earliest, which CloudWatch Logs
        updates on an eventual consistency basis (none yet on a recent stream: then by name)."""
        return self.failure_class == UNKNOWN and self.hosts_unread > 0

    @property
    def interconnect_unread(self) -> bool:
        """A resumable interconnect diagnosis while some hosts' logs were not read: a cause (an EFA or InfiniBand
        completion error, its own line), which is also what a rank sees when its peer's process exits, or a peer's
        report (``ncclRemoteError``, a watchdog timeout) that a peer's silence corroborates; a user-code exception
        written before it on an unread host would make either the report of that host's exit (``_explaining``,
        which comes before the corroboration: the job is the user's code), so the verdict rests on missing
        evidence as a report nothing explains does."""
        return self.failure_class == INTERCONNECT and self.verdict is Verdict.RESUME and self.hosts_unread > 0

    @property
    def lemon_key(self) -> str | None:
        """``<class>@<host>`` for a hardware or interconnect fault on a known host (the lemon rule)."""
        if self.failure_class in HARDWARE_CLASSES and self.host and self.host != REASON_HOST:
            return f"{self.failure_class}@{self.host}"
        return None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "class": self.failure_class,
            "verdict": self.verdict.value,
            "basis": self.basis,
            "signature": self.signature,
            "host": self.host,
            "lines": [match.shown() for match in self.lines],
        }
        if self.source:
            out["source"] = self.source
        if self.conflicts:
            out["conflicting_classes"] = list(self.conflicts)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.exit_codes:
            out["exit_codes"] = list(self.exit_codes)
        if self.hosts_read:
            out["hosts_read"] = list(self.hosts_read)
        if self.hosts_unread:
            out["hosts_unread"] = self.hosts_unread
        if self.hosts_silent:
            out["hosts_silent"] = list(self.hosts_silent)
        return out


def _lines(reason: str | None, evidence: FailureEvidence) -> Iterable[tuple[Where, str, LogLine]]:
    for text in (reason or "").splitlines():
        if text.strip():
            yield Where.REASON, REASON_HOST, LogLine(text[:MAX_LINE_CHARS])
    for host in evidence.hosts:
        for line in host.lines:
            if line.text.strip():
                yield Where.LOG, host.host, LogLine(line.text[:MAX_LINE_CHARS], line.at)


def _found(signature: Signature, text: str) -> bool:
    """Whether ``signature`` is found in ``text``. The service may run the classification in a time budget, which
    interrupts a search still running when it runs out (``PatternTimeout``): named here after the signature whose
    search it interrupted, for that signature's author to fix it."""
    try:
        return signature.regex.search(text) is not None
    except PatternTimeout as timeout:
        raise timeout.naming(signature.pattern, f"signature {signature.id}") from None


def find_matches(reason: str | None, evidence: FailureEvidence, taxonomy: Taxonomy) -> list[Match]:
    matches: list[Match] = []
    for order, (where, host, line) in enumerate(_lines(reason, evidence)):
        text = line.text.strip()
        for signature in taxonomy.signatures:
            if signature.applies_to(where) and _found(signature, text):
                matches.append(Match(signature, host, text, line.at, order))
    return matches


def _root(matches: Sequence[Match], taxonomy: Taxonomy) -> tuple[Match, tuple[str, ...]]:
    """The root cause among ``matches`` (one role): earliest when every one is timed, else by precedence."""
    classes = sorted({m.signature.failure_class for m in matches}, key=taxonomy.rank)
    if len(classes) > 1 and all(m.at is not None for m in matches):
        first = min(matches, key=lambda m: (m.at, taxonomy.rank(m.signature.failure_class), m.order))
        winner = first.signature.failure_class
    else:
        winner = classes[0]
    chosen = [m for m in matches if m.signature.failure_class == winner]
    # Within the class: a log line (it names a host) before the FailureReason; the earliest, then in order.
    root = min(chosen, key=lambda m: (m.host == REASON_HOST, m.at is None, m.at or datetime.max, m.order))
    return root, tuple(c for c in classes if c != winner)


def _corroborated(consequence: Match, evidence: FailureEvidence, taxonomy: Taxonomy) -> tuple[str, str] | None:
    """Why a consequence on one host counts, and the host it points at: the peer whose log fell silent
    well before it (the earliest to fall silent when several did). None: no such peer."""
    if consequence.at is None:
        return None
    gap = timedelta(minutes=taxonomy.silent_peer_minutes)
    silent = [
        (peer.last_at, order, peer.host)
        for order, peer in enumerate(evidence.hosts)
        if peer.host != consequence.host and peer.last_at is not None and peer.last_at <= consequence.at - gap
    ]
    if not silent:
        return None
    last, _, peer = min(silent)
    minutes = (consequence.at - last).total_seconds() / 60
    return f"{peer} fell silent {minutes:.0f} min before {consequence.host}'s {consequence.signature.id}", peer


@dataclass(frozen=True)
class _Reports:
    """What a user-code exception line must not be to explain a consequence or an interconnect cause."""

    orders: frozenset[int]  # lines that only report a consequence: its own text, or its wrapper
    logs: tuple[str, ...]  # every host's log lines, to find the FailureReason's copies in

    @classmethod
    def of(cls, reason: str | None, evidence: FailureEvidence, taxonomy: Taxonomy) -> _Reports:
        """A line reports a consequence when any consequence pattern matches it, whatever the signature's
        ``where`` (SageMaker's FailureReason copy of a survivor's ``RuntimeError: ... Watchdog caught
        collective operation timeout``); so does the line right before one of the same host (or of the
        FailureReason) that names an NCCL error: PyTorch raises ``<Type>: NCCL error in: <file>:<line>,
        <NCCL's error string>, NCCL version <v>`` and writes the consequence's text on the next line."""
        lines = list(_lines(reason, evidence))
        consequences = [s for s in taxonomy.signatures if s.role is Role.CONSEQUENCE]
        reports = {
            o for o, (_, _, line) in enumerate(lines) if any(_found(s, line.text.strip()) for s in consequences)
        }
        wrappers = {
            o - 1
            for o in reports
            if o > 0 and lines[o - 1][1] == lines[o][1] and _NCCL_WRAPPER.search(lines[o - 1][2].text)
        }
        logs = tuple(line.text.strip() for where, _, line in lines if where is Where.LOG)
        return cls(frozenset(reports | wrappers), logs)

    def elsewhere(self, line: Match, reported: Match) -> bool:
        """Whether ``line`` was written on a host other than the one that reports ``reported``: a log line
        of another host; a FailureReason line no host's log holds (it cannot be shown to be the reporter's:
        user code first, as the taxonomy's precedence says). A FailureReason line a log holds is that log
        line's copy, which is weighed as a match of its own host."""
        if reported.host == REASON_HOST:
            return True  # a consequence in the FailureReason alone: no reporting host is known
        if line.host != REASON_HOST:
            return line.host != reported.host
        quoted = _QUOTED.sub("", line.text).strip()
        return not any(quoted in text or (len(text) >= _MIN_COPY_CHARS and text in quoted) for text in self.logs)


def _explaining(reported: Match, generics: Sequence[Match], reports: _Reports) -> list[Match]:
    """The user-code exceptions that explain ``reported`` (the earliest consequence, or an interconnect
    cause): written before it (or that cannot be ordered after it) on a host other than the reporter's (a
    rank whose code raised exits, and the others report the peer it was), and not a line that merely
    reports a consequence (``ncclRemoteError: ...`` reads as an exception line too). The reporter's own
    exception lines are its report's wrapper or aftermath; with no user exception elsewhere the report
    stands: a consequence goes on to its corroboration, an interconnect cause is resumed."""
    return [
        g
        for g in generics
        if g.signature.failure_class == USER_CODE
        and g.order not in reports.orders
        and reports.elsewhere(g, reported)
        and _before(g, reported)
    ]


def _before(line: Match, consequence: Match) -> bool:
    if line.at is not None and consequence.at is not None and line.at != consequence.at:
        return line.at < consequence.at
    if line.host == consequence.host and line.host != REASON_HOST:
        return line.order < consequence.order  # the same host's tail, oldest first
    return True


def _supporting(root: Match, matches: Sequence[Match]) -> tuple[Match, ...]:
    """The root line first, then a few more lines of the same class (other hosts first), no repeats."""
    shown = [root]
    same = [m for m in matches if m is not root and m.signature.failure_class == root.signature.failure_class]
    same.sort(key=lambda m: (m.host == root.host, m.order))
    texts = {root.text}
    for match in same:
        if len(shown) >= _SHOWN_LINES:
            break
        if match.text not in texts:
            shown.append(match)
            texts.add(match.text)
    return tuple(shown)


def _exit_codes(reason: str | None, evidence: FailureEvidence) -> tuple[int, ...]:
    codes: list[int] = []
    for _, _, line in _lines(reason, evidence):
        for found in _EXIT_CODE.findall(line.text):
            code = int(found)
            if code not in codes:
                codes.append(code)
    return tuple(codes[:5])


def classify(reason: str | None, evidence: FailureEvidence, taxonomy: Taxonomy) -> Diagnosis:
    """The root cause of a failure and its verdict (see the module docstring)."""
    matches = find_matches(reason, evidence, taxonomy)
    basis = "logs" if evidence.logs_read else "failure-reason"
    notes = list(evidence.notes)
    if not evidence.logs_read:
        notes.append("no log line could be read: decided from FailureReason alone")
    matched = {m.host for m in matches}
    common: dict[str, Any] = {
        "basis": basis,
        "exit_codes": _exit_codes(reason, evidence),
        "hosts_read": tuple(h.host for h in evidence.hosts),
        "hosts_unread": max(evidence.hosts_total - len(evidence.hosts), 0),
        "hosts_silent": tuple(h.host for h in evidence.hosts if h.host not in matched),
    }
    by_role = {role: [m for m in matches if m.signature.role is role] for role in Role}
    reports = _Reports.of(reason, evidence, taxonomy)
    root: Match | None = None
    conflicts: tuple[str, ...] = ()
    failure_class = UNKNOWN
    cause_host: str | None = None  # the host of the root cause when it is not the matched line's
    if by_role[Role.CAUSE]:
        root, conflicts = _root(by_role[Role.CAUSE], taxonomy)
        failure_class = root.signature.failure_class
        if conflicts:
            notes.append(
                f"causes of other classes were seen too ({', '.join(conflicts)}): "
                + ("the earliest decides" if root.at is not None else "the taxonomy's precedence decides")
            )
        explaining = _explaining(root, by_role[Role.GENERIC], reports) if failure_class == INTERCONNECT else []
        if explaining:
            reported = root
            root, others = _root(explaining, taxonomy)
            conflicts = tuple(dict.fromkeys((*others, INTERCONNECT, *conflicts)))
            failure_class = root.signature.failure_class
            notes.append(
                f"{reported.signature.id} on {reported.host} follows a user-code exception on another host "
                f"({root.signature.id} on {root.host}): the transport reports the exit of the process whose "
                "code raised"
            )
    elif by_role[Role.CONSEQUENCE]:
        first = min(by_role[Role.CONSEQUENCE], key=lambda m: (m.at is None, m.at or datetime.max, m.order))
        explaining = _explaining(first, by_role[Role.GENERIC], reports)
        corroboration = None if explaining else _corroborated(first, evidence, taxonomy)
        if explaining:
            root, conflicts = _root(explaining, taxonomy)
            failure_class = root.signature.failure_class
            notes.append(
                f"{first.signature.id} on {first.host} follows a user-code exception ({root.signature.id} on "
                f"{root.host}): the other ranks report the exit of the process whose code raised"
            )
        elif corroboration is not None:
            why, faulty = corroboration
            root = first
            failure_class = root.signature.failure_class
            notes.append(f"corroborated: {why}")
            # The fault is the silent peer's, not the reporter's: the lemon rule keys on its position.
            cause_host = faulty
        else:
            root = first
            notes.append(
                f"{root.signature.id} with no peer failure to explain it (a deadlock in the code, or a peer "
                "process that exited, look the same): unknown"
            )
    elif by_role[Role.GENERIC]:
        root, conflicts = _root(by_role[Role.GENERIC], taxonomy)
        failure_class = root.signature.failure_class
    if root is None:
        notes.append("no signature matched")
        return Diagnosis(failure_class=UNKNOWN, verdict=taxonomy.verdict(UNKNOWN), notes=tuple(notes), **common)
    return Diagnosis(
        failure_class=failure_class,
        verdict=taxonomy.verdict(failure_class),
        signature=root.signature.id,
        role=root.signature.role,
        source=root.signature.source,
        host=cause_host or (None if root.host == REASON_HOST else root.host),
        lines=_supporting(root, matches),
        conflicts=conflicts,
        notes=tuple(notes),
        **common,
    )
