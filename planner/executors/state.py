"""What an executor observes and what it reports after applying a slice.

Times here are wall-clock POSIX seconds (``time.time()``), because they come from the
cluster; the control loop maps them onto the scenario's time axis.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from models.base import Frozen

JobPhase = Literal["held", "pending", "running", "suspended", "completing", "finished"]
"""Where a job is: ``held`` (waits for the planner), ``pending`` (released, waiting for
its nodes), ``running``, ``suspended`` (stopped in place, still holding its nodes),
``completing`` (being stopped) or ``finished``."""

ActionKind = Literal[
    "start", "continue", "preempt", "resume", "hold", "protect", "drain", "undrain", "submit",
    "suspend", "reason",
]


class ObservedNode(Frozen):
    """One node as the cluster reports it, under the planner's node name.

    ``drained`` is true when the node takes no new work (drained, draining, down or
    otherwise unavailable); ``reason`` says why, in the cluster's words.
    """

    name: str
    native: str
    gpus: int = Field(ge=0)
    gpu_type: str | None = None
    state: str = "idle"
    drained: bool = False
    reason: str = ""


class ObservedJob(Frozen):
    """One job as the cluster reports it, under the planner's job name.

    ``managed`` jobs follow the plan; the others (submitted outside the planner's
    convention) are observed because they occupy nodes, and never touched.
    ``run_start`` is when the current run began (wall clock), which is where the
    time-slicing contract counts from. ``pinned`` are the nodes the job is held to.
    ``requeued_at`` is when a preempted job last went back to the queue, if known.
    """

    job: str
    native_id: str
    phase: JobPhase
    managed: bool = True
    project: str | None = None
    gpus: int = Field(default=0, ge=0)
    nodes: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    run_start: float | None = None
    min_runtime: float | None = None
    resumable: bool = False
    restarts: int = Field(default=0, ge=0)
    requeued_at: float | None = None
    reason: str = ""

    def contract_end(self) -> float | None:
        """When a running job's minimum runtime ends (wall clock), or ``None`` if idle.

        A job whose contract is unknown is protected for as long as it runs: the
        executor never guesses in favour of preempting.
        """
        if self.run_start is None:
            return None
        if self.min_runtime is None:
            return float("inf")
        return self.run_start + self.min_runtime

    def protected_at(self, now: float) -> bool:
        """Whether the job runs inside its minimum runtime at ``now``."""
        end = self.contract_end()
        return self.phase == "running" and end is not None and now < end


class ClusterState(Frozen):
    """One observation of the cluster: its nodes and jobs at wall-clock time ``at``."""

    at: float
    nodes: tuple[ObservedNode, ...] = ()
    jobs: tuple[ObservedJob, ...] = ()

    def job(self, name: str) -> ObservedJob | None:
        """The managed job named ``name``.

        A name can repeat once a job has finished (the cluster keeps finished jobs for a
        while and the name may be submitted again): the unfinished one wins.
        """
        found = [j for j in self.jobs if j.job == name and j.managed]
        live = [j for j in found if j.phase != "finished"]
        return (live or found)[-1] if found else None

    def by_native_id(self, native_id: str) -> ObservedJob | None:
        """The job the cluster knows as ``native_id`` (e.g. a Slurm job id)."""
        for j in self.jobs:
            if j.native_id == native_id:
                return j
        return None

    def node(self, name: str) -> ObservedNode | None:
        """The node named ``name`` (planner name), if the cluster reported it."""
        for n in self.nodes:
            if n.name == name:
                return n
        return None

    def running(self) -> tuple[ObservedJob, ...]:
        """Jobs running now, managed or not."""
        return tuple(j for j in self.jobs if j.phase == "running")


class ActionResult(Frozen):
    """One thing an executor did, or declined or failed to do, for one job or node.

    ``changed`` is false for no-ops (a ``continue`` of a job already running where the
    plan wants it), which is what makes applying the same slice twice a no-op.
    """

    job: str
    action: ActionKind
    ok: bool
    changed: bool = False
    nodes: tuple[str, ...] = ()
    native_id: str | None = None
    detail: str = ""


class ApplyReport(Frozen):
    """What applying one slice did: every result, and the failures among them."""

    slice_index: int
    at: float
    results: tuple[ActionResult, ...] = ()

    @property
    def failed(self) -> tuple[ActionResult, ...]:
        """Results that did not succeed (refused or failed commands)."""
        return tuple(r for r in self.results if not r.ok)

    @property
    def changed(self) -> tuple[ActionResult, ...]:
        """Results that changed the cluster (empty for a repeated apply)."""
        return tuple(r for r in self.results if r.changed)

    @property
    def ok(self) -> bool:
        """Whether nothing failed."""
        return not self.failed
