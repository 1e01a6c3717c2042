"""``fairshare``: the institute's published design, as a greedy scheduler.

Rules:

- **Order.** Funded work goes first, project by project in ascending order of the
  project's fair-share ratio (delivered allocated time over owed time across the
  lookback window: :func:`planner.fairshare.window_ratios` of the run's ledger, the
  ratio of :func:`~planner.fairshare.standings` alone; ratios are refreshed at every
  ledger charge point, one slice length apart). Inside a project:
  urgent first, then priority, then submit time. Any job that fits idle GPUs starts.
- **Unallocated work** (minimum runtime 0) then fills the GPUs still idle, in the same
  project order; it never preempts.
- **Preemption.** A funded job that does not fit may preempt running work that is past
  its minimum runtime and is either unallocated or resumable work of a project with a
  strictly higher ratio (lower standing). Victims: unallocated work first, then the
  highest ratio, then the least work lost.
- **Contract.** No job is preempted inside its minimum runtime. Non-resumable funded work
  is preempted only by maintenance.
- **Maintenance.** A drained node's jobs move off as their minimum runtime passes (a
  non-resumable job then restarts from scratch: the contract protects only the minimum
  runtime).
"""

from __future__ import annotations

import math
from typing import Any

from planner.scheduler.core import Scheduler, try_place
from planner.scheduler.queues import (
    Shape,
    ShapeQueues,
    VictimIndex,
    rank_by_ratio,
    victim_level,
    victims_may_open,
    within_project,
)
from planner.scheduler.state import JobRun


