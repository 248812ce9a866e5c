from __future__ import annotations

import pytest

from sagemaker_governance.domain.instances import Accelerator, instance_facts


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
