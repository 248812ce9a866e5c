"""One botocore data loader for every session the offline tools make in a process, and the work of making a
session or a client that gives the same answer every time done once.

Every boto3 session gets its own botocore ``Loader``, which parses the service models (JSON; SageMaker's
alone is several megabytes) again on first use, so a test suite or a simulator run that builds a fresh
account for every test or scenario spends much of its time parsing the same files. The models are data
botocore only reads once loaded (its clients of one session share them already), so the offline tools
share one loader per data path across sessions.

Two more things botocore does for every new session and client (a local account makes two sessions and
six clients, and a test suite makes hundreds of accounts) are worked out once per process:

- **handlers that accept keyword arguments**: every handler registered on an event emitter (a session
  registers about 250 built-in ones) is checked with ``inspect.getfullargspec``. Whether a function
  takes ``**kwargs`` is part of its code, so the answer is kept per function (a bound method's is its
  function's); anything else (a partial, a callable object) is inspected as before.
- **event names' aliases**: each emitter (a session's, and the copy each client gets) translates an
  event name through botocore's aliases (``EVENT_ALIASES``) and keeps the translations in a cache of its
  own. The translation depends only on the aliases, so emitters with the same aliases share one cache.

Only the simulator and the test harness call this; the Lambda functions never import it.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import botocore.hooks
import botocore.session
from botocore.loaders import Loader, create_loader

_ALIAS_CACHES: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}


@functools.cache
def _shared_loader(search_path: str | None = None) -> Loader:
    return create_loader(search_path)


@functools.cache
def _code_accepts_kwargs(code: types.CodeType) -> bool:
    return bool(code.co_flags & inspect.CO_VARKEYWORDS)


def _accepts_kwargs(func: Callable[..., Any]) -> Any:
    """``botocore.compat.accepts_kwargs`` (truthy when ``func`` takes ``**kwargs``), kept per code object: what a
    plain function takes is its code's (``inspect.getfullargspec`` reads the same flag). Not per function: boto3
    makes new handler functions for every session, and a cache by function kept each one, and through it its
    session's event emitter, alive for the process (about 2,000 objects per local account). A function with a
    ``__signature__`` of its own is asked as botocore asks."""
    function = getattr(func, "__func__", func) if isinstance(func, types.MethodType) else func
    if isinstance(function, types.FunctionType) and not hasattr(function, "__signature__"):
        return _code_accepts_kwargs(function.__code__)
    return inspect.getfullargspec(func)[2]


def _sharing_alias_caches(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: Any, event_emitter: Any, event_aliases: Any = None) -> None:
        init(self, event_emitter, event_aliases)
        self._alias_name_cache = _ALIAS_CACHES.setdefault(tuple(self._event_aliases.items()), {})

    __init__.shares_alias_caches = True  # type: ignore[attr-defined]
    return __init__


def share_models() -> None:
    """From now on every new botocore session of this process uses the shared loader, and sessions and
    clients are made with the two answers above kept (idempotent)."""
    botocore.session.create_loader = _shared_loader
    botocore.hooks.accepts_kwargs = _accepts_kwargs
    aliaser = botocore.hooks.EventAliaser
    if not getattr(aliaser.__init__, "shares_alias_caches", False):
        aliaser.__init__ = _sharing_alias_caches(aliaser.__init__)  # type: ignore[method-assign]
