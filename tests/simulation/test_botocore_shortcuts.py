"""botocore's per-request work in the simulated accounts (simulation/botocore_shortcuts.py): the same
requests, built with less work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import boto3
from botocore.config import Config
from botocore.useragent import UserAgentString
from moto import mock_aws

from smgov.simulation.botocore_shortcuts import user_agents_once


def _sent_user_agents(client: Any, calls: Callable[[], None]) -> list[str]:
    sent: list[str] = []

    def note(request: Any, **_: Any) -> None:
        sent.append(request.headers["User-Agent"])

    client.meta.events.register("before-send", note)
    calls()
    client.meta.events.unregister("before-send", note)
    return sent


def _listing(client: Any) -> Callable[[], None]:
    """Three calls: two plain, one through a paginator (a context feature of its own in the header)."""

    def calls() -> None:
        client.create_queue(QueueName="q")
        client.list_queues()
        list(client.get_paginator("list_queues").paginate())

    return calls


def test_the_user_agent_is_built_once_per_distinct_input_and_is_botocores_own() -> None:
    config = Config(retries={"mode": "standard", "max_attempts": 3})
    with mock_aws():
        # Given botocore's headers for a client's plain and paginated calls
        client = boto3.client("sqs", region_name="us-east-1", config=config)
        plain = _sent_user_agents(client, _listing(client))
    builds = mock.Mock(wraps=UserAgentString.to_string)

    def counted(self: UserAgentString) -> str:  # a function: a method of the class, as the one it replaces
        return str(builds(self))

    with mock.patch.object(UserAgentString, "to_string", counted), mock_aws(), user_agents_once():
        client = boto3.client("sqs", region_name="us-east-1", config=config)
        # When the same calls are made with the shortcut, twice
        first = _sent_user_agents(client, _listing(client))
        built = builds.call_count
        again = _sent_user_agents(client, _listing(client))
    # Then every header is the one botocore built, and the second round built none
    assert first == again == plain and len(plain) == 3
    assert plain[0] == plain[1] != plain[2]
    assert builds.call_count == built
