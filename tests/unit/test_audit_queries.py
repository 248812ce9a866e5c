"""Durations, query building and the per-team report, with no AWS."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smgov.audit_queries import (
    NO_TEAM,
    DurationError,
    decisions_query,
    parse_duration,
    rows_from_results,
    team_report,
    unknown_fields,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        (" 1d ", timedelta(days=1)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "7x", "7 days", "1.5h", "-1d", "0m", "1d2h", "3654d", "\uff17d"])
def test_bad_durations_are_refused_with_a_hint(text: str) -> None:
    with pytest.raises(DurationError, match="duration"):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=100_000), st.sampled_from("mhd"))
def test_any_whole_amount_parses_or_is_refused_as_too_long(amount: int, unit: str) -> None:
    seconds = amount * {"m": 60, "h": 3600, "d": 86_400}[unit]
    if seconds <= 3653 * 86_400:
        assert parse_duration(f"{amount}{unit}").total_seconds() == seconds
    else:
        with pytest.raises(DurationError, match="too long"):
            parse_duration(f"{amount}{unit}")


@given(st.text(max_size=12))
def test_arbitrary_text_never_crashes_the_parser(text: str) -> None:
    with contextlib.suppress(DurationError):
        assert parse_duration(text) > timedelta(0)


def test_decisions_query_filters_and_limits() -> None:
    query = decisions_query(rule="idle-gpu", job="llm-pretrain", limit=50)
    assert 'audit.rule = "idle-gpu"' in query and 'audit.job_name = "llm-pretrain"' in query
    assert query.endswith("| limit 50")
    assert 'audit.action != "none"' not in query  # a named job: its whole story
    assert 'audit.action != "none"' in decisions_query()
    assert unknown_fields(query) == set()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rule": 'x" or "1"="1'},
        {"rule": "idle-gpu\n"},
        {"job": "llm\n"},
        {"job": "bad name"},
        {"job": "a" * 64},
        {"limit": 0},
        {"limit": 10_001},
    ],
)
def test_decisions_query_refuses_values_that_could_change_it(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        decisions_query(**kwargs)  # type: ignore[arg-type]


def test_rows_drop_the_pointer() -> None:
    results = [[{"field": "audit.rule", "value": "x"}, {"field": "@ptr", "value": "abc"}]]
    assert rows_from_results(results) == [{"audit.rule": "x"}]


def test_team_report_combines_counts_and_savings() -> None:
    governed = [{"audit.team": "nlp", "jobs": "3"}, {"jobs": "2"}]
    actions = [
        {"audit.team": "nlp", "audit.action": "stop", "audit.outcome": "done", "jobs": "1", "saved": "100.5"},
        {"audit.team": "nlp", "audit.action": "stop", "audit.outcome": "audit-only", "jobs": "2", "saved": "7"},
        {"audit.team": "nlp", "audit.action": "clone", "audit.outcome": "done", "jobs": "1"},
        {"audit.action": "stop", "audit.outcome": "done", "jobs": "2"},
    ]
    nlp, untagged = team_report(governed, actions)
    assert (nlp.team, nlp.governed, nlp.stopped, nlp.resumed, nlp.saved_usd) == ("nlp", 3, 1, 1, 100.5)
    assert (nlp.would_stop, nlp.would_save_usd) == (2, 7.0)
    assert (untagged.team, untagged.governed, untagged.stopped, untagged.saved_usd) == (NO_TEAM, 2, 2, 0.0)


def test_team_report_refuses_a_non_numeric_statistic() -> None:
    with pytest.raises(ValueError, match="non-numeric"):
        team_report([{"audit.team": "nlp", "jobs": "many"}], [])
