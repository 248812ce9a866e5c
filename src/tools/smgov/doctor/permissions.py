"""What `smgov doctor` itself needs: read-only actions only (a test records every request a full run makes
and checks each is listed here; the README prints the policy). ``sts:GetCallerIdentity`` needs no
permission. Every action here is a Describe/Get/List, or ``iam:SimulatePrincipalPolicy``, which evaluates
policies and changes nothing (IAM API reference)."""

from __future__ import annotations

from typing import Final

DOCTOR_IAM_ACTIONS: Final = frozenset(
    {
        "cloudformation:DescribeStacks",
        "cloudformation:ListStackResources",
        "cloudformation:GetTemplate",
        "events:DescribeRule",
        "events:ListTargetsByRule",
        "lambda:GetEventSourceMapping",
        "lambda:GetFunctionConfiguration",
        "lambda:GetFunctionConcurrency",
        "sns:ListSubscriptionsByTopic",
        "sns:GetTopicAttributes",
        "sns:GetSubscriptionAttributes",
        "kms:DescribeKey",
        "kms:GetKeyPolicy",
        "iam:ListRolePolicies",
        "iam:GetRolePolicy",
        "iam:ListAttachedRolePolicies",
        "iam:GetPolicy",
        "iam:GetPolicyVersion",
        "iam:SimulatePrincipalPolicy",
        "logs:FilterLogEvents",
        "sqs:GetQueueAttributes",
        "ssm:GetParameter",
        "ssm:GetParameterHistory",
        "sagemaker:ListTrainingJobs",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTags",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:GetMetricData",
    }
)
