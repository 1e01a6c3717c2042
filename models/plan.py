"""The time-slice plan: the contract between the planner, executors and the UI.

Times are seconds from the scenario's start (``origin``, when known, anchors them).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from models.base import Frozen


class SolveStatus(StrEnum):
    """One status for every backend (the planner maps each solver's own codes onto it)."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # an incumbent, not proven optimal (time limit or gap)
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"  # time limit passed with no incumbent
    ERROR = "error"
    TRIVIAL = "trivial"  # nothing to decide (no queue, no preemptible job)


class PendingReason(StrEnum):
    """What kept a waiting job out of the plan."""

    POOL_CAPACITY = "pool_capacity"  # every allowed pool is full
    NO_GANG_HOLE = "no_gang_hole"  # enough free GPUs, but not in the gang's shape
    BUDGET_EXHAUSTED = "budget_exhausted"  # its project has no headroom; unallocated only
    FAIR_SHARE_RANK = "fair_share_rank"  # capacity went to projects further below their share
    MAINTENANCE = "maintenance"  # the only fitting nodes are drained
    CONTRACTS = "contracts"  # the GPUs are held by other jobs inside their minimum runtime
    PRIORITY = "priority"  # capacity went to higher-priority work of its own project


class Assignment(Frozen):
    job: str
    project: str
    cluster: str
    gpu_type: str
    nodes: tuple[str, ...]
    gpus: int
    charged: bool


class Slice(Frozen):
    start: float
    end: float
    assignments: tuple[Assignment, ...] = ()


class Action(Frozen):
    job: str
    action: Literal["start", "continue", "preempt", "resume"]
    at: float


class Pending(Frozen):
    job: str
    reason: PendingReason
    detail: str = ""


class ProjectPlan(Frozen):
    project: str
    owed_gpu_h: float
    planned_gpu_h: float
    charged_gpu_h: float


class SolverInfo(Frozen):
    backend: str
    status: SolveStatus
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    seconds: float = 0.0
    fallback: bool = False
    message: str = ""
    #: The objective with the charging the plan itself does (``Assignment.charged``:
    #: whole run-slices). The MIP counts charged slices as whole numbers per project and
    #: slice size and the plan charges exactly those, so this should equal
    #: ``objective``; it is kept so that readers and the benchmark can check it.
    charged_objective: float | None = None


class NodeFree(Frozen):
    """When a drained node has no more work on it."""

    node: str
    free_at: float


class Plan(Frozen):
    """Which job runs on which nodes in each slice of one epoch, and why others wait."""

    epoch_start: float
    epoch_end: float
    origin: datetime | None = None
    slices: tuple[Slice, ...]
    actions: tuple[Action, ...] = ()
    pending: tuple[Pending, ...] = ()
    projects: tuple[ProjectPlan, ...] = ()
    solver: SolverInfo
    drained_nodes: tuple[NodeFree, ...] = Field(default=())

    def slice_at(self, t: float) -> Slice | None:
        for s in self.slices:
            if s.start <= t < s.end:
                return s
        return None
