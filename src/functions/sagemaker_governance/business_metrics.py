"""Low-cardinality business metrics beyond the per-decision count (EMF through Powertools)."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from sagemaker_governance.observability import NAMESPACE


class EmfSavingsMetrics:
    """``EstimatedSavingsUSD`` by rule: what stopping a job is estimated to save."""

    def record_savings(self, usd: float, rule: str) -> None:
        with single_metric(
            name="EstimatedSavingsUSD", unit=MetricUnit.NoUnit, value=round(usd, 2), namespace=NAMESPACE
        ) as metric:
            metric.add_dimension(name="rule", value=rule)


class MemorySavingsMetrics:
    """Keeps what would be emitted (tests, `smgov explain`, the simulator)."""

    def __init__(self) -> None:
        self.savings: list[tuple[str, float]] = []

    def record_savings(self, usd: float, rule: str) -> None:
        self.savings.append((rule, usd))


class EmfRepairMetrics:
    """``ReconcilerRepairs`` by kind (orphan-alarm, missing-alarm, unevaluated-job): what lost events cost."""

    def record_repair(self, kind: str) -> None:
        with single_metric(
            name="ReconcilerRepairs", unit=MetricUnit.Count, value=1, namespace=NAMESPACE
        ) as metric:
            metric.add_dimension(name="kind", value=kind)


class MemoryRepairMetrics:
    def __init__(self) -> None:
        self.repairs: list[str] = []

    def record_repair(self, kind: str) -> None:
        self.repairs.append(kind)
