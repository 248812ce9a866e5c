"""`smgov calibrate`: choose the idle guard's defaults from real GPU traces and write docs/calibration.md.

The traces live outside the repository (``../shared/gpu_traces``). Without them the command says so and
exits 0 without touching the committed document: it is a maintainer's command, not a test, and a
checkout without the data is normal. Exit 1 when the data choose defaults other than the shipped ones
(update them, see docs/calibration.md) or, with ``--check``, when the committed document is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_DIFFERENT, EXIT_USAGE = 0, 1, 2
TRACE_CANDIDATES = ("../shared/gpu_traces", "../../shared/gpu_traces")
DEFAULT_OUTPUT = "docs/calibration.md"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="replay real GPU traces through the idle alarm for a grid of thresholds and windows",
        description=(
            "Convert the nvidia-smi traces of healthy jobs in ../shared/gpu_traces to SageMaker's per-host "
            "one-minute GPUUtilization, replay them through the simulator's alarm evaluator with the real "
            "planner's alarm for a grid of thresholds and windows, choose the defaults and write the table."
        ),
    )
    parser.add_argument(
        "--traces",
        metavar="DIR",
        help="the trace directory (default: the first of " + ", ".join(TRACE_CANDIDATES) + " that exists)",
    )
    parser.add_argument("--output", metavar="FILE", default=DEFAULT_OUTPUT, help=f"default {DEFAULT_OUTPUT}")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the document differs from the result"
    )
    parser.set_defaults(func=cmd_calibrate)


def find_traces(explicit: str | None, base: Path | None = None) -> tuple[Path | None, list[Path]]:
    """The trace directory to use (None when absent) and every place looked at."""
    here = base or Path.cwd()
    candidates = [Path(explicit)] if explicit else [(here / c).resolve() for c in TRACE_CANDIDATES]
    found = next((c for c in candidates if (c / "SOURCES.md").is_file()), None)
    return found, candidates


def cmd_calibrate(args: argparse.Namespace) -> int:
    from sagemaker_governance.domain.guards.idle import IdlePolicy
    from smgov.simulation.calibration import calibrate
    from smgov.simulation.calibration_report import DEFAULT_FIELDS, render_markdown
    from smgov.simulation.traces import TraceFormatError

    directory, looked = find_traces(args.traces)
    output = Path(args.output)
    if directory is None:
        print(
            "GPU traces not found (looked in: " + ", ".join(str(p) for p in looked) + "): nothing calibrated, "
            f"{output} left unchanged.",
            file=sys.stderr,
        )
        return EXIT_OK
    shipped = IdlePolicy()
    try:
        result = calibrate(directory, shipped)
    except (OSError, TraceFormatError) as exc:
        print(f"cannot read the traces in {directory}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    document = render_markdown(result)
    if args.check:
        current = output.read_text() if output.is_file() else ""
        if current != document:
            print(f"{output} is stale: run `make calibrate` and commit it", file=sys.stderr)
            return EXIT_DIFFERENT
        print(f"{output} is up to date with {directory}")
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(document)
        print(f"replayed {len(result.traces)} traces from {directory}; wrote {output}")
    chosen = {f: getattr(result.chosen, f) for f in DEFAULT_FIELDS}
    print("chosen defaults: " + ", ".join(f"{k}={v:g}" for k, v in chosen.items()))
    current_defaults = {f: getattr(shipped, f) for f in DEFAULT_FIELDS}
    if chosen != current_defaults:
        print(
            "the data choose other defaults than the shipped ones ("
            + ", ".join(f"{k}={v:g}" for k, v in current_defaults.items())
            + "): update domain/guards/idle.py, settings.py, template.yaml and the README (see docs/calibration.md)",
            file=sys.stderr,
        )
        return EXIT_DIFFERENT
    return EXIT_OK
