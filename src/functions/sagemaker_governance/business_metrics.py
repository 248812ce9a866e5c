"""Business metrics: the low-cardinality outcomes operators chart, beyond the per-decision count.

One port (``BusinessMetricsPort``) for every use case, two adapters: ``EmfBusinessMetrics`` writes
CloudWatch embedded-metric-format lines through Powertools (what the functions run), and
``MemoryBusinessMetrics`` keeps what would have been emitted (tests, the simulator, `smgov explain`).

| metric | unit | dimension | emitted when |
| --- | --- | --- | --- |
| ``EstimatedSavingsUSD`` | None | ``rule`` | a guard stopped a job (the estimate of what it saves) |
| ``ReconcilerRepairs`` | Count | ``kind`` | the reconciler repaired what a lost event left behind |
| ``JobsResumed`` | Count | ``reason`` | auto-resume created a clone |
| ``SpotFallbacks`` | Count | ``reason`` | Spot fallback created an On-Demand clone |
| ``PolicyLoadErrors`` | Count | none | the SSM policy document could not be read or was rejected, or the stack's Parameters build a part of the policy it rejects |
| ``EvidenceReadErrors`` | Count | ``kind`` | a read that never raises failed (``adapters/read_failures.py``) |
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple, Protocol

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from sagemaker_governance.observability import NAMESPACE


class BusinessMetric(StrEnum):
    ESTIMATED_SAVINGS_USD = "EstimatedSavingsUSD"
    RECONCILER_REPAIRS = "ReconcilerRepairs"
    JOBS_RESUMED = "JobsResumed"
    SPOT_FALLBACKS = "SpotFallbacks"
    POLICY_LOAD_ERRORS = "PolicyLoadErrors"
    EVIDENCE_READ_ERRORS = "EvidenceReadErrors"


_UNITS: Mapping[BusinessMetric, MetricUnit] = {BusinessMetric.ESTIMATED_SAVINGS_USD: MetricUnit.NoUnit}


class BusinessMetricsPort(Protocol):
    def emit(self, metric: BusinessMetric, value: float = 1, **dimensions: str) -> None:
        """One datapoint of ``metric`` (a count of 1 unless ``value`` says otherwise)."""


class Emitted(NamedTuple):
    metric: BusinessMetric
    value: float
    dimensions: dict[str, str]


class EmfBusinessMetrics:
    """One EMF line per datapoint (``single_metric``: its own dimensions, never mixed with others')."""

    def emit(self, metric: BusinessMetric, value: float = 1, **dimensions: str) -> None:
        unit = _UNITS.get(metric, MetricUnit.Count)
        rounded = round(value, 2) if unit is MetricUnit.NoUnit else value
        with single_metric(name=metric.value, unit=unit, value=rounded, namespace=NAMESPACE) as line:
            for name, dimension in dimensions.items():
                line.add_dimension(name=name, value=dimension)


class MemoryBusinessMetrics:
    """Keeps what would be emitted (tests, the simulator, `smgov explain`)."""

    def __init__(self) -> None:
        self.emitted: list[Emitted] = []

    def emit(self, metric: BusinessMetric, value: float = 1, **dimensions: str) -> None:
        self.emitted.append(Emitted(metric, value, dict(dimensions)))

    def of(self, metric: BusinessMetric) -> list[Emitted]:
        return [e for e in self.emitted if e.metric is metric]

    @property
    def savings(self) -> list[tuple[str, float]]:
        """``(rule, usd)`` of every savings estimate."""
        return [(e.dimensions["rule"], e.value) for e in self.of(BusinessMetric.ESTIMATED_SAVINGS_USD)]

    @property
    def repairs(self) -> list[str]:
        """The ``kind`` of every reconciler repair."""
        return [e.dimensions["kind"] for e in self.of(BusinessMetric.RECONCILER_REPAIRS)]