class FairSharePolicy:
    """Greedy fair-share sort with the minimum-runtime contract."""

    name = "fairshare"

    def __init__(self) -> None:
        # Funded work and unallocated work queue apart, each grouped by project: a pass
        # walks the funded groups, then the unallocated ones.
        self.queue = ShapeQueues(within_project)
        self.free_queue = ShapeQueues(within_project)
        self.ratio: dict[str, float] = {}
        self.order: list[str] = []
        # The cluster's version after the last pass that changed nothing (``None``: the
        # state moved since, or the projects were re-ranked), and the highest victim
        # level of the runs whose contracts ended since (see :meth:`schedule`).
        self._settled: int | None = None
        self._new_level = -math.inf

    def attach(self, engine: Scheduler) -> None:
        self.engine = engine
        self.ratio = {p: 0.0 for p in engine.projects}
        self.order = list(engine.projects)
        self._rank = self._project_rank()
        engine.charge_hooks.append(self._refresh)
        self.victims = VictimIndex(engine, self._level, self._cost)

    def _refresh(self, now: float) -> None:
        """Re-rank projects from the ledger (called at each charge point)."""
        e = self.engine
        self.ratio, self.order = rank_by_ratio(e.projects, e.ratios())
        self._rank = self._project_rank()
        self.victims.invalidate()
        self._settled = None  # other ratios, other victims: the next pass is a full one

    def _project_rank(self) -> dict[str, int]:
        """Each project's place in pass order (the queue groups are projects)."""
        return {p: i for i, p in enumerate(self.order)}

    def enqueue(self, run: JobRun) -> None:
        (self.queue if run.job.allocated else self.free_queue).push(run.job.project, run)

    def on_wake(self, tag: Any, now: float) -> None:
        pass

    def on_contract_end(self, run: JobRun, now: float) -> None:
        self._new_level = max(self._new_level, self._level(run))
        if any(n in self.engine.cluster.drained for n in run.nodes):
            self.engine.preempt(run, "maintenance")

    def on_drain(self, node: str, now: float) -> None:
        e = self.engine
        for i in sorted(e.cluster.jobs_on[node]):
            run = e.runs[i]
            if run.status == "running" and e.past_contract(run):
                e.preempt(run, "maintenance")

    def on_finish(self, run: JobRun) -> None:
        pass

    def extra_summary(self) -> dict[str, Any]:
        return {}

    # -- scheduling --------------------------------------------------------------------

    def _level(self, v: JobRun) -> float:
        """Victim level: a funded requester of ratio r may preempt v when level > r."""
        return victim_level(self.engine, self.ratio, v)

    def _cost(self, v: JobRun) -> float:
        # Unallocated first, then lower standing (higher ratio), then least work lost.
        lost = 0.0 if v.job.resumable else v.done_work(self.engine.now) * v.job.gpus
        tier = 0.0 if not v.charged else 1e15 - min(self.ratio[v.job.project], 1e3) * 1e11
        return tier + min(lost, 1e10)

    def _try(self, run: JobRun, allow_preempt: bool) -> bool:
        e = self.engine
        # Every run with a minimum runtime is protected for it here (funded or not).
        contract = run.job.min_runtime
        placed = try_place(e, run, contract=contract)
        ratio = self.ratio[run.job.project]
        if (placed is None and allow_preempt and run.job.allocated and e.preemptible_gpus > 0
                and victims_may_open(e, self.ratio, run.job, ratio)):
            found = self.victims.find(run, ratio, exclude=e.fenced(contract))
            if found is not None:
                for v in found[1]:
                    e.preempt(v, f"fair share: {run.job.id} ({run.job.project})")
                placed = try_place(e, run, contract=contract)
        if placed is None:
            return False
        e.start(run, *placed, charged=run.job.allocated,
                detail="charged" if run.job.allocated else "unallocated")
        return True

    def schedule(self, now: float, dirty: bool, new: list[JobRun]) -> None:
        e = self.engine
        if not dirty:
            # Only submissions happened: the last pass left nothing that fits, so only
            # the new jobs can start (each at its own rank), funded work first as in a
            # full pass: free work started first would be the victim of funded work
            # submitted at the same instant, a run of no length.
            order = sorted(new, key=lambda r: (not r.job.allocated, self.ratio[r.job.project],
                                               within_project(r)))
            for run in order:
                if run.status == "queued":
                    self._try(run, allow_preempt=True)
            return
        cl = e.cluster
        version = cl.version
        # Since a pass that changed nothing, no GPU was freed and no project re-ranked
        # (the version and ``_settled`` say so): what failed then fails again, and only
        # runs whose contracts ended since are new victims. Funded work of a project
        # whose ratio is at least their level cannot take them, nor can unallocated work
        # (it never preempts), so the pass stops before those groups, unless it changes
        # something on the way (then it goes on as a full pass). Jobs submitted in this
        # step were never tried: then the pass is a full one.
        limit = self._new_level if self._settled == version and not new else math.inf
        self._new_level = -math.inf
        if limit > -math.inf:
            self._pass(limit)
        self._settled = cl.version if cl.version == version else None

    def _pass(self, limit: float) -> None:
        """The greedy pass over funded, then unallocated work; while nothing has changed,
        only over the funded groups whose ratio is below ``limit``."""
        e = self.engine
        cl = e.cluster
        version = cl.version
        if cl.total_free == 0 and e.preemptible_gpus == 0:
            return
        rank = self._rank
        ratio = self.ratio
        for funded, queue in ((True, self.queue), (False, self.free_queue)):
            if not funded and limit < math.inf and cl.version == version:
                return  # nothing freed: unallocated work fails as it did
            groups = queue.groups
            # Shapes that failed this pass: no hole on idle GPUs, and (funded) no victims
            # at this project's ratio or any later project's (a higher one), so they fail
            # for every project after it too.
            dead: set[Shape] = set()
            # The groups in pass order that have work (most projects have none queued
            # at a time); a preempted victim may bring work back to a later one.
            live = queue.with_work(rank)
            revived = queue.revived
            i = 0
            while i < len(live):
                at, key = live[i]
                i += 1
                if funded and ratio[str(key)] >= limit and cl.version == version:
                    return  # the rest fail as they did: no new victim is above them
                shapes = groups.get(key)
                if not shapes or shapes.keys() <= dead:
                    continue  # nothing queued, or only shapes that already failed
                for shape, run in queue.iter_group(e, key, dead):
                    started = self._try(run, allow_preempt=funded)
                    if queue.revived != revived:
                        revived = queue.revived
                        del live[i:]
                        live += queue.with_work(rank, at)
                    if started:
                        continue
                    dead.add(shape)
                    if cl.total_free == 0 and e.preemptible_gpus == 0:
                        return
