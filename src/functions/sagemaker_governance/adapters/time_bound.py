"""The time bound on a policy's patterns (``TimeBound``, ``service/ports.py``): work interrupted by ``SIGALRM``.

Python's ``re`` has no timeout, and the backtracking check (``domain/backtracking.py``) misses some slow patterns:
``[a-z]*[a-z]*[a-z]*\\d*\\d*\\d*#`` passes as a tag pattern and takes over 10 s on a 256-character value. CPython runs a
signal's Python handler in the main thread between bytecodes, and its regular-expression engine checks for signals
as it matches, so a handler that raises ends a match in progress and the exception unwinds like any other. A budget
arms the process's real-time interval timer (``ITIMER_REAL``, which delivers ``SIGALRM``) for what is left of it,
with a handler that raises ``PatternTimeout``, and disarms it when the work ends.

Signals belong to the process: only the main thread may set a handler (Lambda's Python runtime calls the function's
handler there), and there is one ``ITIMER_REAL``. So off the main thread, or while another real-time timer is pending
(a caller's own ``signal.alarm``, a test runner's timeout), the work runs unbounded, as it did before this bound: that
timer is not ours to take over, and there is nothing of ours to restore. A platform without ``SIGALRM`` (Windows)
runs it unbounded too. The ``SIGALRM`` handler found is always put back.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from sagemaker_governance.domain.errors import PatternTimeout

T = TypeVar("T")


def interruptible() -> bool:
    """Whether work run here can be interrupted: the main thread, with ``SIGALRM`` and no real-time timer pending."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    )


class InterruptBudget:
    """A budget of ``seconds`` (``Bounded``), spent by the work run in it: each run is interrupted when what is left
    runs out; work run once it is spent raises at once. ``timer``: the monotonic clock that measures what a run spent
    (a test's own)."""

    def __init__(self, seconds: float, timer: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._timer = timer
        self._spent = 0.0

    def __call__(self, work: Callable[[], T]) -> T:
        left = self.seconds - self._spent
        if left <= 0:
            raise PatternTimeout(self.seconds)
        if not interruptible():
            return work()
        started = self._timer()
        try:
            return _interrupted(work, after=left, seconds=self.seconds)
        finally:
            self._spent += self._timer() - started


def _interrupted(work: Callable[[], T], *, after: float, seconds: float) -> T:
    running = [True]  # cleared as the work ends: a signal handled after that is late, and raises nothing

    def expire(signum: int, frame: FrameType | None) -> None:
        if running[0]:
            raise PatternTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    # ``signal.signal`` returns None for a handler not set from Python: the default's, then
    handler: Any = signal.SIG_DFL if previous is None else previous
    try:
        # one shot (no interval): the handler runs at most once per run. A fraction of a microsecond is rounded up
        # (CPython's setitimer), never down to zero, which would disarm the timer and leave the work unbounded
        signal.setitimer(signal.ITIMER_REAL, after)
        return work()
    finally:
        # Written out here, with no call before its ``try``: CPython runs a pending signal's handler at its next check
        # (a call, a function's entry, a loop), so the timer firing as the work ends is handled in this ``try`` at the
        # latest, never between the work and it (where a helper function's entry was: the handler escaped it and
        # stayed installed). Once ``running`` is cleared the handler raises nothing; before, its one raise is caught
        # and the disarm tried again. The work's own outcome stands: its result, or its exception.
        while True:
            try:
                running[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, handler)
                break
            except PatternTimeout:
                continue
