"""A burst: N healthy GPU jobs created in the same virtual minute (the throttling benchmark).

``burst_scenario(300)`` is an ordinary ``Scenario``; run it with the CloudWatch quota model on, e.g.
``Simulation(burst_scenario(300), cloudwatch_tps=3.0).run()``, and read ``RunResult.throttling``.
"""

from __future__ import annotations

from collections.abc import Mapping

from smgov.simulation.scenario import JobSpec, Scenario, Script

BURST_TAGS = {"team": "burst", "cost-center": "cc-0001", "owner": "bench"}


def burst_scenario(
    jobs: int = 300,
    *,
    minute: int = 0,
    instance_type: str = "ml.g5.xlarge",
    train_hours: float = 1.0,
    parameters: Mapping[str, str | int | float | bool] | None = None,
) -> Scenario:
    """``jobs`` compliant, healthy single-host GPU jobs, all created at ``minute``."""
    if jobs < 1:
        raise ValueError("a burst needs at least one job")
    width = len(str(jobs))
    script = Script(train_hours=train_hours, gpu_percent=90)
    return Scenario(
        name=f"burst-{jobs}",
        description=f"{jobs} training jobs start in the same minute: every one must get its idle alarm.",
        parameters=dict(parameters or {}),
        jobs=tuple(
            JobSpec(
                name=f"burst-{index:0{width}d}",
                start_minute=minute,
                instance_type=instance_type,
                tags=dict(BURST_TAGS),
                script=script,
            )
            for index in range(jobs)
        ),
    )
