"""The stall judge at the stopper's ``StopReview`` seam (issue 17): a guard's alarm is a trigger, the
judge decides.

When a guard's verdict is to stop a job (idle GPUs, no progress metric), the judge reads the job's
evidence over the window of the alarm that fired (at most the guard's window; a shorter one is a trigger:
a stop then needs what the guard's window, or for a hang the job's log rhythm, asks for, and the alarm is
otherwise widened to that: ``judge.wait.window``), never before the job (re)entered ``Training``:

* ``GetMetricData`` (one request per 500 series): per host ``GPUUtilization``, ``GPUMemoryUtilization``,
  ``CPUUtilization``, ``MemoryUtilization`` (one-minute Average), and ``SampleCount`` of every training
  metric the job defines (or those the policy's ``judge.progress_metric_names`` lists);
* the job's log streams (``adapters/training_logs.py``: ``DescribeLogStreams`` + ``FilterLogEvents``);
* last, and only when every other signal agrees, what the job writes: each host's ``DiskUtilization``
  (``GetMetricData``) and its checkpoint location (``adapters/checkpoints.py``: ``ListObjectsV2`` on
  ``CheckpointConfig.S3Uri``, in the buckets ``CheckpointBucketPattern`` names);

and asks ``domain/stall_judge.judge`` whether every signal agrees. Confirmed: the guard's verdict
stands, its decision carrying the evidence. Otherwise the verdict is ``VETOED`` with the judge's code,
reason and evidence, and the guard's alarms are reset: they fire again if the condition persists, and the
job is judged again then. Reads happen only here, so only when an alarm fired: a healthy job's AWS calls
do not grow. In audit mode the judge runs just the same: the record says what enforce mode would do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, NamedTuple, Protocol

from sagemaker_governance.domain.decisions import Action, Decision
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import CheckpointProgress
from sagemaker_governance.domain.guards.base import (
    WHY_SHORT_SPAN,
    Guard,
    GuardVerdict,
    Notice,
    Verdict,
    training_started_at,
)
from sagemaker_governance.domain.guards.progress import JOB_DIMENSION, normalize_metric_name
from sagemaker_governance.domain.instances import Accelerator, InstanceFacts, instance_facts, vcpus
from sagemaker_governance.domain.stall_judge import (
    DISK,
    GPU,
    HOST_METRICS,
    CheckpointWrites,
    DiskWrites,
    Evidence,
    Finding,
    HostEvidence,
    JudgeCode,
    JudgePolicy,
    LogEvidence,
    LogRhythm,
    MetricRead,
    MetricReadResult,
    StallKind,
    cluster_gpu_counts,
    gpus_idle,
    host_names,
    judge,
    progress_metrics,
    quiet_minutes,
    rejudge_minutes,
    window_start,
)
from sagemaker_governance.observability import logger

RESET_REASON = "sagemaker-governance: the stall judge did not confirm the stop; judged again if it persists"
# A notification handled this long or more after its alarm's state change is late: what the job did since is read.
LATE_AFTER = timedelta(minutes=1)  # the metrics' period: sooner, no minute since can have been published


class MetricReadPort(Protocol):
    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        """Values by query id, oldest first (None: unread), and the errors."""


class LogActivityPort(Protocol):
    def activity(self, job_name: str, start: datetime, end: datetime) -> LogEvidence:
        """The job's streams and the first line in the window; raises ``AdapterError``."""

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        """The times of the job's log lines in the window (as many as a bounded read gets); raises
        ``AdapterError``."""


class CheckpointWritesPort(Protocol):
    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        """The objects under ``s3_uri`` written at or after ``since`` (never raises: unread says why)."""


class _Case(NamedTuple):
    """One judgement: the guard and its verdict, what the judge judges (``kind``), the trigger's span (the
    alarm's window, at most the guard's), what a stop needs (the guard's window; a hang: the job's silence
    limit), the evidence over the span and over what a stop needs (the same unless a hang), the record."""

    guard: Guard[Any]
    config: Any
    notice: Notice
    verdict: GuardVerdict
    kind: StallKind
    settings: JudgePolicy
    threshold: float | None
    window: timedelta
    span: timedelta
    needed: timedelta
    over_span: Evidence
    recorded: dict[str, Any]
    over_needed: Evidence | None = None

    @property
    def evidence(self) -> Evidence:
        return self.over_needed if self.over_needed is not None else self.over_span


