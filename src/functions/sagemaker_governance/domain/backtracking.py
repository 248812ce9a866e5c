"""Regular expressions that can backtrack exponentially, found in their parse before they are ever matched.

Python's ``re`` has no timeout: a policy pattern such as ``([a-z0-9]+-?)+`` took seconds on a developer's
27-character tag value (``aaaaaaaaaaaaaaaaaaaaaaaaaa_``), doubling with each further character (tag values
have up to 256), so a compliance evaluation timed out, was dead-lettered, and the reconciler timed out on
the same job at every run. ``backtracking_problem`` says why a pattern may do that, so the document is
rejected when it is validated (``smgov policy validate``, and the functions keep the last good policy).

It refuses a repeat (``*``, ``+``, ``{m,n}`` with n > 1; not a possessive one or an atomic group) whose body
can match one string in more than one way, in the forms below. A repeat of fixed count (``{30}``) is checked
alike, for its copies share a value among them as a repeat's iterations do (``(?:[a-z0-9]?){30}[a-z0-9]{30}``
and ``(?:a|a?){26}!`` took seconds on 31 and 26 characters).

- **a body that can match nothing** as well as characters: ``(a|)+``, ``(?:a|a?){26}``, ``(a*)\\1+`` (a
  reference to a group matches what the group did: ``(a)\\1+`` repeats one ``a`` and passes).
- **nested quantifiers**: the body holds a repeat of varying count (``+``, ``*``, ``?``, ``{1,3}``) and the
  whole body can match a non-empty string of only the characters that inner repeat consumes, so a run of
  them splits between iterations in exponentially many ways: ``(a+)+``, ``(\\w+\\s?)*``,
  ``([a-z0-9]+-?)+``. A body that must consume a character the inner repeat cannot is unambiguous and
  passes: ``[a-z0-9]+(-[a-z0-9]+)*``, ``(\\d+,)*``. Two copies (``(?:\\w+\\s?){2}``) cut a run in two,
  quadratic, not exponential: they pass in a value matched whole and are left to the degree rule below;
  not in a pattern searched for (``searched``: a team signature, searched for in log lines of up to 2,000
  characters, where every start pays the cut again: ``(?:\\w+\\s?){2}x`` took over three minutes on one).
- **ambiguous words**: a body that matches a few strings of bounded length (literal words, alternatives,
  character classes, ``?`` and bounded repeats: at most 256 spellings of at most 64 characters) is spelled
  out as strings of character sets, and refused when a concatenation of them can be split in two ways (the
  Sardinas-Patterson test of unique decodability) or two of them share a string: ``(a|aa)*``,
  ``(ab|a|ba)*``, ``(?i)(ab|AB)+``. It is exact for literal words, so ``(x|xy)+``, ``(a|ab)*``,
  ``(foo|bar|baz)+`` and ``(dev|prod|perf)(,(dev|prod|perf))*`` pass; a character class is taken to allow
  any of its characters at once in both words compared, which can refuse more than it should, never less.
  A fixed count whose words split one way, though one string may be up to k of them, passes on its own.
- **overlapping alternatives**, in a body that also holds an unbounded repeat (so cannot be spelled out):
  an alternation whose branches can be spelled out is refused when one branch can match the beginning of
  another (``((x|xy)y*)+``; ``((dev|deploy)-\\d+,)*`` passes); one whose branches cannot, when two can
  begin with the same character. ``(\\w|\\d)+`` passes: Python's parser turns it into one character class.
- **runs at both ends**: a body that can end with a repeat of varying count and begin with one (past parts
  that can match nothing) over shared characters, so a run of them splits between one iteration's end and
  the next one's beginning: ``(?:[a-z]*-[a-z]*)*x`` (``a-a-...``), ``(?:\\d+\\.\\d+)+``. A body that begins or
  ends with a character of its own passes: ``[a-z0-9]+(-[a-z0-9]+)*``, ``(\\d+,)*``. Two copies pass as above.

Over the whole pattern, not only inside repeats:

- **readings multiplied**: the ways each part can read one string (two words that share a string, a fixed
  count's copies each reading it k ways: k**n), multiplied over the parts in a row, may be at most 64: the
  IPv4 pattern ``(?:(?:25[0-5]|2[0-4]\\d|1?\\d?\\d)\\.){3}...`` passes (``1?\\d?\\d`` reads ``11`` two ways,
  2**3 * 2 in all), ``(?:a|a){6}`` written five times (64**5) and ``(?:ab|[a-z]{2})?`` written 26 times
  (2**26) do not. Of alternatives too many to spell out together, the most readings of one is taken.
- **a run cut many ways** (polynomial backtracking): repeats of varying count in a row (past parts that can
  match nothing, through groups and a fixed count's copies, each of those inside an optional part or the
  alternative that holds the most) that can each take a piece of one run of the same characters: a
  pattern that fails tries every way to cut the run. More than 3 repeats that can take
  a piece of any length (``\\d*\\d*\\d*\\d*x``: the length to the power 4; ``\\d*\\d*\\d*x`` passes,
  68 ms on 256 digits), more than 2 when the run goes through two copies (``(?:\\w+\\s?){2}\\w+``), or bounded
  ones whose counts multiply past 256 (``(?:-[a-z]+)?`` written nine times: 2**9) are refused.
  ``[a-z]+(?:-[a-z]+)?(?:-[a-z]+)?`` passes: each optional part begins with its own ``-``.

  **Runs in a row multiply.** A run that ends (at a part it cannot go on through, or where a repeat of other
  characters begins) can still be cut in as many ways as its places over the ``length`` of its last cut,
  which must fall where it ends; a failure after the next run tries every cut of that one for each of them.
  So a run that begins after others starts with the most such ways of any before it, and
  ``[a-z]*[a-z]*[a-z]*\\d*\\d*\\d*#`` (each run cut three times: 40 s on 128 letters and 128 digits),
  ``[a-z]*[a-z]*[a-z]*-\\d*\\d*\\d*#`` (49 s) and ``[a-z]*[a-z]*[a-z]*\\d*\\d*#`` (0.54 s) are refused, while
  ``[a-z]*[a-z]*\\d*\\d*#`` (8 ms) and ``[a-z]*[a-z]*[a-z]*\\d*#`` (18 ms) pass; a run of one repeat ends in one
  way, so ``[a-z]+-\\d+`` and ``[a-z0-9]+(-[a-z0-9]+)*`` are counted as before. Searched for, the start and a
  repeat before a word are such a run: ``.*;\\d*\\d*x`` (every start before the one ``;`` cuts the digits after
  it anew) took 17 s on a line of 1,000 letters, ``;`` and digits, and ``\\d+::a\\d+.\\d+b`` 9 s.

  **Searched for** (``searched``: a team signature, under ``re.search`` in log lines of up to 2,000
  characters), the bound is 2 and the start counts as one: ``re.search`` tries the pattern at every start,
  as if it began with a lazy repeat of any character, so each run that can begin at the start is cut once
  more. ``.*=.*=.*nan`` (over 40 s on a progress bar of 500 ``=``), ``\\w+\\s*\\w+\\s*timeout`` (a
  hex dump), ``\\S+\\s*\\S+\\s*oom`` and ``\\w+\\w+:\\s*error`` (15 s on 2,000 letters) are
  refused; ``.*x`` and ``\\w+x`` (the line's length squared: 50 ms) pass. A pattern anchored at the
  text's start (``^`` without MULTILINE, ``\\A``, in every alternative) is tried at one start, so
  ``^\\w+\\w+x`` passes; a first character the repeats do not share ends the start's run there
  (``=\\w+\\w+x``: a run of letters begins after each ``=``, and the runs after different starts are
  apart), while ``libfabric:.*`` starts where ``l`` does, which ``.*`` shares: the start and the ``.*``
  count two. Words in order are best found with atomic groups (``libfabric:(?>.*?\\befa\\b).*\\berr``).

  A run also goes on through a part every match must pass (a literal word, a word of alternatives,
  ``\\d+``) when the stretch before it can hold that part's characters and a repeat after it that takes a
  piece of any length can take them as well: ``.*`` before ``y`` and ``.*`` after it both span
  ``xyxy...``, split at any ``y``, so the run is not of one character (``yyy...``) but of what the
  stretch is made of. ``x.*y.*z`` cuts ``xyxy...`` at every ``x`` (a start), every ``y`` and wherever
  ``.*`` gives back in its search for ``z``: cubic, 0.8 s on ``xy`` written 1,000 times; ``x.*y.*z.*w``
  took 0.55 s on 600 characters and 454 s on a crafted line of 2,000; both are refused. ``.*y[^y]*z``
  cuts at a ``y`` only where ``[^y]*`` ends, for it cannot take the next ``y`` (quadratic, 0.1 s on 2,000
  ``y``), and ``.*y.?\\d*5`` passes too (``.?`` takes one character of the stretch, not any length).
  Words in order are found in one pass with an atomic group: ``x(?>.*?y).*z`` passes.

  Repeats the rest of the pattern can always follow are not counted: once the match reaches them it has
  succeeded and never backtracks into the parts before. Searched for, these are the parts at the end that
  always match the empty string (a trailing ``.*``, ``\\s*``, ``(?:x|)``; not ``$``, ``\\b`` or a
  lookaround, which can fail), so ``.*error.*`` (26 ms on 2,000 letters ignoring case, as ``.*x``) and
  ``foo.*bar.*`` pass; a repeat of one character node just before them counts as that node once, for it
  succeeds as soon as it can begin (``abx.*\\w+`` passes, while ``Error.*\\w+Exception``, whose ``\\w+``
  must still be followed by a word, took longer on ``Error`` written 400 times than ``x.*y.*z`` on
  ``xyxy...`` and is refused). Matched whole, those parts are free too when one of them is ``.*`` (any
  character but a newline, which a tag value cannot hold: it reaches the end from anywhere, where ``$``
  holds), so ``a.*b.*c.*d.*`` and ``^a.*b.*c.*d.*$`` pass and ``a.*b.*c.*d.*e`` does not. A pattern that
  ends in an alternation (``.*error.*|oom``, ``^\\w+\\w+x|oom``, ``x(?:.*y|z)``) matches where what comes
  before it does with one of its alternatives, each tried in turn, so each is walked as a whole pattern
  with that part: its own start, anchored or not, and its own last parts.

  **Weighed by where the cuts fall.** A cut inside a run of one character, or before a part of one
  character, can fall at any of the text's ``n`` places (256 matched whole, 2,000 searched for), but one
  that must fall where a word of period p >= 2 begins falls at ``n / p`` at most: the period is the
  smallest shift at which the word can overlap itself (every pair of its positions that far apart has a
  character in common; at none: its length), and two places where it begins are at least that far apart.
  The search's start counts ``n``, or ``n / p`` when the pattern begins with such a word; a repeat of one
  character node counts ``n / p`` when the run goes on through such a word right after it, ``n`` when a
  part of varying length comes between (``.*\\d*+Call``) or the repeat holds more than a character node,
  and the last cut counts ``n``. The places multiplied may be at most what the degree allows a run of one
  character (``256**3`` matched whole, ``2,000**2`` searched for), so a run of one character is refused
  exactly as before and a pattern whose cuts fall where words begin never has more places than one the
  degree accepts, whatever follows its last cut: matched whole, ``cc=.*;team=.*;project=.*;owner=.*;``
  (four cuts, 43 * 29 * 37 * 256 places, 0.2 ms on a crafted value) passes, while ``a.*b.*c.*d.*e`` (256**4:
  0.4 to 0.6 s ignoring case on ``a`` and 85 each of ``b``, ``c`` and ``d``) and
  ``\\d*\\d*\\d*12345678\\d*x`` (a fourth cut at a word: 0.9 s) do not; ``\\d*\\d*\\d*x`` took 35 ms, 75 ms
  ignoring case. Searched for, a larger budget was measured and found not to hold (Python 3.11, ignoring
  case, the least of several runs on crafted lines of 2,000 characters while other work shared the two
  cores): ``NCCL WARN.*Call to .* failed`` (250 * 250 * 2,000 places) took 50 to 113 ms, as ``.*x`` (28 ms)
  or ``\\w+x`` (40 to 84 ms), but patterns with the same places took 0.19 to 0.27 s
  (``abcdefgh.*ijklmnop.*qrstuvwx``), 0.76 to 0.9 s (``NCCL WARN.*NCCL WARN.*?\\derror``), 1.1 to 2.4 s
  (``NCCL WARN[^y]*NCCL WARN.*?\\derror$``) and 0.85 to 1.5 s (``NCCL WARN.*NCCL WARN.*`` and fifty ``=``
  and ``x``, on ``=`` after the words), as long as ``foo.*bar.*baz`` (0.6 to 1.6 s), which is refused: what
  a place costs depends on what follows the last cut (sre skips to a literal after a greedy repeat, its
  literal-tail fast path, which ``' failed'`` takes, but then tries all of it at each place it can begin).
  So ``NCCL WARN.*Call to .* failed`` is still refused (``NCCL WARN(?>.*?Call to ).* failed`` passes).

  **Weighed by the word after a cut.** The rest of the pattern tried at one of a cut's places counts one step,
  but a word of character nodes after the cut (literals, classes, and a fixed count of them, ``={50}`` or
  ``\\w{999}``, written out up to 128 characters) is read as far as it matches at each place before the match
  fails: ``.*={50}x`` reads fifty ``=`` at each place ``.*`` gives back on a line of ``=`` (0.33 to 0.36 s,
  where ``.*x`` took 15 to 55 ms), ``\\w+y\\w{999}`` up to a thousand characters (1.6 to 2 s on a crafted
  line). A beginning of the word ``k`` characters long whose period is ``p`` (as above, but a class and a literal
  compared: ``\\d`` and ``-`` share no character) matches at places ``p`` apart at most, so at ``1 / p`` of the
  places: the word reads about the most ``k / p`` of its beginnings at a place (``={50}x``: 50; ``error``: 1;
  ``aa``: 2), and the places multiplied by that may be at most ``_PLACE_STEPS`` (4) times the budget, whether
  or not a part of varying length comes between the cut and the word. Searched for, a whole word read at the
  pattern's end is a match found, so the longest beginning read where the match fails is one character shorter
  (``.*aa`` reads one ``a``); matched whole, the value must end there too. Measured as above (the least of a
  few runs, ignoring case, on the worst lines found, ``.*x`` taking 15 ms): a word read four characters at a
  place took 57 to 98 ms (``.*={4}x``, ``.*aaaa!``, ``.*\\d{4}x``, ``.*\\w{4}x``: a class and a letter ignoring
  case are read slower than ``=``), eight 53 to 159 ms, so ``.*\\d{4}-\\d{2}-\\d{2}`` and ``.*aa`` pass, and
  ``.*={8}x``, which this count does not tell from ``.*\\w{8}x``, is refused with ``.*={50}x``,
  ``\\w+y\\w{999}``, ``.*[0-9a-f]{32}`` (0.9 to 1.5 s) and the matching form of ``.*=.*={100}x`` (0.82 s).
  Matched whole, ``\\d*\\d*\\d*\\d{50}x`` (0.94 s on 256 digits, where ``\\d*\\d*\\d*x`` took 48 ms) is refused.

Characters are compared as ``re`` reads them: every character node is asked of ``re`` itself, with the flags
in force where it stands (a scoped ``(?i:a)`` matches ``A``; ``(?a:\\w)`` no ``ж``), on a sample alphabet
(ASCII, a space, a few letters, digits, spaces and signs beyond ASCII, what tag values and failure messages
hold) widened by the pattern's own characters in either case, so ``\\w`` meets a literal ``ж`` and ``\\d``
a literal ``\\u0660`` (an Arabic-Indic zero) as they do at run time. The analysis reads CPython's parser
(``re._parser``, private): where it is missing or cannot parse the pattern (``re.compile`` says why), no
pattern is refused on this ground. The analysis itself is bounded: a sequence is opened into at most 4,096
parts (a fixed count's copies written out stop there, however deeply they nest), and the whole analysis
may take ``_MAX_STEPS`` steps (parts walked or written out); a pattern that needs more, such as ``(?:a){2}``
nested twenty deep (2**20 copies, which took seconds and, 24 deep, minutes to analyse), is refused as too
complex to check. So is one the analysis fails on inside (an exception of its own): a pattern not checked
is not known to be safe, and a refused team pattern costs the document (the functions keep its last good
version), while an accepted one that backtracks hangs every reaction that matches it.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

_ALPHABET: Final = frozenset(
    [chr(code) for code in range(32, 127)] + ["\t", "\n", "\u00a0", "\u00e9", "\u00df", "\u00dc", "\u4e2d"]
)
# characters outside ASCII that classes and categories match at run time, one of each kind: a letter and its
# capital, a digit (\d), a space (\s), a sign, a combining mark, a digit that is \w only, and the letters that
# match ASCII ones when case is ignored (the long s, the Kelvin sign, the dotless i, the dotted I)
_BEYOND: Final = frozenset("\u0436\u0416\u0660\u2003\u2014\u0301\u00b2\u017f\u212a\u0131\u0130")
_MAX_WORDS: Final = 256
_MAX_LENGTH: Final = 64
_MAX_READINGS: Final = 64  # the ways the whole pattern may read one value: each part's readings multiplied
_MAX_DEGREE: Final = 3  # repeats of varying count in a row that may share one run of characters
_SEARCHED_DEGREE: Final = 2  # the same, searched for (re.search): its start positions count as one of them
_WHOLE_LENGTH: Final = 256  # a tag value's length at most (botocore's TagValue), matched whole
_SEARCHED_LENGTH: Final = 2_000  # a log line's length at most, searched for
# the places a run's cuts can fall at, multiplied, at most: what the degree allows a run of one character (three
# cuts anywhere matched whole, two searched for, the start one of them), so a pattern whose cuts fall where words
# begin never has more places than one the degree accepts (measured: see the module docstring)
_WHOLE_BUDGET: Final = _WHOLE_LENGTH**_MAX_DEGREE
_SEARCHED_BUDGET: Final = _SEARCHED_LENGTH**_SEARCHED_DEGREE
_MAX_STEPS: Final = 200_000  # parts the degree rule may walk over the whole analysis; more: too complex
_FEW_COPIES: Final = 2  # a fixed count up to this may hold nested quantifiers, matched whole (a tag value)
_WIDE: Final = 16  # a bounded repeat of more counts than this spreads a run as an unbounded one does
_FLAT_BUDGET: Final = 4096  # parts a sequence is opened into, at most (fixed counts written out)
_MAX_SPLITS: Final = 256  # ways bounded repeats in a row may cut one run of characters among them
# the characters a word after a cut may read at each place the cut falls at, counted as one place: a word read so
# far at places in a row (``.*={4}x`` on ``=``, ``.*\w{4}x`` on letters) took 57 to 98 ms where ``.*x`` took 15 ms on
# its worst line (see the module docstring); a word that reads more costs its characters over this a place
_PLACE_STEPS: Final = 4
# a fixed count of character nodes is written out as far as this many characters, and the word after a cut is
# spelled, and weighed, as far: a longer one took seconds to analyse (``\w{999}`` written twenty times, 3.8 s at 256,
# 2 s at 128), and its first 128 characters weigh enough to refuse a word where a run's places exceed 2,000**2 / 32
_SPELLED_CHARS: Final = 128
_CHARS: Final = "CHARS"  # a character node, rewritten: its argument is the set of characters it matches
# a literal character, rewritten so: the set is exact (its characters, in every case, are in the alphabet), where a
# class's may leave out characters beyond the sample alphabet that it shares with another class
_LITERAL: Final = "LITERAL_CHARS"
_Word = tuple[frozenset[str], ...]
# how a run is cut: the places its cuts can fall at, multiplied (the last one anywhere: ``length`` places), the
# repeats of any length it is cut among, the ways bounded ones cut it, whether through a fixed count's copies,
# and whether a part of varying length has come since its last cut (a word after it is then not where it falls)
_Run = tuple[int, int, int, bool, bool]
# a stretch a run is carried over: its characters, those of the parts it holds, and the word of character nodes
# it begins with after the run's last cut, and whether that word can still grow (no part of varying length yet)
# a word a stretch begins with, position by position: the characters the node takes there, and whether it is a
# literal, whose set is exact; a class's, a category's or any character's may leave out characters beyond the sample
# alphabet that another class's position holds too
_Spelled = tuple[tuple[frozenset[str], bool], ...]
_Bridge = tuple[frozenset[str], frozenset[frozenset[str]], _Spelled, bool]
_CATEGORY: Final = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}


def backtracking_problem(pattern: str, searched: bool = False) -> str | None:
    """Why ``pattern`` can backtrack exponentially, or polynomially beyond ``_WHOLE_BUDGET`` (a run of characters
    cut among repeats at more places, multiplied: more than ``_MAX_DEGREE`` cuts anywhere); None when it
    cannot be shown (or the analysis is not available). ``searched``: the pattern is searched for in long
    text (a log line), which pays one cut more for every place it starts at: a run that can begin at an
    unanchored start may be cut at ``_SEARCHED_BUDGET`` places (``_SEARCHED_DEGREE`` cuts anywhere, the start
    counted as one), and a fixed count of nested quantifiers
    (``(?:\\w+\\s?){2}``) is refused there as before, while a tag value matched whole may hold one of up to
    ``_FEW_COPIES``."""
    try:
        parser = importlib.import_module("re._parser")
        constants = importlib.import_module("re._constants")
        parsed = parser.parse(pattern)
    except Exception:  # no parser to read (another Python), or not a pattern at all: re.compile says so
        return None
    try:
        walk = _Walk(constants, pattern, searched)
        items = walk.prepare(parsed, parsed.state.flags)
        problem = walk.sequence(items, top=True)
        if problem is None and walk.readings(items) > _MAX_READINGS:
            problem = (
                f"its parts can each match one string in a few ways, more than {_MAX_READINGS} in all, so a "
                f"value can be matched in exponentially many ways (ambiguous words, multiplied)"
            )
        return problem
    except _TooComplex:
        return (
            f"it is too complex to check (more than {_MAX_STEPS} steps of the analysis: nested fixed counts "
            f"written out, or a great many parts)"
        )
    except Exception as exc:  # a pattern that cannot be checked is not known to be safe: refused
        return f"it could not be checked ({type(exc).__name__} in the analysis)"


class _TooComplex(Exception):
    """The analysis spent its ``_MAX_STEPS``: the pattern is refused rather than checked for ever."""


class _Walk:
    def __init__(self, constants: Any, pattern: str, searched: bool) -> None:
        self.c = constants
        self.pattern = pattern
        self.searched = searched
        self.few_copies = 0 if searched else _FEW_COPIES
        self.max_degree = _SEARCHED_DEGREE if searched else _MAX_DEGREE
        self.length = _SEARCHED_LENGTH if searched else _WHOLE_LENGTH
        self.budget = _SEARCHED_BUDGET if searched else _WHOLE_BUDGET
        self.steps = 0
        self.unbounded = int(constants.MAXREPEAT)
        self.alphabet: frozenset[str] = _ALPHABET | _BEYOND
        self._sets: dict[tuple[str, int], frozenset[str]] = {}
        self._memo: dict[tuple[str, int, Any], Any] = {}  # by the identity of a part of the rewritten parse
        self._groups: dict[int, Any] = {}  # a capturing group's number: its part, rewritten

    # ---- characters, read once with the flags in force where they stand ----------------------------

    def prepare(self, items: Any, flags: int) -> list[tuple[Any, Any]]:
        """``items`` with every character node replaced by the set of characters it matches, read with the
        flags in force where it stands (a scoped ``(?i:...)`` too), on the sample alphabet widened by the
        pattern's own characters (in either case), so a class is compared with them as at run time."""
        own: set[str] = set()
        self._own(items, own)
        self.alphabet = frozenset(_ALPHABET | _BEYOND | {variant for ch in own for variant in _cases(ch)})
        return self._rewrite(items, flags)

    def _own(self, items: Any, out: set[str]) -> None:
        c = self.c
        for op, av in items:
            if op in (c.LITERAL, c.NOT_LITERAL):
                out.add(chr(av))
            elif op is c.IN:
                for item_op, item_av in av:
                    if item_op is c.LITERAL:
                        out.add(chr(item_av))
                    elif item_op is c.RANGE:
                        out.update((chr(item_av[0]), chr(item_av[1])))
            else:
                for child in self._children(op, av):
                    self._own(child, out)

    def _children(self, op: Any, av: Any) -> list[Any]:
        c = self.c
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            return [av[2]]
        if op is c.SUBPATTERN:
            return [av[-1]]
        if op is c.BRANCH:
            return list(av[1])
        if op is c.ATOMIC_GROUP:
            return [av]
        if op in (c.ASSERT, c.ASSERT_NOT):
            return [av[1]]
        if op is c.GROUPREF_EXISTS:
            return [av[1]] + ([av[2]] if av[2] is not None else [])
        return []

    def _rewrite(self, items: Any, flags: int) -> list[tuple[Any, Any]]:
        c = self.c
        out: list[tuple[Any, Any]] = []
        for op, av in items:
            if op is c.LITERAL:
                out.append((_LITERAL, self._set(op, av, flags)))
            elif op in (c.NOT_LITERAL, c.ANY, c.IN):
                out.append((_CHARS, self._set(op, av, flags)))
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                out.append((op, (av[0], av[1], self._rewrite(av[2], flags))))
            elif op is c.SUBPATTERN:
                group, add, remove, body = av
                out.append((op, (group, add, remove, self._rewrite(body, (flags | add) & ~remove))))
                if group is not None:
                    self._groups[group] = out[-1][1][-1]
            elif op is c.BRANCH:
                out.append((op, (av[0], [self._rewrite(branch, flags) for branch in av[1]])))
            elif op is c.ATOMIC_GROUP:
                out.append((op, self._rewrite(av, flags)))
            elif op in (c.ASSERT, c.ASSERT_NOT):
                out.append((op, (av[0], self._rewrite(av[1], flags))))
            elif op is c.GROUPREF_EXISTS:
                no = None if av[2] is None else self._rewrite(av[2], flags)
                out.append((op, (av[0], self._rewrite(av[1], flags), no)))
            elif op is c.AT and av is c.AT_BEGINNING and flags & re.MULTILINE:
                out.append((op, c.AT_BEGINNING_LINE))  # as re compiles it: ^ after every newline as well
            else:
                out.append((op, av))
        return out

    def _set(self, op: Any, av: Any, flags: int) -> frozenset[str]:
        """The characters of the alphabet one character node matches, asked of ``re`` itself."""
        c = self.c
        if op is c.LITERAL:
            text = re.escape(chr(av))
        elif op is c.NOT_LITERAL:
            text = f"[^{re.escape(chr(av))}]"
        elif op is c.ANY:
            text = "."
        else:
            parts = []
            for item_op, item_av in av:
                if item_op is c.NEGATE:
                    parts.append("^")
                elif item_op is c.LITERAL:
                    parts.append(re.escape(chr(item_av)))
                elif item_op is c.RANGE:
                    parts.append(f"{re.escape(chr(item_av[0]))}-{re.escape(chr(item_av[1]))}")
                elif item_op is c.CATEGORY and str(item_av) in _CATEGORY:
                    parts.append(_CATEGORY[str(item_av)])
                else:
                    return self.alphabet  # not understood: every character (refuses more, never less)
            text = f"[{''.join(parts)}]"
        key = (text, flags & (re.IGNORECASE | re.ASCII | re.DOTALL))
        found = self._sets.get(key)
        if found is None:
            matcher = re.compile(key[0], key[1]).fullmatch
            found = self._sets[key] = frozenset(ch for ch in self.alphabet if matcher(ch))
        return found

    # ---- the search ----------------------------------------------------------------------------

    def sequence(self, items: Iterable[tuple[Any, Any]], top: bool = False) -> str | None:
        alternatives = self._alternatives(items) if top else None
        # the whole pattern matches where one of them does, each a whole pattern (written out within the budget
        # a sequence is opened into: beyond it, the alternation is walked as one part, as any other is)
        if alternatives is not None and sum(map(len, alternatives)) <= _FLAT_BUDGET:
            return next(filter(None, (self.sequence(alternative, top=True) for alternative in alternatives)), None)
        problem = self.degree_problem(items, top)
        if problem is not None:
            return problem
        for op, av in items:
            key = ("node", id(av), op)  # a part before the alternatives is asked once, not once for each
            if key not in self._memo:
                self._memo[key] = self.node(op, av)
            if self._memo[key] is not None:
                return str(self._memo[key])
        return None

    def _alternatives(self, items: Any) -> list[list[Any]] | None:
        """``items`` as the alternatives it ends in, each written whole with what comes before (``.*error.*|oom``,
        and ``^(?:a.*|none)$``'s ``^`` that the parser takes out of ``^a.*|^none``), or None when it does not end
        in an alternation, or in one that can always match nothing, which the part before never backtracks
        past. A match tries the part before with each alternative, so the two cost the same."""
        items = list(items)
        if not items:
            return None
        op, av = items[-1]
        if op is self.c.SUBPATTERN:
            inner = self._alternatives(av[-1])
            return None if inner is None else [items[:-1] + alternative for alternative in inner]
        if op is self.c.BRANCH and not self.nullable(
            [(op, av)], surely=True
        ):  # (?:z|) always matches: never tried again
            return [items[:-1] + list(branch) for branch in av[1]]
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
        # a few copies ({2}) of a part that splits a run among its repeats: polynomial, of a degree the
        # degree rule bounds (the copies' runs counted together with their neighbours')
        few = low == high and low <= self.few_copies
        for inner_low, inner_high, inner in () if few else self._varying_repeats(body):
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
            if low == high and _splits_one_way(words):
                return None  # the words split one way; each copy's few readings are counted by readings()
            if readings > 1 or not _splits_one_way(words):
                return (
                    f"{shown} holds a part that can match one string in more than one way (as one repeat or "
                    f"split between repeats), so a value can be matched in exponentially many ways "
                    f"(ambiguous words)"
                )
            return None
        shared = self.edge_runs(body, from_end=True) & self.edge_runs(body, from_end=False)
        if shared and not few:
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

    def readings(self, items: Any) -> int:
        """How many ways ``items`` can match one string, at most, from the readings of its parts that can be
        spelled out (a fixed count's to the power of its count, an unbounded repeat's part already read one
        way): parts in a row multiply; of alternatives that cannot be spelled out together, the most."""
        words = self.words(items)
        if words is not None:
            return _readings(words)
        c = self.c
        total = 1
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                low, high, body = av
                if low == high:
                    once = self.readings(body)
                    part = 1 if once == 1 else min(once ** min(low, _MAX_READINGS), _MAX_READINGS + 1)
                else:
                    spelled = self.words([(op, av)])
                    part = 1 if spelled is None else _readings(spelled)
            elif op is c.SUBPATTERN:
                part = self.readings(av[-1])
            elif op is c.BRANCH:  # too many words to compare: two alternatives are taken to match apart
                part = max(self.readings(branch) for branch in av[1])
            else:
                part = 1
            total = min(total * part, _MAX_READINGS + 1)
        return total

    def degree_problem(self, items: Any, top: bool = False) -> str | None:
        """A run of shared characters that repeats of varying count in a row (past parts that can match
        nothing, through groups and the copies of a fixed count) can cut among them in too many ways: more
        than ``_MAX_DEGREE`` repeats that take any length (``\\d*\\d*\\d*\\d*x`` tries every way to cut a
        run of digits in four, a polynomial of that degree), more than ``_FEW_COPIES`` when the run goes
        through the copies of a fixed count (``(?:\\w+\\s?){2}\\w+``), or bounded ones whose counts multiply
        past ``_MAX_SPLITS`` (``a?`` written thirty times: 2**30). A run goes on through a word every match
        must pass when a repeat after it can take the word too (``x.*y.*z`` on ``xyxy...``), and the last
        parts, which the match has succeeded on reaching (a trailing ``.*``), are not counted. The degree is
        weighed by where each cut can fall: anywhere in the run (``length`` places), or, when the run goes on
        through a word of period p >= 2, only where that word begins (``length / p`` places); the places
        multiplied may be at most ``budget``, which a run cut anywhere more than ``max_degree`` times exceeds, and,
        times the characters the word after a cut reads at each place (``_word_problem``), ``_PLACE_STEPS`` budgets.
        A run that begins after others is cut anew in each way they can be, ending where it begins (``_begin``)."""
        runs: dict[frozenset[str], _Run] = {}  # the characters a run can still be made of: how it is cut
        # runs over a stretch that holds parts every match must pass (a literal word), which a repeat after them
        # must also be able to take for the stretch to go on: the stretch's characters, those parts' there, and
        # the word they spell when they are character nodes after the run's last cut (None: not a word)
        bridges: dict[_Bridge, _Run] = {}
        if top and self.searched and not self._anchored(items):
            # re.search tries the pattern at every start: as if it began with a lazy repeat of any character
            runs[self.alphabet] = (self.length, 1, 1, False, False)
        flat = self._flat(items, _FLAT_BUDGET, copied=False)
        if top:  # parts the match has succeeded on reaching: nothing after them fails to make it backtrack
            flat = self._counted(flat)
        # the ways the runs met so far can be cut with their last cut where it must end (their places over the
        # ``length`` their last cut has), the most of any: a run that begins after them is cut in each of those ways
        carried = 1
        for op, av, copied in flat:
            self._step()
            problem = self._word_problem(bridges)  # the words read so far, then this part, which can fail
            if problem is not None:
                return problem
            carried = max([carried, *(run[0] // self.length for run in runs.values())])
            own, nullable = self._part(op, av)
            body = self._varying(op, av)
            if body is None:  # a part that can match nothing is skipped; another narrows the runs
                runs, bridges = self._passed(runs, bridges, op, av)
                continue
            counts = 1 if op is self.c.BRANCH else av[1] - av[0] + 1
            begin = self.edge_runs(body, from_end=False)
            # a repeat of one character node ends where what follows it begins; another part may end with more
            # after its repeats (``(?:.*|a.*b)``), in ways of their own: what follows is not where the cut fell
            loose = not (op is not self.c.BRANCH and len(body) == 1 and self.chars(*body[0]) is not None)
            # runs the part may leave as they were: a piece of varying length now lies after their last cut
            after = {chars: (*run[:4], True) for chars, run in runs.items()} if nullable else {}
            entering = self._entering(runs, bridges, body, counts, own)
            # the stretch may also hold what this part matches (a word of alternatives, ``\\d+`` in ``.*y\\d+.*z``)
            # if a repeat after it can take that as well; a part that can match nothing may leave it as it was
            bridges = _bridged(entering, bridges, own, skipped=nullable)
            for chars, run in entering.items():
                shared = chars & own
                whole = bool(shared) and self._within(body, shared)
                if whole or chars & begin:
                    # a part holding repeats that can take a piece of the run anywhere cuts it once more for
                    # each (a degree), one that takes it in a few ways multiplies them; one that only begins
                    # with a repeat of the run's characters cuts it once more and ends it
                    places, spanned, cut, through, _ = run
                    pieces = self._pieces(body, counts, shared) if whole else 1
                    cut_again: _Run = (
                        (places * self.length**pieces, spanned + pieces, cut, through or copied, loose)
                        if pieces
                        else (places, spanned, cut * counts, through or copied, True)  # a piece of varying length
                    )
                    problem = self._too_many_cuts(cut_again, chars & (own if whole else begin))
                    if problem is not None:
                        return problem
                    if whole:
                        after[shared] = _merged(after.get(shared, cut_again), cut_again)
            problem = self._begin(after, body, counts, own, (copied, loose), carried)
            if problem is not None:
                return problem
            runs = dict(sorted(after.items(), key=lambda item: item[1], reverse=True)[:32])
        # searched for, a whole word read at the end is a match found; a value matched whole must end there as well
        return None if self.searched else self._word_problem(bridges)

    def _begin(
        self,
        after: dict[frozenset[str], _Run],
        body: Any,
        counts: int,
        own: frozenset[str],
        marks: tuple[bool, bool],
        carried: int,
    ) -> str | None:
        """Adds to ``after`` the runs that begin at a repeat of ``counts`` counts of ``body`` (of its own characters,
        when it can match a run of them whole) and at its end (a repeat it can end with), marked (through copies,
        loose) as ``marks`` says. Each is cut anew in the ``carried`` ways the runs before it can be cut, ending
        where it begins. Why one is then cut in too many ways, or None."""
        copied, loose = marks
        if own and self._within(body, own):
            pieces = self._pieces(body, counts, own)
            start = (
                (carried * self.length**pieces, pieces, 1, copied, loose)
                if pieces
                else (carried, 0, counts, copied, True)
            )
            problem = self._too_many_cuts(start, own)
            if problem is not None:
                return problem
            after[own] = _merged(after.get(own, start), start)
        end_run = self.edge_runs(body, from_end=True)
        if end_run:
            ended: _Run = (carried * self.length, 1, 1, copied, loose)
            problem = self._too_many_cuts(ended, end_run)
            if problem is not None:
                return problem
            after[end_run] = _merged(after.get(end_run, ended), ended)
        return None

    def _passed(
        self, runs: dict[frozenset[str], _Run], bridges: dict[_Bridge, _Run], op: Any, av: Any
    ) -> tuple[dict[frozenset[str], _Run], dict[_Bridge, _Run]]:
        """The runs and stretches past a part that is not a repeat of varying count: a character node narrows
        them and lengthens the word a stretch begins with, another part that must match something narrows
        them and ends the word (``(?>y+)``: its length varies), and one that can match nothing is skipped,
        though if it can match characters (``\\d*+``) what follows is not where a run was last cut."""
        own, nullable = self._part(op, av)
        node = self.chars(op, av) is not None
        if node or not nullable:
            exact = op == _LITERAL
            return _narrowed(runs, own, fixed=node), _bridged(runs, bridges, own, node=node, exact=exact)
        if own:
            return {chars: (*run[:4], True) for chars, run in runs.items()}, _bridged(
                {}, bridges, own, skipped=True
            )
        return runs, bridges

    def _too_many_cuts(self, run: _Run, chars: frozenset[str]) -> str | None:
        """Why a run cut as ``run`` says takes too long: bounded repeats that cut it more than ``_MAX_SPLITS``
        ways, more than ``_FEW_COPIES`` repeats of any length through a fixed count's copies, or places of its
        cuts that multiply past the budget (a run cut anywhere more than ``max_degree`` times does); None when
        it does not."""
        places, degree, splits, copied, _ = run
        if splits > _MAX_SPLITS:
            cost = f"{splits} ways or more"
        elif copied and degree > min(_FEW_COPIES, self.max_degree):
            cost = f"its length to the power {degree}"
        elif places > self.budget:
            cost = (
                f"about {places:.1e} tries on {self.length} characters, more than {self.budget:.1e} (each cut "
                f"weighed by the places it can fall at: anywhere, or where a word between repeats begins)"
            )
        else:
            return None
        return (
            f"repeats in a row can each take part of one run of the same characters ({_sample(chars)}, and the words "
            f"between them if they can take those too), so every way to cut a run among them is tried, for each "
            f"way to cut the runs before it, {cost} "
            f"(polynomial backtracking; words in order are found in one pass with an atomic group: x(?>.*?y).*z)"
        )

    def _word_problem(self, bridges: dict[_Bridge, _Run]) -> str | None:
        """Why the word of character nodes read so far after a run's last cut, with a part after it that can fail,
        costs too much to try at each place the cut can fall. A beginning of the word ``k`` characters long whose
        period is ``p`` matches at places ``p`` apart at most, so at ``1 / p`` of the cut's places, where ``k``
        characters are read before the match fails: about ``k / p`` steps a place (``.*={50}x`` on a line of
        ``=``: 50; ``.*error``: 1; ``.*aax``: 2). The places of the run's cuts multiplied by those steps may be at
        most ``_PLACE_STEPS`` times the budget; each beginning is weighed before the part after it, so the most
        of any is. A piece of varying length after the cut (loose) does not keep the word from being tried at
        each place."""
        allowed = self.budget * _PLACE_STEPS
        for (chars, _, word, growing), run in bridges.items():
            if not growing or run[0] * len(word) <= allowed:
                continue  # within whatever its period is (at least one)
            per_place = len(word) / _period(word, compared=True)
            if run[0] * per_place > allowed:
                return (
                    f"the word after a repeat can match its first {len(word)} characters at places in a row of one "
                    f"run ({_sample(chars)}), so about {per_place:.0f} characters are read at each place the run is "
                    f"cut at, about {run[0] * per_place:.1e} steps on {self.length} characters, more than "
                    f"{allowed:.1e} (polynomial backtracking: .*={{50}}x reads fifty = at each place .* gives back)"
                )
        return None

    def _entering(
        self,
        runs: dict[frozenset[str], _Run],
        bridges: dict[_Bridge, _Run],
        body: Any,
        counts: int,
        own: frozenset[str],
    ) -> dict[frozenset[str], _Run]:
        """The runs a repeat of ``counts`` counts of ``body`` (taking ``own``) meets: ``runs``, and the stretches
        carried over words whose characters it can take, with a piece of any length: they go on through it. A
        stretch carried over a word of period p >= 2 was last cut where that word begins, which it does at
        most ``length / p`` places (rounded up), not at each of the ``length``."""
        entering = dict(runs)
        for (chars, needed, word, _), run in bridges.items():
            onward = chars & own
            if all(part & onward for part in needed) and self._spans(body, counts, onward):
                period = _period(word)
                went_on = run
                if run[1] and period > 1 and not run[4]:
                    # the last cut falls where the word begins, not anywhere; weighed so once (loose after)
                    went_on = (run[0] // self.length * -(-self.length // period), *run[1:4], True)
                entering[chars] = _merged(entering.get(chars, went_on), went_on)
        return entering

    def _spans(self, body: Any, counts: int, chars: frozenset[str]) -> bool:
        """Whether a repeat of ``counts`` counts of ``body`` can take a piece of any length of a stretch of
        ``chars`` (``.*``, not ``.?``, which takes one character of ``xyxy...`` at most)."""
        return bool(chars) and self._within(body, chars) and self._pieces(body, counts, chars) > 0

    def _counted(self, flat: list[tuple[Any, Any, bool]]) -> list[tuple[Any, Any, bool]]:
        """``flat`` (a whole pattern's parts) without those the match has succeeded on reaching. Searched for,
        a repeat of one character node from a count of one or more just before them is counted as that node
        once: it succeeds as soon as it can begin (``\\w+`` at the end of ``abx.*\\w+`` takes one character,
        and whatever more it takes is free), so it cannot take a piece of a run that a failure cuts."""
        c = self.c
        counted = flat[: self._free_from(flat)]
        if self.searched and counted:
            op, av, copied = counted[-1]
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] and len(av[2]) == 1:
                node = av[2][0]
                if self.chars(*node) is not None:
                    counted[-1] = (*node, copied)
        return counted

    def _free_from(self, flat: list[tuple[Any, Any, bool]]) -> int:
        """Where the parts begin after which the rest of the pattern can always match, so that once the match
        reaches them it has succeeded and never backtracks into the parts before. Searched for (re.search):
        parts that can always match the empty string (a trailing ``.*``, ``\\s*``, nothing). Matched whole
        (re.fullmatch, a tag value): those too, when one of them takes any character but a newline, which a
        tag value cannot hold (``.*``), so it reaches the end from wherever it starts, where the others
        match nothing and an end anchor after it holds (``.*\\s*$``). Anchors, lookarounds and group
        references can fail: the rest is not free past them."""
        c = self.c
        index = free = len(flat)
        taken = False  # a part that takes every character to the end is among those walked back over
        while index:
            op, av, _ = flat[index - 1]
            at_end = op is c.AT and av in (c.AT_END, c.AT_END_STRING)
            if not (at_end and not taken and not self.searched) and not self.nullable([(op, av)], surely=True):
                break
            index -= 1
            taken = taken or self._takes_all(op, av)
            if self.searched or taken:
                free = index
        return free

    def _takes_all(self, op: Any, av: Any) -> bool:
        """Whether a part is a repeat of any count, from none, of one character node that matches every
        character but maybe a newline (``.*``, ``[\\s\\S]*?``)."""
        c = self.c
        if op not in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) or av[0] or av[1] != self.unbounded:
            return False
        body = av[2]
        own = self.chars(*body[0]) if len(body) == 1 else None
        return own is not None and self.alphabet - {"\n"} <= own

    def _part(self, op: Any, av: Any) -> tuple[frozenset[str], bool]:
        """The characters one part can consume and whether it can match nothing (kept: a part is asked once
        for every sequence it is opened into)."""
        key = ("part", id(av), op)
        if key not in self._memo:
            self._memo[key] = (self.consumed([(op, av)]), self.nullable([(op, av)]))
        found: tuple[frozenset[str], bool] = self._memo[key]
        return found

    def _within(self, body: Any, chars: frozenset[str]) -> bool:
        key = ("within", id(body), chars)
        if key not in self._memo:
            self._memo[key] = self.matches_within(body, chars)
        return bool(self._memo[key])

    def _pieces(self, body: Any, counts: int, chars: frozenset[str]) -> int:
        """How many times a repeat of ``counts`` counts of ``body`` (a run of ``chars`` it can match whole) can
        cut the run at any place: once when its own count is unbounded (or of many counts), else once for
        each repeat in a row in ``body`` that can (``(?:\\w+[a-z]+)?``: twice). ``(?:-[a-z]+)?`` takes a piece
        of ``-a-a`` only where a ``-`` begins, so it cuts it in one of a few ways, not anywhere: none."""
        return 1 if counts > _WIDE else self._in_row(body, chars)

    def _in_row(self, items: Any, chars: frozenset[str]) -> int:
        """The repeats of ``items`` in a row that can take a piece of any length of a run of ``chars`` (all of
        ``items`` can match a run of the characters such a repeat and the run share); of alternatives, the
        most of one."""
        key = ("row", id(items), chars)
        if key in self._memo:
            found: int = self._memo[key]
            return found
        c = self.c
        total = 0
        for op, av, _ in self._flat(items, _FLAT_BUDGET, copied=False):
            self._step()
            if op is c.BRANCH:
                total += max((self._in_row(branch, chars) for branch in av[1]), default=0)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] > av[0]:
                shared = chars & self.consumed(av[2])
                if av[1] == self.unbounded or av[1] - av[0] >= _WIDE:
                    total += 1 if shared and self._within(items, shared) else 0
                else:
                    total += self._in_row(av[2], chars)
        self._memo[key] = total
        return total

    def _varying(self, op: Any, av: Any) -> Any:
        """The part a repeat of varying count repeats, or an alternation as a part; None for anything else."""
        c = self.c
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[1] > av[0]:
            return av[2]
        if op is c.BRANCH:  # the same list every time it is asked for (a key of the kept answers)
            key = ("branch", id(av), op)
            if key not in self._memo:
                self._memo[key] = [(op, av)]
            return self._memo[key]
        return None

    def _flat(self, items: Any, budget: int, copied: bool) -> list[tuple[Any, Any, bool]]:
        """``items`` with groups opened and a fixed count written out (as many copies as can matter), each
        told whether it is one of the copies."""
        c = self.c
        out: list[tuple[Any, Any, bool]] = []
        for op, av in items:
            self._step()
            if len(out) >= budget:
                out.append((op, av, copied))
            elif op is c.SUBPATTERN:
                out.extend(self._flat(av[-1], budget - len(out), copied))
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] == av[1]:
                once = self._flat(av[2], budget - len(out), copied or av[0] > 1)
                # the copies written out up to the budget (nested fixed counts multiply: 2**20 for twenty); a word of
                # character nodes (``={50}``, ``\\w{999}``) as far as ``_SPELLED_CHARS``, for what it costs to match
                # it at each place a run is cut depends on its length (``_word_problem``)
                most = _MAX_DEGREE + 1
                if all(self.chars(part_op, part_av) is not None for part_op, part_av, _ in once):
                    most = max(most, -(-_SPELLED_CHARS // max(1, len(once))))
                copies = min(av[0], most, max(1, (budget - len(out)) // max(1, len(once))))
                self._step(len(once) * copies)
                out.extend(once * copies)
            else:
                out.append((op, av, copied))
        return out

    def _step(self, count: int = 1) -> None:
        """Counts ``count`` steps of the analysis (a part walked or written out); too many: too complex."""
        self.steps += count
        if self.steps > _MAX_STEPS:
            raise _TooComplex

    def _anchored(self, items: Any) -> bool:
        """Whether ``items`` can match only at the beginning of the text (``^`` without MULTILINE, ``\\A``),
        so re.search tries it at one start, not at each: past groups and parts that can match nothing."""
        c = self.c
        for op, av in items:
            if op is c.AT:
                return av is c.AT_BEGINNING_STRING or av is c.AT_BEGINNING  # not AT_BEGINNING_LINE
            if op is c.SUBPATTERN:
                return self._anchored(av[-1])
            if op is c.BRANCH:
                return all(self._anchored(branch) for branch in av[1])
            if not self.nullable([(op, av)]):
                return False
        return False

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

    # ---- what parts match ----------------------------------------------------------------------

    def chars(self, op: Any, av: Any) -> frozenset[str] | None:
        """The characters one character node matches (of the alphabet); None: not a character node."""
        return av if op in (_CHARS, _LITERAL) else None

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
                out |= self.alphabet
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

    def nullable(self, items: Any, surely: bool = False) -> bool:
        """Whether ``items`` can match the empty string (anchors and lookarounds match it; a group reference
        when its group can, or is not known). ``surely``: wherever they are tried, so not an anchor, a
        lookaround or a group reference, which can fail (a part the match has succeeded on reaching)."""
        c = self.c
        for op, av in items:
            if self.chars(op, av) is not None:
                return False
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                can = av[0] == 0 or self.nullable(av[2], surely)
            elif op is c.SUBPATTERN:
                can = self.nullable(av[-1], surely)
            elif op is c.ATOMIC_GROUP:
                can = self.nullable(av, surely)
            elif op is c.BRANCH:
                can = any(self.nullable(branch, surely) for branch in av[1])
            elif surely:  # a conditional group, both ways; anything else can fail
                can = op is c.GROUPREF_EXISTS and all(
                    self.nullable(b, True) for b in (av[1], av[2]) if b is not None
                )
            elif op is c.GROUPREF and av in self._groups:  # (a)\1+: the reference matches what the group did
                can = self.nullable(self._groups[av])
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
            if count >= low and (count or () not in once or high == 0):  # nothing, once, as its part can match
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
                if inner != self.alphabet:  # it cannot be empty (else it could begin with anything)
                    return frozenset(out)
            elif op is c.BRANCH:
                for branch in av[1]:
                    out |= self.first(branch)
                return frozenset(out)
            elif op in (c.GROUPREF, c.GROUPREF_EXISTS, c.ATOMIC_GROUP):
                return self.alphabet
        return self.alphabet  # it can match the empty string: whatever follows it may begin


def _narrowed(runs: dict[frozenset[str], _Run], chars: frozenset[str], fixed: bool) -> dict[frozenset[str], _Run]:
    """The runs that go on through a part that matches ``chars`` (none, if it matches none: an anchor ends
    no run, it is skipped as a part that can match nothing); one of varying length (not ``fixed``: a
    possessive repeat) leaves a piece of varying length after their last cut."""
    kept: dict[frozenset[str], _Run] = {}
    for run_chars, run in runs.items():
        if run_chars & chars:
            went_on = run if fixed else (*run[:4], True)
            kept[run_chars & chars] = _merged(kept.get(run_chars & chars, went_on), went_on)
    return kept


def _merged(one: _Run, other: _Run) -> _Run:
    """The run that cuts more of two over the same characters (its places first, then its degree, the ways
    bounded repeats cut it, through copies), marked loose when either is: a word after it is not where its
    last cut falls, so it is not weighed by the word's period (more places, never fewer)."""
    kept = max(one[:4], other[:4])
    return (*kept, one[4] or other[4])


def _period(word: _Spelled, compared: bool = False) -> int:
    """The smallest shift at which ``word`` (a string of character sets) can overlap itself: every pair of
    positions that far apart has a character in common; its length when it cannot. Two places where it
    begins in a text are at least this far apart, so it begins at most ``length / period`` places. Two literals
    are compared; a position of a class is taken to share a character with any other: the sets are read on a
    sample alphabet, and two classes (``[\\u0590-\\u05ff]`` and ``\\w``) may share characters beyond it (every
    Hebrew letter) that the sample does not hold. ``compared``: a class is compared with a literal too, whose
    characters are in the sample alphabet (``\\d`` and ``-`` share none), as ``_word_problem`` weighs a word."""
    for shift in range(1, len(word)):
        if all(_share(word[index], word[index + shift], compared) for index in range(len(word) - shift)):
            return shift
    return max(1, len(word))


def _share(one: tuple[frozenset[str], bool], other: tuple[frozenset[str], bool], compared: bool) -> bool:
    (chars, exact), (other_chars, other_exact) = one, other
    if (exact and other_exact) or (compared and (exact or other_exact)):
        return bool(chars & other_chars)
    return True


def _bridged(
    runs: dict[frozenset[str], _Run],
    bridges: dict[_Bridge, _Run],
    chars: frozenset[str],
    skipped: bool = False,
    node: bool = False,
    exact: bool = False,
) -> dict[_Bridge, _Run]:
    """The runs whose stretch can hold a part that matches ``chars`` among its own characters, and go on through
    it if the next repeat can take those characters as well: ``.*`` before ``y`` and ``.*`` after it can both
    span ``xyxy...``, where the split can be at any ``y``. A run already carried over such parts adds this one
    to what the next repeat must take, unless the part can match nothing (``skipped``): it waits as it was.
    A character ``node`` lengthens the word the stretch begins with; any other part ends it (the run's last cut
    still falls where the word begins; ``_word_problem`` weighs what it costs to try), even for a run with a piece
    of varying length after its last cut (loose), which ``_entering`` does not weigh by the word's period;
    ``exact``: the node is a literal, whose characters are exact (a class's: ``_period``)."""
    kept: dict[_Bridge, _Run] = {}
    for (run_chars, needed, word, growing), run in bridges.items():
        if skipped:
            key = (run_chars, needed, word, False)
        elif run_chars & chars:
            grows = growing and node and len(word) < _SPELLED_CHARS  # a longer one: its beginning, ``_period``
            spelled = (*word, (run_chars & chars, exact)) if grows else word
            key = (run_chars, needed | {run_chars & chars}, spelled, grows)
        else:
            continue
        kept[key] = _merged(kept.get(key, run), run)
    for run_chars, run in runs.items():
        if run_chars & chars:
            begins = node
            first: _Spelled = ((run_chars & chars, exact),) if begins else ()
            key = (run_chars, frozenset([run_chars & chars]), first, begins)
            kept[key] = _merged(kept.get(key, run), run)
    return dict(sorted(kept.items(), key=lambda item: item[1], reverse=True)[:32])


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
    counts = Counter(words)  # one spelling reached through different parts is as many readings
    return max(
        (
            sum(count for other, count in counts.items() if len(other) == len(word) and _compatible(word, other))
            for word in counts
        ),
        default=1,
    )


def _splits_one_way(words: list[_Word]) -> bool:
    """The Sardinas-Patterson test on words spelled as character sets: whether no string is a concatenation
    of words split at two different places (two words that share a string are counted by ``_readings``).
    Exact for words of single characters (literal strings); a set of several characters is taken to allow
    any of them at that place in both words compared, so it errs towards "not decodable" (the pattern
    refused), never the other way. The empty word counts as a word: a part that can match nothing and
    something is refused."""
    words = list(dict.fromkeys(words))  # a spelling listed twice is counted by ``_readings``
    dangling: set[_Word] = set()
    for word in words:
        for other in words:
            if len(word) < len(other) and _compatible(word, other):
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


def _cases(ch: str) -> set[str]:
    """``ch`` and the single characters it is written as in other cases (what ignoring case may match)."""
    return {ch} | {
        variant for variant in (ch.lower(), ch.upper(), ch.swapcase(), ch.casefold()) if len(variant) == 1
    }
