"""The policy registry, as the simulator's callers have imported it.

The policies live in the scheduler core (:mod:`planner.scheduler`), shared with
``gpuplan run``; this module only re-exports the registry.
"""

from planner.scheduler.policies import OPTIONS, POLICY_NAMES, make_policy, policy_options

__all__ = ["OPTIONS", "POLICY_NAMES", "make_policy", "policy_options"]
