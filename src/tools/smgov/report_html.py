"""A simulation report as one self-contained HTML page: totals at the top, then per job the GPU
utilization over time with the alarm threshold and every governance action marked on the timeline.

No scripts, no external resources (a Content-Security-Policy forbids them), inline SVG charts; every
piece of text from the report is HTML-escaped.

Input: the object ``smgov simulate --json`` prints (extra keys are ignored), or a list of them::

    {
      "scenario": "holiday-weekend",
      "jobs": [
        {
          "name": "llm-pretrain",
          "final_status": "Stopped",
          "actions": [{"minute": 12, "action": "create-alarm", "rule": "idle-guard"}, ...],
          "cost_usd": 412.0, "baseline_cost_usd": 17280.0, "saved_usd": 16868.0,
          "stalled_at_minute": 60,                 # optional: when the script stalls the job
          "stopped_at_minute": 103,                # optional: when governance stopped it
          "series": [{"minute": 0, "utilization": 97.5}, ...],   # optional: GPU utilization (%)
          "threshold": 1.0,                         # optional: the idle alarm's threshold (same unit)
          "resumed_from": "llm-pretrain-0"          # optional: the job this one is a clone of
        }
      ],
      "totals": {"cost_usd": ..., "baseline_cost_usd": ..., "saved_usd": ...,
                 "false_stops": 0, "missed_stalls": 0,
                 "recoverable_waste_usd": ..., "recovered_usd": ...,   # optional: recovered fraction cards
                 "unexpected_outcomes": 0, "known_gaps": 0}   # optional: expectations, known gaps
    }

Actions may carry ``"outcome": "audit-only"`` (drawn as "stop (audit)"). ``series`` may also be the
simulator's ``--series`` object: ``{"segments": [[start, end, percent per GPU], ...], "gpus_per_host":
{...}, "alarms": [{"threshold": ...}, ...]}``; the threshold then comes from the alarms, per GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, model_validator

MAX_POINTS: Final = 600  # per chart; longer series are reduced to each bucket's min and max


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TimelineAction(_Model):
    minute: NonNegativeFloat
    action: str
    rule: str = ""
    outcome: str | None = None  # "audit-only": recorded, not carried out

    @property
    def label(self) -> str:
        return f"{self.action} (audit)" if self.outcome == "audit-only" else self.action


class UtilizationPoint(_Model):
    minute: NonNegativeFloat
    utilization: NonNegativeFloat


class JobEfficiency(_Model):
    """The job's efficiency record as the service wrote it (``None``: not known; ``missing`` says why)."""

    code: str | None = None
    gpu_utilization_mean_percent: float | None = None
    idle_gpu_hours: float | None = None
    idle_cost_usd: float | None = None
    cost_usd: float | None = None
    missing: list[str] = Field(default_factory=list)


class JobReport(_Model):
    name: str
    team: str | None = None
    efficiency: JobEfficiency | None = None
    final_status: str
    actions: list[TimelineAction] = Field(default_factory=list)
    cost_usd: float
    baseline_cost_usd: float
    saved_usd: float
    stalled_at_minute: NonNegativeFloat | None = None
    stopped_at_minute: NonNegativeFloat | None = None
    series: list[UtilizationPoint] | None = None
    threshold: NonNegativeFloat | None = None
    resumed_from: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _simulator_series(cls, data: Any) -> Any:
        """Accept the simulator's ``--series`` shape too: constant-utilization segments
        ``[start, end, percent per GPU]`` and the alarms watching the job (threshold = per-GPU percent
        x GPU count, so it is divided back to per GPU)."""
        if not isinstance(data, dict) or not isinstance(data.get("series"), dict):
            return data
        raw = data["series"]
        points: list[dict[str, float]] = []
        for segment in raw.get("segments") or []:
            start, end, percent = segment
            points.append({"minute": start, "utilization": percent})
            if end is not None and end != start:
                points.append({"minute": end, "utilization": percent})
        out = {**data, "series": points}
        gpus = max([g for g in (raw.get("gpus_per_host") or {}).values() if g] or [1])
        thresholds = [a["threshold"] for a in raw.get("alarms") or [] if a.get("threshold") is not None]
        if out.get("threshold") is None and thresholds:
            out["threshold"] = min(thresholds) / gpus
        return out


