"""Drives every training job through the phase table (``phases.py``) on the virtual clock.

Each job follows its script: how long each phase lasts, how much training work there is, when it
stalls (and whether the stall recovers), fails (before or during Training) or is interrupted. Every
status change is applied to the SageMaker double and emitted as a state-change event; what the hosts
publish and log is the activity's (``telemetry.py``, ``logs.py``). A job with a ``RetryStrategy`` is
restarted inside itself after an ``InternalServerError`` (SageMaker's own retry: Restarting, then
Starting again, from its last checkpoint). The service's own actions come back through the double: a
``StopTrainingJob`` makes the job Stopping, a ``CreateTrainingJob`` (a clone) is adopted and run from
its source's last checkpoint.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.engine.jobs import Host, JobRun, StallEpisode, job_from_request, source_of, training_request
from smgov.simulation.engine.logs import LogStreams
from smgov.simulation.engine.phases import BILLABLE, PHASES, RUNNING, Publication, following
from smgov.simulation.engine.telemetry import OFF, Activity, Telemetry
from smgov.simulation.fake_sagemaker import FakeSageMaker
from smgov.simulation.scenario import JobSpec, Phase, PhaseTime, Scenario, Script

RETRYABLE = "InternalServerError"  # RetryStrategy retries only these failures (API reference)

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
        logs: LogStreams,
        emit: Callable[[str], None],
    ) -> None:
        self.scenario = scenario
        self.specs = specs
        self.seed = seed
        self.clock = clock
        self.fake = fake
        self.telemetry = telemetry
        self.logs = logs
        self.emit = emit  # a job's status changed: SageMaker emits its state-change event
        self.on_training: Callable[[JobRun], None] | None = None  # a job entered Training
        self.jobs: dict[str, JobRun] = {}
        self.checkpoints: dict[str, int] = {}  # checkpoint location -> training minutes saved
        # A checkpoint was written: (location, training minutes it holds, virtual minute it was written).
        self.on_checkpoint: Callable[[str, int, int], None] | None = None
        # A script phase writes files to the checkpoint location every N minutes from now (None: stops).
        self.on_files: Callable[[str, int | None, int], None] | None = None
        # A job is created into a checkpoint location an earlier run filled: (location, objects, virtual minute).
        self.on_earlier: Callable[[str, int, int], None] | None = None
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
            self._publish(job, OFF)
            self._end_stall(job, recovered=False)
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
            expect_stop=spec.expect_stop or spec.expect.stop is True,
        )  # fmt: skip
        job.spec_name = spec.name
        job.metrics = tuple(m for m in spec.metric_definitions if m.publishes)
        self.jobs[job.name] = job
        if spec.checkpoint_objects_before and job.checkpoint_uri and self.on_earlier is not None:
            self.on_earlier(job.checkpoint_uri, spec.checkpoint_objects_before, self.now)
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
        job.fault_origin = None  # its faults count from where it resumes
        defined = {d.get("Name") for d in request.get("AlgorithmSpecification", {}).get("MetricDefinitions", [])}
        job.metrics = tuple(m for m in (self.jobs[source].metrics if source else ()) if m.name in defined)
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
                if job.billed_from is None:
                    job.billed_from = job.accrued_at
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

    def _publish(self, job: JobRun, activity: Activity) -> None:
        before = self._activity(job)
        changed = (before.kind, before.phase) != (activity.kind, activity.phase)
        if self.on_files is not None and job.checkpoint_uri and changed:
            writes = [a.phase.checkpoint_files_every_minutes for a in (before, activity) if a.phase is not None]
            if any(writes):  # a phase that writes files began or ended
                every = activity.phase.checkpoint_files_every_minutes if activity.phase is not None else None
                self.on_files(job.checkpoint_uri, every if activity.kind == "training" else None, self.now)
        self._disk(job, activity)
        job.activity = activity
        self.telemetry.publish(job, activity, self.now)

    def _disk(self, job: JobRun, activity: Activity) -> None:
        """The DiskUtilization the job's hosts publish from now: what it had, plus the writing phase's share
        so far (linear over the phase); a phase that ends (or a stall that cuts it) keeps what it wrote."""
        base = job.disk_base if job.disk_base is not None else job.script.disk_percent
        phase = activity.phase if activity.kind == "training" else None
        if job.disk_phase is not None and phase is not job.disk_phase:
            base += self._written(job)
            job.disk_base, job.disk_phase = base, None
        if job.disk_phase is None and phase is not None and phase.disk_growth_percent:
            job.disk_phase, job.disk_since = phase, self.now
        grown = self._written(job) if job.disk_phase is not None else 0.0
        job.disk_level = round(min(100.0, base + grown), 3)

    def _written(self, job: JobRun) -> float:
        phase: Phase = job.disk_phase
        growth = float(phase.disk_growth_percent or 0.0)
        return growth * min(1.0, (self.now - job.disk_since) / phase.duration_minutes)

    def _activity(self, job: JobRun) -> Activity:
        return job.activity if isinstance(job.activity, Activity) else OFF

    def _enter(self, job: JobRun, phase: str) -> None:
        job.phase = phase
        job.phase_since = self.now
        job.token += 1

    def _begin(self, job: JobRun, name: str) -> None:
        """Enter the phase ``name``: SageMaker reports it, the hosts publish what the phase publishes."""
        phase = PHASES[name]
        leaving = job.phase
        self._enter(job, name)
        if not phase.billed and job.billed_from is None:
            job.last_wait_at = self.now
        if leaving == "training":
            self._containers_gone(job)
        if phase.publishes is Publication.PHASE:
            self._publish(job, Activity(name))
        elif phase.publishes is Publication.NOTHING:
            self._publish(job, OFF)
        if name == "downloading":
            self._draw_market(job)
        if name == "training":
            if job.checkpoint_uri and job.progress == 0:
                job.progress = self.checkpoints.get(job.checkpoint_uri, 0)  # resume from the last checkpoint
            if job.fault_origin is None:
                job.fault_origin = job.progress
            job.stint_started = self.now
            for host in job.hosts:  # the algorithm containers start: new log streams
                self.logs.start(host.name, self.now)
        assert phase.secondary is not None
        self._transition(job, "InProgress", phase.secondary, message=phase.message)
        if phase.publishes is Publication.SCRIPT:
            self._training_state(job)
        if name == "training" and self.on_training is not None:
            self.on_training(job)

    def _containers_gone(self, job: JobRun) -> None:
        for host in job.hosts:
            self.logs.stop(host.name, self.now)

    def _end(self, job: JobRun, status: str, secondary: str, **kwargs: Any) -> None:
        self._publish(job, OFF)
        self._end_stall(job, recovered=False)
        if status == "Failed" and job.phase == "training":  # the failing process writes its last lines
            self._write_failure(job)
        if status == "Failed":  # they reach CloudWatch Logs by the Failed event, or later (late-logs)
            self.logs.failed([host.name for host in job.hosts], self.now)
            late = job.script.failure_log_late_minutes
            if late and job.script.failure_host is not None:  # one host's last lines, late: from its death on
                self.logs.hold(self._failing_host(job).name, self.now, self.now + late, since=job.host_died_at)
        self._containers_gone(job)
        self._enter(job, "ended")
        job.final_status, job.final_secondary, job.ended_at = status, secondary, self.now
        self.active -= 1
        self.last_end = self.now
        record = self.fake.transition(job.name, status, secondary, **kwargs)
        record["TrainingTimeInSeconds"] = record["BillableTimeInSeconds"] = job.billable * 60  # an ended job's
        self.emit(job.name)

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
            self._end(job, "Stopped", job.stopping_for)
            return
        if job.max_wait is not None and now - job.created >= job.max_wait:
            self._limit(job, "MaxWaitTimeExceeded")
            return
        if job.phase in BILLABLE and job.billable >= job.max_runtime:
            self._limit(job, "MaxRuntimeExceeded")
            return
        if (
            job.spot
            and job.phase in RUNNING
            and (
                script.interruption_due(now - job.created) == now - job.created
                or (job.market_due is not None and job.market_due <= now)
            )
        ):
            self._interrupt(job)
            return
        phase = PHASES[job.phase]
        if job.phase == "training":
            if job.stalled_at is not None:
                if job.stall_ends_at is not None and now >= job.stall_ends_at:
                    self._recover(job)
                elif self._activity(job).kind != "off":
                    self._publish(job, self._activity(job))  # the noise moves on
            elif job.progress >= script.train_minutes:
                self._begin(job, "uploading")
            elif script.fail_after_hours is not None and self._done(job) >= round(script.fail_after_hours * 60):
                self._fail(job)
                return
            elif self._host_death_due(job):
                self._host_dies(job)
                self._training_state(job)
            else:
                self._training_state(job)
        elif phase.duration is not None and now - job.phase_since >= phase.duration(script):
            if script.fail_during == job.phase:
                self._fail(job)
                return
            after = following(job.phase, script)
            if after is None:
                assert phase.ends_as is not None
                self._end(job, *phase.ends_as)
                return
            self._begin(job, after)
        elif phase.publishes is Publication.PHASE:
            self._publish(job, self._activity(job))  # the noise moves on
        self._schedule(job, self._next_tick(job))

    def _limit(self, job: JobRun, secondary: str) -> None:
        """The job reached a time limit (``MaxRuntimeInSeconds``, or a Spot job's ``MaxWaitTimeInSeconds``):
        SageMaker ends it as it ends a stopped one, through ``Stopping`` (secondary status ``Stopping``), then
        ``Stopped`` with ``secondary`` (``MaxRuntimeExceeded`` or ``MaxWaitTimeExceeded``). botocore's SageMaker
        model (``DescribeTrainingJobResponse.SecondaryStatus``) gives ``Stopping`` as the secondary status of
        ``Stopping`` and these two, with ``Stopped``, as those of ``Stopped``; its ``StoppingCondition`` says
        that at either limit "SageMaker ends the job", sending the algorithm SIGTERM, "which delays job
        termination for 120 seconds". The Stopping lasts one simulated minute, as a service stop's does
        (``PHASES["stopping"]``), and is not billed (``stopping_billable``), so a job billed what it billed
        when a limit ended it at once. A ``StopTrainingJob`` in the meantime is refused by the double (the job
        is not ``InProgress``) and changes nothing here (``after_service``)."""
        self._publish(job, OFF)
        self._end_stall(job, recovered=False)
        if job.phase == "training":
            self._containers_gone(job)
        job.stopping_billable = False
        job.stopping_for = secondary
        self._enter(job, "stopping")
        self._transition(job, "Stopping", "Stopping")
        self._schedule(job, self.now + 1)

    def _fail(self, job: JobRun) -> None:
        """The job's process fails: SageMaker retries it inside the job (``RetryStrategy``, an
        ``InternalServerError`` only, while attempts are left), else the job ends Failed."""
        script = job.script
        if script.failure_reason.startswith(RETRYABLE) and job.attempts < job.retry_attempts:
            job.attempts += 1
            if job.phase == "training":
                self._write_failure(job)
            job.host_died, job.host_died_at = False, None
            self._end_stall(job, recovered=False)
            job.stalled_at = job.stall_ends_at = None
            job.script = script.resumed()  # a retry runs like a clone: the fault recurs only with `repeat`
            saved = self.checkpoints.get(job.checkpoint_uri, 0) if job.checkpoint_uri else 0
            job.progress = min(job.progress, saved)
            job.fault_origin = None
            self._begin(job, "restarting")
            self._schedule(job, self._next_tick(job))
            return
        self._end(job, "Failed", "Failed", failure_reason=script.failure_reason)

    def _write_failure(self, job: JobRun) -> None:
        """The job fails: its failing host writes its tail (``failure_log``; algo-1 unless ``failure_host``
        names another, and not again when its process died earlier), every other host its report of the
        peer's exit (``peer_failure_log``)."""
        script = job.script
        if script.failure_host is None:
            self.logs.write(job.hosts[0].name, self.now, script.failure_tail())
            return
        failing = self._failing_host(job)
        if not job.host_died:
            self.logs.write(failing.name, self.now, script.failure_tail())
        if script.peer_failure_log:
            for host in job.hosts:
                if host is not failing:
                    self.logs.write(host.name, self.now, script.peer_failure_log)

    def _failing_host(self, job: JobRun) -> Host:
        number = job.script.failure_host
        found = next((host for host in job.hosts if host.number == number), None)
        if found is None:
            raise ValueError(f"{job.name}: failure_host {number} is not one of its {len(job.hosts)} hosts")
        return found

    def _host_death_due(self, job: JobRun) -> bool:
        """Whether the failing host's process dies now, ``failure_host_silent_minutes`` before the job fails."""
        script = job.script
        if job.host_died or not script.failure_host_silent_minutes or script.fail_after_hours is None:
            return False
        return self._done(job) >= round(script.fail_after_hours * 60) - script.failure_host_silent_minutes

    def _host_dies(self, job: JobRun) -> None:
        """The failing host's process dies (an EFA transport lost, say): it writes its tail and nothing more;
        the other ranks train on, blocked, until the job fails."""
        failing = self._failing_host(job)
        self.logs.write(failing.name, self.now, job.script.failure_tail())
        self.logs.silence(failing.name, self.now)
        job.host_died, job.host_died_at = True, self.now

    def _recover(self, job: JobRun) -> None:
        """A stall that ends by itself: training goes on from where it stopped."""
        job.stalled_at = job.stall_ends_at = None
        job.stall_recovered = True
        self._end_stall(job, recovered=True)
        self._training_state(job)

    def _end_stall(self, job: JobRun, *, recovered: bool) -> None:
        if job.stalls and job.stalls[-1].end is None:
            episode = job.stalls[-1]
            episode.end, episode.billable_at_end, episode.recovered = self.now, job.billable, recovered

    @staticmethod
    def _done(job: JobRun) -> int:
        """Training minutes since the point its faults count from."""
        return job.progress - (job.fault_origin or 0)

    def _phase_time(self, job: JobRun) -> PhaseTime:
        return PhaseTime(job.progress, self.now - job.stint_started, self.now - job.created)

    def _training_state(self, job: JobRun) -> None:
        script = job.script
        if (
            job.stalled_at is None
            and script.stall_after_minutes is not None
            and self._done(job) >= script.stall_after_minutes
            and not job.stall_recovered
        ):
            job.stalled_at = self.now
            job.first_stall = self.now if job.first_stall is None else job.first_stall
            job.stalls.append(StallEpisode(self.now, job.billable))
            if script.stall_recovers_after_minutes is not None:
                job.stall_ends_at = self.now + script.stall_recovers_after_minutes
        if job.stalled_at is not None:
            self._publish(job, Activity("stalled"))
        else:
            self._publish(job, Activity("training", script.phase_at(self._phase_time(job))))

    def _draw_market(self, job: JobRun) -> None:
        """The market's next interruption of a Spot job's new stint (seeded by the run, the job and the
        stint, so every strategy of a comparison meets the same market up to where they differ)."""
        market = self.scenario.spot_market
        job.market_due = None
        if market is None or not job.spot or job.spot_type is None:
            return
        draw = random.Random(f"{self.seed}-market-{job.name}-{job.interruptions}").expovariate(1.0)
        job.market_due = market.next_interruption(job.spot_type, self.now, draw)

    def _interrupt(self, job: JobRun) -> None:
        market = self.scenario.spot_market
        period = market.period(job.spot_type, self.now) if market and job.spot_type else None
        if period is not None:  # the market's capacity wait now
            job.script = job.script.model_copy(update={"spot_capacity_wait_minutes": period.capacity_wait_minutes})
        job.market_due = None
        self._publish(job, OFF)
        self._end_stall(job, recovered=False)
        if job.phase == "training":
            self._containers_gone(job)
        self._enter(job, "interrupted")
        job.interruptions += 1
        job.stalled_at = job.stall_ends_at = None  # the restarted process hangs again at the same point
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
            origin = job.fault_origin or 0
            if script.fail_after_hours is not None:
                targets.append(origin + round(script.fail_after_hours * 60))
                if script.failure_host_silent_minutes and not job.host_died:
                    targets.append(
                        origin + round(script.fail_after_hours * 60) - script.failure_host_silent_minutes
                    )
            if script.stall_after_minutes is not None and not job.stall_recovered:
                targets.append(origin + script.stall_after_minutes)
            later = [t for t in targets if t > job.progress]
            candidates.append(now + (min(later) - job.progress) if later else now)
            boundary = script.next_boundary(self._phase_time(job))
            if boundary is not None:
                candidates.append(now + boundary)
        if job.phase == "training" and job.stall_ends_at is not None:
            candidates.append(job.stall_ends_at)
        noise = self.telemetry.next_noise(job, self._activity(job), now)
        if noise is not None:
            candidates.append(noise)
        if job.disk_phase is not None and job.phase == "training" and job.stalled_at is None:
            candidates.append(now + 1)  # the disk fills minute by minute while a phase writes
        if job.phase in BILLABLE:
            candidates.append(now + max(0, job.max_runtime - job.billable))
        if job.max_wait is not None:
            candidates.append(job.created + job.max_wait)
        if job.spot and job.phase in RUNNING:
            due = script.interruption_due(now - job.created + 1)
            if due is not None:
                candidates.append(job.created + due)
            if job.market_due is not None and job.market_due > now:
                candidates.append(job.market_due)
        return max(now + 1, min(candidates)) if candidates else now + 1
