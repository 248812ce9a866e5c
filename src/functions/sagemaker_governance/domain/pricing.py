"""Hourly prices for the estimated-savings metric of a stopped job.

The defaults are indicative on-demand list prices of SageMaker *training* instances in us-east-1 (USD
per instance-hour). They only feed an estimate (``EstimatedSavingsUSD``); the platform team replaces or
extends them in the policy document (``idle.prices``), e.g. with its negotiated or regional prices.
A type without a price is left out of the estimate and named in the evidence, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from pydantic import BaseModel, ConfigDict

from sagemaker_governance.domain.job import TrainingJob

DEFAULT_PRICES: Final[dict[str, float]] = {
    "ml.g4dn.xlarge": 0.736,
    "ml.g4dn.2xlarge": 0.94,
    "ml.g4dn.4xlarge": 1.505,
    "ml.g4dn.8xlarge": 2.72,
    "ml.g4dn.12xlarge": 4.89,
    "ml.g4dn.16xlarge": 5.44,
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.16xlarge": 5.12,
    "ml.g5.24xlarge": 10.18,
    "ml.g5.48xlarge": 20.36,
    "ml.p3.2xlarge": 3.825,
    "ml.p3.8xlarge": 14.688,
    "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894,
    "ml.p4d.24xlarge": 37.688,
    "ml.p5.48xlarge": 113.07,
}


class SavingsEstimate(BaseModel):
    """Remaining allowed runtime x instances x hourly price, for the priced part of the job."""

    model_config = ConfigDict(frozen=True)

    usd: float
    remaining_seconds: float
    priced_instances: int
    unpriced_types: tuple[str, ...] = ()
    note: str | None = None

    def evidence(self) -> dict[str, object]:
        out: dict[str, object] = {
            "estimated_savings_usd": round(self.usd, 2),
            "remaining_runtime_seconds": round(self.remaining_seconds),
        }
        if self.unpriced_types:
            out["unpriced_instance_types"] = list(self.unpriced_types)
        if self.note:
            out["savings_note"] = self.note
        return out


def estimate_savings(job: TrainingJob, prices: Mapping[str, float], now: datetime) -> SavingsEstimate:
    """What stopping ``job`` now saves at most: the runtime it was still allowed (``MaxRuntimeInSeconds``
    minus the time since training started) on every priced instance."""
    max_runtime = job.stopping.max_runtime_seconds
    started = job.training_start_time or job.creation_time
    if max_runtime is None or started is None:
        return SavingsEstimate(
            usd=0.0, remaining_seconds=0.0, priced_instances=0, note="no MaxRuntimeInSeconds or start time"
        )
    remaining = max(0.0, max_runtime - (now - started).total_seconds())
    usd, priced, unpriced = 0.0, 0, []
    for group in job.instance_groups:
        price = prices.get(group.instance_type)
        if price is None:
            unpriced.append(group.instance_type)
            continue
        usd += remaining / 3600 * group.instance_count * price
        priced += group.instance_count
    return SavingsEstimate(
        usd=usd, remaining_seconds=remaining, priced_instances=priced, unpriced_types=tuple(unpriced)
    )
