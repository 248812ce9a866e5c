"""The training-job lifecycle as a table: each phase, how long it lasts, what its hosts publish, whether
it is billed, and what comes next.

SageMaker's own sequence (``SecondaryStatus``): Starting -> [Pending] -> Downloading -> Training ->
Uploading -> Completed (Pending, "waiting for compute capacity or compute resource provision", only for
a script with ``pending_minutes``; the order is the one the API reference lists, ``DescribeTrainingJob``);
a Spot interruption (``Interrupted``, for a minute) waits for capacity in ``Starting`` and starts again
(AWS's Managed Spot lifecycle: Interrupted -> Starting -> Downloading -> Training); ``StopTrainingJob`` makes a job
Stopping and then Stopped (unbilled from Starting or Pending: no instances up yet); limits
(``MaxRuntimeInSeconds``, ``MaxWaitTimeInSeconds``) and failures end it from any running phase. Billable
time is Downloading + Training + Uploading (+ the Stopping minute when the job was stopped while
running); Starting, Pending, Spot waits and the Restarting wait of a ``RetryStrategy`` retry are not
billed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from smgov.simulation.scenario import Script

RESTART_MINUTES = 5  # a RetryStrategy retry: the wait before the job starts again (not documented by AWS)
INTERRUPTED_MINUTES = 1  # how long SecondaryStatus stays Interrupted before the restart's Starting (undocumented)
# Starting's StatusMessage while EC2 has no capacity (botocore's DescribeTrainingJob documentation of
# SecondaryStatusTransitions lists it among Starting's messages).
CAPACITY_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"


class Publication(Enum):
    """What a phase's hosts publish each minute (``telemetry.py``)."""

    NOTHING = "nothing"  # no datapoints (instances not up, or gone)
    PHASE = "phase"  # the lifecycle phase's own levels (downloading, uploading: the GPUs idle)
    SCRIPT = "script"  # the script's levels (training, its phases, a stall)


@dataclass(frozen=True)
class Phase:
    name: str
    secondary: str | None  # SageMaker's SecondaryStatus on entering it (None: not a SageMaker phase)
    duration: Callable[[Script], int] | None  # minutes (None: until the work or a limit ends it)
    publishes: Publication
    billed: bool
    running: bool  # instances up and working: Spot can reclaim them, a stop is billed
    next: str | None  # the phase after ``duration`` (None: the job ends)
    ends_as: tuple[str, str] | None = None  # (status, secondary) when the job ends after this phase
    message: str | None = None  # SageMaker's StatusMessage on entering it
    skipped: Callable[[Script], bool] | None = None  # the job passes over it (its script has none of it)


PHASES: dict[str, Phase] = {
    phase.name: phase
    for phase in (
        Phase(
            "starting", "Starting", lambda s: s.starting_minutes, Publication.NOTHING, billed=False,
            running=False, next="pending", message="Launching requested ML instances",
        ),
        # Waiting for compute capacity: only a script with ``pending_minutes`` has it (each time it starts).
        Phase(
            "pending", "Pending", lambda s: s.pending_minutes, Publication.NOTHING, billed=False, running=False,
            next="downloading", skipped=lambda s: s.pending_minutes == 0,
        ),
        Phase(
            "downloading", "Downloading", lambda s: s.downloading_minutes, Publication.PHASE, billed=True,
            running=True, next="training",
        ),
        Phase("training", "Training", None, Publication.SCRIPT, billed=True, running=True, next="uploading"),
        Phase(
            "uploading", "Uploading", lambda s: s.uploading_minutes, Publication.PHASE, billed=True, running=True,
            next=None, ends_as=("Completed", "Completed"),
        ),
        # SageMaker's RetryStrategy: an InternalServerError restarts the job inside itself (unbilled wait).
        Phase(
            "restarting", "Restarting", lambda s: RESTART_MINUTES, Publication.NOTHING, billed=False,
            running=False, next="starting",
        ),
        # A Spot interruption: Interrupted for a minute, then the wait for capacity in Starting (its
        # StatusMessage the one SageMaker writes when EC2 has none), which goes on into the launch itself.
        Phase(
            "interrupted", "Interrupted", lambda s: INTERRUPTED_MINUTES, Publication.NOTHING,
            billed=False, running=False, next="capacity",
            message="Training job interrupted: Spot capacity reclaimed",
        ),
        Phase(
            "capacity", "Starting",
            lambda s: max(0, s.spot_capacity_wait_minutes - INTERRUPTED_MINUTES) + s.starting_minutes,
            Publication.NOTHING, billed=False, running=False, next="pending", message=CAPACITY_MESSAGE,
        ),
        # Billed only when the job was running when stopped (``JobRun.stopping_billable``).
        Phase(
            "stopping", "Stopping", lambda s: 1, Publication.NOTHING, billed=True, running=False, next=None,
            ends_as=("Stopped", "Stopped"),
        ),
        Phase("ended", None, None, Publication.NOTHING, billed=False, running=False, next=None),
    )
}  # fmt: skip


def following(name: str, script: Script) -> str | None:
    """The phase after ``name`` for this script: its ``next``, passing over the phases the script skips."""
    after = PHASES[name].next
    while after is not None and (skip := PHASES[after].skipped) is not None and skip(script):
        after = PHASES[after].next
    return after


BILLABLE = frozenset(name for name, phase in PHASES.items() if phase.billed)
RUNNING = frozenset(name for name, phase in PHASES.items() if phase.running)
