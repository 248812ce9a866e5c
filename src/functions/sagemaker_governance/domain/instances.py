"""Instance types as the idle guard sees them: how many NVIDIA GPUs an instance has, or why it has none;
and, for the clone planner, whether a type has local instance storage (``has_local_storage``).

SageMaker publishes ``GPUUtilization`` per host as the *sum* over the host's GPUs (0-100 x GPU count),
so a per-GPU threshold must be scaled by the exact GPU count of the instance type. Only NVIDIA GPU
instances publish it: AWS Trainium and Inferentia accelerators and CPU instances do not.

The table lists every size of the GPU families SageMaker training offers (a test checks it against the
``TrainingInstanceType`` enum of botocore's SageMaker model). A type the table and the rules below do not
know is ``unknown``; the service then asks EC2 (``DescribeInstanceTypes`` of the type without ``ml.``,
:func:`facts_from_ec2`) and, when EC2 cannot answer either, creates no alarm rather than guessing a GPU
count: a wrong, too-large count would make a busy job look idle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict


class Accelerator(StrEnum):
    NVIDIA_GPU = "nvidia-gpu"
    TRAINIUM = "trainium"
    INFERENTIA = "inferentia"
    CPU = "cpu"
    UNKNOWN = "unknown"


_SMALL = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")

# family -> size -> number of NVIDIA GPUs (SageMaker `ml.` instance types).
GPU_COUNTS: Final[dict[str, dict[str, int]]] = {
    "g4dn": {**dict.fromkeys(_SMALL, 1), "12xlarge": 4},
    "g5": {**dict.fromkeys(_SMALL, 1), "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6": {**dict.fromkeys(_SMALL, 1), "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6e": {**dict.fromkeys(_SMALL, 1), "12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "gr6": {"4xlarge": 1, "8xlarge": 1},
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"4xlarge": 1, "48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "p6-b200": {"48xlarge": 8},
    # Blackwell families (2025-26), as EC2's DescribeInstanceTypes reports them (a test compares the
    # whole table with a recorded copy of its answers); p6e-gb200, which EC2 sells only in UltraServers,
    # as AWS's SageMaker HyperPod CLI lists it (aws/sagemaker-hyperpod-cli, training/constants.py).
    "g7": {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8},
    "g7e": {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8},
    "p6-b300": {"48xlarge": 8},
    "p6e-gb200": {"36xlarge": 4},
}

TRAINIUM_FAMILIES: Final = frozenset({"trn1", "trn1n", "trn2"})
INFERENTIA_FAMILIES: Final = frozenset({"inf1", "inf2"})
# General purpose, compute, memory optimised and burstable families, flexible ones included
# (``m7i-flex``): no accelerator at all.
_CPU_FAMILY = re.compile(r"^(m|c|r|t|x|z)[0-9]+[a-z]*(-flex)?$")
_TYPE = re.compile(r"^(?:ml\.)?(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")


class InstanceFacts(BaseModel):
    """What the idle guard needs to know about one instance type."""

    model_config = ConfigDict(frozen=True)

    instance_type: str
    accelerator: Accelerator
    gpus: int = 0
    note: str
    # True when ``unknown`` is no fact but a lookup that could not answer (EC2 throttled, denied, unreachable):
    # asked again later, so nothing decided on it may be remembered as settled.
    lookup_failed: bool = False

    @property
    def publishes_gpu_utilization(self) -> bool:
        return self.accelerator is Accelerator.NVIDIA_GPU and self.gpus > 0


def instance_facts(instance_type: str) -> InstanceFacts:
    """GPU count and accelerator kind of a SageMaker instance type (``ml.g5.12xlarge`` -> 4 NVIDIA GPUs)."""
    match = _TYPE.match(instance_type.strip().lower())
    if match is None:
        return InstanceFacts(
            instance_type=instance_type, accelerator=Accelerator.UNKNOWN, note="not an instance type name"
        )
    family, size = match["family"], match["size"]
    if family in GPU_COUNTS:
        gpus = GPU_COUNTS[family].get(size)
        if gpus is None:
            return InstanceFacts(
                instance_type=instance_type,
                accelerator=Accelerator.UNKNOWN,
                note=f"unknown size {size!r} of the GPU family {family}",
            )
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.NVIDIA_GPU,
            gpus=gpus,
            note=f"{gpus} NVIDIA GPU{'s' if gpus > 1 else ''}",
        )
    if family in TRAINIUM_FAMILIES:
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.TRAINIUM,
            note="AWS Trainium accelerators publish no GPUUtilization",
        )
    if family in INFERENTIA_FAMILIES:
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.INFERENTIA,
            note="AWS Inferentia accelerators publish no GPUUtilization",
        )
    if _CPU_FAMILY.match(family):
        return InstanceFacts(
            instance_type=instance_type, accelerator=Accelerator.CPU, note="CPU-only instance: no GPU"
        )
    return InstanceFacts(
        instance_type=instance_type, accelerator=Accelerator.UNKNOWN, note=f"unknown instance family {family!r}"
    )


def resolve_unknown(
    instance_types: Iterable[str], facts: Callable[[str], InstanceFacts]
) -> dict[str, InstanceFacts]:
    """``facts`` (EC2's, through a catalog) of each type our table does not know, by type: what a plan that
    needs them takes as ``resolved`` (the alarms created, and the stopper judging and re-planning them)."""
    return {t: facts(t) for t in instance_types if instance_facts(t).accelerator is Accelerator.UNKNOWN}


def ec2_instance_type(instance_type: str) -> str | None:
    """The EC2 name of a SageMaker instance type (``ml.g7e.12xlarge`` -> ``g7e.12xlarge``), if it is one."""
    name = instance_type.strip().lower()
    match = _TYPE.match(name)
    return f"{match['family']}.{match['size']}" if match is not None else None


def facts_from_ec2(instance_type: str, info: Mapping[str, Any] | None) -> InstanceFacts:
    """What EC2's ``DescribeInstanceTypes`` says about the type (``info``: its ``InstanceTypeInfo``;
    ``None``: EC2 does not know the type).

    Only a whole number of NVIDIA GPUs is trusted: a fractional GPU (``GpuPartitionSize`` < 1) or another
    manufacturer stays ``unknown`` (what SageMaker publishes as ``GPUUtilization`` there is not
    documented). No ``GpuInfo`` means no GPU: Neuron accelerators are named as such, the rest is CPU.
    """
    if info is None:
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.UNKNOWN,
            note="unknown instance type: neither our table nor EC2's DescribeInstanceTypes knows it",
        )
    gpus = list((info.get("GpuInfo") or {}).get("Gpus") or [])
    if gpus:
        nvidia = [g for g in gpus if str(g.get("Manufacturer", "")).upper() == "NVIDIA"]
        whole = all(float(g.get("GpuPartitionSize", 1) or 1) >= 1 for g in nvidia)
        count = sum(int(g.get("Count", 0) or 0) for g in nvidia)
        if len(nvidia) != len(gpus) or not whole or count < 1:
            return InstanceFacts(
                instance_type=instance_type,
                accelerator=Accelerator.UNKNOWN,
                note="EC2 reports GPUs that are not whole NVIDIA GPUs; their GPUUtilization is not documented",
            )
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=Accelerator.NVIDIA_GPU,
            gpus=count,
            note=f"{count} NVIDIA GPU{'s' if count > 1 else ''} (EC2 DescribeInstanceTypes)",
        )
    if info.get("NeuronInfo"):
        family = (ec2_instance_type(instance_type) or "").split(".", 1)[0]
        kind = Accelerator.INFERENTIA if family.startswith("inf") else Accelerator.TRAINIUM
        return InstanceFacts(
            instance_type=instance_type,
            accelerator=kind,
            note="AWS Neuron accelerators publish no GPUUtilization (EC2 DescribeInstanceTypes)",
        )
    return InstanceFacts(
        instance_type=instance_type,
        accelerator=Accelerator.CPU,
        note="EC2 DescribeInstanceTypes reports no GPU",
    )


# ---- local instance storage -------------------------------------------------------------------------
#
# Whether an instance type has local (NVMe SSD instance store) storage. SageMaker mounts it instead of an EBS
# volume, and "you can't request a VolumeKmsKeyId when using an instance type with local storage" (botocore's
# SageMaker model, ResourceConfig.VolumeKmsKeyId): a clone moved to such a type with its source's
# VolumeKmsKeyId is refused by CreateTrainingJob. By family, as EC2's DescribeInstanceTypes reports each
# training type (InstanceStorageSupported; a test compares every training type EC2 describes with a recorded
# copy of its answers). The recorded answers lack the older ml.p2 and ml.p3: ml.p2 is EBS-only as the same
# model's ResourceConfig.VolumeSizeInGB says ("ML instance families that use EBS volumes include ml.c5 and
# ml.p2"); ml.p3 is left unknown. A family in neither set is unknown.
LOCAL_STORAGE_FAMILIES: Final = frozenset(
    {
        "g4dn", "g5", "g6", "g6e", "g7", "g7e",
        "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
        "r5d", "trn1", "trn1n", "trn2",
    }
)  # fmt: skip
EBS_ONLY_FAMILIES: Final = frozenset(
    {
        "p2",
        "c4", "c5", "c5n", "c6i", "c7i", "c7i-flex", "c8i", "c8i-flex",
        "m4", "m5", "m6i", "m7i", "m7i-flex", "m8i", "m8i-flex",
        "r5", "r6i", "r7i", "r8i", "r8i-flex", "t3",
    }
)  # fmt: skip


def has_local_storage(instance_type: str) -> bool | None:
    """Whether the type has local instance storage (see above); None: not known."""
    match = _TYPE.match(instance_type.strip().lower())
    if match is None:
        return None
    family = match["family"]
    if family in LOCAL_STORAGE_FAMILIES:
        return True
    if family in EBS_ONLY_FAMILIES:
        return False
    return None


_SIZE = re.compile(r"^(?P<n>[0-9]*)xlarge$")


def vcpus(instance_type: str) -> int | None:
    """The vCPUs of an instance type from its size, EC2's naming convention: ``large`` 2, ``xlarge`` 4,
    ``<n>xlarge`` 4 x n (every ml.* GPU type SageMaker trains on follows it: ml.g5.12xlarge 48,
    ml.p4d.24xlarge 96, ml.p5.48xlarge 192). ``None`` where the size says nothing (``medium``, ``metal``)."""
    match = _TYPE.match(instance_type.strip().lower())
    if match is None:
        return None
    size = match["size"]
    if size == "large":
        return 2
    sized = _SIZE.match(size)
    if sized is None:
        return None
    return 4 * int(sized["n"] or 1)
