"""Team signatures written as words in order (``NCCL WARN.*Call to .* failed``) are matched in one pass
(``matching_form``), find the lines they find as written, and are accepted on that form."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.domain.backtracking import backtracking_problem
from sagemaker_governance.domain.failure_evidence import FailureEvidence, HostLog, LogLine
from sagemaker_governance.domain.failure_signatures import Signature, matching_form
from sagemaker_governance.domain.failures import builtin_taxonomy, classify
from sagemaker_governance.domain.recovery_policy import ResumePolicy

ALGORITHM_ERROR = 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nCommand "/opt/conda/bin/torchrun train.py"'

# what teams write for log messages: each was refused as written (more places to cut a line than a search may try)
REALISTIC = [
    r"NCCL WARN.*Call to .* failed",
    r"RuntimeError: .*CUDA.*out of memory",
    r"libfabric:.*efa.*err",
    r"x.*y.*z.*w",
    r"\bnet\b.*\d.*timed out.*rank \d",
]


@pytest.mark.parametrize("pattern", REALISTIC)
def test_a_team_signature_of_words_in_order_is_accepted_in_the_form_it_is_matched_in(pattern: str) -> None:
    # Given a words-in-order pattern the backtracking check refuses as written, searched for in a log line
    assert backtracking_problem(f"(?i){pattern}", searched=True) is not None
    # When a team writes it as a signature, then it validates, and is dumped as written
    signature = Signature.model_validate({"id": "mine", "class": "interconnect", "pattern": pattern})
    assert signature.model_dump(by_alias=True)["pattern"] == pattern
    # and it is matched in one pass: each word but the last in an atomic group
    assert "(?>.*?" in signature.regex.pattern
    assert backtracking_problem(f"(?i){signature.regex.pattern}", searched=True) is None


def test_the_nccl_words_in_order_signature_diagnoses_its_line() -> None:
    # Given a team's NCCL signature of words in order, and the line NCCL writes on the host that failed
    policy = ResumePolicy.model_validate(
        {
            "signatures": [
                {"id": "nccl-call-failed", "class": "interconnect", "pattern": r"NCCL WARN.*Call to .* failed"}
            ]
        }
    )
    line = "ip-10-0-1-12:311:402 [3] NCCL WARN Call to ibv_modify_qp failed with error Connection timed out"
    taxonomy = builtin_taxonomy().with_team(policy.signatures, {})
    hosts = (HostLog(host="algo-3", stream="job/algo-3-1700000000", lines=(LogLine(line),)),)
    # When the failure is classified, then the team's signature names it
    diagnosis = classify(ALGORITHM_ERROR, FailureEvidence(hosts=hosts, logs_read=True, hosts_total=1), taxonomy)
    assert diagnosis.failure_class == "interconnect"
    assert diagnosis.evidence()["signature"] == "nccl-call-failed"


@pytest.mark.parametrize(
    "pattern",
    [
        r"x.*y",  # one .*: nothing to do
        r"x.*y\d+.*z",  # a word of varying length: its first place is not always the best one
        r"x.*(?:y|yy).*z",  # alternatives: the same
        r"x.*y.*$",  # an anchor
        r"x.*y\s.*z",  # \s matches a newline, as .* does not
        r"x.*y\n.*z",
        r"x.*\1.*z",
        r"x.*.*z",  # an empty word between
        r"x\.*y.*z",  # \.* is a repeat of dots, not .*
        r"x.+y.+z",
    ],
)
def test_a_pattern_that_is_not_words_in_order_is_matched_as_written(pattern: str) -> None:
    assert matching_form(pattern) == pattern


def test_the_words_are_found_at_their_first_place_each() -> None:
    assert matching_form(r"NCCL WARN.*Call to .* failed") == r"NCCL WARN(?>.*?Call to ).* failed"
    assert matching_form(r".*a.*?b\..*c\b.*") == r"(?>.*?a)(?>.*?b\.)(?>.*?c\b).*"
    assert matching_form(r"a.\d.*b\w.*c\S") == r"a.\d(?>.*?b\w).*c\S"


# the pieces a words-in-order pattern is made of here: characters that recur in the text below, so that words
# occur, overlap and repeat; a class or a zero-width assertion among them
_PIECES = ["x", "y", "xy", "yx", "x.", r"\d", r"x\b", r"\by", r"\w", r"\S", "x1", " "]
_TEXT = st.text(alphabet="xy1 \n-", max_size=40)


@given(
    words=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=3),
    ends=st.tuples(st.sampled_from(["", *_PIECES]), st.sampled_from(["", *_PIECES])),
    lazy=st.booleans(),
    text=_TEXT,
)
def test_words_in_order_find_the_same_lines_in_one_pass(
    words: list[str], ends: tuple[str, str], lazy: bool, text: str
) -> None:
    # Given words in order (with a newline, which .* does not cross, among the characters of the text)
    gap = ".*?" if lazy else ".*"
    pattern = ends[0] + gap + gap.join(words) + gap + ends[1]
    # Then the form it is matched in finds the text exactly when the pattern as written does
    assert matching_form(pattern) != pattern
    written = re.search(pattern, text, re.IGNORECASE) is not None
    assert (re.search(matching_form(pattern), text, re.IGNORECASE) is not None) == written


@pytest.mark.parametrize("pattern", [".*=.*" + "=" * 100 + "x", ".*a.*" + "a" * 100 + "!"])
def test_words_in_order_whose_last_word_can_match_at_places_in_a_row_are_refused(pattern: str) -> None:
    # Given words in order whose last word can match most of itself at each place of a line (a progress bar of
    # "="), so its matching form reads up to a hundred characters at each place .* gives back: 0.82 s on 2,000
    # "=", and 2.1 s on 2,000 "a" ignoring case (both accepted before)
    assert matching_form(pattern) != pattern
    # When a team writes it as a signature, then it is refused
    with pytest.raises(ValidationError, match="backtrack"):
        Signature.model_validate({"id": "bar", "class": "interconnect", "pattern": pattern})


def test_a_pattern_refused_as_written_and_not_words_in_order_is_still_refused() -> None:
    with pytest.raises(ValidationError, match="backtrack"):
        Signature.model_validate({"id": "slow", "class": "hardware", "pattern": r"x.*y\d+.*z"})
