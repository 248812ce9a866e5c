"""Domain: pure governance rules and planning. No boto3, no Powertools, no environment, no clock."""
