"""Cold start: the garbage collector is paused while a handler module imports what it runs.

Importing creates tens of thousands of long-lived objects (modules, classes, pydantic validators) and
almost no garbage, yet each allocation threshold crossed starts a collection that walks them all again.
The first handler module imported in a process imports this one first (its first import), which pauses
the collector; every handler module calls ``imports_done()`` after its imports, which moves what they
created to the permanent generation (``gc.freeze``) and resumes the collector as it was. Measured in
BENCHMARKS.md (cold start)."""

from __future__ import annotations

import gc

_resume = gc.isenabled()  # a process that had paused the collector itself keeps it paused
gc.disable()


def imports_done() -> None:
    """After a handler module's imports: freeze what they created, resume collecting."""
    gc.freeze()
    if _resume:
        gc.enable()