class Totals(_Model):
    cost_usd: float
    baseline_cost_usd: float
    saved_usd: float
    false_stops: NonNegativeInt = 0
    missed_stalls: NonNegativeInt = 0
    recoverable_waste_usd: NonNegativeFloat | None = None  # absent in reports of older versions
    recovered_usd: NonNegativeFloat | None = None
    unexpected_outcomes: NonNegativeInt = 0
    known_gaps: NonNegativeInt = 0

    @property
    def recovered_fraction(self) -> float | None:
        if not self.recoverable_waste_usd or self.recovered_usd is None:
            return None
        return self.recovered_usd / self.recoverable_waste_usd


class SimulationReport(_Model):
    scenario: str
    description: str = ""
    jobs: list[JobReport]
    totals: Totals


# ---- formatting ---------------------------------------------------------------------------------


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _usd(value: float) -> str:
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.2f}"


def _clock(minute: float) -> str:
    """Minutes since the job started as ``2d 3h 05m``."""
    total = round(minute)
    days, rest = divmod(total, 1440)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m"


_ACTION_COLORS: Final = {
    "stop": "#c62828",
    "clone": "#2e7d32",
    "notify": "#ef6c00",
    "create-alarm": "#607d8b",
    "delete-alarm": "#607d8b",
}
_DEFAULT_ACTION_COLOR: Final = "#6a1b9a"


def _action_color(action: str) -> str:
    return _ACTION_COLORS.get(action, _DEFAULT_ACTION_COLOR)


# ---- charts -------------------------------------------------------------------------------------

_W, _H = 960, 280
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 52, 34


def _nice_step(span: float, target_ticks: int) -> float:
    raw = span / max(target_ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _time_step(span_minutes: float) -> float:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080):
        if span_minutes / step <= 10:
            return step
    return _nice_step(span_minutes, 10)


def reduce_series(points: Sequence[UtilizationPoint], max_points: int = MAX_POINTS) -> list[UtilizationPoint]:
    """At most about ``max_points`` points, keeping each bucket's lowest and highest value (so a stall,
    a dip to zero, is never smoothed away)."""
    ordered = sorted(points, key=lambda p: p.minute)
    if len(ordered) <= max_points:
        return ordered
    buckets = max_points // 2
    size = math.ceil(len(ordered) / buckets)
    out: list[UtilizationPoint] = []
    for start in range(0, len(ordered), size):
        bucket = ordered[start : start + size]
        low = min(bucket, key=lambda p: p.utilization)
        high = max(bucket, key=lambda p: p.utilization)
        out.extend(sorted({id(low): low, id(high): high}.values(), key=lambda p: p.minute))
    return out


_LABEL_ROWS: Final = 3
_CHAR_PX: Final = 6.8  # about one character of the 11px bold label font


def _place_label(rows: list[list[tuple[float, float]]], ax: float, text: str) -> tuple[float, int, str] | None:
    """The first label row where ``text`` next to x=``ax`` overlaps no earlier label: (x, row, anchor)."""
    width = len(text) * _CHAR_PX + 4
    anchor = "end" if ax + 7 + width > _W - _RIGHT else "start"
    left = ax - 7 - width if anchor == "end" else ax + 7
    lx = ax - 7 if anchor == "end" else ax + 7
    for row, taken in enumerate(rows):
        if all(left + width <= start or left >= end for start, end in taken):
            taken.append((left, left + width))
            return lx, row, anchor
    return None


