"""The stall judge's reads, answered offline from one file (``smgov explain ALARM --evidence FILE``).

The file holds what the stopper would read about the job, in the shapes AWS answers with, so that it can
be assembled from a saved ``aws cloudwatch get-metric-data`` / ``aws logs filter-log-events`` answer or
written by hand::

    {
      "metrics": [                                   # one entry per series (GetMetricData's MetricDataResults,
        {"MetricName": "GPUUtilization",             #  with the metric it is of: CloudWatch's Metric shape)
         "Dimensions": [{"Name": "Host", "Value": "<job>/algo-1"}],
         "Timestamps": ["2025-11-21T10:10:00Z", ...],   # ISO 8601 or epoch milliseconds
         "Values": [0.0, ...]}
      ],
      "log_streams": ["<job>/algo-1-1763719380"],   # DescribeLogStreams' logStreamName of the job's streams
      "log_events": [                                # FilterLogEvents' events (any, the reader filters)
        {"logStreamName": "<job>/algo-1-1763719380", "timestamp": 1763719800000, "message": "step 10"}
      ],
      "checkpoint_objects": [                        # ListObjectsV2's Contents under the job's
        {"Key": "<prefix>/shard-3.distcp",           #  CheckpointConfig.S3Uri (optional)
         "LastModified": "2025-11-21T10:36:00Z"}
      ]
    }

Host series (``GPUUtilization``, ``GPUMemoryUtilization``, ``CPUUtilization``, ``MemoryUtilization``,
``DiskUtilization``, dimension ``Host``) are one-minute values as SageMaker publishes them; a training metric (dimension
``TrainingJobName``) lists each datapoint it published (the judge counts them per minute, as its
``SampleCount`` read does). A series the file does not name was read and is empty (no datapoint); leave
out ``log_streams`` to say the log read failed. Leave out ``checkpoint_objects`` for a deployment that
lists no checkpoint location (no ``CheckpointBucketPattern``): the judge then does not ask. Only what lies
in the judge's window counts, as in AWS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from statistics import fmean
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sagemaker_governance.adapters.checkpoints import location_folder
from sagemaker_governance.domain.errors import AdapterError
from sagemaker_governance.domain.failure_evidence import CheckpointProgress
from sagemaker_governance.domain.job import parse_timestamp
from sagemaker_governance.domain.stall_judge import JudgeCode, LogEvidence, LogRhythm, MetricRead, MetricReadResult


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Dimension(_Model):
    name: str = Field(alias="Name")
    value: str = Field(alias="Value")


class Series(_Model):
    metric: str = Field(alias="MetricName")
    dimensions: tuple[Dimension, ...] = Field(alias="Dimensions")
    timestamps: tuple[datetime, ...] = Field(alias="Timestamps")
    values: tuple[float, ...] = Field(alias="Values")

    @field_validator("timestamps", mode="before")
    @classmethod
    def _times(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return value
        return tuple(parse_timestamp(v) for v in value)

    @model_validator(mode="after")
    def _paired(self) -> Series:
        if len(self.timestamps) != len(self.values):
            raise ValueError(f"{self.metric}: Timestamps and Values differ in length")
        return self

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.metric, tuple(sorted((d.name, d.value) for d in self.dimensions))


class LogEvent(_Model):
    stream: str = Field(alias="logStreamName")
    timestamp: datetime
    message: str = ""

    @field_validator("timestamp", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return parse_timestamp(value)


class S3Object(_Model):
    key: str = Field(alias="Key")
    last_modified: datetime = Field(alias="LastModified")

    @field_validator("last_modified", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return parse_timestamp(value)


class StallEvidenceFile(_Model):
    """The judge's reads as saved answers (the module docstring has the shape)."""

    metrics: tuple[Series, ...] = ()
    log_streams: tuple[str, ...] | None = None
    log_events: tuple[LogEvent, ...] = ()
    checkpoint_objects: tuple[S3Object, ...] | None = None


def _minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