class OlderLogUnread(str):
    """The job's log rhythm when the last ``judge.max_rejudge_minutes`` were read and the stint's older part,
    read because the job had been silent for the limit they give, was not: the older part may hold a longer
    healthy gap, so the job's limit is unknown and the judgement rests on missing data (the text: why)."""

    __slots__ = ()

    def __new__(cls, error: AdapterError) -> OlderLogUnread:
        return super().__new__(cls, f"the job's log before its last hours could not be read ({error})")

    @property
    def missing(self) -> str:
        return f"log rhythm: {self}"


class StintRhythm(LogRhythm):
    """The job's log rhythm over a stint in ``Training`` whose older part (before its last
    ``judge.max_rejudge_minutes``) was too long to read whole within the page cap: the lines of that part from
    the entry into ``Training``, cut short at ``unread_from``, joined with those of the last
    ``max_rejudge_minutes`` (read whole, from ``unread_to``); the stretch between is unread and no gap across it
    counts (``stint_rhythm``)."""

    unread_from: datetime
    unread_to: datetime

    def covers(self, start: datetime) -> bool:
        """Whether the lines read hold every line from ``start`` on (it is not before the unread stretch ends)."""
        return start >= self.unread_to

    def summary(self, policy: JudgePolicy) -> dict[str, Any]:
        return {
            **super().summary(policy),
            "unread": {"from": self.unread_from.isoformat(), "to": self.unread_to.isoformat()},
        }


def stint_rhythm(older: LogRhythm, recent: LogRhythm, start_up: timedelta) -> LogRhythm:
    """The rhythm of a whole stint: ``recent`` (its last ``max_rejudge_minutes``, read whole; its gaps count as
    they did when only those minutes were read, a start-up's too while it is that recent) joined with ``older``
    (the stint before them, read from its entry into ``Training`` and perhaps cut short). Of the older part,
    the gaps between its lines that begin ``start_up`` (``min_silence_minutes``) or more after its first line
    count, the gap across to the recent read's first line included when ``older`` is whole: the quiet before
    and just after the job's first lines (a banner, then a silent data preparation) is its start-up, which does
    not recur, and the stretch before the first line read may be lines CloudWatch Logs' retention has deleted
    since. A silent phase later in the stint (an evaluation) counts however long ago it was. Never a shorter
    longest gap than ``recent``'s alone."""
    lines = (*older.times, *recent.times[:1]) if older.complete else older.times
    counted_from = lines[0] + start_up if lines else older.end
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(lines) if earlier >= counted_from]
    times = older.times + recent.times
    joined = {
        "start": older.start,
        "end": recent.end,
        "lines": len(times),
        "longest_gap_seconds": max([recent.longest_gap_seconds, *gaps]),
        "last_line_at": times[-1] if times else None,
        "complete": True,
        "times": times,
    }
    if older.complete:
        return LogRhythm(**joined)
    return StintRhythm(**joined, unread_from=older.last_line_at or older.start, unread_to=recent.start)


