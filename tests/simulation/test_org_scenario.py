"""The built-in `org` scenario (issue 21 item 6): two member accounts and an audit account; every
member decision reaches the central view, through the real forwarding path (moto's EventBridge across
accounts into the central log group)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from smgov.cli.simulate import check_failed
from smgov.simulation.engine import Simulation
from smgov.simulation.report import simulate
from smgov.simulation.scenario import Scenario, builtin_scenario


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return simulate(builtin_scenario("org"), seed=0)


def test_every_member_decision_reaches_the_central_view(report: dict[str, Any]) -> None:
    # Given the org scenario ran: two members, each governing its own jobs and forwarding its records
    org = report["org"]
    # Then the central log group holds exactly the members' decisions, member by member
    assert [m["account"] for m in org["members"]] == ["111111111111", "222222222222"]
    assert org["member_audit_records"] > 0
    assert org["central_audit_records"] == org["member_audit_records"]
    for member in org["members"]:
        assert member["audit_records"] > 0, member
        assert member["central_audit_records"] == member["audit_records"], member
        assert member["missing_from_central"] == 0 and member["dead_lettered_audit_records"] == 0, member
    assert not check_failed(report, faulty=False)


def test_each_member_governs_its_own_jobs(report: dict[str, Any]) -> None:
    jobs = {j["name"]: j for j in report["jobs"]}
    assert jobs["vision-untagged"]["final_status"] == "Stopped"  # compliance, in the vision account
    assert jobs["nlp-pretrain-hang"]["stopped_at_minute"] is not None  # the idle guard, in the NLP account
    assert jobs["vision-tagged"]["final_status"] == jobs["nlp-finetune"]["final_status"] == "Completed"
    assert report["totals"]["unexpected_outcomes"] == 0 and not any(report["invariants"].values())


def test_central_records_name_their_member_and_match_the_members_decisions() -> None:
    # Given one member's run, forwarding to the audit account
    scenario = builtin_scenario("org")
    assert scenario.org is not None
    member = scenario.org.members[1]
    run = Simulation(scenario.member(member.account), account=member.account, central=scenario.org).run()
    # Then every central event is a whole EventBridge event whose detail is the member's record
    recorded = Counter((r.job_name, r.rule, r.action, r.outcome.value) for r in run.audit)
    central = Counter(
        (a["job_name"], a["rule"], a["action"], a["outcome"])
        for a in (e["detail"]["audit"] for e in run.central_events)
    )
    assert central == recorded
    assert {e["detail"]["member"]["account"] for e in run.central_events} == {member.account}
    assert {e["source"] for e in run.central_events} == {"sagemaker-governance"}
    # and the member's records carry the member's account in their job ARNs
    assert all(r.job_arn is None or f":{member.account}:" in r.job_arn for r in run.audit)


def test_a_lost_member_decision_fails_the_check(report: dict[str, Any]) -> None:
    broken = {**report, "org": {**report["org"], "missing_from_central": 1}}
    assert check_failed(broken, faulty=False)
    dead_lettered = {**broken, "org": {**broken["org"], "dead_lettered_audit_records": 1}}
    assert check_failed(dead_lettered, faulty=False)  # without faults, nothing should need the DLQ
    assert not check_failed(dead_lettered, faulty=True)  # with faults, in the DLQ is not lost


def test_an_org_must_place_every_job_in_one_member() -> None:
    base = builtin_scenario("org").model_dump(mode="json")
    base["org"]["members"][0]["jobs"] = ["vision-untagged"]  # vision-tagged is nowhere
    with pytest.raises(ValidationError, match="exactly one member"):
        Scenario.model_validate(base)
    base = builtin_scenario("org").model_dump(mode="json")
    base["org"]["members"][1]["account"] = base["org"]["audit_account"]
    with pytest.raises(ValidationError, match="distinct"):
        Scenario.model_validate(base)
