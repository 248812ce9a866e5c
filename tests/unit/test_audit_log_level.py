"""The audit trail does not depend on the functions' LogLevel: at WARNING or ERROR each decision still writes its
one record, the same line as at INFO (what the saved queries, the dashboard and `smgov audit`/`report` read);
LogLevel governs the diagnostics only."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sagemaker_governance.audit import AUDIT_MESSAGE, AuditRecord, LogAuditSink
from sagemaker_governance.observability import govern_diagnostics_only, logger
from smgov.audit_queries import decisions_query
from tests.audit_records import record
from tests.conftest import REPO
from tests.insights_subset import selects

LEVELS = [logging.WARNING, logging.ERROR]
# What a function does at start-up and at a decision: its logger is configured from POWERTOOLS_LOG_LEVEL (the
# template's LogLevel) when observability is imported; it logs a diagnostic at each level, then a decision's record.
FUNCTION = """
from datetime import datetime, UTC
from sagemaker_governance.audit import AuditRecord, LogAuditSink, Outcome
from sagemaker_governance.observability import logger
logger.info("diagnostic at info")
logger.warning("diagnostic at warning")
LogAuditSink().write(AuditRecord(at=datetime.now(UTC), trigger="alarm", event_id=None, job_name="j", job_arn=None,
    job_status=None, team=None, owner=None, rule="idle-guard", code="idle.stop.idle", action="stop", mode="enforce",
    outcome=Outcome.DONE, reason="idle"))
"""


def stop_record() -> AuditRecord:
    return record(event_id="e-1", job_arn=None, team="vision", owner="alice", rule="idle-guard")


@pytest.fixture
def diagnostics_level() -> Iterator[Any]:
    """Sets the functions' LogLevel as their start-up does; restores it after the test."""
    saved = logger.log_level
    yield govern_diagnostics_only
    govern_diagnostics_only(saved)


def lines(output: io.StringIO, start: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.getvalue()[start:].splitlines() if line.strip()]


def audit_line(output: io.StringIO) -> dict[str, Any] | None:
    start = output.tell()
    LogAuditSink().write(stop_record())
    found = [line for line in lines(output, start) if line.get("message") == AUDIT_MESSAGE]
    return found[0] if found else None


@pytest.mark.parametrize("level", LEVELS, ids=logging.getLevelName)
def test_each_decision_writes_its_record_at_any_log_level(
    level: int, diagnostics_level: Any, log_output: io.StringIO
) -> None:
    # Given the record a decision writes at INFO, what the saved queries are written against
    diagnostics_level(logging.INFO)
    at_info = audit_line(log_output)
    # When the functions run at WARNING or ERROR
    diagnostics_level(level)
    at_level = audit_line(log_output)
    # Then the decision writes the same record, the same line (its level INFO), which the queries still select
    assert at_info is not None and at_level is not None
    assert {**at_level, "timestamp": None} == {**at_info, "timestamp": None}
    assert at_level["level"] == "INFO"
    assert selects(decisions_query(), at_level)


@pytest.mark.parametrize("level", LEVELS, ids=logging.getLevelName)
def test_log_level_still_governs_the_diagnostics(
    level: int, diagnostics_level: Any, log_output: io.StringIO
) -> None:
    # Given the functions at WARNING or ERROR
    diagnostics_level(level)
    start = log_output.tell()
    # When they log diagnostics at each level
    logger.debug("diagnostic", at="DEBUG")
    logger.info("diagnostic", at="INFO")
    logger.warning("diagnostic", at="WARNING")
    logger.error("diagnostic", at="ERROR")
    # Then only those at or above LogLevel are written
    assert [line["at"] for line in lines(log_output, start)] == [
        logging.getLevelName(at) for at in (logging.WARNING, logging.ERROR) if at >= level
    ]


@pytest.mark.parametrize("level", ["WARNING", "ERROR"])
def test_a_function_started_at_warning_or_error_keeps_the_audit_trail(level: str) -> None:
    # Given a function process started with the template's LogLevel in POWERTOOLS_LOG_LEVEL
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": level, "PYTHONPATH": str(REPO / "src" / "functions")}
    # When it logs its diagnostics and writes a decision's record
    out = subprocess.run([sys.executable, "-c", FUNCTION], env=env, capture_output=True, text=True, check=True)
    written = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"level"')]
    # Then the record is written, and the diagnostics below LogLevel are not
    assert [line["message"] for line in written] == [
        *(["diagnostic at warning"] if level == "WARNING" else []),
        AUDIT_MESSAGE,
    ]
    assert written[-1]["audit"]["code"] == "idle.stop.idle"
