"""The one set of Powertools observability singletons; everybody imports them from here.

No X-Ray ``Tracer``: its SDK would put a second botocore in the layer (shadowing the runtime's boto3
pairing) and cost cold start, and X-Ray's write actions cannot be scoped to a resource (least
privilege). Structured logs and EMF metrics carry what operators need.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

SERVICE = "sagemaker-governance"
NAMESPACE = "SageMakerGovernance"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