class OfflineMetricData:
    """``MetricReadPort`` over the file: per query, its series' minutes in ``[start, end)``, oldest first;
    ``Average`` is the mean of a minute's values, ``SampleCount`` how many there are."""

    def __init__(self, evidence: StallEvidenceFile) -> None:
        self._series = {s.key(): s for s in evidence.metrics}

    def read(
        self, queries: Sequence[MetricRead], start: datetime, end: datetime, period: int = 60
    ) -> MetricReadResult:
        values: dict[str, tuple[float, ...] | None] = {}
        times: dict[str, tuple[datetime, ...]] = {}
        for query in queries:
            series = self._series.get((query.metric, tuple(sorted(query.dimensions))))
            by_minute: dict[datetime, list[float]] = defaultdict(list)
            if series is not None:
                for t, v in zip(series.timestamps, series.values, strict=True):
                    if start <= t < end:
                        by_minute[_minute(t)].append(v)
            minutes = sorted(by_minute)
            if query.stat == "SampleCount":
                values[query.id] = tuple(float(len(by_minute[m])) for m in minutes)
            else:
                values[query.id] = tuple(fmean(by_minute[m]) for m in minutes)
            times[query.id] = tuple(minutes)
        return MetricReadResult(values, (), times)


class OfflineLogActivity:
    """``LogActivityPort`` over the file: the job's streams (``<job>/`` prefix) and its first line in the
    window; no ``log_streams`` at all: the read failed (as a throttled or denied read would)."""

    def __init__(self, evidence: StallEvidenceFile) -> None:
        self._evidence = evidence

    def activity(self, job_name: str, start: datetime, end: datetime) -> LogEvidence:
        if self._evidence.log_streams is None:
            raise AdapterError("the evidence file has no log_streams: the job's log streams were not read")
        prefix = f"{job_name}/"
        streams = [s for s in self._evidence.log_streams if s.startswith(prefix)]
        lines = sorted(
            (e for e in self._evidence.log_events if e.stream.startswith(prefix) and start <= e.timestamp < end),
            key=lambda e: e.timestamp,
        )
        first = lines[0] if lines else None
        return LogEvidence(
            streams=len(streams),
            line_at=first.timestamp if first else None,
            line_stream=first.stream if first else None,
        )

    def rhythm(self, job_name: str, start: datetime, end: datetime) -> LogRhythm:
        """The job's lines in the file: a file that holds fewer lines than the job wrote shows longer gaps,
        so a longer silence is needed to judge it hung (never a shorter one)."""
        if self._evidence.log_streams is None:
            raise AdapterError("the evidence file has no log_streams: the job's log lines were not read")
        prefix = f"{job_name}/"
        times = [e.timestamp for e in self._evidence.log_events if e.stream.startswith(prefix)]
        return LogRhythm.of(start, end, times, complete=True)


class OfflineCheckpoints:
    """``CheckpointWritesPort`` over the file: the objects under the job's location written since then."""

    def __init__(self, evidence: StallEvidenceFile) -> None:
        self._objects = evidence.checkpoint_objects or ()

    def progress(self, s3_uri: str, since: datetime) -> CheckpointProgress:
        prefix = location_folder(s3_uri.removeprefix("s3://").partition("/")[2])  # as the stopper lists it
        under = [o for o in self._objects if o.key.startswith(prefix)]
        written = tuple(sorted(o.last_modified for o in under if o.last_modified >= since))
        latest = max((o.last_modified for o in under), default=None)
        return CheckpointProgress(
            checked=True, written=len(written), total=len(under), latest=latest, written_at=written
        )


def load_evidence(raw: Mapping[str, Any]) -> StallEvidenceFile:
    return StallEvidenceFile.model_validate(raw)


def judged(code: str, reason: str, evidence: Mapping[str, Any]) -> dict[str, Any] | None:
    """What ``smgov explain`` shows of a stopper decision: the judge's verdict (``stop``, ``veto``,
    ``insufficient-evidence``, ``wait``: a trigger the judge widened to what a stop needs), the decision's
    code, why, and each signal's summary as the audit record keeps it (``evidence.judge``); None when the
    judge did not run on this decision."""
    signals = evidence.get("judge")
    if not isinstance(signals, Mapping):
        return None
    if code == JudgeCode.INSUFFICIENT:
        verdict = "insufficient-evidence"
    elif code == JudgeCode.WAIT:
        verdict = "wait"
    elif code in {c.value for c in JudgeCode}:
        verdict = "veto"
    else:
        verdict = "stop"
    out: dict[str, Any] = {"verdict": verdict, "code": code, "why": reason, "signals": dict(signals)}
    if evidence.get("rejudge"):
        out["rejudge"] = evidence["rejudge"]
    return out
