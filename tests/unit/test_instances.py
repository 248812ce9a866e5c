from __future__ import annotations

from typing import Any

import pytest

from sagemaker_governance.domain.instances import (
    Accelerator,
    ec2_instance_type,
    facts_from_ec2,
    has_local_storage,
    instance_facts,
)


@pytest.mark.parametrize(
    ("instance_type", "gpus"),
    [
        ("ml.g4dn.xlarge", 1),
        ("ml.g4dn.16xlarge", 1),
        ("ml.g4dn.12xlarge", 4),
        ("ml.g5.2xlarge", 1),
        ("ml.g5.12xlarge", 4),
        ("ml.g5.24xlarge", 4),
        ("ml.g5.48xlarge", 8),
        ("ml.g6.4xlarge", 1),
        ("ml.g6.12xlarge", 4),
        ("ml.g6.48xlarge", 8),
        ("ml.g6e.xlarge", 1),
        ("ml.g6e.24xlarge", 4),
        ("ml.g6e.48xlarge", 8),
        ("ml.gr6.8xlarge", 1),
        ("ml.p3.2xlarge", 1),
        ("ml.p3.8xlarge", 4),
        ("ml.p3.16xlarge", 8),
        ("ml.p3dn.24xlarge", 8),
        ("ml.p4d.24xlarge", 8),
        ("ml.p4de.24xlarge", 8),
        ("ml.p5.48xlarge", 8),
        ("ml.p5e.48xlarge", 8),
        ("ml.p5en.48xlarge", 8),
        ("g5.12xlarge", 4),  # without the ml. prefix
    ],
)
def test_gpu_counts_of_current_families(instance_type: str, gpus: int) -> None:
    facts = instance_facts(instance_type)
    assert (facts.accelerator, facts.gpus) == (Accelerator.NVIDIA_GPU, gpus)
    assert facts.publishes_gpu_utilization


@pytest.mark.parametrize(
    ("instance_type", "kind"),
    [
        ("ml.trn1.2xlarge", Accelerator.TRAINIUM),
        ("ml.trn1.32xlarge", Accelerator.TRAINIUM),
        ("ml.trn1n.32xlarge", Accelerator.TRAINIUM),
        ("ml.trn2.48xlarge", Accelerator.TRAINIUM),
        ("ml.inf1.xlarge", Accelerator.INFERENTIA),
        ("ml.inf2.48xlarge", Accelerator.INFERENTIA),
        ("ml.m5.xlarge", Accelerator.CPU),
        ("ml.c5.18xlarge", Accelerator.CPU),
        ("ml.r5d.4xlarge", Accelerator.CPU),
        ("ml.c6i.32xlarge", Accelerator.CPU),
        ("ml.t3.medium", Accelerator.CPU),
    ],
)
def test_instances_without_gpu_utilization(instance_type: str, kind: Accelerator) -> None:
    facts = instance_facts(instance_type)
    assert facts.accelerator is kind and facts.gpus == 0
    assert not facts.publishes_gpu_utilization


@pytest.mark.parametrize("instance_type", ["ml.g5.3xlarge", "ml.p9.48xlarge", "ml.zz", "garbage"])
def test_unknown_types_are_not_guessed(instance_type: str) -> None:
    assert instance_facts(instance_type).accelerator is Accelerator.UNKNOWN


# ---- issue 16 item 3: every GPU type SageMaker training offers is sized; EC2 for the rest ------------


