"""The template's saved queries, dashboard and outputs agree with what the code really writes: the audit
record's fields, the `governance decision` log line, and the EMF metrics with their dimensions."""

from __future__ import annotations

import ast
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sagemaker_governance.adapters.read_failures import ALARMED
from sagemaker_governance.audit import AUDIT_MESSAGE, AuditRecord, LogAuditSink, Outcome
from sagemaker_governance.business_metrics import BusinessMetric, EmfBusinessMetrics
from sagemaker_governance.domain.decisions import Action
from sagemaker_governance.observability import NAMESPACE
from smgov.audit_queries import (
    EVIDENCE_KEYS,
    actions_query,
    audit_fields,
    decisions_query,
    governed_jobs_query,
    unknown_fields,
)
from tests.infrastructure.conftest import functions
from tests.insights_subset import commands, execute, flatten, output_fields, selects

SRC = Path(__file__).resolve().parents[2] / "src" / "functions" / "sagemaker_governance"
# Metrics the dashboard shows that capabilities being built on other branches will emit (idle guard:
# EstimatedSavingsUSD; auto-resume / Spot fallback: JobsResumed, SpotFallbacks). When a branch that
# emits one is merged, the tripwire test below fails: remove the name here so the strict check applies.
PENDING_METRICS: set[str] = set()  # every dashboard metric is emitted by the code now


