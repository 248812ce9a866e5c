"""Regular expressions that can backtrack exponentially, found in their parse before they are ever matched.

Python's ``re`` has no timeout: a policy pattern such as ``([a-z0-9]+-?)+`` took seconds on a developer's
27-character tag value (``aaaaaaaaaaaaaaaaaaaaaaaaaa_``), doubling with each further character (tag values
have up to 256), so a compliance evaluation timed out, was dead-lettered, and the reconciler timed out on
the same job at every run. ``backtracking_problem`` says why a pattern may do that, so the document is
rejected when it is validated (``smgov policy validate``, and the functions keep the last good policy).

It refuses a repeat (``*``, ``+``, ``{m,n}`` with n > 1; not a possessive one or an atomic group) whose body
can match one string in more than one way, in the forms below. A repeat of fixed count (``{30}``) is checked
alike, for its copies share a value among them as a repeat's iterations do (``(?:[a-z0-9]?){30}[a-z0-9]{30}``
and ``(?:a|a?){26}!`` took seconds on 31 and 26 characters). The one leniency: a fixed count {n} whose
words split one way, though one string may be up to k of them (two of its words share a string), passes
while k**n is at most 64, the number of ways it can then match a value: the IPv4 pattern
``(?:(?:25[0-5]|2[0-4]\\d|1?\\d?\\d)\\.){3}...`` passes (every word ends in ``.``, a code; ``1?\\d?\\d`` reads
``11`` two ways, 2**3 in all), ``(?:a|a){26}`` does not.

- **a body that can match nothing** as well as characters: ``(a|)+``, ``(?:a|a?){26}``.
- **nested quantifiers**: the body holds a repeat of varying count (``+``, ``*``, ``?``, ``{1,3}``) and the
  whole body can match a non-empty string of only the characters that inner repeat consumes, so a run of
  them splits between iterations in exponentially many ways: ``(a+)+``, ``(\\w+\\s?)*``,
  ``([a-z0-9]+-?)+``. A body that must consume a character the inner repeat cannot is unambiguous and
  passes: ``[a-z0-9]+(-[a-z0-9]+)*``, ``(\\d+,)*``.
- **ambiguous words**: a body that matches a few strings of bounded length (literal words, alternatives,
  character classes, ``?`` and bounded repeats: at most 256 spellings of at most 64 characters) is spelled
  out as strings of character sets, and refused when a concatenation of them can be split in two ways (the
  Sardinas-Patterson test of unique decodability) or two of them share a string: ``(a|aa)*``,
  ``(ab|a|ba)*``, ``(?i)(ab|AB)+``. It is exact for literal words, so ``(x|xy)+``, ``(a|ab)*``,
  ``(foo|bar|baz)+`` and ``(dev|prod|perf)(,(dev|prod|perf))*`` pass; a character class is taken to allow
  any of its characters at once in both words compared, which can refuse more than it should, never less.
- **overlapping alternatives**, in a body that also holds an unbounded repeat (so cannot be spelled out):
  an alternation whose branches can be spelled out is refused when one branch can match the beginning of
  another (``((x|xy)y*)+``; ``((dev|deploy)-\\d+,)*`` passes); one whose branches cannot, when two can
  begin with the same character. ``(\\w|\\d)+`` passes: Python's parser turns it into one character class.
- **runs at both ends**: a body that can end with a repeat of varying count and begin with one (past parts
  that can match nothing) over shared characters, so a run of them splits between one iteration's end and
  the next one's beginning: ``(?:[a-z]*-[a-z]*)*x`` (``a-a-...``), ``(?:\\d+\\.\\d+)+``. A body that begins or
  ends with a character of its own passes: ``[a-z0-9]+(-[a-z0-9]+)*``, ``(\\d+,)*``.

Characters are compared on a sample alphabet (ASCII, a space and a few non-ASCII letters, what tag values and
failure messages hold). The analysis reads CPython's parser (``re._parser``, private): where it is missing or
fails, no pattern is refused on this ground. Polynomial backtracking (``.*.*.*x``) is not looked for.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any, Final

_ALPHABET: Final = frozenset(
    [chr(code) for code in range(32, 127)] + ["\t", "\n", "\u00a0", "\u00e9", "\u00df", "\u00dc", "\u4e2d"]
)
_MAX_WORDS: Final = 256
_MAX_LENGTH: Final = 64
_MAX_READINGS: Final = 64  # a repeat of fixed count {n} whose part reads one string k ways: k**n at most
_Word = tuple[frozenset[str], ...]
_CATEGORY: Final = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


def backtracking_problem(pattern: str) -> str | None:
    """Why ``pattern`` can backtrack exponentially (quoting the part of it at fault); None when it cannot be
    shown (or the analysis is not available)."""
    try:
        parser = importlib.import_module("re._parser")
        constants = importlib.import_module("re._constants")
        parsed = parser.parse(pattern)
        return _Walk(constants, pattern, bool(parsed.state.flags & re.IGNORECASE)).sequence(parsed)
    except Exception:  # the analysis is an extra check, never a reason to reject by itself
        return None


class _Walk:
    def __init__(self, constants: Any, pattern: str, ignore_case: bool) -> None:
        self.c = constants
        self.pattern = pattern
        self.ignore_case = ignore_case
        self.unbounded = int(constants.MAXREPEAT)

    # ---- the search ----------------------------------------------------------------------------

    def sequence(self, items: Iterable[tuple[Any, Any]]) -> str | None:
        for op, av in items:
            problem = self.node(op, av)
            if problem is not None:
                return problem
        return None

    def node(self, op: Any, av: Any) -> str | None:
        c = self.c
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, body = av
            if high > 1:  # a fixed count ({30}) too: each of its copies can split a value anew
                problem = self._ambiguous_body(body, low, high)
                if problem is not None:
                    return problem
            return self.sequence(body)
        if op is c.SUBPATTERN:
            return self.sequence(av[-1])
        if op is c.BRANCH:
            for branch in av[1]:
                problem = self.sequence(branch)
                if problem is not None:
                    return problem
            return None
        if op in (c.ASSERT, c.ASSERT_NOT):
            return self.sequence(av[1])
        if op is c.GROUPREF_EXISTS:
            return self.sequence(av[1]) or (self.sequence(av[2]) if av[2] is not None else None)
        return None  # a character, an anchor, a possessive repeat or an atomic group: nothing to backtrack

    def _ambiguous_body(self, body: Any, low: int, high: int) -> str | None:
        shown = f"a repeat ({_quantifier(low, high, self.unbounded)})"
        if self.nullable(body) and self.consumed(body):
            return (
                f"{shown} holds a part that can match the empty string as well as characters, so a value can "
                f"be shared among its repeats in exponentially many ways (a part that can match nothing)"
            )
        for inner_low, inner_high, inner in self._varying_repeats(body):
            chars = self.consumed(inner)
            if chars and self.matches_within(body, chars):
                return (
                    f"{shown} holds a repeat ({_quantifier(inner_low, inner_high, self.unbounded)}) whose "
                    f"characters the repeated part can match alone, so a run of them splits between the two "
                    f"repeats in exponentially many ways (nested quantifiers)"
                )
        words = self.words(body)
        if words is not None:
            readings = _readings(words)
            if low == high and _splits_one_way(words) and readings**low <= _MAX_READINGS:
                return None  # the words split one way; each copy's few readings multiply to a bounded number
            if readings > 1 or not _splits_one_way(words):
                return (
                    f"{shown} holds a part that can match one string in more than one way (as one repeat or "
                    f"split between repeats), so a value can be matched in exponentially many ways "
                    f"(ambiguous words)"
                )
            return None
        shared = self.edge_runs(body, from_end=True) & self.edge_runs(body, from_end=False)
        if shared:
            return (
                f"{shown} holds a part that can end with a repeat and begin with another over the same "
                f"characters ({_sample(shared)}), so a run of them splits between one repeat's end and the next "
                f"one's beginning in exponentially many ways (runs at both ends)"
            )
        for branches in self._alternations(body):
            spelled = [self.words(branch) for branch in branches]
            if all(found is not None for found in spelled):
                if _prefix_free([word for found in spelled for word in found or ()]):
                    continue
            else:
                firsts = [self.first(branch) for branch in branches]
                if not any(first & other for index, first in enumerate(firsts) for other in firsts[index + 1 :]):
                    continue
            return (
                f"{shown} holds alternatives of which one can match the beginning of another, so a value can "
                f"be matched in exponentially many ways (overlapping alternatives)"
            )
        return None

    def _varying_repeats(self, items: Any) -> Iterable[tuple[int, int, Any]]:
        """The repeats of varying count in ``items``, at any depth (not inside possessive or atomic parts)."""
        c = self.c
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                if av[1] > av[0]:
                    yield av[0], av[1], av[2]
                yield from self._varying_repeats(av[2])
            elif op is c.SUBPATTERN:
                yield from self._varying_repeats(av[-1])
            elif op is c.BRANCH:
                for branch in av[1]:
                    yield from self._varying_repeats(branch)

    def _alternations(self, items: Any) -> Iterable[list[Any]]:
        c = self.c
        for op, av in items:
            if op is c.BRANCH:
                yield av[1]
                for branch in av[1]:
                    yield from self._alternations(branch)
            elif op is c.SUBPATTERN:
                yield from self._alternations(av[-1])
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
                yield from self._alternations(av[2])

    # ---- characters ----------------------------------------------------------------------------

    def chars(self, op: Any, av: Any) -> frozenset[str] | None:
        """The characters one character node matches (of the sample alphabet); None: not a character node."""
        c = self.c
        if op is c.LITERAL:
            found = frozenset({chr(av)})
        elif op is c.NOT_LITERAL:
            found = _ALPHABET - {chr(av)}
        elif op is c.ANY:
            found = _ALPHABET - {"\n"}
        elif op is c.IN:
            negate = bool(av) and av[0][0] is c.NEGATE
            members: set[str] = set()
            for item_op, item_av in av[1:] if negate else av:
                if item_op is c.LITERAL:
                    members.add(chr(item_av))
                elif item_op is c.RANGE:
                    members.update(ch for ch in _ALPHABET if item_av[0] <= ord(ch) <= item_av[1])
                elif item_op is c.CATEGORY:
                    members.update(ch for ch in _ALPHABET if re.fullmatch(_CATEGORY[str(item_av)], ch))
                else:
                    members.update(_ALPHABET)  # not understood: every character (refuses more, never less)
            found = _ALPHABET - members if negate else frozenset(members)
        else:
            return None
        if self.ignore_case:
            found = found | {ch.swapcase() for ch in found}
        return frozenset(found)

    def consumed(self, items: Any) -> frozenset[str]:
        """Every character ``items`` can consume."""
        c = self.c
        out: set[str] = set()
        for op, av in items:
            own = self.chars(op, av)
            if own is not None:
                out |= own
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                out |= self.consumed(av[2])
            elif op is c.SUBPATTERN:
                out |= self.consumed(av[-1])
            elif op is c.ATOMIC_GROUP:
                out |= self.consumed(av)
            elif op is c.BRANCH:
                for branch in av[1]:
                    out |= self.consumed(branch)
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS):
                out |= _ALPHABET
        return frozenset(out)

    def matches_within(self, items: Any, chars: frozenset[str]) -> bool:
        """Whether ``items`` can match a string of ``chars`` only (the empty one counts: a body that can match
        nothing but also a run of them is ambiguous as well)."""
        c = self.c
        for op, av in items:
            own = self.chars(op, av)
            if own is not None:
                can = bool(own & chars)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                can = av[0] == 0 or self.matches_within(av[2], chars)
            elif op is c.SUBPATTERN:
                can = self.matches_within(av[-1], chars)
            elif op is c.ATOMIC_GROUP:
                can = self.matches_within(av, chars)
            elif op is c.BRANCH:
                can = any(self.matches_within(branch, chars) for branch in av[1])
            else:
                can = True
            if not can:
                return False
        return True  # anchors, lookarounds and group references: assumed to let it through

    def nullable(self, items: Any) -> bool:
        """Whether ``items`` can match the empty string (anchors and lookarounds match it; a group reference
        is assumed to)."""
        c = self.c
        for op, av in items:
            if self.chars(op, av) is not None:
                return False
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                can = av[0] == 0 or self.nullable(av[2])
            elif op is c.SUBPATTERN:
                can = self.nullable(av[-1])
            elif op is c.ATOMIC_GROUP:
                can = self.nullable(av)
            elif op is c.BRANCH:
                can = any(self.nullable(branch) for branch in av[1])
            else:
                can = True
            if not can:
                return False
        return True

    def edge_runs(self, items: Any, from_end: bool) -> frozenset[str]:
        """The characters of the repeats of varying count (``*``, ``+``, ``?``, ``{1,3}``) a match of ``items``
        can begin with (``from_end``: end with), looking past the parts that can match nothing."""
        c = self.c
        out: set[str] = set()
        for op, av in reversed(list(items)) if from_end else items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                if av[1] > av[0]:
                    out |= self.consumed(av[2])
                else:
                    out |= self.edge_runs(av[2], from_end)
            elif op is c.SUBPATTERN:
                out |= self.edge_runs(av[-1], from_end)
            elif op is c.BRANCH:
                for branch in av[1]:
                    out |= self.edge_runs(branch, from_end)
            if not self.nullable([(op, av)]):
                break
        return frozenset(out)

    def words(self, items: Any) -> list[_Word] | None:
        """Every string ``items`` can match, spelled as a string of character sets (one a position), when
        there are few (at most ``_MAX_WORDS``, each at most ``_MAX_LENGTH`` long); None when it can match
        more (an unbounded repeat) or is not understood (a group reference, an atomic part). Anchors and
        lookarounds are left out: the spelling holds every string the part matches, and maybe more."""
        c = self.c
        out: list[_Word] = [()]
        for op, av in items:
            own = self.chars(op, av)
            if own is not None:
                options: list[_Word] | None = [(own,)]
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
                options = self._repeated(av[0], av[1], av[2])
            elif op is c.SUBPATTERN:
                options = self.words(av[-1])
            elif op is c.BRANCH:
                options = []
                for branch in av[1]:
                    spelled = self.words(branch)
                    if spelled is None:
                        return None
                    options.extend(spelled)
            elif op in (c.AT, c.ASSERT, c.ASSERT_NOT):
                options = [()]
            else:
                return None
            if options is None or len(out) * len(options) > _MAX_WORDS:
                return None
            out = [head + tail for head in out for tail in options]
            if any(len(word) > _MAX_LENGTH for word in out):
                return None
        return out

    def _repeated(self, low: int, high: int, body: Any) -> list[_Word] | None:
        if high - low > _MAX_WORDS or high > _MAX_LENGTH:
            return None
        once = self.words(body)
        if once is None:
            return None
        out: list[_Word] = []
        current: list[_Word] = [()]
        for count in range(high + 1):
            if count >= low:
                out.extend(current)
            if count < high:
                current = [head + tail for head in current for tail in once]
                if len(current) + len(out) > _MAX_WORDS:
                    return None
        return out

    def first(self, items: Any) -> frozenset[str]:
        """The characters a match of ``items`` can begin with (every character when it can be empty)."""
        c = self.c
        out: set[str] = set()
        for op, av in items:
            own = self.chars(op, av)
            if own is not None:
                return frozenset(out | own)
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                out |= self.first(av[2])
                if av[0] > 0:
                    return frozenset(out)
            elif op is c.SUBPATTERN:
                inner = self.first(av[-1])
                out |= inner
                if inner != _ALPHABET:  # it cannot be empty (else it could begin with anything)
                    return frozenset(out)
            elif op is c.BRANCH:
                for branch in av[1]:
                    out |= self.first(branch)
                return frozenset(out)
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS, c.ATOMIC_GROUP):
                return _ALPHABET
        return _ALPHABET  # it can match the empty string: whatever follows it may begin


def _compatible(shorter: _Word, longer: _Word) -> bool:
    """Whether some string of ``shorter`` begins some string of ``longer`` (position by position)."""
    return len(shorter) <= len(longer) and all(a & b for a, b in zip(shorter, longer, strict=False))


def _prefix_free(words: list[_Word]) -> bool:
    """Whether no string of one word begins a string of another (nor of the same word listed again)."""
    pairs = [(word, other) for index, word in enumerate(words) for other in words[index + 1 :]]
    return not any(_compatible(word, other) or _compatible(other, word) for word, other in pairs)


def _readings(words: list[_Word]) -> int:
    """How many of ``words`` one string can be, at most (1: no two words share a string): for each word, the
    words of its length it shares a string with, itself included, which counts more than may share one."""
    return max(
        (sum(len(other) == len(word) and _compatible(word, other) for other in words) for word in words), default=1
    )


def _splits_one_way(words: list[_Word]) -> bool:
    """The Sardinas-Patterson test on words spelled as character sets: whether no string is a concatenation
    of words split at two different places (two words that share a string are counted by ``_readings``).
    Exact for words of single characters (literal strings); a set of several characters is taken to allow
    any of them at that place in both words compared, so it errs towards "not decodable" (the pattern
    refused), never the other way. The empty word counts as a word: a part that can match nothing and
    something is refused."""
    dangling: set[_Word] = set()
    for index, word in enumerate(words):
        for other_index, other in enumerate(words):
            if index != other_index and len(word) < len(other) and _compatible(word, other):
                dangling.add(other[len(word) :])
    seen: set[_Word] = set()
    while dangling:
        suffix = dangling.pop()
        if suffix in seen:
            continue
        seen.add(suffix)
        for word in words:
            if _compatible(suffix, word):
                if len(suffix) == len(word):
                    return False  # what is left of one split is a word of the other
                dangling.add(word[len(suffix) :])
            elif _compatible(word, suffix):
                dangling.add(suffix[len(word) :])
    return True


def _sample(chars: frozenset[str]) -> str:
    shown = "".join(sorted(chars)[:8])
    return repr(shown + "..." if len(chars) > 8 else shown)


def _quantifier(low: int, high: int, unbounded: int) -> str:
    if (low, high) == (0, unbounded):
        return "*"
    if (low, high) == (1, unbounded):
        return "+"
    if (low, high) == (0, 1):
        return "?"
    if low == high:
        return f"{{{low}}}"
    return f"{{{low},{'' if high == unbounded else high}}}"
