"""A CloudWatch alarm evaluator with CloudWatch's semantics, over the simulator's metric store.

- ``metric``: metric alarms (period statistics, M of N, the evaluation range and ``TreatMissingData``
  as the CloudWatch user guide tabulates them, the ``StateReason`` text);
- ``metric_math``: metric-math expressions (``MAX([m1, m2])``, ``SUM``, ``FILL``, ...);
- ``composite``: composite alarms' ``AlarmRule``;
- ``evaluator``: the stateful, event-driven evaluator that reports transitions with the notification
  CloudWatch would publish (its shape: ``smgov.simulation.messages``).
"""

from smgov.simulation.alarms.base import ALARM, INSUFFICIENT_DATA, OK, AlarmDefinitionError
from smgov.simulation.alarms.composite import CompositeAlarm
from smgov.simulation.alarms.evaluator import AlarmEvaluator, Transition
from smgov.simulation.alarms.metric import EXTRA_RANGE, MetricAlarm, decide, evaluate_alarm
from smgov.simulation.alarms.metric_math import MetricQuery, evaluate_expression

__all__ = [
    "ALARM",
    "EXTRA_RANGE",
    "INSUFFICIENT_DATA",
    "OK",
    "AlarmDefinitionError",
    "AlarmEvaluator",
    "CompositeAlarm",
    "MetricAlarm",
    "MetricQuery",
    "Transition",
    "decide",
    "evaluate_alarm",
    "evaluate_expression",
]
