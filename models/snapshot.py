"""The frozen snapshot one epoch is planned from.

The planner is a pure function of (snapshot, policy): the simulator, the CLI and the live
control loop all build one of these and nothing else.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from models.base import Frozen
from models.cluster import Node
from models.gpu import GpuType
from models.org import OrgUnit
from models.policy import Policy
from models.standing import ProjectStanding
from models.workload import Job

#: Spare time: the lanes leave a restarted job alone this long (a slice, and at least
#: this), and funded non-resumable work that has run this long is kept running.
SPARE_MIN_S = 900.0


def spare_seconds(slice_len: float) -> float:
    """How long a job counts as just started: a slice, and at least SPARE_MIN_S (with
    75 s slices the lanes restarted jobs 5-9 times each)."""
    return max(slice_len, SPARE_MIN_S)


def keeps_running(job: Job, charged: bool, progress: float, slice_len: float) -> bool:
    """Whether the plan must let a running job finish: funded non-resumable work that is
    charged, or that has run uncharged (past its project's budget headroom) for longer
    than :func:`spare_seconds`. Stopping it loses all its progress; the plan's epoch
    sees only a capped cost for that and stopped such work again and again (on a week of
    ai2-like one free-running 64-GPU job was stopped 5 times, 923 GPU-hours lost).
    Maintenance may still stop it once its contract has passed."""
    if job.resumable or not job.allocated:
        return False
    return charged or progress > spare_seconds(slice_len)


def drain_guard(job: Job, charged: bool, remaining: float | None) -> float:
    """Seconds a start of ``job`` keeps clear of maintenance windows (no node whose
    window opens within them, :func:`planner.placement.holds_up_drain`): a charged
    start's contract, which the drain would wait for; and for funded non-resumable work,
    which the plan lets run out (:func:`keeps_running`), charged or not, its declared
    remaining time, since a drain that stops it throws all its progress away. Unknown
    duration: the contract alone."""
    guard = job.min_runtime if charged and job.allocated else 0.0
    if job.allocated and not job.resumable and remaining is not None and remaining < float("inf"):
        guard = max(guard, remaining)
    return guard


class NodeState(Frozen):
    """A node and its maintenance window, if one overlaps the epoch.

    From ``drain_start`` to ``drain_end`` the node takes no new work, and the work on it
    moves off as contracts allow. ``next_drain`` is the start of the node's next window
    after the epoch, if any: a start whose contract would still hold then keeps off the
    node, so that the drain does not wait for it.
    """

    node: Node
    drain_start: float | None = None
    drain_end: float | None = None
    next_drain: float | None = None

    def drained_at(self, t: float) -> bool:
        return (
            self.drain_start is not None
            and self.drain_start <= t
            and (self.drain_end is None or t < self.drain_end)
        )


class JobState(Frozen):
    """A job as the planner sees it.

    ``progress`` is seconds of useful work done so far (kept across preemptions of
    resumable jobs). For a running job, ``run_start`` is when its current run began (the
    contract counts from there) and ``nodes`` the nodes it holds.
    """

    job: Job
    status: Literal["queued", "running"]
    progress: float = 0.0
    run_start: float | None = None
    cluster: str | None = None
    gpu_type: str | None = None
    nodes: tuple[str, ...] = ()
    charged: bool = True
    restarts: int = 0

    @property
    def contract_end(self) -> float:
        """When a running job's minimum runtime ends (the start for queued jobs)."""
        start = self.run_start if self.run_start is not None else 0.0
        return start + self.job.min_runtime

    @property
    def remaining(self) -> float | None:
        """Seconds of work left, when the duration is known."""
        if self.job.duration is None:
            return None
        return max(self.job.duration - self.progress, 0.0)


class Snapshot(Frozen):
    """Everything one epoch's plan depends on, at time ``now``."""

    now: float
    origin: datetime | None = None
    policy: Policy
    gpu_types: dict[str, GpuType]
    org: tuple[OrgUnit, ...]
    nodes: tuple[NodeState, ...]
    jobs: tuple[JobState, ...]
    standing: dict[str, ProjectStanding]
