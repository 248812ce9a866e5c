"""Ordered Spot alternatives: the same job on Spot on another instance type, tried before On-Demand.

Pure. When Spot fallback has decided that a job should leave Spot on its own instance type (finishing
On-Demand is cheaper, Spot keeps too little of its work, or it would run out of ``MaxWaitTimeInSeconds``),
a team may list other instance types to try first (``spot.fallbacks``, in order). A clone on another
type changes the per-device memory and batch size the job was written for, so the job must opt in as
well (tag ``spot.fallback_job_tag`` = ``allow``), and only a single-type cluster moves (a heterogeneous
cluster's groups are never remapped); the instance count stays as it is.

For each alternative in order, the first that passes every check is chosen; each one considered goes
into the evidence with its verdict:

- ``same-type``: it is the job's own type;
- ``not-allowed``: a policy ``allowed-instance-types`` rule would not allow it (a fallback never creates a
  non-compliant job);
- ``local-storage``: the job has a ``VolumeKmsKeyId`` and the type has local instance storage (or is not
  known to have none), on which SageMaker refuses one (``clone.volume_key_refusal``);
- ``health-unknown`` / ``storm``: the fleet's Spot health of the type could not be read, or its window
  holds interruptions but none of a job that ran ``MIN_RUNNING_HOURS`` (no rate: jobs interrupted minutes
  into their runs are no sign of a calm type), or it is in a storm (``domain/spot_health.py``);
- ``unpriced``: no On-Demand price for the type (the costs of two types do not cancel out);
- ``no-progress`` / ``on-demand-cheaper``: with the job's own lost work per interruption and download per
  restart at the alternative's interruption rate in the fleet (pooled, ``domain/spot_health.py``; no
  interruption of it on record in the window: none assumed, and said), finishing there
  on Spot would keep too little of its work or cost at least as much as finishing On-Demand on the job's
  own type;
- ``chosen``.

The remaining work on the alternative is the job's remaining work divided by ``relative_speed`` (the
team's statement of the job's pace there against its own type; 1 by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sagemaker_governance.domain.clone import volume_key_refusal
from sagemaker_governance.domain.job import TrainingJob
from sagemaker_governance.domain.recovery_policy import SpotAlternative
from sagemaker_governance.domain.rules.instance_types import AllowedInstanceTypes
from sagemaker_governance.domain.spot_economics import MIN_EFFICIENCY, MIN_RUNNING_HOURS, SpotEstimate, Unknown
from sagemaker_governance.domain.spot_health import FleetHealth

FALLBACK_TAG_VALUE: Final = "allow"
CHOSEN: Final = "chosen"


@dataclass(frozen=True)
class Considered:
    """One alternative and why it was (not) chosen."""

    instance_type: str
    verdict: str
    note: str
    spot_cost_usd: float | None = None
    on_demand_cost_usd: float | None = None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"instance_type": self.instance_type, "verdict": self.verdict, "note": self.note}
        if self.spot_cost_usd is not None:
            out["spot_cost_usd"] = self.spot_cost_usd
        if self.on_demand_cost_usd is not None:
            out["on_demand_cost_usd"] = self.on_demand_cost_usd
        return out


@dataclass(frozen=True)
class AlternativeChoice:
    """The alternative chosen (None: On-Demand), what was considered, or why none was tried."""

    chosen: SpotAlternative | None = None
    considered: tuple[Considered, ...] = ()
    not_tried: str | None = None

    def evidence(self) -> dict[str, Any]:
        if self.not_tried is not None:
            return {"alternatives_not_tried": self.not_tried}
        out: dict[str, Any] = {"alternatives": [c.evidence() for c in self.considered]}
        if self.chosen is not None:
            out["alternative_instance_type"] = self.chosen.instance_type
        return out


def opted_in(tags: Mapping[str, str], tag_key: str | None) -> bool:
    return tag_key is None or tags.get(tag_key, "").strip().lower() == FALLBACK_TAG_VALUE


def allowed_by(rules: Sequence[AllowedInstanceTypes], instance_type: str) -> AllowedInstanceTypes | None:
    """The first enabled ``allowed-instance-types`` rule that would refuse ``instance_type`` (None: allowed)."""
    return next((r for r in rules if r.enabled and not r.allows(instance_type)), None)


def choose(
    job: TrainingJob,
    tags: Mapping[str, str],
    *,
    alternatives: Sequence[SpotAlternative],
    tag_key: str | None,
    numbers: SpotEstimate | Unknown,
    prices: Mapping[str, float] | None,
    health: Mapping[str, FleetHealth | Unknown],
    rules: Sequence[AllowedInstanceTypes],
) -> AlternativeChoice:
    """The first alternative worth trying on Spot, in the team's order (see the module docstring)."""
    if not opted_in(tags, tag_key):
        return AlternativeChoice(not_tried=f"the job does not carry the tag {tag_key}={FALLBACK_TAG_VALUE}")
    if job.is_heterogeneous or len(job.instance_groups) != 1:
        return AlternativeChoice(not_tried="a heterogeneous cluster: its instance groups are never remapped")
    if isinstance(numbers, Unknown):
        return AlternativeChoice(not_tried=f"no economics to compare them with ({numbers.reason})")
    if numbers.cluster_price_per_hour is None:
        return AlternativeChoice(not_tried=f"no On-Demand price for {job.instance_groups[0].instance_type}")
    own = job.instance_groups[0]
    on_demand_usd = round(numbers.on_demand_cost_units * numbers.cluster_price_per_hour, 2)
    considered: list[Considered] = []
    keyed = bool(job.resources.volume_kms_key_id)
    for alternative in alternatives:
        kind = alternative.instance_type
        refusal = volume_key_refusal(kind) if keyed and kind != own.instance_type else None
        verdict = (
            Considered(kind, "local-storage", refusal)
            if refusal is not None
            else _judge(
                alternative,
                own_type=own.instance_type,
                own_count=own.instance_count,
                numbers=numbers,
                on_demand_usd=on_demand_usd,
                price=(prices or {}).get(kind),
                fleet=health.get(kind),
                refusing=allowed_by(rules, kind),
            )
        )
        considered.append(verdict)
        if verdict.verdict == CHOSEN:
            return AlternativeChoice(chosen=alternative, considered=tuple(considered))
    return AlternativeChoice(considered=tuple(considered))


