"""Training jobs' log streams, as SageMaker writes them to CloudWatch Logs.

Log group ``/aws/sagemaker/TrainingJobs``; one stream per host and container start,
``<job>/algo-<n>-<epoch>`` (``<epoch>``: the Unix time in seconds the algorithm container started; a
Spot restart or a retry starts a new container, hence a new stream). A stream exists from the moment
the job enters Training (the container starts); while the script trains it writes a line every
``log_every_minutes`` (per phase and per host; silent while stalled unless the script says otherwise,
and in phases with ``log_every_minutes: 0``). A failing process writes its tail (``failure_tail``); one
that dies before the job fails (``failure_host_silent_minutes``) writes nothing more (``silence``) until
its host's container starts again.

Lines are kept as cadence segments and written to moto's CloudWatch Logs lazily: whenever the service
calls a CloudWatch Logs API, the lines of the last ``WINDOW_MINUTES`` that are not there yet are put
first, in every stream the request can read (those it names or whose names start with its prefix; every
stream when it names none), so the service reads what CloudWatch would hold (older lines are not written: a reader
of a long job's full history sees only the recent window). With the late-logs fault (``faults.py``,
``LateLogs``) a failed job's last lines are held back (``Stream.held``) and put only once they have arrived.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from smgov.simulation.engine.clock import VirtualClock
from smgov.simulation.faults import LATE_LOG_TAIL_MINUTES, LateLogs

GROUP = "/aws/sagemaker/TrainingJobs"
WINDOW_MINUTES = 240
MAX_BATCH = 10_000  # PutLogEvents: at most 10,000 events per request


@dataclass
class Stream:
    name: str
    host: str
    cadence: list[list[int | None]] = field(default_factory=list)  # [start, end, every]
    extra: list[tuple[int, str]] = field(default_factory=list)  # (minute, text): failure tails, in order
    written_until: int = 0  # cadence lines before this minute are in moto
    extra_put: int = 0  # the first ``extra_put`` failure-tail lines are in moto
    created: bool = False
    # late-logs: (from, arrival): the lines from minute ``from`` on are not in CloudWatch Logs before ``arrival``
    held: tuple[int, int] | None = None

    def minutes(self, start: int, end: int) -> Iterator[int]:
        """The minutes in ``[start, end)`` with a cadence line, in order."""
        for begin, stop, every in self.cadence:
            assert begin is not None and every is not None
            lo, hi = max(begin, start), end if stop is None else min(stop, end)
            first = begin + -(-(lo - begin) // every) * every
            yield from range(first, hi, every)

    def last_line(self, until: int) -> int | None:
        """The minute of the last line before ``until`` (None: none yet)."""
        last = [m for m, _ in self.extra if m < until]
        for begin, stop, every in self.cadence:
            assert begin is not None and every is not None
            hi = until if stop is None else min(stop, until)
            if hi > begin:
                last.append(begin + (hi - 1 - begin) // every * every)
        return max(last) if last else None


class LogStreams:
    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.streams: dict[str, Stream] = {}
        self._current: dict[str, Stream] = {}  # host -> its open stream
        self._dead: set[str] = set()  # hosts whose process died: no line until their container starts again
        # The streams' names in the order they were first started (``streams``' own order), each with its
        # place, and the names each prefix a request gave has matched so far (names only ever come): a
        # flush for one job's streams looks only at those, not at every stream of the fleet.
        self._order: dict[str, int] = {}
        self._names: list[str] = []
        self._by_prefix: dict[str, tuple[int, list[str]]] = {}
        self.late: LateLogs | None = None  # the late-logs fault, when injected

    def failed(self, hosts: list[str], now: int) -> None:
        """The job of ``hosts`` ended ``Failed`` at ``now`` (after its failure tails were written): with the
        late-logs fault, its streams' lines of the last ``LATE_LOG_TAIL_MINUTES`` arrive later."""
        arrival = self.late.arrival(now) if self.late is not None else None
        if arrival is None:
            return
        for host in hosts:
            self.hold(host, now, arrival)

    def hold(self, host: str, now: int, arrival: int, since: int | None = None) -> None:
        """The host's lines of the last ``LATE_LOG_TAIL_MINUTES`` before ``now``, and those from ``since`` on when
        earlier (the last lines of a process that died before the job ended), reach CloudWatch Logs at
        ``arrival``, not before (a later hold of the same lines keeps the later arrival and the earlier start)."""
        start = now - LATE_LOG_TAIL_MINUTES if since is None else min(since, now - LATE_LOG_TAIL_MINUTES)
        for stream in self.of(host):
            held = (
                (start, arrival)
                if stream.held is None
                else (min(start, stream.held[0]), max(arrival, stream.held[1]))
            )
            stream.held = held

    def start(self, host: str, now: int) -> Stream:
        """The host's algorithm container starts: a new stream."""
        self.stop(host, now)
        self._dead.discard(host)
        epoch = int(self.clock.at(now).timestamp())
        stream = Stream(f"{host}-{epoch}", host)
        self.streams[stream.name] = stream
        if stream.name not in self._order:
            self._order[stream.name] = len(self._names)
            self._names.append(stream.name)
        self._current[host] = stream
        return stream

    def cadence(self, host: str, every: int, now: int) -> None:
        """From ``now`` on the host writes a line every ``every`` minutes (0: none)."""
        if host in self._dead:
            return
        stream = self._current.get(host)
        if stream is None:
            if every <= 0:
                return
            stream = self.start(host, now)
        if stream.cadence and stream.cadence[-1][1] is None:
            if stream.cadence[-1][2] == every:
                return
            stream.cadence[-1][1] = now
        if every > 0:
            stream.cadence.append([now, None, every])

    def write(self, host: str, now: int, lines: tuple[str, ...]) -> None:
        stream = self._current.get(host) or self.start(host, now)
        stream.extra += [(now, text) for text in lines]

    def silence(self, host: str, now: int) -> None:
        """The host's process died (its container may linger): its stream gets no more lines."""
        self.stop(host, now)
        self._dead.add(host)

    def stop(self, host: str, now: int) -> None:
        """The host's container is gone: its stream gets no more lines."""
        stream = self._current.pop(host, None)
        if stream is not None and stream.cadence and stream.cadence[-1][1] is None:
            stream.cadence[-1][1] = now

    def of(self, host: str) -> list[Stream]:
        return [s for s in self.streams.values() if s.host == host]

    def lines(self, stream: Stream, start: int, end: int) -> list[tuple[int, str]]:
        """The stream's lines in ``[start, end)``, oldest first."""
        host = stream.host.rsplit("/", 1)[-1]
        out = [(m, f"[{host}] training: minute {m}") for m in stream.minutes(start, end)]
        out += [(m, text) for m, text in stream.extra if start <= m < end]
        return sorted(out, key=lambda line: line[0])

    def flush(self, logs: Any, now: int, *, names: frozenset[str] = frozenset(), prefix: str | None = None) -> int:
        """Put the streams' lines into CloudWatch Logs (within the window); the number put. Cadence lines
        before ``now``; failure tails up to ``now`` included: a process writes its last lines before it
        exits, so they are in CloudWatch Logs by the time SageMaker reports the job ``Failed`` (read in the
        same virtual minute). ``names``, ``prefix``: only the streams a request reads (all when neither)."""
        put = 0
        for stream in self._selected(names, prefix):
            held_from, until = now + 1, now  # lines before held_from are in; cadence lines before ``until``
            if stream.held is not None and now < stream.held[1]:  # late-logs: the last lines have not arrived
                held_from = until = min(now, stream.held[0])
            start = max(stream.written_until, now - WINDOW_MINUTES)
            host = stream.host.rsplit("/", 1)[-1]
            lines = [(m, f"[{host}] training: minute {m}") for m in stream.minutes(start, until)]
            tails = stream.extra[stream.extra_put :]
            lines += [(m, text) for m, text in tails if now - WINDOW_MINUTES <= m < held_from]
            stream.extra_put += sum(1 for m, _ in tails if m < held_from)  # tails are in order: a prefix
            lines.sort(key=lambda line: line[0])
            if stream.held is not None and now >= stream.held[1]:  # arrived: put now, late
                if self.late is not None:
                    self.late.put(sum(1 for m, _ in lines if m >= stream.held[0]))
                stream.held = None
            if not stream.created:
                logs.create_log_stream(logGroupName=GROUP, logStreamName=stream.name)
                stream.created = True
            stream.written_until = max(stream.written_until, until)
            for first in range(0, len(lines), MAX_BATCH):
                batch = lines[first : first + MAX_BATCH]
                logs.put_log_events(
                    logGroupName=GROUP,
                    logStreamName=stream.name,
                    logEvents=[
                        {"timestamp": int(self.clock.at(m).timestamp() * 1000), "message": text}
                        for m, text in batch
                    ],
                )
                put += len(batch)
        return put

    def _selected(self, names: frozenset[str], prefix: str | None) -> list[Stream]:
        """The streams named (all when none) whose names start with ``prefix`` (any when None), in
        ``streams``' order: those a request reads."""
        if names:
            chosen = sorted((name for name in names if name in self.streams), key=self._order.__getitem__)
        elif prefix:
            seen, matched = self._by_prefix.get(prefix, (0, []))
            if seen < len(self._names):
                matched = matched + [n for n in self._names[seen:] if n.startswith(prefix)]
                self._by_prefix[prefix] = (len(self._names), matched)
            chosen = matched
        else:
            return list(self.streams.values())
        return [self.streams[name] for name in chosen if not prefix or name.startswith(prefix)]
