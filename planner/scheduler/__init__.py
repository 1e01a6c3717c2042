"""The one scheduler the simulator and ``gpuplan run`` both drive.

- :mod:`planner.scheduler.core`: :class:`Scheduler`, the state, the event step, the
  decisions' effects and the usage ledger's charging;
- :mod:`planner.scheduler.legacy`, :mod:`~planner.scheduler.fairshare`,
  :mod:`~planner.scheduler.mip`: the policies (decision rules);
- :mod:`planner.scheduler.queues`: shape-bucketed queues and the victim search the
  policies share;
- :mod:`planner.scheduler.policies`: the registry (:func:`make_policy`).
"""

from planner.scheduler.core import (
    CHARGE,
    CONTRACT,
    DECISIONS,
    DRAIN_END,
    DRAIN_START,
    EVENT_COLUMNS,
    FINISH,
    SUBMIT,
    WAKE,
    Accounting,
    Event,
    Policy,
    Scheduler,
    candidate_pools,
    current_plan,
    maintenance_events,
    try_place,
)
from planner.scheduler.policies import OPTIONS, POLICY_NAMES, make_policy, policy_options

__all__ = [
    "CHARGE", "CONTRACT", "DECISIONS", "DRAIN_END", "DRAIN_START", "EVENT_COLUMNS", "FINISH",
    "OPTIONS", "POLICY_NAMES", "SUBMIT", "WAKE", "Accounting", "Event", "Policy", "Scheduler",
    "candidate_pools", "current_plan", "maintenance_events", "make_policy", "policy_options", "try_place",
]
