"""Reading nvidia-smi traces (every supported format) and converting them to SageMaker's per-host,
one-minute GPUUtilization: tiny synthetic traces written in tmp_path."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from smgov.simulation.traces import (
    Sample,
    TraceFormatError,
    is_trace,
    per_minute,
    read_trace,
    utc_seconds,
)

T0 = datetime(2026, 1, 25, 9, 17, tzinfo=UTC).timestamp()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def table(stamp: str, *utils: str) -> str:
    """One default nvidia-smi table (the layout of driver 550-580) with a GPU row per value."""
    rows = "".join(
        f"|   {i}  NVIDIA L40S                    On  |   00000000:4A:00.0 Off |                    0 |\n"
        f"| N/A   27C    P8             32W /  350W |       0MiB /  46068MiB |    {u:>3}      Default |\n"
        "|                                         |                        |                  N/A |\n"
        for i, u in enumerate(utils)
    )
    return (
        f"{stamp}       \n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n"
        "|-----------------------------------------+------------------------+----------------------+\n"
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
        "|=========================================+========================+======================|\n"
        f"{rows}"
        "+-----------------------------------------+------------------------+----------------------+\n"
        "| Processes:                                                                              |\n"
        "|  No running processes found                                                             |\n"
        "+-----------------------------------------------------------------------------------------+\n"
    )


def test_a_query_csv_becomes_the_mean_of_each_minute(tmp_path: Path) -> None:
    # Given a 20-second query log with units in its cells
    path = write(
        tmp_path,
        "eval.csv",
        "timestamp, name, utilization.gpu [%], utilization.memory [%], temperature.gpu\n"
        "2026/01/25 09:17:05.475, NVIDIA H200, 0 %, 0 %, 34\n"
        "2026/01/25 09:17:25.475, NVIDIA H200, 3 %, 0 %, 34\n"
        "2026/01/25 09:17:45.475, NVIDIA H200, 6 %, 0 %, 34\n"
        "2026/01/25 09:18:05.475, NVIDIA H200, 90 %, 0 %, 34\n",
    )
    # When it is read and converted
    trace = read_trace(path)
    series = per_minute(trace.samples)
    # Then each clock minute holds the mean of its samples
    assert trace.format == "csv" and trace.gpus == 1 and len(trace.samples) == 4
    assert series.start == T0
    assert series.values == (3.0, 90.0)


def test_one_row_per_gpu_is_summed_per_sample_like_sagemaker(tmp_path: Path) -> None:
    # Given a two-GPU host logged with an index column (the rows of one query differ by a millisecond)
    path = write(
        tmp_path,
        "two-gpus.csv",
        "timestamp, index, name, utilization.gpu [%], memory.used [MiB]\n"
        "2024/11/23 12:23:29.950, 0, NVIDIA RTX A6000, 92 %, 25073 MiB\n"
        "2024/11/23 12:23:29.951, 1, NVIDIA RTX A6000, 0 %, 15 MiB\n"
        "2024/11/23 12:23:30.950, 0, NVIDIA RTX A6000, 100 %, 25073 MiB\n"
        "2024/11/23 12:23:30.951, 1, NVIDIA RTX A6000, 10 %, 15 MiB\n",
    )
    trace = read_trace(path)
    # Then each sample carries both GPUs and the host value is their sum (0-200 here)
    assert [s.gpus for s in trace.samples] == [(92.0, 0.0), (100.0, 10.0)]
    assert trace.gpus == 2
    assert per_minute(trace.samples).values == (101.0,)


def test_epoch_csv_snapshots_hold_a_minute_the_drifting_logger_skipped(tmp_path: Path) -> None:
    # Given snapshots every 61 s with epoch-second timestamps and bare numbers, from 23:33:58: the one at
    # 23:34:59 is followed by 23:36:00, so clock minute 23:35 gets no sample
    start = 1_762_904_038  # 2025-11-11 23:33:58 UTC
    rows = [(start + 61 * i, u) for i, u in enumerate([0, 40, 50, 60])]
    path = write(
        tmp_path,
        "snapshots.csv",
        "timestamp,memory.used,memory.total,utilization.gpu\n" + "".join(f"{t},1, 24564, {u}\n" for t, u in rows),
    )
    series = per_minute(read_trace(path).samples)
    # Then minute 23:35 holds the snapshot taken just before it (SageMaker publishes every minute)
    assert series.start == utc_seconds("2025-11-11 23:33")
    assert series.values == (0.0, 40.0, 40.0, 50.0, 60.0)


def test_a_logger_outage_is_a_missing_datapoint_not_a_made_up_value(tmp_path: Path) -> None:
    # Given a 2-second logger that stopped for three minutes
    samples = [Sample(T0 + s, (50.0,)) for s in range(0, 60, 2)]
    samples += [Sample(T0 + 240 + s, (50.0,)) for s in range(0, 60, 2)]
    assert per_minute(samples).values == (50.0, None, None, None, 50.0)


def test_table_logs_sum_the_gpu_util_cells_of_each_table(tmp_path: Path) -> None:
    # Given an appended nvidia-smi table log of a two-GPU host and a table cut short at the end
    text = (
        table("Tue Oct 29 19:00:23 2024", "0%", "100%")
        + table("Tue Oct 29 19:00:40 2024", "50%", "30%")
        + table("Tue Oct 29 19:01:23 2024", "N/A", "7%")
        + "Tue Oct 29 19:02:23 2024       \n+------"
    )
    path = write(tmp_path, "loop.log", text)
    trace = read_trace(path)
    assert trace.format == "nvidia-smi table"
    assert [s.gpus for s in trace.samples] == [(0.0, 100.0), (50.0, 30.0), (7.0,)]
    assert per_minute(trace.samples).values == (90.0, 7.0)


def test_only_nvidia_smi_traces_are_traces(tmp_path: Path) -> None:
    # A job's stdout that printed one table somewhere is a companion log, not a trace
    stdout = write(tmp_path, "job.log", "epoch 1 loss 0.3\n" + table("Sat Jan 24 21:52:14 2026", "0%"))
    vmstat = write(tmp_path, "vmstat.log", "r b swpd free\n1 0 0 1000\n")
    log = write(tmp_path, "gpu.log", table("Sat Jan 24 21:52:14 2026", "0%"))
    csv = write(tmp_path, "gpu.csv", "timestamp, utilization.gpu [%]\n2026/01/25 09:17:05.475, 0 %\n")
    assert [is_trace(p) for p in (stdout, vmstat, log, csv)] == [False, False, True, True]
    with pytest.raises(TraceFormatError, match="neither"):
        read_trace(stdout)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timestamp, utilization.gpu [%]\n2026/01/25 09:17:05.475, 0 %, 3\n", "3 cells, the header has 2"),
        ("timestamp, utilization.gpu [%]\nyesterday, 0 %\n", "not a timestamp"),
        ("timestamp, utilization.gpu [%]\n2026/01/25 09:17:05.475, lots\n", "gpu.csv:2"),
    ],
)
def test_malformed_csv_lines_name_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message):
        read_trace(write(tmp_path, "gpu.csv", text))


def test_times_without_a_zone_are_read_as_utc() -> None:
    assert utc_seconds("2026-01-25 09:17") == T0
