"""Local tooling that runs the real service offline: a SageMaker double behind boto3, and (later) the
fleet simulator. Never imported by the Lambda handlers."""
