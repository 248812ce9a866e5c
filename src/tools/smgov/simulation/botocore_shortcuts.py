"""Work botocore repeats for every request of a simulated account, done once or skipped; the same requests.

- **User-Agent**: botocore builds the header from the client's configuration and the request's context
  (its features: retry mode, paginator, waiter...) twice per attempt (``_convert_to_request_dict`` and
  ``rebuild_and_replace_user_agent_handler``), sanitizing every character of every component. The string
  depends on nothing else, so ``user_agents_once`` keeps each distinct one: the header is byte for byte
  what botocore would have built.
- **signatures**: moto checks no signature (its IAM emulation is off in the simulated accounts: no
  ``INITIAL_NO_AUTH_ACTION_COUNT``), and the account a request lands in is ``MOTO_ACCOUNT_ID`` (else the
  default one, which an unsigned request gets too). ``unsigned`` makes botocore's ``choose-signer`` answer
  ``UNSIGNED`` on a session, so its requests are not signed (SigV4 through awscrt was about a tenth of a
  fleet run). Everything else about the request (validation, serialization, retries) is unchanged.

Only the simulator and the test harness use these; the Lambda functions never import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import botocore
from botocore.context import get_context
from botocore.useragent import UserAgentString


def _hashable(value: Any) -> Any:
    """A set as its elements in iteration order: botocore joins the features in that order."""
    return tuple(value) if isinstance(value, set) else value


@contextlib.contextmanager
def user_agents_once() -> Iterator[None]:
    """While inside, ``UserAgentString.to_string`` answers from a cache keyed by everything it reads."""
    build: Callable[[UserAgentString], str] = UserAgentString.to_string
    built: dict[Any, str] = {}

    def to_string(self: UserAgentString) -> str:
        context = get_context()
        try:
            key = (
                tuple((name, _hashable(value)) for name, value in sorted(vars(self).items())),
                None if context is None else tuple(context.features),
            )
            found = built.get(key)
        except TypeError:  # a value that cannot be a key: build it as botocore does
            return build(self)
        if found is None:
            found = built[key] = build(self)
        return found

    with mock.patch.object(UserAgentString, "to_string", to_string):
        yield


def _unsigned(**_: Any) -> Any:
    return botocore.UNSIGNED


def unsigned(session_events: Any) -> None:
    """The requests of the clients made from this session (after this call) are not signed."""
    session_events.register("choose-signer", _unsigned)
