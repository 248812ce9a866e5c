"""`smgov demo`: the compliance scenario, run through the real handler against an offline account.

Four jobs start in an account governed in enforce mode: one compliant, one without cost tags, one on
a disallowed instance type, and one a policy exemption covers. The real job-events handler receives
each job's real-shaped ``Starting`` event; the report shows what it decided and did.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from datetime import UTC, datetime
from typing import Any

from smgov.simulation.harness import local_account

DEMO_POLICY = """
mode: enforce
rules:
  - {id: instance-types, type: allowed-instance-types, patterns: ["ml.g5.*", "ml.m5.*"]}
exemptions:
  - job_name_prefix: "scale-bench-"
    rules: [max-instances]
    expires: 2099-12-31
    reason: "PLAT-412: approved scale benchmark"
"""

ENVIRONMENT = {
    "GOVERNANCE_MODE": "enforce",
    "REQUIRED_TAGS": "team,cost-center",
    "MAX_INSTANCE_COUNT": "8",
    "POLICY_PARAMETER_NAME": "/sagemaker-governance/policy",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_NAMESPACE": "SageMakerGovernance",
}


def _request(name: str, instance_type: str, count: int, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
            "TrainingInputMode": "File",
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts/models/"},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86_400},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }


JOBS = [
    ("resnet-compliant", "ml.g5.12xlarge", 2, {"team": "vision", "cost-center": "cc-1001", "owner": "alice"}),
    ("untagged-experiment", "ml.g5.2xlarge", 1, {"owner": "bob"}),
    ("p5-without-approval", "ml.p5.48xlarge", 2, {"team": "nlp", "cost-center": "cc-2002", "owner": "carol"}),
    ("scale-bench-64", "ml.m5.xlarge", 64, {"team": "platform", "cost-center": "cc-0001", "owner": "dan"}),
]


def run_demo(*, json_output: bool = False) -> int:
    from sagemaker_governance.handlers.job_events import handler

    now = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    with local_account(lambda: now, ENVIRONMENT, log_audit=False) as account:
        account.ssm.put_parameter(Name=ENVIRONMENT["POLICY_PARAMETER_NAME"], Value=DEMO_POLICY, Type="String")
        for index, (name, instance_type, count, tags) in enumerate(JOBS):
            account.sagemaker.launch(_request(name, instance_type, count, tags))
            event = account.sagemaker.event(name, event_id=f"demo-{index}")
            # EMF metric lines go to stdout in Lambda; here the audit records are kept in memory instead.
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                account.invoke(handler, event, name="job-events")
            records = [r for r in account.audit.records if r.job_name == name]
            rows.append(
                {
                    "job": name,
                    "final_status": account.sagemaker.jobs[name]["TrainingJobStatus"],
                    "decisions": [
                        {"rule": r.rule, "action": r.action, "outcome": r.outcome.value, "reason": r.reason}
                        for r in records
                    ],
                }
            )
        stops = list(account.sagemaker.stop_requests)
    if json_output:
        print(json.dumps({"scenario": "compliance", "jobs": rows, "stop_requests": stops}, indent=2))
        return 0
    print("sagemaker-governance demo: compliance scenario (enforce mode, offline account)\n")
    for row in rows:
        print(f"{row['job']:<24} -> {row['final_status']}")
        for d in row["decisions"]:
            print(f"    [{d['rule']}] {d['action']} / {d['outcome']}: {d['reason']}")
    print(
        f"\n{len(stops)} job(s) stopped; one audit record per decision ({sum(len(r['decisions']) for r in rows)} in all)."
    )
    return 0
