"""botocore's retry backoff on the simulator's virtual clock.

botocore sleeps between retries in ``botocore.endpoint`` (``time.sleep(delay)`` after the
``needs-retry`` handler chose the delay). Inside ``virtual_backoff`` that module's ``time`` is a shim
whose ``sleep`` hands the delay to the simulation (which moves its clock on) instead of blocking, and
the jitter botocore draws from the ``random`` module is seeded, so a run is reproducible. Everything
else about retrying (which errors, how many attempts, the retry quota) is botocore's own code.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.endpoint


class _VirtualTime:
    def __init__(self, advance: Callable[[float], None]) -> None:
        self._advance = advance

    def sleep(self, seconds: float) -> None:
        self._advance(float(seconds))

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextmanager
def virtual_backoff(advance: Callable[[float], None], *, seed: int | str = 0) -> Iterator[None]:
    """While inside, botocore's retry sleeps call ``advance(seconds)`` and its jitter is seeded."""
    endpoint: Any = botocore.endpoint  # its ``time`` import is not part of botocore's typed surface
    saved_time = endpoint.time
    saved_random = random.getstate()
    endpoint.time = _VirtualTime(advance)
    random.seed(f"botocore-backoff-{seed}")
    try:
        yield
    finally:
        endpoint.time = saved_time
        random.setstate(saved_random)
