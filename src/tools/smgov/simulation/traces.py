"""Real ``nvidia-smi`` GPU-utilization traces, read in place and turned into what SageMaker publishes.

Two kinds of file are read (the format is recognised from the content, not the name):

* **CSV** written by ``nvidia-smi --query-gpu=... --format=csv -l N``: a header naming a ``timestamp``
  and a ``utilization.gpu`` column (with or without `` [%]``), optionally an ``index`` column (one row
  per GPU per sample). Timestamps are ``YYYY/MM/DD HH:MM:SS[.fff]`` or Unix epoch seconds; values may
  carry units (``92 %``).
* **Table logs**: the default ``nvidia-smi`` table appended again and again (``nvidia-smi >> log``),
  starting with a date line; each table after a date line such as ``Sat Jan 24 21:52:14 2026``; one ``GPU-Util`` cell per GPU.

Times without a zone are read as UTC: only the minutes between samples matter here.

``per_minute`` converts a trace to SageMaker's ``GPUUtilization`` of the host: one value per minute,
the **sum over the host's GPUs** (0-100 x GPU count), the mean of the samples taken in that minute. A
minute without a sample takes the previous sample's value when the samples around it are no further
apart than the trace's usual spacing (x 1.5): a logger every 61 s skips a clock minute now and then,
which SageMaker would not. A longer gap is a missing datapoint (the logger was not running).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

DATE_LINE = re.compile(r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}\s*$", re.M)
# "|       0MiB /  46068MiB |      0%      Default |": the memory cell, then the GPU-Util cell
TABLE_UTIL = re.compile(r"MiB\s*/\s*\d+\s*MiB\s*\|\s*(\d+|N/A)\s*%?\s")
CSV_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")
HOLD_FACTOR = 1.5


class TraceFormatError(ValueError):
    """A file that is not an nvidia-smi trace this module can read, or a malformed line in one."""


@dataclass(frozen=True)
class Sample:
    at: float  # epoch seconds (UTC)
    gpus: tuple[float, ...]  # utilization of each GPU, percent

    @property
    def total(self) -> float:
        """The host's value as SageMaker reports it: the sum over its GPUs."""
        return sum(self.gpus)


@dataclass(frozen=True)
class Trace:
    name: str
    format: str  # "csv" or "nvidia-smi table"
    samples: tuple[Sample, ...]

    @property
    def gpus(self) -> int:
        return max((len(s.gpus) for s in self.samples), default=0)

    @property
    def spacing_seconds(self) -> float:
        """The usual time between two samples (median)."""
        gaps = [b.at - a.at for a, b in itertools.pairwise(self.samples) if b.at > a.at]
        return statistics.median(gaps) if gaps else 60.0

    def until(self, moment: float) -> Trace:
        """The samples taken before ``moment`` (epoch seconds)."""
        return Trace(self.name, self.format, tuple(s for s in self.samples if s.at < moment))


def utc_seconds(text: str) -> float:
    """``2026-02-02 02:33`` (or any ISO form without a zone) as UTC epoch seconds."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def is_trace(path: Path) -> bool:
    """Whether ``path`` looks like an nvidia-smi utilization trace (companion logs are not)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return _kind(head) is not None


def _kind(text: str) -> str | None:
    first = text.split("\n", 1)[0]
    if "utilization.gpu" in first and "timestamp" in first:
        return "csv"
    if DATE_LINE.match(first) and "NVIDIA-SMI" in text[:4096]:  # a log that starts with a table
        return "nvidia-smi table"
    return None


def read_trace(path: Path) -> Trace:
    text = path.read_text(encoding="utf-8", errors="replace")
    kind = _kind(text)
    if kind == "csv":
        return Trace(path.name, kind, tuple(_csv_samples(text, path.name)))
    if kind == "nvidia-smi table":
        return Trace(path.name, kind, tuple(_table_samples(text, path.name)))
    raise TraceFormatError(f"{path.name}: neither an nvidia-smi CSV (timestamp, utilization.gpu) nor a table log")


