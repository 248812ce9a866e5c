"""EC2's catalogue of instance types for types our table does not know (issue 16 item 3): request shape
(botocore Stubber validates it against EC2's model), caching, and do-no-harm when EC2 cannot answer."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.stub import Stubber

from sagemaker_governance.adapters.ec2 import Ec2InstanceCatalog
from sagemaker_governance.domain.instances import Accelerator

NEW_TYPE = "ml.g9.12xlarge"  # not in our table, valid for EC2's name pattern
INFO = {"InstanceType": "g9.12xlarge", "GpuInfo": {"Gpus": [{"Name": "X9", "Manufacturer": "NVIDIA", "Count": 4}]}}


def stubbed() -> tuple[Ec2InstanceCatalog, Stubber, list[int]]:
    client = boto3.client("ec2", region_name="us-east-1")
    stubber = Stubber(client)
    built: list[int] = []

    def factory() -> Any:
        built.append(1)
        return client

    return Ec2InstanceCatalog(factory), stubber, built


def expect(name: str = "g9.12xlarge") -> dict[str, Any]:
    return {"InstanceTypes": [name], "IncludeUnsupportedInRegion": True}


def test_an_unknown_type_is_sized_from_ec2_once() -> None:
    # Given EC2 describing the type with 4 NVIDIA GPUs,
    catalog, stubber, _ = stubbed()
    stubber.add_response("describe_instance_types", {"InstanceTypes": [INFO]}, expect())
    with stubber:
        # When the catalogue is asked twice, then EC2 is called once and both answers say 4 GPUs.
        first, second = catalog.facts(NEW_TYPE), catalog.facts(NEW_TYPE)
    assert (first.accelerator, first.gpus) == (Accelerator.NVIDIA_GPU, 4)
    assert second == first
    stubber.assert_no_pending_responses()


def test_a_known_type_never_reaches_ec2() -> None:
    catalog, _, built = stubbed()
    assert catalog.facts("ml.g5.12xlarge").gpus == 4
    assert catalog.facts("ml.m5.xlarge").accelerator is Accelerator.CPU
    assert built == []  # not even a client (no cold-start cost)


def test_a_type_ec2_does_not_know_stays_unknown_and_is_cached() -> None:
    catalog, stubber, _ = stubbed()
    stubber.add_client_error("describe_instance_types", "InvalidInstanceType", "no such type", 400)
    with stubber:
        first, second = catalog.facts(NEW_TYPE), catalog.facts(NEW_TYPE)
    assert first.accelerator is Accelerator.UNKNOWN and second == first
    assert not first.lookup_failed  # EC2's answer: unknown for good


def test_when_ec2_cannot_answer_the_type_stays_unknown_and_is_asked_again() -> None:
    # Given EC2 throttling, then the type is unknown with the reason (no alarm), and the failure is
    # not cached: the next job asks again and gets the answer.
    catalog, stubber, _ = stubbed()
    stubber.add_client_error("describe_instance_types", "RequestLimitExceeded", "slow down", 503)
    stubber.add_response("describe_instance_types", {"InstanceTypes": [INFO]}, expect())
    with stubber:
        failed = catalog.facts(NEW_TYPE)
        answered = catalog.facts(NEW_TYPE)
    assert failed.accelerator is Accelerator.UNKNOWN and "RequestLimitExceeded" in failed.note
    assert failed.lookup_failed  # no fact: what was planned on it is not remembered (the reconciler asks again)
    assert answered.gpus == 4 and not answered.lookup_failed


def test_an_empty_answer_means_unknown() -> None:
    catalog, stubber, _ = stubbed()
    stubber.add_response("describe_instance_types", {"InstanceTypes": []}, expect())
    with stubber:
        assert catalog.facts(NEW_TYPE).accelerator is Accelerator.UNKNOWN
