"""The time bound on a policy's patterns (adapters/time_bound.py): SIGALRM interrupts the work in the main thread,
the SIGALRM handler and the real-time timer are as they were afterwards, and where the bound cannot be set (off the
main thread, another timer pending) the work runs unbounded and nothing of the process's signals is touched.

The interruption is injected (``signal.raise_signal``) wherever a test needs it at a given point; the one test of the
timer itself runs a match that cannot end on any machine (2**64 ways), so its outcome does not depend on speed."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from sagemaker_governance.adapters.time_bound import InterruptBudget, interruptible
from sagemaker_governance.domain.errors import PatternTimeout


def previous_handler(signum: int, frame: FrameType | None) -> None:
    """A handler someone else set before the bound ran."""


@pytest.fixture(autouse=True)
def _signals_as_found() -> Iterator[None]:
    # Given SIGALRM handled by another handler, and no timer pending
    found = signal.signal(signal.SIGALRM, previous_handler)
    signal.setitimer(signal.ITIMER_REAL, 0)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, found if found is not None else signal.SIG_DFL)


def seen_by_the_work() -> dict[str, Any]:
    return {"handler": signal.getsignal(signal.SIGALRM), "timer": signal.getitimer(signal.ITIMER_REAL)[0]}


def test_work_that_ends_in_time_returns_its_result_and_leaves_signals_as_they_were() -> None:
    # When work that ends at once runs in a budget of 5 s
    seen: dict[str, Any] = {}
    result = InterruptBudget(5.0)(lambda: seen.update(seen_by_the_work()) or "done")
    # Then it ran under our handler, with the timer armed for at most the budget
    assert result == "done"
    assert seen["handler"] is not previous_handler and 0 < seen["timer"] <= 5.0
    # And afterwards the previous handler is back and no timer is pending
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_signal_interrupts_the_work_and_the_previous_handler_comes_back() -> None:
    # Given work that the alarm's signal reaches in the middle (injected: the timer's own signal)
    reached: list[str] = []

    def work() -> str:
        reached.append("before")
        signal.raise_signal(signal.SIGALRM)
        reached.append("after")
        return "not interrupted"

    # When it runs in a budget of 5 s
    with pytest.raises(PatternTimeout) as raised:
        InterruptBudget(5.0)(work)
    # Then it is interrupted where the signal came, naming the budget
    assert reached == ["before"] and raised.value.seconds == 5.0
    # And the previous handler is back, no timer pending
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_timer_interrupts_a_regular_expression_mid_match() -> None:
    # Given a match that backtracks 2**64 ways before it fails: it cannot end on any machine
    def endless() -> re.Match[str] | None:
        return re.fullmatch(r"(a+)+$", "a" * 64 + "!")

    # When it runs in a budget of 10 ms, Then the timer's signal ends it
    with pytest.raises(PatternTimeout):
        InterruptBudget(0.01)(endless)
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_budget_is_spent_across_runs_and_a_spent_budget_runs_nothing() -> None:
    # Given a budget of 1 s whose runs take 0.7 s and then 0.3 s (a fake monotonic clock)
    ticks = iter([0.0, 0.7, 10.0, 10.3])
    budget = InterruptBudget(1.0, timer=lambda: next(ticks))
    armed: list[float] = []

    def work() -> None:
        armed.append(signal.getitimer(signal.ITIMER_REAL)[0])

    # When work runs in it three times
    budget(work)
    budget(work)
    with pytest.raises(PatternTimeout):
        budget(work)
    # Then the second run had what the first left (0.3 s), and the third, none: it did not run
    assert len(armed) == 2
    assert armed[0] <= 1.0 and armed[1] <= 0.3 + 1e-6


def test_a_pending_timer_is_left_alone_and_the_work_runs_unbounded() -> None:
    # Given another real-time timer pending (a caller's own alarm), its handler set
    signal.setitimer(signal.ITIMER_REAL, 1000.0)
    assert not interruptible()
    # When work runs in a budget of 10 ms
    seen: dict[str, Any] = {}
    result = InterruptBudget(0.01)(lambda: seen.update(seen_by_the_work()) or "done")
    # Then it ran unbounded: the other handler and timer were in place during the work, and still are
    assert result == "done"
    assert seen["handler"] is previous_handler and seen["timer"] > 900.0
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert signal.getitimer(signal.ITIMER_REAL)[0] > 900.0


def test_off_the_main_thread_the_work_runs_unbounded_and_no_signal_is_touched() -> None:
    # When work runs in a budget of 10 ms in another thread
    seen: dict[str, Any] = {}
    results: list[object] = []

    def run() -> None:
        results.append(InterruptBudget(0.01)(lambda: seen.update(seen_by_the_work()) or "done"))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    # Then it ran to its end with no timer armed and the handler untouched
    assert results == ["done"]
    assert seen["handler"] is previous_handler and seen["timer"] == 0.0
    assert signal.getsignal(signal.SIGALRM) is previous_handler


def test_the_timer_firing_as_the_work_ends_leaves_the_previous_handler_in_place() -> None:
    # Given work that CPython checks for signals nowhere in (no call, no loop: straight-line statements), so that a
    # timer expiring in it is handled at the first check after it ends
    statements = "\n".join(["    n = n + 1"] * 200_000)
    namespace: dict[str, Any] = {}
    exec(f"def work():\n    n = 0\n{statements}\n    return 'done'\n", namespace)
    work = namespace["work"]
    started = time.perf_counter()
    work()
    took = time.perf_counter() - started
    # When it runs in a budget that expires a quarter of the way through it (or after it, on a loaded machine)
    outcome: object
    try:
        outcome = InterruptBudget(took / 4)(work)
    except PatternTimeout as timeout:
        outcome = timeout
    # Then the previous handler is back and no timer is pending, whichever the outcome
    assert signal.getsignal(signal.SIGALRM) is previous_handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert outcome == "done" or isinstance(outcome, PatternTimeout)