def _judge(
    alternative: SpotAlternative,
    *,
    own_type: str,
    own_count: int,
    numbers: SpotEstimate,
    on_demand_usd: float,
    price: float | None,
    fleet: FleetHealth | Unknown | None,
    refusing: AllowedInstanceTypes | None,
) -> Considered:
    """One alternative's verdict (``chosen`` or why not)."""
    kind = alternative.instance_type
    if kind == own_type:
        return Considered(kind, "same-type", "the job's own instance type")
    if refusing is not None:
        return Considered(kind, "not-allowed", f"rule {refusing.id} does not allow it")
    if fleet is None or isinstance(fleet, Unknown):
        why = fleet.reason if isinstance(fleet, Unknown) else "not read"
        return Considered(kind, "health-unknown", f"its Spot health is unknown ({why})")
    if fleet.storm:
        window = f"{fleet.interrupted_jobs} job(s) interrupted in {fleet.window_hours:g} h"
        return Considered(kind, "storm", f"in a Spot storm ({window})")
    if fleet.fleet_rate_per_hour is None and fleet.interruptions:
        return Considered(
            kind,
            "health-unknown",
            f"{fleet.interruptions} interruption(s) of it in the window, none of a job that ran "
            f"{MIN_RUNNING_HOURS:g} h: its interruption rate is unknown",
        )
    if price is None:
        return Considered(kind, "unpriced", "no On-Demand price for it in the policy")
    history = numbers.history
    rate = fleet.fleet_rate_per_hour or 0.0
    efficiency = max(0.0, 1.0 - rate * (history.lost_per_interruption + history.download_hours_per_start))
    if fleet.fleet_rate_per_hour is not None:
        rated = f"{rate:.2f} interruption(s) per running hour in the fleet"
    else:
        rated = "no interruption of it in the window"
    if efficiency < MIN_EFFICIENCY:
        return Considered(kind, "no-progress", f"would keep {efficiency:.0%} of its time ({rated})")
    running = (
        numbers.remaining_work_hours / alternative.relative_speed / efficiency + history.download_hours_per_start
    )
    spot_usd = round(running * numbers.price_factor * price * own_count, 2)
    costs = f"finishing there on Spot costs ${spot_usd:,.2f} against ${on_demand_usd:,.2f} On-Demand ({rated})"
    verdict = CHOSEN if spot_usd < on_demand_usd else "on-demand-cheaper"
    return Considered(kind, verdict, costs, spot_usd, on_demand_usd)
