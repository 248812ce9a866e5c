"""A deliberately small idle guard for the simulator's own tests (not the product's idle guard).

It exercises the whole alarm path today: a function that creates a metric-math alarm per job when it
starts training and deletes it when the job ends, the evaluator that fires it, the SNS topic that
delivers the real alarm message, and a stopper subscribed to that topic. It uses the handlers'
composition root for its clients, so its AWS calls are counted like the service's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sagemaker_governance.composition.root import current

IDLE_MINUTES = 20
THRESHOLD = 5.0
TERMINAL = {"Completed", "Failed", "Stopped"}


def alarm_name(job: str) -> str:
    return f"toy-idle-{job}"


def on_state_change(event: dict[str, Any], context: Any) -> None:
    detail = event["detail"]
    job = detail["TrainingJobName"]
    cloudwatch = current().client("cloudwatch")
    if detail["TrainingJobStatus"] in TERMINAL:
        cloudwatch.delete_alarms(AlarmNames=[alarm_name(job)])
        return
    resources = detail["ResourceConfig"]
    count = sum(g["InstanceCount"] for g in resources.get("InstanceGroups") or []) or resources["InstanceCount"]
    ids = [f"m{i}" for i in range(1, count + 1)]
    metrics: list[dict[str, Any]] = [
        {"Id": "busiest", "Expression": f"MAX([{','.join(ids)}])", "ReturnData": True}
    ]
    metrics += [
        {
            "Id": mid,
            "MetricStat": {
                "Metric": {
                    "Namespace": "/aws/sagemaker/TrainingJobs",
                    "MetricName": "GPUUtilization",
                    "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{i}"}],
                },
                "Period": 60,
                "Stat": "Average",
            },
            "ReturnData": False,
        }
        for i, mid in enumerate(ids, start=1)
    ]
    cloudwatch.put_metric_alarm(
        AlarmName=alarm_name(job),
        AlarmActions=[os.environ["TOY_ALARM_TOPIC_ARN"]],
        Metrics=metrics,
        EvaluationPeriods=IDLE_MINUTES,
        DatapointsToAlarm=IDLE_MINUTES,
        Threshold=THRESHOLD,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData="notBreaching",
    )


def on_alarm(event: dict[str, Any], context: Any) -> None:
    for record in event["Records"]:
        message = json.loads(record["Sns"]["Message"])
        if message["NewStateValue"] != "ALARM":
            continue
        host = next(m for m in message["Trigger"]["Metrics"] if "MetricStat" in m)
        job = host["MetricStat"]["Metric"]["Dimensions"][0]["value"].split("/")[0]
        sagemaker = current().client("sagemaker")
        if sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "InProgress":
            sagemaker.stop_training_job(TrainingJobName=job)


def on_failed(event: dict[str, Any], context: Any) -> None:
    """A toy resumer: clone a failed job once, same checkpoint location, lineage in a tag."""
    job = event["detail"]["TrainingJobName"]
    if job.endswith("-r1"):
        return
    sagemaker = current().client("sagemaker")
    source = sagemaker.describe_training_job(TrainingJobName=job)
    keys = ("AlgorithmSpecification", "RoleArn", "OutputDataConfig", "ResourceConfig", "StoppingCondition")
    request = {k: source[k] for k in keys}
    request["CheckpointConfig"] = source["CheckpointConfig"]
    request["TrainingJobName"] = f"{job}-r1"
    request["Tags"] = [{"Key": "resumed-from", "Value": job}, {"Key": "team", "Value": "t"}]
    request["Tags"].append({"Key": "cost-center", "Value": "c"})
    sagemaker.create_training_job(**request)


def with_toy_guard(template: dict[str, Any], *, resume: bool = False) -> dict[str, Any]:
    """The template plus the toy guard's topic and two functions (a copy)."""
    out: dict[str, Any] = json.loads(json.dumps(template))
    resources = out["Resources"]
    resources["ToyAlarmTopic"] = {"Type": "AWS::SNS::Topic", "Properties": {}}
    common = {"CodeUri": "tests/", "Environment": {"Variables": {"TOY_ALARM_TOPIC_ARN": {"Ref": "ToyAlarmTopic"}}}}

    def policies(*actions: str) -> list[dict[str, Any]]:
        return [{"Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]}]

    resources["ToyGuardFunction"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            **common,
            "Handler": "tests.simulation.toy_guard.on_state_change",
            "Policies": policies("cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"),
            "Events": {
                "Training": {
                    "Type": "EventBridgeRule",
                    "Properties": {
                        "Pattern": {
                            "source": ["aws.sagemaker"],
                            "detail-type": ["SageMaker Training Job State Change"],
                            "detail": {"SecondaryStatus": ["Training"]},
                        }
                    },
                },
                "Ended": {
                    "Type": "EventBridgeRule",
                    "Properties": {
                        "Pattern": {
                            "source": ["aws.sagemaker"],
                            "detail-type": ["SageMaker Training Job State Change"],
                            "detail": {"TrainingJobStatus": sorted(TERMINAL)},
                        }
                    },
                },
            },
        },
    }
    resources["ToyStopperFunction"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            **common,
            "Handler": "tests.simulation.toy_guard.on_alarm",
            "Policies": policies("sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"),
            "Events": {"Alarms": {"Type": "SNS", "Properties": {"Topic": {"Ref": "ToyAlarmTopic"}}}},
        },
    }
    if resume:
        resources["ToyResumerFunction"] = {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                **common,
                "Handler": "tests.simulation.toy_guard.on_failed",
                "Policies": policies("sagemaker:DescribeTrainingJob", "sagemaker:CreateTrainingJob"),
                "Events": {
                    "Failed": {
                        "Type": "EventBridgeRule",
                        "Properties": {
                            "Pattern": {
                                "source": ["aws.sagemaker"],
                                "detail-type": ["SageMaker Training Job State Change"],
                                "detail": {"TrainingJobStatus": ["Failed"]},
                            }
                        },
                    }
                },
            },
        }
    return out


CALLS: list[dict[str, Any]] = []


def record(event: dict[str, Any], context: Any) -> None:
    """A recorder: keeps every event it receives (tests read ``CALLS``)."""
    CALLS.append(event)
