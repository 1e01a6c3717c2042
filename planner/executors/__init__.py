"""Executors carry plans out on clusters: a small protocol, a registry, two built-ins.

- :class:`Executor` (``observe()``, ``apply(plan, slice_index)``) and the optional
  capabilities :class:`SupportsSubmit`, :class:`SupportsSuspend`, :class:`SupportsDrain`,
  :class:`SupportsReasons`;
- :func:`default_registry`: the built-ins (``dryrun``, ``slurm``) plus the plugins of
  the entry-point group ``gpuplan.executors``;
- :func:`reconcile`: the shared rule that makes ``apply`` idempotent.
"""

from planner.executors.protocol import (
    Executor,
    ExecutorFailure,
    ExecutorUnavailable,
    SupportsDrain,
    SupportsReasons,
    SupportsSubmit,
    SupportsSuspend,
)
from planner.executors.reconcile import Step, reconcile
from planner.executors.registry import (
    ENTRY_POINT_GROUP,
    ExecutorError,
    ExecutorFactory,
    ExecutorOptionError,
    ExecutorRegistry,
    default_registry,
)
from planner.executors.state import (
    ActionResult,
    ApplyReport,
    ClusterState,
    ObservedJob,
    ObservedNode,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionResult",
    "ApplyReport",
    "ClusterState",
    "Executor",
    "ExecutorError",
    "ExecutorFactory",
    "ExecutorFailure",
    "ExecutorOptionError",
    "ExecutorRegistry",
    "ExecutorUnavailable",
    "ObservedJob",
    "ObservedNode",
    "Step",
    "SupportsDrain",
    "SupportsReasons",
    "SupportsSubmit",
    "SupportsSuspend",
    "default_registry",
    "reconcile",
]
