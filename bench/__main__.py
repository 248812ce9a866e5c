"""``python -m bench [--quick] [--out FILE]``: every figure of BENCHMARKS.md, as JSON and as a table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import SCHEMA
from smgov.cfn_template import REPO_ROOT


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def memory_figure(cold: dict[str, Any] | None, warm: dict[str, Any]) -> dict[str, Any]:
    """Peak memory per handler: RSS after init (cold-start probe) + the largest invocation's allocations."""
    from bench.cost import memory_mb

    out: dict[str, Any] = {}
    functions = set(cold["functions"]) if cold else {v["function"] for v in warm["event_types"].values()}
    for function in sorted(functions):
        kinds = {k: v for k, v in warm["event_types"].items() if v["function"] == function}
        invocation_kb = max((v["peak_alloc_kb"] or 0 for v in kinds.values()), default=None)
        rss = cold["functions"][function]["rss_after_init_mb"] if cold else None
        configured = memory_mb(function)
        peak = round(rss + (invocation_kb or 0) / 1024, 1) if rss is not None else None
        out[function] = {
            "rss_after_init_mb": rss,
            "largest_invocation_alloc_kb": invocation_kb,
            "estimated_peak_mb": peak,
            "memory_size_mb": configured,
            "headroom": round(1 - peak / configured, 2) if peak is not None else None,
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench import burst, coldstart, cost, simulated, size, speed, warm

    quick = args.quick
    build_dir = Path(args.build_dir) if args.build_dir else None
    started = time.monotonic()
    results: dict[str, Any] = {
        "schema": SCHEMA,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if quick else "full",
        "machine": machine(),
    }

    def step(name: str) -> None:
        print(f"bench: {name} ... ({time.monotonic() - started:.0f} s in)", file=sys.stderr, flush=True)

    step("size")
    results["size"] = size.measure(build_dir)
    step("cold start")
    x86_build = Path(args.x86_build_dir) if args.x86_build_dir else None
    results["cold_start"] = coldstart.measure(
        args.runs or (3 if quick else 21), build_dir=build_dir, x86_build=x86_build
    )
    if args.compare_bytecode and results["cold_start"]["bytecode"]:
        step("cold start without bytecode (what a plain `sam build` ships)")
        results["cold_start_source_only"] = coldstart.measure(
            args.runs or (3 if quick else 21), bytecode=False, build_dir=build_dir
        )
    step("warm latency and memory")
    results["warm"] = warm.measure(args.invocations or (5 if quick else 200), 1 if quick else 5)
    results["memory"] = memory_figure(results["cold_start"], results["warm"])
    step("lifecycles")
    results["lifecycles"] = simulated.lifecycle_figures()
    step("cost (fleet)")
    results["cost"] = cost.measure(size=20 if quick else None)
    step("burst")
    results["burst"] = burst.measure((30,) if quick else burst.SIZES)
    step("simulator speed (the demo, a 1,000-job fleet)")
    results["simulator"] = speed.measure(quick=quick)
    results["elapsed_seconds"] = round(time.monotonic() - started, 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few repetitions, a 20-job fleet (smoke run)")
    parser.add_argument("--runs", type=int, help="cold-start runs per function (default 21; quick 3)")
    parser.add_argument("--invocations", type=int, help="warm invocations per event type (default 200; quick 5)")
    parser.add_argument("--build-dir", help="the arm64 `sam build` output (default .aws-sam/build)")
    parser.add_argument(
        "--x86-build-dir",
        help="an x86_64 `sam build` of the same template for the cold start (default: one is made)",
    )
    parser.add_argument(
        "--compare-bytecode",
        action="store_true",
        help="also measure cold start without the compiled bytecode `make build` adds",
    )
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results.json"))
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    args = parser.parse_args(argv)
    from bench.report import render

    results = run(args)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2) if args.json else render(results))
    print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
