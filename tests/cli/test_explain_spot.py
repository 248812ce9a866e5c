"""`smgov explain` on the Spot interruption sample: with the job's checkpoint writes the economics decide
(and their numbers are shown); without them the count rule decides, and says why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smgov.cli.main import main

EVENTS = Path(__file__).resolve().parents[2] / "events"
SAMPLE = str(EVENTS / "training-job-interrupted-spot.json")
WRITES = str(EVENTS / "checkpoints" / "bert-pretrain-spot-11.txt")
AT = "2025-11-21T13:31:02Z"  # a second after its third interruption


def spot_decisions(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    assert main(["explain", SAMPLE, "--at", AT, *args, "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return [d for d in result["decisions"] if d["rule"] == "spot-fallback"]


def test_with_its_checkpoint_writes_a_steady_job_stays_on_spot(capsys: pytest.CaptureFixture[str]) -> None:
    # Given three one-hour stints, each checkpointed every 20 minutes, When explained with those writes
    (decision,) = spot_decisions(capsys, "--checkpoints", WRITES)
    # Then the numbers keep it on Spot at the third interruption
    assert decision["code"] == "spot.skip.spot-cheaper"
    evidence = decision["evidence"]
    assert evidence["economics"] == "computed" and evidence["interruptions"] == 3
    assert evidence["spot_cost_usd"] < evidence["on_demand_cost_usd"]


def test_a_saved_list_objects_answer_is_read_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    times = Path(WRITES).read_text().split()
    listing = {"Contents": [{"Key": f"ckpt/step-{i}.pt", "LastModified": t} for i, t in enumerate(times)]}
    (tmp_path / "list.json").write_text(json.dumps(listing))
    (decision,) = spot_decisions(capsys, "--checkpoints", str(tmp_path / "list.json"))
    assert decision["code"] == "spot.skip.spot-cheaper"


def test_without_checkpoint_writes_the_count_rule_decides_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    clone, stop = spot_decisions(capsys)
    assert (clone["code"], stop["code"]) == ("spot.clone.count-rule", "spot.stop.count-rule")
    assert clone["evidence"]["economics"] == "unavailable"


def test_the_text_output_shows_the_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", SAMPLE, "--at", AT, "--checkpoints", WRITES]) == 0
    out = capsys.readouterr().out
    assert "numbers:" in out and "spot_efficiency" in out


ALTERNATIVES = """
idle:
  prices: {ml.g6.12xlarge: 5.752}
spot:
  price_factor: 0.99
  fallback_job_tag: null
  fallbacks:
    - instance_type: ml.p4d.24xlarge
    - instance_type: ml.g6.12xlarge
"""


def test_the_alternatives_considered_are_shown_with_the_ledger_saved_from_dynamodb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a Spot price close to On-Demand (finishing On-Demand is cheaper), two alternatives, and a
    # saved ledger Query in which the first alternative's type is in a storm
    (tmp_path / "policy.yaml").write_text(ALTERNATIVES)
    ledger = str(EVENTS / "spot-health-query.json")
    args = ["--checkpoints", WRITES, "--policy", str(tmp_path / "policy.yaml"), "--spot-health", ledger]
    clone, stop = spot_decisions(capsys, *args)
    # Then the storm type is passed over and the job resumes on Spot on the second
    assert (clone["code"], stop["code"]) == ("spot.clone.alternative", "spot.stop.alternative")
    assert [(a["instance_type"], a["verdict"]) for a in clone["evidence"]["alternatives"]] == [
        ("ml.p4d.24xlarge", "storm"),
        ("ml.g6.12xlarge", "chosen"),
    ]
    # and the text output lists each alternative with its verdict
    assert main(["explain", SAMPLE, "--at", AT, *args]) == 0
    out = capsys.readouterr().out
    assert "alternative ml.p4d.24xlarge: storm" in out and "alternative ml.g6.12xlarge: chosen" in out
