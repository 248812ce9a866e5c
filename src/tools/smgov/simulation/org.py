"""An organization in the simulator (issue 21 item 6): member accounts and an audit account.

Each member is its own governed run (``Scenario.member``: its jobs, its parameters, ``CentralAuditBusArn``
set), in its own account id; the deployed stack's audit bus and forwarding rule exist in moto, and so do
the audit account's central bus, its rule and its log group (org/audit-account.yaml), so each decision
travels the real way: the functions' ``PutEvents``, the member's rule, the central bus, the central rule,
the log group. The members run one after another (moto's state lives as long as one run): the central view
is the union of what reached the central log group in each.

The report's ``org`` section counts, per member and in total, the decisions the member recorded and the
ones the central log group holds, and any the member dead-lettered instead: every member decision reaches
the central view, or is in its dead-letter queue (nothing lost silently).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from smgov.simulation.engine import RunResult
from smgov.simulation.scenario import Scenario


def _decision_key(audit: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return (audit["job_name"], audit["rule"], audit["action"], audit["outcome"], audit["at"])


def org_section(scenario: Scenario, runs: list[RunResult]) -> dict[str, Any]:
    """``org: {members: [...], member_audit_records: N, central_audit_records: N, ...}``."""
    assert scenario.org is not None
    members = []
    for member, run in zip(scenario.org.members, runs, strict=True):
        recorded = Counter(_decision_key(r.as_log()) for r in run.audit)
        central = Counter(
            _decision_key(e["detail"]["audit"])
            for e in run.central_events
            if e.get("detail", {}).get("member", {}).get("account") == member.account
        )
        members.append(
            {
                "account": member.account,
                "jobs": len(member.jobs),
                "mode": member.parameters.get(
                    "GovernanceMode", scenario.parameters.get("GovernanceMode", "audit")
                ),
                "audit_records": sum(recorded.values()),
                "central_audit_records": sum(central.values()),
                "dead_lettered_audit_records": len(run.dead_lettered_audit),
                "missing_from_central": sum((recorded - central).values()),
            }
        )
    return {
        "audit_account": scenario.org.audit_account,
        "central_log_group": scenario.org.log_group,
        "members": members,
        "member_audit_records": sum(m["audit_records"] for m in members),
        "central_audit_records": sum(m["central_audit_records"] for m in members),
        "dead_lettered_audit_records": sum(m["dead_lettered_audit_records"] for m in members),
        "missing_from_central": sum(m["missing_from_central"] for m in members),
    }


def merge(scenario: Scenario, runs: list[RunResult]) -> RunResult:
    """The members' runs as one (the report's jobs, costs and counters over the whole organization)."""
    first = runs[0]

    def total(attribute: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for run in runs:
            out.update(getattr(run, attribute))
        return out

    ground: dict[str, list[str]] = {}
    for run in runs:
        for name, names in run.ground_truth.items():
            ground.setdefault(name, []).extend(names)
    return replace(
        first,
        scenario=scenario,
        jobs={name: job for run in runs for name, job in run.jobs.items()},
        audit=[record for run in runs for record in run.audit],
        invocations=total("invocations"),
        errors=[error for run in runs for error in run.errors],
        aws_calls=total("aws_calls"),
        notifications=total("notifications"),
        alarm_transitions=[t for run in runs for t in run.alarm_transitions],
        alarms={name: alarm for run in runs for name, alarm in run.alarms.items()},
        deployment_notes=sorted({note for run in runs for note in run.deployment_notes}),
        minutes=max(run.minutes for run in runs),
        evaluations=sum(run.evaluations for run in runs),
        throttling={},
        faults=first.faults,
        deliveries=total("deliveries"),
        ground_truth=ground,
        central_events=[e for run in runs for e in run.central_events],
        dead_lettered_audit=[d for run in runs for d in run.dead_lettered_audit],
    )
