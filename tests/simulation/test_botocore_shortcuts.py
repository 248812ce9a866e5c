"""botocore's per-request work in the simulated accounts (simulation/botocore_shortcuts.py): the same
requests, built with less work."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any
from unittest import mock

import boto3
from botocore.config import Config
from botocore.useragent import UserAgentString
from moto import mock_aws

from smgov.simulation.botocore_shortcuts import unsigned, user_agents_once
from smgov.simulation.harness import ACCOUNT


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


def test_an_unsigned_sessions_requests_carry_no_signature_and_land_in_the_same_account() -> None:
    with mock_aws():
        # Given a session whose requests are not signed, and a signed one
        session = boto3.session.Session(region_name="us-east-1")
        unsigned(session.events)
        bare, signed = session.client("sqs"), boto3.client("sqs", region_name="us-east-1")
        headers: list[Any] = []
        bare.meta.events.register("before-send", lambda request, **_: headers.append(request.headers))
        # When each makes a queue
        url = bare.create_queue(QueueName="q")["QueueUrl"]
        # Then the unsigned request has no signature, and moto put its queue in the signed client's account
        assert "Authorization" not in headers[0]
        assert signed.get_queue_url(QueueName="q")["QueueUrl"] == url
        attributes = signed.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:q"


def test_the_kwargs_answer_is_kept_per_code_and_keeps_no_session_alive() -> None:
    # Given the answer botocore's hooks ask of every handler (does it take **kwargs?), as shared in this process
    import gc
    import weakref

    from smgov.simulation.botocore_models import _accepts_kwargs

    def handler_of_a_session(**kwargs: object) -> None: ...

    def positional_only(a: int) -> None: ...

    # Then it is botocore's own answer, for functions, methods and other callables
    assert _accepts_kwargs(handler_of_a_session) and not _accepts_kwargs(positional_only)
    assert bool(_accepts_kwargs(dict.get)) is bool(inspect.getfullargspec(dict.get)[2])

    # And a function asked about (one per session, as boto3 makes them) is not kept alive by the answer
    def make() -> weakref.ref[Callable[..., None]]:
        def per_session(**kwargs: object) -> None: ...

        _accepts_kwargs(per_session)
        return weakref.ref(per_session)

    gone = make()
    gc.collect()
    assert gone() is None
