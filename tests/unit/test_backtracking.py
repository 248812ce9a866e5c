"""Which patterns domain/backtracking.py refuses: exactly those that can match a value in exponentially many
ways, not every repeat that looks alike (a refused pattern rejects the whole policy document)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sagemaker_governance.domain import backtracking
from sagemaker_governance.domain.backtracking import backtracking_problem
from sagemaker_governance.domain.decisions import Mode
from sagemaker_governance.domain.failures import builtin_taxonomy
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import parse_document

ROOT = Path(__file__).resolve().parents[2]

REFUSED = [
    # nested quantifiers: a run of characters splits between the two repeats in many ways
    "(a+)+",
    "(a+)+$",
    r"(\w+\s?)*",
    r"(\w+\s?)+",
    "([a-z0-9]+-?)+",
    "([a-z0-9]+-?)+!",
    "(.*,)+",
    "(a{1,2})+",
    "(a|b+)*c",
    "(?i)([A-Z]+[a-z]?)+",
    r"^(x+x+)+y$",
    r"^(?:\d+|[a-f]+)+$",
    r"^( ?[a-z]+)+$",
    r"^(\s*\w+)+$",
    # a repeated part whose words are not uniquely decodable (Sardinas-Patterson)
    "(a|aa)*",
    "(a|aa)+ failed",
    "(ab|a|ba)*",
    "(a|[ab]a)+",
    r"(a|\w\wa)+",
    "(a|)+",
    "(a|aa){1,5}",
    # the same word twice when case is ignored (team signatures are matched so)
    "(?i)(ab|AB)+c",
    "(?i)(ab|AB){2,}c",
    # alternatives of which one begins another, in a part that also holds an unbounded repeat
    "((x|xy)y*)+",
    # a repeated reference to a group that can be empty
    r"(a*)\1+",
    # a fixed count whose part can match nothing, or one string in many ways: the ways multiply per copy
    "(?:[a-z0-9]?){30}[a-z0-9]{30}",
    "(?:a|a?){26}!",
    "(?:a|a){26}!",
    "(?:[a-z]+-?){3}",
    # one repeat's trailing run and the next one's leading run over the same characters
    "(?:[a-z]*-[a-z]*)*x",
    r"(?:\d+\.\d+)+!",
    # the IPv4 part unbounded: 1?\d?\d reads 11 two ways, at every repeat
    r"^(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.)+$",
    # a case ignored in one group only: (?i:a) is A as well
    r"^(?:(?i:a)|A)+$",
    # characters beyond ASCII that a class or category matches as well as the pattern's own letter
    r"^(?:\w-|ж-)+$",
    "^(?:\\d|(\u0660))+$",
    # a few readings per part, multiplied over parts in a row rather than counted per repeat
    "^" + "(?:a|a){6}" * 5 + "$",
    "^" + "(?:ab|[a-z]{2})?" * 26 + "$",
    # one run of characters cut among more than three repeats in a row (polynomial, of that degree)
    r"^\d*\d*\d*\d*\d*\d*\d*x$",
    r"^[a-z-]*-[a-z-]*-[a-z-]*-[a-z-]*-[a-z-]*$",
    r"^(?:\w+\s?){2}(?:\w+\s?){2}$",
    # the repeats inside an optional part or an alternative count each
    r"^(?:\w+[a-z]+)?(?:[a-z]+\w+)?$",
    r"^(?:\w+[a-z]+|-)(?:[a-z]+\w+|_)$",
    # four repeats that can each span a stretch holding the words between them (abcdbcd...): the split at
    # every b, every c and every d is tried (matched whole, at most three)
    "a.*b.*c.*d.*e",
    r"^a.*b.*c.*d.*e$",
    # a fourth cut weighed by where it falls, a word of period 8 in a run of digits, is still too many (0.9 s)
    r"\d*\d*\d*12345678\d*x",
    # a word of classes is not weighed by a period read on the sample alphabet: [\u0590-\u05ff] and \w share every
    # Hebrew letter, which the sample does not hold (7.9 s on 256 of them)
    ".*" + (r"[\u0590-\u05ff]\w\w\w\w\w\w.*" * 3) + r"\d",
    # a word read fifty characters far at each place three repeats cut a run at (0.94 s on 256 digits, where
    # \d*\d*\d*x took 48 ms)
    r"\d*\d*\d*\d{50}x",
    # runs of different characters in a row: every cut of the digits is tried for every cut of the letters that
    # ends where they begin (40 s, 49 s and 0.54 s on 128 letters and 128 digits)
    r"[a-z]*[a-z]*[a-z]*\d*\d*\d*#",
    r"[a-z]*[a-z]*[a-z]*-\d*\d*\d*#",
    r"[a-z]*[a-z]*[a-z]*\d*\d*#",
    # or among many optional parts in a row (2**22 ways)
    "(?:(?:x)?)?" * 22 + "c",
    # fixed counts nested twenty and more deep: too many copies to write out, too complex to check
    "(?:" * 20 + "a" + "){2}" * 20,
    "(?:" * 24 + "a" + "){2}" * 24,
]

ACCEPTED = [
    # lists whose alternatives share a first letter but decode one way only
    "(dev|staging|prod|perf)(,(dev|staging|prod|perf))*",
    "(?i)(dev|staging|prod|perf)(,(dev|staging|prod|perf))*",
    "(foo|bar|baz)+",
    "(?:cpu|gpu|gpu-large)(?:,(?:cpu|gpu|gpu-large))*",
    "(dev|develop)+",
    r"^(?:jpe?g|png)+$",
    "(x|xy)+ failed",
    "(a|ab)*",
    r"((dev|deploy)-\d+,)*",
    r"^(?:(?:dev|prod)-)+\w+$",
    # a fixed count is the part written out that many times
    r"^(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)$",
    "(?:" * 14 + "a" + "){3}" * 14,
    r"^(?:[0-9]{3}-){2}[0-9]{4}$",
    r"^(?:[a-z]+-){2}[a-z]+$",
    # a separator each repeat must begin or end with
    "[a-z0-9]+(-[a-z0-9]+)*",
    r"(\d+,)*",
    r"(\d+,)*\d+",
    r"v[0-9]+(\.[0-9]+)*",
    r"^v\d+(\.\d+){0,2}$",
    # one character class
    r"(\d|[a-z])+",
    r"(\w|a)+",
    # two copies of a part with nested quantifiers: a run cut in two, quadratic, on a value matched whole
    r"^(?:\w+\s?){2}$",
    r"^(?:[a-z0-9]+[._-]?){2}$",
    r"^(?:[a-z]+\d*){2}$",
    # a repeated reference to a group that cannot be empty repeats one fixed string
    r"(a)\1+",
    r"^(ab)-\1+$",
    # ordinary tag values
    r"^CC-\d{4,6}$",
    r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$",
    r"^v?\d+(\.\d+)?(\.\d+)?(-\w+)?$",
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$",
    r"^\d{12}$",
    r"^arn:aws:iam::\d{12}:role/[\w+=,.@-]+$",
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    r"^(?:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,}$",
    r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
    r"^\d{1,3}\.?\d{1,3}\.?\d{1,3}\.?\d{1,3}$",
    r"^[\w.-]+$",
    r"^(?:\w-|ж)+$",
    # three repeats over words: a polynomial of degree 3; a trailing .* reaches the end (no newline in a tag
    # value), so the match has succeeded there and it does not count
    "a.*b.*c.*d",
    "a.*b.*c.*d.*",
    r"^a.*b.*c.*d.*$",
    r"a.*b.*c.*d.*\s*$",
    r"^a.*b.*c.*d.*$|^none$",
    # four cuts, three of them where a word of period 6 to 9 begins (43 * 29 * 37 * 256 places, fewer than
    # three cuts anywhere: 256**3): a fraction of a millisecond on a crafted value
    "cc=.*;team=.*;project=.*;owner=.*;",
    # runs of different characters in a row whose cuts multiplied stay within three cuts anywhere (8 ms and 18 ms
    # on 128 letters and 128 digits), and runs of one repeat, which end one way
    r"[a-z]*[a-z]*\d*\d*#",
    r"[a-z]*[a-z]*[a-z]*\d*#",
    r"[a-z]+-\d+",
    r"^[a-z]+_[a-z]+_\d+$",
    # the README's
    "cc-[0-9]{4}",
    "(dev|prod)",
    "(dev|prod)+",
    "[#]+",
    "MYPLUGIN: transport to rank [0-9]+ lost",
]


@pytest.mark.parametrize("pattern", REFUSED)
def test_a_pattern_that_can_match_a_value_in_exponentially_many_ways_is_refused(pattern: str) -> None:
    # Given a pattern whose repeated part can match one string in two ways
    # When it is analysed, then a reason is given
    assert backtracking_problem(pattern) is not None


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_a_pattern_that_matches_each_value_one_way_is_accepted(pattern: str) -> None:
    # Given a pattern that cannot match a value in more than one way per repeat (or only a bounded number)
    # When it is analysed, then nothing is found, with or without case ignored
    assert backtracking_problem(pattern) is None
    assert backtracking_problem(f"(?i){pattern}") is None


@pytest.mark.parametrize("pattern", [r"(?:\w+\s?){2}x", r"(?:[a-z]+\d*){2}!"])
def test_a_fixed_count_of_nested_quantifiers_is_refused_where_the_pattern_is_searched_for(pattern: str) -> None:
    # Given two copies of a part with nested quantifiers, accepted in a value matched whole
    assert backtracking_problem(pattern) is None
    # When it is analysed as a pattern searched for in long text (a team signature in a log line, where every
    # start pays the quadratic cut again), then a reason is given
    assert backtracking_problem(f"(?i){pattern}", searched=True) is not None


# searched for in a log line (re.search tries every start, one degree more): one run cut between two repeats
# and the start is refused there, while a tag value matched whole may hold it
SEARCHED_REFUSED = [
    r".*=.*=.*nan",  # a progress bar of "=" cut at every start, then between the three .*
    r"\w+\s*\w+\s*timeout",  # a hex dump: letters and digits cut at every start, then between the two \w+
    r"\S+\s*\S+\s*oom",
    r"\w+\w+:\s*error",
    r".*=.*x",
    r"(?m)^\w+\w+x",  # ^ after every newline: every line's start
    # a repeat before a word and one after it both span a stretch holding the word many times (xyxy...): the
    # split can be at any y, so the run goes on through it
    r"x.*y.*z",
    r"x.*y.*z.*w",
    r"foo.*bar.*baz",
    r"(?:foo|bar).*baz.*qux",
    r".*y\d+.*z",
    r"x.*(?>y).*z",
    r"Error.*\w+Exception",  # \w+ takes the words between too, and the end must still be found
    # words in order, each cut weighed by where its word begins, still more places than .*x has (0.2 to 1.7 s on
    # a crafted line, where .*x took 28 ms)
    r"ab.*cd.*ef",
    r"abcd.*efgh.*ijkl",
    r"abcdefgh.*ijklmnop.*qrstuvwx",
    r"NCCL WARN.*NCCL WARN.*?\derror",
    # a part of varying length between a cut and the word: the cut falls anywhere in the digits (0.57 s)
    r"NCCL WARN.*\d*+Call to .* failed",
    # nor searched for (over 10 s on 2,000 Hebrew letters)
    "(?i)" + r"[\u0590-\u05ff]" + r"\w" * 49 + ".*" + r"[\u0590-\u05ff]" + r"\w" * 49 + r".*\d",
    r"(?:a|b)[^y]*\d*\s*.?x",  # a start at every a, a split between [^y]* and \d* in the digits after them
    # an anchor or a lookahead at the end can fail: the repeats before it count
    r"x.*y.*$",
    r"x.*y.*(?=a)",
    r"oom|x.*y.*z",
    r"x.*(?:y.*z|w)",  # x.*y.*z or x.*w, each tried after x.*
    r"(?:.*error.*|oom)x",  # an alternation inside the pattern: the x after it can fail
    # a word after the last repeat that can match many of its characters at places in a row is read that far at
    # each place the repeat gives back (on crafted lines of 2,000 characters, where .*x took 15 to 55 ms: .*={50}x
    # 0.33 to 0.36 s, \w+y\w{999} 1.6 to 2 s, .*[0-9a-f]{32} 0.9 to 1.5 s, the matching forms of .*=.*={100}x and
    # .*a.*a{100}! 0.82 s and 2.1 s, .*\w{8}! 0.15 to 0.28 s)
    r".*={50}x",
    r"\w+y\w{999}",
    r".*[0-9a-f]{32}",
    "(?>.*?=).*" + "=" * 100 + "x",
    "(?>.*?a).*" + "a" * 100 + "!",
    r".*\w{8}!",
    # the start and a repeat before a word are one run, whose ways multiply the cuts of a run after the word: every
    # start before the one ";" cuts the digits after it anew (17 s on a line of 1,000 letters, ";" and digits;
    # \d+::a\d+.\d+b 9.1 s)
    r".*;\d*\d*x",
    r"\d+::a\d+.\d+b",
]

SEARCHED_ACCEPTED = [
    r".*x",  # one repeat after the start: the line's length squared at most
    r"\w+x",
    r"^\w+\w+x",  # one start only
    r"\A\w+\w+x",
    r"=\w+\w+x",  # a start on a "=" that the repeats do not share begins a run of its own
    r"libfabric:.*\befa\b",
    r"libfabric:(?>.*?\befa\b).*\berr\b",
    "MYPLUGIN: transport to rank [0-9]+ lost",
    r"libfabric:(?>.*?\befa\b).*\berr",
    r"x(?>.*?y).*z",  # words in order, found in one pass
    r"x.*y",
    r"error.*timeout",
    # the repeat after the word cannot take the next y, or takes one character: the split is not anywhere
    r".*y[^y]*z",
    r".*y.?\d*5",
    # a repeat the rest of the pattern can always follow: the match has succeeded on reaching it
    r".*error.*",
    r"foo.*bar.*",
    r".*e.*",
    r".*,.*",
    r"x.*y\s*",
    r"x.*y.*(?:z|)",
    r"abx.*\w+",  # \w+ at the end succeeds as soon as it can begin
    # a pattern that is one alternation: each alternative is a whole pattern, with its own start and end
    r".*error.*|oom",
    r"(?:oom|.*error.*)",
    r"^\w+\w+x|oom",
    # a word after the last repeat read a few characters at each place at most (.*={4}x: 57 ms on 2,000 "=", as
    # .*x); a whole word found at the end is a match, so .*aa reads one "a" before it fails
    r".*aa",
    r".*error",
    r".*={4}x",
    r".*\d{4}-\d{2}-\d{2}",  # a digit and "-" share no character: four digits at most are read at a place
    r".*i-[0-9a-f]{17}",
    r"NCCL WARN(?>.*?Call to ).* failed",
    # runs of one repeat after the start, each ending at a word: one way each
    r"\w+: \w+ \w+ failed",
    r"rank \d+ .*exited with code \d+",
]


@pytest.mark.parametrize("pattern", SEARCHED_REFUSED)
def test_a_run_cut_at_every_start_and_again_is_refused_where_the_pattern_is_searched_for(pattern: str) -> None:
    # Given a pattern whose repeats cut a run in two ways or more, within a value matched whole
    assert backtracking_problem(pattern) is None
    # When it is analysed as a team signature (searched for, ignoring case, in log lines of up to 2,000
    # characters, where every start position cuts the run once more), then a reason is given
    assert backtracking_problem(f"(?i){pattern}", searched=True) is not None


@pytest.mark.parametrize("pattern", SEARCHED_ACCEPTED)
def test_a_signature_that_reads_a_line_from_each_start_in_one_pass_is_accepted(pattern: str) -> None:
    # Given a pattern anchored at the line's start, or whose runs after an unanchored start are cut once at most
    # When it is analysed as a team signature, then nothing is found
    assert backtracking_problem(f"(?i){pattern}", searched=True) is None


def test_a_pattern_the_analysis_fails_on_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an analysis that fails inside (a fault of its own, not of the pattern)
    def broken(*_: object) -> int:
        raise RuntimeError("analysis fault")

    monkeypatch.setattr(backtracking._Walk, "readings", broken)
    # When a linear pattern is analysed, then it is refused: not checked is not known to be safe
    assert backtracking_problem("[a-z0-9]+(-[a-z0-9]+)*") is not None
    assert backtracking_problem("[a-z0-9]+(-[a-z0-9]+)*", searched=True) is not None


def test_every_built_in_signature_and_example_pattern_is_accepted() -> None:
    # Given the built-in failure taxonomy (matched ignoring case) and the example policies' patterns
    signatures = [f"(?i){signature.pattern}" for signature in builtin_taxonomy().signatures]
    patterns = list(signatures)
    for name in ("policy.yaml", "org-policy.yaml"):
        patterns.extend(_patterns(yaml.safe_load((ROOT / "examples" / name).read_text())))
    assert len(patterns) > 10
    # When each is analysed (a signature as searched for), then none is refused
    assert [pattern for pattern in patterns if backtracking_problem(pattern) is not None] == []
    assert [pattern for pattern in signatures if backtracking_problem(pattern, searched=True) is not None] == []


@pytest.mark.parametrize(
    "pattern",
    [
        "(dev|staging|prod|perf)(,(dev|staging|prod|perf))*",
        "(foo|bar|baz)+",
        "^(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])$",
    ],
)
def test_a_document_with_a_linear_tag_pattern_still_loads_with_its_own_settings(pattern: str) -> None:
    # Given a deployed document in audit mode whose required-tags pattern is linear (refused before this
    # change, so the functions fell back to the defaults and enforced)
    document = f"mode: audit\nrules:\n  - id: tags\n    type: required-tags\n    tags:\n      env: {{pattern: '{pattern}'}}\n"
    # When it is validated, then it is valid and its mode governs
    policy = Policy.model_validate({"mode": "enforce", **parse_document(document)})
    assert policy.mode is Mode.AUDIT


def _patterns(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [value for key, value in node.items() if key == "pattern" and isinstance(value, str)]
        return found + [pattern for value in node.values() for pattern in _patterns(value)]
    if isinstance(node, list):
        return [pattern for value in node for pattern in _patterns(value)]
    return []
