"""sagemaker-governance: guardrails for Amazon SageMaker training jobs."""

__version__ = "0.1.0"
