"""Ground truth for the reliability invariants that need the simulator's eyes (``report.invariants``
computes the rest from the run's jobs and deliveries).

- **missing alarms**: a GPU job still in the same Training stint ``alarm_settle_minutes`` after entering
  it, with no alarm of this stack watching any of its hosts;
- **orphan alarms**: this stack's alarms still in CloudWatch at the end of the run whose job has ended
  or never existed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any

from sagemaker_governance.domain.guards.idle import IDLE_RULE_ID
from smgov.simulation.alarms import AlarmEvaluator
from smgov.simulation.engine.jobs import JobRun

ALARM_GRACE_MINUTES = 5  # a job in Training must have its alarm this long after (+ one schedule period)


class InvariantWatch:
    def __init__(
        self,
        jobs: Mapping[str, JobRun],
        evaluator: AlarmEvaluator,
        *,
        alarm_prefix: Callable[[], str | None],
        settle_minutes: Callable[[], int],
        watching: Callable[[], bool],
    ) -> None:
        self.jobs = jobs
        self.evaluator = evaluator
        self.alarm_prefix = alarm_prefix  # this stack's alarm-name prefix (None: no idle guard deployed)
        self.settle_minutes = settle_minutes  # the alarm settle (see ``Simulation.alarm_settle_minutes``)
        self.watching = watching  # some function receives Training events
        self.missing: set[str] = set()
        self.orphans: list[str] = []
        self._checks: list[tuple[int, int, str, int]] = []  # (due minute, seq, job, token)
        self._seq = 0

    def entered_training(self, job: JobRun, now: int) -> None:
        if job.gpu_hosts:
            self._seq += 1
            heapq.heappush(self._checks, (now + self.settle_minutes(), self._seq, job.name, job.token))

    def next_check(self) -> int | None:
        return self._checks[0][0] if self._checks else None

    def check(self, minute: int) -> None:
        """A GPU job still in the same Training stint ``alarm_settle_minutes`` after entering it must be
        watched by one of this stack's alarms."""
        while self._checks and self._checks[0][0] <= minute:
            _, _, name, token = heapq.heappop(self._checks)
            job = self.jobs[name]
            if job.token != token or job.phase != "training" or not self.watching():
                continue
            prefix = self.alarm_prefix()
            if prefix is None:
                continue
            watched = self._watched_hosts(prefix)
            if not any(host in watched for host, _ in job.gpu_hosts):
                self.missing.add(name)

    def _watched_hosts(self, prefix: str) -> set[str]:
        hosts: set[str] = set()
        for name, alarm in self.evaluator.metric_alarms.items():
            if name.startswith(prefix):
                hosts.update(value for key in alarm.keys for _, value in key[2])
        return hosts

    def find_orphans(self, cloudwatch: Any) -> None:
        """This stack's alarms left in CloudWatch whose job has ended (or never existed)."""
        prefix = self.alarm_prefix()
        if prefix is None or cloudwatch is None:
            return
        names: list[str] = []
        for page in cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        ):
            names += [a["AlarmName"] for a in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]]
        for name in names:
            rest = name[len(prefix) :]  # <job>, or <job> and a suffix (child alarms, progress alarms)
            owner = max((n for n in self.jobs if rest.startswith(n)), key=len, default=None)
            job = self.jobs.get(owner) if owner else None
            if job is None or job.ended:
                self.orphans.append(name)

    def ground_truth(self, records: list[Any]) -> dict[str, list[str]]:
        deliberate = {  # the service decided, on the record, that this job gets no alarm (policy)
            r.job_name
            for r in records
            if r.rule == IDLE_RULE_ID and r.action == "none" and r.outcome.value in ("no-action", "exempted")
        }
        return {"orphan_alarms": sorted(self.orphans), "missing_alarms": sorted(self.missing - deliberate)}
