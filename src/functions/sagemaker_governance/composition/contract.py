"""The IAM contract: the adapters each function uses, by the template's logical id.

The template must grant each function exactly the union of its adapters' ``IAM_ACTIONS`` (checked by
``tests/infrastructure``); the cold-start benchmark creates the clients they imply. Not imported by
the functions themselves.
"""

from __future__ import annotations

from sagemaker_governance.composition import alarm_stopper, job_events, reconciler

FUNCTION_ADAPTERS: dict[str, tuple[type, ...]] = {
    "JobEventsFunction": job_events.ADAPTERS,
    "IdleStopperFunction": alarm_stopper.ADAPTERS,
    "ReconcilerFunction": reconciler.ADAPTERS,
}
