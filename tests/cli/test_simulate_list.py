"""`smgov simulate --list`: each built-in scenario with the first sentence of its description."""

from __future__ import annotations

import pytest

from smgov.cli.main import main
from smgov.cli.simulate import first_sentence
from smgov.simulation.scenario import builtin_names, builtin_scenario


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        (
            "A Spot market: ml.g5.12xlarge is calm; ml.p4d.24xlarge storms. Long jobs...",
            "A Spot market: ml.g5.12xlarge is calm; ml.p4d.24xlarge storms.",
        ),
        (
            "Jobs move On-Demand (spot.storm.move_new_jobs, opt-in). Three jobs",
            "Jobs move On-Demand (spot.storm.move_new_jobs, opt-in).",
        ),
        (
            'It dies with "AlgorithmError: ... CUDA error". The job',
            'It dies with "AlgorithmError: ... CUDA error".',
        ),
        ("Christmas Eve, 17:00. A run", "Christmas Eve, 17:00."),
        ("One sentence\n  over two lines.", "One sentence over two lines."),
        ("No period at all", "No period at all"),
    ],
)
def test_the_first_sentence_ends_at_a_period_before_a_space_or_the_end(text: str, sentence: str) -> None:
    assert first_sentence(text) == sentence


def test_list_prints_each_scenario_with_its_first_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    # When the built-in scenarios are listed
    assert main(["simulate", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Then each line is a name and the start of its description, cut after a whole sentence
    assert [line.split(maxsplit=1)[0] for line in lines] == builtin_names()
    for line in lines:
        name, shown = line.split(maxsplit=1)
        description = " ".join(builtin_scenario(name).description.split())
        assert description.startswith(shown) and shown.endswith((".", '."', ".)"))
        assert description[len(shown) : len(shown) + 1] in ("", " "), line  # not inside `ml.p4d`
