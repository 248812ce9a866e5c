"""Why a training job failed: the failure taxonomy (data) and the classification of a failure's evidence.

Pure. The taxonomy is a data file of this package (``data/failure_taxonomy.yaml``) validated by the
``Taxonomy`` model: classes with a default verdict (resume / skip) and signatures (regular expressions
over the ``FailureReason`` and the last lines of each host's log stream, each citing where its message
text comes from). A team adds signatures and changes a class's verdict in its policy
(``ResumePolicy.signatures`` / ``.classes``); it cannot remove a built-in signature, so a team's policy
never switches the defaults off, and a malformed team pattern is rejected when the policy is validated.

``classify(reason, evidence, taxonomy)`` finds the root cause:

1. every signature match over the ``FailureReason`` (one line at a time) and each host's tail;
2. *causes* first: the earliest by log timestamp; when a cause has no timestamp (the ``FailureReason``,
   an offline file without times), the taxonomy's ``precedence`` decides between classes. A user-code
   line that merely mentions NCCL matches no hardware signature (and ``ncclInvalidUsage`` is a user-code
   cause), so a code bug never reads as hardware;
3. else *consequences* (a collective watchdog timeout): their class only when a peer's failure
   corroborates them (a peer whose log fell silent ``silent_peer_minutes`` before), else ``unknown``;
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
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

UNKNOWN: Final = "unknown"
REQUIRED_CLASSES: Final = frozenset(
    {"hardware", "interconnect", "capacity", "sagemaker-internal", "user-code", UNKNOWN}
)
# Classes whose repetition on the same host position marks a lemon (domain/resume.py).
HARDWARE_CLASSES: Final = frozenset({"hardware", "interconnect"})
REASON_HOST: Final = "FailureReason"  # the "host" of a match found in the FailureReason
MAX_LINE_CHARS: Final = 2_000  # a line longer than this is searched in its first 2,000 characters
MAX_PATTERN_CHARS: Final = 400
_SHOWN_CHARS: Final = 300
_SHOWN_LINES: Final = 4
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
# A group that repeats and is itself repeated ("(a+)+", "(\w*)*"): exponential backtracking on a
# non-matching line. Python's re has no timeout, so such team patterns are refused up front.
_NESTED_QUANTIFIER: Final = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)[*+{]")
_EXIT_CODE: Final = re.compile(r"\b(?:ExitCode|exit ?code|exitcode)\s*[:=]?\s*(-?\d{1,3})\b", re.IGNORECASE)


class Verdict(StrEnum):
    RESUME = "resume"
    SKIP = "skip"


class Role(StrEnum):
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    GENERIC = "generic"


class Where(StrEnum):
    REASON = "reason"  # the job's FailureReason
    LOG = "log"  # the hosts' log lines
    ANY = "any"


class FailureClass(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Verdict
    description: str = ""


def _check_name(value: str, what: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be kebab-case (a-z, 0-9, -; at most 63 characters)")
    return value


class Signature(BaseModel):
    """One recognisable failure message (built in, or a team's in ``resume.signatures``).

    Example:
        - id: my-plugin-transport
          class: interconnect
          pattern: "MYPLUGIN: transport to rank \\\\d+ lost"
          where: log            # reason | log | any (default)
          role: cause           # cause (default) | consequence | generic
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    failure_class: str = Field(alias="class")
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    role: Role = Role.CAUSE
    where: Where = Where.ANY
    source: str | None = Field(default=None, description="Where the message text comes from.")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_name(value, "signature id")

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the pattern is empty")
        if _NESTED_QUANTIFIER.search(value):
            raise ValueError("the pattern repeats a repeated group (e.g. '(a+)+'): it could backtrack for ever")
        try:
            re.compile(value, re.IGNORECASE)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as written (``class``), so a dumped policy validates again (team merges, ``policy show``)."""
        out: dict[str, Any] = handler(self)
        if "failure_class" in out:
            out = {("class" if key == "failure_class" else key): value for key, value in out.items()}
        return out

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def applies_to(self, where: Where) -> bool:
        return self.where is Where.ANY or self.where is where


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


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
            _check_name(name, "class")
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


def check_team_signatures(signatures: Sequence[Signature]) -> Sequence[Signature]:
    """A team's signatures may not reuse a built-in id and must name a known class."""
    if not signatures:  # nothing to check: the taxonomy is not read (a policy re-validated from its dump)
        return signatures
    builtin = builtin_taxonomy()
    ids = {s.id for s in builtin.signatures}
    seen: set[str] = set()
    for signature in signatures:
        if signature.id in ids:
            raise ValueError(f"signature id {signature.id!r} is built in (built-in signatures cannot be replaced)")
        if signature.id in seen:
            raise ValueError(f"duplicate signature id {signature.id!r}")
        seen.add(signature.id)
        if signature.failure_class not in builtin.classes:
            raise ValueError(
                f"signature {signature.id!r}: unknown class {signature.failure_class!r} "
                f"(one of {', '.join(builtin.precedence)})"
            )
    return signatures


def check_class_names(verdicts: Mapping[str, Verdict]) -> Mapping[str, Verdict]:
    if not verdicts:  # nothing to check: the taxonomy is not read (a policy re-validated from its dump)
        return verdicts
    known = builtin_taxonomy().classes
    unknown = [name for name in verdicts if name not in known]
    if unknown:
        raise ValueError(f"unknown class(es) {', '.join(unknown)} (one of {', '.join(known)})")
    return verdicts


# ---- the evidence -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    text: str
    at: datetime | None = None


@dataclass(frozen=True)
class HostLog:
    """The last lines of one host's log stream (oldest first)."""

    host: str  # "algo-2"
    stream: str
    lines: tuple[LogLine, ...]
    last_event_at: datetime | None = None

    @property
    def last_at(self) -> datetime | None:
        times = [line.at for line in self.lines if line.at is not None]
        return max(times) if times else self.last_event_at


@dataclass(frozen=True)
class FailureEvidence:
    """What was read about a failure besides its ``FailureReason``: the hosts' tails, failing host first."""

    hosts: tuple[HostLog, ...] = ()
    logs_read: bool = False  # False: no log could be read (the diagnosis rests on FailureReason alone)
    notes: tuple[str, ...] = ()  # what could not be read, and why
    hosts_total: int = 0  # streams found (the latest per host), read or not

    @classmethod
    def unread(cls, note: str) -> FailureEvidence:
        return cls(logs_read=False, notes=(note,))


def host_of_stream(stream: str, job_name: str | None = None) -> str:
    """``<job>/algo-2-1700000000`` -> ``algo-2``: the host position, without the container start time."""
    name = stream.split("/", 1)[1] if "/" in stream else stream
    if job_name and stream.startswith(job_name + "/"):
        name = stream[len(job_name) + 1 :]
    return re.sub(r"-\d{9,}$", "", name) or name


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
        return out


def _lines(reason: str | None, evidence: FailureEvidence) -> Iterable[tuple[Where, str, LogLine]]:
    for text in (reason or "").splitlines():
        if text.strip():
            yield Where.REASON, REASON_HOST, LogLine(text[:MAX_LINE_CHARS])
    for host in evidence.hosts:
        for line in host.lines:
            if line.text.strip():
                yield Where.LOG, host.host, LogLine(line.text[:MAX_LINE_CHARS], line.at)


def find_matches(reason: str | None, evidence: FailureEvidence, taxonomy: Taxonomy) -> list[Match]:
    matches: list[Match] = []
    for order, (where, host, line) in enumerate(_lines(reason, evidence)):
        text = line.text.strip()
        for signature in taxonomy.signatures:
            if signature.applies_to(where) and signature.regex.search(text):
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
    common: dict[str, Any] = {
        "basis": basis,
        "exit_codes": _exit_codes(reason, evidence),
        "hosts_read": tuple(h.host for h in evidence.hosts),
    }
    by_role = {role: [m for m in matches if m.signature.role is role] for role in Role}
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
    elif by_role[Role.CONSEQUENCE]:
        root = min(by_role[Role.CONSEQUENCE], key=lambda m: (m.at is None, m.at or datetime.max, m.order))
        corroboration = _corroborated(root, evidence, taxonomy)
        if corroboration is not None:
            why, faulty = corroboration
            failure_class = root.signature.failure_class
            notes.append(f"corroborated: {why}")
            # The fault is the silent peer's, not the reporter's: the lemon rule keys on its position.
            cause_host = faulty
        else:
            notes.append(
                f"{root.signature.id} with no peer failure to explain it (it may be a deadlock in the code): unknown"
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


@dataclass(frozen=True)
class CheckpointProgress:
    """What the checkpoint location holds relative to the failed attempt (``ListObjectsV2``)."""

    checked: bool
    written: int = 0  # objects written since the attempt started
    total: int = 0  # objects seen under the prefix
    latest: datetime | None = None
    note: str | None = None  # why it was not checked, or that the listing was cut short
    # False: the deployment does not check this location (no CheckpointBucketPattern, or a bucket outside
    # it); True and not checked: it should have been checked but could not be (denied, throttled, cut).
    in_scope: bool = True
    # LastModified of each object written since the attempt started (Spot economics: work kept per stint).
    written_at: tuple[datetime, ...] = ()
    truncated: bool = False  # the listing was cut short: ``written_at`` may miss objects

    @classmethod
    def unknown(cls, note: str) -> CheckpointProgress:
        """The location is in scope but could not be read: progress cannot be confirmed."""
        return cls(checked=False, note=note)

    @classmethod
    def out_of_scope(cls, note: str) -> CheckpointProgress:
        """The deployment does not check this location (the documented consequence: resumed on its
        ``CheckpointConfig`` alone)."""
        return cls(checked=False, note=note, in_scope=False)

    @property
    def unreadable(self) -> bool:
        return self.in_scope and not self.checked

    def evidence(self) -> dict[str, Any]:
        if not self.checked:
            state = "unreadable" if self.in_scope else "not checked"
            return {"checkpoint_progress": state, "checkpoint_note": self.note}
        out: dict[str, Any] = {
            "checkpoint_progress": "written" if self.written else "none",
            "checkpoint_objects_written": self.written,
            "checkpoint_objects": self.total,
        }
        if self.latest is not None:
            out["checkpoint_latest"] = self.latest.isoformat()
        if self.note:
            out["checkpoint_note"] = self.note
        return out
