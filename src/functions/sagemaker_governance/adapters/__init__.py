"""The only place boto3 is called. Each adapter lists the IAM actions it needs in ``IAM_ACTIONS``;
a test checks that the template grants each function exactly what its adapters declare."""