class StallJudge:
    """The ``StopReview`` that reads the job's metrics and logs before a guard's stop is carried out."""

    def __init__(
        self, metrics: MetricReadPort, logs: LogActivityPort, checkpoints: CheckpointWritesPort | None = None
    ) -> None:
        self._metrics = metrics
        self._logs = logs
        self._checkpoints = checkpoints  # None: the deployment lists no checkpoint location

    def review(
        self, guard: Guard[Any], role: str, notice: Notice, verdict: GuardVerdict, policy: Any = None
    ) -> GuardVerdict:
        kind = guard.stall_kind
        settings: JudgePolicy = getattr(policy, "judge", None) or JudgePolicy()
        if kind is None or not settings.enabled or policy is None:
            return verdict
        config = guard.config(policy)
        window = guard.evidence_window(config)
        if window is None:
            return verdict
        span = guard.fired_span(config, notice) or window  # shorter than the window: the alarm is a trigger
        # judged as of the alarm's state change, not of a late handling: the minutes since, which SageMaker may not
        # have published yet, never count as quiet ones (``_recovered`` reads them for a sign of life only)
        job, as_of = notice.job, notice.as_of
        started = training_started_at(job)
        evidence = self.gather(job, as_of, window_start(as_of, span, started), settings, resolved=notice.resolved)
        threshold = guard.stall_threshold(job, config, notice)
        pinned = self.pinned_claim(kind, evidence, threshold, guard.pinned_threshold(job, config, notice))
        if pinned:
            kind = StallKind.HANG  # the alarm fired on pinned GPUs: what it claims is a hang
        rhythm = None
        case = _Case(guard, config, notice, verdict, kind, settings, threshold, window, span, window, evidence, {})
        if kind is StallKind.HANG:
            # the window the job declares; with every GPU idle, the guard's window: idleness, which the idle
            # guard judges over its own window, a trigger of the progress guard does not make shorter
            whole_window = self.declares(job, guard, policy) or (
                span < window and not pinned and gpus_idle(evidence, settings)
            )
            over, rhythm, needed = self.over_rhythm(
                job,
                as_of,
                started,
                settings,
                evidence,
                at_least=window.total_seconds() / 60 if whole_window else 0,
                unknown=window,
                resolved=notice.resolved,
            )
            case = case._replace(needed=needed, over_needed=over)
        finding = judge(kind, case.evidence, settings, gpu_threshold=threshold)
        if kind is StallKind.IDLE and span < window and finding.confirmed:
            # idle over the trigger: idle over the whole window too (a trigger that fired late)? Whether that
            # reaches back the whole window (not cut at the entry into Training) is ``_wait``'s to ask.
            over = self.gather(
                job, as_of, window_start(as_of, window, started), settings, resolved=notice.resolved
            )
            whole = judge(kind, over, settings, gpu_threshold=threshold)
            if whole.confirmed:
                case, finding = case._replace(over_needed=over), whole
        case, finding, recovered = self._last_checks(case, finding)
        case.recorded.update(verdict.decision.evidence)
        case.recorded["judge"] = self._judged(finding.evidence, pinned, rhythm, settings)
        triggered = span < window and not recovered  # a sign of life (or a failed read) since: a veto, no wait
        waiting, finding = self._triggered(case, finding, pinned, rhythm) if triggered else (None, finding)
        if waiting is not None:
            return waiting
        if finding.confirmed:
            if pinned:
                verdict = guard.hang_verdict(verdict, config, span)
            decision = verdict.decision.model_copy(
                update={"evidence": {**case.recorded, "judge_verdict": finding.reason}}
            )
            return verdict.model_copy(update={"decision": decision, "confirmed": True})
        assert finding.code is not None
        logger.info("stop not confirmed by the stall judge", job=job.name, code=finding.code.value)
        if pinned:
            return self._pinned_veto(guard, verdict, finding.code.value, finding.reason, case.recorded)
        return self._veto(case, finding)

    def _veto(self, case: _Case, finding: Finding) -> GuardVerdict:
        """The judge did not confirm the stop: the guard's alarm is widened to the job's quiet stretch so far
        (``rejudge_minutes``; a trigger to the window at least) and reset, or left in ALARM at the cap."""
        assert finding.code is not None
        guard, job, settings = case.guard, case.notice.job, case.settings
        base = case.window.total_seconds() / 60
        quiet = self.quiet(case.kind, job, case.notice.now, settings, case.threshold)
        minutes = rejudge_minutes(base, quiet, settings) if quiet is not None else math.ceil(base)
        fired = case.span.total_seconds() / 60  # a trigger is widened to the window at least
        rewindow = guard.widened(case.notice, case.config, minutes) if minutes and minutes > fired else ()
        recorded = case.recorded
        if quiet is not None:
            recorded["rejudge"] = {
                "quiet_minutes": quiet,
                "window_minutes": minutes,
                "widened": [r["AlarmName"] for r in rewindow],
            }
        if minutes is None:
            then = (
                f"the job has been quiet for {quiet} minutes, the judge's cap ({settings.max_rejudge_minutes}): "
                f"the {guard.title}'s alarm stays in ALARM and the job is judged again when it is busy and goes "
                "quiet once more"
            )
        elif rewindow and minutes <= base:
            then = (
                f"the {guard.title}'s alarm is widened from its {fired:g}-minute trigger to the {minutes}-minute "
                "window and reset: the job is judged again if it stays quiet that long"
            )
        elif rewindow:
            then = (
                f"the {guard.title}'s alarm is widened to {minutes} minutes ({settings.rejudge_factor:g} x the "
                f"{quiet} quiet minutes so far) and reset: the job is judged again if it stays quiet that long"
            )
        else:
            then = f"the {guard.title}'s alarm is reset and the job is judged again if it persists"
        decision = Decision(
            rule=case.verdict.decision.rule,
            code=finding.code.value,
            action=Action.NONE,
            mode=case.verdict.decision.mode,
            reason=f"{finding.reason}; {then}",
            evidence={**recorded, "guard_verdict": case.verdict.decision.code},
        )
        return GuardVerdict(
            verdict=Verdict.VETOED,
            decision=decision,
            rewindow=rewindow,
            reset=guard.rejudge_alarms(job, case.notice.naming) if minutes is not None else (),
            reset_reason=RESET_REASON,
        )

    def _last_checks(self, case: _Case, finding: Finding) -> tuple[_Case, Finding, bool]:
        """When every other signal agrees (a stop or a wait follows): what the job did since its alarm's state
        change (a late notification, ``_recovered``), then whether it is writing (``_writing``); the case, the
        finding, and whether what the job did since the state change vetoes (a sign of life, or a failed read
        of those minutes)."""
        if not finding.confirmed:
            return case, finding, False
        recovered = self._recovered(case, finding)
        if recovered is not None:
            return case, recovered, True
        case, finding = self._writing(case, finding)
        return case, finding, False

    def _recovered(self, case: _Case, finding: Finding) -> Finding | None:
        """A notification handled late (a retried delivery, an SQS backlog): the job is judged as of its alarm's
        state change (``finding``), and what it did since, up to now, is read once more: a sign of life there (a
        training metric, a log line, GPUs back at the threshold, busy CPUs, GPUs working) is the finding that
        vetoes, with the code of that sign: the job recovered. Minutes since that SageMaker has not published yet
        (its instance metrics arrive late) are no sign either way: read only for a veto, never as idle. A read of
        those minutes that failed (the throttling that often made the delivery late) is missing data: no stop on
        the judgement as of then alone (``judge.skip.insufficient-evidence``, naming the read): the stopper does not
        ask the alarm's state again about a confirmed stop, so a stop confirmed here must rest on a read of the
        job up to now. Each host keeps the GPU counts the judged window narrowed it to (``_narrowed``). None when
        the notification is timely or nothing since shows life."""
        notice = case.notice
        as_of, now = notice.as_of, notice.now
        if now - as_of < LATE_AFTER:
            return None
        since = self._narrowed(
            self.gather(notice.job, now, as_of, case.settings, resolved=notice.resolved), case.evidence
        )
        after = judge(case.kind, since, case.settings, gpu_threshold=case.threshold)
        late = math.floor((now - as_of).total_seconds() / 60)
        recorded = {**finding.evidence, "since_state_change": after.evidence}
        if after.confirmed:
            return None  # quiet since: the judgement as of then stands
        if after.code is JudgeCode.INSUFFICIENT:
            failed = list(since.missing)
            if since.logs is not None and since.logs.truncated and since.logs.line_at is None:
                failed.append("the log search ended before it covered the minutes since the state change")
            if not failed:
                return None  # too little published yet to say: the judgement as of then stands
            return after.model_copy(
                update={
                    "reason": f"insufficient evidence to confirm the stall (never a stop): this notification is "
                    f"handled {late} minutes after its alarm's state change at {as_of.isoformat()}, and what the "
                    f"job did since could not be read ({'; '.join(failed)}); the judgement as of the state change "
                    "alone does not stop a job that may have recovered since",
                    "evidence": recorded,
                }
            )
        return after.model_copy(
            update={
                "reason": f"since the alarm's state change at {as_of.isoformat()} (this notification is handled "
                f"{late} minutes later), the job shows a sign of life: {after.reason}",
                "evidence": recorded,
            }
        )

    @staticmethod
    def _narrowed(since: Evidence, judged: Evidence) -> Evidence:
        """``since`` with each host's possible GPU counts those ``judged`` (the window judged, up to the state
        change) narrowed it to (``cluster_gpu_counts``): a host's GPU count does not change, so a host whose
        count that window resolved is not ambiguous again because a short read since has too few hosts
        publishing to narrow it. A host that window left ambiguous stays so, and is working (a sign of life) if
        its level since is idle or pinned only under some of its counts: a hang's window would have vetoed it
        then unless it was idle or pinned under every count, so such a level is a change, and no stop rests on
        it. A value since above 100 x a host's narrowed count contradicts the narrowing: nothing narrowed."""
        counts = cluster_gpu_counts(judged)
        narrowed = {h: c for h, c in counts.items() if c is not None}
        for host in since.hosts:
            held = narrowed.get(host.host)
            if held is not None and any(v > 100 * held[1] + 1e-9 for v in host.values(GPU) or ()):
                return since
        hosts = tuple(
            h.model_copy(update={"gpus": narrowed[h.host]}) if h.host in narrowed else h for h in since.hosts
        )
        return since.model_copy(update={"hosts": hosts})

    def _triggered(
        self, case: _Case, finding: Finding, pinned: bool, rhythm: LogRhythm | str | None
    ) -> tuple[GuardVerdict | None, Finding]:
        """``_wait``, with the judge's record taken from the trigger's span when that span vetoes."""
        waiting, judged = self._wait(case, finding)
        if waiting is None and judged is not finding:  # a sign of life in the trigger's span: never a stop
            case.recorded["judge"] = self._judged(judged.evidence, pinned, rhythm, case.settings)
        return waiting, judged

    @staticmethod
    def _wait(case: _Case, finding: Finding) -> tuple[GuardVerdict | None, Finding]:
        """The alarm fired on its trigger (``case.span``, shorter than the guard's window). When every signal
        agrees over that span but a stop needs longer (idleness: the whole window; a hang: the job's silence
        limit not reached yet, or a stay in Training shorter than the window an unknown rhythm needs), the
        alarm is widened to what the stop needs and reset: the job is judged again only if it stays stuck
        that long. Else no verdict, and the finding to judge by: ``finding`` (a hang silent for its limit is
        stopped), or the span's own when it shows a sign of life (a veto: the span and the longer window are
        judged on different means, and the longer window's agreement is no stop while it is too short)."""
        needed, span, notice = case.needed, case.span, case.notice
        if finding.confirmed and notice.as_of - case.evidence.start >= needed:
            return None, finding  # stuck for what a stop needs (the window; a hang: its silence limit)
        over_span = finding
        if case.kind is StallKind.HANG and case.over_span is not case.evidence:
            over_span = judge(case.kind, case.over_span, case.settings, gpu_threshold=case.threshold)
        if not over_span.confirmed:  # the span's sign of life vetoes (the longer window's too, if it has one)
            return None, over_span if finding.confirmed else finding
        if needed <= span:
            return None, finding
        finding = over_span
        minutes = math.ceil(needed.total_seconds() / 60)
        stop_needs = (
            f"idleness is stopped only after the {minutes}-minute window"
            if case.kind is StallKind.IDLE
            else f"a hang is stopped only after {minutes} silent minutes (the job's log rhythm, or the window "
            "while the rhythm is unknown)"
        )
        rewindow = case.guard.widened(notice, case.config, minutes, WHY_SHORT_SPAN)
        case.recorded["rejudge"] = {
            "trigger_minutes": math.ceil(span.total_seconds() / 60),
            "window_minutes": minutes,
            "widened": [r["AlarmName"] for r in rewindow],
        }
        decision = Decision(
            rule=case.verdict.decision.rule,
            code=JudgeCode.WAIT.value,
            action=Action.NONE,
            mode=case.verdict.decision.mode,
            reason=f"the alarm fired on its {span.total_seconds() / 60:g}-minute trigger and every signal agrees "
            f"so far, but {stop_needs}: the {case.guard.title}'s alarm is widened to {minutes} minutes and reset; "
            "the job is judged again if it stays stuck that long",
            evidence={**case.recorded, "guard_verdict": case.verdict.decision.code},
        )
        return GuardVerdict(
            verdict=Verdict.TOO_EARLY,
            decision=decision,
            rewindow=rewindow,
            reset=case.guard.rejudge_alarms(notice.job, notice.naming),
            reset_reason=RESET_REASON,
        ), finding

    def rhythm(self, job: Any, now: datetime, started: datetime | None, settings: JudgePolicy) -> LogRhythm | str:
        """The job's log rhythm over its stint in ``Training`` (since it last entered it) up to ``now``; why not
        when a read failed. The last ``max_rejudge_minutes`` are read first (unknown start: only they), as
        before the stint was read: cut short, the rhythm is unknown (the guard's window). The stint's older part
        is read (from the entry into ``Training``, with the adapter's page cap) and joined (``stint_rhythm``)
        only when it can change the verdict: when the recent read gives no limit (too few lines) or the job
        has been silent for the limit it gives; a silence within it is no hang whatever the older gaps, which
        can only lengthen that limit (a healthy chatty job pays the one read it paid before)."""
        recent_from = window_start(now, timedelta(minutes=settings.max_rejudge_minutes), started)
        try:
            recent = self._logs.rhythm(job.name, recent_from, now)
            if started is None or recent_from <= started or not recent.complete:
                return recent
            limit = recent.silence_minutes(settings)
            silent = now - (recent.last_line_at or recent.start)
            if limit is not None and (silent < timedelta(minutes=limit) or limit >= settings.max_rejudge_minutes):
                return recent
        except AdapterError as exc:
            return str(exc)
        try:
            older = self._logs.rhythm(job.name, started, recent_from)
        except AdapterError as exc:
            return OlderLogUnread(exc)
        return stint_rhythm(older, recent, timedelta(minutes=settings.min_silence_minutes))

    @staticmethod
    def declares(job: Any, guard: Guard[Any], policy: Any) -> bool:
        """Whether the job declares its own window for this guard (an applied ``smgov:*-minutes`` tag)."""
        return any(d.applied and d.section == guard.section for d in policy.declared_tolerance(job))

    def over_rhythm(
        self,
        job: Any,
        now: datetime,
        started: datetime | None,
        settings: JudgePolicy,
        evidence: Evidence,
        *,
        at_least: float = 0,
        unknown: timedelta,
        resolved: Mapping[str, InstanceFacts] | None = None,
    ) -> tuple[Evidence, LogRhythm | str, timedelta]:
        """A hang is judged over the silence the job's own log rhythm makes unusual: the evidence again over
        that window when the rhythm is known (the pinned claim stays the alarm's window's), over ``unknown``
        (the guard's window) when it is not, never shorter than ``at_least`` (the window the job declared for
        its quiet phases); with that window. Cut at the (re)entry into Training, a known rhythm's window still
        holds its last line: a job is never judged hung before it has been silent that long."""
        rhythm = self.rhythm(job, now, started, settings)
        if isinstance(rhythm, OlderLogUnread):
            # the read that could have given the job a longer limit failed: missing data, no stop on it
            evidence = evidence.model_copy(update={"missing": (*evidence.missing, rhythm.missing)})
        silence = rhythm.silence_minutes(settings) if isinstance(rhythm, LogRhythm) else None
        needed = max(timedelta(minutes=silence) if silence is not None else unknown, timedelta(minutes=at_least))
        start = window_start(now, needed, started)
        if start != evidence.start:
            # a complete read's lines are read already (a joined one's from its unread stretch's end): the metrics
            # again over the limit
            logs = None
            held = not isinstance(rhythm, StintRhythm) or rhythm.covers(start)
            if isinstance(rhythm, LogRhythm) and silence is not None and evidence.logs is not None and held:
                logs = rhythm.activity(start, evidence.logs.streams)
            evidence = self.gather(job, now, start, settings, logs=logs, resolved=resolved)
        return evidence, rhythm, needed

    def _writing(self, case: _Case, finding: Finding) -> tuple[_Case, Finding]:
        """The case judged again with what the job wrote since what a stop needs (the guard's window; a
        hang: its silence limit), never before the evidence's start: its hosts' disk use and its checkpoint
        location (when it has one and the deployment lists it). Read last: one ``GetMetricData`` and one
        listing (none when the disk already moved), only before a stop or a wait, never on a veto the other
        signals already gave."""
        job, now = case.notice.job, case.notice.now
        evidence = case.evidence
        # from what a stop needs before the alarm's state change up to now: a write since is a sign of life too
        since = max(evidence.start, case.notice.as_of - case.needed)
        hosts = host_names(job.name, job.total_instance_count)
        queries = [MetricRead(f"d{i}", DISK, (("Host", host),), "Average") for i, host in enumerate(hosts)]
        read = self._metrics.read(queries, since, now)
        # the hosts read are kept beside what failed: a move on any of them is a sign of life
        disk = DiskWrites(
            since=since,
            hosts={host: read.values.get(q.id) for host, q in zip(hosts, queries, strict=True)},
            unread="; ".join(read.errors) or None,
        )
        update: dict[str, Any] = {"disk": disk}
        uri = getattr(job, "checkpoint_s3_uri", None)
        # a disk that moved already vetoes: no listing then
        if self._checkpoints is not None and uri and not disk.moved(case.settings.disk_change_percent):
            progress = self._checkpoints.progress(uri, since)
            if progress.checked:  # the port counts only what was written since then
                update["checkpoints"] = CheckpointWrites(
                    location=uri,
                    since=since,
                    written=progress.written,
                    latest_at=max(progress.written_at, default=None),
                )
            else:
                update["checkpoints"] = CheckpointWrites(
                    location=uri, since=since, unread=progress.note or "not read"
                )
        evidence = evidence.model_copy(update=update)
        case = (
            case._replace(over_needed=evidence)
            if case.over_needed is not None
            else case._replace(over_span=evidence)
        )
        return case, judge(case.kind, evidence, case.settings, gpu_threshold=case.threshold)

    @staticmethod
    def _judged(
        evidence: dict[str, Any], pinned: bool, rhythm: LogRhythm | str | None, settings: JudgePolicy
    ) -> dict[str, Any]:
        """The judge's evidence as recorded: what it read, the trigger (pinned), the job's log rhythm."""
        judged = dict(evidence)
        if pinned:
            judged["trigger"] = "pinned"
        if isinstance(rhythm, LogRhythm):
            judged["rhythm"] = rhythm.summary(settings)
        elif rhythm is not None:
            judged["rhythm"] = {"unread": rhythm, "silence_minutes": None}
        return judged

    @staticmethod
    def pinned_claim(
        kind: StallKind, evidence: Evidence, idle_threshold: float | None, pinned_threshold: float | None
    ) -> bool:
        """Whether an idle alarm fired on pinned GPUs rather than idle ones: it has a pinned trigger and, in
        the window, more minutes had every host at or above the pinned threshold than had every host below
        the idle threshold (the alarm's metric is 0 in both kinds of minute), or no minute was idle while the
        GPUs worked. A minute with a host missing or in between counts for neither: one busy minute in an idle
        window is a sign of life for the idle judgement, not a hang. The hosts are those with GPU datapoints,
        as in the alarm: a heterogeneous cluster's CPU-only hosts publish none, and counting their empty
        series left no minute to count, so one busy minute made an idle window a hang."""
        if kind is not StallKind.IDLE or pinned_threshold is None or idle_threshold is None:
            return False
        series = [values for h in evidence.hosts if (values := h.values(GPU))]
        if not series:
            return False
        pinned = idle = 0
        for minute in zip(*series, strict=False):
            if any(v is None for v in minute):
                continue
            if all(v >= pinned_threshold for v in minute):
                pinned += 1
            elif all(v < idle_threshold for v in minute):
                idle += 1
        working = any(v is not None and v >= idle_threshold for values in series for v in values)
        return pinned > idle or (idle == 0 and working)

    @staticmethod
    def _pinned_veto(
        guard: Guard[Any], verdict: GuardVerdict, code: str, reason: str, recorded: dict[str, Any]
    ) -> GuardVerdict:
        """A pinned trigger the judge did not confirm: the alarm is left in ALARM (not reset, not widened).
        A reset would bring it back to ALARM at once for as long as the GPUs stay pinned (a judgement a
        minute); left alone, it goes back to OK by itself when a minute is neither pinned nor idle, and fires
        again (the job is judged again) once the GPUs stay pinned or idle for a whole window once more."""
        then = (
            f"the {guard.title}'s alarm stays in ALARM while the GPUs stay pinned; the job is judged again when "
            "they are pinned or idle for a whole window once more"
        )
        decision = Decision(
            rule=verdict.decision.rule,
            code=code,
            action=Action.NONE,
            mode=verdict.decision.mode,
            reason=f"{reason}; {then}",
            evidence={**recorded, "guard_verdict": verdict.decision.code},
        )
        return GuardVerdict(verdict=Verdict.VETOED, decision=decision)

    def quiet(
        self, kind: StallKind, job: Any, now: datetime, settings: JudgePolicy, threshold: float | None
    ) -> int | None:
        """How long the job has been quiet (GPUs below ``threshold`` on every host, or no datapoint of its
        progress metrics), read back at most ``max_rejudge_minutes`` and never before it (re)entered
        Training; ``None`` when the read failed (then the alarm is only reset, as before)."""
        since = window_start(now, timedelta(minutes=settings.max_rejudge_minutes), training_started_at(job))
        if kind is StallKind.IDLE:
            queries = [
                MetricRead(f"g{i}", GPU, (("Host", host),), "Average")
                for i, host in enumerate(host_names(job.name, job.total_instance_count))
            ]
        else:
            defined = [d.name for d in job.algorithm.metric_definitions]
            names = progress_metrics(defined, settings.progress_metric_names, normalize_metric_name)
            queries = [
                MetricRead(f"t{i}", name, ((JOB_DIMENSION, job.name),), "SampleCount")
                for i, name in enumerate(names)
            ]
        if not queries:
            return None
        result = self._metrics.read(queries, since, now)
        if result.errors or any(result.values.get(q.id) is None for q in queries):
            return None
        active: list[tuple[datetime, ...]] = []
        for q in queries:
            values = result.values.get(q.id) or ()
            times = result.times.get(q.id, ())
            if len(times) != len(values):
                return None  # a reader that cannot say when: no widening
            if kind is StallKind.IDLE:
                active.append(
                    tuple(t for t, v in zip(times, values, strict=True) if threshold is None or v >= threshold)
                )
            else:
                active.append(tuple(t for t, v in zip(times, values, strict=True) if v > 0))
        return quiet_minutes(now, since, active)

    def gather(
        self,
        job: Any,
        now: datetime,
        start: datetime,
        settings: JudgePolicy,
        *,
        logs: LogEvidence | None = None,
        resolved: Mapping[str, InstanceFacts] | None = None,
    ) -> Evidence:
        """Read the job's evidence over ``[start, now)`` (the log activity too, unless ``logs`` gives it); a
        failed read is recorded in ``missing``. ``resolved``: EC2's facts of the instance types our table does
        not know (``Notice.resolved``), as the guard's alarms were planned with them. A host that published
        ``GPUUtilization`` while the GPU count of one of the job's types is still unknown is missing evidence
        (how busy its GPUs are per GPU cannot be told), never a host without GPUs."""
        hosts = host_names(job.name, job.total_instance_count)
        defined = [d.name for d in job.algorithm.metric_definitions]
        metrics = progress_metrics(defined, settings.progress_metric_names, normalize_metric_name)
        queries = [
            MetricRead(f"h{i}_{m}", metric, (("Host", host),), "Average")
            for i, host in enumerate(hosts)
            for m, metric in enumerate(HOST_METRICS)
        ]
        queries += [
            MetricRead(f"t{i}", name, ((JOB_DIMENSION, job.name),), "SampleCount")
            for i, name in enumerate(metrics)
        ]
        result = self._metrics.read(queries, start, now)
        missing = list(result.errors)
        sizes = [vcpus(g.instance_type) for g in job.instance_groups]
        known = [n for n in sizes if n is not None]
        # Hosts are assigned to instance groups at random: scale by the smallest vCPU count (a host with more
        # vCPUs then looks busier than it is, never idler); unknown if any group's is unknown.
        smallest = min(known) if known and len(known) == len(sizes) else None
        facts = [
            ((resolved or {}).get(g.instance_type) or instance_facts(g.instance_type), g)
            for g in job.instance_groups
        ]
        counts_of_gpus = [f.gpus for f, _ in facts if f.publishes_gpu_utilization]
        gpus = (min(counts_of_gpus), max(counts_of_gpus)) if counts_of_gpus else None
        host_evidence = tuple(
            HostEvidence(
                host=host,
                vcpus=smallest,
                gpus=gpus,
                series={metric: result.values.get(f"h{i}_{m}") for m, metric in enumerate(HOST_METRICS)},
            )
            for i, host in enumerate(hosts)
        )
        unknown = sorted({f.instance_type for f, _ in facts if f.accelerator is Accelerator.UNKNOWN})
        publishing = [h.host for h in host_evidence if h.values(GPU)]
        if unknown and publishing:
            missing.append(
                f"GPUUtilization of {', '.join(publishing[:5])}{' ...' if len(publishing) > 5 else ''} while the GPU "
                f"count of {', '.join(unknown)} is unknown (neither our table nor EC2 gave it): how busy its GPUs "
                "are per GPU cannot be told"
            )
        counts: dict[str, int | None] = {}
        for i, name in enumerate(metrics):
            values = result.values.get(f"t{i}")
            counts[name] = None if values is None else int(sum(values))
        if logs is None:
            try:
                logs = self._logs.activity(job.name, start, now)
            except AdapterError as exc:
                missing.append(str(exc))
        gpu_hosts = sum(g.instance_count for f, g in facts if f.publishes_gpu_utilization)
        by_count: dict[int, int] = {}
        for f, g in facts:
            if f.publishes_gpu_utilization:
                by_count[f.gpus] = by_count.get(f.gpus, 0) + g.instance_count
        return Evidence(
            start=start,
            end=now,
            hosts=host_evidence,
            gpu_hosts=min(gpu_hosts, len(hosts)) if job.instance_groups else len(hosts),
            gpu_groups=tuple(sorted(by_count.items())),
            metrics=counts,
            logs=logs,
            missing=tuple(missing),
        )
