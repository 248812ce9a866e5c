"""AWS answered locally for the CLI: CloudFormation DescribeStacks and Logs Insights.

moto's CloudFormation needs extras this project does not install, and moto's Logs Insights cannot run
our queries (no ``filter``, no JSON fields, no ``stats``). These doubles plug into real boto3 clients
behind botocore's request validation (like the SageMaker double): requests are validated against the
service model, answers have the real shapes, and Logs Insights queries are run over real log lines with
the strict subset evaluator in ``tests/insights_subset.py``.
"""

from __future__ import annotations

import copy
import itertools
import json
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse, HTTPHeaders

from tests.insights_subset import execute

REGION = "us-east-1"
ACCOUNT = "123456789012"


class AwsError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


class _Double:
    service = ""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._pending: dict[int, dict[str, Any]] = {}

    def attach(self, client: Any) -> Any:
        client.meta.events.register(f"before-parameter-build.{self.service}.*", self._capture)
        client.meta.events.register(f"before-call.{self.service}.*", self._answer)
        return client

    def _capture(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending[id(model)] = copy.deepcopy(params)

    def _answer(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        params = self._pending.pop(id(model))
        self.calls.append((model.name, params))
        try:
            body, status = getattr(self, f"_op_{model.name}")(params), 200
        except AwsError as err:
            body, status = {"Error": {"Code": err.code, "Message": err.message}}, err.status
        body.setdefault("ResponseMetadata", {"HTTPStatusCode": status, "RequestId": "local"})
        return AWSResponse(f"https://{self.service}.local", status, HTTPHeaders(), None), body

    def operations(self) -> list[str]:
        return [name for name, _ in self.calls]


class LocalCloudFormation(_Double):
    service = "cloudformation"

    def __init__(self) -> None:
        super().__init__()
        self.stacks: dict[str, dict[str, str]] = {}

    def deploy(self, name: str, outputs: dict[str, str]) -> None:
        self.stacks[name] = dict(outputs)

    def _op_DescribeStacks(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params["StackName"]
        if name not in self.stacks:
            raise AwsError("ValidationError", f"Stack with id {name} does not exist")
        return {
            "Stacks": [
                {
                    "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{name}/0f1e2d3c",
                    "StackName": name,
                    "CreationTime": datetime(2026, 11, 1, tzinfo=UTC),
                    "StackStatus": "UPDATE_COMPLETE",
                    "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.stacks[name].items()],
                }
            ]
        }


class LocalLogsInsights(_Double):
    """Log groups of JSON lines; StartQuery runs the query, GetQueryResults reports it after
    ``running_polls`` answers of ``Running`` (so callers must poll). As AWS (botocore's logs model): at
    most ``limit`` rows (10,000 without one), at most ``maxItems`` (10,000) per GetQueryResults page, the
    next page by ``nextToken``."""

    DEFAULT_LIMIT = 10_000
    PAGE = 10_000

    service = "logs"

    def __init__(self, running_polls: int = 1) -> None:
        super().__init__()
        self.groups: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.running_polls = running_polls
        self.final_status = "Complete"
        self.queries: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def create_log_group(self, name: str) -> None:
        self.groups.setdefault(name, [])

    def put(self, group: str, at: datetime, line: dict[str, Any]) -> None:
        self.groups[group].append((int(at.timestamp() * 1000), line))

    def put_lines(self, group: str, at: datetime, text: str) -> None:
        """Every JSON line a function printed (log records and EMF blobs alike), as one log stream would."""
        for raw in text.splitlines():
            if raw.strip():
                self.put(group, at, json.loads(raw))

    def sent(self) -> list[str]:
        return [q["queryString"] for q in self.queries.values()]

    def _op_StartQuery(self, params: dict[str, Any]) -> dict[str, Any]:
        for group in params["logGroupNames"]:
            if group not in self.groups:
                raise AwsError("ResourceNotFoundException", "The specified log group does not exist.")
        start, end = params["startTime"] * 1000, params["endTime"] * 1000
        events = [
            (ts, line)
            for group in params["logGroupNames"]
            for ts, line in self.groups[group]
            if start <= ts <= end
        ]
        events.sort(key=lambda event: event[0])
        query_id = f"q-{next(self._ids):04d}"
        self.queries[query_id] = {
            **params,
            "results": execute(params["queryString"], events)[: params.get("limit", self.DEFAULT_LIMIT)],
            "polls": 0,
            "status": "Running",
            "scanned": len(events),
        }
        return {"queryId": query_id}

    def _op_GetQueryResults(self, params: dict[str, Any]) -> dict[str, Any]:
        query = self.queries[params["queryId"]]
        query["polls"] += 1
        if query["status"] == "Running" and query["polls"] > self.running_polls:
            query["status"] = self.final_status
        done = query["status"] == "Complete"
        first = int(params.get("nextToken") or 0)
        last = first + params.get("maxItems", self.PAGE)
        out: dict[str, Any] = {
            "status": query["status"],
            "results": query["results"][first:last] if done else [],
            "statistics": {
                "recordsMatched": float(len(query["results"])) if done else 0.0,
                "recordsScanned": float(query["scanned"]) if done else 0.0,
                "bytesScanned": 0.0,
            },
        }
        if done and last < len(query["results"]):
            out["nextToken"] = str(last)
        return out

    def _op_StopQuery(self, params: dict[str, Any]) -> dict[str, Any]:
        query = self.queries[params["queryId"]]
        was_running = query["status"] == "Running"
        query["status"] = "Cancelled"
        return {"success": was_running}


def clients() -> tuple[Any, Any, LocalCloudFormation, LocalLogsInsights]:
    cfn, logs = LocalCloudFormation(), LocalLogsInsights()
    return (
        cfn.attach(boto3.client("cloudformation", region_name=REGION)),
        logs.attach(boto3.client("logs", region_name=REGION)),
        cfn,
        logs,
    )
