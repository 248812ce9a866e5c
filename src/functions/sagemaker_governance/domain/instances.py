"""Instance types as the idle guard sees them: how many NVIDIA GPUs an instance has, or why it has none.

SageMaker publishes ``GPUUtilization`` per host as the *sum* over the host's GPUs (0-100 x GPU count),
so a per-GPU threshold must be scaled by the exact GPU count of the instance type. Only NVIDIA GPU
instances publish it: AWS Trainium and Inferentia accelerators and CPU instances do not.

The table lists every size of the current GPU families SageMaker training offers. A type we do not know
is reported as ``unknown``: the idle guard then creates no alarm rather than guessing a GPU count (a
wrong, too-large count would make a busy job look idle).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

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
}

TRAINIUM_FAMILIES: Final = frozenset({"trn1", "trn1n", "trn2"})
INFERENTIA_FAMILIES: Final = frozenset({"inf1", "inf2"})
# General purpose, compute, memory optimised and burstable families: no accelerator at all.
_CPU_FAMILY = re.compile(r"^(m|c|r|t|x|z)[0-9]+[a-z]*$")
_TYPE = re.compile(r"^(?:ml\.)?(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")


class InstanceFacts(BaseModel):
    """What the idle guard needs to know about one instance type."""

    model_config = ConfigDict(frozen=True)

    instance_type: str
    accelerator: Accelerator
    gpus: int = 0
    note: str

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