def _chart(job: JobReport) -> str:
    series = reduce_series(job.series or [])
    marks = [a.minute for a in job.actions]
    marks += [m for m in (job.stalled_at_minute, job.stopped_at_minute) if m is not None]
    x_max = max([p.minute for p in series] + marks + [1.0])
    y_peak = max([p.utilization for p in series] + [job.threshold or 0.0, 100.0])
    y_max = math.ceil(y_peak / 100) * 100
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(minute: float) -> float:
        return _LEFT + plot_w * minute / x_max

    def y(value: float) -> float:
        return _TOP + plot_h * (1 - value / y_max)

    parts = [
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="GPU utilization and governance actions for {_e(job.name)}">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    y_step = _nice_step(y_max, 4)
    value = 0.0
    while value <= y_max + 1e-9:
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" class="tick" text-anchor="end">{value:g}%</text>'
        )
        value += y_step
    t_step = _time_step(x_max)
    minute = 0.0
    while minute <= x_max + 1e-9:
        anchor = "end" if x(minute) > _W - _RIGHT - 24 else "middle"  # keep the last label inside
        parts.append(
            f'<text x="{x(minute):.1f}" y="{_H - _BOTTOM + 16}" class="tick" text-anchor="{anchor}">'
            f"{_e(_clock(minute))}</text>"
        )
        minute += t_step
    if job.stalled_at_minute is not None:
        sx = x(job.stalled_at_minute)
        parts.append(
            f'<rect x="{sx:.1f}" y="{_TOP}" width="{max(x(x_max) - sx, 0):.1f}" height="{plot_h}" class="stall">'
            f"<title>training stalled at {_e(_clock(job.stalled_at_minute))}</title></rect>"
        )
        parts.append(f'<text x="{sx + 4:.1f}" y="{_TOP + plot_h - 6}" class="stall-label">stalled</text>')
    if series:
        points = " ".join(f"{x(p.minute):.1f},{y(p.utilization):.1f}" for p in series)
        parts.append(f'<polyline points="{points}" class="util"><title>GPU utilization</title></polyline>')
    else:
        parts.append(
            f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_TOP + plot_h / 2:.1f}" class="nodata" '
            'text-anchor="middle">no GPU utilization series in the report</text>'
        )
    if job.threshold is not None:
        ty = y(job.threshold)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}" class="threshold">'
            f"<title>alarm threshold {job.threshold:g}%</title></line>"
        )
        parts.append(
            f'<text x="{_W - _RIGHT - 4}" y="{ty - 5:.1f}" class="threshold-label" text-anchor="end">'
            f"alarm threshold {job.threshold:g}%</text>"
        )
    rows: list[list[tuple[float, float]]] = [[] for _ in range(_LABEL_ROWS)]
    for action in sorted(job.actions, key=lambda a: a.minute):
        ax, color = x(action.minute), _action_color(action.action)
        tip = f"{_clock(action.minute)}: {action.label}" + (f" by {action.rule}" if action.rule else "")
        quiet = action.action == "none"
        parts.append(
            f'<g class="action{" quiet" if quiet else ""}"><title>{_e(tip)}</title>'
            f'<line x1="{ax:.1f}" x2="{ax:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" stroke="{color}" class="mark"/>'
            f'<circle cx="{ax:.1f}" cy="{_TOP}" r="{3 if quiet else 5}" fill="{color}"/></g>'
        )
        if quiet:
            continue  # "no action" decisions are listed below the chart, not labelled on it
        label = _place_label(rows, ax, action.label)
        if label is not None:  # no free row left: the list below the chart still has it
            lx, row, anchor = label
            parts.append(
                f'<text x="{lx:.1f}" y="{_TOP - 8 - 13 * row}" fill="{color}" class="action-label" '
                f'text-anchor="{anchor}">{_e(action.label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


# ---- page ---------------------------------------------------------------------------------------

_CSS: Final = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1f2933;background:#f5f7fa}
header{background:#17324d;color:#fff;padding:20px 32px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;opacity:.8}
main{padding:20px 32px;max-width:1040px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:0 0 20px}
.card{background:#fff;border-radius:8px;padding:10px 14px;min-width:128px;box-shadow:0 1px 2px rgba(0,0,0,.12)}
.card .label{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#52606d}
.card .value{font-size:24px;font-weight:600}
.good .value{color:#2e7d32} .bad .value{color:#c62828}
table{border-collapse:collapse;background:#fff;width:100%;box-shadow:0 1px 2px rgba(0,0,0,.12)}
th,td{padding:6px 10px;border-bottom:1px solid #e4e7eb;text-align:left} td.n,th.n{text-align:right}
section.job{background:#fff;border-radius:8px;padding:12px 16px;margin:20px 0;box-shadow:0 1px 2px rgba(0,0,0,.12)}
section.job h2{font-size:17px;margin:0 0 4px} .meta{color:#52606d;margin:0 0 8px}
.status{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;background:#e4e7eb}
.status-stopped{background:#fde0dc;color:#a61b1b} .status-completed{background:#dcf5e3;color:#1b6b33}
.status-failed{background:#fff1d6;color:#8a5a00}
.chart{max-width:100%;height:auto} .plot{fill:#fbfcfd;stroke:#cbd2d9}
.grid{stroke:#e4e7eb} .tick{font-size:11px;fill:#52606d}
.util{fill:none;stroke:#1565c0;stroke-width:1.6}
.threshold{stroke:#c62828;stroke-width:1.4;stroke-dasharray:6 4}
.threshold-label{font-size:11px;fill:#c62828}
.stall{fill:#ffb74d;fill-opacity:.18} .stall-label{font-size:11px;fill:#e65100}
.mark{stroke-width:1.6;stroke-dasharray:3 2} .action-label{font-size:11px;font-weight:600}
.quiet{opacity:.45}
.tick,.threshold-label,.stall-label,.action-label{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
.nodata{font-size:13px;fill:#9aa5b1}
ol.actions{margin:6px 0 0;padding-left:20px;color:#323f4b;font-size:13px}
.legend{font-size:12px;color:#52606d;margin:8px 0 0}
.legend span{display:inline-block;margin-right:14px}
.swatch{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:4px}
"""


def _card(label: str, value: str, css: str = "") -> str:
    return (
        f'<div class="card {css}"><div class="label">{_e(label)}</div><div class="value">{_e(value)}</div></div>'
    )


def _status_class(status: str) -> str:
    return "status-" + "".join(ch for ch in status.lower() if ch.isalnum())


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def _idle_usd(job: JobReport) -> str:
    """The record's idle share of its cost, at the report's (simulated) cost of the job."""
    record = job.efficiency
    if record is None or record.idle_cost_usd is None or not record.cost_usd:
        return "n/a"
    return _usd(record.idle_cost_usd / record.cost_usd * job.cost_usd)


def _efficiency_fact(record: JobEfficiency | None) -> str:
    if record is None:
        return "no efficiency record (the job has not ended)"
    if record.gpu_utilization_mean_percent is None:
        return "efficiency: " + ("; ".join(record.missing) or "no figures")
    return (
        f"GPU utilization {_percent(record.gpu_utilization_mean_percent)} on average, "
        f"{record.idle_gpu_hours or 0:.1f} idle GPU-hours"
    )


def _teams_table(jobs: Sequence[JobReport]) -> str:
    """Per team: jobs, spend, idle cost (each record's idle share of the simulated cost), idle GPU-hours
    and GPU utilization (the jobs' means, weighted by their cost)."""
    teams: dict[str, list[JobReport]] = {}
    for job in jobs:
        teams.setdefault(job.team or "(no team tag)", []).append(job)
    rows = []
    for team, members in sorted(teams.items(), key=lambda item: -sum(j.cost_usd for j in item[1])):
        measured = [j for j in members if j.efficiency and j.efficiency.gpu_utilization_mean_percent is not None]
        weight = sum(j.cost_usd for j in measured)
        mean = (
            sum((j.efficiency.gpu_utilization_mean_percent or 0.0) * j.cost_usd for j in measured if j.efficiency)
            / weight
            if weight > 0
            else None
        )
        idle = [
            j.efficiency.idle_cost_usd / j.efficiency.cost_usd * j.cost_usd
            for j in members
            if j.efficiency and j.efficiency.idle_cost_usd is not None and j.efficiency.cost_usd
        ]
        hours = sum(j.efficiency.idle_gpu_hours or 0.0 for j in members if j.efficiency)
        rows.append(
            f'<tr><td>{_e(team)}</td><td class="n">{len(members)}</td>'
            f'<td class="n">{_e(_usd(sum(j.cost_usd for j in members)))}</td>'
            f'<td class="n">{_e(_usd(sum(idle)))}</td><td class="n">{hours:.1f}</td>'
            f'<td class="n">{_e(_percent(mean))}</td><td class="n">{len(members) - len(measured)}</td></tr>'
        )
    return (
        '<h3>Efficiency per team</h3><table class="teams"><thead><tr><th>team</th><th class="n">jobs</th>'
        '<th class="n">cost</th><th class="n">idle cost</th><th class="n">idle GPU-hours</th>'
        '<th class="n">GPU utilization</th><th class="n">jobs without metrics</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _job_section(job: JobReport, anchor: str) -> str:
    facts = [f"cost {_usd(job.cost_usd)}", f"without governance {_usd(job.baseline_cost_usd)}"]
    facts.append(f"saved {_usd(job.saved_usd)}")
    if job.resumed_from:
        facts.insert(0, f"clone of {job.resumed_from}")
    if job.stalled_at_minute is not None:
        facts.append(f"stalled at {_clock(job.stalled_at_minute)}")
    if job.stopped_at_minute is not None:
        facts.append(f"stopped at {_clock(job.stopped_at_minute)}")
    facts.append(_efficiency_fact(job.efficiency))
    items = "".join(
        f"<li>{_e(_clock(a.minute))}: <strong>{_e(a.label)}</strong>"
        + (f" by {_e(a.rule)}" if a.rule else "")
        + "</li>"
        for a in sorted(job.actions, key=lambda a: a.minute)
    )
    actions = f'<ol class="actions">{items}</ol>' if items else '<p class="meta">no governance actions</p>'
    return (
        f'<section class="job" id="{_e(anchor)}"><h2>{_e(job.name)} '
        f'<span class="status {_status_class(job.final_status)}">{_e(job.final_status)}</span></h2>'
        f'<p class="meta">{_e(" · ".join(facts))}</p>{_chart(job)}{actions}</section>'
    )


_LEGEND: Final = (
    '<p class="legend"><span><i class="swatch" style="background:#1565c0"></i>GPU utilization</span>'
    '<span><i class="swatch" style="background:#c62828"></i>alarm threshold (dashed)</span>'
    '<span><i class="swatch" style="background:#ffb74d"></i>stalled</span>'
    + "".join(
        f'<span><i class="swatch" style="background:{color}"></i>{_e(name)}</span>'
        for name, color in _ACTION_COLORS.items()
        if name != "delete-alarm"
    )
    + "</p>"
)


def _cards(totals: Totals, jobs: int) -> str:
    percent = (totals.saved_usd / totals.baseline_cost_usd * 100) if totals.baseline_cost_usd > 0 else 0.0
    cards = "".join(
        [
            _card("jobs", str(jobs)),
            _card("cost with governance", _usd(totals.cost_usd)),
            _card("cost without governance", _usd(totals.baseline_cost_usd)),
            _card("saved", f"{_usd(totals.saved_usd)} ({percent:.0f}%)", "good" if totals.saved_usd > 0 else ""),
            _card("false stops", str(totals.false_stops), "good" if totals.false_stops == 0 else "bad"),
            _card("missed stalls", str(totals.missed_stalls), "good" if totals.missed_stalls == 0 else "bad"),
        ]
    )
    if totals.recoverable_waste_usd is not None:
        fraction = totals.recovered_fraction
        share = "n/a" if fraction is None else f"{fraction:.0%}"
        cards += _card("recoverable waste", _usd(totals.recoverable_waste_usd))
        cards += _card(
            "recovered",
            f"{_usd(totals.recovered_usd or 0.0)} ({share})",
            "" if fraction is None else "good" if fraction >= 0.9 else "bad",
        )
        cards += _card(
            "unexpected outcomes",
            str(totals.unexpected_outcomes),
            "good" if not totals.unexpected_outcomes else "bad",
        )
    if totals.known_gaps:
        cards += _card("known gaps (decided wrong today)", str(totals.known_gaps), "bad")
    return f'<div class="cards">{cards}</div>'


def _report_body(report: SimulationReport, index: int) -> str:
    cards = _cards(report.totals, len(report.jobs))
    rows = "".join(
        f'<tr><td><a href="#job-{index}-{n}">{_e(job.name)}</a></td><td>{_e(job.final_status)}</td>'
        f'<td class="n">{len(job.actions)}</td><td class="n">{_e(_usd(job.cost_usd))}</td>'
        f'<td class="n">{_e(_usd(job.baseline_cost_usd))}</td><td class="n">{_e(_usd(job.saved_usd))}</td>'
        f'<td class="n">{_e(_percent(job.efficiency.gpu_utilization_mean_percent if job.efficiency else None))}</td>'
        f'<td class="n">{_e(_idle_usd(job))}</td></tr>'
        for n, job in enumerate(report.jobs)
    )
    table = (
        '<table><thead><tr><th>job</th><th>final status</th><th class="n">actions</th><th class="n">cost</th>'
        '<th class="n">without governance</th><th class="n">saved</th><th class="n">GPU utilization</th>'
        f'<th class="n">idle cost</th></tr></thead><tbody>{rows}</tbody></table>'
    ) + _teams_table(report.jobs)
    sections = "".join(_job_section(job, f"job-{index}-{n}") for n, job in enumerate(report.jobs))
    description = f'<p class="meta">{_e(report.description)}</p>' if report.description else ""
    return (
        f'<h2 class="scenario" id="scenario-{index}">Scenario: {_e(report.scenario)}</h2>'
        f"{description}{cards}"
        f"{table}{_LEGEND}{sections}"
    )


class ScenarioSet(_Model):
    """Several scenarios: ``{"scenarios": [report, ...], "totals": {...}}`` (totals over all of them)."""

    scenarios: list[SimulationReport]
    totals: Totals | None = None


def _overall(reports: Sequence[SimulationReport], totals: Totals | None) -> str:
    if totals is None:
        totals = Totals(
            cost_usd=sum(r.totals.cost_usd for r in reports),
            baseline_cost_usd=sum(r.totals.baseline_cost_usd for r in reports),
            saved_usd=sum(r.totals.saved_usd for r in reports),
            false_stops=sum(r.totals.false_stops for r in reports),
            missed_stalls=sum(r.totals.missed_stalls for r in reports),
            recoverable_waste_usd=sum(r.totals.recoverable_waste_usd or 0.0 for r in reports),
            recovered_usd=sum(r.totals.recovered_usd or 0.0 for r in reports),
            unexpected_outcomes=sum(r.totals.unexpected_outcomes for r in reports),
            known_gaps=sum(r.totals.known_gaps for r in reports),
        )
    jobs = sum(len(r.jobs) for r in reports)
    links = " · ".join(f'<a href="#scenario-{i}">{_e(r.scenario)}</a>' for i, r in enumerate(reports))
    return (
        f'<h2 class="scenario">All {len(reports)} scenarios</h2>{_cards(totals, jobs)}<p class="meta">{links}</p>'
    )


def render_html(report: dict[str, Any] | list[dict[str, Any]]) -> str:
    """The report as a complete HTML document: one scenario's report, a list of them, or the
    ``{"scenarios": [...], "totals": {...}}`` object ``smgov simulate --json`` prints for several.

    Raises ``pydantic.ValidationError`` when the input does not have the documented shape.
    """
    totals: Totals | None = None
    if isinstance(report, dict) and "scenarios" in report:
        several = ScenarioSet.model_validate(report)
        reports, totals = several.scenarios, several.totals
    else:
        reports = [SimulationReport.model_validate(r) for r in (report if isinstance(report, list) else [report])]
    names = ", ".join(r.scenario for r in reports)
    overall = _overall(reports, totals) if len(reports) > 1 else ""
    bodies = "".join(_report_body(r, i) for i, r in enumerate(reports))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>SageMaker governance simulation: {_e(names)}</title><style>{_CSS}</style></head>"
        "<body><header><h1>SageMaker governance simulation</h1>"
        f"<p>{_e(names)}: what the service did to each training job, and what it saved</p></header>"
        f"<main>{overall}{bodies}</main></body></html>\n"
    )
