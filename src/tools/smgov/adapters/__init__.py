"""boto3 adapters used only by the tooling (Logs Insights, CloudFormation, the dead-letter queue)."""
