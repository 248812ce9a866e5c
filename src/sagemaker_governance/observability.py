"""The one set of Powertools observability singletons; everybody imports them from here."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "sagemaker-governance"
NAMESPACE = "SageMakerGovernance"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE)
