"""The training-job lifecycle as a table: each phase, how long it lasts, what its hosts publish, whether
it is billed, and what comes next.

SageMaker's own sequence (``SecondaryStatus``): Starting -> Downloading -> Training -> Uploading ->
Completed; a Spot interruption (``Interrupted``) waits for capacity and starts again; ``StopTrainingJob``
makes a job Stopping and then Stopped; limits (``MaxRuntimeInSeconds``, ``MaxWaitTimeInSeconds``) and
failures end it from any running phase. Billable time is Downloading + Training + Uploading (+ the
Stopping minute when the job was stopped while running); Starting and Spot waits are not billed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from smgov.simulation.scenario import Script


class Publication(Enum):
    """What a phase's GPU hosts publish each minute."""

    NOTHING = "nothing"  # no datapoints (instances not up, or gone)
    ZERO = "zero"  # 0% (instances up, the GPUs idle: downloading, uploading)
    SCRIPT = "script"  # the script's utilization (training, its phases, a stall)


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


PHASES: dict[str, Phase] = {
    phase.name: phase
    for phase in (
        Phase(
            "starting", "Starting", lambda s: s.starting_minutes, Publication.NOTHING, billed=False,
            running=False, next="downloading", message="Launching requested ML instances",
        ),
        Phase(
            "downloading", "Downloading", lambda s: s.downloading_minutes, Publication.ZERO, billed=True,
            running=True, next="training",
        ),
        Phase("training", "Training", None, Publication.SCRIPT, billed=True, running=True, next="uploading"),
        Phase(
            "uploading", "Uploading", lambda s: s.uploading_minutes, Publication.ZERO, billed=True, running=True,
            next=None, ends_as=("Completed", "Completed"),
        ),
        Phase(
            "interrupted", "Interrupted", lambda s: s.spot_capacity_wait_minutes, Publication.NOTHING,
            billed=False, running=False, next="starting",
            message="Training job interrupted: Spot capacity reclaimed",
        ),
        # Billed only when the job was running when stopped (``JobRun.stopping_billable``).
        Phase(
            "stopping", "Stopping", lambda s: 1, Publication.NOTHING, billed=True, running=False, next=None,
            ends_as=("Stopped", "Stopped"),
        ),
        Phase("ended", None, None, Publication.NOTHING, billed=False, running=False, next=None),
    )
}  # fmt: skip

BILLABLE = frozenset(name for name, phase in PHASES.items() if phase.billed)
RUNNING = frozenset(name for name, phase in PHASES.items() if phase.running)