def training_instance_types() -> list[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    shape: Any = model.shape_for("TrainingInstanceType")
    return list(shape.enum)


def test_every_training_instance_type_of_botocores_model_is_sized() -> None:
    # Given the instance types CreateTrainingJob accepts (botocore's SageMaker model, AWS's own list),
    # when each is classified, then none is "unknown": a new GPU family must be added to the table (or
    # to a documented rule), otherwise its jobs would get no idle guard at all.
    types = training_instance_types()
    assert len(types) > 100
    unknown = [t for t in types if instance_facts(t).accelerator is Accelerator.UNKNOWN]
    assert unknown == []


@pytest.mark.parametrize(
    ("instance_type", "gpus"),
    [
        ("ml.g7e.2xlarge", 1),
        ("ml.g7e.12xlarge", 2),
        ("ml.g7e.48xlarge", 8),
        ("ml.g7.24xlarge", 4),
        ("ml.p6-b300.48xlarge", 8),
        ("ml.p6e-gb200.36xlarge", 4),
    ],
)
def test_blackwell_families(instance_type: str, gpus: int) -> None:
    facts = instance_facts(instance_type)
    assert (facts.accelerator, facts.gpus) == (Accelerator.NVIDIA_GPU, gpus)


def test_flexible_cpu_families_are_cpu() -> None:
    assert instance_facts("ml.m7i-flex.2xlarge").accelerator is Accelerator.CPU
    assert instance_facts("ml.c8i-flex.16xlarge").accelerator is Accelerator.CPU


def gpu_info(*gpus: dict[str, object]) -> dict[str, object]:
    return {"InstanceType": "g9.12xlarge", "GpuInfo": {"Gpus": list(gpus)}}


@pytest.mark.parametrize(
    ("info", "accelerator", "gpus"),
    [
        (gpu_info({"Name": "X", "Manufacturer": "NVIDIA", "Count": 4}), Accelerator.NVIDIA_GPU, 4),
        (
            gpu_info({"Manufacturer": "NVIDIA", "Count": 2}, {"Manufacturer": "NVIDIA", "Count": 1}),
            Accelerator.NVIDIA_GPU,
            3,
        ),
        (gpu_info({"Manufacturer": "AMD", "Count": 1}), Accelerator.UNKNOWN, 0),
        (gpu_info({"Manufacturer": "NVIDIA", "Count": 1, "GpuPartitionSize": 0.5}), Accelerator.UNKNOWN, 0),
        (gpu_info({"Manufacturer": "NVIDIA", "Count": 0}), Accelerator.UNKNOWN, 0),
        ({"InstanceType": "trn9.2xlarge", "NeuronInfo": {"NeuronDevices": []}}, Accelerator.TRAINIUM, 0),
        ({"InstanceType": "m9.2xlarge", "VCpuInfo": {"DefaultVCpus": 8}}, Accelerator.CPU, 0),
        (None, Accelerator.UNKNOWN, 0),
    ],
)
def test_facts_from_ec2(info: dict[str, object] | None, accelerator: Accelerator, gpus: int) -> None:
    # Given EC2's InstanceTypeInfo (None: EC2 does not know the type), then only whole NVIDIA GPUs count.
    facts = facts_from_ec2("ml.x9.2xlarge", info)
    assert (facts.accelerator, facts.gpus) == (accelerator, gpus)


def test_ec2_name_of_a_sagemaker_type() -> None:
    assert ec2_instance_type("ml.p6e-gb200.36xlarge") == "p6e-gb200.36xlarge"
    assert ec2_instance_type("garbage") is None


def recorded_ec2_instance_types() -> dict[str, dict[str, object]]:
    """EC2's DescribeInstanceTypes answers as moto records them from AWS (moto/ec2/resources)."""
    import gzip
    import json
    from pathlib import Path

    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as data:
        recorded: dict[str, dict[str, object]] = json.load(data)
    return recorded


def training_types_ec2_describes() -> list[tuple[str, dict[str, object]]]:
    """Each SageMaker training type with EC2's recorded description of it (the types EC2 does not describe
    left out)."""
    recorded = recorded_ec2_instance_types()
    pairs = ((t, recorded.get(t.removeprefix("ml."))) for t in training_instance_types())
    return [(t, info) for t, info in pairs if info is not None]


def test_the_table_agrees_with_ec2_for_every_training_type_ec2_describes() -> None:
    # Given EC2's own description of each instance type (recorded by moto from DescribeInstanceTypes),
    # when our table and EC2 both know a training type, then they agree on its NVIDIA GPU count, and
    # facts_from_ec2 (what the service does for a type the table lacks) gives the same answer.
    described = training_types_ec2_describes()
    for instance_type, info in described:
        ours, ec2 = instance_facts(instance_type), facts_from_ec2(instance_type, info)
        assert (ours.accelerator is Accelerator.NVIDIA_GPU, ours.gpus) == (
            ec2.accelerator is Accelerator.NVIDIA_GPU,
            ec2.gpus,
        ), instance_type
    assert len(described) > 150


def test_local_storage_agrees_with_ec2_for_every_training_type_ec2_describes() -> None:
    # Given EC2's own description of each training type (InstanceStorageSupported, recorded by moto), then
    # our table knows every one of them and agrees (a VolumeKmsKeyId is refused on the types that have it)
    described = training_types_ec2_describes()
    for instance_type, info in described:
        assert has_local_storage(instance_type) is bool(info.get("InstanceStorageSupported")), instance_type
    assert len(described) > 150


@pytest.mark.parametrize(
    ("instance_type", "local"),
    [
        ("ml.p4d.24xlarge", True),
        ("ml.p3dn.24xlarge", True),
        ("ml.g5.12xlarge", True),
        ("ml.p2.xlarge", False),  # EBS-only: botocore's ResourceConfig.VolumeSizeInGB names ml.p2
        ("ml.c5.2xlarge", False),
        ("ml.p3.16xlarge", None),  # not in EC2's recorded answers: not known
        ("ml.x9.2xlarge", None),
        ("garbage", None),
    ],
)
def test_local_storage_of_a_type(instance_type: str, local: bool | None) -> None:
    assert has_local_storage(instance_type) is local
