"""Spot or On-Demand for the rest of a job: the cost and time to finish either way, from what it lived.

Pure. At an interruption the job's ``SecondaryStatusTransitions`` (SageMaker's own timestamps) and the
write times of the objects under its ``CheckpointConfig.S3Uri`` (``ListObjectsV2``'s ``LastModified``)
say, for every stint it trained:

- how long it trained, and how much of that was *kept*: the time from the stint's start to the last
  checkpoint written during it (a restart resumes from there; the rest is lost work);
- how often it was interrupted per running hour (Downloading + Training, the billed phases);
- how long each restart cost: the billed download before training, and the unbilled capacity wait
  (``Interrupted`` and the ``Starting`` and ``Pending`` after it: ``Pending`` is "waiting for compute
  capacity", the ``SecondaryStatus`` of ``DescribeTrainingJob`` in botocore's model).

From these, the *Spot efficiency* is the share of a running hour that ends up kept:
``efficiency = 1 - rate x (lost work per interruption + download per restart)``. The remaining work is
bounded by ``MaxRuntimeInSeconds`` minus the kept work (a job's own limit on its training time; an
upper bound, the same on both sides of the cost comparison). Then, for the remaining work ``R``:

- Spot: ``R / efficiency`` running hours at ``price_factor`` x the On-Demand price, plus a capacity
  wait per expected interruption;
- On-Demand: ``R`` + one download, at the On-Demand price, after one start.

The prices cancel out of the comparison (the same instances on both sides): a missing price only leaves
the dollar figures out of the evidence.

The team's deadline slack (``spot.max_delay_hours``) is judged the same way as the max-wait check below:
on the least work left, none. The job moves when the delay it has incurred so far (elapsed time not
turned into kept work) plus the restart under way (a capacity wait and a download) is already past the
slack; a job with more work left is judged again at its next interruption, with its delay by then. The
upper bound would make the same history pass or fail by how generous ``MaxRuntimeInSeconds`` is.

``MaxWaitTimeInSeconds`` is an absolute limit, where the upper bound of the remaining work does not cancel
out: a job whose ``MaxWaitTimeInSeconds`` equals its ``MaxRuntimeInSeconds`` (valid: it "must be equal to
or greater than" it, botocore's ``StoppingCondition``; the SDK's default) would always seem to run out after
any interruption. So the max-wait check takes the *least* work left that the data allow: none (the job's
total work is unknown; ``MaxRuntimeInSeconds`` bounds it only from above). Spot runs out of wait time only
when even that cannot be done in time at the job's rates: the capacity wait now under way ends past
``MaxWaitTimeInSeconds``. Otherwise the existing ``MaxWaitTimeExceeded`` fallback resumes the job if it
does run out. The evidence says which bound was used and how much work Spot can still finish in time.

``fleet_rate`` (the instance type's interruption rate across the fleet, when known) is blended into the
job's own, which says little after one or two interruptions: the fleet weighs as its real exposure (the
running hours its pooled rate rests on), at most ``FLEET_MAX_HOURS``, so a rate from a few minutes of the
others' running cannot swamp the job's own hours, nor a large fleet a job's own long record. Whether Spot
makes progress at all (``spot.clone.no-progress``: nearly nothing kept) is decided from the job's own
numbers once they rest on ``MIN_RUNNING_HOURS`` of running: a calm fleet never keeps a job that keeps
nothing on Spot, and a stormy one that would leave it almost nothing makes On-Demand the cheaper, not a
job without progress. Before that (one interruption a few minutes into its first run: everything it ran
was lost, which says nothing of its checkpoints yet) the blended numbers decide, as they do the rest, when
the fleet has a rated rate of the type; without one (the ledger unreadable or not read, or no job of the
type ran an hour in the window) the job's few minutes alone would decide, so the economics are unknown
(``economics_cause: too-little-running``) and the count rule decides.

Missing or conflicting data (no checkpoint listing, no transition timestamps, checkpoint times outside
the job's life, no interruption on record) gives an ``Unknown`` with the reason: the caller then applies
the count rule and says so. So does a listing with a Training stint that shows no write before a later
stint that shows writes, unless the stint was shorter than a checkpoint interval that consecutive writes
prove (``economics_cause: checkpoint-history-unknown``): ``ListObjectsV2`` gives the ``LastModified`` of
the keys that survive, so a job that overwrites one key (``checkpoint.pt``, ``last.ckpt``) or rotates its
checkpoints shows its newest writes only, and taking its earlier stints as all lost would move a healthy
job On-Demand. Two surviving writes need not be consecutive (a rotation that keeps the best checkpoint
beside the newest), so the interval is proven only by three writes in one stint at two gaps that agree
(``CADENCE_AGREEMENT``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Final

from sagemaker_governance.domain.job import StatusTransition, TrainingJob

RUNNING: Final = frozenset({"Downloading", "Training"})  # billed phases (SageMaker bills from Downloading)
# unbilled: instances not yet (or no longer) there; Pending: "waiting for compute capacity" (botocore's model)
WAITING: Final = frozenset({"Starting", "Pending", "Interrupted"})
MIN_EFFICIENCY: Final = 0.05  # below this, Spot is not expected to finish at all
# The least work a running job may have left, for the absolute MaxWaitTimeInSeconds check (hours): nothing
# says more (MaxRuntimeInSeconds is an upper bound), so a job is said to run out of Spot wait time only when
# it could not even get back to work in time.
WORK_LEFT_AT_LEAST: Final = 0.0
# The most running hours the fleet's rate weighs as, blended into the job's own (when it is known): a job's own
# record outweighs the fleet's once it has run longer than this.
FLEET_MAX_HOURS: Final = 12.0
# Below this many running hours a job's own interruptions say too little: a fleet job's are not pooled, and
# the deciding job's own numbers alone do not say it makes no progress.
MIN_RUNNING_HOURS: Final = 1.0
# Two gaps between three writes in one stint agree on a checkpoint interval when the shorter is at least this
# share of the longer: a job saving every N steps writes at nearly even times (its step time varies a little),
# while a rotation that keeps a best checkpoint beside the newest leaves one gap many intervals long.
CADENCE_AGREEMENT: Final = 0.75
# Objects written less than this apart are one checkpoint save (a save is several files: weights, optimizer,
# trainer state, or one shard per rank, each with its own LastModified), for the interval between saves.
SAVE_BURST: Final = timedelta(minutes=2)


def _hours(delta: timedelta) -> float:
    return delta.total_seconds() / 3600


@dataclass(frozen=True)
class Stint:
    """One stretch in one secondary status."""

    status: str
    start: datetime
    end: datetime


# Why the economics are unavailable, when a record should say it in a key (``economics_cause``), not prose only.
# Stints without a checkpoint write before one with writes: the location keeps no history of its writes.
CHECKPOINT_HISTORY_UNKNOWN: Final = "checkpoint-history-unknown"
# Under MIN_RUNNING_HOURS of running and no rated fleet rate of its type to weigh with the job's own.
TOO_LITTLE_RUNNING: Final = "too-little-running"


@dataclass(frozen=True)
class Unknown:
    """The economics cannot be computed: the count rule decides; ``reason`` says why (``cause``: a key for it)."""

    reason: str
    cause: str | None = None

    def evidence(self) -> dict[str, Any]:
        out = {"economics": "unavailable", "economics_note": self.reason}
        if self.cause is not None:
            out["economics_cause"] = self.cause
        return out


@dataclass(frozen=True)
class SpotHistory:
    """What the job lived on Spot so far (hours), from its transitions and its checkpoint writes."""

    elapsed_hours: float  # since creation
    running_hours: float  # Downloading + Training
    training_hours: float
    kept_hours: float  # training up to the last checkpoint of each stint
    interruptions: int
    download_hours_per_start: float
    wait_hours_per_interruption: float  # Interrupted + the Starting/Pending after it (capacity waits)
    first_start_hours: float  # the first Starting: what an On-Demand clone waits before it runs

    @property
    def lost_hours(self) -> float:
        return max(0.0, self.training_hours - self.kept_hours)

    @property
    def lost_per_interruption(self) -> float:
        return self.lost_hours / self.interruptions if self.interruptions else 0.0


@dataclass(frozen=True)
class SpotEstimate:
    """Spot against On-Demand for the rest of one job (hours; USD when the price is known)."""

    history: SpotHistory
    rate_per_hour: float  # interruptions per running hour used (the job's, blended with the fleet's)
    job_rate_per_hour: float
    fleet_rate_per_hour: float | None
    fleet_weight_hours: float  # the running hours the fleet's rate weighs as (0: none)
    efficiency: float  # at the blended rate: the time and cost to finish on Spot
    job_efficiency: float  # at the job's own rate: whether it makes progress on Spot at all
    remaining_work_hours: float
    spot_running_hours: float | None  # None: Spot is not expected to finish
    spot_hours_to_finish: float | None
    on_demand_hours_to_finish: float
    # hours of the whole cluster at the On-Demand price (x the cluster's price per hour = USD; x the instance
    # count = instance-hours): *_cost_cluster_hours in the evidence
    spot_cost_units: float | None
    on_demand_cost_units: float
    price_factor: float
    cluster_price_per_hour: float | None  # On-Demand USD per hour of the whole cluster (None: unpriced)
    max_wait_hours: float | None

    @property
    def max_wait_work_hours(self) -> float | None:
        """The most work Spot can still finish before ``MaxWaitTimeInSeconds``, at the job's rates (the
        capacity wait under way, then ``work / efficiency`` running hours and a wait per expected
        interruption); negative: not even none. None: no ``MaxWaitTimeInSeconds``, or Spot does not finish."""
        if self.max_wait_hours is None or self.spot_running_hours is None:
            return None
        wait = self.history.wait_hours_per_interruption
        budget = self.max_wait_hours - self.history.elapsed_hours - wait
        return self.efficiency * budget / (1 + self.rate_per_hour * wait)

    @property
    def spot_finishes(self) -> bool:
        """Spot is expected to finish at the blended rate (efficiency at least ``MIN_EFFICIENCY``)."""
        return self.spot_running_hours is not None

    @property
    def progress_efficiency(self) -> float:
        """The efficiency that says whether the job makes progress on Spot at all: its own, once it rests on
        ``MIN_RUNNING_HOURS`` of running (the fleet's rate never hides a job that keeps nothing), else the
        blended one (the same without a fleet)."""
        own = self.history.running_hours >= MIN_RUNNING_HOURS or self.fleet_weight_hours == 0
        return self.job_efficiency if own else self.efficiency

    @property
    def no_progress(self) -> bool:
        """The job keeps (almost) nothing of its running time on Spot (``progress_efficiency``)."""
        return self.progress_efficiency < MIN_EFFICIENCY

    @property
    def on_demand_cheaper(self) -> bool:
        return self.spot_cost_units is None or self.on_demand_cost_units < self.spot_cost_units

    @property
    def delay_so_far_hours(self) -> float:
        """How much later than an uninterrupted run the job is: elapsed time not turned into kept work."""
        return max(0.0, self.history.elapsed_hours - self.history.first_start_hours - self.history.kept_hours)

    @property
    def least_delay_on_spot_hours(self) -> float:
        """The least delay past an uninterrupted run the job finishes with on Spot: the delay so far, then
        the restart under way (a capacity wait and a download) with the least work left
        (``WORK_LEFT_AT_LEAST``: none, as the max-wait check; ``MaxRuntimeInSeconds`` bounds the work only
        from above)."""
        h = self.history
        return self.delay_so_far_hours + h.wait_hours_per_interruption + h.download_hours_per_start

    @property
    def beyond_max_wait(self) -> bool:
        """Spot is expected to end at ``MaxWaitTimeExceeded`` before the work is done, even with the least
        work left (``WORK_LEFT_AT_LEAST``), not the upper bound the cost comparison uses."""
        if self.max_wait_hours is None or self.spot_running_hours is None:
            return False  # no limit, or Spot is not expected to finish at all (the cost comparison says so)
        within = self.max_wait_work_hours
        return within is not None and within < WORK_LEFT_AT_LEAST

    def slack_spent(self, max_delay_hours: float | None) -> bool:
        """Staying on Spot would finish more than ``max_delay_hours`` later than an uninterrupted run even
        with the least work left (``least_delay_on_spot_hours``). The upper bound of the work left
        (``MaxRuntimeInSeconds`` minus the kept work) cancels out of the cost comparison but not here: with
        it, the same history was within a 12 h slack at a MaxRuntime of 24 h and past it at 120 h. A job
        with more work left is judged again at its next interruption, on the delay by then."""
        if max_delay_hours is None:
            return False
        return self.least_delay_on_spot_hours > max_delay_hours

    def _usd(self, units: float | None) -> float | None:
        if units is None or self.cluster_price_per_hour is None:
            return None
        return round(units * self.cluster_price_per_hour, 2)

    def evidence(self) -> dict[str, Any]:
        h = self.history

        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 3)

        out: dict[str, Any] = {
            "economics": "computed",
            "elapsed_hours": r(h.elapsed_hours),
            "running_hours": r(h.running_hours),
            "kept_work_hours": r(h.kept_hours),
            "lost_work_hours": r(h.lost_hours),
            "lost_work_per_interruption_hours": r(h.lost_per_interruption),
            "capacity_wait_per_interruption_hours": r(h.wait_hours_per_interruption),
            "interruption_rate_per_hour": r(self.rate_per_hour),
            "job_interruption_rate_per_hour": r(self.job_rate_per_hour),
            "spot_efficiency": r(self.efficiency),
            "job_spot_efficiency": r(self.job_efficiency),
            "remaining_work_hours": r(self.remaining_work_hours),
            "spot_hours_to_finish": r(self.spot_hours_to_finish),
            "on_demand_hours_to_finish": r(self.on_demand_hours_to_finish),
            "delay_so_far_hours": r(self.delay_so_far_hours),
            "least_delay_on_spot_hours": r(self.least_delay_on_spot_hours),
            "deadline_work_bound": "lower",  # the deadline check's work left: WORK_LEFT_AT_LEAST
            "spot_price_factor": self.price_factor,
            "spot_cost_cluster_hours": r(self.spot_cost_units),
            "on_demand_cost_cluster_hours": r(self.on_demand_cost_units),
        }
        if self.fleet_rate_per_hour is not None:
            out["fleet_interruption_rate_per_hour"] = r(self.fleet_rate_per_hour)
            out["fleet_weight_hours"] = r(self.fleet_weight_hours)
        if self.cluster_price_per_hour is not None:
            out["spot_cost_usd"] = self._usd(self.spot_cost_units)
            out["on_demand_cost_usd"] = self._usd(self.on_demand_cost_units)
        if self.max_wait_hours is not None:
            out["max_wait_hours"] = r(self.max_wait_hours)
            out["max_wait_work_bound"] = "lower"  # remaining_work_hours is the upper bound
            out["max_wait_work_left_hours"] = WORK_LEFT_AT_LEAST
            within = self.max_wait_work_hours
            out["max_wait_finishable_work_hours"] = None if within is None else r(max(0.0, within))
        return out


def stints(transitions: Sequence[StatusTransition], now: datetime) -> list[Stint] | Unknown:
    """The job's secondary-status stretches, each with a start and an end (the open one ends ``now``)."""
    out: list[Stint] = []
    for index, transition in enumerate(transitions):
        if transition.start_time is None:
            return Unknown(f"the {transition.status} transition has no StartTime")
        end = transition.end_time
        if end is None:
            if index != len(transitions) - 1:
                return Unknown(f"the {transition.status} transition has no EndTime and is not the last")
            end = max(now, transition.start_time)
        if end < transition.start_time or (out and transition.start_time < out[-1].start):
            return Unknown("the status transitions' timestamps are out of order")
        out.append(Stint(transition.status, transition.start_time, end))
    return out


def _first_wait(parts: Sequence[Stint]) -> float:
    """The hours before the job first ran: its Starting, and Pending when it waited for capacity there."""
    hours = 0.0
    for stint in parts:
        if stint.status not in WAITING:
            break
        hours += _hours(stint.end - stint.start)
    return hours


def _saves(stint_writes: Sequence[datetime]) -> list[datetime]:
    """The end of each save among one stint's writes (sorted): writes less than ``SAVE_BURST`` apart are one."""
    out: list[datetime] = []
    for write in stint_writes:
        if out and write - out[-1] < SAVE_BURST:
            out[-1] = write
        else:
            out.append(write)
    return out


def _cadence(seen: Sequence[Sequence[datetime]]) -> timedelta | None:
    """The checkpoint interval that consecutive writes prove, or None: the shortest over the stints' runs of
    three saves (``_saves``) whose two gaps agree (within ``CADENCE_AGREEMENT``), taken as the shorter gap.

    One gap between two surviving writes proves nothing: the Hugging Face Trainer's ``save_total_limit``
    with ``load_best_model_at_end`` (or Lightning's ``save_top_k`` on a metric) keeps the best checkpoint
    beside the newest, hours apart, and an interval read from them would make healthy stints look too short
    for a checkpoint. The shortest proven interval is taken: a shorter one only leaves more stints unknown
    (the count rule decides), a longer one would count more of them as lost."""
    agreed = [
        min(first, second)
        for stint_writes in seen
        for first, second in pairwise(b - a for a, b in pairwise(_saves(stint_writes)))
        if min(first, second) >= CADENCE_AGREEMENT * max(first, second)
    ]
    return min(agreed, default=None)


def _writes_unseen(parts: Sequence[Stint], writes: Sequence[datetime]) -> int:
    """The Training stints without a checkpoint write, before the last stint with one, that the listing
    cannot say lost their work.

    ``ListObjectsV2`` gives one ``LastModified`` per surviving key: a job saving to one key it overwrites
    (``checkpoint.pt``, Lightning's ``last.ckpt``) or rotating its checkpoints (the Hugging Face Trainer's
    ``save_total_limit``) shows its newest writes only, and its earlier stints none. Such a stint is lost
    work only when it was too short for a checkpoint: shorter than the interval that consecutive writes
    prove (``_cadence``; when none is proven, no such stint is known to be lost). A stint without a write
    after the last one with writes is lost work (a history that keeps every write shows the same)."""
    trained = [s for s in parts if s.status == "Training"]
    seen = [[w for w in writes if s.start <= w <= s.end] for s in trained]
    if not any(seen):
        return 0
    last = max(i for i, stint_writes in enumerate(seen) if stint_writes)
    cadence = _cadence(seen)
    return sum(
        1
        for stint, stint_writes in zip(trained[:last], seen[:last], strict=True)
        if not stint_writes and (cadence is None or stint.end - stint.start >= cadence)
    )


def _writes_unreadable(
    created: datetime, parts: Sequence[Stint], writes: Sequence[datetime], now: datetime
) -> Unknown | None:
    """Why the checkpoint writes (sorted) do not say the work kept in each stint, or None."""
    if writes and (writes[0] < created - timedelta(minutes=5) or writes[-1] > now + timedelta(minutes=5)):
        return Unknown("checkpoint write times fall outside the job's life (another job writes there?)")
    unseen = _writes_unseen(parts, writes)
    if unseen:
        return Unknown(
            f"{unseen} Training stint(s), each longer than the checkpoint interval consecutive saves prove (or no "
            "three saves in one stint prove one), have no checkpoint write before a later one that has writes: the "
            "location keeps no history of its writes (one key overwritten, such as checkpoint.pt or last.ckpt, or "
            "rotated checkpoints), so the work kept in them is unknown",
            CHECKPOINT_HISTORY_UNKNOWN,
        )
    return None


def history_of(job: TrainingJob, checkpoint_times: Iterable[datetime], now: datetime) -> SpotHistory | Unknown:
    """The job's Spot history, or why it cannot be read."""
    if job.creation_time is None:
        return Unknown("the job's CreationTime is unknown")
    parts = stints(job.transitions, now)
    if isinstance(parts, Unknown):
        return parts
    if not parts:
        return Unknown("the job has no status transitions")
    writes = sorted(checkpoint_times)
    unreadable = _writes_unreadable(job.creation_time, parts, writes, now)
    if unreadable is not None:
        return unreadable
    training = kept = downloading = 0.0
    downloads = 0
    interruptions = waited = 0
    waits = pending = 0.0
    after_interruption = False
    for stint in parts:
        length = _hours(stint.end - stint.start)
        if stint.status == "Training":
            training += length
            last = [w for w in writes if stint.start <= w <= stint.end]
            kept += _hours(last[-1] - stint.start) if last else 0.0
        elif stint.status == "Downloading":
            downloading += length
            downloads += 1
        if stint.status == "Interrupted":
            interruptions += 1
            after_interruption, pending = True, 0.0
        if after_interruption and stint.status in WAITING:
            pending += length
        elif after_interruption and stint.status in RUNNING:  # the wait ended: capacity came back
            waits, waited, after_interruption = waits + pending, waited + 1, False
    if interruptions == 0:
        return Unknown("no Interrupted transition on record")
    first = parts[0]
    first_start = _hours(first.end - first.start) if first.status == "Starting" else 0.0
    return SpotHistory(
        elapsed_hours=max(0.0, _hours(now - job.creation_time)),
        running_hours=training + downloading,
        training_hours=training,
        kept_hours=min(kept, training),
        interruptions=interruptions,
        download_hours_per_start=downloading / downloads if downloads else 0.0,
        # completed waits; before any, the first Starting and Pending (a Spot job waits there for capacity too)
        wait_hours_per_interruption=waits / waited if waited else _first_wait(parts),
        first_start_hours=first_start,
    )


def estimate(
    job: TrainingJob,
    checkpoint_times: Iterable[datetime] | None,
    now: datetime,
    *,
    price_factor: float,
    cluster_price_per_hour: float | None = None,
    fleet_rate_per_hour: float | None = None,
    fleet_exposure_hours: float = 0.0,
) -> SpotEstimate | Unknown:
    """Spot against On-Demand for the rest of ``job`` (``checkpoint_times``: None when not listed);
    ``fleet_rate_per_hour``: the type's pooled rate in the fleet, over ``fleet_exposure_hours`` of running."""
    if checkpoint_times is None:
        return Unknown("the checkpoint location was not listed: work kept and lost are unknown")
    max_runtime = job.stopping.max_runtime_seconds
    if not max_runtime:
        return Unknown("no MaxRuntimeInSeconds: the remaining work is unbounded")
    history = history_of(job, checkpoint_times, now)
    if isinstance(history, Unknown):
        return history
    if history.running_hours <= 0:
        return Unknown("no running time on record")
    job_rate = history.interruptions / history.running_hours
    rate, weight = job_rate, 0.0
    if fleet_rate_per_hour is not None:
        weight = min(max(fleet_exposure_hours, 0.0), FLEET_MAX_HOURS)
        rate = (history.interruptions + weight * fleet_rate_per_hour) / (history.running_hours + weight)
    if history.running_hours < MIN_RUNNING_HOURS and weight <= 0:
        return Unknown(
            f"the job has run {history.running_hours:.2f} h, under {MIN_RUNNING_HOURS:g} h, and there is no rated "
            "interruption rate of its type in the fleet to weigh with its own (the ledger unreadable or not "
            "read, or no job of the type ran an hour in the window): its own interruptions say too little",
            TOO_LITTLE_RUNNING,
        )
    restart = history.lost_per_interruption + history.download_hours_per_start
    efficiency = max(0.0, 1.0 - rate * restart)
    job_efficiency = max(0.0, 1.0 - job_rate * restart)
    remaining = max(0.0, max_runtime / 3600 - history.kept_hours)
    download = history.download_hours_per_start
    on_demand_running = remaining + download
    on_demand_time = history.first_start_hours + on_demand_running
    spot_running = spot_time = spot_cost = None
    if efficiency >= MIN_EFFICIENCY:
        spot_running = remaining / efficiency
        expected_interruptions = rate * spot_running
        # the wait now under way (this interruption), then one per expected interruption
        spot_time = spot_running + (1 + expected_interruptions) * history.wait_hours_per_interruption
        spot_cost = spot_running * price_factor
    wait = job.stopping.max_wait_seconds
    return SpotEstimate(
        history=history,
        rate_per_hour=rate,
        job_rate_per_hour=job_rate,
        fleet_rate_per_hour=fleet_rate_per_hour,
        fleet_weight_hours=weight,
        efficiency=efficiency,
        job_efficiency=job_efficiency,
        remaining_work_hours=remaining,
        spot_running_hours=spot_running,
        spot_hours_to_finish=spot_time,
        on_demand_hours_to_finish=on_demand_time,
        spot_cost_units=spot_cost,
        on_demand_cost_units=on_demand_running,
        price_factor=price_factor,
        cluster_price_per_hour=cluster_price_per_hour,
        max_wait_hours=wait / 3600 if wait else None,
    )


def cluster_price(job: TrainingJob, prices: dict[str, float] | None) -> float | None:
    """On-Demand USD per hour of the job's whole cluster (None when a type has no price)."""
    if not prices:
        return None
    total = 0.0
    for group in job.instance_groups:
        price = prices.get(group.instance_type)
        if price is None:
            return None
        total += price * group.instance_count
    return total
