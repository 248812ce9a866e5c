"""`smgov audit --org` and `smgov report --org` (issue 21 item 2): every member's decisions from the
audit account's central log group, and every member that should report but is missing, outdated or
silent named, never left out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sagemaker_governance.adapters.audit_forwarder import AuditForwarder
from sagemaker_governance.audit import Outcome
from sagemaker_governance.domain.errors import AdapterError
from smgov.adapters.cloudformation import StackInstance, StackOutputs
from smgov.adapters.logs_insights import LogsInsights
from smgov.audit_queries import unknown_fields
from smgov.cli import visibility
from smgov.cli.main import main
from tests.audit_records import record
from tests.cli.local_aws import LocalLogsInsights, clients

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CENTRAL_GROUP = "/aws/events/sagemaker-governance-audit"
RELEASE = "0.1.0"
A, B, C, D = "111111111111", "222222222222", "333333333333", "444444444444"


@dataclass
class FakeStackSets:
    instances: list[StackInstance] = field(default_factory=list)
    error: str | None = None
    asked: list[tuple[str, str]] = field(default_factory=list)

    def list(self, stack_set: str, call_as: str = "DELEGATED_ADMIN") -> list[StackInstance]:
        """The instances of ``stack_set`` (an instance that names none is the enforce StackSet's)."""
        self.asked.append((stack_set, call_as))
        if self.error:
            raise AdapterError(self.error)
        return [i for i in self.instances if (i.stack_set or "sagemaker-governance") == stack_set]


@dataclass
class Org:
    logs: LocalLogsInsights
    stack_sets: FakeStackSets


@pytest.fixture
def org(monkeypatch: pytest.MonkeyPatch) -> Iterator[Org]:
    cfn_client, logs_client, cfn, logs = clients()
    stack_sets = FakeStackSets()
    deps = visibility.Dependencies(
        stacks=StackOutputs(cfn_client),
        insights=LogsInsights(logs_client, sleep=lambda _: None, monotonic=lambda: 0.0),
        now=lambda: NOW,
        stack_sets=stack_sets,  # type: ignore[arg-type]
    )
    monkeypatch.setattr(visibility, "make_dependencies", lambda region: deps)
    cfn.deploy("sagemaker-governance-audit", {"CentralAuditLogGroupName": CENTRAL_GROUP})
    logs.create_log_group(CENTRAL_GROUP)
    yield Org(logs, stack_sets)


def forwarded(
    org: Org, account: str, at: datetime, *, version: str = RELEASE, region: str = "us-east-1", **overrides: Any
) -> None:
    """What the central rule writes: the whole event a member's forwarder put (through the real entry)."""
    member = {"account": account, "region": region, "stack": "sagemaker-governance", "version": version}
    job = overrides.get("job", "llm-pretrain")
    overrides.setdefault("job_arn", f"arn:aws:sagemaker:{region}:{account}:training-job/{job}")
    entry = AuditForwarder(None, None, bus_name="b", dead_letter_queue_url=None, member=member).entry(
        record(**overrides)
    )
    event = {
        "version": "0",
        "id": f"id-{len(org.logs.groups[CENTRAL_GROUP])}",
        "detail-type": entry["DetailType"],
        "source": entry["Source"],
        "account": account,
        "time": at.isoformat(),
        "region": region,
        "resources": entry["Resources"],
        "detail": json.loads(entry["Detail"]),
    }
    org.logs.put(CENTRAL_GROUP, at, event)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_audit_org_lists_every_members_decisions_and_names_the_silent_and_outdated(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three members reported (one on an old version), and the StackSet has a fourth instance that
    # never reported and a fifth whose instance is OUTDATED
    forwarded(org, A, NOW - timedelta(hours=2), job="vision-a")
    forwarded(org, B, NOW - timedelta(hours=1), job="nlp-b", team="nlp")
    forwarded(org, C, NOW - timedelta(hours=3), job="old-c", version="0.0.9")
    org.stack_sets.instances = [
        StackInstance(account=a, region="us-east-1", status="CURRENT", detailed_status="SUCCEEDED")
        for a in (A, B, C, D)
    ] + [
        StackInstance(
            account="555555555555",
            region="us-east-1",
            status="OUTDATED",
            detailed_status="FAILED",
            reason="ResourceLogicalId:AuditBus, ResourceStatusReason:Access denied",
        )
    ]
    # When the platform team asks for the organization's decisions as JSON
    code, out = run(capsys, "audit", "--org", "--json")
    # Then each decision carries its member, and every member is listed with what is wrong
    assert code == 0
    report = json.loads(out)
    assert {(d["job_name"], d["account"]) for d in report["decisions"]} == {
        ("vision-a", A),
        ("nlp-b", B),
        ("old-c", C),
    }
    members = {m["account"]: m for m in report["members"]}
    assert set(members) == {A, B, C, D, "555555555555"}
    assert members[A]["problem"] is None and members[A]["decisions"] == 1 and members[A]["version"] == RELEASE
    assert members[C]["problem"].startswith("outdated: reports version 0.0.9")
    assert members[D]["problem"].startswith("no audit record in the last 7d")
    assert members["555555555555"]["problem"].startswith("stack instance OUTDATED/FAILED")
    assert report["instances_read"] is True
    # both StackSets of org/stackset.yaml (one per mode) are read
    assert org.stack_sets.asked == [
        ("sagemaker-governance", "DELEGATED_ADMIN"),
        ("sagemaker-governance-audit-mode", "DELEGATED_ADMIN"),
    ]
    # and every query went to the central log group, fields under detail.
    for query in org.logs.queries.values():
        assert query["logGroupNames"] == [CENTRAL_GROUP]
        assert "detail.message" in query["queryString"] and unknown_fields(query["queryString"]) == set()


def test_audit_org_table_shows_members_and_says_when_the_stackset_cannot_be_read(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    forwarded(org, A, NOW - timedelta(hours=2), job="vision-a")
    org.stack_sets.error = "AccessDenied: not the delegated administrator"
    code, out = run(capsys, "audit", "--org")
    assert code == 0
    assert "vision-a" in out and A in out
    assert "not the delegated administrator" in out  # said, not silently skipped
    assert "members that never reported cannot be listed" in out


def test_report_org_is_the_team_report_over_every_member(org: Org, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two members stopped jobs of two teams, one in audit mode
    forwarded(org, A, NOW - timedelta(days=1), job="vision-a", team="vision")
    forwarded(org, B, NOW - timedelta(days=2), job="nlp-b", team="nlp", outcome=Outcome.AUDIT_ONLY, mode="audit")
    org.stack_sets.instances = [
        StackInstance(account=A, region="us-east-1", status="CURRENT"),
        StackInstance(
            account=B, region="us-east-1", status="CURRENT", stack_set="sagemaker-governance-audit-mode"
        ),
    ]
    code, out = run(capsys, "report", "--org", "--json")
    assert code == 0
    report = json.loads(out)
    teams = {t["team"]: t for t in report["teams"]}
    assert teams["vision"]["stopped"] == 1 and teams["nlp"]["would_stop"] == 1
    assert [m["problem"] for m in report["org"]["members"]] == [None, None]


def test_a_member_deciding_in_another_mode_than_its_stackset_deploys_is_flagged(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given A is an instance of the enforce StackSet but decides in audit mode (e.g. it joined its OU when
    # one StackSet gave new accounts the StackSet's default, audit), B of the audit one deciding in audit,
    # and C an instance of both StackSets
    forwarded(org, A, NOW - timedelta(hours=3), job="prod-a", mode="enforce")
    forwarded(org, A, NOW - timedelta(hours=1), job="prod-a2", outcome=Outcome.AUDIT_ONLY, mode="audit")
    forwarded(org, B, NOW - timedelta(hours=1), job="sandbox-b", outcome=Outcome.AUDIT_ONLY, mode="audit")
    forwarded(org, C, NOW - timedelta(hours=1), job="both-c", mode="enforce")
    audit_set = "sagemaker-governance-audit-mode"
    org.stack_sets.instances = [
        StackInstance(account=A, region="us-east-1", status="CURRENT"),
        StackInstance(account=B, region="us-east-1", status="CURRENT", stack_set=audit_set),
        StackInstance(account=C, region="us-east-1", status="CURRENT"),
        StackInstance(account=C, region="us-east-1", status="CURRENT", stack_set=audit_set),
    ]
    code, out = run(capsys, "audit", "--org", "--json")
    assert code == 0
    members = {m["account"]: m for m in json.loads(out)["members"]}
    # the newest decision's mode is the member's
    assert members[A]["mode"] == "audit" and members[A]["stack_set"] == "sagemaker-governance"
    assert members[A]["problem"].startswith(
        "decides in audit mode, its StackSet sagemaker-governance deploys enforce"
    )
    assert members[B]["mode"] == "audit" and members[B]["problem"] is None
    assert members[C]["problem"].startswith(f"an instance of sagemaker-governance and {audit_set}")
    # and the table shows the mode
    code, out = run(capsys, "audit", "--org")
    assert code == 0
    header = next(line for line in out.splitlines() if line.lstrip().startswith("account"))
    assert "mode" in header.split()


def test_report_org_with_no_records_still_lists_the_members(org: Org, capsys: pytest.CaptureFixture[str]) -> None:
    org.stack_sets.instances = [StackInstance(account=A, region="eu-west-1", status="CURRENT")]
    code, out = run(capsys, "report", "--org")
    assert code == 0
    assert "no governance decisions" in out
    assert A in out and "eu-west-1" in out and "no audit record in the last 30d" in out


def test_a_missing_audit_stack_is_an_error_not_an_empty_report(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["audit", "--org", "--org-stack", "nope"])
    assert code == 1
    assert "nope" in capsys.readouterr().err


# ---- one job is one account's, in one region: a name is unique only there -------------------------------


def test_report_org_counts_jobs_of_the_same_name_in_two_accounts_and_two_regions_apart(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three different jobs named nightly-retrain stopped (A in two regions, and B), each saving 10 USD,
    # and a job of another name
    for account, region in ((A, "us-east-1"), (A, "eu-west-1"), (B, "us-east-1")):
        forwarded(
            org,
            account,
            NOW - timedelta(hours=1),
            region=region,
            job="nightly-retrain",
            team="vision",
            evidence={"estimated_savings_usd": 10.0},
        )
    forwarded(
        org, B, NOW - timedelta(hours=1), job="other", team="vision", evidence={"estimated_savings_usd": 5.0}
    )
    # When the organization's report is asked for
    code, out = run(capsys, "report", "--org", "--json")
    # Then each is a job of its own: four stopped and governed, their savings beside them
    assert code == 0
    report = json.loads(out)
    (vision,) = report["teams"]
    assert (vision["governed"], vision["stopped"], vision["saved_usd"]) == (4, 4, 35.0)
    assert [(c["code"], c["jobs"], c["saved_usd"]) for c in report["stops_by_code"]] == [
        ("idle.stop.idle", 4, 35.0)
    ]
    # and the queries told them apart by the member's account and region
    sent = "\n".join(org.logs.sent())
    assert "detail.member.account, detail.member.region, detail.audit.job_name" in sent


def test_chargeback_org_keeps_each_accounts_job_of_the_same_name(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    from sagemaker_governance.domain.efficiency import EFFICIENCY_RULE_ID

    # Given a job nightly-retrain of 100 USD in each of two accounts, and one in a second region of A
    for account, region in ((A, "us-east-1"), (B, "us-east-1"), (A, "eu-west-1")):
        forwarded(
            org,
            account,
            NOW - timedelta(hours=1),
            region=region,
            job="nightly-retrain",
            team="vision",
            rule=EFFICIENCY_RULE_ID,
            code="efficiency.record.measured",
            action="none",
            outcome=Outcome.DONE,
            evidence={"cost_usd": 100.0, "idle_cost_usd": 5.0},
        )
    # and the one in B was stopped first, saving 30 USD
    forwarded(
        org,
        B,
        NOW - timedelta(hours=2),
        job="nightly-retrain",
        team="vision",
        evidence={"estimated_savings_usd": 30.0},
    )
    code, out = run(capsys, "report", "--org", "--by", "team", "--json")
    assert code == 0, out
    (vision,) = json.loads(out)["groups"]
    assert (vision["jobs"], vision["spend_usd"], vision["idle_cost_usd"], vision["saved_usd"]) == (
        3,
        300.0,
        15.0,
        30.0,
    )


# ---- a record delivered twice counts once ---------------------------------------------------------------


def test_report_org_counts_a_duplicated_forwarded_record_once(
    org: Org, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a stop whose forwarded record arrived twice (EventBridge delivers at least once; a dead letter
    # redriven after its PutEvents had in fact succeeded), and an audit-mode job the idle guard would have
    # stopped twice, 40 USD at the first alarm and 25 at the second
    for _ in range(2):
        forwarded(
            org,
            A,
            NOW - timedelta(hours=1),
            job="vision-a",
            team="vision",
            evidence={"estimated_savings_usd": 10.0},
        )
    for hours, saving in ((3, 40.0), (2, 25.0)):
        forwarded(
            org,
            A,
            NOW - timedelta(hours=hours),
            job="vision-b",
            team="vision",
            mode="audit",
            outcome=Outcome.AUDIT_ONLY,
            evidence={"estimated_savings_usd": saving},
        )
    code, out = run(capsys, "report", "--org", "--json")
    assert code == 0
    report = json.loads(out)
    (vision,) = report["teams"]
    # Then the stop saved 10 USD, once, and the job audit mode would have stopped would have saved 40
    assert (vision["stopped"], vision["saved_usd"]) == (1, 10.0)
    assert (vision["would_stop"], vision["would_save_usd"]) == (1, 40.0)
    assert {(c["outcome"], c["jobs"], c["saved_usd"]) for c in report["stops_by_code"]} == {
        ("done", 1, 10.0),
        ("audit-only", 1, 40.0),
    }