def _number(cell: str) -> float | None:
    value = cell.strip().rstrip("%").strip()
    if value in ("", "N/A", "[N/A]", "[Not Supported]"):
        return None
    return float(value)


def _csv_time(cell: str, where: str) -> float:
    text = cell.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    for fmt in CSV_TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise TraceFormatError(f"{where}: not a timestamp: {text!r}")


def _csv_samples(text: str, name: str) -> list[Sample]:
    lines = text.splitlines()
    header = [h.strip().split(" ")[0] for h in lines[0].split(",")]
    try:
        time_col, util_col = header.index("timestamp"), header.index("utilization.gpu")
    except ValueError as exc:
        raise TraceFormatError(f"{name}: the header has no timestamp or utilization.gpu column") from exc
    index_col = header.index("index") if "index" in header else None
    samples: list[Sample] = []
    at: float | None = None
    gpus: list[float] = []
    last_index = -1
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split(",")
        where = f"{name}:{number}"
        if len(cells) != len(header):
            raise TraceFormatError(f"{where}: {len(cells)} cells, the header has {len(header)}")
        try:
            value = _number(cells[util_col])
            index = int(cells[index_col]) if index_col is not None else 0
        except ValueError as exc:
            raise TraceFormatError(f"{where}: {exc}") from exc
        moment = _csv_time(cells[time_col], where)
        if at is not None and index <= last_index:  # the GPUs of one query come in index order
            samples.append(Sample(at, tuple(gpus)))
            at, gpus = None, []
        if at is None:
            at = moment
        last_index = index
        if value is not None:
            gpus.append(value)
    if at is not None:
        samples.append(Sample(at, tuple(gpus)))
    return [s for s in samples if s.gpus]


def _table_samples(text: str, name: str) -> list[Sample]:
    starts = list(DATE_LINE.finditer(text))
    samples: list[Sample] = []
    for i, match in enumerate(starts):
        block = text[match.end() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        values = [float(v) for v in TABLE_UTIL.findall(block) if v != "N/A"]
        if not values:
            continue  # a table cut short (the logger was killed mid-write)
        stamp = datetime.strptime(" ".join(match.group(0).split()), "%a %b %d %H:%M:%S %Y")
        samples.append(Sample(stamp.replace(tzinfo=UTC).timestamp(), tuple(values)))
    if not samples:
        raise TraceFormatError(f"{name}: no GPU-Util cell in any table")
    return samples


@dataclass(frozen=True)
class MinuteSeries:
    """A host's ``GPUUtilization`` as SageMaker would publish it: minute ``i`` starts at ``start + 60 i``."""

    start: float  # epoch seconds, on a whole minute
    values: tuple[float | None, ...]

    def minute_of(self, moment: float) -> float:
        """Minutes from the series' start to ``moment`` (epoch seconds)."""
        return (moment - self.start) / 60


def per_minute(samples: Sequence[Sample]) -> MinuteSeries:
    """One value per minute, the mean of the host sums sampled in it (see the module docstring)."""
    if not samples:
        return MinuteSeries(0.0, ())
    ordered = sorted(samples, key=lambda s: s.at)
    start = ordered[0].at // 60 * 60
    buckets: dict[int, list[float]] = {}
    for sample in ordered:
        buckets.setdefault(int((sample.at - start) // 60), []).append(sample.total)
    gaps = [b.at - a.at for a, b in itertools.pairwise(ordered) if b.at > a.at]
    usual = statistics.median(gaps) if gaps else 60.0
    values: list[float | None] = []
    previous = 0  # index into ordered of the latest sample before the current minute
    for minute in range(max(buckets) + 1):
        if minute in buckets:
            values.append(statistics.fmean(buckets[minute]))
            continue
        minute_start = start + 60 * minute
        while previous + 1 < len(ordered) and ordered[previous + 1].at < minute_start:
            previous += 1
        before, after = ordered[previous], ordered[min(previous + 1, len(ordered) - 1)]
        values.append(before.total if after.at - before.at <= usual * HOLD_FACTOR else None)
    return MinuteSeries(start, tuple(values))
