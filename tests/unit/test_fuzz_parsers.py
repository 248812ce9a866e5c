"""Fuzzing every parser that takes outside input: any input yields a model or our validation error.

"Our validation error" per parser:

- EventBridge events, SNS alarm messages, DescribeTrainingJob / ListTags shapes, settings:
  ``pydantic.ValidationError`` (the handlers let it propagate, so Lambda's asynchronous failure path
  puts the event in the dead-letter queue with the error);
- policy documents (YAML or JSON from SSM, CLI files): ``PolicyDocumentError``;
- dead letters: none at all, ``parse_dead_letter`` never raises;
- CLI inputs: an exit code and a message, never a traceback; the clone planner: ``ClonePlanError``.

Anything else (``KeyError``, ``TypeError``, ``AttributeError``, ``OverflowError``, ``RecursionError``, a
``ValueError`` from deep inside...) fails the test. Parsed models are also used (derived facts, rule
evaluation, alarm planning) so a model that parses but cannot be used is caught too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sagemaker_governance.adapters.sagemaker import SageMakerJobs
from sagemaker_governance.adapters.sagemaker_model import create_training_job_shape
from sagemaker_governance.domain.clone import ClonePlan, ClonePlanError, ResumeReason, plan_clone
from sagemaker_governance.domain.compliance import evaluate_compliance
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import FailureEvidence
from sagemaker_governance.domain.failures import classify
from sagemaker_governance.domain.guards.base import AlarmNaming, alarm_tags_identify
from sagemaker_governance.domain.guards.idle import IDLE
from sagemaker_governance.domain.guards.registry import GUARDS
from sagemaker_governance.domain.job import TrainingJob, parse_tags
from sagemaker_governance.domain.policy import Policy
from sagemaker_governance.domain.policy_document import PolicyDocumentError, load_policy_text
from sagemaker_governance.events.alarms import AlarmNotification, alarm_notifications
from sagemaker_governance.events.job_state import TrainingJobStateChange
from sagemaker_governance.settings import Settings
from smgov.cli.resume import cmd_resume
from smgov.dead_letters import DeadLetter, parse_dead_letter
from smgov.explain import explain_event
from smgov.preflight import PreflightOutcome, preflight_request
from tests.builders import create_request, describe
from tests.conftest import EVENTS, load_event
from tests.fuzz_strategies import garbage, json_text, mutated, nested_list, raw_text, scalars

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NAMING = AlarmNaming(prefix="sagemaker-governance-idle-", managed_by="sagemaker-governance")
SHAPE = create_training_job_shape()
BASE_POLICY = Settings.from_env({"REQUIRED_TAGS": "team,cost-center"}).base_policy_document()

# Each test's budget: the whole module stays around 20 s on a shared 2-core machine. Deeper runs:
# `HYPOTHESIS_PROFILE=fuzz-deep pytest tests/unit/test_fuzz_parsers.py` (see tests/conftest.py).
_DEFAULT = settings()  # the loaded profile (tests/conftest.py)
_DEEP = _DEFAULT.max_examples > 100  # the fuzz-deep profile
FEW = settings(max_examples=_DEFAULT.max_examples // 5 if _DEEP else 50)
SOME = settings(max_examples=_DEFAULT.max_examples if _DEEP else 120)

JOB_EVENTS = [*sorted(p.name for p in EVENTS.glob("training-job-*.json")), "malformed-missing-job-name.json"]
ALARM_EVENTS = sorted(p.name for p in EVENTS.glob("idle-alarm-*.json"))


def use_job(job: TrainingJob) -> None:
    """Every derived fact and the pure decisions a parsed job feeds."""
    _ = (job.is_terminal, job.instance_groups, job.instance_types, job.total_instance_count, job.is_heterogeneous)
    job.training_seconds(NOW)
    job.count_transitions("Training")
    policy = Policy.model_validate(BASE_POLICY)
    evaluate_compliance(job, policy, NOW)
    for guard in GUARDS:
        guard.plan(job, guard.config(policy), NAMING)


# ---- EventBridge: SageMaker Training Job State Change --------------------------------------------


@st.composite
def state_change_events(draw: st.DrawFn) -> Any:
    return draw(mutated(load_event(draw(st.sampled_from(JOB_EVENTS)))))


@SOME
@given(state_change_events())
@example({**load_event("training-job-starting.json"), "detail": {**describe(), "CreationTime": 10**400}})
@example(
    {**load_event("training-job-starting.json"), "detail": {**describe(), "Tags": {"team": nested_list(3000)}}}
)
@example(
    {**load_event("training-job-starting.json"), "detail": {**describe(), "Tags": [{"Key": ["x"], "Value": 1}]}}
)
def test_state_change_event_parses_or_fails_validation(event: Any) -> None:
    try:
        parsed = TrainingJobStateChange.model_validate(event)
    except ValidationError:
        return
    use_job(parsed.detail)


@FEW
@given(state_change_events(), st.one_of(st.none(), mutated(describe())))
def test_explain_runs_the_service_or_fails_validation(event: Any, describe_file: Any) -> None:
    # `smgov explain EVENT --describe FILE`: both files come from the developer
    policy = Policy.model_validate(BASE_POLICY)
    try:
        result = explain_event(
            event,
            policy,
            now=NOW,
            describe=describe_file if isinstance(describe_file, dict) else None,
            clone_role_patterns=("*",),
        )
    except ValidationError:
        return
    assert result["job"] == event["detail"]["TrainingJobName"]


# ---- SNS: CloudWatch alarm notifications ----------------------------------------------------------


@st.composite
def alarm_sns_events(draw: st.DrawFn) -> Any:
    event = load_event(draw(st.sampled_from(ALARM_EVENTS)))
    records = event["Records"]
    message_text = records[0]["Sns"]["Message"]
    where = draw(st.sampled_from(["message", "message", "envelope", "text"]))
    if where == "message":
        try:
            message = json.loads(message_text)
        except ValueError:
            message = {"AlarmName": "x", "AWSAccountId": "1", "NewStateValue": "ALARM"}
        records[0]["Sns"]["Message"] = json_text(draw(mutated(message)))
        return event
    if where == "text":
        records[0]["Sns"]["Message"] = draw(raw_text)
        return event
    return draw(mutated(event))


@SOME
@given(alarm_sns_events())
@example({"Records": [{"Sns": {"Message": "[" * 100_000}}]})
def test_alarm_notification_parses_or_fails_validation(event: Any) -> None:
    try:
        notifications = alarm_notifications(event)
    except ValidationError:
        return
    for _message_id, notification in notifications:
        notification.evidence()
        _ = (notification.changed_at, notification.is_composite)
        if notification.trigger is not None:
            notification.trigger.hosts()


@SOME
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "AlarmName",
                "AWSAccountId",
                "NewStateValue",
                "NewStateReason",
                "StateChangeTime",
                "Trigger",
                "AlarmRule",
            ]
        ),
        garbage,
    )
)
@example({"AlarmName": "a" * 256, "AWSAccountId": "123456789012", "NewStateValue": "ALARM"})
@example(
    {
        "AlarmName": "a",
        "AWSAccountId": "1",
        "NewStateValue": "ALARM",
        "NewStateReason": "[1e999 (21/11/26 11:55:00), 5 (99/99/99 99:99:99), " + "0.0 (" * 20_000 + "]",
    }
)
@example({"AlarmName": "a", "AWSAccountId": "1", "NewStateValue": "ALARM", "StateChangeTime": "9" * 5000})
def test_alarm_message_fields_of_any_type(message: dict[str, Any]) -> None:
    try:
        notification = AlarmNotification.model_validate(message)
    except ValidationError:
        return
    assert 1 <= len(notification.alarm_name) <= 255  # CloudWatch's limit: anything longer is not an alarm
    notification.evidence()
    _ = notification.changed_at


@SOME
@given(
    st.dictionaries(
        st.one_of(st.text(max_size=20), st.sampled_from(["smgov:training-job", "smgov:managed-by"])),
        st.one_of(st.text(max_size=80), st.sampled_from(["sagemaker-governance", "a" * 64, "job 1", "job-1"])),
    )
)
@example({"smgov:managed-by": "sagemaker-governance", "smgov:training-job": "a" * 200})
@example({"smgov:managed-by": "sagemaker-governance", "smgov:training-job": "job name with spaces"})
def test_alarm_tags_name_a_valid_job_or_nothing(tags: dict[str, str]) -> None:
    # The stopper re-reads the job the tags name: anything but a valid job name means "not ours".
    job_name = alarm_tags_identify(tags, NAMING)
    if job_name is not None:
        TrainingJob.model_validate({"TrainingJobName": job_name, "TrainingJobStatus": "InProgress"})
        assert len(job_name) <= 63 and " " not in job_name


# ---- DescribeTrainingJob and ListTags answers -----------------------------------------------------


class _Paginator:
    def __init__(self, pages: list[Any]) -> None:
        self._pages = pages

    def paginate(self, **_: Any) -> Iterator[Any]:
        yield from self._pages


class _FuzzedSageMaker:
    """Answers DescribeTrainingJob and ListTags with whatever the test gives (botocore does not validate
    responses, so an adapter must not trust their shape beyond the API model)."""

    def __init__(self, description: Any, tag_pages: list[Any]) -> None:
        self._description, self._pages = description, tag_pages

    def describe_training_job(self, **_: Any) -> Any:
        return self._description

    def get_paginator(self, _name: str) -> _Paginator:
        return _Paginator(self._pages)


tag_shapes = st.one_of(
    st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=5),
    st.lists(st.fixed_dictionaries({"Key": st.text(max_size=20), "Value": st.text(max_size=20)}), max_size=5),
    garbage,
)


@SOME
@given(mutated({**describe(), "Tags": [{"Key": "team", "Value": "nlp"}]}))
@example({**describe(), "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": -(10**400)}]})
def test_describe_response_parses_or_fails_validation(description: Any) -> None:
    try:
        job = TrainingJob.model_validate(description)
    except ValidationError:
        return
    use_job(job)


@SOME
@given(
    # botocore hands over dicts (it parses by the model but does not validate values or required keys)
    mutated(describe()).filter(lambda d: isinstance(d, dict)),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"Tags": tag_shapes}),
            mutated({"Tags": [{"Key": "k", "Value": "v"}]}).filter(lambda d: isinstance(d, dict)),
        ),
        max_size=3,
    ),
)
@example(describe(TrainingJobArn=None), [])
@example(describe(), [{"Tags": [{"Value": "no key"}]}])
def test_sagemaker_adapter_reads_any_answer_as_a_job_or_our_error(description: Any, pages: list[Any]) -> None:
    try:
        job = SageMakerJobs(_FuzzedSageMaker(description, pages)).get_job("job-1")
    except (ValidationError, AdapterError):
        return
    use_job(job)


@SOME
@given(tag_shapes)
@example([{"Key": "a"}, {"Key": {"nested": 1}, "Value": "x"}])
@example({"team": nested_list(3000)})
def test_tag_shapes_parse_to_text_or_raise_value_error(tags: Any) -> None:
    try:
        parsed = parse_tags(tags)
    except ValidationError:  # pragma: no cover - parse_tags raises plain ValueError (a field validator)
        raise
    except ValueError as exc:
        assert "tag" in str(exc).lower() or "Tags" in str(exc)
        return
    assert parsed is None or all(isinstance(k, str) and isinstance(v, str) for k, v in parsed.items())


# ---- policy documents (SSM parameter, CLI files) --------------------------------------------------

RICH_POLICY: dict[str, Any] = {
    "version": 1,
    "mode": "enforce",
    "notify_in_audit_mode": True,
    "team_tag": "team",
    "owner_tag": "owner",
    "rules": [
        {
            "id": "required-tags",
            "type": "required-tags",
            "tags": {"team": {}, "cost-center": {"pattern": "cc-[0-9]{4}"}},
        },
        {"id": "instance-types", "type": "allowed-instance-types", "patterns": ["ml.g5.*", "ml.m5.*"]},
        {"id": "max-instances", "type": "max-instance-count", "max": 8},
        {"id": "max-runtime", "type": "max-runtime", "max_hours": 72, "max_wait_hours": 96},
        {"id": "spot-checkpoint", "type": "spot-checkpoint", "on_violation": "stop"},
    ],
    "exemptions": [
        {"job_name_prefix": "bench-", "rules": ["max-instances"], "expires": "2026-12-31", "reason": "INC-1: ok"},
        {"tag": {"team": "vision"}, "expires": "2027-01-31", "reason": "INC-2: ok"},
    ],
    "resume": {
        "enabled": True,
        "min_training_hours": 2,
        "max_attempts": 3,
        "transient_patterns": {"algorithm-error": "^AlgorithmError: .*NCCL", "capacity-error": None},
    },
    "spot": {"enabled": True, "max_interruptions": 3, "fallback_on_max_wait": True},
    "idle": {"enabled": True, "threshold_percent": 1, "grace_minutes": 20, "prices": {"ml.p4d.24xlarge": 37.69}},
    "preflight": {"refuse_on": "enforced", "tag_defaults": {"owner": "${user}", "env": "dev"}},
    "teams": {
        "vision": {"rules": [{"id": "instance-types", "patterns": ["ml.p5.*"]}], "idle": {"threshold_percent": 5}},
        "nlp": {"mode": "audit"},
    },
}

# Shallow garbage for documents that are serialised to text (the serialisers recurse too).
shallow = st.recursive(
    scalars.filter(lambda v: not isinstance(v, list | dict)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)

YAML_TRICKS = [
    # billion laughs: aliases are shared references, the document must not explode in size
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\nrules: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
    "x: &x {type: max-instance-count, max: 2}\nrules: [{<<: *x, id: a}, {<<: *x, id: b}]\n",
    "mode: enforce\nmode: audit\n",
    "rules: []\nrules: [{id: a, type: max-instance-count, max: 1}]\n",
    "teams: {a: {mode: audit}, a: {mode: enforce}}\n",
    "!!python/object/apply:os.system ['true']\n",
    "mode: !!binary aGVsbG8=\n",
    "? [a, b]\n: 1\n",
    "[" * 30_000,
    "a: " + "[" * 5000 + "]" * 5000,
    "a: " + "{b: " * 3000 + "1" + "}" * 3000,
    "rules: [{id: [1], type: max-instance-count, max: 3}]\n",
    "rules: [{id: {a: 1}, type: max-instance-count, max: 3}]\n",
    "rules: [{id: r, type: required-tags, tags: {a: {pattern: '" + "(" * 3000 + ")" * 3000 + "'}}}]\n",
    "rules: [{id: r, type: required-tags, tags: {a: {pattern: 'a{4294967296}'}}}]\n",
    "resume: {transient_patterns: {x: '" + "(" * 3000 + "'}}\n",
    "resume: {signatures: [{id: x, class: hardware, pattern: '" + "(" * 3000 + "'}]}\n",
    "resume: {signatures: [{id: x, class: hardware, pattern: '(a|aa)*(b+)+c'}]}\n",
    "idle: {prices: {ml.p4d.24xlarge: .inf}}\n",
    "idle: {prices: {ml.p4d.24xlarge: .nan}}\n",
    "exemptions: [{job_name_prefix: a, reason: abc, expires: 99999-01-01}]\n",
    "exemptions: [{job_name_prefix: a, reason: abc, expires: 2026-02-30}]\n",
    "--- {}\n--- {}\n",
    "\tmode: enforce\n",
    "x" * 70_000,
    '{"mode": "enforce", "rules": [{"id": "a", "type": "max-runtime", "max_hours": 1e999}]}',
]


@st.composite
def policy_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["yaml", "json", "trick", "raw", "fragment"]))
    if kind == "trick":
        return draw(st.sampled_from(YAML_TRICKS))
    if kind == "raw":
        return draw(raw_text)
    document = draw(mutated(RICH_POLICY, max_mutations=2).filter(lambda d: d is not None))
    if _depth(document) > 50:
        return json.dumps(RICH_POLICY) + "\n" + "[" * 100  # deep values are covered by the tricks
    if kind == "json":
        return json.dumps(document)
    text = yaml.safe_dump(document, sort_keys=False)
    if kind == "fragment":  # a YAML fragment appended: duplicate keys, anchors, wrong indentation
        text += draw(st.sampled_from(["mode: audit\n", "teams: {}\n", "  rules: x\n", "&a b: *a\n", "<<: {}\n"]))
    return text


def _depth(value: Any, limit: int = 60) -> int:
    depth, level = 0, [value]
    while level and depth <= limit:
        depth += 1
        level = [
            child
            for node in level
            if isinstance(node, dict | list)
            for child in (node.values() if isinstance(node, dict) else node)
        ]
    return depth


def use_policy(policy: Policy) -> None:
    policy.digest()
    job = TrainingJob.model_validate(
        {
            **describe("bench-1", EnableManagedSpotTraining=True),
            "FailureReason": "AlgorithmError: NCCL timeout",
            "Tags": {"team": "vision"},
        }
    )
    for team in [None, *policy.teams]:
        effective = policy.for_team(team)
        effective.exemption_for(job, "max-instances", NOW)
        classify(job.failure_reason, FailureEvidence.unread("fuzz"), effective.resume.taxonomy())
        for guard in GUARDS:
            guard.plan(job, guard.config(effective), NAMING)
    evaluate_compliance(job, policy, NOW)


@FEW  # the slowest: every valid document is resolved per team and evaluated
@given(policy_texts(), st.sampled_from([{}, BASE_POLICY]))
@example("rules: [{id: [1], type: max-instance-count, max: 3}]\n", BASE_POLICY)
@example("[" * 30_000, {})
@example("mode: enforce\nmode: audit\n", {})
@example("rules: [{id: r, type: required-tags, tags: {a: {pattern: '" + "(" * 3000 + "'}}}]\n", {})
@example("rules: [{id: r, type: required-tags, tags: {a: {pattern: 'a{4294967296}'}}}]\n", {})
@example("idle: {prices: {ml.p4d.24xlarge: .inf}}\n", {})
def test_policy_document_loads_or_is_rejected_with_our_error(text: str, base: dict[str, Any]) -> None:
    try:
        policy = load_policy_text(text, base)
    except PolicyDocumentError as exc:
        assert exc.errors and all(isinstance(e, str) for e in exc.errors)
        return
    use_policy(policy)


def test_duplicate_keys_are_rejected_naming_the_key() -> None:
    # A duplicate key silently dropped the first value (a whole rules list): ambiguous, so rejected.
    with pytest.raises(PolicyDocumentError, match="duplicate key 'rules'"):
        load_policy_text("rules: [{id: a, type: max-instance-count, max: 1}]\nrules: []\n")
    with pytest.raises(PolicyDocumentError, match="duplicate key 'a'"):
        load_policy_text('{"teams": {"a": {"mode": "audit"}, "a": {"mode": "enforce"}}}')
    # YAML merge keys are not duplicates: the explicit key wins over the merged one
    policy = load_policy_text(
        textwrap.dedent(
            """
            idle: &idle {threshold_percent: 2, grace_minutes: 10}
            teams:
              vision:
                idle: {<<: *idle, grace_minutes: 30}
            """
        )
    )
    assert IDLE.config(policy.for_team("vision")).grace_minutes == 30
    assert IDLE.config(policy.for_team("vision")).threshold_percent == 2


# ---- dead letters (SQS messages of the dead-letter queue) ----------------------------------------


def _lambda_record() -> dict[str, Any]:
    return {
        "version": "1.0",
        "requestContext": {
            "requestId": "r-1",
            "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3,
        },
        "requestPayload": load_event("training-job-starting.json"),
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "1 validation error", "errorType": "ValidationError"},
    }


@st.composite
def dead_letter_messages(draw: st.DrawFn) -> Any:
    attributes = {
        "RULE_ARN": {"DataType": "String", "StringValue": "arn:aws:events:us-east-1:123456789012:rule/r"},
        "TARGET_ARN": {"DataType": "String", "StringValue": "arn:aws:lambda:us-east-1:123456789012:function:f"},
        "ERROR_CODE": {"DataType": "String", "StringValue": "SDK_CLIENT_ERROR"},
    }
    kind = draw(st.sampled_from(["lambda", "eventbridge", "raw"]))
    if kind == "raw":
        body: Any = draw(raw_text)
    else:
        document = draw(
            mutated(_lambda_record() if kind == "lambda" else load_event("training-job-starting.json"))
        )
        body = json_text(document) if _depth(document) < 500 else "[" * 5000
    message = {"MessageId": "m", "ReceiptHandle": "h", "Body": body, "MessageAttributes": attributes}
    return draw(mutated(message, max_mutations=1)) if draw(st.booleans()) else message


@SOME
@given(dead_letter_messages())
@example({"Body": "1" * 5000})
@example({"Body": "[" * 100_000})
@example({"Body": json.dumps({"requestContext": {}, "responseContext": "x"})})
@example({"Body": json.dumps({"requestContext": {"approximateInvokeCount": True}, "responsePayload": []})})
@example({"Body": json.dumps({"detail": {"TrainingJobName": "j"}}), "MessageAttributes": {"TARGET_ARN": []}})
def test_dead_letter_parser_never_raises(message: Any) -> None:
    if not isinstance(message, Mapping):
        message = {"Body": message}
    letter = parse_dead_letter(message)
    assert isinstance(letter, DeadLetter)
    _ = letter.redrivable


# ---- CLI inputs: smgov resume (describe and tags files), the clone planner ------------------------


@SOME
@given(mutated(describe()), tag_shapes)
@example(describe(TrainingJobName="a" * 64), {})
@example(describe(), {"smgov:root-job": "job-1", "smgov:attempt": "9" * 5000})
def test_clone_planner_plans_or_raises_clone_plan_error(description: Any, tags: Any) -> None:
    if not isinstance(description, Mapping):
        return  # the CLI refuses a non-object file before planning (see the next test)
    try:
        tag_map = parse_tags(tags) or {}
    except ValueError:
        tag_map = {}
    try:
        plan = plan_clone(description, tag_map, SHAPE, reason=ResumeReason.MANUAL)
    except ClonePlanError as exc:
        assert str(exc)
        return
    assert isinstance(plan, ClonePlan) and plan.request["TrainingJobName"] == plan.name


@FEW
@given(
    st.one_of(mutated(describe()).map(json_text), raw_text),
    st.one_of(tag_shapes.filter(lambda t: _depth(t) < 500).map(json_text), raw_text),
)
@example("1" * 5000, "{}")
@example(json.dumps(describe()), "[" * 100_000)
@example(json.dumps(describe()), json.dumps([{"Key": {"a": 1}}]))
def test_resume_cli_offline_exits_with_a_code_never_a_traceback(describe_text: str, tags_text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        describe_file, tags_file = Path(tmp, "describe.json"), Path(tmp, "tags.json")
        describe_file.write_text(describe_text)
        tags_file.write_text(tags_text)
        args = argparse.Namespace(
            job_name="job-1",
            on_demand=False,
            dry_run=True,
            describe_file=str(describe_file),
            tags_file=str(tags_file),
            json=True,
        )
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cmd_resume(args)
    assert code in {0, 1, 2}


# ---- preflight requests (SDK hook, smgov preflight) -----------------------------------------------


@SOME
@given(mutated(create_request()))
@example(create_request(Tags=[{"Key": ["x"], "Value": "v"}]))
@example(create_request(Tags="team=nlp"))
def test_preflight_request_evaluates_or_fails_validation(request: Any) -> None:
    if not isinstance(request, Mapping):
        return  # botocore's parameter validation refuses a non-object request first
    policy = Policy.model_validate(RICH_POLICY)
    try:
        outcome = preflight_request(request, policy, NOW, user="alice")
    except ValidationError:
        return
    assert isinstance(outcome, PreflightOutcome)
    outcome.report()
    outcome.render_text()


# ---- settings (the functions' environment) --------------------------------------------------------

SETTING_NAMES = [field.alias for field in Settings.model_fields.values() if field.alias is not None]
env_values = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "-1",
            "1",
            "60",
            "1e999",
            "inf",
            "nan",
            "true",
            "false",
            "yes",
            "enforce",
            "audit",
            "9" * 5000,
            "a,b,,c",
            " , ",
            "ml.*",
            "\x00",
            "日本",
        ]
    ),
)


@SOME
@given(st.dictionaries(st.sampled_from(SETTING_NAMES), env_values))
@example({"MAX_RUNTIME_HOURS": "inf"})
@example({"TEAM_TAG_KEY": ""})
@example({"IDLE_ALARM_PREFIX": "p" * 200})
def test_settings_from_environment_load_or_fail_validation(environ: dict[str, str]) -> None:
    try:
        cfg = Settings.from_env(environ)
    except ValidationError:
        return
    # What the composition root builds from them at start-up: ours errors or a usable policy
    try:
        policy = load_policy_text("", cfg.base_policy_document())
    except PolicyDocumentError:
        return
    use_policy(policy)
    try:
        AlarmNaming(prefix=cfg.idle_alarm_prefix, managed_by=cfg.stack_name, alarm_topic_arn=cfg.alarm_topic_arn)
    except ValidationError:
        return
    cfg.alarm_arn("x")
