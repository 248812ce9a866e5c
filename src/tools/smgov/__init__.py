"""smgov: the developer and platform-team tooling of sagemaker-governance (CLI, fleet simulator, reports,
SDK preflight). It imports the service package (``sagemaker_governance``); the service never imports it,
and none of it is deployed to Lambda."""