@pytest.fixture
def deployed_env(template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Powertools environment the template gives the functions (EMF dimensions depend on it)."""
    for key, value in template["Globals"]["Function"]["Environment"]["Variables"].items():
        if key.startswith("POWERTOOLS_") and isinstance(value, str):
            monkeypatch.setenv(key, value)


def query_definitions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == "AWS::Logs::QueryDefinition"
    }


def function_log_groups(template: dict[str, Any]) -> list[str]:
    return sorted(f["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] for f in functions(template).values())


def record(**overrides: Any) -> AuditRecord:
    base: dict[str, Any] = {
        "at": datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
        "trigger": "alarm",
        "event_id": "e-1",
        "job_name": "llm-pretrain",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/llm-pretrain",
        "job_status": "InProgress",
        "team": "vision",
        "owner": "alice",
        "rule": "idle-gpu",
        "action": "stop",
        "mode": "enforce",
        "outcome": Outcome.DONE,
        "reason": "GPU idle for 30 minutes",
        "evidence": {key: 1 for key in EVIDENCE_KEYS},
    }
    return AuditRecord.model_validate({**base, **overrides})


def log_line(rec: AuditRecord, log_output: io.StringIO) -> dict[str, Any]:
    """The JSON line the real sink writes for a record (what Logs Insights indexes)."""
    start = log_output.tell()
    LogAuditSink().write(rec)
    lines = [json.loads(line) for line in log_output.getvalue()[start:].splitlines() if line.strip()]
    (line,) = [line for line in lines if line.get("message") == AUDIT_MESSAGE]
    return dict(line)


def all_queries(template: dict[str, Any]) -> dict[str, str]:
    queries = {name: props["QueryString"] for name, props in query_definitions(template).items()}
    queries["cli:decisions"] = decisions_query(rule="idle-gpu", job="llm-pretrain", include_no_action=True)
    queries["cli:decisions-default"] = decisions_query()
    queries["cli:governed"] = governed_jobs_query()
    queries["cli:actions"] = actions_query()
    for widget in dashboard(template)["widgets"]:
        if widget["type"] == "log":
            queries[f"dashboard:{widget['properties']['title']}"] = widget["properties"]["query"]
    return queries


# ---- saved queries ------------------------------------------------------------------------------


def test_the_saved_queries_exist(template: dict[str, Any]) -> None:
    assert set(query_definitions(template)) == {
        "AuditActionsByRuleQuery",
        "AuditChargebackQuery",
        "AuditStoppedJobsQuery",
        "AuditResumesQuery",
        "AuditWouldHaveStoppedQuery",
    }
    for props in query_definitions(template).values():
        assert props["Name"]["Fn::Sub"].startswith("${AWS::StackName}/")


def test_audit_field_names_come_from_the_model() -> None:
    # the serialized names: what the logged JSON carries
    fields = audit_fields()
    assert {"schema", "job_name", "team", "rule", "action", "outcome", "reason", "evidence"} <= fields
    assert "schema_version" not in fields
    assert set(record().as_log()) == fields


def test_every_query_references_only_real_audit_fields(template: dict[str, Any]) -> None:
    for name, query in all_queries(template).items():
        assert unknown_fields(query) == set(), name
        assert "audit." in query, name


def test_the_field_check_catches_a_misspelt_field() -> None:
    assert unknown_fields("fields audit.jobname, audit.rule | filter audit.evidence.nope = 1") == {
        "audit.jobname",
        "audit.evidence.nope",
    }
    assert unknown_fields('filter audit.team.name = "x"') == {"audit.team.name"}


def test_every_query_reads_only_fields_a_real_log_line_has(
    template: dict[str, Any], log_output: io.StringIO
) -> None:
    line = flatten(log_line(record(), log_output))
    for name, query in all_queries(template).items():
        for field in output_fields(query):
            if field.startswith("@"):
                continue  # Insights' own fields (@timestamp, @message, ...)
            assert field in line, (name, field)


def test_action_and_outcome_literals_are_real_values(template: dict[str, Any]) -> None:
    vocab = {"audit.action": {a.value for a in Action}, "audit.outcome": {o.value for o in Outcome}}
    for name, query in all_queries(template).items():
        for field, literal in re.findall(r'(audit\.action|audit\.outcome)\s*!?=\s*"([^"]*)"', query):
            assert literal in vocab[field], (name, field, literal)


def test_every_query_reads_only_governance_decisions(template: dict[str, Any], log_output: io.StringIO) -> None:
    other = {"level": "INFO", "message": "policy document rejected", "audit": record().as_log()}
    for name, query in all_queries(template).items():
        assert f'message = "{AUDIT_MESSAGE}"' in query, name
        assert not selects(query, other), name


@pytest.mark.parametrize(
    ("query", "selected", "not_selected"),
    [
        (
            "AuditStoppedJobsQuery",
            [{"action": "stop", "outcome": "done"}],
            [
                {"action": "stop", "outcome": "audit-only"},
                {"action": "stop", "outcome": "already-done"},
                {"action": "notify", "outcome": "done"},
            ],
        ),
        (
            "AuditWouldHaveStoppedQuery",
            [{"action": "stop", "outcome": "audit-only", "mode": "audit"}],
            [{"action": "stop", "outcome": "done"}, {"action": "notify", "outcome": "audit-only"}],
        ),
        (
            "AuditResumesQuery",
            [{"action": "clone", "outcome": "done"}, {"action": "clone", "outcome": "audit-only"}],
            [{"action": "stop", "outcome": "done"}],
        ),
        (
            "AuditActionsByRuleQuery",
            [{"action": "stop"}, {"action": "notify", "outcome": "exempted"}],
            [{"action": "none", "outcome": "no-action"}],
        ),
    ],
)
def test_saved_queries_select_the_right_records_from_real_log_lines(
    template: dict[str, Any],
    log_output: io.StringIO,
    query: str,
    selected: list[dict[str, Any]],
    not_selected: list[dict[str, Any]],
) -> None:
    text = query_definitions(template)[query]["QueryString"]
    for overrides in selected:
        assert selects(text, log_line(record(**overrides), log_output)), overrides
    for overrides in not_selected:
        assert not selects(text, log_line(record(**overrides), log_output)), overrides


def test_cli_queries_select_the_right_records(log_output: io.StringIO) -> None:
    stop = log_line(record(), log_output)
    nothing = log_line(record(action="none", outcome=Outcome.NO_ACTION), log_output)
    other_job = log_line(record(job_name="other"), log_output)
    assert selects(decisions_query(), stop) and not selects(decisions_query(), nothing)
    assert selects(decisions_query(include_no_action=True), nothing)
    by_job = decisions_query(job="llm-pretrain")
    assert selects(by_job, stop) and selects(by_job, nothing) and not selects(by_job, other_job)
    assert not selects(decisions_query(rule="required-tags"), stop)
    assert selects(actions_query(), stop) and not selects(actions_query(), nothing)


def test_every_query_reads_every_function_log_group(template: dict[str, Any]) -> None:
    groups = function_log_groups(template)
    for name, props in query_definitions(template).items():
        assert sorted(g["Ref"] for g in props["LogGroupNames"]) == groups, name
    for widget in dashboard(template)["widgets"]:
        if widget["type"] == "log":
            sources = re.findall(r"SOURCE 'sub-(\w+)'", widget["properties"]["query"])
            assert sorted(sources) == groups


def test_queries_use_only_the_supported_commands(template: dict[str, Any]) -> None:
    for query in all_queries(template).values():
        commands(query)  # raises on anything else


def test_chargeback_query_and_panels_count_a_duplicate_efficiency_record_once(
    template: dict[str, Any], log_output: io.StringIO
) -> None:
    # a late copy of a delivery writes its records again (README "Retries, throttling and idempotency")
    figures = {"cost_usd": 100.0, "idle_cost_usd": 5.0, "idle_gpu_hours": 2.0, "instance_type": "ml.p4d.24xlarge"}
    line = log_line(
        record(rule="efficiency-record", action="none", outcome=Outcome.DONE, evidence=figures), log_output
    )
    other = log_line(
        record(job_name="other", rule="efficiency-record", action="none", evidence=figures), log_output
    )
    events = [(0, line), (1, line), (2, other)]
    queries = all_queries(template)
    for name in (
        "AuditChargebackQuery",
        "dashboard:Chargeback per team: spend, idle cost, idle GPU-hours of the jobs that ended (efficiency records)",
        "dashboard:Idle cost per instance type (efficiency records)",
    ):
        (row,) = execute(queries[name], events)
        cells = {cell["field"]: cell["value"] for cell in row}
        assert (cells["jobs"], cells["spend_usd"], cells["idle_cost_usd"]) == ("2", "200", "10"), name


def test_the_query_reader_refuses_what_insights_refuses_of_two_stats() -> None:
    # "Use multiple stats commands in a single query" (CWL_QuerySyntax-Stats): the second stats reads only
    # the first's fields, a sort or limit comes after it, and there are at most two
    events = [(0, {"message": "m", "a": "x", "n": 1})]
    assert execute("stats sum(n) as s by a | stats sum(s) as total", events) == [
        [{"field": "total", "value": "1"}]
    ]
    for query in (
        "stats sum(n) as s by a | stats sum(n) as total",
        "stats sum(n) as s by a | sort s desc | stats sum(s) as total",
        "stats sum(n) as s by a | stats sum(s) as t by a | stats count(*) as c",
    ):
        with pytest.raises(ValueError):
            execute(query, events)


# ---- dashboard ----------------------------------------------------------------------------------


def dashboard(template: dict[str, Any]) -> dict[str, Any]:
    body = template["Resources"]["GovernanceDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert isinstance(body, str)
    placeholders = set(re.findall(r"\$\{([^}!][^}]*)\}", body))
    for placeholder in placeholders:
        resource = placeholder.split(".")[0]
        assert placeholder.startswith("AWS::") or resource in template["Resources"], placeholder
    substituted = re.sub(r"\$\{([^}!][^}]*)\}", lambda m: f"sub-{m.group(1).replace('::', '-')}", body)
    loaded: dict[str, Any] = json.loads(substituted)
    return loaded


def metric_widgets(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [w["properties"] for w in dashboard(template)["widgets"] if w["type"] == "metric"]


def emitted_metric_names(root: Path = SRC) -> set[str]:
    """Metric names the code emits: the ``name=`` of ``add_metric`` / ``single_metric`` calls, given as a
    string, or as a name or attribute (``METRIC``, ``self.metric``) assigned a string in the same module;
    and every business metric (``BusinessMetric.<member>``) the code names outside the port's own module
    (which emits whichever it is given)."""
    from sagemaker_governance.business_metrics import BusinessMetric

    names: set[str] = set()
    for path in root.rglob("*.py"):
        if path.name == "business_metrics.py":
            continue
        tree = ast.parse(path.read_text())
        names |= _metric_call_names(tree, _string_constants(tree))
        names |= {
            BusinessMetric[node.attr].value
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "BusinessMetric"
            and node.attr in BusinessMetric.__members__
        }
    return names


def _string_constants(tree: ast.AST) -> dict[str, set[str]]:
    """Every string each name is assigned in a module (class attributes differ per class: all of them)."""
    constants: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    constants.setdefault(target.id, set()).add(node.value.value)
    return constants


def _metric_call_names(tree: ast.AST, constants: dict[str, set[str]]) -> set[str]:
    """The ``name=`` of the module's ``add_metric`` / ``single_metric`` calls."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func not in ("add_metric", "single_metric"):
            continue
        for keyword in node.keywords:
            if keyword.arg != "name":
                continue
            if isinstance(keyword.value, ast.Constant):
                names.add(str(keyword.value.value))
            elif isinstance(keyword.value, ast.Name | ast.Attribute):
                key = keyword.value.id if isinstance(keyword.value, ast.Name) else keyword.value.attr
                names |= {v for v in constants.get(key, {f"<unresolved {key}>"}) if v}
    return names


def emf_dimensions(capsys: pytest.CaptureFixture[str], log_output: io.StringIO) -> dict[str, set[str]]:
    """Metric name -> dimension keys, from the EMF the real audit sink prints (service as deployed)."""
    LogAuditSink().write(record())
    out: dict[str, set[str]] = {}
    for text in capsys.readouterr().out.splitlines():
        blob = json.loads(text)
        for directive in blob.get("_aws", {}).get("CloudWatchMetrics", []):
            assert directive["Namespace"] == NAMESPACE
            for metric in directive["Metrics"]:
                out[metric["Name"]] = set(directive["Dimensions"][0])
    return out


def search_expressions(template: dict[str, Any]) -> list[str]:
    return [
        item["expression"]
        for widget in metric_widgets(template)
        for row in widget["metrics"]
        for item in row
        if isinstance(item, dict) and "expression" in item
    ]


def test_dashboard_body_is_json_with_the_widgets_people_need(template: dict[str, Any]) -> None:
    titles = " | ".join(w["title"] for w in metric_widgets(template)).lower()
    for needed in ("stopped", "resumes", "spot fallbacks", "savings", "policy-load errors", "dead-letter"):
        assert needed in titles, needed
    for widget in dashboard(template)["widgets"]:
        assert widget["x"] + widget["width"] <= 24
        if widget["type"] in ("metric", "log"):
            assert widget["properties"]["region"] == "sub-AWS-Region"


def test_dashboard_reads_the_metrics_the_code_emits(
    template: dict[str, Any], deployed_env: None, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    emitted = emitted_metric_names()
    dimensions = emf_dimensions(capsys, log_output)
    for expression in search_expressions(template):
        (metric,) = re.findall(r'MetricName=\\?"(\w+)\\?"', expression)
        assert metric in emitted or metric in PENDING_METRICS, metric
        schema = re.search(r"\{([^}]*)\}", expression)
        if schema:  # an exact-schema search: the dimension keys must be exactly what EMF writes
            namespace, *keys = schema.group(1).split(",")
            assert namespace == NAMESPACE
            assert set(keys) == dimensions[metric], (metric, keys)
            for key, value in re.findall(r'(\w+)=\\?"([\w-]+)\\?"', expression):
                if key == "MetricName":
                    continue
                assert key in dimensions[metric], key
                vocab = {"action": {a.value for a in Action}, "outcome": {o.value for o in Outcome}}
                assert value in vocab[key], (key, value)
        else:
            assert f'Namespace="{NAMESPACE}"' in expression.replace('\\"', '"'), expression


def test_the_stop_widget_finds_the_decisions_metric_of_a_real_stop(
    template: dict[str, Any], deployed_env: None, capsys: pytest.CaptureFixture[str], log_output: io.StringIO
) -> None:
    LogAuditSink().write(record(action="stop", outcome=Outcome.DONE))
    (blob,) = [json.loads(t) for t in capsys.readouterr().out.splitlines() if '"Decisions"' in t]
    (stops,) = [e for e in search_expressions(template) if 'outcome=\\"done\\"' in e or 'outcome="done"' in e]
    for key, value in re.findall(r'(action|outcome)=\\?"([\w-]+)\\?"', stops):
        assert blob[key] == value


def test_pending_metrics_are_not_emitted_yet() -> None:
    """Tripwire for the merge: once the code emits one, drop it from PENDING_METRICS."""
    assert emitted_metric_names() & PENDING_METRICS == set()
    assert {"Decisions", "PolicyLoadErrors", "DecisionsRecorded"} <= emitted_metric_names()


def _watched_series(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics an alarm reads: its own, or those of its metric-math queries."""
    if "MetricName" in alarm:
        return [{k: alarm[k] for k in ("Namespace", "MetricName", "Dimensions")}]
    return [q["MetricStat"]["Metric"] for q in alarm["Metrics"] if "MetricStat" in q]


@pytest.mark.parametrize(
    ("alarm_name", "metric", "kinds"),
    [
        ("EvidenceReadsAlarm", BusinessMetric.EVIDENCE_READ_ERRORS, {k.value for k in ALARMED}),
        ("PolicyRejectedAlarm", BusinessMetric.POLICY_LOAD_ERRORS, set()),
    ],
)
def test_the_health_alarms_watch_the_series_the_code_writes(
    template: dict[str, Any],
    deployed_env: None,
    capsys: pytest.CaptureFixture[str],
    alarm_name: str,
    metric: BusinessMetric,
    kinds: set[str],
) -> None:
    # An alarm on a series nobody writes never fires: each series the alarm reads must be one the functions'
    # EMF lines create (namespace, name, every dimension and its value, `service` as deployed).
    alarm = template["Resources"][alarm_name]["Properties"]
    watched = _watched_series(alarm)
    for series in watched:
        dimensions = {d["Name"]: d["Value"] for d in series["Dimensions"]}
        EmfBusinessMetrics().emit(metric, **{k: v for k, v in dimensions.items() if k != "service"})
        (blob,) = [json.loads(t) for t in capsys.readouterr().out.splitlines()]
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert (directive["Namespace"], directive["Metrics"][0]["Name"]) == (
            series["Namespace"],
            series["MetricName"],
        )
        assert set(directive["Dimensions"][0]) == set(dimensions)
        assert {k: blob[k] for k in dimensions} == dimensions
    assert {d["Value"] for s in watched for d in s["Dimensions"] if d["Name"] == "kind"} == kinds
    assert alarm["AlarmActions"] == [{"Ref": "NotificationsTopic"}]
    assert alarm["TreatMissingData"] == "notBreaching" and alarm["DatapointsToAlarm"] == 1


def test_dead_letter_widget_watches_this_stacks_queue(template: dict[str, Any]) -> None:
    (widget,) = [w for w in metric_widgets(template) if "dead-letter" in w["title"].lower()]
    assert widget["metrics"][0][:4] == [
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        "sub-DeadLetterQueue.QueueName",
    ]


# ---- outputs ------------------------------------------------------------------------------------


def test_outputs_let_the_cli_find_log_groups_and_the_dashboard(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    exported = {o["Value"]["Ref"] for k, o in outputs.items() if k.endswith("LogGroupName")}
    assert exported == set(function_log_groups(template))
    assert outputs["GovernanceDashboardName"]["Value"] == {"Ref": "GovernanceDashboard"}
    assert "${GovernanceDashboard}" in outputs["GovernanceDashboardUrl"]["Value"]["Fn::Sub"]
    assert outputs["SavedQueriesFolder"]["Value"] == {"Fn::Sub": "${AWS::StackName}/"}


def test_the_spot_health_panel_reads_the_ledger_evidence_of_spot_decisions(
    template: dict[str, Any], log_output: io.StringIO
) -> None:
    # Given the dashboard's Spot health panel
    (query,) = [
        w["properties"]["query"]
        for w in dashboard(template)["widgets"]
        if w["type"] == "log" and w["properties"]["title"].startswith("Spot health")
    ]
    # Then it selects Spot fallback decisions (any action: most say stay on Spot) and groups them by type
    spot = record(rule="spot-fallback", action="none", outcome=Outcome.NO_ACTION)
    assert selects(query, log_line(spot, log_output))
    assert not selects(query, log_line(record(rule="idle-gpu"), log_output))
    assert query.rstrip().split("| sort")[0].endswith("by audit.evidence.fleet_instance_type ")


def test_the_fleet_evidence_keys_the_panel_reads_are_what_a_spot_decision_writes() -> None:
    from sagemaker_governance.domain.spot_health import FleetHealth

    health = FleetHealth("ml.p4d.24xlarge", 1.0, 4, 3, 1, 2, 12.5, 1.2, storm=True)
    assert {k for k in EVIDENCE_KEYS if k.startswith("fleet_")} <= set(health.evidence())
