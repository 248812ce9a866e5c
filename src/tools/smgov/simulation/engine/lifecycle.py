"""Drives every training job through the phase table (``phases.py``) on the virtual clock.

Each job follows its script: how long each phase lasts, how much training work there is, when it
stalls, fails or is interrupted. Every status change is applied to the SageMaker double and emitted as
a state-change event; what the hosts publish is the phase's publication (``telemetry.py``). The
service's own actions come back through the double: a ``StopTrainingJob`` makes the job Stopping, a
``CreateTrainingJob`` (a clone) is adopted and run from its source's last checkpoint.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.jobs import JobRun, job_from_request, source_of, training_request
from smgov.simulation.engine.phases import BILLABLE, PHASES, RUNNING, Publication
from smgov.simulation.engine.telemetry import Telemetry
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.scenario import JobSpec, Scenario, Script

CREATE = "create:"  # a tick that creates a scenario job


class Lifecycle:
    def __init__(
        self,
        scenario: Scenario,
        specs: list[JobSpec],
        *,
        seed: int,
        clock: VirtualClock,
        fake: FakeSageMaker,
        telemetry: Telemetry,
        emit: Callable[[str], None],
    ) -> None:
        self.scenario = scenario
        self.specs = specs
        self.seed = seed
        self.clock = clock
        self.fake = fake
        self.telemetry = telemetry
        self.emit = emit  # a job's status changed: SageMaker emits its state-change event
        self.on_training: Callable[[JobRun], None] | None = None  # a job entered Training
        self.jobs: dict[str, JobRun] = {}
        self.checkpoints: dict[str, int] = {}  # checkpoint location -> training minutes saved
        # A checkpoint was written: (location, training minutes it holds, virtual minute it was written).
        self.on_checkpoint: Callable[[str, int, int], None] | None = None
        self.active = len(specs)  # jobs not yet created or not yet ended
        self.last_end = 0
        self._ticks: list[tuple[int, int, str, int]] = []  # (minute, seq, job, token)
        self._seq = 0
        self._stops_seen = 0
        self._created_seen = 0
        for spec in specs:
            self._push(spec.start_minute, f"{CREATE}{spec.name}", 0)

    # ---- the clock's questions ---------------------------------------------------------------------

    def next_tick(self) -> int | None:
        return self._ticks[0][0] if self._ticks else None

    def run_ticks(self, minute: int, after_each: Callable[[], None]) -> None:
        """Every job tick due at ``minute``; ``after_each`` runs after each (delivery)."""
        while self._ticks and self._ticks[0][0] == minute:
            _, _, name, token = heapq.heappop(self._ticks)
            self._tick(name, token)
            after_each()

    def horizon(self) -> int:
        """The latest minute worth simulating: the scenario's horizon, else every job's limits with room
        for resumed clones."""
        if self.scenario.horizon_hours is not None:
            return round(self.scenario.horizon_hours * 60)
        latest = 0
        for spec in self.specs:
            wait = spec.max_wait_hours or (spec.max_runtime_hours + 24 if spec.spot else spec.max_runtime_hours)
            latest = max(latest, spec.start_minute + round(wait * 60) + 60)
        return latest * 3 + 24 * 60

    # ---- the service's side effects ----------------------------------------------------------------

    def after_service(self) -> None:
        """Apply what the service asked the SageMaker double for: stops, then new jobs (clones)."""
        while self._stops_seen < len(self.fake.stop_requests):
            name = self.fake.stop_requests[self._stops_seen]
            self._stops_seen += 1
            job = self.jobs.get(name)
            if job is None or job.ended or job.phase == "stopping":
                continue
            if self.fake.jobs[name]["TrainingJobStatus"] != "Stopping":
                continue
            self._accrue(job)
            self._publish(job, None)
            job.stopping_billable = job.phase in RUNNING
            self._enter(job, "stopping")
            job.stopped_by_service_at = self.now
            self.emit(name)
            self._schedule(job, self.now + 1)
        while self._created_seen < len(self.fake.created):
            request = self.fake.created[self._created_seen]
            self._created_seen += 1
            self._adopt_clone(request)

    # ---- jobs ----------------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.clock.now

    def _push(self, minute: int, name: str, token: int) -> None:
        self._seq += 1
        heapq.heappush(self._ticks, (minute, self._seq, name, token))

    def _schedule(self, job: JobRun, minute: int) -> None:
        self._push(max(minute, self.now), job.name, job.token)

    def _create(self, spec: JobSpec) -> None:
        request = training_request(spec)
        job = job_from_request(
            request, spec.script, scenario=self.scenario, seed=self.seed, now=self.now, price_source=spec,
            expect_stop=spec.expect_stop,
        )  # fmt: skip
        job.spec_name = spec.name
        job.metrics = tuple(m.name for m in spec.metric_definitions if m.publishes)
        self.jobs[job.name] = job
        self.fake.launch(request)
        self.emit(job.name)
        self._schedule(job, self.now + job.script.starting_minutes)

    def _adopt_clone(self, request: dict[str, Any]) -> None:
        """The service created a training job: run it, following its source job's script."""
        source = source_of(request, self.jobs)
        spec = next((s for s in self.specs if source is not None and s.name == self.jobs[source].spec_name), None)
        script = self.jobs[source].script.resumed() if source is not None else Script(train_hours=1)
        job = job_from_request(
            request, script, scenario=self.scenario, seed=self.seed, now=self.now, price_source=spec,
            expect_stop=False,
        )  # fmt: skip
        job.source = source
        job.spec_name = spec.name if spec else None
        defined = {d.get("Name") for d in request.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])}
        job.metrics = tuple(m for m in (self.jobs[source].metrics if source else ()) if m in defined)
        self.jobs[job.name] = job
        self.active += 1
        self.emit(job.name)
        self._schedule(job, self.now + job.script.starting_minutes)

    def _transition(self, job: JobRun, status: str, secondary: str, **kwargs: Any) -> None:
        self.fake.transition(job.name, status, secondary, **kwargs)
        self.emit(job.name)

    def _accrue(self, job: JobRun) -> None:
        """Bill and progress the job up to now (at the rates of the phase it has been in)."""
        dt = self.now - job.accrued_at
        if dt > 0:
            if job.phase in BILLABLE and (job.phase != "stopping" or job.stopping_billable):
                job.billable += dt
            if job.phase == "training" and job.stalled_at is None:
                job.progress = min(job.progress + dt, job.script.train_minutes)
                if job.checkpoint_uri:
                    saved = job.progress - job.progress % job.script.checkpoint_every_minutes
                    if job.progress >= job.script.train_minutes:
                        saved = job.progress
                    previous = self.checkpoints.get(job.checkpoint_uri, 0)
                    self.checkpoints[job.checkpoint_uri] = max(previous, saved)
                    if saved > previous:
                        self._saved(job, job.checkpoint_uri, previous, saved)
        job.accrued_at = self.now

    def _saved(self, job: JobRun, uri: str, previous: int, saved: int) -> None:
        """Each checkpoint written since ``previous`` (at its cadence, the last one at completion), at the
        virtual minute the job's progress reached it."""
        if self.on_checkpoint is None:
            return
        every = job.script.checkpoint_every_minutes
        minutes = list(range(previous - previous % every + every, saved + 1, every))
        if not minutes or minutes[-1] != saved:
            minutes.append(saved)
        for minute in minutes:
            self.on_checkpoint(uri, minute, self.now - (job.progress - minute))

    def _publish(self, job: JobRun, percent: float | None) -> None:
        self.telemetry.publish(job, percent, self.now)

    def _enter(self, job: JobRun, phase: str) -> None:
        job.phase = phase
        job.phase_since = self.now
        job.token += 1

    def _begin(self, job: JobRun, name: str) -> None:
        """Enter the phase ``name``: SageMaker reports it, the hosts publish what the phase publishes."""
        phase = PHASES[name]
        self._enter(job, name)
        if phase.publishes is Publication.ZERO:
            self._publish(job, 0.0)
        if name == "training" and job.checkpoint_uri and job.progress == 0:
            job.progress = self.checkpoints.get(job.checkpoint_uri, 0)  # resume from the last checkpoint
        assert phase.secondary is not None
        self._transition(job, "InProgress", phase.secondary, message=phase.message)
        if phase.publishes is Publication.SCRIPT:
            self._training_state(job)
        if name == "training" and self.on_training is not None:
            self.on_training(job)

    def _end(self, job: JobRun, status: str, secondary: str, **kwargs: Any) -> None:
        self._publish(job, None)
        self._enter(job, "ended")
        job.final_status, job.final_secondary, job.ended_at = status, secondary, self.now
        self.active -= 1
        self.last_end = self.now
        record = self.fake.jobs[job.name]  # what DescribeTrainingJob reports for an ended job
        record["TrainingTimeInSeconds"] = record["BillableTimeInSeconds"] = job.billable * 60
        self._transition(job, status, secondary, **kwargs)

    def _tick(self, name: str, token: int) -> None:
        if name.startswith(CREATE):
            spec = next(s for s in self.specs if s.name == name[len(CREATE) :])
            self._create(spec)
            return
        job = self.jobs[name]
        if token != job.token or job.ended:
            return
        self._accrue(job)
        script, now = job.script, self.now
        if job.phase == "stopping":
            self._end(job, "Stopped", "Stopped")
            return
        if job.max_wait is not None and now - job.created >= job.max_wait:
            self._end(job, "Stopped", "MaxWaitTimeExceeded")
            return
        if job.phase in BILLABLE and job.billable >= job.max_runtime:
            self._end(job, "Stopped", "MaxRuntimeExceeded")
            return
        if job.spot and job.phase in RUNNING and script.interruption_due(now - job.created) == now - job.created:
            self._interrupt(job)
            return
        phase = PHASES[job.phase]
        if job.phase == "training":
            if job.progress >= script.train_minutes:
                self._begin(job, "uploading")
            elif script.fail_after_hours is not None and job.progress >= round(script.fail_after_hours * 60):
                self._end(job, "Failed", "Failed", failure_reason=script.failure_reason)
                return
            else:
                self._training_state(job)
        elif phase.duration is not None and now - job.phase_since >= phase.duration(script):
            if phase.next is None:
                assert phase.ends_as is not None
                self._end(job, *phase.ends_as)
                return
            self._begin(job, phase.next)
        self._schedule(job, self._next_tick(job))

    def _training_state(self, job: JobRun) -> None:
        script = job.script
        if (
            job.stalled_at is None
            and script.stall_after_minutes is not None
            and job.progress >= script.stall_after_minutes
        ):
            job.stalled_at = self.now
            job.first_stall = self.now if job.first_stall is None else job.first_stall
        if job.stalled_at is not None:
            self._publish(job, script.stall_gpu_percent)
        else:
            self._publish(job, script.gpu_at(job.progress)[0])

    def _interrupt(self, job: JobRun) -> None:
        self._publish(job, None)
        self._enter(job, "interrupted")
        job.interruptions += 1
        job.stalled_at = None  # the restarted process hangs again only when it reaches the same point
        saved = self.checkpoints.get(job.checkpoint_uri, 0) if job.checkpoint_uri else 0
        job.progress = min(job.progress, saved)
        self._transition(job, "InProgress", "Interrupted", message=PHASES["interrupted"].message)
        self._schedule(job, self._next_tick(job))

    def _next_tick(self, job: JobRun) -> int:
        """The next minute at which something can happen to the job: its phase ends, its utilization
        changes, it stalls or fails, it reaches a limit or Spot reclaims it."""
        script, now = job.script, self.now
        candidates: list[int] = []
        phase = PHASES[job.phase]
        if phase.duration is not None:
            candidates.append(job.phase_since + phase.duration(script))
        if job.phase == "training" and job.stalled_at is None:
            targets = [script.train_minutes]
            if script.fail_after_hours is not None:
                targets.append(round(script.fail_after_hours * 60))
            if script.stall_after_minutes is not None:
                targets.append(script.stall_after_minutes)
            boundary = script.next_boundary(job.progress)
            if boundary is not None:
                targets.append(boundary)
            later = [t for t in targets if t > job.progress]
            candidates.append(now + (min(later) - job.progress) if later else now)
        if job.phase in BILLABLE:
            candidates.append(now + max(0, job.max_runtime - job.billable))
        if job.max_wait is not None:
            candidates.append(job.created + job.max_wait)
        if job.spot and job.phase in RUNNING:
            due = script.interruption_due(now - job.created + 1)
            if due is not None:
                candidates.append(job.created + due)
        return max(now + 1, min(candidates)) if candidates else now + 1
