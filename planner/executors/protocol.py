"""The executor interface: a small required protocol plus optional capabilities.

An executor carries a :class:`models.Plan` out on a cluster. It needs two operations,
:meth:`Executor.observe` and :meth:`Executor.apply`; the capabilities below are optional
and callers test for them with ``isinstance`` (the protocols are runtime-checkable), the
way Kueue's integrations offer ``JobWithCustomStop`` and friends.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from models import Job, Plan
from planner.executors.state import ActionResult, ApplyReport, ClusterState


@runtime_checkable
class Executor(Protocol):
    """Applies plans to one cluster (or a set of clusters behind one controller).

    Implementations must make :meth:`apply` idempotent: applying the same slice twice
    changes nothing the second time, and an apply after a crash reconciles from what
    :meth:`observe` reports instead of from memory.
    """

    name: str

    def observe(self) -> ClusterState:
        """The cluster's nodes and jobs now, under the planner's names."""
        ...

    def apply(self, plan: Plan, slice_index: int) -> ApplyReport:
        """Make the cluster run slice ``slice_index`` of ``plan``; report what happened."""
        ...


@runtime_checkable
class SupportsSubmit(Protocol):
    """Can submit a planner job to the cluster, held until the plan starts it."""

    def submit(self, job: Job) -> ActionResult:
        """Submit ``job`` held (a no-op when a job of that name is already there)."""
        ...


@runtime_checkable
class SupportsSuspend(Protocol):
    """Can suspend a running job in place and resume it later (no requeue)."""

    def suspend(self, job: str) -> ActionResult: ...

    def resume(self, job: str) -> ActionResult: ...


@runtime_checkable
class SupportsDrain(Protocol):
    """Can drain a node (no new work) and return it to service."""

    def drain(self, node: str, reason: str) -> ActionResult: ...

    def undrain(self, node: str) -> ActionResult: ...


@runtime_checkable
class SupportsReasons(Protocol):
    """Can show a job's gpuplan state, in plain words, where the cluster's users look.

    ``gpuplan run`` calls :meth:`set_reason` for every managed job whose state line
    changed (``planner.reasons``); implementations keep the last text per job and skip
    the cluster call when it is unchanged, so the controller is not flooded.
    """

    def set_reason(self, job: str, text: str) -> ActionResult:
        """Show ``text`` as ``job``'s state; ``changed`` is false when it was shown already."""
        ...


class ExecutorUnavailable(RuntimeError):
    """The cluster's controller cannot be reached (after the executor's own retries).

    The control loop catches it, waits and tries again; nothing about the plan is lost.
    """
