"""The fleet simulator: simulated training jobs on a virtual clock, governed by the real service.

One run (``Simulation``) is one account over virtual minutes, along these seams:

- ``phases`` / ``lifecycle`` / ``jobs``: each training job follows its script through the phase table
  (Starting, Downloading, Training, Uploading, Completed / Failed / Stopped, Spot ``Interrupted`` and
  restarts, ``MaxRuntimeExceeded``, ``MaxWaitTimeExceeded``) in the SageMaker double, which emits a
  real-shaped state-change event at every status change; the service's stops and clones come back
  through the double.
- ``telemetry``: what the hosts and the training script publish to the metric store.
- ``alarm_mirror``: the alarms the service created in moto, evaluated with CloudWatch's semantics
  (``smgov.simulation.alarms``); a transition publishes the real alarm message to the alarm's SNS actions.
- ``delivery``: routing by ``template.yaml`` (EventBridge patterns, SNS subscriptions, schedules),
  Lambda's retries and on-failure destinations, and the injected faults.
- ``counters`` / ``invariants``: what the run counts, and the ground truth of the reliability invariants.
- ``account``: moto, the deployed template and the handlers' composition root.

With ``governed=False`` the same fleet runs with no service at all: the baseline.
"""

from smgov.simulation.engine.counters import Invocation
from smgov.simulation.engine.delivery import SimulationError
from smgov.simulation.engine.jobs import JobRun
from smgov.simulation.engine.simulation import STACK_NAME, RunResult, Simulation

__all__ = ["STACK_NAME", "Invocation", "JobRun", "RunResult", "Simulation", "SimulationError"]
