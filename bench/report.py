"""The readable table of ``bench/results.json``."""

from __future__ import annotations

from typing import Any


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        pairs = enumerate(zip(row, widths, strict=True))
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    return [line(cells[0]), "  ".join("-" * w for w in widths), *[line(r) for r in cells[1:]]]


def _ok(flag: bool) -> str:
    return "ok" if flag else "ABOVE TARGET"


def render(results: dict[str, Any]) -> str:
    out: list[str] = [f"sagemaker-governance benchmarks ({results['mode']}, {results['generated']})", ""]
    cold = results["cold_start"]
    out.append(
        f"Cold start: median of {cold['runs']} fresh python{next(iter(cold['functions'].values()))['python']} "
        f"processes, CPU ms; bytecode shipped: {cold['bytecode']}; target ratio <= {cold['target_ratio']}"
    )
    rows = []
    for name, f in cold["functions"].items():
        rows.append(
            [
                name,
                f["init_cpu_ms"],
                f["baseline_init_cpu_ms"],
                f["ratio"],
                f["ratio_with_interpreter_start"],
                _ok(f["ratio"] <= cold["target_ratio"]),
            ]
        )
    out += _table(["function", "init", "boto3 baseline", "ratio", "ratio incl. interpreter", ""], rows)
    if "cold_start_source_only" in results:
        src = results["cold_start_source_only"]["functions"]
        out.append(
            "  without bytecode (plain `sam build`): "
            + ", ".join(
                f"{n} {f['init_cpu_ms']} ms vs {f['baseline_init_cpu_ms']} (ratio {f['ratio']})"
                for n, f in src.items()
            )
        )
    out.append("")
    warm = results["warm"]
    out.append(f"Warm latency (ms, AWS answered in-process, Python {warm['python']})")
    rows = [
        [
            k,
            v["function"],
            v["invocations"],
            v["p50_ms"],
            v["p99_ms"],
            v["cpu_p50_ms"],
            v["cpu_p99_ms"],
            sum(v["aws_calls"].values()),
        ]
        for k, v in warm["event_types"].items()
    ]
    out += _table(["event", "function", "n", "p50", "p99", "cpu p50", "cpu p99", "AWS calls"], rows)
    out.append("")
    out.append("Peak memory (MB)")
    rows = [
        [
            k,
            v["rss_after_init_mb"],
            v["largest_invocation_alloc_kb"],
            v["estimated_peak_mb"],
            v["memory_size_mb"],
            f"{v['headroom']:.0%}" if v["headroom"] is not None else "-",
        ]
        for k, v in results["memory"].items()
    ]
    out += _table(["function", "RSS after init", "invocation KB", "peak", "MemorySize", "headroom"], rows)
    out.append("")
    out.append("Per job lifecycle (simulator counters)")
    rows = []
    for k, v in results["lifecycles"].items():
        calls = ", ".join(f"{op.split(':')[1]} {n}" for op, n in v["aws_calls"].items())
        scheduled = sum(v["scheduled_invocations"].values())
        rows.append([k, v["job_invocations"], scheduled, v["aws_calls_total"], v["alarms_left"], calls])
    out += _table(["lifecycle", "invocations", "+ scheduled", "AWS calls", "alarms left", "calls"], rows)
    target = results["lifecycles"]["healthy"]["target"]
    out.append(
        f"  healthy target: <= {target['max_invocations']} invocations: {_ok(target['invocations_ok'])}; "
        f"alarm writes only create + delete (+ re-arm): "
        f"{_ok(target['only_create_and_delete_of_its_alarm'])}"
    )
    out.append("")
    c = results["cost"]
    out.append(
        f"Cost per 1,000 jobs ({c['scenario']} scenario, {c['jobs']} jobs, {c['architecture']}, {c['prices']})"
    )
    out += _table(["item", "USD"], [[k, f"{v:.4f}"] for k, v in c["per_1000_jobs_usd"].items()])
    out.append(
        f"  spent {c['spent_per_1000_jobs_usd']:.2f} USD, saved {c['saved_per_1000_jobs_usd']:,.0f} USD per 1,000 jobs: "
        f"saved/spent = {c['saved_to_spent']:,}x (fixed: "
        + ", ".join(f"{k} {v} USD/month" for k, v in c["fixed_monthly_usd"].items())
        + ")"
    )
    out.append("")
    sim = results.get("simulator")
    if sim is not None:
        out.append(
            f"Simulator speed (wall clock): the demo ({len(sim['demo_scenarios'])} scenarios) "
            f"{sim['demo_seconds']} s, CPU {sim.get('demo_cpu_seconds', '?')} s (goal < {sim['demo_target_seconds']} s) "
            f"{_ok(sim['demo_seconds'] < sim['demo_target_seconds'])}; a {sim['fleet_jobs']:,}-job fleet "
            f"({sim['fleet_jobs_run']:,} jobs with clones, {sim['fleet_lambda_invocations']:,} invocations, "
            f"{sim['fleet_aws_calls']:,} AWS calls) {sim['fleet_seconds']} s, CPU {sim.get('fleet_cpu_seconds', '?')} s "
            f"(goal < {sim['fleet_target_seconds']} s) "
            f"{_ok(sim['fleet_seconds'] < sim['fleet_target_seconds'])}"
        )
        out.append("")
    b = results["burst"]
    out.append(
        f"Burst ({', '.join(map(str, b['sizes']))} jobs in one minute, PutMetricAlarm {b['put_metric_alarm_rate_per_second']}/s): "
        + (b["reason"] if b["result"] is None else "")
    )
    if b["result"] is not None:
        rows = [
            [
                n,
                r["minutes_until_all_alarms"],
                b["lower_bound_minutes"][n],
                r["alarms"],
                r["lost"],
                r["put_metric_alarm"]["throttled"],
                r["retry_sleeps"],
                r["lambda_errors"],
            ]
            for n, r in b["result"].items()
        ]
        out += _table(
            [
                "jobs",
                "minutes until all alarms",
                "least possible",
                "alarms",
                "lost",
                "throttled",
                "retry sleeps",
                "errors",
            ],
            rows,
        )
    out.append("")
    out.append("Size (.aws-sam/build)")
    rows = [
        [
            k,
            v["files"],
            v["unzipped_mb"],
            v["zipped_mb"],
            v.get("with_layers_unzipped_mb", "-"),
            f"{v['share_of_250mb_limit']:.1%}" if "share_of_250mb_limit" in v else "-",
        ]
        for k, v in results["size"]["artifacts"].items()
    ]
    out += _table(["artifact", "files", "unzipped MB", "zipped MB", "with layer MB", "of 250 MB"], rows)
    return "\n".join(out)
